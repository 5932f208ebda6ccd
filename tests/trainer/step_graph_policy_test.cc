// The host side of CUDA Graph capture of the training step: when a step is captured, replayed, re-captured or run
// eagerly (trainer/step_graph_policy.h), and the device's RNG-step mixing that a replayed Dropout relies on. No GPU.
#include "trainer/step_graph_policy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/random.h"
#include "runtime/ops/dropout/dropout_mask.h"

namespace onnxamp::trainer {
namespace {

StepGraphKey Key(std::vector<int64_t> rows, uint64_t generation = 0) {
  StepGraphKey k;
  k.rows = std::move(rows);
  k.generation = generation;
  return k;
}

// Runs eager steps of `key` (as the policy asks) until it asks for a capture; returns how many ran eagerly.
int WarmUp(StepGraphPolicy& p, const StepGraphKey& key, int limit = 10) {
  int eager = 0;
  while (eager < limit && p.Next(key, "") == StepGraphAction::kEager) {
    p.RanEager(key, /*planned=*/true);
    ++eager;
  }
  return eager;
}

TEST(StepGraphPolicyTest, ModeNames) {
  for (CudaGraphMode m : {CudaGraphMode::kOff, CudaGraphMode::kOn, CudaGraphMode::kAuto}) {
    StatusOr<CudaGraphMode> back = CudaGraphModeFromName(CudaGraphModeName(m));
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, m);
  }
  StatusOr<CudaGraphMode> bad = CudaGraphModeFromName("yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--cuda-graph yes: expected on, off or auto"), std::string::npos)
      << bad.status().message();
}

TEST(StepGraphPolicyTest, OffRunsEveryStepEagerly) {
  StepGraphPolicy p(CudaGraphMode::kOff);
  const StepGraphKey k = Key({16});
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(p.Next(k, ""), StepGraphAction::kEager);
    p.RanEager(k, true);
  }
  EXPECT_TRUE(p.TakeNotices().empty());
  EXPECT_EQ(p.stats().captures, 0);
  EXPECT_EQ(p.stats().eager_steps, 10);
}

TEST(StepGraphPolicyTest, WarmsUpThenCapturesOnceAndReplays) {
  StepGraphPolicy p(CudaGraphMode::kOn, /*warmup=*/2);
  const StepGraphKey k = Key({16});
  EXPECT_EQ(WarmUp(p, k), 2);
  ASSERT_EQ(p.Next(k, ""), StepGraphAction::kCapture);
  p.Captured(k);
  p.Replayed();
  EXPECT_TRUE(p.HasGraphFor(k));
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(p.Next(k, ""), StepGraphAction::kReplay) << i;
    p.Replayed();
  }
  EXPECT_EQ(p.stats().captures, 1);
  EXPECT_EQ(p.stats().replays, 6);
  EXPECT_EQ(p.stats().eager_steps, 2);
  EXPECT_TRUE(p.TakeNotices().empty());
}

TEST(StepGraphPolicyTest, OnlyPlannedEagerStepsCountAsWarmUp) {
  StepGraphPolicy p(CudaGraphMode::kAuto, /*warmup=*/2);
  const StepGraphKey k = Key({8});
  // The first run with new shapes allocates outside the plan (it makes the plan): it does not count.
  ASSERT_EQ(p.Next(k, ""), StepGraphAction::kEager);
  p.RanEager(k, /*planned=*/false);
  ASSERT_EQ(p.Next(k, ""), StepGraphAction::kEager);
  p.RanEager(k, true);
  ASSERT_EQ(p.Next(k, ""), StepGraphAction::kEager);
  p.RanEager(k, true);
  EXPECT_EQ(p.Next(k, ""), StepGraphAction::kCapture);
  // An unplanned step in between starts the warm-up again.
  StepGraphPolicy q(CudaGraphMode::kAuto, 2);
  q.RanEager(k, true);
  q.RanEager(k, false);
  q.RanEager(k, true);
  EXPECT_EQ(q.Next(k, ""), StepGraphAction::kEager);
}

TEST(StepGraphPolicyTest, APartialBatchRunsEagerlyAndDropsTheGraph) {
  StepGraphPolicy p(CudaGraphMode::kOn, 2);
  const StepGraphKey full = Key({16});
  const StepGraphKey partial = Key({5});
  WarmUp(p, full);
  ASSERT_EQ(p.Next(full, ""), StepGraphAction::kCapture);
  p.Captured(full);
  p.Replayed();
  // The epoch's last batch: other shapes, never warmed up: eager, and the graph goes (its run may have changed the
  // kernels' cached tables the graph reads).
  ASSERT_EQ(p.Next(partial, ""), StepGraphAction::kEager);
  p.RanEager(partial, true);
  EXPECT_FALSE(p.has_graph());
  // The next epoch warms up and captures again.
  EXPECT_EQ(WarmUp(p, full), 2);
  EXPECT_EQ(p.Next(full, ""), StepGraphAction::kCapture);
  // Shapes that repeat (every batch partial) are captured for themselves.
  StepGraphPolicy q(CudaGraphMode::kOn, 1);
  EXPECT_EQ(WarmUp(q, partial), 1);
  EXPECT_EQ(q.Next(partial, ""), StepGraphAction::kCapture);
}

