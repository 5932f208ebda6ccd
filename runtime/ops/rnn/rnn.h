// RNN, GRU and LSTM (ONNX opsets 7-22, layout 0 and 1): attribute parsing, the recurrence of one direction and its
// backward pass through time, shared by the forward kernels (rnn_cpu.cc) and the com.onnxamp RNNGrad kernel
// (rnn_grad_cpu.cc). Everything is computed in A, the compute type (double for float64 tensors, float otherwise):
// fp16/bf16 inputs are widened once, the hidden and cell states stay in A across time steps, and only the outputs are
// rounded to the tensor type. The products X*W^T (all time steps in one GEMM) and H*R^T (one per step) run on the
// linalg kernels' GemmRunner.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/rnn/rnn_spec.h"

namespace onnxamp::ops::rnn {

// "RNN", "GRU" or "LSTM"; InvalidArgument otherwise.
StatusOr<Cell> CellOf(const std::string& op_type);
// Parses and checks the attributes (hidden_size, direction, activations and their alphas and betas, clip,
// input_forget, linear_before_reset, layout).
Status ParseSpec(const ir::Node& node, Cell cell, Spec* spec);
// The same for recurrent op `op_type` ("RNN", "GRU" or "LSTM": a node's own type, or RNNGrad's and RNNTraining's
// forward_op).
StatusOr<Spec> ParseSpec(const ir::Node& node, const std::string& op_type);

// The sizes of the forward inputs, checked against each other by CheckInputs.
struct InputDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  std::vector<int64_t> lengths;  // [batch] (seq when omitted or a device tensor, whose values are not read)
  bool has_b = false, has_h0 = false, has_c0 = false, has_p = false;

  // Whether some row is shorter than seq (its steps past its length write nothing).
  bool Ragged() const {
    for (int64_t len : lengths) {
      if (len < seq) return true;
    }
    return false;
  }
};

// Checks X, W, R, B, sequence_lens, initial_h and (LSTM) initial_c and P: in[k] is the op's input k (null when
// omitted). Element types, shapes, lengths within [0, seq] (read when sequence_lens is a host tensor; a device one,
// as the CUDA kernels take it, is checked for its type and shape only), and that the work buffers in `compute`
// (float32 or float64) fit in memory. Errors name the input and what is wrong with it.
Status CheckInputs(const Spec& spec, const std::vector<const ir::Tensor*>& in, DType compute, InputDims* dims);

// The shapes of Y ([seq, dirs, batch, hidden], layout 1: [batch, seq, dirs, hidden]) and of Y_h and Y_c ([dirs,
// batch, hidden], layout 1: [batch, dirs, hidden]).
std::vector<int64_t> YDims(const Spec& spec, const InputDims& dims);
std::vector<int64_t> StateDims(const Spec& spec, const InputDims& dims);

// RNNGrad's checks: GradOutputsRequestedOk before reading anything (no gradient of sequence_lens), GradInputsOk after
// CheckInputs (inputs 8-10, dY, dY_h and dY_c, each optional, of X's type and the shapes of Y, Y_h and Y_c; dY_c and
// outputs 6 and 7 for LSTM only), both as the CPU and CUDA kernels report them.
Status GradOutputsRequestedOk(const exec::KernelContext& ctx);

// The permutation that brings RNNGrad's incoming gradient k (0: dY, 1: dY_h, 2: dY_c) from the node's layout to
// layout 0 (ToCompute's perm).
std::vector<int> GradInputPerm(const Spec& spec, size_t k);

// RNNGrad's output `index`, the gradient of forward input `index` (none for 4, sequence_lens; 6 and 7 for LSTM only):
// the dims of its compute buffer (layout 0) and the permutation to the node's layout (FromCompute's perm).
struct GradOutput {
  size_t index;
  std::vector<int64_t> dims;
  std::vector<int> perm;
};
std::vector<GradOutput> GradOutputs(const Spec& spec, const InputDims& dims);
Status GradInputsOk(const Spec& spec, const InputDims& dims, const exec::KernelContext& ctx);

// A tensor's values in the compute type and layout 0: the tensor's own memory when it is in both already (a float32
// tensor for float, in layout 0), else a converted copy held here.
template <typename A>
struct ComputeValues {
  const A* data() const { return view ? view : owned.data(); }

