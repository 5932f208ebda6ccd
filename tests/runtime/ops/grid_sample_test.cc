// GridSample and ReverseSequence beyond the backend suite's cases: GridSample in float16/bfloat16 against float64 on
// the same values, its refusal of 5-D input and of a grid that does not match; ReverseSequence on every movable type
// with a length of 0 and both layouts, and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/runtime/ops/tensor_ops_util.h"
#include "tests/runtime/ops/tolerance.h"

namespace onnxamp::testing {
namespace {

TEST(GridSampleOpTest, HalfTypesAgreeWithFloat64) {
  const std::vector<double> x = op_test::RandomValues(2 * 3 * 4 * 5, 7, -2, 2);
  const std::vector<double> g = op_test::RandomValues(2 * 3 * 3 * 2, 8, -1.2, 1.2);
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    auto run = [&](DType t) {
      OpTester op = Op("GridSample", 16);
      op.Attr(ir::Attribute::String("mode", mode)).Attr(ir::Attribute::String("padding_mode", "reflection"));
      op.Input(op_test::TensorOf(t, {2, 3, 4, 5}, x)).Input(op_test::TensorOf(t, {2, 3, 3, 2}, g));
      auto out = op.Run();
      EXPECT_TRUE(out.ok()) << out.status().message();
      return out.ok() ? (*out)[0] : ir::Tensor();
    };
    for (DType t : {DType::kFloat16, DType::kBFloat16}) {
      // The reference on the same rounded values: float64 inputs holding them.
      const ir::Tensor got = run(t);
      OpTester ref = Op("GridSample", 16);
      ref.Attr(ir::Attribute::String("mode", mode)).Attr(ir::Attribute::String("padding_mode", "reflection"));
      ref.Input(op_test::TensorOf(DType::kFloat64, {2, 3, 4, 5}, AsDoubles(op_test::TensorOf(t, {2, 3, 4, 5}, x))));
      ref.Input(op_test::TensorOf(DType::kFloat64, {2, 3, 3, 2}, AsDoubles(op_test::TensorOf(t, {2, 3, 3, 2}, g))));
      auto want = ref.Run();
      ASSERT_TRUE(want.ok()) << want.status().message();
      ExpectClose(got, AsDoubles((*want)[0]), std::string("GridSample ") + mode);
    }
  }
}

std::vector<float> Sample(const char* mode, const char* padding, const ir::Tensor& x, const ir::Tensor& grid) {
  OpTester t = Op("GridSample", 16);
  t.Attr(ir::Attribute::String("mode", mode)).Attr(ir::Attribute::String("padding_mode", padding));
  t.Input(x).Input(grid);
  auto out = t.Run();
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return {};
  const auto v = (*out)[0].values<float>();
  return {v.begin(), v.end()};
}

// The coordinates are computed in the grid's type, as PyTorch does: torch.nn.functional.affine_grid's identity grid
// for 4 outputs of 8 pixels holds -0.24999999f, which unnormalises to exactly 2.5 in float (nearest: pixel 2) and to
// 2.50000006 in double (pixel 3). Far coordinates sample as near ones, and a NaN grid value gives NaN.
TEST(GridSampleOpTest, FloatCoordinatesFarPointsAndNaN) {
  const ir::Tensor row = MakeTensor<float>({1, 1, 1, 8}, {0, 1, 2, 3, 4, 5, 6, 7});
  const ir::Tensor grid = MakeTensor<float>({1, 1, 4, 2}, {-0.75f, 0, -0.24999999f, 0, 0.24999999f, 0, 0.75f, 0});
  EXPECT_EQ(Sample("nearest", "zeros", row, grid), (std::vector<float>{0, 2, 4, 6}));
  std::vector<float> x(12);
  for (int i = 0; i < 12; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i + 1);
  const ir::Tensor img = MakeTensor<float>({1, 1, 3, 4}, x);
  for (const char* padding : {"border", "reflection", "zeros"}) {
    const std::vector<float> far = Sample("bicubic", padding, img, MakeTensor<float>({1, 1, 1, 2}, {1e30f, 0.1f}));
    const std::vector<float> near = Sample("bicubic", padding, img, MakeTensor<float>({1, 1, 1, 2}, {1e10f, 0.1f}));
    EXPECT_EQ(far, near) << padding;
    if (std::string(padding) == "border") EXPECT_NEAR(far[0], 8.84f, 0.01f);
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const char* mode : {"bilinear", "bicubic", "nearest"}) {
    const std::vector<float> v = Sample(mode, "zeros", img, MakeTensor<float>({1, 1, 1, 2}, {nan, 0.1f}));
    ASSERT_EQ(v.size(), 1u);
    EXPECT_TRUE(std::isnan(v[0])) << mode;
  }
}

// An infinite grid value whose coordinate turns NaN on the way samples nothing (0), in every mode: reflected
// (fmod(inf) is NaN: bilinear and nearest, which reflect the coordinate itself), or times the zero size - 1 of a
// one-pixel dim with align_corners (bicubic; bilinear and nearest reflect that NaN into the one pixel). Every other
// combination reads finite values.
TEST(GridSampleOpTest, InfiniteCoordinatesThatTurnNaNSampleNothing) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (int align : {0, 1}) {
      for (const std::vector<int64_t>& dims : {std::vector<int64_t>{1, 1, 3, 4}, std::vector<int64_t>{1, 1, 3, 1}}) {
        OpTester t = Op("GridSample", 16);
        t.Attr(ir::Attribute::String("mode", mode)).Attr(ir::Attribute::String("padding_mode", "reflection"));
        t.Attr(ir::Attribute::Int("align_corners", align));
        t.Input(op_test::TensorOf(DType::kFloat32, dims, op_test::RandomValues(12, 3, 1, 2)));
        t.Input(MakeTensor<float>({1, 1, 2, 2}, {inf, 0.1f, -inf, -0.2f}));
        auto out = t.Run();
        ASSERT_TRUE(out.ok()) << out.status().message();
        const bool bicubic = std::string(mode) == "bicubic";
        const bool nothing = bicubic ? align == 1 && dims[3] == 1 : align == 0 || dims[3] != 1;
        for (float v : (*out)[0].values<float>()) {
          const std::string what =
              std::string(mode) + " align " + std::to_string(align) + " W " + std::to_string(dims[3]);
          if (nothing) {
            EXPECT_EQ(v, 0.0f) << what;
          } else {
            EXPECT_TRUE(v >= 1.0f && v <= 2.0f) << what << ": " << v;  // a pixel, or a bicubic blend near one
          }
        }
      }
    }
  }
}

