// LR schedules: option checks and the closed forms of LinearLR, StepLR and CosineAnnealingLR.
#include "trainer/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace onnxamp::trainer {
namespace {

// Cosine restarts compute (t * cycles) mod T in int64 with t < T and cycles <= T: T up to sqrt(2^63).
constexpr int64_t kMaxCycledSteps = 3000000000;

Status CheckNonNegative(double value, const char* what) {
  if (!std::isfinite(value) || value < 0.0) {
    return InvalidArgument("lr schedule: ", what, " must be finite and >= 0, got ", value);
  }
  return Status::Ok();
}

}  // namespace

const char* LrScheduleKindName(LrScheduleKind k) {
  switch (k) {
    case LrScheduleKind::kConstant:
      return "constant";
    case LrScheduleKind::kStep:
      return "step";
    case LrScheduleKind::kCosine:
      return "cosine";
    case LrScheduleKind::kLinear:
      return "linear";
    case LrScheduleKind::kPolynomial:
      return "polynomial";
    case LrScheduleKind::kInverseSqrt:
      return "inverse_sqrt";
    case LrScheduleKind::kPlateau:
      return "plateau";
  }
  return "?";
}

StatusOr<LrScheduleKind> LrScheduleKindFromName(const std::string& name) {
  for (LrScheduleKind k :
       {LrScheduleKind::kConstant, LrScheduleKind::kStep, LrScheduleKind::kCosine, LrScheduleKind::kLinear,
        LrScheduleKind::kPolynomial, LrScheduleKind::kInverseSqrt, LrScheduleKind::kPlateau}) {
    if (name == LrScheduleKindName(k)) return k;
  }
  return InvalidArgument("--schedule ", name,
                         ": expected constant, step, cosine, linear, polynomial, inverse_sqrt or plateau");
}

