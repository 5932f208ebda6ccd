// Adam (L2 weight decay) and AdamW (decoupled weight decay), optionally AMSGrad (torch.optim.Adam/AdamW,
// single-tensor path, capturable=False).
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
constexpr char kMaxExpAvgSq[] = "max_exp_avg_sq";

class Adam final : public Optimizer {
 public:
  Adam(const AdamOptions& options, bool decoupled) : options_(options), decoupled_(decoupled) {}

  std::string_view name() const override { return decoupled_ ? "adamw" : "adam"; }

  std::vector<std::string> state_names() const override {
    if (options_.amsgrad) return {kExpAvg, kExpAvgSq, kMaxExpAvgSq};
    return {kExpAvg, kExpAvgSq};
  }

 protected:
  void StepParameter(ParameterStore& store, size_t i, double lr, int64_t step, bool decay) override {
    const optim_math::AdamScalars s =
        optim_math::ComputeAdamScalars(lr, options_.beta1, options_.beta2, options_.eps,
                                       decay ? options_.weight_decay : 0.0, decoupled_, options_.amsgrad, step);
    const size_t off = store.offset(i);
    float* p = store.param(i).data();
    const float* g = store.grad(i).data();
    float* m = store.EnsureState(kExpAvg) + off;
    float* v = store.EnsureState(kExpAvgSq) + off;
    float* vmax = options_.amsgrad ? store.EnsureState(kMaxExpAvgSq) + off : nullptr;
    ForRanges(pool(), store.numel(i), [&](size_t b, size_t e) {
      float unused = 0.0f;
      const size_t simd = optim_simd::AdamSteps(p + b, g + b, m + b, v + b, vmax ? vmax + b : nullptr, e - b, s);
      for (size_t j = b + simd; j < e; ++j) {
        p[j] = optim_math::AdamElement(p[j], g[j], m + j, v + j, vmax ? vmax + j : &unused, s);
      }
    });
  }

 private:
  AdamOptions options_;
  bool decoupled_;
};

StatusOr<std::unique_ptr<Optimizer>> MakeAdamImpl(const AdamOptions& options, bool decoupled) {
  ONNXAMP_RETURN_IF_ERROR(CheckMomentOptions(decoupled ? "adamw" : "adam", options.beta1, options.beta2, options.eps,
                                             options.weight_decay));
  return std::unique_ptr<Optimizer>(std::make_unique<Adam>(options, decoupled));
}

}  // namespace

StatusOr<std::unique_ptr<Optimizer>> MakeAdam(const AdamOptions& options) { return MakeAdamImpl(options, false); }

StatusOr<std::unique_ptr<Optimizer>> MakeAdamW(const AdamOptions& options) { return MakeAdamImpl(options, true); }

}  // namespace onnxamp::trainer
