// Optimizers over a ParameterStore: the Optimizer interface and SGD, Adam, AdamW and RMSprop with torch.optim's
// semantics (single-tensor, foreach=False, capturable=False, CPU), and Lion as its authors' PyTorch reference, all
// computing in float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/thread_pool.h"
#include "trainer/optim/param_groups.h"
#include "trainer/optim/ranges.h"
#include "trainer/state/parameter_store.h"

namespace onnxamp::trainer {

// torch.optim.SGD's options (lr is passed to each Step).
struct SgdOptions {
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2: added to the gradient
  bool nesterov = false;      // needs momentum > 0 and dampening == 0
};

// torch.optim.Adam's and AdamW's options (lr is passed to each Step).
struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // Adam: L2, added to the gradient. AdamW: decoupled, p *= 1 - lr * weight_decay before the update (torch.optim.
  // AdamW's default is 1e-2: see AdamWDefaults).
  double weight_decay = 0.0;
  bool amsgrad = false;
};

// AdamOptions with torch.optim.AdamW's defaults (weight_decay 1e-2).
inline AdamOptions AdamWDefaults() {
  AdamOptions o;
  o.weight_decay = 1e-2;
  return o;
}

// torch.optim.RMSprop's options (lr is passed to each Step).
struct RmspropOptions {
  double alpha = 0.99;  // the smoothing constant of the squared-gradient average
  double eps = 1e-8;
  double weight_decay = 0.0;  // L2: added to the gradient
  double momentum = 0.0;
  bool centered = false;  // divide by the estimated standard deviation (square average minus squared mean)
};

// torch.optim.RAdam's options (lr is passed to each Step).
struct RadamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // RAdamW: p *= 1 - lr * weight_decay instead of L2 (torch >= 2.1)
};

// torch.optim.NAdam's options (lr is passed to each Step).
struct NadamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum_decay = 4e-3;         // psi of the momentum cache mu_t = beta1 (1 - 0.5 * 0.96^(t psi))
  bool decoupled_weight_decay = false;  // NAdamW: p *= 1 - lr * weight_decay instead of L2 (torch >= 2.1)
};

// torch.optim.Adagrad's options (lr is passed to each Step).
struct AdagradOptions {
  double lr_decay = 0.0;      // the step's rate is lr / (1 + (step - 1) * lr_decay)
  double weight_decay = 0.0;  // L2: added to the gradient
  double initial_accumulator_value = 0.0;
  double eps = 1e-10;
};

// Lion's options (lr is passed to each Step): the reference's defaults, betas (0.9, 0.99), no weight decay.
struct LionOptions {
  double beta1 = 0.9;         // the interpolation that gives the update's sign
  double beta2 = 0.99;        // the momentum's decay
  double weight_decay = 0.0;  // decoupled: p *= 1 - lr * weight_decay before the update
};

// An optimizer updates the FP32 parameters of a store from its gradients. The gradients must already be unscaled
// (GradScaler::UnscaleAndCheck) and clipped; on a step skipped for inf/NaN the caller does not call Step, so the
// per-parameter step counts advance only on steps taken.
//
// The optimizer keeps its per-element state in the store (EnsureState, named as torch's state keys), and its
// per-parameter step counts itself; both go into checkpoints. One optimizer serves one store (the same number of
// parameters every step).
class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // "sgd", "adam", "adamw", "radam", "nadam", "rmsprop", "adagrad" or "lion".
  virtual std::string_view name() const = 0;

  // Updates every parameter that has a gradient (store.has_grad(i)) with learning rate lr (finite, >= 0; a double,
  // as a Python float, so that lr-derived scalars round exactly as in PyTorch) and advances its step count.
  // Parameters without a gradient are left alone, as torch.optim skips params whose .grad is None.
  // Parameter i steps with lr * its group's lr_scale, and without weight decay where its group has none.
  Status Step(ParameterStore& store, double lr);

  // The parameter groups (param_groups.h); one group with the options' hyperparameters until set. Step fails when
  // they cover another number of parameters than the store has.
  void SetGroups(ParamGroups groups) { groups_ = std::move(groups); }
  const ParamGroups& groups() const { return groups_; }

  // Runs each parameter's element loop in ranges on `pool` (null: on the calling thread). The elements are
  // independent, so the results are the same bits with any pool.
  void SetThreadPool(exec::ThreadPool* pool) { pool_ = pool; }

  // The names of the state buffers this optimizer keeps in the store, as torch's state keys ("momentum_buffer";
  // "exp_avg", "exp_avg_sq", "max_exp_avg_sq"; "square_avg", "momentum_buffer", "grad_avg"; "sum"; Lion's "exp_avg"),
  // in the order a checkpoint lists them.
  virtual std::vector<std::string> state_names() const = 0;

  // Steps taken by each parameter (torch's state['step']; SGD counts too: its momentum buffer starts as a copy of
  // the first gradient). Empty before the first Step.
  const std::vector<int64_t>& step_counts() const { return step_counts_; }
  // Restores the step counts from a checkpoint (each >= 0); the state buffers are restored through the store.
  Status RestoreStepCounts(std::vector<int64_t> counts);

 protected:
  // Updates parameter i, which takes its `step`-th step (1 for the first), with learning rate lr and, when `decay`,
  // the options' weight decay (else none).
  virtual void StepParameter(ParameterStore& store, size_t i, double lr, int64_t step, bool decay) = 0;
  // The pool the element loops run on (trainer/optim/ranges.h); null: the calling thread.
  exec::ThreadPool* pool() const { return pool_; }

 private:
  std::vector<int64_t> step_counts_;
  ParamGroups groups_;
  exec::ThreadPool* pool_ = nullptr;
};

