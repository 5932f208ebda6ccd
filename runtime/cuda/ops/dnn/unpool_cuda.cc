// MaxUnpool and its com.onnxamp gradient MaxUnpoolGrad on CUDA: the CPU kernel's attributes, checks and messages
// (runtime/ops/pool/unpool.h; output_shape is a host input), the indices on the device (unpool_launch.h).
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/dnn/unpool_launch.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/pool/unpool.h"

namespace onnxamp::cuda {
namespace dnn {
namespace {

class MaxUnpoolCuda : public exec::OpKernel {
 public:
  MaxUnpoolCuda(const exec::KernelInfo& info, Status* st) : grad_(info.node.op_type() == ops::kMaxUnpoolGradOp) {
    *st = ops::ParseWindowAttrs(info.node, ops::WindowAttrSpec{/*kernel_shape_required=*/true, /*transpose=*/false},
                                &attrs_);
    // Refused here, not when running, so that the node falls back to the CPU.
    if (st->ok() && attrs_.kernel_shape.size() + 2 > static_cast<size_t>(kMaxUnpoolRank)) {
      *st = Unimplemented("MaxUnpool on cuda takes at most ", kMaxUnpoolRank - 2, " spatial dims");
    }
  }

  // MaxUnpool(X, I[, output_shape]) -> Y; MaxUnpoolGrad(dY, I, X_shape[, output_shape]) -> dX.
  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ops::UnpoolShape s, ops::ResolveUnpool(ctx, attrs_, grad_));
    if (grad_) ONNXAMP_RETURN_IF_ERROR(ops::CheckUnpoolDy(ctx, s));
    const ir::Tensor* first = ctx.input(0);
    const ir::Tensor* indices = ctx.input(1);
    UnpoolArgs a;
    a.dtype = first->dtype();
    a.rank = static_cast<int>(s.out.size());
    a.x_count = indices->num_elements();
    a.out_count = ops::DimProduct(s.out, 0, s.out.size());
    a.inferred_size = ops::DimProduct(s.inferred, 0, s.inferred.size());
    const std::vector<int64_t> from = ops::ContiguousStrides(s.inferred), to = ops::ContiguousStrides(s.out);
    for (int d = 0; d < a.rank; ++d) {
      a.inferred_strides[d] = from[static_cast<size_t>(d)];
      a.out_strides[d] = to[static_cast<size_t>(d)];
    }
    a.indices = static_cast<const int64_t*>(static_cast<const void*>(indices->data()));
    cudaStream_t stream = GetCudaContext(ctx).stream();
    if (grad_) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, first->dtype(), indices->dims()));
      a.dy = first->data();
      a.dx = dx->mutable_data();
      return LaunchMaxUnpoolGrad(a, stream);
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, first->dtype(), s.out));
    a.x = first->data();
    a.y = y->mutable_data();
    return LaunchMaxUnpool(a, WorkspaceOf(ctx), stream);
  }

 private:
  bool grad_;
  ops::WindowAttrs attrs_;
};

}  // namespace

void RegisterCudaUnpoolKernels(exec::KernelRegistry& r) {
  // output_shape (MaxUnpool's input 2, the gradient's input 3) is read on the host, as the CPU kernel reads it.
  RegisterLikeCpu(r, "MaxUnpool", &exec::MakeKernel<MaxUnpoolCuda>, {2});
  RegisterLikeCpu(r, ops::kMaxUnpoolGradOp, &exec::MakeKernel<MaxUnpoolCuda>, {3}, exec::kInternalDomain);
}

}  // namespace dnn
}  // namespace onnxamp::cuda