StatusOr<LrSchedule> LrSchedule::Create(const LrScheduleOptions& options) {
  ONNXAMP_RETURN_IF_ERROR(CheckNonNegative(options.base_lr, "base_lr"));
  if (options.warmup_steps < 0) {
    return InvalidArgument("lr schedule: warmup_steps must be >= 0, got ", options.warmup_steps);
  }
  if (options.warmup_steps > 0 && !(options.warmup_start_factor > 0.0 && options.warmup_start_factor <= 1.0)) {
    return InvalidArgument("lr schedule: the warm-up start factor must be in (0, 1], got ",
                           options.warmup_start_factor);
  }
  if (options.cycles != 1 && options.kind != LrScheduleKind::kCosine) {
    return InvalidArgument("lr schedule: cycles (", options.cycles, ") need the cosine schedule, not ",
                           LrScheduleKindName(options.kind));
  }
  if (options.timescale != 0 && options.kind != LrScheduleKind::kInverseSqrt) {
    return InvalidArgument("lr schedule: a timescale (", options.timescale, ") needs the inverse_sqrt schedule, not ",
                           LrScheduleKindName(options.kind));
  }
  if (options.decay_steps != 0 && (options.kind == LrScheduleKind::kConstant || options.kind == LrScheduleKind::kStep ||
                                   options.kind == LrScheduleKind::kInverseSqrt)) {
    return InvalidArgument("lr schedule: decay_steps (", options.decay_steps,
                           ") need a decaying schedule (cosine, linear or polynomial), not ",
                           LrScheduleKindName(options.kind));
  }
  if (options.power != 1.0 && options.kind != LrScheduleKind::kPolynomial) {
    return InvalidArgument("lr schedule: a power (", options.power, ") needs the polynomial schedule, not ",
                           LrScheduleKindName(options.kind));
  }
  switch (options.kind) {
    case LrScheduleKind::kConstant:
      break;
    case LrScheduleKind::kPlateau:
      if (!(options.gamma >= 0.0 && options.gamma < 1.0)) {
        return InvalidArgument("lr schedule: plateau's factor (gamma) must be in [0, 1), got ", options.gamma);
      }
      ONNXAMP_RETURN_IF_ERROR(CheckNonNegative(options.min_lr, "min_lr"));
      ONNXAMP_RETURN_IF_ERROR(CheckNonNegative(options.threshold, "threshold"));
      if (options.patience < 0 || options.cooldown < 0) {
        return InvalidArgument("lr schedule: patience and cooldown must be >= 0, got ", options.patience, " and ",
                               options.cooldown);
      }
      break;
    case LrScheduleKind::kInverseSqrt:
      if (options.timescale < 0) {
        return InvalidArgument("lr schedule: timescale must be >= 0 (0: the default), got ", options.timescale);
      }
      break;
    case LrScheduleKind::kStep:
      if (options.step_size < 1) return InvalidArgument("lr schedule: step_size must be >= 1, got ", options.step_size);
      ONNXAMP_RETURN_IF_ERROR(CheckNonNegative(options.gamma, "gamma"));
      break;
    case LrScheduleKind::kCosine:
    case LrScheduleKind::kLinear:
    case LrScheduleKind::kPolynomial:
      ONNXAMP_RETURN_IF_ERROR(CheckNonNegative(options.min_lr, "min_lr"));
      if (options.total_steps <= options.warmup_steps) {
        return InvalidArgument("lr schedule: ", LrScheduleKindName(options.kind), " needs total_steps (",
                               options.total_steps, ") greater than warmup_steps (", options.warmup_steps, ")");
      }
      if (options.cycles < 1 || options.cycles > options.total_steps - options.warmup_steps) {
        return InvalidArgument("lr schedule: cycles must be in [1, ", options.total_steps - options.warmup_steps,
                               "] (a step or more each), got ", options.cycles);
      }
      if (options.decay_steps < 0 || options.decay_steps > options.total_steps - options.warmup_steps) {
        return InvalidArgument("lr schedule: decay_steps must be in [0, ", options.total_steps - options.warmup_steps,
                               "] (the steps after the warm-up), got ", options.decay_steps);
      }
      if (options.decay_steps > 0 && options.cycles > options.decay_steps) {
        return InvalidArgument("lr schedule: cycles (", options.cycles, ") must not exceed decay_steps (",
                               options.decay_steps, ")");
      }
      if (options.cycles > 1 && options.total_steps - options.warmup_steps > kMaxCycledSteps) {
        return InvalidArgument("lr schedule: cosine cycles need at most ", kMaxCycledSteps, " steps after the warm-up");
      }
      if (options.kind != LrScheduleKind::kCosine && options.min_lr > options.base_lr) {
        return InvalidArgument("lr schedule: ", LrScheduleKindName(options.kind), " decays from the base rate ",
                               options.base_lr, " to min_lr, which must not be larger, got ", options.min_lr);
      }
      if (options.kind == LrScheduleKind::kPolynomial && !(std::isfinite(options.power) && options.power > 0)) {
        return InvalidArgument("lr schedule: the polynomial's power must be finite and > 0, got ", options.power);
      }
      break;
    default:
      return InvalidArgument("lr schedule: unknown kind ", static_cast<int>(options.kind));
  }
  return LrSchedule(options);
}

