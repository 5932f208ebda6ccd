// ReverseSequence (CPU, opsets 10-25): input [T, B, ...] (time_axis 0, batch_axis 1, the defaults) or [B, T, ...]
// (time_axis 1, batch_axis 0); the first sequence_lens[b] time steps of batch item b in reverse order, the rest as
// they are. sequence_lens is int64 [B] with every length in [0, T]. Any element type.
#include <algorithm>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/reverse_sequence/reverse_sequence.h"

namespace onnxamp::ops {
namespace {

class ReverseSequenceCpu : public exec::OpKernel {
 public:
  ReverseSequenceCpu(const exec::KernelInfo& info, Status* st) { *st = ParseReverseSequenceAxes(info.node, &axes_); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ReverseSequenceShape s, ResolveReverseSequence(ctx, axes_));
    const ir::Tensor* x = ctx.input(0);
    const int64_t steps = s.steps, batch = s.batch, inner = s.inner;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), x->dims()));
    // Block (t, b) starts at element (t * B + b) * inner (time first) or (b * T + t) * inner (batch first).
    const bool time_first = axes_.time_axis == 0;
    auto block = [&](int64_t t, int64_t b) { return (time_first ? t * batch + b : b * steps + t) * inner; };
    return DispatchByElementSize(x->dtype(), "ReverseSequence", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* src = ElementsOf<T>(*x);
      T* dst = MutableElementsOf<T>(*y);
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t len = s.lens[static_cast<size_t>(b)];
        for (int64_t t = 0; t < steps; ++t) {
          const T* from = src + block(t < len ? len - 1 - t : t, b);
          std::copy(from, from + inner, dst + block(t, b));
        }
      }
      return Status::Ok();
    });
  }

 private:
  ReverseSequenceAxes axes_;
};

}  // namespace

void RegisterReverseSequenceKernels(exec::KernelRegistry& r) {
  r.Register({"ReverseSequence", "", 10, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ReverseSequenceCpu>});
}

}  // namespace onnxamp::ops
