// NonZero, Compress, EyeLike and Hardmax beyond the backend suite's cases: a scalar NonZero, a condition shorter than
// the axis, strings through Compress, EyeLike's diagonals and dtype, Hardmax's first maximum on ties and NaN, and the
// one-line errors; LRN with an even window against the spec's formula.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

ir::Tensor Bools(const std::vector<bool>& v) { return MakeTensor<bool>({static_cast<int64_t>(v.size())}, v); }

TEST(CompressOpTest, NonZeroOfAScalarAndOfAMatrix) {
  OpTester scalar = Op("NonZero", 13);
  scalar.Input(MakeTensor<float>({}, {2.5f}));
  auto out = scalar.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(Int64Values((*out)[0]), (std::vector<int64_t>{0}));
  OpTester m = Op("NonZero", 13);
  m.Input(MakeTensor<float>({2, 3}, {0, 1, 0, 2, 0, 3}));
  out = m.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Int64Values((*out)[0]), (std::vector<int64_t>{0, 1, 1, 1, 0, 2}));
}

TEST(CompressOpTest, ShortConditionAndEveryType) {
  for (DType dt : MovableDTypes()) {
    // [3, 2] codes 0..5 along axis 0 with condition {false, true}: row 1 only (row 2 is past the condition).
    OpTester t = Op("Compress", 11);
    t.Attr(ir::Attribute::Int("axis", -2)).Input(IotaTensor(dt, {3, 2})).Input(Bools({false, true}));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectGathered((*out)[0], dt, {1, 2}, {2, 3}, nullptr, "Compress");
    OpTester flat = Op("Compress", 11);
    flat.Input(IotaTensor(dt, {3, 2})).Input(Bools({true, false, false, true, true}));
    out = flat.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectGathered((*out)[0], dt, {3}, {0, 3, 4}, nullptr, "Compress flattened");
  }
}

TEST(CompressOpTest, EyeLikeDiagonalsAndDtype) {
  OpTester t = Op("EyeLike", 9);
  t.Attr(ir::Attribute::Int("k", -1))
      .Attr(ir::Attribute::Int("dtype", 7))
      .Input(MakeTensor<float>({3, 2}, {9, 9, 9, 9, 9, 9}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dtype(), DType::kInt64);
  EXPECT_EQ(Int64Values((*out)[0]), (std::vector<int64_t>{0, 0, 1, 0, 0, 1}));
  OpTester bad = Op("EyeLike", 9);
  bad.Input(MakeTensor<float>({2}, {1, 2}));
  ExpectRunError(bad, "must be 2-D, got [2]");
}

TEST(CompressOpTest, HardmaxTakesTheFirstMaximumAndNaNWins) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  OpTester t = Op("Hardmax", 13);
  t.Input(MakeTensor<float>({3, 3}, {1, 3, 3, nan, 2, 1, nan, nan, nan}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  const auto v = (*out)[0].values<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.end()), (std::vector<float>{0, 1, 0, 1, 0, 0, 1, 0, 0}));
  // Before opset 13 the input is coerced to 2-D at axis 1: one maximum over each sample's 4 values.
  OpTester legacy = Op("Hardmax", 11);
  legacy.Input(MakeTensor<float>({2, 2, 2}, {1, 2, 5, 3, 0, 0, 0, 7}));
  out = legacy.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  const auto w = (*out)[0].values<float>();
  EXPECT_EQ(std::vector<float>(w.begin(), w.end()), (std::vector<float>{0, 0, 1, 0, 0, 0, 0, 1}));
}

TEST(CompressOpTest, EyeLikeRefusesTypesWithoutOnes) {
  OpTester t = Op("EyeLike", 9);
  t.Attr(ir::Attribute::Int("dtype", 14)).Input(MakeTensor<float>({2, 2}, {0, 0, 0, 0}));  // complex64
  auto session = exec::Session::Create(t.BuildModel(), t.options);
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("attribute 'dtype' 14 is not a numeric or bool element type"),
            std::string::npos)
      << session.status().message();
}

// The window of channel c is [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]: with size 4, one channel before
// and two after.
TEST(CompressOpTest, LrnEvenWindowFollowsTheSpec) {
  const std::vector<float> x = {1, -2, 3, 0.5f, -1.5f};
  OpTester t = Op("LRN", 13);
  t.Attr(ir::Attribute::Int("size", 4)).Attr(ir::Attribute::Float("alpha", 0.4f));
  t.Attr(ir::Attribute::Float("beta", 0.75f)).Attr(ir::Attribute::Float("bias", 2.0f));
  t.Input(MakeTensor<float>({1, 5, 1}, x));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  for (int c = 0; c < 5; ++c) {
    double sum = 0;
    for (int i = std::max(0, c - 1); i <= std::min(4, c + 2); ++i) sum += static_cast<double>(x[i]) * x[i];
    const double want = x[c] / std::pow(2.0 + 0.4 / 4 * sum, 0.75);
    EXPECT_NEAR((*out)[0].values<float>()[c], want, 1e-6) << "channel " << c;
  }
}

TEST(CompressOpTest, ConditionMustBeOneDimensionalBool) {
  OpTester t = Op("Compress", 11);
  t.Input(MakeTensor<float>({2}, {1, 2})).Input(MakeTensor<float>({2}, {1, 0}));
  ExpectRunError(t, "must be a 1-D bool tensor, got float [2]");
}

}  // namespace
}  // namespace onnxamp::testing
