// DepthToSpace and SpaceToDepth (CPU, opsets 1-25; DepthToSpace's mode from 11), and DepthToSpace's backward,
// com.onnxamp DepthToSpaceGrad. Each is a reshape to 6-D, a transpose and a reshape back, on [N, C, H, W] of any
// element type, with blocksize b:
//   DepthToSpace DCR (default): [N, b, b, C/b^2, H, W] -> perm (0, 3, 4, 1, 5, 2) -> [N, C/b^2, H*b, W*b]
//   DepthToSpace CRD:           [N, C/b^2, b, b, H, W] -> perm (0, 1, 4, 2, 5, 3) -> the same
//   SpaceToDepth:               [N, C, H/b, b, W/b, b] -> perm (0, 3, 5, 1, 2, 4) -> [N, C*b^2, H/b, W/b]
// DepthToSpaceGrad(dY) (attributes blocksize, mode) is the inverse of DepthToSpace: SpaceToDepth for DCR, and for CRD
// [N, C/b^2, H, b, W, b] -> perm (0, 1, 3, 5, 2, 4) -> [N, C, H, W].
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/depth_space/depth_space.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/transpose/transpose.h"

namespace onnxamp::ops {
namespace {

class DepthSpaceCpu : public exec::OpKernel {
 public:
  DepthSpaceCpu(const exec::KernelInfo& info, Status* st) { *st = spec_.Parse(info.node); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, spec_.input_role()));
    ONNXAMP_ASSIGN_OR_RETURN(const DepthSpaceShape s, spec_.Resolve(ctx, *x));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), s.out_dims));
    return TransposeElements(*x, s.view, s.perm, y, &ctx.threads());
  }

 private:
  DepthSpaceSpec spec_;
};

}  // namespace

void RegisterDepthSpaceKernels(exec::KernelRegistry& r) {
  r.Register({"DepthToSpace", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<DepthSpaceCpu>});
  r.Register({"SpaceToDepth", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<DepthSpaceCpu>});
  r.Register(
      {kDepthToSpaceGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, {}, 0, &exec::MakeKernel<DepthSpaceCpu>});
}

}  // namespace onnxamp::ops
