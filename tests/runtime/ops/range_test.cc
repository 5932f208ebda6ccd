// Tests of Range: float and integer types, negative deltas, empty results, exact counts at integer extremes,
// and errors (zero delta, non-scalar inputs, mixed types).
#include <gtest/gtest.h>

#include <limits>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

template <typename T>
StatusOr<ir::Tensor> RunRange(ops::ComputeType<T> start, ops::ComputeType<T> limit, ops::ComputeType<T> delta) {
  OpTester t = Op("Range", 11);
  t.Input(MakeTensor<T>({}, {start})).Input(MakeTensor<T>({}, {limit})).Input(MakeTensor<T>({}, {delta}));
  ONNXAMP_ASSIGN_OR_RETURN(auto out, t.Run());
  return out[0];
}

TEST(RangeTest, FloatTypes) {
  auto f = RunRange<float>(1, 5, 2);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(Values<float>(*f), (std::vector<float>{1, 3}));
  auto d = RunRange<double>(0.5, -1, -0.5);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(Values<double>(*d), (std::vector<double>{0.5, 0, -0.5}));
  auto h = RunRange<Float16>(0, 1, 0.25f);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(Values<Float16>(*h), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  // 0.1 steps: element i is start + i*delta rounded once, not a running sum.
  auto many = RunRange<float>(0, 1, 0.1f);
  ASSERT_TRUE(many.ok());
  ASSERT_EQ(many->num_elements(), 10);
  EXPECT_EQ(Values<float>(*many)[7], static_cast<float>(7 * static_cast<double>(0.1f)));
}

TEST(RangeTest, IntegerTypes) {
  auto i32 = RunRange<int32_t>(10, 4, -3);
  ASSERT_TRUE(i32.ok()) << i32.status().message();
  EXPECT_EQ(Values<int32_t>(*i32), (std::vector<int32_t>{10, 7}));
  auto empty = RunRange<int64_t>(5, 1, 1);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->dims(), std::vector<int64_t>{0});
  auto i16 = RunRange<int16_t>(-3, 3, 2);
  ASSERT_TRUE(i16.ok());
  EXPECT_EQ(Values<int16_t>(*i16), (std::vector<int16_t>{-3, -1, 1}));
  // Extremes: the span overflows int64 but the count does not.
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  auto wide = RunRange<int64_t>(kMin, kMax, kMax);
  ASSERT_TRUE(wide.ok()) << wide.status().message();
  EXPECT_EQ(Values<int64_t>(*wide), (std::vector<int64_t>{kMin, -1, kMax - 1}));
}

TEST(RangeTest, Errors) {
  auto zero = RunRange<int32_t>(0, 5, 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("delta is 0"), std::string::npos);
  auto inf = RunRange<float>(0, INFINITY, 1);
  ASSERT_FALSE(inf.ok());
  EXPECT_NE(inf.status().message().find("non-finite element count"), std::string::npos) << inf.status().message();
  OpTester boolean = Op("Range", 11);
  boolean.Input(MakeTensor<bool>({}, {false})).Input(MakeTensor<bool>({}, {true})).Input(MakeTensor<bool>({}, {true}));
  ExpectRunError(boolean, "Range does not support input 0 of type bool");
  OpTester vec = Op("Range", 11);
  vec.Input(MakeTensor<float>({2}, {0, 1})).Input(MakeTensor<float>({}, {1})).Input(MakeTensor<float>({}, {1}));
  ExpectRunError(vec, "(start) must be a scalar, got shape [2]");
  OpTester mixed = Op("Range", 11);
  mixed.Input(MakeTensor<float>({}, {0})).Input(MakeTensor<double>({}, {1})).Input(MakeTensor<float>({}, {1}));
  ExpectRunError(mixed, "(limit) has type double but start has type float");
}

}  // namespace
}  // namespace onnxamp::testing
