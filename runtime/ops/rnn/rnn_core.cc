// The recurrence of RNN, GRU and LSTM and its backward pass through time (see rnn.h). Per direction: the input
// products of every time step in one GEMM, then per step one GEMM of the previous hidden state with R and the gate
// arithmetic row by row. Rows past their sequence length keep their state; a direction that runs backwards reads
// time index length - 1 - s at step s, and a row of length 0 ends in zero states, as ONNX Runtime has it.
//
// Backward keeps the same structure: per step (last first) the gate gradients of every row, then dH_{t-1} as one
// GEMM with R; after the loop dW, dX and dR are one GEMM each over all steps, and the bias gradients column sums in
// a fixed order (deterministic).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/elementwise_math.h"
#include "runtime/ops/common/gemm_avx2.h"
#include "runtime/ops/common/gemm_util.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/common/transpose_blocked.h"
#include "runtime/ops/rnn/rnn.h"
#include "runtime/ops/rnn/rnn_cells.h"
#include "runtime/ops/transpose/transpose.h"

namespace onnxamp::ops::rnn {
namespace {

struct FnName {
  const char* name;
  Fn fn;
  bool uses_alpha, uses_beta;
  double alpha, beta;  // ONNX's defaults for the operator of that name
};

constexpr FnName kFns[] = {
    {"relu", Fn::kRelu, false, false, 0, 0},
    {"tanh", Fn::kTanh, false, false, 0, 0},
    {"sigmoid", Fn::kSigmoid, false, false, 0, 0},
    {"affine", Fn::kAffine, true, true, 1.0, 0.0},
    {"leakyrelu", Fn::kLeakyRelu, true, false, 0.01, 0},
    {"thresholdedrelu", Fn::kThresholdedRelu, true, false, 1.0, 0},
    {"scaledtanh", Fn::kScaledTanh, true, true, 1.0, 1.0},
    {"hardsigmoid", Fn::kHardSigmoid, true, true, 0.2, 0.5},
    {"elu", Fn::kElu, true, false, 1.0, 0},
    {"softsign", Fn::kSoftsign, false, false, 0, 0},
    {"softplus", Fn::kSoftplus, false, false, 0, 0},
};

// A gate's activation of its (clipped) input, and the derivative of that composition.
template <typename A>
struct Gate {
  GateFn<A> fn;

  // out[k] = f(clip(z[k])) for k < n. float Sigmoid and Tanh, the defaults, run on the runtime's vectorized array
  // functions (the Sigmoid and Tanh kernels' own, dispatched on the CPU's ISA); the rest call the scalar functions.
  void Apply(const A* z, A* out, int64_t n) const {
    const A clip = fn.clip;
    if constexpr (std::is_same_v<A, float>) {
      if (fn.f.fn == Fn::kSigmoid || fn.f.fn == Fn::kTanh) {
        const float* in = z;
        if (clip > 0) {
          for (int64_t k = 0; k < n; ++k) out[k] = math_detail::Clamp(z[k], -clip, clip);
          in = out;
        }
        (fn.f.fn == Fn::kSigmoid ? SigmoidArray : TanhArray)(in, out, n);
        return;
      }
    }
    for (int64_t k = 0; k < n; ++k) out[k] = fn.Value(z[k]);
  }

  // Apply and Grad in one: for float Sigmoid and Tanh the derivative comes from the value (s (1 - s), 1 - t^2), the
  // very numbers Grad computes, without evaluating the function twice.
  void ApplyAndGrad(const A* z, A* value, A* grad, int64_t n) const {
    if constexpr (std::is_same_v<A, float>) {
      if (fn.f.fn == Fn::kSigmoid || fn.f.fn == Fn::kTanh) {
        Apply(z, value, n);
        if (fn.f.fn == Fn::kSigmoid) {
          for (int64_t k = 0; k < n; ++k) grad[k] = value[k] * (1.0f - value[k]);
        } else {
          for (int64_t k = 0; k < n; ++k) grad[k] = 1.0f - value[k] * value[k];
        }
        if (fn.clip > 0) {
          for (int64_t k = 0; k < n; ++k) grad[k] = Select(std::abs(z[k]) > fn.clip, 0.0f, grad[k]);
        }
        return;
      }
    }
    Apply(z, value, n);
    Grad(z, grad, n);
  }

  // out[k] = d f(clip(z[k])) / d z[k]: 0 where z[k] is clipped.
  void Grad(const A* z, A* out, int64_t n) const {
    const A clip = fn.clip;
    if constexpr (std::is_same_v<A, float>) {
      if (fn.f.fn == Fn::kSigmoid || fn.f.fn == Fn::kTanh) {
        if (fn.f.fn == Fn::kSigmoid) {
          SigmoidArray(z, out, n);
          for (int64_t k = 0; k < n; ++k) out[k] = out[k] * (1.0f - out[k]);
        } else {
          TanhArray(z, out, n);
          for (int64_t k = 0; k < n; ++k) out[k] = 1.0f - out[k] * out[k];
        }
        if (clip > 0) {
          for (int64_t k = 0; k < n; ++k) out[k] = Select(std::abs(z[k]) > clip, 0.0f, out[k]);
        }
        return;
      }
    }
    for (int64_t k = 0; k < n; ++k) out[k] = fn.Grad(z[k]);
  }
};

// Direction d's slices of the inputs, its gate functions and its order in time.
template <typename A>
struct Direction {
  Direction(const Spec& spec, const Inputs<A>& in, int d)
      : H(in.hidden),
        GH(spec.Gates() * in.hidden),
        lstm(spec.cell == Cell::kLstm),
        gru(spec.cell == Cell::kGru),
        lbr(gru && spec.linear_before_reset),
        back(spec.Backwards(d)),
        w(in.w.data() + d * GH * in.input),
        r(in.r.data() + d * GH * H),
        wb(in.b.data() + d * 2 * GH),
        rb(wb + GH),
        p(lstm ? in.p.data() + d * 3 * H : nullptr),
        h0(in.h0.data() + d * in.batch * H),
        c0(lstm ? in.c0.data() + d * in.batch * H : nullptr),
        acts(spec.acts.data() + d * spec.ActsPerDirection()),
        f{acts[0], static_cast<A>(spec.clip)},
        g{spec.cell == Cell::kRnn ? acts[0] : acts[1], static_cast<A>(spec.clip)},
        h{lstm ? acts[2] : acts[0], A(0)},
        lengths(in.lengths),
        default_lstm(std::is_same_v<A, float> && lstm && spec.clip <= 0 && !spec.input_forget &&
                     acts[0].fn == Fn::kSigmoid && acts[1].fn == Fn::kTanh && acts[2].fn == Fn::kTanh),
        default_gru(std::is_same_v<A, float> && lbr && spec.clip <= 0 && acts[0].fn == Fn::kSigmoid &&
                    acts[1].fn == Fn::kTanh) {}

  // The time index row b reads at step s, and whether it reads one (s below its length).
  int64_t Time(int64_t s, int64_t b) const { return back ? lengths[static_cast<size_t>(b)] - 1 - s : s; }
  bool Active(int64_t s, int64_t b) const { return s < lengths[static_cast<size_t>(b)]; }

