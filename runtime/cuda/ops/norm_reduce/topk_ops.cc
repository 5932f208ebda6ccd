// TopK on CUDA: attributes and k checked as the CPU kernel does (runtime/ops/topk/topk_cpu.cc), k read on the host
// (input 1 from opset 10), then the launcher of topk_kernels.cu. Output order as on the CPU: sorted, equal values
// by index, NaN above every number.
#include <vector>

#include "runtime/cuda/ops/norm_reduce/norm_reduce_host.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/reduce.h"

namespace onnxamp::cuda::norm_reduce {
namespace {

class TopKCuda : public exec::OpKernel {
 public:
  TopKCuda(const exec::KernelInfo& info, Status* st) : k_from_input_(info.opset >= 10) {
    const ir::Node& node = info.node;
    axis_ = node.GetInt("axis", -1);
    if (!k_from_input_) {
      k_ = node.GetInt("k", -1);
      if (k_ < 0) {
        *st = InvalidArgument("attribute 'k' must be given and non-negative before opset 10, got ", k_);
        return;
      }
    }
    if (info.opset >= 11) largest_ = node.GetInt("largest", 1) != 0;
    if (auto rank = ops::reduce::DeclaredRank(node, 0)) {
      Status s = ops::reduce::NormalizeAxis(axis_, *rank).status();
      if (!s.ok()) *st = s.WithContext("attribute 'axis'");
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (X) is missing");
    StatusOr<int64_t> axis = ops::reduce::NormalizeAxis(axis_, x->rank());
    if (!axis.ok()) return axis.status().WithContext("attribute 'axis'");
    int64_t k = k_;
    if (k_from_input_) {
      const ir::Tensor* kt = ctx.input(1);  // a host input
      if (!kt) return InvalidArgument("input 1 (K) is missing");
      if (kt->dtype() != DType::kInt64 || kt->num_elements() != 1) {
        return InvalidArgument("input 1 (K): expected one int64 value, got ", DTypeName(kt->dtype()), " with ",
                               kt->num_elements(), " elements");
      }
      k = kt->values<int64_t>()[0];
    }
    const ops::reduce::AxisView v = ops::reduce::ViewAround(x->dims(), *axis);
    if (k < 0 || k > v.n) {
      return InvalidArgument(k_from_input_ ? "input 1 (K)" : "attribute 'k'", ": k = ", k, " is outside 0..", v.n,
                             " (dimension ", *axis, " of input 0)");
    }
    std::vector<int64_t> out_dims = x->dims();
    out_dims[*axis] = k;
    void* values = nullptr;
    int64_t* indices = nullptr;
    if (ctx.output_requested(0)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * t, ctx.AllocateOutput(0, x->dtype(), out_dims));
      values = t->mutable_data();
    }
    if (ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * t, ctx.AllocateOutput(1, DType::kInt64, out_dims));
      indices = reinterpret_cast<int64_t*>(t->mutable_data());
    }
    if (k == 0 || v.outer * v.inner == 0) return Status::Ok();
    return LaunchTopK(x->dtype(), x->data(), v.outer, v.n, v.inner, k, largest_, values, indices, WorkspaceOf(ctx),
                      StreamOf(ctx));
  }

 private:
  bool k_from_input_;
  int64_t k_ = -1;
  int64_t axis_ = -1;
  bool largest_ = true;
};

}  // namespace

void RegisterCudaTopKKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                    DType::kInt8,    DType::kUint8,   DType::kInt16,    DType::kUint16,
                                    DType::kInt32,   DType::kUint32,  DType::kInt64,    DType::kUint64};
  // k is the attribute before opset 10 and the host input 1 from then on.
  r.Register({"TopK", "", 1, 9, Device::kCuda, types, 0, &exec::MakeKernel<TopKCuda>});
  r.Register({"TopK", "", 10, 23, Device::kCuda, types, 0, &exec::MakeKernel<TopKCuda>, {1}});
}

}  // namespace onnxamp::cuda::norm_reduce
