// ReverseSequence (CPU, opsets 10-25): input [T, B, ...] (time_axis 0, batch_axis 1, the defaults) or [B, T, ...]
// (time_axis 1, batch_axis 0); the first sequence_lens[b] time steps of batch item b in reverse order, the rest as
// they are. sequence_lens is int64 [B] with every length in [0, T]. Any element type.
#include <algorithm>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

class ReverseSequenceCpu : public exec::OpKernel {
 public:
  ReverseSequenceCpu(const exec::KernelInfo& info, Status* st)
      : batch_axis_(info.node.GetInt("batch_axis", 1)), time_axis_(info.node.GetInt("time_axis", 0)) {
    if (!((batch_axis_ == 0 && time_axis_ == 1) || (batch_axis_ == 1 && time_axis_ == 0))) {
      *st = InvalidArgument("attributes 'batch_axis' (", batch_axis_, ") and 'time_axis' (", time_axis_,
                            ") must be 0 and 1 in some order");
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* lens_t, RequireInput(ctx, 1, "sequence_lens"));
    if (x->rank() < 2) {
      return InvalidArgument(InputLabel(ctx, 0, "input"), " must have rank >= 2, got ", ShapeToString(x->dims()));
    }
    const int64_t steps = x->dims()[static_cast<size_t>(time_axis_)];
    const int64_t batch = x->dims()[static_cast<size_t>(batch_axis_)];
    const std::string label = InputLabel(ctx, 1, "sequence_lens");
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> lens, ReadInt64s(*lens_t, label));
    if (static_cast<int64_t>(lens.size()) != batch || lens_t->rank() != 1) {
      return InvalidArgument(label, " must be [", batch, "] (the batch dim of input ", ShapeToString(x->dims()),
                             "), got ", ShapeToString(lens_t->dims()));
    }
    for (size_t b = 0; b < lens.size(); ++b) {
      if (lens[b] < 0 || lens[b] > steps) {
        return InvalidArgument(label, ": element ", b, " is ", lens[b], ", outside [0, ", steps, "]");
      }
    }
    const int64_t inner = DimProduct(x->dims(), 2, x->dims().size());
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), x->dims()));
    // Block (t, b) starts at element (t * B + b) * inner (time first) or (b * T + t) * inner (batch first).
    auto block = [&](int64_t t, int64_t b) { return (time_axis_ == 0 ? t * batch + b : b * steps + t) * inner; };
    return DispatchByElementSize(x->dtype(), "ReverseSequence", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* src = ElementsOf<T>(*x);
      T* dst = MutableElementsOf<T>(*y);
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t len = lens[static_cast<size_t>(b)];
        for (int64_t t = 0; t < steps; ++t) {
          const T* from = src + block(t < len ? len - 1 - t : t, b);
          std::copy(from, from + inner, dst + block(t, b));
        }
      }
      return Status::Ok();
    });
  }

 private:
  int64_t batch_axis_, time_axis_;
};

}  // namespace

void RegisterReverseSequenceKernels(exec::KernelRegistry& r) {
  r.Register({"ReverseSequence", "", 10, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ReverseSequenceCpu>});
}

}  // namespace onnxamp::ops