TEST(GridSampleOpTest, ErrorsNameWhatIsWrong) {
  OpTester five = Op("GridSample", 20);
  five.Input(ir::Tensor(DType::kFloat32, {1, 1, 2, 2, 2})).Input(ir::Tensor(DType::kFloat32, {1, 1, 1, 1, 3}));
  ExpectRunError(five, "GridSample runs on 4-D input [N, C, H, W] only");
  OpTester grid = Op("GridSample", 16);
  grid.Input(ir::Tensor(DType::kFloat32, {2, 1, 2, 2})).Input(ir::Tensor(DType::kFloat32, {1, 1, 1, 2}));
  ExpectRunError(grid, "must be [N, Ho, Wo, 2] with N 2, got [1,1,1,2]");
  OpTester mode = Op("GridSample", 16);
  mode.Attr(ir::Attribute::String("mode", "area"));
  mode.Input(ir::Tensor(DType::kFloat32, {1, 1, 2, 2})).Input(ir::Tensor(DType::kFloat32, {1, 1, 1, 2}));
  auto session = exec::Session::Create(mode.BuildModel(), mode.options);
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("attribute 'mode' must be bilinear/linear, nearest or bicubic/cubic"),
            std::string::npos)
      << session.status().message();
}

class ReverseSequenceTest : public ::testing::TestWithParam<DType> {};

TEST_P(ReverseSequenceTest, ReversesEachRowWithinItsLength) {
  const DType dt = GetParam();
  // [T 3, B 2, 2] codes 0..11; batch 0 reverses all 3 steps, batch 1 none (length 0).
  OpTester t = Op("ReverseSequence", 10);
  t.Input(IotaTensor(dt, {3, 2, 2})).Input(Int64s({3, 0}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGathered((*out)[0], dt, {3, 2, 2}, {8, 9, 2, 3, 4, 5, 6, 7, 0, 1, 10, 11}, nullptr, "time-major");
  // [B 2, T 3]: batch 0 reverses 2 steps, batch 1 all 3.
  OpTester b = Op("ReverseSequence", 10);
  b.Attr(ir::Attribute::Int("batch_axis", 0)).Attr(ir::Attribute::Int("time_axis", 1));
  b.Input(IotaTensor(dt, {2, 3})).Input(Int64s({2, 3}));
  out = b.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGathered((*out)[0], dt, {2, 3}, {1, 0, 2, 5, 4, 3}, nullptr, "batch-major");
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ReverseSequenceTest, ::testing::ValuesIn(MovableDTypes()), DTypeTestName);

TEST(ReverseSequenceOpTest, ErrorsNameWhatIsWrong) {
  OpTester t = Op("ReverseSequence", 10);
  t.Input(IotaTensor(DType::kFloat32, {3, 2})).Input(Int64s({4, 1}));
  ExpectRunError(t, "element 0 is 4, outside [0, 3]");
  OpTester n = Op("ReverseSequence", 10);
  n.Input(IotaTensor(DType::kFloat32, {3, 2})).Input(Int64s({1, 1, 1}));
  ExpectRunError(n, "must be [2] (the batch dim of input [3,2]), got [3]");
}

}  // namespace
}  // namespace onnxamp::testing
