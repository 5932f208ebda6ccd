// Host-side helpers of the norm_reduce CUDA kernels: the context's stream and workspace as the launchers take them,
// and checks of float parameter tensors (scale, bias, weights) made on their shapes and types alone, with the
// messages of the CPU kernels' reduce::ReadParam (the values stay on the device).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce_norm.h"

namespace onnxamp::cuda::norm_reduce {

// Scratch from the session's CUDA workspace.
inline ScratchFn WorkspaceOf(const exec::KernelContext& ctx) {
  return [&ctx](size_t bytes) -> StatusOr<void*> { return GetCudaContext(ctx).Workspace(bytes); };
}

inline cudaStream_t StreamOf(const exec::KernelContext& ctx) { return GetCudaContext(ctx).stream(); }

// The CPU's refusal of a non-float parameter type (ops::DispatchFloat's message), naming `what`.
inline Status CheckFloatParamType(DType dtype, std::string_view what) {
  Status st = ops::DispatchFloat(dtype, [](auto) { return Status::Ok(); });
  return st.ok() ? st : st.WithContext(what);
}

// As reduce::ReadParam without reading: `t` present, holding `count` elements, of a float type. On success `view`
// reads it flat (element e is t's element e).
inline Status CheckFlatParam(const ir::Tensor* t, int64_t count, std::string_view what, ParamView* view) {
  if (!t) return InvalidArgument(what, " is missing");
  if (t->num_elements() != count) {
    return InvalidArgument(what, ": expected ", count, " elements, got shape ", ops::reduce::DimsToString(t->dims()));
  }
  ONNXAMP_RETURN_IF_ERROR(CheckFloatParamType(t->dtype(), what));
  view->dtype = t->dtype();
  view->data = t->data();
  view->rank = 1;
  view->dims[0] = count;
  view->strides[0] = 1;
  return Status::Ok();
}

}  // namespace onnxamp::cuda::norm_reduce
