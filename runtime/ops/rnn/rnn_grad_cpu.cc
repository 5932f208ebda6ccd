// RNNGrad (CPU, com.onnxamp): the gradients of RNN, GRU and LSTM (runtime/ops/gradient_ops.h). Each direction's trace
// (gate inputs and states per step) is the forward node's (input 11, when a com.onnxamp RNNTraining node stashed it)
// or recomputed here, then each direction is back-propagated through time (rnn.h). Computed in float (double for
// float64), rounded once.
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
    const int64_t S = inputs.seq, B = inputs.batch, I = inputs.input, H = inputs.hidden, D = spec_.directions;
    const int64_t GH = spec_.Gates() * H;
    const bool lstm = spec_.cell == rnn::Cell::kLstm;
    const DType t = ctx.input(0)->dtype();

    // The incoming gradients, in layout 0 (each may be absent).
    std::vector<A> dys[3];
    for (size_t k = 0; k < 3; ++k) {
      if (const ir::Tensor* g = ctx.input(8 + k)) dys[k] = rnn::ToCompute<A>(*g, rnn::GradInputPerm(spec_, k));
    }

    rnn::Grads<A> grads;
    grads.dx.assign(static_cast<size_t>(S * B * I), A(0));
    grads.dw.assign(static_cast<size_t>(D * GH * I), A(0));
    grads.dr.assign(static_cast<size_t>(D * GH * H), A(0));
    grads.db.assign(static_cast<size_t>(D * 2 * GH), A(0));
    grads.dh0.assign(static_cast<size_t>(D * B * H), A(0));
    if (lstm) {
      grads.dc0.assign(grads.dh0.size(), A(0));
      grads.dp.assign(static_cast<size_t>(D * 3 * H), A(0));
    }
    // The forward's trace (RNNTraining's output 3), or the forward recomputed here, a direction at a time, into a
    // buffer kept on the thread from call to call.
    const ir::Tensor* stashed = ctx.input(rnn::kTraceInput);
    if (stashed) ONNXAMP_RETURN_IF_ERROR(rnn::CheckTraceInput(spec_, inputs, DTypeOf<A>(), *stashed));
    thread_local std::vector<A> recomputed;
    if (!stashed) recomputed.resize(static_cast<size_t>(rnn::TraceElements(spec_, inputs)));
    for (int d = 0; d < D; ++d) {
      rnn::Trace<const A> trace;
      if (stashed) {
        trace = rnn::TraceIn(spec_, inputs, stashed->values<A>().data(), d);
      } else {
        const rnn::Trace<A> fresh = rnn::TraceIn(spec_, inputs, recomputed.data(), 0);
        ONNXAMP_RETURN_IF_ERROR(
            rnn::Forward<A>(spec_, inputs, d, gemm_, ctx.threads(), nullptr, nullptr, nullptr, &fresh));
        trace = fresh;
      }
      auto at = [&](const std::vector<A>& v, int64_t offset) { return v.empty() ? nullptr : v.data() + offset; };
      ONNXAMP_RETURN_IF_ERROR(rnn::Backward<A>(spec_, inputs, d, trace, at(dys[0], 0), at(dys[1], d * B * H),
                                               at(dys[2], d * B * H), gemm_, ctx.threads(), &grads));
    }
    rnn::ReleaseLarge(recomputed);

    // Output k: the gradient of forward input k.
    const std::vector<A>* values[8] = {&grads.dx, &grads.dw,  &grads.dr,  &grads.db,
                                       nullptr,   &grads.dh0, &grads.dc0, &grads.dp};
    for (const rnn::GradOutput& o : rnn::GradOutputs(spec_, inputs)) {
      if (!ctx.output_requested(o.index)) continue;
      std::vector<int64_t> dims = o.dims;
      for (size_t i = 0; i < o.perm.size(); ++i) dims[i] = o.dims[static_cast<size_t>(o.perm[i])];
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(o.index, t, dims));
      rnn::FromCompute(*values[o.index], o.dims, o.perm, out);
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
