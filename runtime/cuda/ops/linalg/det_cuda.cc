// Det and its com.onnxamp gradient DetGrad on CUDA: the CPU kernel's checks and messages (runtime/ops/det/det.h), the
// work in det_kernels.cu (det_launch.h). DetGrad of matrices larger than 32 x 32 reads a device flag back (one
// synchronisation) to refuse a singular one as the CPU does; smaller ones never fail and never synchronise.
#include <limits>
#include <memory>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/linalg/det_launch.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/det/det.h"
#include "runtime/ops/det/det_math.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::cuda {
namespace {

class DetCuda : public exec::OpKernel {
 public:
  DetCuda(const exec::KernelInfo& info, Status*) : grad_(info.node.domain() == exec::kInternalDomain) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ops::det::DetShape s, ops::det::ResolveDet(ctx, grad_));
    const ir::Tensor* x = ctx.input(grad_ ? 1 : 0);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), grad_ ? x->dims() : s.batch_dims));
    CudaContext& cuda = GetCudaContext(ctx);
    DetArgs a;
    a.dtype = x->dtype();
    a.n = s.n;
    a.batch = s.batch;
    a.x = x->data();
    a.y = y->mutable_data();
    const bool may_fail = grad_ && s.n > ops::det::kMaxMinorsOrder && s.batch > 0;
    std::shared_ptr<ir::Buffer> flag;
    if (grad_) a.dy = ctx.input(0)->data();
    if (may_fail) {
      ONNXAMP_ASSIGN_OR_RETURN(flag, cuda.Allocate(sizeof(unsigned long long)));
      a.failed = reinterpret_cast<unsigned long long*>(flag->data());
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(a.failed, 0xff, sizeof(unsigned long long), cuda.stream()),
                                   "DetGrad: clearing its flag");
    }
    ONNXAMP_RETURN_IF_ERROR(LaunchDet(a, grad_, WorkspaceOf(ctx), cuda.stream()));
    if (!may_fail) return Status::Ok();
    unsigned long long failed = 0;
    ONNXAMP_RETURN_IF_ERROR(cuda.CopyDeviceToHost(a.failed, &failed, sizeof(failed)));
    if (failed != std::numeric_limits<unsigned long long>::max()) {
      return Unimplemented("matrix ", failed, " of X is singular and larger than ", ops::det::kMaxMinorsOrder, "x",
                           ops::det::kMaxMinorsOrder, ": its cofactors (the gradient) are not computed");
    }
    return Status::Ok();
  }

 private:
  bool grad_;
};

}  // namespace

void RegisterCudaDetKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "Det", &exec::MakeKernel<DetCuda>);
  RegisterLikeCpu(r, ops::kDetGradOp, &exec::MakeKernel<DetCuda>, {}, exec::kInternalDomain);
}

}  // namespace onnxamp::cuda
