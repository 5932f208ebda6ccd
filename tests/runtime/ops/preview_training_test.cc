// The ai.onnx.preview.training optimizer ops beyond the backend suite (whose cases all have T = 0 and float tensors):
// Adam's bias correction and norm_coefficient_post at T = 3, Adagrad's decayed rate, Momentum's first step, double
// tensors and a double R, and the one-line errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/runtime/ops/tensor_ops_util.h"
#include "tests/runtime/ops/tolerance.h"

namespace onnxamp::testing {
namespace {

constexpr char kDomain[] = "ai.onnx.preview.training";

OpTester Optimizer(const std::string& op, int outputs) {
  OpTester t = Op(op, 1);
  t.domain = kDomain;
  t.num_outputs = outputs;
  return t;
}

TEST(PreviewTrainingTest, AdamWithBiasCorrectionInDouble) {
  OpTester t = Optimizer("Adam", 3);
  t.Attr(ir::Attribute::Float("alpha", 0.8f))
      .Attr(ir::Attribute::Float("beta", 0.9f))
      .Attr(ir::Attribute::Float("epsilon", 1e-3f))
      .Attr(ir::Attribute::Float("norm_coefficient", 0.01f))
      .Attr(ir::Attribute::Float("norm_coefficient_post", 0.1f));
  t.Input(MakeTensor<double>({}, {0.5}))
      .Input(Int64s({3}, true))
      .Input(MakeTensor<double>({2}, {1.0, -2.0}))
      .Input(MakeTensor<double>({2}, {0.5, 0.25}))
      .Input(MakeTensor<double>({2}, {0.1, -0.2}))
      .Input(MakeTensor<double>({2}, {0.3, 0.4}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  const double a = 0.8f, b = 0.9f, eps = 1e-3f, norm = 0.01f, post = 0.1f;
  const double r = 0.5 * std::sqrt(1 - std::pow(b, 3)) / (1 - std::pow(a, 3));
  const std::vector<double> x = {1.0, -2.0}, g = {0.5, 0.25}, v = {0.1, -0.2}, h = {0.3, 0.4};
  for (size_t k = 0; k < 2; ++k) {
    const double gr = norm * x[k] + g[k];
    const double vn = a * v[k] + (1 - a) * gr, hn = b * h[k] + (1 - b) * gr * gr;
    EXPECT_NEAR(AsDoubles((*out)[1])[k], vn, 1e-15);
    EXPECT_NEAR(AsDoubles((*out)[2])[k], hn, 1e-15);
    EXPECT_NEAR(AsDoubles((*out)[0])[k], (1 - post) * (x[k] - r * vn / (std::sqrt(hn) + eps)), 1e-14);
  }
}

TEST(PreviewTrainingTest, AdagradDecayAndMomentumFirstStep) {
  OpTester ada = Optimizer("Adagrad", 2);
  ada.Attr(ir::Attribute::Float("decay_factor", 0.5f)).Attr(ir::Attribute::Float("epsilon", 0.25f));
  ada.Input(MakeTensor<float>({}, {0.2f}))
      .Input(Int64s({2}, true))
      .Input(MakeTensor<float>({1}, {1.0f}))
      .Input(MakeTensor<float>({1}, {2.0f}))
      .Input(MakeTensor<float>({1}, {5.0f}));
  auto a = ada.Run();
  ASSERT_TRUE(a.ok()) << a.status().message();
  // r = 0.2 / (1 + 2 * 0.5) = 0.1; H' = 5 + 4 = 9; X' = 1 - 0.1 * 2 / (3 + 0.25).
  EXPECT_FLOAT_EQ(static_cast<float>(AsDoubles((*a)[1])[0]), 9.0f);
  EXPECT_FLOAT_EQ(static_cast<float>(AsDoubles((*a)[0])[0]), 1.0f - 0.1f * 2.0f / 3.25f);
  for (int64_t step : {0, 1}) {
    OpTester m = Optimizer("Momentum", 2);
    m.Attr(ir::Attribute::Float("alpha", 0.5f))
        .Attr(ir::Attribute::Float("beta", 0.25f))
        .Attr(ir::Attribute::Float("norm_coefficient", 0.0f))
        .Attr(ir::Attribute::String("mode", "standard"));
    m.Input(MakeTensor<float>({}, {1.0f}))
        .Input(Int64s({step}, true))
        .Input(MakeTensor<float>({1}, {3.0f}))
        .Input(MakeTensor<float>({1}, {2.0f}))
        .Input(MakeTensor<float>({1}, {4.0f}));
    auto out = m.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    // V' = 0.5 * 4 + b * 2 with b = 1 on the first step (T = 0), beta after.
    const float vn = 2.0f + (step == 0 ? 2.0f : 0.5f);
    EXPECT_FLOAT_EQ(static_cast<float>(AsDoubles((*out)[1])[0]), vn) << "T " << step;
    EXPECT_FLOAT_EQ(static_cast<float>(AsDoubles((*out)[0])[0]), 3.0f - vn) << "T " << step;
  }
}

// Without the attribute, epsilon is ONNX's default 1e-6: a zero gradient on a zero accumulator leaves X as it is
// (0 / (0 + 1e-6)), where an epsilon of 0 would give NaN.
TEST(PreviewTrainingTest, DefaultEpsilonIsOneMillionth) {
  OpTester ada = Optimizer("Adagrad", 2);
  ada.Input(MakeTensor<float>({}, {0.1f}))
      .Input(Int64s({0}, true))
      .Input(MakeTensor<float>({2}, {1.0f, 2.0f}))
      .Input(MakeTensor<float>({2}, {0.0f, 1.0f}))
      .Input(MakeTensor<float>({2}, {0.0f, 0.0f}));
  auto a = ada.Run();
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(AsDoubles((*a)[0])[0], 1.0);
  EXPECT_FLOAT_EQ(static_cast<float>(AsDoubles((*a)[0])[1]), 2.0f - 0.1f * 1.0f / (1.0f + 1e-6f));
  OpTester adam = Optimizer("Adam", 3);
  adam.Input(MakeTensor<float>({}, {0.1f}))
      .Input(Int64s({0}, true))
      .Input(MakeTensor<float>({1}, {1.0f}))
      .Input(MakeTensor<float>({1}, {0.0f}))
      .Input(MakeTensor<float>({1}, {0.0f}))
      .Input(MakeTensor<float>({1}, {0.0f}));
  auto b = adam.Run();
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(AsDoubles((*b)[0])[0], 1.0);
}

TEST(PreviewTrainingTest, Errors) {
  OpTester shapes = Optimizer("Adagrad", 2);
  shapes.Input(MakeTensor<float>({}, {0.1f}))
      .Input(Int64s({0}, true))
      .Input(MakeTensor<float>({2}, {1, 2}))
      .Input(MakeTensor<float>({3}, {1, 2, 3}))
      .Input(MakeTensor<float>({2}, {0, 0}));
  ExpectRunError(shapes, "expected X's float [2]");
  OpTester step = Optimizer("Adagrad", 2);
  step.Input(MakeTensor<float>({}, {0.1f}))
      .Input(MakeTensor<float>({}, {0.0f}))
      .Input(MakeTensor<float>({1}, {1}))
      .Input(MakeTensor<float>({1}, {1}))
      .Input(MakeTensor<float>({1}, {0}));
  ExpectRunError(step, "must be one int64, got float []");
  OpTester count = Optimizer("Adam", 3);
  count.Input(MakeTensor<float>({}, {0.1f}))
      .Input(Int64s({0}, true))
      .Input(MakeTensor<float>({1}, {1}))
      .Input(MakeTensor<float>({1}, {1}))
      .Input(MakeTensor<float>({1}, {0}));
  ExpectRunError(count, "Adam takes R, T and 4 inputs per tensor, got 5 inputs");
  OpTester mode = Optimizer("Momentum", 2);
  mode.Attr(ir::Attribute::Float("alpha", 0.5f))
      .Attr(ir::Attribute::Float("beta", 0.5f))
      .Attr(ir::Attribute::Float("norm_coefficient", 0.0f))
      .Attr(ir::Attribute::String("mode", "heavy"));
  mode.Input(MakeTensor<float>({}, {0.1f}))
      .Input(Int64s({0}, true))
      .Input(MakeTensor<float>({1}, {1}))
      .Input(MakeTensor<float>({1}, {1}))
      .Input(MakeTensor<float>({1}, {0}));
  ExpectRunError(mode, "attribute 'mode' is 'heavy', expected standard or nesterov");
  OpTester missing = Optimizer("Momentum", 2);
  missing.Attr(ir::Attribute::Float("alpha", 0.5f)).Attr(ir::Attribute::String("mode", "standard"));
  missing.Input(MakeTensor<float>({}, {0.1f}))
      .Input(Int64s({0}, true))
      .Input(MakeTensor<float>({1}, {1}))
      .Input(MakeTensor<float>({1}, {1}))
      .Input(MakeTensor<float>({1}, {0}));
  ExpectRunError(missing, "attribute 'beta' is required");
}

}  // namespace
}  // namespace onnxamp::testing
