// RNN, GRU and LSTM on CUDA, and their com.onnxamp gradient RNNGrad (runtime/ops/gradient_ops.h): the CPU kernels'
// attributes, checks and messages (runtime/ops/rnn/rnn.h; sequence_lens stays on the device, where a length outside
// [0, seq] is clamped instead of raising the CPU's error), the recurrence of rnn_recurrence.h on the device in float
// (double for float64 tensors) with its products on cuBLASLt, the inputs widened and the outputs rounded once as the
// CPU kernels do. RNNGrad reads each direction's trace from input 11 (com.onnxamp RNNTraining's output 3, in a
// training session) or recomputes it, then back-propagates it through time, as the CPU kernel does.
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/linalg/cublaslt_gemm.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/cuda/ops/rnn/rnn_launch.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/rnn/rnn.h"

namespace onnxamp::cuda {
namespace {

namespace rnn = ops::rnn;
namespace rec = recurrence;

// Device memory and cuBLASLt products for one call: Allocate for the passes (which hold their scratch), Alloc for
// what the whole call keeps (released when it ends: the caching allocator orders reuse on the one stream).
class CallOps : public rec::DeviceOps {
 public:
  CallOps(CudaContext& cuda, const CublasLtGemm& gemm, std::string what)
      : cuda_(cuda), gemm_(gemm), what_(std::move(what)) {}

  StatusOr<std::shared_ptr<ir::Buffer>> Allocate(size_t bytes) override { return cuda_.Allocate(bytes); }

  // `bytes` (null for 0) kept until the call ends.
  StatusOr<void*> Alloc(size_t bytes) {
    if (bytes == 0) return nullptr;
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<ir::Buffer> block, cuda_.Allocate(bytes));
    blocks_.push_back(block);
    return block->data();
  }

  // n elements of A, uninitialised, kept until the call ends.
  template <typename A>
  StatusOr<A*> Buffer(int64_t n) {
    ONNXAMP_ASSIGN_OR_RETURN(void* p, Alloc(static_cast<size_t>(n) * sizeof(A)));
    return static_cast<A*>(p);
  }
  Status Gemm(const rec::Product<float>& p) override { return Run(DType::kFloat32, p); }
  Status Gemm(const rec::Product<double>& p) override { return Run(DType::kFloat64, p); }
  cudaStream_t stream() const override { return cuda_.stream(); }

  // n zeros of A (+0.0: zero bytes), kept until the call ends.
  template <typename A>
  StatusOr<A*> Zeros(int64_t n) {
    ONNXAMP_ASSIGN_OR_RETURN(A * p, Buffer<A>(n));
    if (n > 0) {
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p, 0, static_cast<size_t>(n) * sizeof(A), stream()), what_,
                                   ": zeroing a buffer");
    }
    return p;
  }

  // Tensor t in A with dim k of the result dim perm[k] of t (empty: as is): t itself when it already is.
  template <typename A>
  StatusOr<const A*> ToCompute(const ir::Tensor& t, const std::vector<int>& perm) {
    if (perm.empty() && t.dtype() == (std::is_same_v<A, double> ? DType::kFloat64 : DType::kFloat32)) {
      return reinterpret_cast<const A*>(t.data());
    }
    ONNXAMP_ASSIGN_OR_RETURN(void* p, Alloc(static_cast<size_t>(t.num_elements()) * sizeof(A)));
    ONNXAMP_RETURN_IF_ERROR(rec::ToComputeOnDevice(t.dtype(), t.data(), t.dims(), perm, p, stream()));
    return static_cast<const A*>(p);
  }

 private:
  template <typename A>
  Status Run(DType dtype, const rec::Product<A>& p) {
    GemmProblem g;
    g.dtype = dtype;
    g.m = p.m;
    g.n = p.n;
    g.k = p.k;
    g.trans_a = p.trans_a;
    g.trans_b = p.trans_b;
    g.a = p.a;
    g.b = p.b;
    g.d = p.c;
    g.lda = p.lda;
    g.ldb = p.ldb;
    g.beta = p.accumulate ? 1.0 : 0.0;
    return gemm_.Run(cuda_, g, what_);
  }

  CudaContext& cuda_;
  const CublasLtGemm& gemm_;
  std::string what_;
  std::vector<std::shared_ptr<ir::Buffer>> blocks_;
};