  const A* view = nullptr;
  std::vector<A> owned;
};

// The forward inputs, in the compute type and layout 0.
template <typename A>
struct Inputs : InputDims {
  ComputeValues<A> x;   // [seq, batch, input]
  ComputeValues<A> w;   // [dirs, gates * hidden, input]
  ComputeValues<A> r;   // [dirs, gates * hidden, hidden]
  ComputeValues<A> b;   // [dirs, 2 * gates * hidden] (zeros when omitted)
  ComputeValues<A> h0;  // [dirs, batch, hidden] (zeros when omitted)
  ComputeValues<A> c0;  // LSTM: [dirs, batch, hidden]
  ComputeValues<A> p;   // LSTM: [dirs, 3 * hidden] (zeros when omitted)
};

// CheckInputs, then reads the inputs into `out`.
template <typename A>
Status ReadInputs(const Spec& spec, const std::vector<const ir::Tensor*>& in, Inputs<A>* out);

// What one direction's forward pass keeps for its backward pass, by processing step s (time index s, or the
// reversed one for a direction that runs backwards) and batch row: the gate inputs before clipping (in the order of
// W's gates; LSTM's output gate includes the peephole term), the states after the step (rows past their sequence
// length carry the state unchanged), and for GRU with linear_before_reset the term H_{t-1}*Rh^T + Rbh. In caller
// memory, TraceElements(spec, dims) elements per direction laid out z, h, c, q (TraceIn); T is A, or const A for a
// trace read only (RNNGrad's input 11, com.onnxamp RNNTraining's output 3).
template <typename T>
struct Trace {
  T* z = nullptr;  // [seq, batch, gates * hidden]
  T* h = nullptr;  // [seq, batch, hidden]
  T* c = nullptr;  // LSTM: [seq, batch, hidden]
  T* q = nullptr;  // GRU with linear_before_reset: [seq, batch, hidden]

  operator Trace<const T>() const requires(!std::is_const_v<T>) { return {z, h, c, q}; }
};
// The elements of one direction's trace.
int64_t TraceElements(const Spec& spec, const InputDims& dims);
// Where the traces travel between nodes: com.onnxamp RNNTraining's output 3 and RNNGrad's input 11, of shape
// TraceDims ([directions, TraceElements]) in the compute type (float32; float64 for float64 tensors).
inline constexpr size_t kTraceOutput = 3;
inline constexpr size_t kTraceInput = 11;
std::vector<int64_t> TraceDims(const Spec& spec, const InputDims& dims);
// RNNGrad's input 11 checked against the inputs it goes with: InvalidArgument naming what differs.
Status CheckTraceInput(const Spec& spec, const InputDims& dims, DType compute, const ir::Tensor& trace);
// Direction d's trace in `base`, which holds directions * TraceElements(spec, dims) elements.
template <typename T>
Trace<T> TraceIn(const Spec& spec, const InputDims& dims, T* base, int d) {
  const int64_t rows = dims.seq * dims.batch, H = dims.hidden;
  Trace<T> t;
  t.z = base + d * TraceElements(spec, dims);
  t.h = t.z + rows * spec.Gates() * H;
  T* next = t.h + rows * H;
  if (spec.cell == Cell::kLstm) {
    t.c = next;
    next += rows * H;
  }
  if (spec.cell == Cell::kGru && spec.linear_before_reset) t.q = next;
  return t;
}

// Runs direction d: writes the hidden state of each (time, row) into y ([seq, dirs, batch, hidden], layout 0; rows
// past their length stay as they are, so the caller zeroes y first) and the final states into y_h and y_c ([batch,
// hidden] each; y_c LSTM only). Any output pointer may be null; `trace` (null: not kept) receives what Backward needs.
template <typename A>
Status Forward(const Spec& spec, const Inputs<A>& in, int d, const GemmRunner& gemm, exec::ThreadPool& threads, A* y,
               A* y_h, A* y_c, const Trace<A>* trace);