double LrSchedule::LrAt(int64_t step) const {
  ONNXAMP_CHECK(step >= 0, "LrAt(", step, "): the step count is negative");
  const LrScheduleOptions& o = options_;
  const double base = o.base_lr;
  if (step < o.warmup_steps) {
    // LinearLR._get_closed_form_lr with end_factor 1: base * (start + (end - start) * min(total, t) / total).
    const double start = o.warmup_start_factor;
    return base * (start + (1.0 - start) * static_cast<double>(step) / static_cast<double>(o.warmup_steps));
  }
  int64_t t = step - o.warmup_steps;  // SequentialLR restarts the next schedule at 0 at the milestone
  // Warmup-stable-decay: the base rate until the last decay_steps steps, which the decaying schedule spans.
  int64_t t_max = o.total_steps - o.warmup_steps;
  if (o.decay_steps > 0 && o.kind != LrScheduleKind::kConstant && o.kind != LrScheduleKind::kStep &&
      o.kind != LrScheduleKind::kInverseSqrt) {
    const int64_t stable = t_max - o.decay_steps;
    if (t < stable) return base;
    t -= stable;
    t_max = o.decay_steps;
  }
  switch (o.kind) {
    case LrScheduleKind::kConstant:
      return base;
    case LrScheduleKind::kPlateau:
      return plateau_.lr;
    case LrScheduleKind::kStep:
      // StepLR._get_closed_form_lr: base * gamma ** (t // step_size).
      return base * std::pow(o.gamma, static_cast<double>(t / o.step_size));
    case LrScheduleKind::kCosine: {
      // CosineAnnealingLR._get_closed_form_lr: eta_min + (base - eta_min) * (1 + cos(pi * t / T_max)) / 2; with
      // restarts the position within the cycle, (t * cycles) mod T_max over T_max (exact in integers: t < T_max,
      // cycles <= T_max and T_max <= kMaxCycledSteps, so the product fits).
      if (t >= t_max) return o.min_lr;
      const int64_t pos = (t * o.cycles) % t_max;
      const double angle = std::numbers::pi * static_cast<double>(pos) / static_cast<double>(t_max);
      return o.min_lr + (base - o.min_lr) * (1.0 + std::cos(angle)) / 2.0;
    }
    case LrScheduleKind::kLinear: {
      // LinearLR._get_closed_form_lr with start_factor 1: base * (1 + (end - 1) * min(total, t) / total).
      if (t >= t_max || base == 0.0) return o.min_lr;
      const double end = o.min_lr / base;
      return base * (1.0 + (end - 1.0) * static_cast<double>(t) / static_cast<double>(t_max));
    }
    case LrScheduleKind::kInverseSqrt: {
      const int64_t timescale = o.timescale > 0 ? o.timescale : (o.warmup_steps > 0 ? o.warmup_steps : 10000);
      const double ts = static_cast<double>(timescale);
      return base * (1.0 / std::sqrt((static_cast<double>(t) + ts) / ts));
    }
    case LrScheduleKind::kPolynomial: {
      // transformers' lr_lambda times the base rate: (base - end) * pct_remaining ** power + end.
      if (t >= t_max) return o.min_lr;
      const double remaining = 1.0 - static_cast<double>(t) / static_cast<double>(t_max);
      return (base - o.min_lr) * std::pow(remaining, o.power) + o.min_lr;
    }
  }
  return base;
}

bool LrSchedule::ReportMetric(double metric) {
  const LrScheduleOptions& o = options_;
  if (o.kind != LrScheduleKind::kPlateau) return false;
  PlateauState& p = plateau_;
  // ReduceLROnPlateau.is_better with threshold_mode "rel": below best * (1 - threshold), or above best *
  // (threshold + 1); any finite metric beats the initial +-inf; NaN compares false.
  bool better;
  if (!p.best) {
    better = o.maximize ? metric > -HUGE_VAL : metric < HUGE_VAL;  // so never an infinite best
  } else {
    better = o.maximize ? metric > *p.best * (o.threshold + 1.0) : metric < *p.best * (1.0 - o.threshold);
  }
  if (better) {
    p.best = metric;
    p.num_bad_epochs = 0;
  } else {
    ++p.num_bad_epochs;
  }
  if (p.cooldown_counter > 0) {
    --p.cooldown_counter;
    p.num_bad_epochs = 0;
  }
  if (p.num_bad_epochs <= o.patience) return false;
  p.cooldown_counter = o.cooldown;
  p.num_bad_epochs = 0;
  // _reduce_lr: max(old * factor, min_lr), applied only when it lowers the rate by more than eps = 1e-8.
  const double lowered = std::max(p.lr * o.gamma, o.min_lr);
  if (!(p.lr - lowered > 1e-8)) return false;
  p.lr = lowered;
  ++p.reductions;
  return true;
}

Status LrSchedule::RestorePlateau(const PlateauState& state) {
  if (!std::isfinite(state.lr) || state.lr < 0.0 || state.lr > options_.base_lr) {
    return InvalidArgument("lr schedule: the plateau's rate must be in [0, base_lr = ", options_.base_lr, "], got ",
                           state.lr);
  }
  if (state.best && !std::isfinite(*state.best)) {
    return InvalidArgument("lr schedule: the plateau's best metric must be finite, got ", *state.best);
  }
  if (state.num_bad_epochs < 0 || state.cooldown_counter < 0 || state.reductions < 0) {
    return InvalidArgument("lr schedule: negative plateau counters (", state.num_bad_epochs, ", ",
                           state.cooldown_counter, ", ", state.reductions, ")");
  }
  plateau_ = state;
  return Status::Ok();
}

}  // namespace onnxamp::trainer