  const int64_t H, GH;
  const bool lstm, gru, lbr, back;
  const A *w, *r, *wb, *rb, *p, *h0, *c0;
  const Activation* acts;
  const Gate<A> f, g, h;  // the gates' function, the candidate's (RNN: f for both), LSTM's output's (no clip)
  const std::vector<int64_t>& lengths;
  const bool default_lstm;  // float LSTM with Sigmoid, Tanh, Tanh, no clip and no input_forget: rnn_cells.h's rows
  const bool default_gru;   // float GRU with linear_before_reset, Sigmoid, Tanh and no clip: rnn_cells.h's rows
};

// C[m, n] = op(A) * op(B) (+ C when accumulate), row-major, on the kernel's GEMM.
template <typename A>
Status Gemm(const GemmRunner& gemm, exec::ThreadPool& threads, int64_t m, int64_t n, int64_t k, bool trans_a,
            const A* a, int64_t lda, bool trans_b, const A* b, int64_t ldb, A* c, int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0) return Status::Ok();
  if (k == 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, A(0));
    }
    return Status::Ok();
  }
  GemmArgs<A> g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.c = c;
  g.ldc = ldc;
  g.beta = accumulate ? A(1) : A(0);
  return gemm.Run(g, threads);
}

// Products A * op(B) with one B for a whole recurrence (R, Rh, or their transposes), many times with few rows.
// oneDNN's generic sgemm packs both operands on every call, which at [32 x 128] * [128 x 512] runs at a fifth of
// what the AVX2 kernel reaches with B packed once (bench/gemm_bench.cc measures both); so where the session's GEMM
// runs float products on GemmAvx2 (CPUs with AVX2 and no AVX-512), op(B) is packed once here for it. On AVX-512
// CPUs GemmRunner takes such products to its small GEMM, which reads a plain B in place and ran them in 0.020 ms
// where GemmAvx2 with B packed took 0.035 (Zen 5, one thread, both shapes); a transposed B (the forward's R^T) is
// copied to plain layout once here instead of at every step.
template <typename A>
class FixedB {
 public:
  FixedB(const GemmRunner& gemm, exec::ThreadPool& threads, const A* b, int64_t ldb, bool trans_b, int64_t k, int64_t n)
      : gemm_(gemm), threads_(threads), b_(b), ldb_(ldb), trans_b_(trans_b), k_(k), n_(n) {
    if constexpr (std::is_same_v<A, float>) {
      if (gemm.impl() == LinalgImpl::kOneDnn && !GemmRunnerUsesAvx2() && trans_b && k > 0 && n > 0) {
        // By tiles, as the small GEMM copies a transposed B (element by element, one side's accesses were a cache
        // line each: 6.5% of an LSTM step).
        plain_.resize(static_cast<size_t>(k * n));
        BlockedTranspose2D(b, plain_.data(), k, n, ldb, n, DimVector(), DimVector(), DimVector(), nullptr);
        b_ = plain_.data();
        ldb_ = n;
        trans_b_ = false;
      } else if (gemm.impl() == LinalgImpl::kOneDnn && GemmRunnerUsesAvx2() && k > 0 && n > 0) {
        GemmArgs<float> g;
        g.k = k;
        g.n = n;
        g.b = b;
        g.ldb = ldb;
        g.trans_b = trans_b;
        packed_ = GemmAvx2PackB(g);
        use_packed_ = true;
      }
    }
  }

  // C[m, n] = A[m, k] * op(B) (+ C when accumulate).
  Status Run(int64_t m, const A* a, int64_t lda, A* c, int64_t ldc, bool accumulate) const {
    if constexpr (std::is_same_v<A, float>) {
      if (use_packed_ && m > 0) {
        GemmArgs<float> g;
        g.m = m;
        g.n = n_;
        g.k = k_;
        g.a = a;
        g.lda = lda;
        g.trans_b = trans_b_;
        g.ldb = ldb_;
        g.c = c;
        g.ldc = ldc;
        g.beta = accumulate ? 1.0f : 0.0f;
        GemmAvx2(g, &packed_, threads_);
        return Status::Ok();
      }
    }
    return Gemm(gemm_, threads_, m, n_, k_, false, a, lda, trans_b_, b_, ldb_, c, ldc, accumulate);
  }

 private:
  const GemmRunner& gemm_;
  exec::ThreadPool& threads_;
  const A* b_;
  int64_t ldb_;
  bool trans_b_;
  int64_t k_, n_;
  bool use_packed_ = false;
  GemmAvx2PackedB packed_;
  std::vector<A> plain_;  // op(B) in plain layout, when B is transposed and the small GEMM will read it
};

// The per-call buffers of a sequence's size (gate inputs and their gradients: 2 MiB each for 32 steps of 32 rows of
// 512 gates) live on the calling thread between calls: freed at the end of every call, glibc gave blocks that size
// back to the kernel, and the next call spent a fifth of its time faulting them in again (`perf`, an LSTM training
// step). Slot k of type A is one vector; Forward and Backward use different slots, and neither calls the other.
enum KeptSlot { kGx, kDgx, kDgh, kUAll, kDzhAll, kKeptSlots };
template <typename A>
std::vector<A>& Kept(KeptSlot slot) {
  thread_local std::vector<A> kept[kKeptSlots];
  return kept[slot];
}
}  // namespace

// A vector larger than FloatScratch keeps (gemm_util.h, the same reasoning for ConvGrad's buffers) is not kept.
template <typename A>
void ReleaseLarge(std::vector<A>& v) {
  if (v.capacity() * sizeof(A) > FloatScratch::kKeptFloats * sizeof(float)) std::vector<A>().swap(v);
}

namespace {
// Set on the threads that run a bidirectional node's directions at once: their steps are not split into row chunks
// (the pool would run the chunks one after the other there anyway).
thread_local bool directions_at_once = false;
}  // namespace

Status ForEachDirection(int directions, exec::ThreadPool& threads, const std::function<Status(int)>& fn) {
  if (directions < 2 || threads.num_threads() < 2) {
    for (int d = 0; d < directions; ++d) ONNXAMP_RETURN_IF_ERROR(fn(d));
    return Status::Ok();
  }
  std::vector<Status> status(static_cast<size_t>(directions));
  threads.ParallelFor(directions, 1, [&](int64_t begin, int64_t end) {
    directions_at_once = true;
    for (int64_t d = begin; d < end; ++d) status[static_cast<size_t>(d)] = fn(static_cast<int>(d));
    directions_at_once = false;
  });
  for (Status& st : status) ONNXAMP_RETURN_IF_ERROR(st);
  return Status::Ok();
}

int64_t TraceElements(const Spec& spec, const InputDims& dims) {
  const int64_t states = spec.cell == Cell::kLstm ? 2 : spec.cell == Cell::kGru && spec.linear_before_reset ? 2 : 1;
  return dims.seq * dims.batch * dims.hidden * (spec.Gates() + states);
}

std::vector<int64_t> TraceDims(const Spec& spec, const InputDims& dims) {
  return {spec.directions, TraceElements(spec, dims)};
}

