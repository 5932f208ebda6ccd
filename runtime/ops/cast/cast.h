// Cast and CastLike: the element types they take and the parsing of their attributes, shared by the CPU kernel
// (cast_cpu.cc) and device kernels, so that every backend accepts the same models with the same messages.
#pragma once

#include <optional>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

// True for the element types Cast converts between on the CPU: every numeric type, bool and string.
bool IsCastable(DType t);

// Cast-1 names the target type with a string ("FLOAT", "INT64", ...): TensorProto.DataType's enum names. Nullopt for
// any other string.
std::optional<DType> DTypeFromProtoName(std::string_view s);

// Cast's target type from attribute `to` (a type name string at opset 1-5, a data_type code from 6), refused unless
// IsCastable. Does not check `saturate` (CheckCastSaturate does).
StatusOr<DType> ParseCastTo(const exec::KernelInfo& info);

// Checks Cast's and CastLike's `saturate` attribute (opset 19+: 0 or 1). It only changes float8 results, which are
// refused anyway; it is still checked.
Status CheckCastSaturate(const exec::KernelInfo& info);

}  // namespace onnxamp::ops
