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
#include "runtime/ops/loss/loss.h"

namespace onnxamp::cuda::norm_reduce {

inline cudaStream_t StreamOf(const exec::KernelContext& ctx) { return GetCudaContext(ctx).stream(); }

// The CPU's refusal of a non-float parameter type (ops::DispatchFloat's message), naming `what`.
inline Status CheckFloatParamType(DType dtype, std::string_view what) {
  Status st = ops::DispatchFloat(dtype, [](auto) { return Status::Ok(); });
  return st.ok() ? st : st.WithContext(what);
}

// As reduce::ReadParam without reading: `t` present, holding `count` elements, of a float type.
inline Status CheckParam(const ir::Tensor* t, int64_t count, std::string_view what) {
  if (!t) return InvalidArgument(what, " is missing");
  if (t->num_elements() != count) {
    return InvalidArgument(what, ": expected ", count, " elements, got shape ", ops::reduce::DimsToString(t->dims()));
  }
  return CheckFloatParamType(t->dtype(), what);
}

// CheckParam; on success `view` reads `t` flat (element e is t's element e).
inline Status CheckFlatParam(const ir::Tensor* t, int64_t count, std::string_view what, ParamView* view) {
  ONNXAMP_RETURN_IF_ERROR(CheckParam(t, count, what));
  view->dtype = t->dtype();
  view->data = t->data();
  view->rank = 1;
  view->dims[0] = count;
  view->strides[0] = 1;
  return Status::Ok();
}

// The launchers' name for a loss reduction.
inline LossReduction ToLaunchReduction(ops::LossReduction r) {
  switch (r) {
    case ops::LossReduction::kNone:
      return LossReduction::kNone;
    case ops::LossReduction::kSum:
      return LossReduction::kSum;
    case ops::LossReduction::kMean:
      break;
  }
  return LossReduction::kMean;
}

// The loss inputs as a loss kernel or its gradient's fills them in: `spec`'s reduction and ignore_index, x, the
// labels and their `shape` (from ops::ResolveLossShape), and the optional weights (`what` names them in errors).
inline Status FillLossInputs(const ops::LossSpec& spec, bool softmax, const ops::LossShape& shape, const ir::Tensor& x,
                             const ir::Tensor& labels, const ir::Tensor* weights, std::string_view what,
                             LossInputs* a) {
  a->softmax = softmax;
  a->reduction = ToLaunchReduction(spec.reduction);
  a->dtype = x.dtype();
  a->x = x.data();
  a->label_dtype = labels.dtype();
  a->labels = labels.data();
  a->batch = shape.batch;
  a->classes = shape.classes;
  a->inner = shape.inner;
  a->has_ignore_index = spec.ignore_index.has_value();
  a->ignore_index = spec.ignore_index.value_or(0);
  if (weights) {
    ParamView view;
    ONNXAMP_RETURN_IF_ERROR(CheckFlatParam(weights, a->classes, what, &view));
    a->weight_dtype = weights->dtype();
    a->weights = weights->data();
  }
  return Status::Ok();
}

}  // namespace onnxamp::cuda::norm_reduce
