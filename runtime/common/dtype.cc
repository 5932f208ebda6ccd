// DType tables: sizes, names and classification.
#include "runtime/common/dtype.h"

#include <array>
#include <limits>

namespace onnxamp {
namespace {

struct DTypeInfo {
  DType type;
  int bits;
  std::string_view name;
};

constexpr std::array<DTypeInfo, kMaxDTypeCode + 1> kInfo = {{
    {DType::kUndefined, 0, "undefined"},
    {DType::kFloat32, 32, "float"},
    {DType::kUint8, 8, "uint8"},
    {DType::kInt8, 8, "int8"},
    {DType::kUint16, 16, "uint16"},
    {DType::kInt16, 16, "int16"},
    {DType::kInt32, 32, "int32"},
    {DType::kInt64, 64, "int64"},
    {DType::kString, 0, "string"},
    {DType::kBool, 8, "bool"},
    {DType::kFloat16, 16, "float16"},
    {DType::kFloat64, 64, "double"},
    {DType::kUint32, 32, "uint32"},
    {DType::kUint64, 64, "uint64"},
    {DType::kComplex64, 64, "complex64"},
    {DType::kComplex128, 128, "complex128"},
    {DType::kBFloat16, 16, "bfloat16"},
    {DType::kFloat8E4M3FN, 8, "float8e4m3fn"},
    {DType::kFloat8E4M3FNUZ, 8, "float8e4m3fnuz"},
    {DType::kFloat8E5M2, 8, "float8e5m2"},
    {DType::kFloat8E5M2FNUZ, 8, "float8e5m2fnuz"},
    {DType::kUint4, 4, "uint4"},
    {DType::kInt4, 4, "int4"},
    {DType::kFloat4E2M1, 4, "float4e2m1"},
    {DType::kFloat8E8M0, 8, "float8e8m0"},
    {DType::kUint2, 2, "uint2"},
    {DType::kInt2, 2, "int2"},
}};

static_assert([] {
  for (size_t i = 0; i < kInfo.size(); ++i)
    if (static_cast<size_t>(kInfo[i].type) != i) return false;
  return true;
}());

}  // namespace

std::optional<DType> DTypeFromCode(int64_t code) {
  if (code <= 0 || code > kMaxDTypeCode) return std::nullopt;
  return static_cast<DType>(code);
}

int DTypeBits(DType t) {
  auto i = static_cast<size_t>(t);
  return i < kInfo.size() ? kInfo[i].bits : 0;
}

std::optional<uint64_t> PackedByteSize(DType t, uint64_t count) {
  const int bits = DTypeBits(t);
  if (bits == 0) return std::nullopt;
  if (bits < 8) {
    const uint64_t per_byte = 8 / bits;
    return count / per_byte + (count % per_byte != 0 ? 1 : 0);
  }
  const uint64_t bytes = static_cast<uint64_t>(bits / 8);
  if (count > std::numeric_limits<uint64_t>::max() / bytes) return std::nullopt;
  return count * bytes;
}

std::string_view DTypeName(DType t) {
  auto i = static_cast<size_t>(t);
  return i < kInfo.size() ? kInfo[i].name : std::string_view("invalid");
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const DTypeInfo& info : kInfo)
    if (info.type != DType::kUndefined && info.name == name) return info.type;
  if (name == "fp32" || name == "f32" || name == "float32") return DType::kFloat32;
  if (name == "fp16" || name == "f16" || name == "half") return DType::kFloat16;
  if (name == "bf16") return DType::kBFloat16;
  if (name == "fp64" || name == "f64" || name == "float64") return DType::kFloat64;
  return std::nullopt;
}

bool IsFloatingPoint(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kFloat64:
    case DType::kBFloat16:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat4E2M1:
    case DType::kFloat8E8M0:
      return true;
    default:
      return false;
  }
}

bool IsInteger(DType t) {
  switch (t) {
    case DType::kUint8:
    case DType::kInt8:
    case DType::kUint16:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUint32:
    case DType::kUint64:
    case DType::kUint4:
    case DType::kInt4:
    case DType::kUint2:
    case DType::kInt2:
      return true;
    default:
      return false;
  }
}

bool IsSubByte(DType t) {
  const int bits = DTypeBits(t);
  return bits > 0 && bits < 8;
}

}  // namespace onnxamp
