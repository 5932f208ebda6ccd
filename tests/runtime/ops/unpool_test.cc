// MaxUnpool: the inverse of MaxPool with its Indices (an unpooled MaxPool puts every maximum back where it was), the
// zero padding output_shape adds, and the one-line errors.
#include <gtest/gtest.h>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

TEST(MaxUnpoolTest, PutsMaxPoolsMaximaBack) {
  std::vector<float> x(2 * 4 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 11) - 5.0f;
  OpTester pool = Op("MaxPool", 12, 2);
  pool.Attr(ir::Attribute::Ints("kernel_shape", {2, 2})).Attr(ir::Attribute::Ints("strides", {2, 2}));
  pool.Input(MakeTensor<float>({1, 2, 4, 4}, x));
  auto pooled = pool.Run();
  ASSERT_TRUE(pooled.ok()) << pooled.status().message();
  OpTester unpool = Op("MaxUnpool", 11);
  unpool.Attr(ir::Attribute::Ints("kernel_shape", {2, 2})).Attr(ir::Attribute::Ints("strides", {2, 2}));
  unpool.Input((*pooled)[0]).Input((*pooled)[1]);
  auto out = unpool.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ((*out)[0].dims(), (std::vector<int64_t>{1, 2, 4, 4}));
  // Every nonzero output is the input's value there, and each 2x2 window holds its maximum.
  const std::vector<float> y((*out)[0].values<float>().begin(), (*out)[0].values<float>().end());
  for (size_t i = 0; i < x.size(); ++i) {
    if (y[i] != 0) EXPECT_EQ(y[i], x[i]) << i;
  }
  // With output_shape [1, 2, 5, 6] the same values sit at the same coordinates, zeros after.
  OpTester padded = unpool;
  padded.Input(Int64s({1, 2, 5, 6}));
  out = padded.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  const auto z = (*out)[0].values<float>();
  for (int64_t c = 0; c < 2; ++c) {
    for (int64_t h = 0; h < 5; ++h) {
      for (int64_t w = 0; w < 6; ++w) {
        const float want = h < 4 && w < 4 ? y[static_cast<size_t>((c * 4 + h) * 4 + w)] : 0.0f;
        EXPECT_EQ(z[static_cast<size_t>((c * 5 + h) * 6 + w)], want) << c << " " << h << " " << w;
      }
    }
  }
}

TEST(MaxUnpoolTest, ErrorsNameWhatIsWrong) {
  ir::Tensor idx(DType::kInt64, {1, 1, 1, 2});
  idx.mutable_values<int64_t>()[0] = 1;
  idx.mutable_values<int64_t>()[1] = 9;
  OpTester t = Op("MaxUnpool", 11);
  t.Attr(ir::Attribute::Ints("kernel_shape", {2, 2})).Attr(ir::Attribute::Ints("strides", {2, 2}));
  t.Input(MakeTensor<float>({1, 1, 1, 2}, {1, 2})).Input(idx);
  ExpectRunError(t, "index 9 (element 1 of input 'in1' (I)) is outside the unpooled shape [1,1,2,4]");
  OpTester small = Op("MaxUnpool", 11);
  small.Attr(ir::Attribute::Ints("kernel_shape", {2, 2})).Attr(ir::Attribute::Ints("strides", {2, 2}));
  idx.mutable_values<int64_t>()[1] = 3;
  small.Input(MakeTensor<float>({1, 1, 1, 2}, {1, 2})).Input(idx).Input(Int64s({1, 1, 2, 3}));
  ExpectRunError(small, "must keep N and C and be at least the unpooled shape [1,1,2,4]");
}

}  // namespace
}  // namespace onnxamp::testing
