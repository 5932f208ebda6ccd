// Helpers of the optimizer tests: one parameter in a store, steps over a list of gradients, and the comparison with
// a float64 reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "trainer/optim/optimizer.h"
#include "trainer/state/parameter_store.h"

namespace onnxamp::trainer::optim_test {

using Grads = std::vector<std::vector<float>>;  // one gradient vector per step

// A parameter of four elements and four steps' gradients, shared by the optimizer tests.
inline const std::vector<float> kP0 = {1.0f, -0.5f, 2.0f, 0.25f};
inline const Grads kGrads = {
    {0.1f, -0.2f, 0.3f, 0.05f}, {0.4f, 0.1f, -0.3f, 0.2f}, {-0.2f, 0.3f, 0.1f, -0.1f}, {0.05f, -0.05f, 0.2f, 0.3f}};

// The optimizer a Make* function returned, expected to be ok.
inline std::unique_ptr<Optimizer> Ok(StatusOr<std::unique_ptr<Optimizer>> opt) {
  EXPECT_TRUE(opt.ok()) << opt.status().ToString();
  return std::move(opt).value();
}

// A store of one parameter "w" holding p0.
inline ParameterStore OneParameter(const std::vector<float>& p0) {
  StatusOr<ParameterStore> store = ParameterStore::Create({{"w", {static_cast<int64_t>(p0.size())}}});
  EXPECT_TRUE(store.ok());
  std::copy(p0.begin(), p0.end(), store->param(0).begin());
  return std::move(store).value();
}

// One Step of `opt` on the store's parameter 0 with gradient g.
inline void StepWith(Optimizer& opt, ParameterStore& store, double lr, const std::vector<float>& g) {
  store.ZeroGrads();
  std::copy(g.begin(), g.end(), store.grad(0).begin());
  store.set_has_grad(0, true);
  Status s = opt.Step(store, lr);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// Runs `opt` over the gradients, one Step per entry, from p0; returns the parameter.
inline std::vector<float> RunSteps(Optimizer& opt, double lr, const std::vector<float>& p0, const Grads& grads) {
  ParameterStore store = OneParameter(p0);
  for (const std::vector<float>& g : grads) StepWith(opt, store, lr, g);
  return {store.param(0).begin(), store.param(0).end()};
}

// Every element within rel of the reference (relative to max(1, |expected|)).
inline void ExpectClose(const std::vector<float>& actual, const std::vector<double>& expected, double rel = 1e-6) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t j = 0; j < actual.size(); ++j) {
    EXPECT_NEAR(actual[j], expected[j], rel * std::max(1.0, std::fabs(expected[j]))) << "element " << j;
  }
}

}  // namespace onnxamp::trainer::optim_test