Status CheckTraceInput(const Spec& spec, const InputDims& dims, DType compute, const ir::Tensor& trace) {
  const std::vector<int64_t> want = TraceDims(spec, dims);
  if (trace.dtype() != compute || trace.dims() != want) {
    return InvalidArgument("input ", kTraceInput, " (the forward's trace): expected ", DTypeName(compute), " of shape ",
                           ShapeToString(want), ", got ", DTypeName(trace.dtype()), " ", ShapeToString(trace.dims()));
  }
  return Status::Ok();
}

namespace {

Status CheckDims(const ir::Tensor* t, const char* what, const std::vector<int64_t>& want) {
  if (t->dims() != want) {
    return InvalidArgument(what, ": expected shape ", ShapeToString(want), ", got ", ShapeToString(t->dims()));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Cell> CellOf(const std::string& op_type) {
  if (op_type == "RNN") return Cell::kRnn;
  if (op_type == "GRU") return Cell::kGru;
  if (op_type == "LSTM") return Cell::kLstm;
  return InvalidArgument("'", op_type, "' is not a recurrent op (RNN, GRU, LSTM)");
}

Status ParseSpec(const ir::Node& node, Cell cell, Spec* spec) {
  spec->cell = cell;
  spec->hidden = node.GetInt("hidden_size", 0);
  if (spec->hidden < 0) return InvalidArgument("attribute 'hidden_size' must be positive, got ", spec->hidden);
  const std::string direction = node.GetString("direction", "forward");
  if (direction == "forward" || direction == "reverse") {
    spec->directions = 1;
    spec->reverse = direction == "reverse";
  } else if (direction == "bidirectional") {
    spec->directions = 2;
  } else {
    return InvalidArgument("attribute 'direction' must be forward, reverse or bidirectional, got '", direction, "'");
  }
  if (const ir::Attribute* clip = node.FindAttribute("clip")) {
    if (!(clip->f > 0)) return InvalidArgument("attribute 'clip' must be positive, got ", clip->f);
    spec->clip = clip->f;
  }
  spec->input_forget = node.GetInt("input_forget", 0) != 0;
  spec->linear_before_reset = node.GetInt("linear_before_reset", 0) != 0;
  const int64_t layout = node.GetInt("layout", 0);
  if (layout != 0 && layout != 1) return InvalidArgument("attribute 'layout' must be 0 or 1, got ", layout);
  spec->batch_major = layout == 1;

  const size_t per_dir = static_cast<size_t>(spec->ActsPerDirection());
  std::vector<std::string> names;
  if (const ir::Attribute* a = node.FindAttribute("activations")) names = a->strings;
  if (names.empty()) {
    names = cell == Cell::kRnn   ? std::vector<std::string>{"Tanh"}
            : cell == Cell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                 : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  }
  // RNN's schema declares ["Tanh", "Tanh"] as its default: one direction uses the first (as ONNX Runtime does).
  if (cell == Cell::kRnn && spec->directions == 1 && names.size() == 2) names.resize(1);
  // One list for both directions of a bidirectional node is used for each (as ONNX Runtime accepts it).
  if (spec->directions == 2 && names.size() == per_dir) {
    const std::vector<std::string> one = names;
    names.insert(names.end(), one.begin(), one.end());
  }
  if (names.size() != per_dir * static_cast<size_t>(spec->directions)) {
    return InvalidArgument("attribute 'activations': ", spec->Name(), " with ", spec->directions,
                           " direction(s) takes ", per_dir * static_cast<size_t>(spec->directions), " functions, got ",
                           names.size());
  }
  std::vector<float> alphas, betas;
  if (const ir::Attribute* a = node.FindAttribute("activation_alpha")) alphas = a->floats;
  if (const ir::Attribute* a = node.FindAttribute("activation_beta")) betas = a->floats;
  size_t next_alpha = 0, next_beta = 0;
  spec->acts.clear();
  for (const std::string& name : names) {
    std::string lower = name;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const FnName* found = nullptr;
    for (const FnName& f : kFns) {
      if (lower == f.name) found = &f;
    }
    if (!found) return InvalidArgument("attribute 'activations': unknown function '", name, "'");
    Activation act{found->fn, found->alpha, found->beta};
    // alpha and beta are consumed in order by the functions that take them.
    if (found->uses_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (found->uses_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    spec->acts.push_back(act);
  }
  return Status::Ok();
}

StatusOr<Spec> ParseSpec(const ir::Node& node, const std::string& op_type) {
  ONNXAMP_ASSIGN_OR_RETURN(const Cell cell, CellOf(op_type));
  Spec spec;
  ONNXAMP_RETURN_IF_ERROR(ParseSpec(node, cell, &spec));
  return spec;
}

namespace {

// v (dims `dims`) transposed so that dim k is dim perm[k] of v; v itself for an empty perm.
template <typename A>
std::vector<A> Permuted(std::vector<A> v, const std::vector<int64_t>& dims, const std::vector<int>& perm) {
  if (perm.empty()) return v;
  std::vector<A> out(v.size());
  const std::vector<int64_t> p(perm.begin(), perm.end());
  TransposeFast(reinterpret_cast<const std::byte*>(v.data()), reinterpret_cast<std::byte*>(out.data()), dims, p,
                sizeof(A), nullptr);
  return out;
}

}  // namespace

template <typename A>
ComputeValues<A> ToCompute(const ir::Tensor& t, const std::vector<int>& perm) {
  ComputeValues<A> out;
  if (WritesInPlace<A>(t.dtype(), perm) && t.on_host()) {
    out.view = t.values<A>().data();
    return out;
  }
  std::vector<A> wide(static_cast<size_t>(t.num_elements()));
  // The kernels accept float types only: the dispatch cannot fail.
  static_cast<void>(DispatchFloat(t.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const auto v = t.values<T>();
    for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<A>(Load<T>(v[i]));
    return Status::Ok();
  }));
  out.owned = Permuted(std::move(wide), t.dims(), perm);
  return out;
}

template <typename A>
void FromCompute(const A* v, const std::vector<int64_t>& v_dims, const std::vector<int>& perm, ir::Tensor* out) {
  const size_t n = static_cast<size_t>(out->num_elements());
  std::vector<A> permuted;
  if (!perm.empty()) {
    permuted = Permuted(std::vector<A>(v, v + n), v_dims, perm);
    v = permuted.data();
  }
  static_cast<void>(DispatchFloat(out->dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    auto o = out->mutable_values<T>();
    for (size_t i = 0; i < n; ++i) o[i] = Store<T>(static_cast<ComputeType<T>>(v[i]));
    return Status::Ok();
  }));
}

Status CheckInputs(const Spec& spec, const std::vector<const ir::Tensor*>& in, DType compute, InputDims* out) {
  auto input = [&](size_t k) { return k < in.size() ? in[k] : nullptr; };
  const ir::Tensor* x = input(0);
  const ir::Tensor* w = input(1);
  const ir::Tensor* r = input(2);
  if (!x || !w || !r) return InvalidArgument("inputs X, W and R are required");
  const char* names[] = {
      "input 0 (X)",         "input 1 (W)",         "input 2 (R)", "input 3 (B)", "input 4 (sequence_lens)",
      "input 5 (initial_h)", "input 6 (initial_c)", "input 7 (P)"};
  for (size_t k : {0, 1, 2, 3, 5, 6, 7}) {
    if (input(k) && input(k)->dtype() != x->dtype()) {
      return InvalidArgument(names[k], " has element type ", DTypeName(input(k)->dtype()), ", expected ",
                             DTypeName(x->dtype()), " (the type of X)");
    }
  }
  if (x->rank() != 3) return InvalidArgument(names[0], ": expected rank 3, got shape ", ShapeToString(x->dims()));
  const int64_t dirs = spec.directions, gates = spec.Gates();
  out->seq = x->dims()[spec.batch_major ? 1 : 0];
  out->batch = x->dims()[spec.batch_major ? 0 : 1];
  out->input = x->dims()[2];
  if (r->rank() != 3) return InvalidArgument(names[2], ": expected rank 3, got shape ", ShapeToString(r->dims()));
  const int64_t hidden = spec.hidden > 0 ? spec.hidden : r->dims()[2];
  if (spec.hidden > 0 && r->dims()[2] != spec.hidden) {
    return InvalidArgument(names[2], ": expected shape ",
                           ShapeToString(std::vector<int64_t>{dirs, gates * hidden, hidden}), ", got ",
                           ShapeToString(r->dims()), " (hidden_size ", spec.hidden, ")");
  }
  out->hidden = hidden;
  ONNXAMP_RETURN_IF_ERROR(CheckDims(w, names[1], {dirs, gates * hidden, out->input}));
  ONNXAMP_RETURN_IF_ERROR(CheckDims(r, names[2], {dirs, gates * hidden, hidden}));
  // The work buffers (gate inputs and gradients by step, the trace, Y in layout 0) must fit before anything is
  // sized from these dims: a hostile shape with a zero dim elsewhere would otherwise wrap around.
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{out->seq, out->batch, gates * hidden},
                                           std::vector<int64_t>{out->seq, dirs, out->batch, hidden},
                                           std::vector<int64_t>{out->seq, out->batch, out->input}}) {
    ONNXAMP_RETURN_IF_ERROR(CheckFitsInMemory(compute, dims, "the recurrence's work buffers"));
  }
  out->has_b = input(3) != nullptr;
  if (out->has_b) ONNXAMP_RETURN_IF_ERROR(CheckDims(input(3), names[3], {dirs, 2 * gates * hidden}));
  out->lengths.assign(static_cast<size_t>(out->batch), out->seq);
  if (const ir::Tensor* lens = input(4)) {
    ONNXAMP_RETURN_IF_ERROR(CheckDims(lens, names[4], {out->batch}));
    if (lens->dtype() != DType::kInt32 && lens->dtype() != DType::kInt64) {
      return InvalidArgument(names[4], ": expected int32, got ", DTypeName(lens->dtype()));
    }
    const bool on_device = !lens->on_host();
    for (int64_t b = 0; b < out->batch && !on_device; ++b) {
      const int64_t len = lens->dtype() == DType::kInt32 ? lens->values<int32_t>()[static_cast<size_t>(b)]
                                                         : lens->values<int64_t>()[static_cast<size_t>(b)];
      if (len < 0 || len > out->seq) {
        return InvalidArgument(names[4], ": element ", b, " is ", len, ", outside [0, ", out->seq,
                               "] (the sequence length of X)");
      }
      out->lengths[static_cast<size_t>(b)] = len;
    }
  }
  const std::vector<int64_t> state_dims = StateDims(spec, *out);
  out->has_h0 = input(5) != nullptr;
  if (out->has_h0) ONNXAMP_RETURN_IF_ERROR(CheckDims(input(5), names[5], state_dims));
  if (spec.cell == Cell::kLstm) {
    out->has_c0 = input(6) != nullptr;
    if (out->has_c0) ONNXAMP_RETURN_IF_ERROR(CheckDims(input(6), names[6], state_dims));
    out->has_p = input(7) != nullptr;
    if (out->has_p) ONNXAMP_RETURN_IF_ERROR(CheckDims(input(7), names[7], {dirs, 3 * hidden}));
  }
  return Status::Ok();
}

std::vector<int64_t> YDims(const Spec& spec, const InputDims& dims) {
  const int64_t S = dims.seq, B = dims.batch, D = spec.directions, H = dims.hidden;
  return spec.batch_major ? std::vector<int64_t>{B, S, D, H} : std::vector<int64_t>{S, D, B, H};
}

std::vector<int64_t> StateDims(const Spec& spec, const InputDims& dims) {
  const int64_t B = dims.batch, D = spec.directions, H = dims.hidden;
  return spec.batch_major ? std::vector<int64_t>{B, D, H} : std::vector<int64_t>{D, B, H};
}

Status GradOutputsRequestedOk(const exec::KernelContext& ctx) {
  if (ctx.output_requested(4)) return InvalidArgument("output 4: sequence_lens has no gradient");
  return Status::Ok();
}

std::vector<int> GradInputPerm(const Spec& spec, size_t k) {
  if (!spec.batch_major) return {};
  return k == 0 ? std::vector<int>{1, 2, 0, 3} : std::vector<int>{1, 0, 2};
}

std::vector<GradOutput> GradOutputs(const Spec& spec, const InputDims& dims) {
  const int64_t S = dims.seq, B = dims.batch, I = dims.input, H = dims.hidden, D = spec.directions;
  const int64_t GH = spec.Gates() * H;
  const std::vector<int> swap01 = spec.batch_major ? std::vector<int>{1, 0, 2} : std::vector<int>{};
  return {{0, {S, B, I}, swap01}, {1, {D, GH, I}, {}},    {2, {D, GH, H}, {}}, {3, {D, 2 * GH}, {}},
          {5, {D, B, H}, swap01}, {6, {D, B, H}, swap01}, {7, {D, 3 * H}, {}}};
}

Status GradInputsOk(const Spec& spec, const InputDims& dims, const exec::KernelContext& ctx) {
  const DType t = ctx.input(0)->dtype();
  const char* names[] = {"input 8 (dY)", "input 9 (dY_h)", "input 10 (dY_c)"};
  for (size_t k = 0; k < 3; ++k) {
    const ir::Tensor* g = ctx.input(8 + k);
    if (!g) continue;
    if (k == 2 && spec.cell != Cell::kLstm) return InvalidArgument(names[k], ": only LSTM has Y_c");
    const std::vector<int64_t> want = k == 0 ? YDims(spec, dims) : StateDims(spec, dims);
    if (g->dtype() != t || g->dims() != want) {
      return InvalidArgument(names[k], ": expected ", DTypeName(t), " of shape ", ShapeToString(want), ", got ",
                             DTypeName(g->dtype()), " ", ShapeToString(g->dims()));
    }
  }
  for (size_t k = 6; k < 8; ++k) {
    if (spec.cell != Cell::kLstm && ctx.output_requested(k)) {
      return InvalidArgument("output ", k, " requested, but ", spec.Name(), " has no such input");
    }
  }
  return Status::Ok();
}

template <typename A>
Status ReadInputs(const Spec& spec, const std::vector<const ir::Tensor*>& in, Inputs<A>* out) {
  ONNXAMP_RETURN_IF_ERROR(CheckInputs(spec, in, std::is_same_v<A, double> ? DType::kFloat64 : DType::kFloat32, out));
  const int64_t dirs = spec.directions, gates = spec.Gates(), hidden = out->hidden;
  const std::vector<int> swap01 = spec.batch_major ? std::vector<int>{1, 0, 2} : std::vector<int>{};
  out->x = ToCompute<A>(*in[0], swap01);
  out->w = ToCompute<A>(*in[1], {});
  out->r = ToCompute<A>(*in[2], {});
  auto read = [&](size_t k, bool has, const std::vector<int>& perm, int64_t zeros, ComputeValues<A>* v) {
    if (has) {
      *v = ToCompute<A>(*in[k], perm);
    } else {
      v->owned.assign(static_cast<size_t>(zeros), A(0));
    }
  };
  read(3, out->has_b, {}, dirs * 2 * gates * hidden, &out->b);
  read(5, out->has_h0, swap01, dirs * out->batch * hidden, &out->h0);
  if (spec.cell == Cell::kLstm) {
    read(6, out->has_c0, swap01, dirs * out->batch * hidden, &out->c0);
    read(7, out->has_p, {}, dirs * 3 * hidden, &out->p);
  }
  return Status::Ok();
}

namespace {

// GRU's new state from the row's gate inputs z (update, reset, candidate): H = (1 - u) * g(zh) + u * H_{t-1}, in place
// of H_{t-1} in hb.
// `update` and `cand` are scratch rows of H values.
template <typename A>
void GruUpdate(const Direction<A>& dir, const A* z, A* hb, A* update, A* cand) {
  const int64_t H = dir.H;
  dir.f.Apply(z, update, H);
  dir.g.Apply(z + 2 * H, cand, H);
  for (int64_t j = 0; j < H; ++j) hb[j] = (A(1) - update[j]) * cand[j] + update[j] * hb[j];
}

}  // namespace

namespace {

// The rows of a step split for the pool: the rows of a step do not interact (each row's product with R, its cell and
// its gradients are its own), so on two or more threads each chunk runs its product and its cells on one thread, one
// parallel region per step (splitting the product alone left the cells on one thread and woke the pool twice).
// Chunks of a multiple of 8 rows and at least 8; one chunk (the whole step, its product split as any other) on one
// thread, for fewer than 16 rows, or within a direction run beside the other (ForEachDirection).
class RowChunks {
 public:
  RowChunks(int64_t rows, const exec::ThreadPool& threads) : rows_(rows) {
    const int64_t n = directions_at_once ? 1 : std::max<int64_t>(1, std::min<int64_t>(threads.num_threads(), rows / 8));
    size_ = n == 1 ? rows : ((rows + n - 1) / n + 7) / 8 * 8;
    count = size_ == 0 ? 1 : (rows + size_ - 1) / size_;
    status_.resize(static_cast<size_t>(count));
  }

