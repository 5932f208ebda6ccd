// RAdam with L2 or decoupled weight decay (torch.optim.RAdam, single-tensor path, capturable=False).
#include <memory>

#include "trainer/optim/optim_math.h"
#include "trainer/optim/optim_simd.h"
#include "trainer/optim/two_moments.h"

namespace onnxamp::trainer {
namespace {

optim_math::RadamScalars Scalars(const RadamOptions& o, double lr, int64_t step, bool decay) {
  return optim_math::ComputeRadamScalars(lr, o.beta1, o.beta2, o.eps, decay ? o.weight_decay : 0.0, step,
                                         o.decoupled_weight_decay);
}

}  // namespace

StatusOr<std::unique_ptr<Optimizer>> MakeRadam(const RadamOptions& options) {
  ONNXAMP_RETURN_IF_ERROR(CheckMomentOptions("radam", options.beta1, options.beta2, options.eps, options.weight_decay));
  return std::unique_ptr<Optimizer>(
      std::make_unique<TwoMomentOptimizer<RadamOptions, Scalars, optim_simd::RadamSteps, optim_math::RadamElement>>(
          "radam", options));
}

}  // namespace onnxamp::trainer
