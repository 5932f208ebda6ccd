// RNNGrad (CPU, com.onnxamp): the gradients of RNN, GRU and LSTM (runtime/ops/gradient_ops.h). Each direction's trace
// (gate inputs and states per step) is the forward node's (input 11, when a com.onnxamp RNNTraining node stashed it)
// or recomputed here, then each direction is back-propagated through time (rnn.h). Computed in float (double for
// float64), rounded once.
#include <algorithm>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/rnn/rnn.h"

namespace onnxamp::ops {
namespace {

class RecurrentGradCpu : public rnn::Kernel<RecurrentGradCpu> {
 public:
  RecurrentGradCpu(const exec::KernelInfo& info, Status* st)
      : Kernel(info, info.node.GetString("forward_op", ""), "attribute 'forward_op': ", st) {}

  template <typename A>
  Status Run(exec::KernelContext& ctx) const {
    ONNXAMP_RETURN_IF_ERROR(rnn::GradOutputsRequestedOk(ctx));
    rnn::Inputs<A> inputs;
    ONNXAMP_RETURN_IF_ERROR(Read(ctx, &inputs));
    ONNXAMP_RETURN_IF_ERROR(rnn::GradInputsOk(spec_, inputs, ctx));
    const int64_t B = inputs.batch, H = inputs.hidden, D = spec_.directions;
    const bool lstm = spec_.cell == rnn::Cell::kLstm;
    const DType t = ctx.input(0)->dtype();

    // The incoming gradients, in layout 0 (each may be absent).
    rnn::ComputeValues<A> dys[3];
    const A* dy[3] = {};
    for (size_t k = 0; k < 3; ++k) {
      if (const ir::Tensor* g = ctx.input(8 + k)) {
        dys[k] = rnn::ToCompute<A>(*g, rnn::GradInputPerm(spec_, k));
        dy[k] = dys[k].data();
      }
    }

    // Output k, the gradient of forward input k: written by Backward into the output tensor itself where it is in A
    // and layout 0, else into a buffer converted at the end. dX, dW, dR and dP that no one reads are not computed;
    // the rest always are (small).
    const std::vector<rnn::GradOutput> outputs = rnn::GradOutputs(spec_, inputs);
    std::vector<A> buffers[8];
    A* at[8] = {};
    bool in_place[8] = {};
    for (const rnn::GradOutput& o : outputs) {
      if (!lstm && o.index >= 6) continue;
      const bool requested = ctx.output_requested(o.index);
      if (!requested && (o.index <= 2 || o.index == 7)) continue;
      size_t n = 1;
      for (int64_t dim : o.dims) n *= static_cast<size_t>(dim);
      in_place[o.index] = requested && rnn::WritesInPlace<A>(t, o.perm);
      if (in_place[o.index]) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(o.index, t, o.dims));
        at[o.index] = out->mutable_values<A>().data();
        std::fill(at[o.index], at[o.index] + n, A(0));
      } else {
        buffers[o.index].assign(n, A(0));
        at[o.index] = buffers[o.index].data();
      }
    }
    const rnn::Grads<A> grads{at[0], at[1], at[2], at[3], at[5], at[6], at[7]};
    // The directions write disjoint slices of every gradient but dX, of which each computes its share: the second's
    // goes to a buffer kept on the thread and is added after both (the same sum on any number of threads).
    thread_local std::vector<A> second_dx;
    if (D == 2 && grads.dx) second_dx.assign(static_cast<size_t>(inputs.seq * B * inputs.input), A(0));
    A* const dx_of_second = second_dx.data();  // this thread's buffer (the name means each thread's own)
    const ir::Tensor* stashed = ctx.input(rnn::kTraceInput);
    if (stashed) ONNXAMP_RETURN_IF_ERROR(rnn::CheckTraceInput(spec_, inputs, DTypeOf<A>(), *stashed));
    ONNXAMP_RETURN_IF_ERROR(rnn::ForEachDirection(static_cast<int>(D), ctx.threads(), [&](int d) -> Status {
      // The forward's trace (RNNTraining's output 3), or the forward recomputed here into a buffer kept on the
      // thread from call to call.
      thread_local std::vector<A> recomputed;
      rnn::Trace<const A> trace;
      if (stashed) {
        trace = rnn::TraceIn(spec_, inputs, stashed->values<A>().data(), d);
      } else {
        recomputed.resize(static_cast<size_t>(rnn::TraceElements(spec_, inputs)));
        const rnn::Trace<A> fresh = rnn::TraceIn(spec_, inputs, recomputed.data(), 0);
        ONNXAMP_RETURN_IF_ERROR(
            rnn::Forward<A>(spec_, inputs, d, gemm_, ctx.threads(), nullptr, nullptr, nullptr, &fresh));
        trace = fresh;
      }
      rnn::Grads<A> of_d = grads;
      if (d == 1 && of_d.dx) of_d.dx = dx_of_second;
      auto offset = [&](const A* v, int64_t by) { return v ? v + by : nullptr; };
      const Status st = rnn::Backward<A>(spec_, inputs, d, trace, dy[0], offset(dy[1], d * B * H),
                                         offset(dy[2], d * B * H), gemm_, ctx.threads(), of_d);
      rnn::ReleaseLarge(recomputed);
      return st;
    }));
    if (D == 2 && grads.dx) {
      for (size_t i = 0; i < second_dx.size(); ++i) grads.dx[i] += second_dx[i];
      rnn::ReleaseLarge(second_dx);
    }

    for (const rnn::GradOutput& o : outputs) {
      if (in_place[o.index] || !ctx.output_requested(o.index)) continue;
      std::vector<int64_t> dims = o.dims;
      for (size_t i = 0; i < o.perm.size(); ++i) dims[i] = o.dims[static_cast<size_t>(o.perm[i])];
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(o.index, t, dims));
      rnn::FromCompute(buffers[o.index].data(), o.dims, o.perm, out);
    }
    return Status::Ok();
  }
};

}  // namespace

void RegisterRecurrentGradKernels(exec::KernelRegistry& r) {
  r.Register({kRnnGradOp,
              exec::kInternalDomain,
              1,
              1,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              0,
              &exec::MakeKernel<RecurrentGradCpu>});
}

}  // namespace onnxamp::ops
