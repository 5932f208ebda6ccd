// Host-side planning of the fused optimizer step: flat layout, chunk table, per-step scalars.
#include "trainer/cuda/fused_optimizer_plan.h"

#include <limits>

namespace onnxamp::trainer::cuda {

StatusOr<FusedLayout> PlanFusedLayout(const std::vector<int64_t>& numels, int64_t chunk_elements,
                                      const std::vector<float>& overflow_at, const std::vector<int32_t>& group) {
  if (!group.empty() && group.size() != numels.size()) {
    return InvalidArgument("fused optimizer: parameter groups for ", group.size(), " parameters, there are ",
                           numels.size());
  }
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] < 0) return InvalidArgument("fused optimizer: parameter ", i, " has group ", group[i]);
  }
  if (!overflow_at.empty() && overflow_at.size() != numels.size()) {
    return InvalidArgument("fused optimizer: ", overflow_at.size(), " gradient overflow thresholds for ", numels.size(),
                           " parameters");
  }
  for (size_t i = 0; i < overflow_at.size(); ++i) {
    if (!(overflow_at[i] >= 0.0f)) {
      return InvalidArgument("fused optimizer: the gradient overflow threshold of parameter ", i, " must be >= 0, got ",
                             overflow_at[i]);
    }
  }
  if (chunk_elements <= 0 || chunk_elements > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument("fused optimizer: the chunk size must be in [1, 2^31-1], got ", chunk_elements);
  }
  if (numels.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgument("fused optimizer: too many parameters (", numels.size(), ")");
  }
  FusedLayout layout;
  layout.numels = numels;
  layout.chunk_begin.push_back(0);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / 4;
  int64_t offset = 0;
  for (size_t i = 0; i < numels.size(); ++i) {
    const int64_t n = numels[i];
    if (n < 0 || n > kMax - offset) {
      return InvalidArgument("fused optimizer: parameter ", i, " has an invalid size of ", n, " elements");
    }
    layout.offsets.push_back(offset);
    for (int64_t start = 0; start < n; start += chunk_elements) {
      FusedChunk c;
      c.param = static_cast<int32_t>(i);
      c.length = static_cast<int32_t>(n - start < chunk_elements ? n - start : chunk_elements);
      c.start = start;
      c.flat = offset + start;
      c.overflow_at = overflow_at.empty() ? 0.0f : overflow_at[i];
      c.group = group.empty() ? 0 : group[i];
      layout.chunks.push_back(c);
    }
    if (layout.chunks.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      return InvalidArgument("fused optimizer: more than 2^31-1 chunks of ", chunk_elements, " elements");
    }
    layout.chunk_begin.push_back(static_cast<int32_t>(layout.chunks.size()));
    offset += (n + kFusedAlignmentElements - 1) / kFusedAlignmentElements * kFusedAlignmentElements;
  }
  layout.flat_size = offset;
  return layout;
}

std::vector<float> Fp16GradientOverflowThresholds(const ir::Graph& train, const std::vector<Parameter>& params) {
  std::vector<float> out(params.size(), 0.0f);
  for (size_t i = 0; i < params.size(); ++i) {
    const ir::Value* grad = train.FindValue(params[i].gradient);
    const ir::Node* cast = grad ? grad->producer() : nullptr;
    if (!cast || cast->op_type() != "Cast" || !cast->domain().empty() || cast->inputs().empty() || !cast->input(0)) {
      continue;
    }
    if (cast->GetInt("to", 0) != static_cast<int64_t>(DType::kFloat32)) continue;
    const DType from = cast->input(0)->type().elem_type();
    if (from == DType::kFloat16 || from == DType::kUndefined) out[i] = kFp16OverflowMagnitude;
  }
  return out;
}

FusedStepScalars ComputeFusedStepScalars(const FusedOptimizerOptions& options, const LrSchedule& schedule,
                                         int64_t steps_taken, const ParamGroup& group) {
  FusedStepScalars s;
  s.lr = schedule.LrAt(steps_taken);
  // As Optimizer::Step: the group's factor applied to the schedule's rate in double.
  const double lr = s.lr * group.lr_scale;
  auto decay = [&](double weight_decay) {
    return group.decay ? weight_decay : 0.0;
  };  // the group's: the options' or none
  switch (options.kind) {
    case FusedOptimizerKind::kSgd: {
      const SgdOptions& o = options.sgd;
      s.sgd = optim_math::ComputeSgdScalars(lr, o.momentum, o.dampening, decay(o.weight_decay), o.nesterov);
      break;
    }
    case FusedOptimizerKind::kAdam:
    case FusedOptimizerKind::kAdamW: {
      const AdamOptions& o = options.adam;
      s.adam = optim_math::ComputeAdamScalars(lr, o.beta1, o.beta2, o.eps, decay(o.weight_decay),
                                              options.kind == FusedOptimizerKind::kAdamW, o.amsgrad, steps_taken + 1);
      break;
    }
    case FusedOptimizerKind::kRadam: {
      const RadamOptions& o = options.radam;
      s.radam = optim_math::ComputeRadamScalars(lr, o.beta1, o.beta2, o.eps, decay(o.weight_decay), steps_taken + 1,
                                                o.decoupled_weight_decay);
      break;
    }
    case FusedOptimizerKind::kNadam: {
      const NadamOptions& o = options.nadam;
      s.nadam = optim_math::ComputeNadamScalars(lr, o.beta1, o.beta2, o.eps, decay(o.weight_decay), o.momentum_decay,
                                                o.decoupled_weight_decay, steps_taken + 1);
      break;
    }
    case FusedOptimizerKind::kRmsprop: {
      const RmspropOptions& o = options.rmsprop;
      s.rmsprop = optim_math::ComputeRmspropScalars(lr, o.alpha, o.eps, decay(o.weight_decay), o.momentum, o.centered);
      break;
    }
    case FusedOptimizerKind::kAdagrad: {
      const AdagradOptions& o = options.adagrad;
      s.adagrad = optim_math::ComputeAdagradScalars(lr, o.lr_decay, decay(o.weight_decay), o.initial_accumulator_value,
                                                    o.eps, steps_taken + 1);
      break;
    }
    case FusedOptimizerKind::kLion: {
      const LionOptions& o = options.lion;
      s.lion = optim_math::ComputeLionScalars(lr, o.beta1, o.beta2, decay(o.weight_decay));
      break;
    }
  }
  if (options.averaging()) {
    s.ema_weight = optim_math::AverageWeight(options.ema_decay, options.ema_warmup, options.swa_start, steps_taken);
  }
  return s;
}

}  // namespace onnxamp::trainer::cuda
