// Learning-rate schedules: constant, step, cosine, linear, polynomial and inverse-square-root decay, each optionally
// after a linear warm-up, a pure function of the number of optimizer steps taken in the closed forms of
// torch.optim.lr_scheduler; and ReduceLROnPlateau, which also follows the validation metric it is given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/common/status.h"

namespace onnxamp::trainer {

enum class LrScheduleKind {
  kConstant,  // base_lr
  kStep,      // StepLR: base_lr * gamma ** (t // step_size)
  // CosineAnnealingLR: min_lr + (base_lr - min_lr) * (1 + cos(pi * t / T)) / 2, T = total_steps - warmup; with
  // cycles > 1, hard restarts: the angle is pi * ((t * cycles) mod T) / T, so that the rate returns to base_lr
  // `cycles` times (transformers' get_cosine_with_hard_restarts_schedule_with_warmup; CosineAnnealingWarmRestarts
  // with T_0 = T / cycles, T_mult 1, when cycles divides T).
  kCosine,
  // LinearLR(start_factor=1, end_factor=min_lr / base_lr, total_iters=T): base_lr * (1 + (end_factor - 1) * t / T),
  // T as for kCosine; with min_lr 0 the linear decay of transformers' get_linear_schedule_with_warmup.
  kLinear,
  // (base_lr - min_lr) * (1 - t / T) ** power + min_lr, T as for kCosine: transformers'
  // get_polynomial_decay_schedule_with_warmup (lr_end = min_lr), torch's PolynomialLR with min_lr 0.
  kPolynomial,
  // base_lr * sqrt(timescale / (t + timescale)) after the warm-up, never reaching a floor: transformers'
  // get_inverse_sqrt_schedule (its 1 / sqrt((step + shift) / timescale) with shift = timescale - warmup).
  kInverseSqrt,
  // ReduceLROnPlateau(mode, factor=gamma, patience, threshold, threshold_mode="rel", cooldown, min_lr): base_lr
  // after the warm-up, multiplied by gamma (floored at min_lr) when ReportMetric has seen more than `patience`
  // evaluations in a row without a relative improvement of `threshold` on the best so far; after a reduction,
  // `cooldown` evaluations count as neither good nor bad. Not a function of the step alone: its PlateauState goes
  // into checkpoints.
  kPlateau,
};

struct LrScheduleOptions {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  double base_lr = 1e-3;
  // kStep.
  int64_t step_size = 1;
  double gamma = 0.1;
  // kCosine, kLinear: the schedule reaches min_lr after total_steps steps (warm-up included) and stays there.
  int64_t total_steps = 0;
  double min_lr = 0.0;
  int64_t cycles = 1;  // kCosine: cosine cycles over T (1 to T); other kinds: 1
  double power = 1.0;  // kPolynomial: the exponent (finite, > 0); other kinds: 1
  // kCosine, kLinear, kPolynomial: > 0 holds the base rate after the warm-up and decays over the last decay_steps
  // steps only (warmup-stable-decay: transformers' get_wsd_schedule with that decay; min_lr is its floor); 0 decays
  // over every step after the warm-up.
  int64_t decay_steps = 0;
  // kInverseSqrt: the steps over which the rate falls to base_lr / sqrt(2); 0 takes transformers' default, the
  // warm-up's length or 10000 without one.
  int64_t timescale = 0;
  // Linear warm-up over the first warmup_steps steps (0: none): LinearLR(start_factor, end_factor=1,
  // total_iters=warmup_steps), followed by the schedule above restarted at t = 0, as SequentialLR([LinearLR, ...],
  // milestones=[warmup_steps]) does. start_factor in (0, 1], LinearLR's default 1/3.
  int64_t warmup_steps = 0;
  double warmup_start_factor = 1.0 / 3.0;
  // kPlateau (defaults: ReduceLROnPlateau's; gamma, in [0, 1), is its factor and min_lr its floor).
  int64_t patience = 10;
  int64_t cooldown = 0;
  double threshold = 1e-4;
  bool maximize = false;  // mode "max" (an accuracy); else "min" (a loss)
};

// ReduceLROnPlateau's state, under the names of its state_dict where it has them.
struct PlateauState {
  double lr = 0;               // the rate after the warm-up: base_lr, times gamma at each reduction
  std::optional<double> best;  // "best"; none before the first evaluation (torch's mode_worse, +-inf)
  int64_t num_bad_epochs = 0;  // evaluations in a row without an improvement
  int64_t cooldown_counter = 0;
  int64_t reductions = 0;  // beyond torch: how many times the rate was reduced
};

// An LR schedule. LrAt(step) is the learning rate of the optimizer step that follows `step` steps taken (LrAt(0)
// is the first step's). The caller counts only the steps taken: a step skipped for inf/NaN gradients does not
// advance the schedule.
//
// Values are computed in double with the closed forms of torch.optim.lr_scheduler (_get_closed_form_lr, as used by
// scheduler.step(epoch)); the recursive forms that plain scheduler.step() uses multiply factors step by step and
// differ from these by a few double ulps.
// "constant", "step", "cosine", "linear", "polynomial", "inverse_sqrt", "plateau" (the CLI's --schedule names), and
// back.
const char* LrScheduleKindName(LrScheduleKind kind);
StatusOr<LrScheduleKind> LrScheduleKindFromName(const std::string& name);

class LrSchedule {
 public:
  // Validates: base_lr and min_lr finite and >= 0; step_size >= 1; gamma finite and >= 0; cosine and linear:
  // total_steps > warmup_steps; linear and polynomial: min_lr <= base_lr; polynomial: power finite and > 0;
  // warmup_steps >= 0; 0 < warmup_start_factor <= 1;
  // cycles 1, or for cosine in [1, total_steps - warmup_steps]; plateau: 0 <= gamma < 1, min_lr finite and >= 0,
  // patience and cooldown >= 0, threshold finite and >= 0.
  static StatusOr<LrSchedule> Create(const LrScheduleOptions& options);

  const LrScheduleOptions& options() const { return options_; }

  // The learning rate after `step` (>= 0) steps taken. Beyond PyTorch: cosine stays at min_lr after total_steps
  // (CosineAnnealingLR's closed form would rise again); linear is min_lr exactly from there on.
  double LrAt(int64_t step) const;

  // kPlateau: one evaluation's metric, as ReduceLROnPlateau.step(metric): true when it reduced the rate (the rate
  // of the steps from here on, LrAt of any step after the warm-up). A NaN metric is no improvement. Other kinds:
  // false, nothing changes.
  bool ReportMetric(double metric);
  // kPlateau's state (for checkpoints), and its restoration (checked: lr finite, >= 0 and at most base_lr; best
  // finite; counters >= 0).
  const PlateauState& plateau() const { return plateau_; }
  Status RestorePlateau(const PlateauState& state);

 private:
  explicit LrSchedule(const LrScheduleOptions& options) : options_(options) { plateau_.lr = options.base_lr; }
  LrScheduleOptions options_;
  PlateauState plateau_;
};

}  // namespace onnxamp::trainer