// Where Backward writes the gradients, in caller memory (the output tensors themselves where their type and layout
// allow). dx, dw, dr and dp may be null (not wanted: their products and sums are skipped); dc0 and dp are LSTM's.
template <typename A>
struct Grads {
  A* dx = nullptr;   // [seq, batch, input], accumulated over the directions
  A* dw = nullptr;   // [dirs, gates * hidden, input]
  A* dr = nullptr;   // [dirs, gates * hidden, hidden]
  A* db = nullptr;   // [dirs, 2 * gates * hidden]
  A* dh0 = nullptr;  // [dirs, batch, hidden]
  A* dc0 = nullptr;  // [dirs, batch, hidden]
  A* dp = nullptr;   // [dirs, 3 * hidden]
};

// Back-propagates direction d through time from its trace: dy ([seq, dirs, batch, hidden], layout 0) and dy_h, dy_c
// ([batch, hidden] of direction d) may each be null (no gradient). Writes direction d's share of dX into grads.dx
// (the caller sums the directions') and direction d's slices of the others: nothing for B or H of 0 (the caller
// zeroes them).
template <typename A>
Status Backward(const Spec& spec, const Inputs<A>& in, int d, const Trace<const A>& trace, const A* dy, const A* dy_h,
                const A* dy_c, const GemmRunner& gemm, exec::ThreadPool& threads, const Grads<A>& grads);

// Runs fn(d) for each of `directions` directions: a bidirectional node's two at once on a pool of two or more
// threads (each direction's products then run on its thread alone: the pool does not nest), else one after the
// other. Returns the first error.
Status ForEachDirection(int directions, exec::ThreadPool& threads, const std::function<Status(int)>& fn);

// For a buffer kept on the thread between calls (RecurrentGradCpu's recomputed trace: 32 steps are megabytes): frees
// it when larger than what FloatScratch keeps.
template <typename A>
void ReleaseLarge(std::vector<A>& v);

// Layout conversions between the op's tensors and the compute buffers: dim k of the result is dim perm[k] of the
// source (an empty perm keeps the order). ToCompute reads a host tensor already in A and layout 0 in place.
template <typename A>
ComputeValues<A> ToCompute(const ir::Tensor& t, const std::vector<int>& perm);
// Writes `v` (dims `v_dims`) into `out` (allocated with dims v_dims[perm[k]], any float type), rounding once.
template <typename A>
void FromCompute(const A* v, const std::vector<int64_t>& v_dims, const std::vector<int>& perm, ir::Tensor* out);
// Whether an output of type `t` in the node's layout (perm empty: layout 0) can be written in place by the kernels
// computing in A: float32 for float, float64 for double.
template <typename A>
bool WritesInPlace(DType t, const std::vector<int>& perm) {
  return perm.empty() && t == DTypeOf<A>();
}

// What every recurrent kernel shares, on the CPU and on CUDA: the attributes parsed once and the dispatch of Compute
// to Derived::Run<A> with A the compute type of X.
template <typename Derived>
class KernelBase : public exec::OpKernel {
 public:
  // `cell_name` names the recurrent op (the node's op type, or RNNGrad's forward_op); `where` prefixes its errors.
  KernelBase(const exec::KernelInfo& info, const std::string& cell_name, const std::string& where, Status* st) {
    StatusOr<Cell> cell = CellOf(cell_name);
    *st = cell.ok() ? ParseSpec(info.node, *cell, &spec_) : InvalidArgument(where, cell.status().message());
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (X) is required");
    const Derived& self = static_cast<const Derived&>(*this);
    return x->dtype() == DType::kFloat64 ? self.template Run<double>(ctx) : self.template Run<float>(ctx);
  }

 protected:
  Spec spec_;
};

// The CPU kernels' base: KernelBase, the GEMM, and the inputs read into the compute type.
template <typename Derived>
class Kernel : public KernelBase<Derived> {
 public:
  Kernel(const exec::KernelInfo& info, const std::string& cell_name, const std::string& where, Status* st)
      : KernelBase<Derived>(info, cell_name, where, st), gemm_(LinalgImplFor(info)) {}

 protected:
  // Inputs 0-7 of the node, read by ReadInputs.
  template <typename A>
  Status Read(const exec::KernelContext& ctx, Inputs<A>* inputs) const {
    std::vector<const ir::Tensor*> in;
    for (size_t k = 0; k < 8; ++k) in.push_back(ctx.input(k));
    return ReadInputs(this->spec_, in, inputs);
  }

  GemmRunner gemm_;
};

}  // namespace onnxamp::ops::rnn
