// RMSprop with L2 weight decay, momentum and the centered variant (torch.optim.RMSprop, single-tensor path).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "trainer/optim/optim_math.h"
#include "trainer/optim/optim_simd.h"
#include "trainer/optim/optimizer.h"

namespace onnxamp::trainer {
namespace {

constexpr char kSquareAvg[] = "square_avg";
constexpr char kMomentumBuffer[] = "momentum_buffer";
constexpr char kGradAvg[] = "grad_avg";

class Rmsprop final : public Optimizer {
 public:
  explicit Rmsprop(const RmspropOptions& options) : options_(options) {}

  std::string_view name() const override { return "rmsprop"; }

  std::vector<std::string> state_names() const override {
    std::vector<std::string> names = {kSquareAvg};
    if (options_.momentum > 0.0) names.push_back(kMomentumBuffer);
    if (options_.centered) names.push_back(kGradAvg);
    return names;
  }

 protected:
  void StepParameter(ParameterStore& store, size_t i, double lr, int64_t /*step*/, bool decay) override {
    const optim_math::RmspropScalars s = optim_math::ComputeRmspropScalars(
        lr, options_.alpha, options_.eps, decay ? options_.weight_decay : 0.0, options_.momentum, options_.centered);
    const size_t off = store.offset(i);
    float* p = store.param(i).data();
    const float* g = store.grad(i).data();
    float* v = store.EnsureState(kSquareAvg) + off;
    float* buf = s.has_momentum ? store.EnsureState(kMomentumBuffer) + off : nullptr;
    float* mean = s.centered ? store.EnsureState(kGradAvg) + off : nullptr;
    ForRanges(pool(), store.numel(i), [&](size_t b, size_t e) {
      float unused0 = 0.0f, unused1 = 0.0f;
      const size_t simd =
          optim_simd::RmspropSteps(p + b, g + b, v + b, mean ? mean + b : nullptr, buf ? buf + b : nullptr, e - b, s);
      for (size_t j = b + simd; j < e; ++j) {
        p[j] = optim_math::RmspropElement(p[j], g[j], v + j, mean ? mean + j : &unused0, buf ? buf + j : &unused1, s);
      }
    });
  }

 private:
  RmspropOptions options_;
};

}  // namespace

StatusOr<std::unique_ptr<Optimizer>> MakeRmsprop(const RmspropOptions& options) {
  if (!(options.alpha >= 0.0 && options.alpha <= 1.0)) {
    return InvalidArgument("rmsprop: alpha must be in [0, 1], got ", options.alpha);
  }
  if (!std::isfinite(options.eps) || options.eps < 0.0) {
    return InvalidArgument("rmsprop: eps must be finite and >= 0, got ", options.eps);
  }
  if (!std::isfinite(options.momentum) || options.momentum < 0.0) {
    return InvalidArgument("rmsprop: momentum must be finite and >= 0, got ", options.momentum);
  }
  if (!std::isfinite(options.weight_decay) || options.weight_decay < 0.0) {
    return InvalidArgument("rmsprop: weight_decay must be finite and >= 0, got ", options.weight_decay);
  }
  return std::unique_ptr<Optimizer>(std::make_unique<Rmsprop>(options));
}

}  // namespace onnxamp::trainer
