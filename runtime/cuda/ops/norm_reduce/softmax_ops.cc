// Softmax / LogSoftmax and SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss on CUDA: attributes and shapes
// checked as the CPU kernels do (runtime/ops/softmax/softmax_cpu.cc, runtime/ops/loss/loss_cpu.cc), then the
// launchers of softmax_kernels.cu. Labels and weights stay on the device: a label outside [0, C) that is not
// ignore_index gives a NaN loss there instead of the CPU's error (finding it would need a host synchronisation).
#include <optional>
#include <string>
#include <vector>

#include "runtime/cuda/ops/norm_reduce/norm_reduce_host.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/reduce.h"

namespace onnxamp::cuda::norm_reduce {
namespace {

template <bool kLog>
class SoftmaxCuda : public exec::OpKernel {
 public:
  SoftmaxCuda(const exec::KernelInfo& info, Status* st) : coerce_2d_(info.opset < 13) {
    axis_ = info.node.GetInt("axis", coerce_2d_ ? 1 : -1);
    if (auto rank = ops::reduce::DeclaredRank(info.node, 0)) {
      Status s = CheckAxis(*rank).status();
      if (!s.ok()) *st = s.WithContext("attribute 'axis'");
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (input) is missing");
    StatusOr<int64_t> axis = CheckAxis(x->rank());
    if (!axis.ok()) return axis.status().WithContext("attribute 'axis'");
    ops::reduce::AxisView v;
    if (coerce_2d_) {
      v.outer = ops::reduce::Product(x->dims(), 0, *axis);
      v.n = ops::reduce::Product(x->dims(), *axis);
    } else {
      v = ops::reduce::ViewAround(x->dims(), *axis);
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    if (x->num_elements() == 0) return Status::Ok();
    return LaunchSoftmax(kLog, x->dtype(), x->data(), y->mutable_data(), v.outer, v.n, v.inner, StreamOf(ctx));
  }

 private:
  // The axis as an index. Coerced to 2-D, `axis` == rank is accepted too (every row has one element).
  StatusOr<int64_t> CheckAxis(int64_t rank) const {
    if (coerce_2d_ && axis_ == rank) return axis_;
    return ops::reduce::NormalizeAxis(axis_, rank);
  }

  bool coerce_2d_;
  int64_t axis_ = -1;
};

template <bool kSoftmax>
class LossCuda : public exec::OpKernel {
 public:
  LossCuda(const exec::KernelInfo& info, Status* st) {
    const std::string reduction = info.node.GetString("reduction", "mean");
    if (reduction == "none") {
      reduction_ = LossReduction::kNone;
    } else if (reduction == "sum") {
      reduction_ = LossReduction::kSum;
    } else if (reduction == "mean") {
      reduction_ = LossReduction::kMean;
    } else {
      *st = InvalidArgument("attribute 'reduction' must be 'none', 'sum' or 'mean', got '", reduction, "'");
      return;
    }
    if (info.node.FindAttribute("ignore_index")) ignore_index_ = info.node.GetInt("ignore_index", 0);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const char* in_name = kSoftmax ? "input 0 (scores)" : "input 0 (input)";
    const char* label_name = kSoftmax ? "input 1 (labels)" : "input 1 (target)";
    const ir::Tensor* x = ctx.input(0);
    const ir::Tensor* labels = ctx.input(1);
    if (!x) return InvalidArgument(in_name, " is missing");
    if (!labels) return InvalidArgument(label_name, " is missing");
    if (x->rank() < 2) {
      return InvalidArgument(in_name, ": expected rank >= 2 ([N, C, ...]), got shape ",
                             ops::reduce::DimsToString(x->dims()));
    }
    std::vector<int64_t> label_dims = x->dims();
    label_dims.erase(label_dims.begin() + 1);
    if (labels->dims() != label_dims) {
      return InvalidArgument(label_name, ": expected shape ", ops::reduce::DimsToString(label_dims), " (", in_name,
                             " without dimension 1), got ", ops::reduce::DimsToString(labels->dims()));
    }
    if (labels->dtype() != DType::kInt32 && labels->dtype() != DType::kInt64) {
      return InvalidArgument(label_name, ": expected int32 or int64, got ", DTypeName(labels->dtype()));
    }
    LossArgs a;
    a.softmax = kSoftmax;
    a.reduction = reduction_;
    a.dtype = x->dtype();
    a.x = x->data();
    a.label_dtype = labels->dtype();
    a.labels = labels->data();
    a.batch = x->dims()[0];
    a.classes = x->dims()[1];
    a.inner = ops::reduce::Product(x->dims(), 2);
    a.has_ignore_index = ignore_index_.has_value();
    a.ignore_index = ignore_index_.value_or(0);
    if (const ir::Tensor* w = ctx.input(2)) {
      ParamView view;
      ONNXAMP_RETURN_IF_ERROR(CheckFlatParam(w, a.classes, kSoftmax ? "input 2 (weights)" : "input 2 (weight)", &view));
      a.weight_dtype = w->dtype();
      a.weights = w->data();
    }
    const std::vector<int64_t> loss_dims = reduction_ == LossReduction::kNone ? label_dims : std::vector<int64_t>{};
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * loss, ctx.AllocateOutput(0, x->dtype(), loss_dims));
    a.loss = loss->mutable_data();
    const cudaStream_t stream = StreamOf(ctx);
    if (kSoftmax && ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * log_prob, ctx.AllocateOutput(1, x->dtype(), x->dims()));
      if (x->num_elements() > 0) {
        ONNXAMP_RETURN_IF_ERROR(
            LaunchSoftmax(true, x->dtype(), x->data(), log_prob->mutable_data(), a.batch, a.classes, a.inner, stream));
      }
    }
    return LaunchLoss(a, WorkspaceOf(ctx), stream);
  }

 private:
  LossReduction reduction_ = LossReduction::kMean;
  std::optional<int64_t> ignore_index_;
};

}  // namespace

void RegisterCudaSoftmaxKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"Softmax", "", 1, 23, Device::kCuda, types, 0, &exec::MakeKernel<SoftmaxCuda<false>>});
  r.Register({"LogSoftmax", "", 1, 23, Device::kCuda, types, 0, &exec::MakeKernel<SoftmaxCuda<true>>});
  r.Register({"SoftmaxCrossEntropyLoss", "", 12, 23, Device::kCuda, types, 0, &exec::MakeKernel<LossCuda<true>>});
  r.Register({"NegativeLogLikelihoodLoss", "", 12, 23, Device::kCuda, types, 0, &exec::MakeKernel<LossCuda<false>>});
}

}  // namespace onnxamp::cuda::norm_reduce
