// Tensor and DType tests: size arithmetic, overflow and negative dims, copy-on-write, names.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "runtime/common/dtype.h"
#include "runtime/ir/tensor.h"
#include "runtime/ir/type.h"

namespace onnxamp::ir {
namespace {

TEST(DTypeTest, CodesSizesAndNames) {
  EXPECT_EQ(DTypeFromCode(1), DType::kFloat32);
  EXPECT_EQ(DTypeFromCode(26), DType::kInt2);
  EXPECT_FALSE(DTypeFromCode(0).has_value());
  EXPECT_FALSE(DTypeFromCode(27).has_value());
  EXPECT_FALSE(DTypeFromCode(-1).has_value());
  EXPECT_EQ(DTypeBits(DType::kFloat16), 16);
  EXPECT_EQ(DTypeBits(DType::kInt4), 4);
  EXPECT_EQ(DTypeBits(DType::kUint2), 2);
  EXPECT_EQ(DTypeBits(DType::kComplex128), 128);
  EXPECT_EQ(DTypeBits(DType::kString), 0);
  EXPECT_EQ(DTypeName(DType::kBFloat16), "bfloat16");
  EXPECT_EQ(DTypeFromName("bf16"), DType::kBFloat16);
  EXPECT_EQ(DTypeFromName("float16"), DType::kFloat16);
  EXPECT_FALSE(DTypeFromName("float17").has_value());
  for (int code = 1; code <= kMaxDTypeCode; ++code) {
    DType t = *DTypeFromCode(code);
    EXPECT_EQ(DTypeFromName(DTypeName(t)), t) << code;
  }
  EXPECT_TRUE(IsFloatingPoint(DType::kFloat8E5M2));
  EXPECT_FALSE(IsFloatingPoint(DType::kInt8));
  EXPECT_TRUE(IsInteger(DType::kUint4));
  EXPECT_FALSE(IsInteger(DType::kBool));
  EXPECT_TRUE(IsSubByte(DType::kFloat4E2M1));
}

TEST(DTypeTest, PackedSizes) {
  EXPECT_EQ(PackedByteSize(DType::kInt4, 5), 3u);  // two per byte, rounded up
  EXPECT_EQ(PackedByteSize(DType::kInt2, 5), 2u);  // four per byte
  EXPECT_EQ(PackedByteSize(DType::kFloat32, 6), 24u);
  EXPECT_FALSE(PackedByteSize(DType::kFloat64, std::numeric_limits<uint64_t>::max() / 4).has_value());
  EXPECT_FALSE(PackedByteSize(DType::kString, 1).has_value());
}

TEST(TensorTest, ByteSizeRejectsNegativeAndOverflowingDims) {
  EXPECT_EQ(*Tensor::ComputeByteSize(DType::kFloat16, {2, 3}), 12u);
  EXPECT_EQ(*Tensor::ComputeByteSize(DType::kFloat32, {}), 4u);  // scalar
  EXPECT_EQ(*Tensor::ComputeByteSize(DType::kFloat32, {0, 7}), 0u);
  auto neg = Tensor::ComputeByteSize(DType::kFloat32, {2, -1});
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("dimension 1 is negative"), std::string::npos);
  auto big = Tensor::ComputeByteSize(DType::kFloat32, {int64_t{1} << 40, int64_t{1} << 40});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kOutOfRange);
  auto big_bytes = Tensor::ComputeByteSize(DType::kFloat64, {int64_t{1} << 61});
  ASSERT_FALSE(big_bytes.ok());
}

TEST(TensorTest, FromBytesChecksSize) {
  std::vector<std::byte> bytes(8);
  ASSERT_TRUE(Tensor::FromBytes(DType::kFloat16, {4}, bytes).ok());
  auto bad = Tensor::FromBytes(DType::kFloat32, {3}, bytes);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("8 bytes does not match 12 bytes"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(Tensor::FromBytes(DType::kFloat32, {int64_t{1} << 40, int64_t{1} << 40}, bytes).ok());
}

TEST(TensorTest, CopiesShareUntilWritten) {
  Tensor a(DType::kFloat32, {4});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
  a.mutable_values<float>()[0] = 1.5f;
  Tensor b = a;
  EXPECT_EQ(a.data(), b.data());
  b.mutable_values<float>()[0] = 2.5f;
  EXPECT_NE(a.data(), b.data());
  EXPECT_EQ(a.values<float>()[0], 1.5f);
  EXPECT_EQ(b.values<float>()[0], 2.5f);
  EXPECT_FALSE(a.SameContents(b));
  b.mutable_values<float>()[0] = 1.5f;
  EXPECT_TRUE(a.SameContents(b));
}

TEST(TensorTest, Strings) {
  Tensor s(DType::kString, {2});
  ASSERT_EQ(s.strings().size(), 2u);
  s.mutable_strings()[1] = std::string("a\0b", 3);
  EXPECT_EQ(s.nbytes(), 0u);
  EXPECT_EQ(s.num_elements(), 2);
}

TEST(TypeTest, ToStringAndEquality) {
  ValueType t = ValueType::Tensor(DType::kFloat16, Shape{Dim::Param("batch"), Dim::Value(128), Dim::Unknown()});
  EXPECT_EQ(t.ToString(), "tensor(float16)[batch,128,?]");
  EXPECT_EQ(ValueType::Tensor(DType::kFloat32).ToString(), "tensor(float)[*]");
  ValueType seq = ValueType::Sequence(ValueType::Tensor(DType::kInt64, Shape{}));
  EXPECT_EQ(seq.ToString(), "seq(tensor(int64)[])");
  ValueType map = ValueType::Map(DType::kString, ValueType::Tensor(DType::kFloat32));
  EXPECT_EQ(map.ToString(), "map(string,tensor(float)[*])");
  EXPECT_EQ(ValueType::Optional(seq).ToString(), "optional(seq(tensor(int64)[]))");
  EXPECT_EQ(seq, ValueType::Sequence(ValueType::Tensor(DType::kInt64, Shape{})));
  EXPECT_FALSE(seq == ValueType::Sequence(ValueType::Tensor(DType::kInt32, Shape{})));
}

}  // namespace
}  // namespace onnxamp::ir
