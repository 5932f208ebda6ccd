// The operand checks of the integer ops (MatMulInteger, ConvInteger and the QLinear ops), shared by the CPU kernels
// (qlinear_cpu.cc) and the CUDA ones (runtime/cuda/ops/linalg/integer_matmul_cuda.cc,
// runtime/cuda/ops/dnn/conv_integer_cuda.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/conv_geometry.h"
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

// ConvInteger's and QLinearConv's inputs as both backends take them.
struct ConvIntegerPlan {
  ConvShape shape;
  WindowGeometry geo;
  std::vector<int64_t> out_dims;             // [N, M, out...]
  std::vector<double> x_zero_point{0.0};     // one value
  std::vector<double> w_zero_point{0.0};     // one value or M
  std::vector<double> bias;                  // QLinearConv's B (int32 values); empty when absent
  std::vector<float> scales;                 // QLinearConv: x_scale * w_scale / y_scale in float, one value or M
  const ir::Tensor* y_zero_point = nullptr;  // QLinearConv: one int8 or uint8 value, the output's type
};

// ConvInteger(x, w, x_zero_point?, w_zero_point?) or QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point,
// y_scale, y_zero_point, B?): 8-bit x and w, the zero points (w's per tensor or per output channel), scales and bias
// read (host tensors) and checked, and Conv's shape checks and geometry for Conv's attributes.
StatusOr<ConvIntegerPlan> ResolveConvInteger(const exec::KernelContext& ctx, const WindowAttrs& attrs, int64_t group,
                                             bool qlinear);

}  // namespace onnxamp::ops
