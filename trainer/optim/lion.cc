// Lion (EvoLved Sign Momentum; Chen et al. 2023) with decoupled weight decay, as its authors' PyTorch reference.
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

class Lion final : public Optimizer {
 public:
  explicit Lion(const LionOptions& options) : options_(options) {}

  std::string_view name() const override { return "lion"; }

  std::vector<std::string> state_names() const override { return {kExpAvg}; }

 protected:
  void StepParameter(ParameterStore& store, size_t i, double lr, int64_t /*step*/, bool decay) override {
    const optim_math::LionScalars s =
        optim_math::ComputeLionScalars(lr, options_.beta1, options_.beta2, decay ? options_.weight_decay : 0.0);
    float* p = store.param(i).data();
    const float* g = store.grad(i).data();
    float* m = store.EnsureState(kExpAvg) + store.offset(i);
    ForRanges(pool(), store.numel(i), [&](size_t b, size_t e) {
      const size_t simd = optim_simd::LionSteps(p + b, g + b, m + b, e - b, s);
      for (size_t j = b + simd; j < e; ++j) p[j] = optim_math::LionElement(p[j], g[j], m + j, s);
    });
  }

 private:
  LionOptions options_;
};

}  // namespace

StatusOr<std::unique_ptr<Optimizer>> MakeLion(const LionOptions& options) {
  ONNXAMP_RETURN_IF_ERROR(CheckMomentOptions("lion", options.beta1, options.beta2, 0.0, options.weight_decay));
  return std::unique_ptr<Optimizer>(std::make_unique<Lion>(options));
}

}  // namespace onnxamp::trainer