  // Runs fn(chunk, begin, end) for every chunk (once a step: no allocation), at once on the pool when there are
  // several. The first error.
  template <typename Fn>
  Status Run(exec::ThreadPool& threads, const Fn& fn) {
    if (count == 1) return fn(0, 0, rows_);
    threads.ParallelFor(count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        status_[static_cast<size_t>(c)] = fn(c, std::min(rows_, c * size_), std::min(rows_, (c + 1) * size_));
      }
    });
    for (Status& st : status_) ONNXAMP_RETURN_IF_ERROR(st);
    return Status::Ok();
  }

  int64_t count;

 private:
  int64_t rows_, size_;
  std::vector<Status> status_;  // per chunk
};

}  // namespace

template <typename A>
Status Forward(const Spec& spec, const Inputs<A>& in, int d, const GemmRunner& gemm, exec::ThreadPool& threads, A* y,
               A* y_h, A* y_c, const Trace<A>* trace) {
  const int64_t S = in.seq, B = in.batch, I = in.input, H = in.hidden, D = spec.directions;
  // No rows or no hidden units: nothing to compute (and S may be huge); the outputs are empty.
  if (B == 0 || H == 0) return Status::Ok();
  const Direction<A> dir(spec, in, d);
  const int64_t GH = dir.GH;
  const bool lstm = dir.lstm, gru = dir.gru, lbr = dir.lbr;
  const A *w = dir.w, *r = dir.r, *wb = dir.wb, *rb = dir.rb, *p = dir.p;
  const Gate<A>&f = dir.f, &g = dir.g;
  auto time = [&](int64_t s, int64_t b) { return dir.Time(s, b); };
  RowChunks chunks(B, threads);
  struct Scratch {  // one row's gates and gate inputs (when there is no trace), per chunk
    std::vector<A> gi, gf, gc, go, z_row;
  };
  std::vector<Scratch> scratch(static_cast<size_t>(chunks.count));
  for (Scratch& sc : scratch) {
    for (std::vector<A>* v : {&sc.gi, &sc.gf, &sc.gc, &sc.go}) v->resize(static_cast<size_t>(H));
    sc.z_row.resize(static_cast<size_t>(GH));
  }

  // The input products of every time step, with the biases that do not sit inside GRU's reset product.
  std::vector<A>& gx = Kept<A>(kGx);
  gx.resize(static_cast<size_t>(S * B * GH));
  ONNXAMP_RETURN_IF_ERROR(Gemm(gemm, threads, S * B, GH, I, false, in.x.data(), I, true, w, I, gx.data(), GH, false));
  for (int64_t row = 0; row < S * B; ++row) {
    A* gr = gx.data() + row * GH;
    for (int64_t k = 0; k < GH; ++k) gr[k] += wb[k] + (lbr && k >= 2 * H ? A(0) : rb[k]);
  }

  const FixedB<A> recurrent(gemm, threads, r, H, true, H, GH);                                   // H_{t-1} * R^T
  const FixedB<A> reset_product(gemm, threads, r + 2 * H * H, H, true, H, gru && !lbr ? H : 0);  // (r * H_{t-1}) * Rh^T
  std::vector<A> h(dir.h0, dir.h0 + B * H);
  std::vector<A> c;
  if (lstm) c.assign(dir.c0, dir.c0 + B * H);
  std::vector<A> gh(static_cast<size_t>(B * GH));
  std::vector<A> u, uh;  // GRU without linear_before_reset: r * H_{t-1} and its product with Rh
  if (gru && !lbr) {
    u.assign(static_cast<size_t>(B * H), A(0));
    uh.resize(u.size());
  }
  auto active = [&](int64_t s, int64_t b) { return dir.Active(s, b); };
  if (trace && in.Ragged()) {
    // Zeros where a row past its length writes nothing: Backward's product for dR reads every row's H_{t-1} (against
    // gradients of zero there) and the caller's memory may hold anything. Gate inputs and q are read for active rows
    // only.
    std::fill(trace->h, trace->h + S * B * H, A(0));
    if (lstm) std::fill(trace->c, trace->c + S * B * H, A(0));
  }

  // Step s for rows [b0, b1): their product with R, their cells (GRU without linear_before_reset: the reset product of
  // the same rows in between), their states into Y and the trace.
  auto step_rows = [&](int64_t s, int64_t b0, int64_t b1, Scratch& sc) -> Status {
    std::vector<A>&gi = sc.gi, &gf = sc.gf, &gc = sc.gc, &go = sc.go;
    auto z_of = [&](int64_t b) { return trace ? trace->z + (s * B + b) * GH : sc.z_row.data(); };
    ONNXAMP_RETURN_IF_ERROR(recurrent.Run(b1 - b0, h.data() + b0 * H, H, gh.data() + b0 * GH, GH, false));
    for (int64_t b = b0; b < b1; ++b) {
      if (!active(s, b)) continue;
      const A* xg = gx.data() + (time(s, b) * B + b) * GH;
      const A* hg = gh.data() + b * GH;
      A* z = z_of(b);
      A* hb = h.data() + b * H;
      if (spec.cell == Cell::kRnn) {
        for (int64_t j = 0; j < H; ++j) z[j] = xg[j] + hg[j];
        f.Apply(z, hb, H);
      } else if (lstm) {
        A* cb = c.data() + b * H;
        if constexpr (std::is_same_v<A, float>) {
          if (dir.default_lstm) {
            LstmCellForward({xg, hg, p, cb, hb, z}, H);
            continue;
          }
        }
        // Stage by stage over the row, so that each activation is one vectorizable call.
        A *zi = z, *zo = z + H, *zf = z + 2 * H, *zc = z + 3 * H;
        for (int64_t j = 0; j < H; ++j) {
          zi[j] = xg[j] + hg[j] + p[j] * cb[j];
          zf[j] = xg[2 * H + j] + hg[2 * H + j] + p[2 * H + j] * cb[j];
          zc[j] = xg[3 * H + j] + hg[3 * H + j];
        }
        f.Apply(zi, gi.data(), H);
        if (spec.input_forget) {
          for (int64_t j = 0; j < H; ++j) gf[j] = A(1) - gi[j];
        } else {
          f.Apply(zf, gf.data(), H);
        }
        g.Apply(zc, gc.data(), H);
        for (int64_t j = 0; j < H; ++j) {
          cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
          zo[j] = xg[H + j] + hg[H + j] + p[H + j] * cb[j];
        }
        f.Apply(zo, go.data(), H);
        dir.h.Apply(cb, gc.data(), H);
        for (int64_t j = 0; j < H; ++j) hb[j] = go[j] * gc[j];
      } else {
        if constexpr (std::is_same_v<A, float>) {
          if (dir.default_gru) {
            GruCellForward({xg, hg, rb, hb, z, trace ? trace->q + (s * B + b) * H : gc.data()}, H);
            continue;
          }
        }
        for (int64_t j = 0; j < 2 * H; ++j) z[j] = xg[j] + hg[j];
        f.Apply(z + H, gf.data(), H);  // the reset gate
        if (lbr) {
          A* q = trace ? trace->q + (s * B + b) * H : gc.data();
          for (int64_t j = 0; j < H; ++j) {
            q[j] = hg[2 * H + j] + rb[2 * H + j];
            z[2 * H + j] = xg[2 * H + j] + gf[j] * q[j];
          }
          GruUpdate(dir, z, hb, gi.data(), go.data());
        } else {
          for (int64_t j = 0; j < H; ++j) u[static_cast<size_t>(b * H + j)] = gf[j] * hb[j];
        }
      }
    }
    if (gru && !lbr) {
      // The candidate state reads (r * H_{t-1}) * Rh^T: a second product per step, after every row's reset gate.
      ONNXAMP_RETURN_IF_ERROR(reset_product.Run(b1 - b0, u.data() + b0 * H, H, uh.data() + b0 * H, H, false));
      for (int64_t b = b0; b < b1; ++b) {
        if (!active(s, b)) continue;
        const A* xg = gx.data() + (time(s, b) * B + b) * GH;
        A* z = z_of(b);
        if (!trace) {  // z_row was overwritten by later rows: recompute this row's update gate input
          const A* hg = gh.data() + b * GH;
          for (int64_t j = 0; j < H; ++j) z[j] = xg[j] + hg[j];
        }
        for (int64_t j = 0; j < H; ++j) z[2 * H + j] = xg[2 * H + j] + uh[static_cast<size_t>(b * H + j)];
        GruUpdate(dir, z, h.data() + b * H, gi.data(), go.data());
      }
    }
    for (int64_t b = b0; b < b1; ++b) {
      if (!y || !active(s, b)) continue;
      std::copy(h.begin() + b * H, h.begin() + (b + 1) * H, y + ((time(s, b) * D + d) * B + b) * H);
    }
    if (trace) {
      std::copy(h.begin() + b0 * H, h.begin() + b1 * H, trace->h + (s * B + b0) * H);
      if (lstm) std::copy(c.begin() + b0 * H, c.begin() + b1 * H, trace->c + (s * B + b0) * H);
    }
    return Status::Ok();
  };
  for (int64_t s = 0; s < S; ++s) {
    ONNXAMP_RETURN_IF_ERROR(chunks.Run(threads, [&](int64_t ch, int64_t b0, int64_t b1) {
      return step_rows(s, b0, b1, scratch[static_cast<size_t>(ch)]);
    }));
  }
  // A row of length 0 has final states of zero, not its initial states (as ONNX Runtime has it).
  for (int64_t b = 0; b < B; ++b) {
    if (in.lengths[static_cast<size_t>(b)] > 0) continue;
    std::fill(h.begin() + b * H, h.begin() + (b + 1) * H, A(0));
    if (lstm) std::fill(c.begin() + b * H, c.begin() + (b + 1) * H, A(0));
  }
  if (y_h) std::copy(h.begin(), h.end(), y_h);
  if (y_c && lstm) std::copy(c.begin(), c.end(), y_c);
  ReleaseLarge(gx);
  return Status::Ok();
}

