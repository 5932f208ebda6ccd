// LR schedules against literal values worked out by hand from torch.optim.lr_scheduler's closed forms: constant,
// StepLR, linear warm-up then cosine annealing (SequentialLR semantics), and option checks.
#include "trainer/optim/lr_schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <utility>
#include <vector>

namespace onnxamp::trainer {
namespace {

using ::testing::HasSubstr;

LrSchedule Make(const LrScheduleOptions& options) {
  StatusOr<LrSchedule> s = LrSchedule::Create(options);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

TEST(OptimLrScheduleTest, ConstantIsTheBaseRate) {
  LrScheduleOptions o;
  o.base_lr = 3e-4;
  LrSchedule s = Make(o);
  EXPECT_EQ(s.LrAt(0), 3e-4);
  EXPECT_EQ(s.LrAt(123456789), 3e-4);
}

TEST(OptimLrScheduleTest, StepDecaysEveryStepSizeSteps) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kStep;
  o.base_lr = 0.1;
  o.step_size = 3;
  o.gamma = 0.1;
  LrSchedule s = Make(o);
  EXPECT_EQ(s.LrAt(0), 0.1);
  EXPECT_EQ(s.LrAt(2), 0.1);
  EXPECT_EQ(s.LrAt(3), 0.1 * 0.1);  // 0.010000000000000002, as Python's 0.1 * 0.1 ** 1
  EXPECT_EQ(s.LrAt(5), 0.1 * 0.1);
  EXPECT_DOUBLE_EQ(s.LrAt(6), 0.001);  // 0.1 * 0.1 ** 2
}

TEST(OptimLrScheduleTest, WarmupThenCosine) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kCosine;
  o.base_lr = 0.1;
  o.warmup_steps = 4;
  o.warmup_start_factor = 0.25;
  o.total_steps = 14;  // cosine over the 10 steps after the warm-up
  o.min_lr = 0.0;
  LrSchedule s = Make(o);
  // Warm-up: 0.1 * (0.25 + 0.75 * t / 4).
  EXPECT_DOUBLE_EQ(s.LrAt(0), 0.025);
  EXPECT_DOUBLE_EQ(s.LrAt(1), 0.04375);
  EXPECT_DOUBLE_EQ(s.LrAt(2), 0.0625);
  EXPECT_DOUBLE_EQ(s.LrAt(3), 0.08125);
  // Cosine restarted at the milestone: 0.05 * (1 + cos(pi * t / 10)).
  EXPECT_DOUBLE_EQ(s.LrAt(4), 0.1);
  EXPECT_DOUBLE_EQ(s.LrAt(6), 0.09045084971874738);  // t = 2
  EXPECT_NEAR(s.LrAt(9), 0.05, 1e-17);               // t = 5: cos(pi / 2)
  EXPECT_NEAR(s.LrAt(13), 0.05 * (1 + std::cos(std::numbers::pi * 0.9)), 1e-15);
  EXPECT_EQ(s.LrAt(14), 0.0);
  EXPECT_EQ(s.LrAt(1000), 0.0);  // stays at min_lr
}

TEST(OptimLrScheduleTest, CosineToAMinimumWithoutWarmup) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kCosine;
  o.base_lr = 1.0;
  o.min_lr = 0.1;
  o.total_steps = 4;
  LrSchedule s = Make(o);
  EXPECT_EQ(s.LrAt(0), 1.0);
  EXPECT_DOUBLE_EQ(s.LrAt(1), 0.1 + 0.9 * (1 + std::sqrt(0.5)) / 2);
  EXPECT_DOUBLE_EQ(s.LrAt(2), 0.55);
  EXPECT_EQ(s.LrAt(4), 0.1);
}