TEST(StepGraphPolicyTest, ANewGenerationRecapturesAtOnce) {
  StepGraphPolicy p(CudaGraphMode::kOn, 2);
  WarmUp(p, Key({16}, 3));
  ASSERT_EQ(p.Next(Key({16}, 3), ""), StepGraphAction::kCapture);
  p.Captured(Key({16}, 3));
  p.Replayed();
  ASSERT_EQ(p.Next(Key({16}, 3), ""), StepGraphAction::kReplay);
  p.Replayed();
  // The optimizer's scalar table grew (or the scaler was restored): the same shapes, another generation.
  EXPECT_FALSE(p.HasGraphFor(Key({16}, 4)));
  EXPECT_EQ(p.Next(Key({16}, 4), ""), StepGraphAction::kCapture);
}

TEST(StepGraphPolicyTest, BlockersAreNoticedOnceUnderOnAndSilentUnderAuto) {
  StepGraphPolicy on(CudaGraphMode::kOn, 1);
  StepGraphPolicy automatic(CudaGraphMode::kAuto, 1);
  const StepGraphKey k = Key({8, 8});
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(on.Next(k, "gradient accumulation: --accumulate > 1"), StepGraphAction::kEager);
    on.RanEager(k, true);
    EXPECT_EQ(automatic.Next(k, "gradient accumulation: --accumulate > 1"), StepGraphAction::kEager);
    automatic.RanEager(k, true);
  }
  const std::vector<std::string> notices = on.TakeNotices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].find("gradient accumulation"), std::string::npos) << notices[0];
  EXPECT_TRUE(on.TakeNotices().empty());
  EXPECT_TRUE(automatic.TakeNotices().empty());
  // A step without the blocker may be captured once warmed up.
  EXPECT_EQ(on.Next(k, ""), StepGraphAction::kCapture);
}

TEST(StepGraphPolicyTest, FailedCapturesFallBackWithANoticeAndGiveUp) {
  StepGraphPolicy p(CudaGraphMode::kAuto, /*warmup=*/1, /*max_failures=*/2);
  const StepGraphKey k = Key({16});
  for (int attempt = 1; attempt <= 2; ++attempt) {
    // The step of a failed capture runs eagerly on the plan: it is the warm-up of the next try.
    EXPECT_EQ(WarmUp(p, k), attempt == 1 ? 1 : 0) << attempt;
    ASSERT_EQ(p.Next(k, ""), StepGraphAction::kCapture) << attempt;
    p.CaptureFailed("cudaStreamEndCapture: operation not permitted when stream is capturing");
    p.RanEager(k, true);  // the step itself ran eagerly
    const std::vector<std::string> notices = p.TakeNotices();
    ASSERT_EQ(notices.size(), 1u);
    EXPECT_NE(notices[0].find("capture failed (cudaStreamEndCapture"), std::string::npos) << notices[0];
    EXPECT_EQ(notices[0].find("every later step") != std::string::npos, attempt == 2) << notices[0];
  }
  EXPECT_TRUE(p.gave_up());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(p.Next(k, ""), StepGraphAction::kEager);
    p.RanEager(k, true);
  }
  EXPECT_EQ(p.stats().failed_captures, 2);
  EXPECT_EQ(p.stats().captures, 0);
  EXPECT_NE(p.stats().last_failure.find("cudaStreamEndCapture"), std::string::npos);
}

// A replayed Dropout mixes the device-resident RNG step into its base seed with DropoutSeedForStep; an eager run
// mixes the host's with SeedForStep. Both must give the same seeds for the masks to match.
TEST(StepGraphPolicyTest, TheDeviceRngStepMixesAsTheHostDoes) {
  const uint64_t bases[] = {0, 1, 42, 0x9e3779b97f4a7c15ull, ~uint64_t{0}};
  const uint64_t steps[] = {0, 1, 2, 3, 17, 1000003, uint64_t{1} << 40, ~uint64_t{0}};
  for (uint64_t base : bases) {
    for (uint64_t step : steps) {
      EXPECT_EQ(ops::DropoutSeedForStep(base, step), SeedForStep(base, step)) << base << " " << step;
    }
  }
  EXPECT_NE(ops::DropoutSeedForStep(42, 1), ops::DropoutSeedForStep(42, 2));
}

}  // namespace
}  // namespace onnxamp::trainer
