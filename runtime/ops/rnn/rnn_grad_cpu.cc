// RNNGrad (CPU, com.onnxamp): the gradients of RNN, GRU and LSTM (runtime/ops/gradient_ops.h). The forward pass is
// recomputed with its trace (gate inputs and states per step) instead of stashed by the forward node, then each
// direction is back-propagated through time (rnn.h). Computed in float (double for float64), rounded once.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
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
    thread_local rnn::Trace<A> trace;  // its buffers reused from call to call
    for (int d = 0; d < D; ++d) {
      ONNXAMP_RETURN_IF_ERROR(
          rnn::Forward<A>(spec_, inputs, d, gemm_, ctx.threads(), nullptr, nullptr, nullptr, &trace));
      auto at = [&](const std::vector<A>& v, int64_t offset) { return v.empty() ? nullptr : v.data() + offset; };
      ONNXAMP_RETURN_IF_ERROR(rnn::Backward<A>(spec_, inputs, d, trace, at(dys[0], 0), at(dys[1], d * B * H),
                                               at(dys[2], d * B * H), gemm_, ctx.threads(), &grads));
    }
    rnn::ReleaseLargeTrace(trace);

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
