// GridSample and its com.onnxamp gradient GridSampleGrad on CUDA: the CPU kernel's attributes, checks and messages
// (runtime/ops/grid_sample/grid_sample.h), the work in grid_sample_kernels.cu (grid_sample_launch.h).
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/cuda/ops/sample/grid_sample_launch.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/grid_sample/grid_sample.h"

namespace onnxamp::cuda {
namespace {

namespace gs = ops::grid_sample;

class GridSampleCuda : public exec::OpKernel {
 public:
  GridSampleCuda(const exec::KernelInfo& info, Status* st) : grad_(info.node.op_type() == ops::kGridSampleGradOp) {
    *st = gs::ParseGridSpec(info.node, &spec_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const size_t xi = grad_ ? 1 : 0;
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, ops::RequireInput(ctx, xi, "X"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* grid, ops::RequireInput(ctx, xi + 1, "grid"));
    ONNXAMP_ASSIGN_OR_RETURN(const gs::GridShape s, gs::ResolveGrid(ctx, *x, *grid, xi));
    GridSampleArgs a;
    a.dtype = x->dtype();
    a.spec = spec_;
    a.n = s.n;
    a.c = s.c;
    a.h = s.h;
    a.w = s.w;
    a.ho = s.ho;
    a.wo = s.wo;
    a.x = x->data();
    a.grid = grid->data();
    cudaStream_t stream = GetCudaContext(ctx).stream();
    if (!grad_) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), {s.n, s.c, s.ho, s.wo}));
      a.y = y->mutable_data();
      return LaunchGridSample(a, stream);
    }
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, ops::RequireInput(ctx, 0, "dY"));
    ONNXAMP_RETURN_IF_ERROR(gs::CheckGridSampleDy(ctx, *dy, *x, s));
    a.dy = dy->data();
    if (ctx.output_requested(0)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, x->dtype(), x->dims()));
      a.dx = dx->mutable_data();
    }
    if (ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dgrid, ctx.AllocateOutput(1, x->dtype(), grid->dims()));
      a.dgrid = dgrid->mutable_data();
    }
    return LaunchGridSampleGrad(a, WorkspaceOf(ctx), stream);
  }

 private:
  bool grad_;
  gs::GridSpec spec_;
};

}  // namespace

void RegisterCudaRoiAlignKernels(exec::KernelRegistry& r);  // roi_align_cuda.cc

void RegisterCudaSampleKernels(exec::KernelRegistry& r) {
  RegisterCudaRoiAlignKernels(r);
  RegisterLikeCpu(r, "GridSample", &exec::MakeKernel<GridSampleCuda>);
  RegisterLikeCpu(r, ops::kGridSampleGradOp, &exec::MakeKernel<GridSampleCuda>, {}, exec::kInternalDomain);
}

}  // namespace onnxamp::cuda