// Cosine with hard restarts: transformers' get_cosine_with_hard_restarts_schedule_with_warmup, whose factor after
// the warm-up is 0.5 * (1 + cos(pi * ((cycles * t / T) % 1))), here with a minimum; every cycle starts at the base
// rate again, and cycles = 1 is the plain cosine, bit for bit.
TEST(OptimLrScheduleTest, CosineWithHardRestarts) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kCosine;
  o.base_lr = 0.1;
  o.min_lr = 0.01;
  o.warmup_steps = 2;
  o.total_steps = 14;  // T = 12
  o.cycles = 3;        // cycles of 4 steps
  LrSchedule s = Make(o);
  for (int64_t t = 0; t < 12; ++t) {
    const double progress = static_cast<double>(t) / 12.0;
    const double factor = 0.5 * (1.0 + std::cos(std::numbers::pi * std::fmod(3.0 * progress, 1.0)));
    EXPECT_NEAR(s.LrAt(2 + t), 0.01 + 0.09 * factor, 1e-16) << t;
  }
  EXPECT_EQ(s.LrAt(2), 0.1);
  EXPECT_EQ(s.LrAt(6), 0.1);  // the second cycle restarts at the base rate
  EXPECT_EQ(s.LrAt(10), 0.1);
  EXPECT_DOUBLE_EQ(s.LrAt(4), 0.055);  // half way through the first cycle
  EXPECT_EQ(s.LrAt(14), 0.01);
  // One cycle is CosineAnnealingLR's closed form, bit for bit.
  LrScheduleOptions one = o;
  one.cycles = 1;
  const LrSchedule plain = Make(one);
  for (int64_t t = 0; t < 12; ++t) {
    EXPECT_EQ(plain.LrAt(2 + t), 0.01 + (0.1 - 0.01) * (1.0 + std::cos(std::numbers::pi * t / 12.0)) / 2.0) << t;
  }
  // Cycles of uneven length (12 steps in 5 cycles) still restart 5 times: where (t * 5) mod 12 wraps.
  o.cycles = 5;
  LrSchedule uneven = Make(o);
  int restarts = 0;
  for (int64_t t = 0; t < 12; ++t) restarts += uneven.LrAt(2 + t) == 0.1;
  EXPECT_EQ(restarts, 1);  // only t = 0 lands on a cycle start exactly; the others start between steps
  double last = 1.0;
  int rises = 0;
  for (int64_t t = 0; t < 12; ++t) {
    const double lr = uneven.LrAt(2 + t);
    rises += lr > last;
    last = lr;
  }
  EXPECT_EQ(rises, 4);
}

// Polynomial decay: transformers' get_polynomial_decay_schedule_with_warmup (lr_end = min_lr), and with power 1 the
// linear decay to the same end.
TEST(OptimLrScheduleTest, PolynomialDecay) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kPolynomial;
  o.base_lr = 0.1;
  o.min_lr = 0.001;
  o.warmup_steps = 2;
  o.total_steps = 12;  // T = 10
  o.power = 2.0;
  LrSchedule s = Make(o);
  for (int64_t t = 0; t < 10; ++t) {
    const double remaining = 1.0 - static_cast<double>(t) / 10.0;
    EXPECT_EQ(s.LrAt(2 + t), (0.1 - 0.001) * std::pow(remaining, 2.0) + 0.001) << t;
  }
  EXPECT_EQ(s.LrAt(12), 0.001);
  EXPECT_EQ(s.LrAt(500), 0.001);
  o.power = 1.0;
  LrScheduleOptions linear = o;
  linear.kind = LrScheduleKind::kLinear;
  for (int64_t t = 0; t < 14; ++t) EXPECT_NEAR(Make(o).LrAt(t), Make(linear).LrAt(t), 1e-15) << t;
  o.power = 0.0;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("power must be finite and > 0, got 0"));
  o.power = 1.0;
  o.min_lr = 0.5;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("polynomial decays from the base rate"));
}

// Warmup-stable-decay: the warm-up, the base rate, then the decaying schedule over the last decay_steps steps only.
TEST(OptimLrScheduleTest, WarmupStableDecay) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kCosine;
  o.base_lr = 0.1;
  o.min_lr = 0.01;
  o.warmup_steps = 2;
  o.total_steps = 12;  // 10 after the warm-up: 6 stable, 4 decaying
  o.decay_steps = 4;
  LrSchedule s = Make(o);
  LrScheduleOptions plain = o;
  plain.decay_steps = 0;
  plain.warmup_steps = 0;
  plain.total_steps = 4;  // the plain cosine over the decay's 4 steps
  const LrSchedule decay = Make(plain);
  EXPECT_EQ(s.LrAt(0), Make(o).LrAt(0));
  EXPECT_LT(s.LrAt(1), 0.1);  // warming up
  for (int64_t step = 2; step < 8; ++step) EXPECT_EQ(s.LrAt(step), 0.1) << step;
  for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(s.LrAt(8 + k), decay.LrAt(k)) << k;
  EXPECT_EQ(s.LrAt(12), 0.01);
  o.kind = LrScheduleKind::kLinear;
  const LrSchedule linear = Make(o);
  EXPECT_EQ(linear.LrAt(7), 0.1);
  EXPECT_DOUBLE_EQ(linear.LrAt(10), 0.1 * (1.0 + (0.1 - 1.0) * 2.0 / 4.0));
  o.decay_steps = 11;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("decay_steps must be in [0, 10]"));
  o.kind = LrScheduleKind::kConstant;
  o.decay_steps = 3;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("need a decaying schedule"));
  o.kind = LrScheduleKind::kCosine;
  o.cycles = 4;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("cycles (4) must not exceed decay_steps (3)"));
}

