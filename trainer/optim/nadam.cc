// NAdam with L2 or decoupled weight decay (torch.optim.NAdam of torch 2.x, single-tensor path, capturable=False).
// torch keeps state['mu_product'] per parameter; it is a function of the step count (optim_math::NadamMuProduct), so
// the store holds the two moments only.
#include <cmath>
#include <memory>

#include "trainer/optim/optim_math.h"
#include "trainer/optim/optim_simd.h"
#include "trainer/optim/two_moments.h"

namespace onnxamp::trainer {
namespace {

optim_math::NadamScalars Scalars(const NadamOptions& o, double lr, int64_t step, bool decay) {
  return optim_math::ComputeNadamScalars(lr, o.beta1, o.beta2, o.eps, decay ? o.weight_decay : 0.0, o.momentum_decay,
                                         o.decoupled_weight_decay, step);
}

}  // namespace

StatusOr<std::unique_ptr<Optimizer>> MakeNadam(const NadamOptions& options) {
  ONNXAMP_RETURN_IF_ERROR(CheckMomentOptions("nadam", options.beta1, options.beta2, options.eps, options.weight_decay));
  if (!std::isfinite(options.momentum_decay) || options.momentum_decay < 0.0) {
    return InvalidArgument("nadam: momentum_decay must be finite and >= 0, got ", options.momentum_decay);
  }
  return std::unique_ptr<Optimizer>(
      std::make_unique<TwoMomentOptimizer<NadamOptions, Scalars, optim_simd::NadamSteps, optim_math::NadamElement>>(
          "nadam", options));
}

}  // namespace onnxamp::trainer
