// The operand checks of the integer ops (MatMulInteger, ConvInteger and the QLinear ops), shared by the CPU kernels
// (qlinear_cpu.cc) and the CUDA MatMulInteger and QLinearMatMul (runtime/cuda/ops/linalg/integer_matmul_cuda.cc).
#pragma once

#include <cstdint>
#include <string>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/quantize/quant_spec.h"

namespace onnxamp::ops {

// Input i (named `role`) is int8 or uint8.
inline Status CheckEightBit(const exec::KernelContext& ctx, size_t i, const char* role) {
  const ir::Tensor* t = ctx.input(i);
  if (t->dtype() != DType::kInt8 && t->dtype() != DType::kUint8) {
    return InvalidArgument(InputLabel(ctx, i, role), " is ", DTypeName(t->dtype()), ", expected int8 or uint8");
  }
  return Status::Ok();
}

// Input i (a zero point named `role`, present) has its operand's type and holds one value or `per_axis` values (a
// 1-D tensor).
inline Status CheckIntegerZeroPoint(const exec::KernelContext& ctx, size_t i, const char* role, DType operand,
                                    int64_t per_axis) {
  const ir::Tensor* t = ctx.input(i);
  const std::string label = InputLabel(ctx, i, role);
  if (t->dtype() != operand) {
    return InvalidArgument(label, " is ", DTypeName(t->dtype()), ", expected its operand's ", DTypeName(operand));
  }
  const int64_t n = t->num_elements();
  if (t->rank() > 1 || (n != 1 && (per_axis < 1 || n != per_axis))) {
    return InvalidArgument(label, " has shape ", ShapeToString(t->dims()), ", expected one value or [", per_axis, "]");
  }
  return Status::Ok();
}

// A scale input of the QLinear ops (input i named `role`, required): one value or `per_axis` values (a 1-D tensor) of
// float, float16 or bfloat16.
inline StatusOr<const ir::Tensor*> CheckQLinearScale(const exec::KernelContext& ctx, size_t i, const char* role,
                                                     int64_t per_axis) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* t, RequireInput(ctx, i, role));
  const std::string label = InputLabel(ctx, i, role);
  const int64_t n = t->num_elements();
  if (t->rank() > 1 || (n != 1 && (per_axis < 1 || n != per_axis))) {
    return InvalidArgument(label, " has shape ", ShapeToString(t->dims()), ", expected one value or [", per_axis, "]");
  }
  if (!IsFloatValueType(t->dtype())) {
    return InvalidArgument(label, " is ", DTypeName(t->dtype()), ", expected float, float16 or bfloat16");
  }
  return t;
}

// The QLinear ops' y_zero_point (input 7): one int8 or uint8 value, which gives the output its type.
inline StatusOr<const ir::Tensor*> OutputZeroPoint(const exec::KernelContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* yz, RequireInput(ctx, 7, "y_zero_point"));
  if ((yz->dtype() != DType::kInt8 && yz->dtype() != DType::kUint8) || yz->num_elements() != 1) {
    return InvalidArgument(InputLabel(ctx, 7, "y_zero_point"), " must be one int8 or uint8 value");
  }
  return yz;
}

}  // namespace onnxamp::ops