// Inverse square root: transformers' get_inverse_sqrt_schedule after the warm-up, its timescale the warm-up's length
// by default.
TEST(OptimLrScheduleTest, InverseSqrt) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kInverseSqrt;
  o.base_lr = 0.1;
  o.warmup_steps = 4;
  LrSchedule s = Make(o);
  for (int64_t step = 4; step < 40; ++step) {
    // transformers: lr_lambda = 1 / sqrt((step + shift) / timescale), shift = timescale - warmup, timescale = warmup.
    const double shift = 4.0 - 4.0;
    EXPECT_EQ(s.LrAt(step), 0.1 * (1.0 / std::sqrt((static_cast<double>(step) + shift) / 4.0))) << step;
  }
  EXPECT_EQ(s.LrAt(4), 0.1);
  EXPECT_DOUBLE_EQ(s.LrAt(8), 0.1 / std::sqrt(2.0));
  o.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(Make(o).LrAt(10000), 0.1 / std::sqrt(2.0));  // the default timescale without a warm-up
  o.timescale = 100;
  EXPECT_DOUBLE_EQ(Make(o).LrAt(300), 0.05);
  o.timescale = -1;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("timescale must be >= 0"));
  o.timescale = 0;
  o.decay_steps = 5;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("need a decaying schedule"));
  LrScheduleOptions cosine;
  cosine.kind = LrScheduleKind::kCosine;
  cosine.total_steps = 10;
  cosine.timescale = 3;
  EXPECT_THAT(LrSchedule::Create(cosine).status().message(),
              HasSubstr("a timescale (3) needs the inverse_sqrt schedule, not cosine"));
}

// Values of torch 1.13's SequentialLR([LinearLR(opt, 0.25, 1.0, total_iters=4), LinearLR(opt, 1.0, 0.01 / 0.1,
// total_iters=10)], milestones=[4]) on SGD(lr=0.1), printed with repr. They come from its recursive form; the closed
// form computed here equals them at t = 1 and 2 after the warm-up and is within 4 ulps elsewhere.
TEST(OptimLrScheduleTest, WarmupThenLinearDecayAsPyTorch) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kLinear;
  o.base_lr = 0.1;
  o.warmup_steps = 4;
  o.warmup_start_factor = 0.25;
  o.total_steps = 14;  // the decay over the 10 steps after the warm-up
  o.min_lr = 0.01;
  LrSchedule s = Make(o);
  EXPECT_DOUBLE_EQ(s.LrAt(0), 0.025);
  EXPECT_DOUBLE_EQ(s.LrAt(3), 0.08125000000000002);
  EXPECT_EQ(s.LrAt(4), 0.1);
  EXPECT_EQ(s.LrAt(5), 0.09100000000000001);
  EXPECT_EQ(s.LrAt(6), 0.08200000000000002);
  EXPECT_DOUBLE_EQ(s.LrAt(12), 0.02800000000000001);
  EXPECT_DOUBLE_EQ(s.LrAt(13), 0.01900000000000001);
  // From the last step on, min_lr exactly (PyTorch's recursion ends at 0.010000000000000007).
  EXPECT_EQ(s.LrAt(14), 0.01);
  EXPECT_EQ(s.LrAt(1000), 0.01);
}

