// RNN, GRU and LSTM (CPU), opsets 7-22: float32, float16, bfloat16 and float64. Inputs X, W, R, B, sequence_lens,
// initial_h (and LSTM's initial_c and P); outputs Y, Y_h (and LSTM's Y_c), each optional. The recurrence is rnn.h's,
// in float (double for float64); the outputs are rounded once. com.onnxamp RNNTraining is the same with output 3, the
// traces RNNGrad reads (runtime/ops/gradient_ops.h).
#include <algorithm>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/rnn/rnn.h"

namespace onnxamp::ops {
namespace {

// RNN, GRU and LSTM, and com.onnxamp RNNTraining (the forward named by attribute forward_op, with output 3).
class RecurrentCpu : public rnn::Kernel<RecurrentCpu> {
 public:
  RecurrentCpu(const exec::KernelInfo& info, Status* st)
      : Kernel(info, Training(info) ? info.node.GetString("forward_op", "") : info.node.op_type(),
               Training(info) ? "attribute 'forward_op': " : "", st) {}

  template <typename A>
  Status Run(exec::KernelContext& ctx) const {
    rnn::Inputs<A> inputs;
    ONNXAMP_RETURN_IF_ERROR(Read(ctx, &inputs));
    const int64_t S = inputs.seq, B = inputs.batch, H = inputs.hidden, D = spec_.directions;
    const bool lstm = spec_.cell == rnn::Cell::kLstm;
    const DType t = ctx.input(0)->dtype();
    const bool bm = spec_.batch_major;
    // Y: the output tensor itself when it is in A and layout 0, else a buffer converted at the end. Rows past their
    // length are not written by Forward: zeros there.
    A* y = nullptr;
    std::vector<A> y_buffer;
    const std::vector<int> y_perm = bm ? std::vector<int>{2, 0, 1, 3} : std::vector<int>{};
    const bool y_in_place = rnn::WritesInPlace<A>(t, y_perm);
    if (ctx.output_requested(0)) {
      const size_t n = static_cast<size_t>(S * D * B * H);
      if (y_in_place) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, t, rnn::YDims(spec_, inputs)));
        y = out->mutable_values<A>().data();
        if (inputs.Ragged()) std::fill(y, y + n, A(0));
      } else {
        y_buffer.assign(n, A(0));
        y = y_buffer.data();
      }
    }
    std::vector<A> y_h(static_cast<size_t>(D * B * H)), y_c(lstm ? y_h.size() : 0);
    A* traces = nullptr;  // RNNTraining's output 3: every direction's trace, written in place
    if (ctx.output_requested(rnn::kTraceOutput)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out,
                               ctx.AllocateOutput(rnn::kTraceOutput, DTypeOf<A>(), rnn::TraceDims(spec_, inputs)));
      traces = out->mutable_values<A>().data();
    }
    // The directions write disjoint parts of Y, Y_h, Y_c and the traces.
    ONNXAMP_RETURN_IF_ERROR(rnn::ForEachDirection(static_cast<int>(D), ctx.threads(), [&](int d) {
      const rnn::Trace<A> trace = traces ? rnn::TraceIn(spec_, inputs, traces, d) : rnn::Trace<A>{};
      return rnn::Forward<A>(spec_, inputs, d, gemm_, ctx.threads(), y, y_h.data() + d * B * H,
                             lstm ? y_c.data() + d * B * H : nullptr, traces ? &trace : nullptr);
    }));
    if (ctx.output_requested(0) && !y_in_place) {
      // [seq, dirs, batch, hidden], or [batch, seq, dirs, hidden] for layout 1.
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, t, rnn::YDims(spec_, inputs)));
      rnn::FromCompute(y_buffer.data(), {S, D, B, H}, y_perm, out);
    }
    const std::vector<int64_t> state = {D, B, H};
    const std::vector<int> swap01 = bm ? std::vector<int>{1, 0, 2} : std::vector<int>{};
    for (size_t k = 1; k <= (lstm ? 2u : 1u); ++k) {
      if (!ctx.output_requested(k)) continue;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(k, t, rnn::StateDims(spec_, inputs)));
      rnn::FromCompute(k == 1 ? y_h.data() : y_c.data(), state, swap01, out);
    }
    return Status::Ok();
  }

 private:
  static bool Training(const exec::KernelInfo& info) { return info.node.op_type() == kRnnTrainingOp; }
};

}  // namespace

void RegisterRecurrentKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  // One kernel from opset 7 (optional outputs, no output_sequence) on: 14 adds layout, 22 bfloat16.
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    r.Register({op, "", 7, 25, exec::Device::kCpu, types, 0, &exec::MakeKernel<RecurrentCpu>});
  }
  r.Register(
      {kRnnTrainingOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0, &exec::MakeKernel<RecurrentCpu>});
}

}  // namespace onnxamp::ops
