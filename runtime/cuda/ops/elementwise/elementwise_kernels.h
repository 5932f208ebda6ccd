// What the host-side files of the CUDA elementwise family share: their registration functions and the conversion of
// a broadcast plan into the launch geometry the kernels take.
#pragma once

#include "runtime/common/status.h"
#include "runtime/cuda/ops/elementwise/elementwise_launch.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"

namespace onnxamp::cuda {

// math_kernels.cc: unary math and activations, IsNaN, IsInf, Add Sub Mul Div Pow Mod PRelu BitShift, comparisons,
// logic, Not, Min, Max, Sum, Mean.
void RegisterCudaMathKernels(exec::KernelRegistry& r);
// convert_select_kernels.cc: Cast, CastLike, Clip, Where, Dropout.
void RegisterCudaConvertSelectKernels(exec::KernelRegistry& r);
// random_cuda.cc: RandomUniform, RandomNormal, their *Like forms, Bernoulli.
void RegisterCudaRandomKernels(exec::KernelRegistry& r);
// quantize_cuda.cc: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.
void RegisterCudaQuantizeKernels(exec::KernelRegistry& r);

namespace ew {

// The launch geometry of a plan (its merged dims and strides). Unimplemented when the plan has more inputs than
// kMaxInputs or more merged dims than kMaxDims.
StatusOr<Geometry> GeometryFromPlan(const ops::BroadcastPlan& plan);

}  // namespace ew
}  // namespace onnxamp::cuda
