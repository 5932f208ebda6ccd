// TopK on CUDA: attributes and k checked by the helpers the CPU kernel uses (runtime/ops/topk/topk.h), k read on the
// host (input 1 from opset 10), then the launcher of topk_kernels.cu. Output order as on the CPU: sorted, equal values
// by index, NaN above every number.
#include <vector>

#include "runtime/cuda/ops/norm_reduce/norm_reduce_host.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/topk/topk.h"

namespace onnxamp::cuda::norm_reduce {
namespace {

class TopKCuda : public exec::OpKernel {
 public:
  TopKCuda(const exec::KernelInfo& info, Status* st) { *st = ops::ParseTopKSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const ops::TopKShape shape,
                             ops::ResolveTopKShape(spec_, x, spec_.k_from_input ? ctx.input(1) : nullptr));
    const ops::reduce::AxisView& v = shape.view;
    const int64_t k = shape.k;
    const std::vector<int64_t>& out_dims = shape.out_dims;
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
    return LaunchTopK(x->dtype(), x->data(), v.outer, v.n, v.inner, k, spec_.largest, values, indices, WorkspaceOf(ctx),
                      StreamOf(ctx));
  }

 private:
  ops::TopKSpec spec_;
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
