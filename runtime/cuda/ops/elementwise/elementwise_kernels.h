// What the host-side files of the CUDA elementwise family share: their registration functions and the conversion of
// a broadcast plan into the launch geometry the kernels take.
#pragma once

#include "runtime/common/status.h"
#include "runtime/cuda/ops/elementwise/elementwise_launch.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"

namespace onnxamp::cuda {

// math_kernels.cc: unary math and activations, Add Sub Mul Div Pow, comparisons, logic, Not, Min, Max.
void RegisterCudaMathKernels(exec::KernelRegistry& r);
// convert_select_kernels.cc: Cast, CastLike, Clip, Where, Dropout.
void RegisterCudaConvertSelectKernels(exec::KernelRegistry& r);

namespace ew {

// The launch geometry of a plan (its merged dims and strides). Unimplemented when the plan has more inputs than
// kMaxInputs or more merged dims than kMaxDims.
StatusOr<Geometry> GeometryFromPlan(const ops::BroadcastPlan& plan);

}  // namespace ew
}  // namespace onnxamp::cuda