// What the forward kernels and RNNGrad share: rnn::KernelBase (attributes, dispatch on X's compute type), the GEMM,
// and the inputs on the device in A.
template <typename Derived>
class RecurrentCudaBase : public rnn::KernelBase<Derived> {
 public:
  RecurrentCudaBase(const exec::KernelInfo& info, const std::string& cell_name, const std::string& where, Status* st)
      : rnn::KernelBase<Derived>(info, cell_name, where, st),
        what_(info.node.op_type()),
        gemm_(info.options.cuda_tf32) {}

 protected:
  // Checks inputs 0-7 as the CPU kernel does (CheckInputs) and brings them into A, layout 0, zeros for the omitted
  // ones. sequence_lens stays on the device (no synchronisation, and a captured step reads each replay's lengths):
  // converted to int64 there, a value outside [0, seq] clamped instead of the CPU's error.
  template <typename A>
  Status Load(exec::KernelContext& ctx, CallOps& ops, rnn::InputDims* dims, rec::Sizes* n, rec::Inputs<A>* in) const {
    std::vector<const ir::Tensor*> tensors;
    for (size_t k = 0; k < 8; ++k) tensors.push_back(ctx.input(k));
    const DType compute = std::is_same_v<A, double> ? DType::kFloat64 : DType::kFloat32;
    ONNXAMP_RETURN_IF_ERROR(rnn::CheckInputs(this->spec_, tensors, compute, dims));
    n->seq = dims->seq;
    n->batch = dims->batch;
    n->input = dims->input;
    n->hidden = dims->hidden;
    n->dirs = this->spec_.directions;
    const int64_t D = this->spec_.directions, B = dims->batch, H = dims->hidden, GH = this->spec_.Gates() * H;
    const std::vector<int> swap01 = this->spec_.batch_major ? std::vector<int>{1, 0, 2} : std::vector<int>{};
    ONNXAMP_ASSIGN_OR_RETURN(in->x, ops.ToCompute<A>(*tensors[0], swap01));
    ONNXAMP_ASSIGN_OR_RETURN(in->w, ops.ToCompute<A>(*tensors[1], {}));
    ONNXAMP_ASSIGN_OR_RETURN(in->r, ops.ToCompute<A>(*tensors[2], {}));
    auto optional = [&](size_t k, bool has, const std::vector<int>& perm, int64_t count) -> StatusOr<const A*> {
      if (has) return ops.ToCompute<A>(*tensors[k], perm);
      ONNXAMP_ASSIGN_OR_RETURN(A * zeros, ops.Zeros<A>(count));
      return static_cast<const A*>(zeros);
    };
    ONNXAMP_ASSIGN_OR_RETURN(in->b, optional(3, dims->has_b, {}, D * 2 * GH));
    ONNXAMP_ASSIGN_OR_RETURN(in->h0, optional(5, dims->has_h0, swap01, D * B * H));
    if (this->spec_.cell == rnn::Cell::kLstm) {
      ONNXAMP_ASSIGN_OR_RETURN(in->c0, optional(6, dims->has_c0, swap01, D * B * H));
      ONNXAMP_ASSIGN_OR_RETURN(in->p, optional(7, dims->has_p, {}, D * 3 * H));
    }
    if (const ir::Tensor* lengths = tensors[4]) {
      ONNXAMP_ASSIGN_OR_RETURN(int64_t * p, ops.Buffer<int64_t>(B));
      ONNXAMP_RETURN_IF_ERROR(
          rec::LengthsOnDevice(lengths->data(), lengths->dtype() == DType::kInt64, B, dims->seq, p, ops.stream()));
      in->lengths = p;
    }
    return Status::Ok();
  }

  // Writes v (dims v_dims, in A) into output k of dims v_dims[perm[k]] (empty perm: v_dims) in X's type.
  template <typename A>
  static Status Store(exec::KernelContext& ctx, CallOps& ops, size_t k, const A* v, const std::vector<int64_t>& v_dims,
                      const std::vector<int>& perm) {
    std::vector<int64_t> dims = v_dims;
    for (size_t i = 0; i < perm.size(); ++i) dims[i] = v_dims[static_cast<size_t>(perm[i])];
    const DType t = ctx.input(0)->dtype();
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(k, t, dims));
    return rec::FromComputeOnDevice(t, v, v_dims, perm, out->mutable_data(), ops.stream());
  }

  std::string what_;
  CublasLtGemm gemm_;
};

