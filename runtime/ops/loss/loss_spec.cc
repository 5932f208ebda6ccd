// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss: attribute parsing and input checks shared by every backend
// (see loss.h).
#include <string>

#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/loss/loss.h"

namespace onnxamp::ops {

Status ParseLossSpec(const exec::KernelInfo& info, bool softmax, LossSpec* spec) {
  spec->softmax = softmax;
  const std::string reduction = info.node.GetString("reduction", "mean");
  if (reduction == "none") {
    spec->reduction = LossReduction::kNone;
  } else if (reduction == "sum") {
    spec->reduction = LossReduction::kSum;
  } else if (reduction == "mean") {
    spec->reduction = LossReduction::kMean;
  } else {
    return InvalidArgument("attribute 'reduction' must be 'none', 'sum' or 'mean', got '", reduction, "'");
  }
  if (info.node.FindAttribute("ignore_index")) spec->ignore_index = info.node.GetInt("ignore_index", 0);
  return Status::Ok();
}

StatusOr<LossShape> ResolveLossShape(const LossSpec& spec, const ir::Tensor* x, const ir::Tensor* labels) {
  const char* in_name = spec.input_name();
  const char* label_name = spec.label_name();
  if (!x) return InvalidArgument(in_name, " is missing");
  if (!labels) return InvalidArgument(label_name, " is missing");
  if (x->rank() < 2) {
    return InvalidArgument(in_name, ": expected rank >= 2 ([N, C, ...]), got shape ", reduce::DimsToString(x->dims()));
  }
  LossShape shape;
  shape.label_dims = x->dims();
  shape.label_dims.erase(shape.label_dims.begin() + 1);
  if (labels->dims() != shape.label_dims) {
    return InvalidArgument(label_name, ": expected shape ", reduce::DimsToString(shape.label_dims), " (", in_name,
                           " without dimension 1), got ", reduce::DimsToString(labels->dims()));
  }
  if (labels->dtype() != DType::kInt32 && labels->dtype() != DType::kInt64) {
    return InvalidArgument(label_name, ": expected int32 or int64, got ", DTypeName(labels->dtype()));
  }
  shape.batch = x->dims()[0];
  shape.classes = x->dims()[1];
  shape.inner = reduce::Product(x->dims(), 2);
  if (spec.reduction == LossReduction::kNone) shape.loss_dims = shape.label_dims;
  return shape;
}

}  // namespace onnxamp::ops
