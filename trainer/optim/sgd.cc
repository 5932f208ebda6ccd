// SGD with momentum, dampening, Nesterov and L2 weight decay (torch.optim.SGD, single-tensor path).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "trainer/optim/optim_math.h"
#include "trainer/optim/optim_simd.h"
#include "trainer/optim/optimizer.h"

namespace onnxamp::trainer {
namespace {

constexpr char kMomentumBuffer[] = "momentum_buffer";

class Sgd final : public Optimizer {
 public:
  explicit Sgd(const SgdOptions& options) : options_(options) {}

  std::string_view name() const override { return "sgd"; }

  std::vector<std::string> state_names() const override {
    if (options_.momentum == 0.0) return {};
    return {kMomentumBuffer};
  }

 protected:
  void StepParameter(ParameterStore& store, size_t i, double lr, int64_t step, bool decay) override {
    const optim_math::SgdScalars s = optim_math::ComputeSgdScalars(
        lr, options_.momentum, options_.dampening, decay ? options_.weight_decay : 0.0, options_.nesterov);

    float* p = store.param(i).data();
    const float* g = store.grad(i).data();
    float* buf = s.has_momentum ? store.EnsureState(kMomentumBuffer) + store.offset(i) : nullptr;
    const bool first_step = step == 1;
    ForRanges(pool(), store.numel(i), [&](size_t b, size_t e) {
      float unused = 0.0f;
      const size_t simd = optim_simd::SgdSteps(p + b, g + b, buf ? buf + b : nullptr, e - b, first_step, s);
      for (size_t j = b + simd; j < e; ++j) {
        p[j] = optim_math::SgdElement(p[j], g[j], buf ? buf + j : &unused, first_step, s);
      }
    });
  }

 private:
  SgdOptions options_;
};

}  // namespace

StatusOr<std::unique_ptr<Optimizer>> MakeSgd(const SgdOptions& options) {
  if (!std::isfinite(options.momentum) || options.momentum < 0.0) {
    return InvalidArgument("sgd: momentum must be finite and >= 0, got ", options.momentum);
  }
  if (!std::isfinite(options.dampening)) {
    return InvalidArgument("sgd: dampening must be finite, got ", options.dampening);
  }
  if (!std::isfinite(options.weight_decay) || options.weight_decay < 0.0) {
    return InvalidArgument("sgd: weight_decay must be finite and >= 0, got ", options.weight_decay);
  }
  if (options.nesterov && (options.momentum <= 0.0 || options.dampening != 0.0)) {
    return InvalidArgument("sgd: Nesterov momentum requires a momentum > 0 and zero dampening (momentum ",
                           options.momentum, ", dampening ", options.dampening, ")");
  }
  return std::unique_ptr<Optimizer>(std::make_unique<Sgd>(options));
}

}  // namespace onnxamp::trainer
