// RAdam with L2 weight decay (torch.optim.RAdam, single-tensor path, capturable=False).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "trainer/optim/optim_math.h"
#include "trainer/optim/optim_simd.h"
#include "trainer/optim/optimizer.h"

namespace onnxamp::trainer {
namespace {

constexpr char kExpAvg[] = "exp_avg";
constexpr char kExpAvgSq[] = "exp_avg_sq";

class Radam final : public Optimizer {
 public:
  explicit Radam(const RadamOptions& options) : options_(options) {}

  std::string_view name() const override { return "radam"; }

  std::vector<std::string> state_names() const override { return {kExpAvg, kExpAvgSq}; }

 protected:
  void StepParameter(ParameterStore& store, size_t i, double lr, int64_t step, bool decay) override {
    const optim_math::RadamScalars s = optim_math::ComputeRadamScalars(lr, options_.beta1, options_.beta2, options_.eps,
                                                                       decay ? options_.weight_decay : 0.0, step);
    const size_t off = store.offset(i);
    float* p = store.param(i).data();
    const float* g = store.grad(i).data();
    float* m = store.EnsureState(kExpAvg) + off;
    float* v = store.EnsureState(kExpAvgSq) + off;
    ForRanges(pool(), store.numel(i), [&](size_t b, size_t e) {
      const size_t simd = optim_simd::RadamSteps(p + b, g + b, m + b, v + b, e - b, s);
      for (size_t j = b + simd; j < e; ++j) p[j] = optim_math::RadamElement(p[j], g[j], m + j, v + j, s);
    });
  }

 private:
  RadamOptions options_;
};

}  // namespace

StatusOr<std::unique_ptr<Optimizer>> MakeRadam(const RadamOptions& options) {
  if (!(options.beta1 >= 0.0 && options.beta1 < 1.0)) {
    return InvalidArgument("radam: beta1 must be in [0, 1), got ", options.beta1);
  }
  if (!(options.beta2 >= 0.0 && options.beta2 < 1.0)) {
    return InvalidArgument("radam: beta2 must be in [0, 1), got ", options.beta2);
  }
  if (!std::isfinite(options.eps) || options.eps < 0.0) {
    return InvalidArgument("radam: eps must be finite and >= 0, got ", options.eps);
  }
  if (!std::isfinite(options.weight_decay) || options.weight_decay < 0.0) {
    return InvalidArgument("radam: weight_decay must be finite and >= 0, got ", options.weight_decay);
  }
  return std::unique_ptr<Optimizer>(std::make_unique<Radam>(options));
}

}  // namespace onnxamp::trainer
