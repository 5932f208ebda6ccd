// ReverseSequence on CUDA: the CPU kernel's checks and messages (runtime/ops/reverse_sequence/reverse_sequence.h;
// sequence_lens is a host input), then per batch item two strided copies: its first len time steps reversed (a
// negative time stride) and the rest as they are. Byte moves by element size, so the result is the CPU's bits; 2 B
// launches for B batch items.
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/tensor/tensor_launch.h"
#include "runtime/cuda/ops/tensor/tensor_util.h"
#include "runtime/ops/reverse_sequence/reverse_sequence.h"

namespace onnxamp::cuda::tensor_ops {
namespace {

class ReverseSequenceCuda : public exec::OpKernel {
 public:
  ReverseSequenceCuda(const exec::KernelInfo& info, Status* st) {
    *st = ops::ParseReverseSequenceAxes(info.node, &axes_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ops::ReverseSequenceShape s, ops::ResolveReverseSequence(ctx, axes_));
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    if (x->num_elements() == 0) return Status::Ok();
    const size_t es = ElementSize(x->dtype());
    const bool time_first = axes_.time_axis == 0;
    // In elements: the step between time steps and the start of batch item b's first time step.
    const int64_t time_stride = (time_first ? s.batch : 1) * s.inner;
    const auto* src = static_cast<const std::byte*>(DeviceData(*x));
    auto* dst = static_cast<std::byte*>(MutableDeviceData(*y));
    cudaStream_t stream = GetCudaContext(ctx).stream();
    for (int64_t b = 0; b < s.batch; ++b) {
      const int64_t base = (time_first ? b : b * s.steps) * s.inner;
      const int64_t len = s.lens[static_cast<size_t>(b)];
      // Output steps [0, len) from input steps len - 1 down to 0; steps [len, T) as they are.
      for (const auto& [count, from, step] :
           {std::tuple<int64_t, int64_t, int64_t>{len, len - 1, -1}, {s.steps - len, len, 1}}) {
        if (count <= 0) continue;
        StridedCopyArgs args;
        args.rank = 2;
        args.dims[0] = count;
        args.dims[1] = s.inner;
        args.dst_strides[0] = time_stride;
        args.dst_strides[1] = 1;
        args.src_strides[0] = step * time_stride;
        args.src_strides[1] = 1;
        const int64_t dst_start = base + (step < 0 ? 0 : len) * time_stride;
        const int64_t src_start = base + from * time_stride;
        ONNXAMP_RETURN_IF_ERROR(LaunchStridedCopy(dst + dst_start * static_cast<int64_t>(es),
                                                  src + src_start * static_cast<int64_t>(es), args, es, stream,
                                                  "ReverseSequence"));
      }
    }
    return Status::Ok();
  }

 private:
  ops::ReverseSequenceAxes axes_;
};

}  // namespace

void RegisterReverseSequenceKernels(exec::KernelRegistry& r) {
  // Every movable element type (strings stay on the CPU); sequence_lens (input 1) is read on the host.
  r.Register({"ReverseSequence",
              "",
              10,
              25,
              exec::Device::kCuda,
              MovableDTypes(),
              0,
              &exec::MakeKernel<ReverseSequenceCuda>,
              {1}});
}

}  // namespace onnxamp::cuda::tensor_ops
