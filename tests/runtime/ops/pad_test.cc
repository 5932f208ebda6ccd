// Tests of Pad: constant, edge, reflect and wrap modes on every element type, pads larger than the axis,
// negative pads (cropping), the axes input (18+), the attribute forms of opsets 1-10, and errors.
#include <gtest/gtest.h>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

// numpy.pad's index rule for one axis of size n: the source index of padded position p (p - begin outside
// [0, n) is folded by the mode). -1 means the constant.
int64_t NumpyPadIndex(const std::string& mode, int64_t n, int64_t begin, int64_t p) {
  int64_t v = p - begin;
  if (v >= 0 && v < n) return v;
  if (mode == "constant") return -1;
  if (mode == "edge") return v < 0 ? 0 : n - 1;
  if (mode == "wrap") return ((v % n) + n) % n;
  // reflect: walk |v| steps from element 0 towards v, bouncing off both ends without repeating them.
  if (n == 1) return 0;
  int64_t pos = 0, dir = v < 0 ? -1 : 1;
  for (int64_t s = 0; s < (v < 0 ? -v : v); ++s) {
    if (pos + dir < 0 || pos + dir >= n) dir = -dir;
    pos += dir;
  }
  return pos;
}

class PadTest : public ::testing::TestWithParam<DType> {};

TEST_P(PadTest, EveryModeOnEveryType) {
  const DType dt = GetParam();
  ir::Tensor fill(dt, {});
  EncodeElement(fill, 0, 77);
  for (const std::string mode : {"constant", "edge", "reflect", "wrap"}) {
    // [2,3] padded by rows (1, 2) and columns (4, 1): columns 4 > 3 exercise repeated reflection/wrapping.
    OpTester t = Op("Pad", 19);
    t.Input(IotaTensor(dt, {2, 3})).Input(Int64s({1, 4, 2, 1})).Input(fill);
    t.Attr(ir::Attribute::String("mode", mode));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << mode << ": " << out.status().message();
    std::vector<int64_t> src;
    for (int64_t r = 0; r < 5; ++r) {
      for (int64_t c = 0; c < 8; ++c) {
        const int64_t sr = NumpyPadIndex(mode, 2, 1, r), sc = NumpyPadIndex(mode, 3, 4, c);
        src.push_back(sr < 0 || sc < 0 ? -1 : sr * 3 + sc);
      }
    }
    ExpectGathered((*out)[0], dt, {5, 8}, src, &fill, mode);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, PadTest, ::testing::ValuesIn(MovableDTypes()), DTypeTestName);

TEST(PadOpTest, KnownValues) {
  // numpy.pad([1,2,3], (4,4), mode) for each mode.
  const std::vector<std::pair<std::string, std::vector<float>>> cases = {
      {"reflect", {1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3}},
      {"edge", {1, 1, 1, 1, 1, 2, 3, 3, 3, 3, 3}},
      {"wrap", {3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1}},
      {"constant", {0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0}}};
  for (const auto& [mode, want] : cases) {
    OpTester t = Op("Pad", 19);
    t.Input(MakeTensor<float>({3}, {1, 2, 3})).Input(Int64s({4, 4})).Attr(ir::Attribute::String("mode", mode));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(Values<float>((*out)[0]), want) << mode;
  }
}

TEST(PadOpTest, NegativePadsCropThenPad) {
  // [1,2,3,4] with pads (-1, 2) in reflect mode: crop to [2,3,4], then reflect the end: [2,3,4,3,2].
  OpTester t = Op("Pad", 13);
  t.Input(MakeTensor<float>({4}, {1, 2, 3, 4})).Input(Int64s({-1, 2})).Attr(ir::Attribute::String("mode", "reflect"));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{2, 3, 4, 3, 2}));
  OpTester both = Op("Pad", 13);
  both.Input(MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6})).Input(Int64s({0, -1, -1, 1}));
  both.Input(MakeTensor<float>({}, {9}));
  out = both.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{2, 3, 9}));
}

TEST(PadOpTest, AxesInputAndOldAttributes) {
  OpTester axes = Op("Pad", 18);
  axes.Input(MakeTensor<float>({2, 2}, {1, 2, 3, 4})).Input(Int64s({1, 1})).Input(MakeTensor<float>({}, {0}));
  axes.Input(Int64s({-1}));
  auto out = axes.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{0, 1, 2, 0, 0, 3, 4, 0}));

  OpTester v2 = Op("Pad", 2);
  v2.Input(MakeTensor<double>({2}, {1, 2})).Attr(ir::Attribute::Ints("pads", {1, 0}));
  v2.Attr(ir::Attribute::Float("value", 1.5f));
  out = v2.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<double>((*out)[0]), (std::vector<double>{1.5, 1, 2}));

  OpTester v1 = Op("Pad", 1);
  v1.Input(MakeTensor<Float16>({2}, {1, 2})).Attr(ir::Attribute::Ints("paddings", {0, 2}));
  v1.Attr(ir::Attribute::String("mode", "edge"));
  out = v1.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<Float16>((*out)[0]), (std::vector<float>{1, 2, 2, 2}));
}

TEST(PadOpTest, Errors) {
  OpTester count = Op("Pad", 13);
  count.Input(ir::Tensor(DType::kFloat32, {2, 2})).Input(Int64s({1, 1}));
  ExpectRunError(count, "pads [1,1] has 2 entries; expected 4");
  OpTester negative = Op("Pad", 13);
  negative.Input(ir::Tensor(DType::kFloat32, {2})).Input(Int64s({-2, -1}));
  ExpectRunError(negative, "give a negative output size -1");
  OpTester empty = Op("Pad", 13);
  empty.Input(ir::Tensor(DType::kFloat32, {0})).Input(Int64s({1, 0})).Attr(ir::Attribute::String("mode", "edge"));
  ExpectRunError(empty, "cannot pad axis 0 in edge mode");
  OpTester wrap = Op("Pad", 18);
  wrap.Input(ir::Tensor(DType::kFloat32, {2})).Input(Int64s({1, 0})).Attr(ir::Attribute::String("mode", "wrap"));
  auto session = exec::Session::Create(wrap.BuildModel());
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("attribute 'mode' is 'wrap'"), std::string::npos)
      << session.status().message();
  OpTester type = Op("Pad", 13);
  type.Input(ir::Tensor(DType::kFloat32, {2})).Input(Int64s({1, 0})).Input(ir::Tensor(DType::kFloat64, {}));
  ExpectRunError(type, "has type double, expected the data's type float");
}

}  // namespace
}  // namespace onnxamp::testing