template <typename A>
Status Backward(const Spec& spec, const Inputs<A>& in, int d, const Trace<const A>& trace, const A* dy, const A* dy_h,
                const A* dy_c, const GemmRunner& gemm, exec::ThreadPool& threads, const Grads<A>& grads) {
  const int64_t S = in.seq, B = in.batch, I = in.input, H = in.hidden, D = spec.directions;
  // No rows or no hidden units: every gradient is zero (the caller's buffers) or empty.
  if (B == 0 || H == 0) return Status::Ok();
  const Direction<A> dir(spec, in, d);
  const int64_t GH = dir.GH;
  const bool lstm = dir.lstm, gru = dir.gru, lbr = dir.lbr;
  const A *w = dir.w, *r = dir.r, *p = dir.p, *h0 = dir.h0, *c0 = dir.c0;
  const Gate<A>&f = dir.f, &g = dir.g;
  auto time = [&](int64_t s, int64_t b) { return dir.Time(s, b); };
  auto active = [&](int64_t s, int64_t b) { return dir.Active(s, b); };
  RowChunks chunks(B, threads);
  struct Scratch {  // one row's gate values and their derivatives (in W's gate order), LSTM's h(C) and h'(C)
    std::vector<A> act, der, hc, dhc;
  };
  std::vector<Scratch> scratch(static_cast<size_t>(chunks.count));
  for (Scratch& sc : scratch) {
    sc.act.resize(static_cast<size_t>(GH));
    sc.der.resize(static_cast<size_t>(GH));
    sc.hc.resize(static_cast<size_t>(H));
    sc.dhc.resize(static_cast<size_t>(H));
  }

  // Gate-input gradients by time index (for W, X and the biases) and by step (for R, against H_{t-1} by step).
  std::vector<A>& dgx = Kept<A>(kDgx);
  std::vector<A>& dgh = Kept<A>(kDgh);
  // Zeros where nothing writes: the rows past their lengths, and GRU's candidate columns of dgh without
  // linear_before_reset (its reset product takes those). Otherwise every element is written.
  const bool ragged = in.Ragged();
  dgx.resize(static_cast<size_t>(S * B * GH));
  dgh.resize(dgx.size());
  if (ragged) std::fill(dgx.begin(), dgx.end(), A(0));
  if (ragged || (gru && !lbr)) std::fill(dgh.begin(), dgh.end(), A(0));
  // GRU without linear_before_reset: r * H_{t-1} and the candidate's gradient.
  std::vector<A>& u_all = Kept<A>(kUAll);
  std::vector<A>& dzh_all = Kept<A>(kDzhAll);
  u_all.clear();
  dzh_all.clear();
  if (gru && !lbr) {
    u_all.assign(static_cast<size_t>(S * B * H), A(0));
    dzh_all.assign(u_all.size(), A(0));
  }
  std::vector<A> dh(static_cast<size_t>(B * H), A(0)), dc, direct(dh.size()), dhp(dh.size()), du(dh.size());
  if (lstm) dc.assign(dh.size(), A(0));
  for (int64_t b = 0; b < B; ++b) {
    if (in.lengths[static_cast<size_t>(b)] == 0) continue;  // its final states are constant zeros
    if (dy_h) std::copy(dy_h + b * H, dy_h + (b + 1) * H, dh.begin() + b * H);
    if (dy_c && lstm) std::copy(dy_c + b * H, dy_c + (b + 1) * H, dc.begin() + b * H);
  }
  const FixedB<A> recurrent(gemm, threads, r, H, false, GH, H);                                   // dZ * R
  const FixedB<A> reset_product(gemm, threads, r + 2 * H * H, H, false, H, gru && !lbr ? H : 0);  // dzh * Rh

  // Step s for rows [b0, b1): their gate gradients, their product with R for dH_{t-1} (GRU without
  // linear_before_reset: the reset product of the same rows in between).
  auto step_rows = [&](int64_t s, int64_t b0, int64_t b1, Scratch& sc) -> Status {
    std::vector<A>&act = sc.act, &der = sc.der, &hc = sc.hc, &dhc = sc.dhc;
    const A* hp = s == 0 ? h0 : trace.h + (s - 1) * B * H;
    const A* cp = !lstm ? nullptr : s == 0 ? c0 : trace.c + (s - 1) * B * H;
    A* dz_step = dgh.data() + s * B * GH;
    std::fill(direct.begin() + b0 * H, direct.begin() + b1 * H, A(0));
    for (int64_t b = b0; b < b1; ++b) {
      if (!active(s, b)) continue;
      const int64_t t = time(s, b);
      A* dhb = dh.data() + b * H;
      if (dy) {
        const A* dyb = dy + ((t * D + d) * B + b) * H;
        for (int64_t j = 0; j < H; ++j) dhb[j] += dyb[j];
      }
      const A* z = trace.z + (s * B + b) * GH;
      A* dz = dz_step + b * GH;
      const A* hpb = hp + b * H;
      // The row's gate values and derivatives first (vectorizable calls), then plain arithmetic.
      if (spec.cell == Cell::kRnn) {
        f.Grad(z, der.data(), H);
        for (int64_t j = 0; j < H; ++j) dz[j] = dhb[j] * der[j];
      } else if (lstm) {
        const A* cpb = cp + b * H;
        const A* cb = trace.c + (s * B + b) * H;
        A* dcb = dc.data() + b * H;
        if constexpr (std::is_same_v<A, float>) {
          if (dir.default_lstm) {
            LstmCellBackward({z, cb, cpb, p, dhb, dcb, dz}, H);
            continue;
          }
        }
        f.ApplyAndGrad(z, act.data(), der.data(), spec.input_forget ? 2 * H : 3 * H);  // i, o (and f)
        if (spec.input_forget) {
          for (int64_t j = 0; j < H; ++j) {
            act[2 * H + j] = A(1) - act[j];
            der[2 * H + j] = A(0);  // zf is not used
          }
        }
        g.ApplyAndGrad(z + 3 * H, act.data() + 3 * H, der.data() + 3 * H, H);
        dir.h.ApplyAndGrad(cb, hc.data(), dhc.data(), H);
        const A coupled = spec.input_forget ? A(1) : A(0);
        for (int64_t j = 0; j < H; ++j) {
          const A i = act[j], o = act[H + j], fg = act[2 * H + j], cand = act[3 * H + j];
          const A dzo = dhb[j] * hc[j] * der[H + j];
          const A dcell = dcb[j] + dhb[j] * o * dhc[j] + dzo * p[H + j];
          const A dfg = dcell * cpb[j];
          const A dzi = (dcell * cand - coupled * dfg) * der[j];
          const A dzf = dfg * der[2 * H + j];
          const A dzc = dcell * i * der[3 * H + j];
          dcb[j] = dcell * fg + dzi * p[j] + dzf * p[2 * H + j];
          dz[j] = dzi;
          dz[H + j] = dzo;
          dz[2 * H + j] = dzf;
          dz[3 * H + j] = dzc;
        }
      } else {
        A* db_direct = direct.data() + b * H;
        const A* q = lbr ? trace.q + (s * B + b) * H : nullptr;
        A* dgx_h = dgx.data() + (t * B + b) * GH + 2 * H;
        if constexpr (std::is_same_v<A, float>) {
          if (dir.default_gru) {
            GruCellBackward({z, q, hpb, dhb, dz, db_direct, dgx_h}, H);
            continue;
          }
        }
        f.ApplyAndGrad(z, act.data(), der.data(), 2 * H);  // update, reset
        g.ApplyAndGrad(z + 2 * H, act.data() + 2 * H, der.data() + 2 * H, H);
        A* u_row = lbr ? nullptr : u_all.data() + (s * B + b) * H;
        A* dzh_row = lbr ? nullptr : dzh_all.data() + (s * B + b) * H;
        for (int64_t j = 0; j < H; ++j) {
          const A update = act[j], reset = act[H + j], cand = act[2 * H + j];
          const A dzh = dhb[j] * (A(1) - update) * der[2 * H + j];
          db_direct[j] = dhb[j] * update;
          dz[j] = dhb[j] * (hpb[j] - cand) * der[j];
          if (lbr) {
            dz[H + j] = dzh * q[j] * der[H + j];
            dz[2 * H + j] = dzh * reset;  // the gradient of H_{t-1} * Rh^T + Rbh
          } else {
            u_row[j] = reset * hpb[j];
            dzh_row[j] = dzh;
          }
          dgx_h[j] = dzh;
        }
      }
    }
    if (gru && !lbr) {
      // d(r * H_{t-1}) = dzh * Rh, then the reset gate's and H_{t-1}'s shares of it.
      ONNXAMP_RETURN_IF_ERROR(
          reset_product.Run(b1 - b0, dzh_all.data() + (s * B + b0) * H, H, du.data() + b0 * H, H, false));
      for (int64_t b = b0; b < b1; ++b) {
        if (!active(s, b)) continue;
        const A* z = trace.z + (s * B + b) * GH;
        A* dz = dz_step + b * GH;
        f.ApplyAndGrad(z + H, act.data(), der.data(), H);
        for (int64_t j = 0; j < H; ++j) {
          const size_t k = static_cast<size_t>(b * H + j);
          dz[H + j] = du[k] * hp[k] * der[j];
          direct[k] += du[k] * act[j];
        }
      }
    }
    for (int64_t b = b0; b < b1; ++b) {
      if (!active(s, b)) continue;
      const A* dz = dz_step + b * GH;
      A* row = dgx.data() + (time(s, b) * B + b) * GH;
      for (int64_t k = 0; k < GH; ++k) {
        if (!(gru && k >= 2 * H)) row[k] = dz[k];
      }
    }
    ONNXAMP_RETURN_IF_ERROR(recurrent.Run(b1 - b0, dz_step + b0 * GH, GH, dhp.data() + b0 * H, H, false));
    for (int64_t b = b0; b < b1; ++b) {
      if (!active(s, b)) continue;  // the state passed through unchanged: so does its gradient
      for (int64_t j = 0; j < H; ++j) {
        const size_t k = static_cast<size_t>(b * H + j);
        dh[k] = dhp[k] + direct[k];
      }
    }
    return Status::Ok();
  };
  for (int64_t s = S - 1; s >= 0; --s) {
    ONNXAMP_RETURN_IF_ERROR(chunks.Run(threads, [&](int64_t ch, int64_t b0, int64_t b1) {
      return step_rows(s, b0, b1, scratch[static_cast<size_t>(ch)]);
    }));
  }
  if (lstm && grads.dp) {
    // The peepholes' gradients, summed over the rows after the loop (a row's share is its own within a step), in the
    // order the loop would: steps last to first, rows in order.
    A* dp = grads.dp + d * 3 * H;
    std::fill(dp, dp + 3 * H, A(0));
    for (int64_t s = S - 1; s >= 0; --s) {
      const A* cp = s == 0 ? c0 : trace.c + (s - 1) * B * H;
      for (int64_t b = 0; b < B; ++b) {
        if (!active(s, b)) continue;
        const A* dz = dgh.data() + (s * B + b) * GH;
        const A* cpb = cp + b * H;
        const A* cb = trace.c + (s * B + b) * H;
        for (int64_t j = 0; j < H; ++j) {
          dp[j] += dz[j] * cpb[j];
          dp[H + j] += dz[H + j] * cb[j];
          dp[2 * H + j] += dz[2 * H + j] * cpb[j];
        }
      }
    }
  }
  std::copy(dh.begin(), dh.end(), grads.dh0 + d * B * H);
  if (lstm) std::copy(dc.begin(), dc.end(), grads.dc0 + d * B * H);

  if (grads.dw) {
    ONNXAMP_RETURN_IF_ERROR(Gemm(gemm, threads, GH, I, S * B, true, dgx.data(), GH, false, in.x.data(), I,
                                 grads.dw + d * GH * I, I, false));
  }
  if (grads.dx) {
    ONNXAMP_RETURN_IF_ERROR(Gemm(gemm, threads, S * B, I, GH, false, dgx.data(), GH, false, w, I, grads.dx, I, false));
  }
  if (A* dr = grads.dr ? grads.dr + d * GH * H : nullptr) {
    // Against H_{t-1}: the trace's states for steps 1 on, initial_h for step 0 (no copy of the two side by side).
    const int64_t later = std::max<int64_t>(S - 1, 0) * B;
    ONNXAMP_RETURN_IF_ERROR(Gemm(gemm, threads, GH, H, later, true, dgh.data() + (S > 0 ? B * GH : 0), GH, false,
                                 trace.h, H, dr, H, false));
    if (S > 0) {
      ONNXAMP_RETURN_IF_ERROR(Gemm(gemm, threads, GH, H, B, true, dgh.data(), GH, false, h0, H, dr, H, true));
    }
    if (gru && !lbr) {
      ONNXAMP_RETURN_IF_ERROR(
          Gemm(gemm, threads, H, H, S * B, true, dzh_all.data(), H, false, u_all.data(), H, dr + 2 * H * H, H, false));
    }
  }
  // Bias gradients: column sums, rows in order (each column's sum in the same order as a loop down the column, a
  // row at a time so that the loads are contiguous). Rb's equal Wb's but for GRU's Rbh inside the reset product.
  A* dwb = grads.db + d * 2 * GH;
  A* drb = dwb + GH;
  std::fill(dwb, dwb + 2 * GH, A(0));
  const int64_t inside_from = lbr ? 2 * H : GH;  // columns from here also sum dgh into drb
  for (int64_t row = 0; row < S * B; ++row) {
    const A* x_row = dgx.data() + row * GH;
    const A* h_row = dgh.data() + row * GH;
    for (int64_t k = 0; k < GH; ++k) dwb[k] += x_row[k];
    for (int64_t k = inside_from; k < GH; ++k) drb[k] += h_row[k];
  }
  for (int64_t k = 0; k < inside_from; ++k) drb[k] = dwb[k];
  for (std::vector<A>* v : {&dgx, &dgh, &u_all, &dzh_all}) ReleaseLarge(*v);
  return Status::Ok();
}

#define ONNXAMP_RNN_INSTANTIATE(A)                                                                                     \
  template ComputeValues<A> ToCompute<A>(const ir::Tensor&, const std::vector<int>&);                                  \
  template void FromCompute<A>(const A*, const std::vector<int64_t>&, const std::vector<int>&, ir::Tensor*);           \
  template Status ReadInputs<A>(const Spec&, const std::vector<const ir::Tensor*>&, Inputs<A>*);                       \
  template Status Forward<A>(const Spec&, const Inputs<A>&, int, const GemmRunner&, exec::ThreadPool&, A*, A*, A*,     \
                             const Trace<A>*);                                                                         \
  template Status Backward<A>(const Spec&, const Inputs<A>&, int, const Trace<const A>&, const A*, const A*, const A*, \
                              const GemmRunner&, exec::ThreadPool&, const Grads<A>&);                                  \
  template void ReleaseLarge<A>(std::vector<A>&);
ONNXAMP_RNN_INSTANTIATE(float)
ONNXAMP_RNN_INSTANTIATE(double)
#undef ONNXAMP_RNN_INSTANTIATE

}  // namespace onnxamp::ops::rnn