// Direction d's part of the traces at `base` (RNNTraining's output 3, RNNGrad's input 11; rnn::TraceIn's layout).
template <typename A>
rec::Trace<A> TraceOf(const rnn::Spec& spec, const rnn::InputDims& dims, A* base, int d) {
  const rnn::Trace<A> t = rnn::TraceIn(spec, dims, base, d);
  return {t.z, t.h, t.c, t.q};
}

// RNN, GRU and LSTM, and com.onnxamp RNNTraining (the forward named by attribute forward_op, with output 3, the
// traces RNNGrad reads: a CUDA training session's stash_recurrent_traces makes it, as a CPU session's does).
class RecurrentCuda : public RecurrentCudaBase<RecurrentCuda> {
 public:
  RecurrentCuda(const exec::KernelInfo& info, Status* st)
      : RecurrentCudaBase(info, Training(info) ? info.node.GetString("forward_op", "") : info.node.op_type(),
                          Training(info) ? "attribute 'forward_op': " : "", st) {}

  template <typename A>
  Status Run(exec::KernelContext& ctx) const {
    CallOps ops(GetCudaContext(ctx), gemm_, what_);
    rnn::InputDims dims;
    rec::Sizes n;
    rec::Inputs<A> in;
    ONNXAMP_RETURN_IF_ERROR(Load(ctx, ops, &dims, &n, &in));
    const int64_t S = n.seq, B = n.batch, H = n.hidden, D = n.dirs;
    const bool lstm = spec_.cell == rnn::Cell::kLstm;
    A* y = nullptr;
    if (ctx.output_requested(0)) {
      ONNXAMP_ASSIGN_OR_RETURN(y, ops.Zeros<A>(S * D * B * H));
    }
    ONNXAMP_ASSIGN_OR_RETURN(A * y_h, ops.Zeros<A>(D * B * H));
    A* y_c = nullptr;
    if (lstm) {
      ONNXAMP_ASSIGN_OR_RETURN(y_c, ops.Zeros<A>(D * B * H));
    }
    A* traces = nullptr;
    if (ctx.output_requested(rnn::kTraceOutput)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out,
                               ctx.AllocateOutput(rnn::kTraceOutput, ops::DTypeOf<A>(), rnn::TraceDims(spec_, dims)));
      traces = reinterpret_cast<A*>(out->mutable_data());
    }
    for (int d = 0; d < D; ++d) {
      const rec::Trace<A> trace = traces ? TraceOf(spec_, dims, traces, d) : rec::Trace<A>{};
      ONNXAMP_RETURN_IF_ERROR(rec::ForwardOnDevice<A>(ops, spec_, n, in, d, y, y_h + d * B * H,
                                                      lstm ? y_c + d * B * H : nullptr, traces ? &trace : nullptr));
    }
    const bool bm = spec_.batch_major;
    if (ctx.output_requested(0)) {
      ONNXAMP_RETURN_IF_ERROR(
          Store<A>(ctx, ops, 0, y, {S, D, B, H}, bm ? std::vector<int>{2, 0, 1, 3} : std::vector<int>{}));
    }
    const std::vector<int> swap01 = bm ? std::vector<int>{1, 0, 2} : std::vector<int>{};
    if (ctx.output_requested(1)) ONNXAMP_RETURN_IF_ERROR(Store<A>(ctx, ops, 1, y_h, {D, B, H}, swap01));
    if (lstm && ctx.output_requested(2)) ONNXAMP_RETURN_IF_ERROR(Store<A>(ctx, ops, 2, y_c, {D, B, H}, swap01));
    return Status::Ok();
  }

 private:
  static bool Training(const exec::KernelInfo& info) { return info.node.op_type() == ops::kRnnTrainingOp; }
};

class RecurrentGradCuda : public RecurrentCudaBase<RecurrentGradCuda> {
 public:
  RecurrentGradCuda(const exec::KernelInfo& info, Status* st)
      : RecurrentCudaBase(info, info.node.GetString("forward_op", ""), "attribute 'forward_op': ", st) {}

