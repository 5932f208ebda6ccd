// RoiAlign and its com.onnxamp gradient RoiAlignGrad on CUDA: the CPU kernels' attributes, checks and messages and
// the rois' geometry (runtime/ops/detection/roi_align.h; rois, batch_indices and RoiAlignGrad's X_shape are host
// inputs), the geometry and batch indices uploaded when they change (a DeviceTable), the work in roi_align_kernels.cu
// (roi_align_launch.h).
#include <memory>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/cuda/ops/sample/roi_align_launch.h"
#include "runtime/cuda/ops/tensor/tensor_util.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/detection/roi_align.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::cuda {
namespace {

// Fills the shape part of `a` and points it at the rois' geometries and batch indices on the device: one table,
// uploaded only when the rois change (`block` holds it until the call's kernels are queued).
Status Upload(exec::KernelContext& ctx, const tensor_ops::DeviceTable& tables, const ops::RoiAlignShape& s,
              RoiAlignArgs* a, std::shared_ptr<ir::Buffer>* block) {
  a->batch = s.batch;
  a->channels = s.channels;
  a->height = s.height;
  a->width = s.width;
  a->num_rois = static_cast<int64_t>(s.rois.size());
  if (a->num_rois == 0) return Status::Ok();
  std::vector<std::byte> bytes;
  const size_t rois = tensor_ops::Append(bytes, s.rois);
  const size_t indices = tensor_ops::Append(bytes, s.batch_indices);
  ONNXAMP_ASSIGN_OR_RETURN(*block, tables.Upload(ctx, std::move(bytes)));
  const std::byte* base = (*block)->data();
  a->rois = reinterpret_cast<const ops::RoiGeometry*>(base + rois);
  a->batch_indices = reinterpret_cast<const int64_t*>(base + indices);
  return Status::Ok();
}

// RoiAlign, or RoiAlignGrad (mode avg): input 0 is X or dY.
class RoiAlignCuda : public exec::OpKernel {
 public:
  RoiAlignCuda(const exec::KernelInfo& info, Status* st) : grad_(info.node.op_type() == ops::kRoiAlignGradOp) {
    *st = grad_ ? ops::InitRoiAlignGradSpec(info, &spec_) : spec_.Init(info.node, info.opset);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ops::RoiAlignShape shape,
                             grad_ ? ops::ResolveRoiAlignGrad(ctx, spec_) : ops::ResolveRoiAlign(ctx, spec_));
    const ir::Tensor* in = ctx.input(0);
    RoiAlignArgs a;
    a.dtype = in->dtype();
    a.max_mode = spec_.max_mode;
    a.out_h = spec_.out_h;
    a.out_w = spec_.out_w;
    std::shared_ptr<ir::Buffer> block;
    ONNXAMP_RETURN_IF_ERROR(Upload(ctx, tables_, shape, &a, &block));
    cudaStream_t stream = GetCudaContext(ctx).stream();
    if (grad_) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx,
                               ctx.AllocateOutput(0, in->dtype(), {a.batch, a.channels, a.height, a.width}));
      a.dy = in->data();
      a.dx = dx->mutable_data();
      return LaunchRoiAlignGrad(a, WorkspaceOf(ctx), stream);
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y,
                             ctx.AllocateOutput(0, in->dtype(), {a.num_rois, a.channels, a.out_h, a.out_w}));
    a.x = in->data();
    a.y = y->mutable_data();
    return LaunchRoiAlign(a, stream);
  }

 private:
  bool grad_;
  ops::RoiAlignSpec spec_;
  tensor_ops::DeviceTable tables_;
};

}  // namespace

void RegisterCudaRoiAlignKernels(exec::KernelRegistry& r) {
  // The rois and batch indices (and the gradient's X_shape) are read on the host, as the CPU kernels read them.
  RegisterLikeCpu(r, "RoiAlign", &exec::MakeKernel<RoiAlignCuda>, {1, 2});
  RegisterLikeCpu(r, ops::kRoiAlignGradOp, &exec::MakeKernel<RoiAlignCuda>, {1, 2, 3}, exec::kInternalDomain);
}

}  // namespace onnxamp::cuda
