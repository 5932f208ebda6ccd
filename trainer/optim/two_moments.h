// RAdam and NAdam: optimizers with Adam's two moments per element (torch's "exp_avg", "exp_avg_sq") whose update is
// one element function of per-step scalars (optim_math.h), run as its AVX2 loop with the scalar function on the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainer/optim/optimizer.h"
#include "trainer/optim/ranges.h"

namespace onnxamp::trainer {

// Compute(options, lr, step, decay): the scalars of a parameter's `step`-th step at rate lr, with the options' weight
// decay when `decay`; Simd(p, g, exp_avg, exp_avg_sq, n, scalars): the AVX2 loop, returning how many elements it did;
// Element(p, g, &exp_avg, &exp_avg_sq, scalars): one element, returning the new parameter. Template arguments, so that
// the element function inlines into the loop.
template <typename Options, auto Compute, auto Simd, auto Element>
class TwoMomentOptimizer final : public Optimizer {
 public:
  TwoMomentOptimizer(std::string_view name, Options options) : name_(name), options_(std::move(options)) {}

  std::string_view name() const override { return name_; }
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }

 protected:
  void StepParameter(ParameterStore& store, size_t i, double lr, int64_t step, bool decay) override {
    const auto s = Compute(options_, lr, step, decay);
    const size_t off = store.offset(i);
    float* p = store.param(i).data();
    const float* g = store.grad(i).data();
    float* m = store.EnsureState("exp_avg") + off;
    float* v = store.EnsureState("exp_avg_sq") + off;
    ForRanges(pool(), store.numel(i), [&](size_t b, size_t e) {
      const size_t done = Simd(p + b, g + b, m + b, v + b, e - b, s);
      for (size_t j = b + done; j < e; ++j) p[j] = Element(p[j], g[j], m + j, v + j, s);
    });
  }

 private:
  std::string_view name_;
  Options options_;
};

}  // namespace onnxamp::trainer
