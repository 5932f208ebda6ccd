// Optimizer: the checks and per-parameter loop shared by every optimizer.
#include "trainer/optim/optimizer.h"

#include <cmath>
#include <utility>

namespace onnxamp::trainer {

Status Optimizer::Step(ParameterStore& store, double lr) {
  if (!std::isfinite(lr) || lr < 0.0)
    return InvalidArgument(name(), ": the learning rate must be finite and >= 0, got ", lr);
  if (step_counts_.empty()) {
    step_counts_.assign(store.size(), 0);
  } else if (step_counts_.size() != store.size()) {
    return FailedPrecondition(name(), ": the optimizer was used with ", step_counts_.size(),
                              " parameters, this store has ", store.size());
  }
  if (groups_.of.empty()) groups_ = ParamGroups::Single(store.size());
  if (groups_.of.size() != store.size()) {
    return FailedPrecondition(name(), ": the parameter groups cover ", groups_.of.size(),
                              " parameters, this store has ", store.size());
  }
  for (size_t i = 0; i < store.size(); ++i) {
    if (!store.has_grad(i)) continue;
    const ParamGroup& g = groups_.at(i);
    StepParameter(store, i, lr * g.lr_scale, ++step_counts_[i], g.decay);
  }
  return Status::Ok();
}

Status Optimizer::RestoreStepCounts(std::vector<int64_t> counts) {
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0) return InvalidArgument(name(), ": step count ", counts[i], " of parameter ", i, " is negative");
  }
  step_counts_ = std::move(counts);
  return Status::Ok();
}

const char* OptimizerKindName(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kAdamW:
      return "adamw";
    case OptimizerKind::kRadam:
      return "radam";
    case OptimizerKind::kRmsprop:
      return "rmsprop";
    case OptimizerKind::kAdagrad:
      return "adagrad";
    case OptimizerKind::kLion:
      return "lion";
    case OptimizerKind::kNadam:
      return "nadam";
  }
  return "?";
}

Status CheckMomentOptions(std::string_view what, double beta1, double beta2, double eps, double weight_decay) {
  if (!std::isfinite(eps) || eps < 0.0) return InvalidArgument(what, ": eps must be finite and >= 0, got ", eps);
  if (!(beta1 >= 0.0 && beta1 < 1.0)) return InvalidArgument(what, ": beta1 must be in [0, 1), got ", beta1);
  if (!(beta2 >= 0.0 && beta2 < 1.0)) return InvalidArgument(what, ": beta2 must be in [0, 1), got ", beta2);
  if (!std::isfinite(weight_decay) || weight_decay < 0.0) {
    return InvalidArgument(what, ": weight_decay must be finite and >= 0, got ", weight_decay);
  }
  return Status::Ok();
}

StatusOr<OptimizerKind> OptimizerKindFromName(const std::string& name) {
  if (name == "sgd") return OptimizerKind::kSgd;
  if (name == "adam") return OptimizerKind::kAdam;
  if (name == "adamw") return OptimizerKind::kAdamW;
  if (name == "radam") return OptimizerKind::kRadam;
  if (name == "rmsprop") return OptimizerKind::kRmsprop;
  if (name == "adagrad") return OptimizerKind::kAdagrad;
  if (name == "lion") return OptimizerKind::kLion;
  if (name == "nadam") return OptimizerKind::kNadam;
  return InvalidArgument("--optimizer ", name, ": expected sgd, adam, adamw, radam, nadam, rmsprop, adagrad or lion");
}

}  // namespace onnxamp::trainer