  template <typename A>
  Status Run(exec::KernelContext& ctx) const {
    ONNXAMP_RETURN_IF_ERROR(rnn::GradOutputsRequestedOk(ctx));
    CallOps ops(GetCudaContext(ctx), gemm_, what_);
    rnn::InputDims dims;
    rec::Sizes n;
    rec::Inputs<A> in;
    ONNXAMP_RETURN_IF_ERROR(Load(ctx, ops, &dims, &n, &in));
    ONNXAMP_RETURN_IF_ERROR(rnn::GradInputsOk(spec_, dims, ctx));
    const int64_t S = n.seq, B = n.batch, I = n.input, H = n.hidden, D = n.dirs, GH = spec_.Gates() * H;
    const bool lstm = spec_.cell == rnn::Cell::kLstm;

    // The incoming gradients in layout 0 (each may be absent).
    const A* dys[3] = {nullptr, nullptr, nullptr};
    for (size_t k = 0; k < 3; ++k) {
      if (const ir::Tensor* g = ctx.input(8 + k)) {
        ONNXAMP_ASSIGN_OR_RETURN(dys[k], ops.ToCompute<A>(*g, rnn::GradInputPerm(spec_, k)));
      }
    }
    rec::Grads<A> grads;
    ONNXAMP_ASSIGN_OR_RETURN(grads.dx, ops.Zeros<A>(S * B * I));
    ONNXAMP_ASSIGN_OR_RETURN(grads.dw, ops.Zeros<A>(D * GH * I));
    ONNXAMP_ASSIGN_OR_RETURN(grads.dr, ops.Zeros<A>(D * GH * H));
    ONNXAMP_ASSIGN_OR_RETURN(grads.db, ops.Zeros<A>(D * 2 * GH));
    ONNXAMP_ASSIGN_OR_RETURN(grads.dh0, ops.Zeros<A>(D * B * H));
    if (lstm) {
      ONNXAMP_ASSIGN_OR_RETURN(grads.dc0, ops.Zeros<A>(D * B * H));
      ONNXAMP_ASSIGN_OR_RETURN(grads.dp, ops.Zeros<A>(D * 3 * H));
    }
    // The forward's traces (RNNTraining's output 3), or one trace recomputed here, reused by the directions in turn
    // (Backward reads only what Forward wrote).
    const ir::Tensor* stashed = ctx.input(rnn::kTraceInput);
    if (stashed) ONNXAMP_RETURN_IF_ERROR(rnn::CheckTraceInput(spec_, dims, ops::DTypeOf<A>(), *stashed));
    A* recomputed = nullptr;
    if (!stashed) {
      ONNXAMP_ASSIGN_OR_RETURN(recomputed, ops.Buffer<A>(rnn::TraceElements(spec_, dims)));
    }
    for (int d = 0; d < D; ++d) {
      rec::Trace<A> trace;
      if (stashed) {
        // Read only: Backward takes the trace Forward writes, hence the non-const pointers.
        trace = TraceOf(spec_, dims, reinterpret_cast<A*>(const_cast<std::byte*>(stashed->data())), d);
      } else {
        trace = TraceOf(spec_, dims, recomputed, 0);
        ONNXAMP_RETURN_IF_ERROR(rec::ForwardOnDevice<A>(ops, spec_, n, in, d, nullptr, nullptr, nullptr, &trace));
      }
      auto at = [&](const A* v, int64_t offset) { return v ? v + offset : nullptr; };
      ONNXAMP_RETURN_IF_ERROR(rec::BackwardOnDevice<A>(ops, spec_, n, in, d, trace, dys[0], at(dys[1], d * B * H),
                                                       at(dys[2], d * B * H), grads));
    }

    // Output k: the gradient of forward input k.
    const A* values[8] = {grads.dx, grads.dw, grads.dr, grads.db, nullptr, grads.dh0, grads.dc0, grads.dp};
    for (const rnn::GradOutput& o : rnn::GradOutputs(spec_, dims)) {
      if (ctx.output_requested(o.index)) {
        ONNXAMP_RETURN_IF_ERROR(Store<A>(ctx, ops, o.index, values[o.index], o.dims, o.perm));
      }
    }
    return Status::Ok();
  }
};

}  // namespace

void RegisterCudaRecurrentKernels(exec::KernelRegistry& r) {
  // Every input on the device, sequence_lens included.
  for (const char* op : {"RNN", "GRU", "LSTM"}) RegisterLikeCpu(r, op, &exec::MakeKernel<RecurrentCuda>);
  RegisterLikeCpu(r, ops::kRnnTrainingOp, &exec::MakeKernel<RecurrentCuda>, {}, exec::kInternalDomain);
  RegisterLikeCpu(r, ops::kRnnGradOp, &exec::MakeKernel<RecurrentGradCuda>, {}, exec::kInternalDomain);
}

}  // namespace onnxamp::cuda