TEST(OptimLrScheduleTest, LinearDecayToZeroWithoutWarmup) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kLinear;
  o.base_lr = 2e-5;
  o.total_steps = 4;
  LrSchedule s = Make(o);
  EXPECT_EQ(s.LrAt(0), 2e-5);
  EXPECT_DOUBLE_EQ(s.LrAt(1), 1.5e-5);
  EXPECT_DOUBLE_EQ(s.LrAt(2), 1e-5);
  EXPECT_EQ(s.LrAt(4), 0.0);
  o.base_lr = 0.0;
  EXPECT_EQ(Make(o).LrAt(1), 0.0);
}

TEST(OptimLrScheduleTest, WarmupThenConstant) {
  LrScheduleOptions o;
  o.base_lr = 0.3;
  o.warmup_steps = 3;  // LinearLR's default start factor 1/3
  LrSchedule s = Make(o);
  EXPECT_DOUBLE_EQ(s.LrAt(0), 0.1);
  EXPECT_DOUBLE_EQ(s.LrAt(1), 0.3 * (1.0 / 3 + 2.0 / 9));
  EXPECT_EQ(s.LrAt(3), 0.3);
}

// ReduceLROnPlateau, worked out by hand from torch's step() (and checked against torch 1.13's
// ReduceLROnPlateau, the sequences here and below): patience 2 means the third evaluation in a row without
// an improvement of more than 1e-4 relative lowers the rate; the counter restarts after a reduction.
TEST(OptimLrScheduleTest, PlateauReducesAfterPatienceEvaluationsWithoutImprovement) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kPlateau;
  o.base_lr = 0.1;
  o.gamma = 0.5;
  o.patience = 2;
  o.warmup_steps = 4;
  LrSchedule s = Make(o);
  EXPECT_EQ(s.LrAt(0), 0.1 * (1.0 / 3.0));  // the warm-up as for every schedule
  EXPECT_EQ(s.LrAt(4), 0.1);
  // 1.0 (best), 0.99995 (within the threshold: bad 1), 1.0 (bad 2), 0.5 (best), 0.6, 0.6, 0.7 (bad 3: reduce).
  const std::vector<std::pair<double, bool>> evals = {{1.0, false}, {0.99995, false}, {1.0, false}, {0.5, false},
                                                      {0.6, false}, {0.6, false},     {0.7, true}};
  for (const auto& [metric, reduces] : evals) EXPECT_EQ(s.ReportMetric(metric), reduces) << metric;
  EXPECT_EQ(s.LrAt(4), 0.05);
  EXPECT_EQ(s.LrAt(1000), 0.05);
  EXPECT_EQ(s.LrAt(1), 0.1 * (1.0 / 3.0 + (2.0 / 3.0) / 4.0));  // the warm-up is not scaled
  EXPECT_EQ(s.plateau().best, 0.5);
  EXPECT_EQ(s.plateau().num_bad_epochs, 0);
  EXPECT_EQ(s.plateau().reductions, 1);
  // A NaN is no improvement; 0.49 is (below 0.5 * (1 - 1e-4)).
  EXPECT_FALSE(s.ReportMetric(std::nan("")));
  EXPECT_EQ(s.plateau().num_bad_epochs, 1);
  EXPECT_FALSE(s.ReportMetric(0.49));
  EXPECT_EQ(s.plateau().num_bad_epochs, 0);
  EXPECT_EQ(s.plateau().best, 0.49);
}