// The optimizers `onnxamp train --optimizer` names: "sgd", "adam", "adamw", "radam", "nadam", "rmsprop", "adagrad",
// "lion".
enum class OptimizerKind { kSgd, kAdam, kAdamW, kRadam, kRmsprop, kAdagrad, kLion, kNadam };
StatusOr<OptimizerKind> OptimizerKindFromName(const std::string& name);
const char* OptimizerKindName(OptimizerKind kind);

// The checks torch.optim makes on Adam-like options, in its order: eps, then 0 <= beta1, beta2 < 1, then weight_decay,
// each also finite; errors start with `what` ("adam: beta2 must be in [0, 1), got 1"). Lion, without eps, passes 0.
Status CheckMomentOptions(std::string_view what, double beta1, double beta2, double eps, double weight_decay);

// SGD: validates as torch.optim.SGD does (momentum and weight_decay >= 0; Nesterov needs momentum > 0 and zero
// dampening), and every option finite.
StatusOr<std::unique_ptr<Optimizer>> MakeSgd(const SgdOptions& options);
// Adam (weight decay as L2) and AdamW (decoupled weight decay): validates as torch.optim.Adam does (0 <= beta < 1,
// eps >= 0, weight_decay >= 0, all finite).
StatusOr<std::unique_ptr<Optimizer>> MakeAdam(const AdamOptions& options);
StatusOr<std::unique_ptr<Optimizer>> MakeAdamW(const AdamOptions& options);
// RMSprop: validates as torch.optim.RMSprop does (alpha, eps, momentum, weight_decay >= 0), every option finite, and
// alpha <= 1 (above, the squared-gradient average goes negative).
StatusOr<std::unique_ptr<Optimizer>> MakeRmsprop(const RmspropOptions& options);
// RAdam: validates as torch.optim.RAdam does (0 <= beta < 1, eps and weight_decay >= 0, all finite).
StatusOr<std::unique_ptr<Optimizer>> MakeRadam(const RadamOptions& options);
// NAdam: validates as torch.optim.NAdam does (0 <= beta < 1, eps, weight_decay and momentum_decay >= 0, all finite).
StatusOr<std::unique_ptr<Optimizer>> MakeNadam(const NadamOptions& options);
// Adagrad: validates as torch.optim.Adagrad does (lr_decay, weight_decay, initial_accumulator_value, eps >= 0), all
// finite.
StatusOr<std::unique_ptr<Optimizer>> MakeAdagrad(const AdagradOptions& options);
// Lion: 0 <= beta < 1 (as the reference checks), weight_decay >= 0, all finite.
StatusOr<std::unique_ptr<Optimizer>> MakeLion(const LionOptions& options);

// The optimizer of `kind` with its options from `o`, any struct with the members sgd, adam, radam, nadam, rmsprop,
// adagrad and lion (TrainerOptions, the fused CUDA optimizer's options), validated by its Make function.
template <typename Options>
StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(OptimizerKind kind, const Options& o) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return MakeSgd(o.sgd);
    case OptimizerKind::kAdam:
      return MakeAdam(o.adam);
    case OptimizerKind::kAdamW:
      return MakeAdamW(o.adam);
    case OptimizerKind::kRadam:
      return MakeRadam(o.radam);
    case OptimizerKind::kNadam:
      return MakeNadam(o.nadam);
    case OptimizerKind::kRmsprop:
      return MakeRmsprop(o.rmsprop);
    case OptimizerKind::kAdagrad:
      return MakeAdagrad(o.adagrad);
    case OptimizerKind::kLion:
      return MakeLion(o.lion);
  }
  return InvalidArgument("unknown optimizer kind ", static_cast<int>(kind));
}

}  // namespace onnxamp::trainer
