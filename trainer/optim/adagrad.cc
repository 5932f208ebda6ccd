// Adagrad with learning-rate decay, L2 weight decay and an initial accumulator value (torch.optim.Adagrad,
// single-tensor path, dense gradients).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "trainer/optim/optim_math.h"
#include "trainer/optim/optim_simd.h"
#include "trainer/optim/optimizer.h"

namespace onnxamp::trainer {
namespace {

constexpr char kSum[] = "sum";

class Adagrad final : public Optimizer {
 public:
  explicit Adagrad(const AdagradOptions& options) : options_(options) {}

  std::string_view name() const override { return "adagrad"; }

  std::vector<std::string> state_names() const override { return {kSum}; }

 protected:
  void StepParameter(ParameterStore& store, size_t i, double lr, int64_t step, bool decay) override {
    const optim_math::AdagradScalars s =
        optim_math::ComputeAdagradScalars(lr, options_.lr_decay, decay ? options_.weight_decay : 0.0,
                                          options_.initial_accumulator_value, options_.eps, step);
    float* p = store.param(i).data();
    const float* g = store.grad(i).data();
    float* sum = store.EnsureState(kSum) + store.offset(i);
    const bool first_step = step == 1;
    ForRanges(pool(), store.numel(i), [&](size_t b, size_t e) {
      const size_t simd = optim_simd::AdagradSteps(p + b, g + b, sum + b, e - b, first_step, s);
      for (size_t j = b + simd; j < e; ++j) p[j] = optim_math::AdagradElement(p[j], g[j], sum + j, first_step, s);
    });
  }

 private:
  AdagradOptions options_;
};

}  // namespace

StatusOr<std::unique_ptr<Optimizer>> MakeAdagrad(const AdagradOptions& options) {
  const std::pair<const char*, double> checks[] = {{"lr_decay", options.lr_decay},
                                                   {"weight_decay", options.weight_decay},
                                                   {"initial_accumulator_value", options.initial_accumulator_value},
                                                   {"eps", options.eps}};
  for (const auto& [what, value] : checks) {
    if (!std::isfinite(value) || value < 0.0) {
      return InvalidArgument("adagrad: ", what, " must be finite and >= 0, got ", value);
    }
  }
  return std::unique_ptr<Optimizer>(std::make_unique<Adagrad>(options));
}

}  // namespace onnxamp::trainer