TEST(OptimLrScheduleTest, PlateauCooldownFloorAndMaximize) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kPlateau;
  o.base_lr = 1.0;
  o.gamma = 0.1;
  o.patience = 0;  // every evaluation without an improvement reduces...
  o.cooldown = 2;  // ...except the two after a reduction
  o.min_lr = 0.05;
  o.maximize = true;
  o.threshold = 0.0;
  LrSchedule s = Make(o);
  EXPECT_FALSE(s.ReportMetric(0.5));  // best
  EXPECT_TRUE(s.ReportMetric(0.5));   // not above: reduce to 0.1
  EXPECT_EQ(s.LrAt(0), 0.1);
  EXPECT_FALSE(s.ReportMetric(0.4));  // cooldown
  EXPECT_FALSE(s.ReportMetric(0.4));  // cooldown
  EXPECT_TRUE(s.ReportMetric(0.4));   // reduce to max(0.01, 0.05)
  EXPECT_EQ(s.LrAt(0), 0.05);
  EXPECT_FALSE(s.ReportMetric(0.6));  // better (max mode), and the cooldown's second evaluation
  EXPECT_EQ(s.plateau().best, 0.6);
  EXPECT_FALSE(s.ReportMetric(0.6));  // not better: bad, but in the cooldown's last evaluation
  // Not better, out of the cooldown: a reduction, which at the floor changes nothing and is not reported; the
  // cooldown restarts all the same (torch's step() sets it after _reduce_lr whether or not the rate moved).
  EXPECT_FALSE(s.ReportMetric(0.6));
  EXPECT_EQ(s.plateau().cooldown_counter, 2);
  EXPECT_FALSE(s.ReportMetric(0.1));
  EXPECT_EQ(s.plateau().cooldown_counter, 1);
  EXPECT_EQ(s.LrAt(0), 0.05);
  EXPECT_EQ(s.plateau().reductions, 2);
  // An infinite first metric is no better than torch's initial +inf: the best stays unset (and finite once set).
  LrSchedule fresh = Make(LrScheduleOptions{.kind = LrScheduleKind::kPlateau});
  EXPECT_FALSE(fresh.ReportMetric(HUGE_VAL));
  EXPECT_FALSE(fresh.plateau().best.has_value());
  EXPECT_EQ(fresh.plateau().num_bad_epochs, 1);
}

TEST(OptimLrScheduleTest, PlateauStateRestoresAndOtherKindsIgnoreMetrics) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kPlateau;
  o.base_lr = 0.1;
  LrSchedule s = Make(o);
  PlateauState p;
  p.lr = 0.01;
  p.best = 0.25;
  p.num_bad_epochs = 3;
  p.cooldown_counter = 1;
  p.reductions = 1;
  ASSERT_TRUE(s.RestorePlateau(p).ok());
  EXPECT_EQ(s.LrAt(7), 0.01);
  EXPECT_EQ(s.plateau().num_bad_epochs, 3);
  p.lr = 0.2;
  EXPECT_THAT(s.RestorePlateau(p).message(), HasSubstr("the plateau's rate must be in [0, base_lr = 0.1], got 0.2"));
  p.lr = 0.01;
  p.best = std::nan("");
  EXPECT_THAT(s.RestorePlateau(p).message(), HasSubstr("best metric must be finite"));
  p.best.reset();
  p.cooldown_counter = -1;
  EXPECT_THAT(s.RestorePlateau(p).message(), HasSubstr("negative plateau counters"));
  EXPECT_EQ(s.LrAt(7), 0.01);  // unchanged by the failed restores
  LrSchedule constant = Make({});
  EXPECT_FALSE(constant.ReportMetric(1.0));
  EXPECT_FALSE(constant.ReportMetric(2.0));
  EXPECT_EQ(constant.LrAt(3), 1e-3);
  o.gamma = 1.0;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("plateau's factor (gamma) must be in [0, 1), got 1"));
  o.gamma = 0.5;
  o.patience = -1;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("patience and cooldown must be >= 0"));
  o.patience = 1;
  o.threshold = -1;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("threshold"));
}

TEST(OptimLrScheduleTest, RejectsBadOptions) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kCosine;
  o.total_steps = 10;
  o.warmup_steps = 10;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("total_steps"));
  o = {};
  o.base_lr = -1;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("base_lr"));
  o = {};
  o.kind = LrScheduleKind::kStep;
  o.step_size = 0;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("step_size"));
  o = {};
  o.warmup_steps = 5;
  o.warmup_start_factor = 0.0;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("start factor"));
  o = {};
  o.kind = LrScheduleKind::kLinear;
  o.total_steps = 3;
  o.warmup_steps = 3;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("linear needs total_steps (3)"));
  o.warmup_steps = 0;
  o.base_lr = 0.1;
  o.min_lr = 0.2;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("must not be larger"));
  o.min_lr = 0;
  o.cycles = 2;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("cycles (2) need the cosine schedule, not linear"));
  o.kind = LrScheduleKind::kCosine;
  o.cycles = 4;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("cycles must be in [1, 3]"));
  o.cycles = 0;
  EXPECT_THAT(LrSchedule::Create(o).status().message(), HasSubstr("cycles must be in [1, 3]"));
}

}  // namespace
}  // namespace onnxamp::trainer
