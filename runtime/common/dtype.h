// Element types: ONNX TensorProto.DataType numbering, sizes and names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace onnxamp {

// The numeric values are ONNX's TensorProto.DataType codes, so a DType casts to and from the proto field.
enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUint4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUint2 = 25,
  kInt2 = 26,
};

inline constexpr int32_t kMaxDTypeCode = 26;

// The DType for an ONNX data_type code, or nullopt when the code is not one ONNX defines (0 included).
std::optional<DType> DTypeFromCode(int64_t code);

// Bits one element occupies in packed (raw_data) storage: 2, 4, 8, 16, 32, 64 or 128. 0 for kString and
// kUndefined, whose elements have no fixed size.
int DTypeBits(DType t);

// Bytes needed to store `count` packed elements (sub-byte types round up to whole bytes); nullopt on overflow
// or for types without a fixed size.
std::optional<uint64_t> PackedByteSize(DType t, uint64_t count);

// ONNX's lower-case name: "float", "float16", "bfloat16", "int64", ...
std::string_view DTypeName(DType t);

// Parses a name as DTypeName writes it, plus a few common aliases ("fp16", "bf16", "fp32", "f32").
std::optional<DType> DTypeFromName(std::string_view name);

bool IsFloatingPoint(DType t);  // float types of any width, including fp8/fp4
bool IsInteger(DType t);        // signed and unsigned integers of any width (not bool)
bool IsSubByte(DType t);        // int4/uint4/fp4/int2/uint2

}  // namespace onnxamp
