// The recurrence of RNN, GRU and LSTM and its backward pass through time as the CUDA kernels run it, written once
// for an Engine that supplies memory, GEMMs and element-wise launches:
//
//   template <typename T> StatusOr<T*> Alloc(int64_t n);  // n uninitialised elements, alive as long as the engine
//   template <typename A> Status Gemm(const Product<A>& p);  // m, n, k > 0
//   template <typename F> Status ForEach(int64_t n, const F& f);  // f(i) for every i < n, in any order
//
// The CUDA engine (rnn_kernels.cu) runs it on the device; the host engine of tests/runtime/ops/rnn_recurrence_test.cc
// runs it on the CPU against rnn::Forward and rnn::Backward (runtime/ops/rnn/rnn.h), so that the algorithm is checked
// on machines without a GPU. Per element it computes what rnn_core.cc computes, in the same order, with the same scalar
// activation functions (rnn_spec.h); the products run on the engine's GEMM. Per time step: one GEMM with R and one
// launch over the batch's [batch, hidden] state (GRU without linear_before_reset: two of each, its candidate reads
// (r * H_{t-1}) * Rh^T). Everything on the device in A, the compute type (float, or double for float64 tensors),
// in layout 0; the kernels convert the op's tensors to and from it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/common/host_device.h"
#include "runtime/common/status.h"
#include "runtime/ops/rnn/rnn_spec.h"

namespace onnxamp::cuda::recurrence {

using ops::rnn::Activation;
using ops::rnn::Cell;
using ops::rnn::GateFn;
using ops::rnn::Spec;

// C[m, n] (dense, ldc = n) = op(A) * op(B) (+ C when accumulate), row-major; op(A) is [m, k] (A stored [k, m] when
// trans_a), op(B) is [k, n] (B stored [n, k] when trans_b).
template <typename A>
struct Product {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  const A* a = nullptr;
  const A* b = nullptr;
  A* c = nullptr;
  int64_t lda = 0, ldb = 0;
  bool accumulate = false;
};

// The sizes of one call.
struct Sizes {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
};

// The op's inputs in layout 0, all directions: x [seq, batch, input], w [dirs, gates * hidden, input], r [dirs,
// gates * hidden, hidden], b [dirs, 2 * gates * hidden], h0 and (LSTM) c0 [dirs, batch, hidden], (LSTM) p [dirs,
// 3 * hidden] (zeros where the op omits them); lengths [batch] (null: every row runs all seq steps).
template <typename A>
struct Inputs {
  const A *x = nullptr, *w = nullptr, *r = nullptr, *b = nullptr, *h0 = nullptr, *c0 = nullptr, *p = nullptr;
  const int64_t* lengths = nullptr;
};

// What one direction's forward pass keeps for its backward pass, by step (as rnn::Trace): z [seq, batch, gates *
// hidden], h and (LSTM) c [seq, batch, hidden] after each step, (GRU with linear_before_reset) q [seq, batch, hidden].
template <typename A>
struct Trace {
  A *z = nullptr, *h = nullptr, *c = nullptr, *q = nullptr;
};

// The gradients, all directions: dx [seq, batch, input] (accumulated over the directions: zero it first), dw, dr, db,
// dh0, (LSTM) dc0 and dp, shaped as the inputs.
template <typename A>
struct Grads {
  A *dx = nullptr, *dw = nullptr, *dr = nullptr, *db = nullptr, *dh0 = nullptr, *dc0 = nullptr, *dp = nullptr;
};

// ---- element-wise work ------------------------------------------------------------------------------------------

template <typename A>
struct Fill {
  A* p;
  A v;
  ONNXAMP_HOST_DEVICE void operator()(int64_t i) const { p[i] = v; }
};

template <typename A>
struct Copy {
  A* dst;
  const A* src;
  ONNXAMP_HOST_DEVICE void operator()(int64_t i) const { dst[i] = src[i]; }
};

// One direction: its sizes, order in time, gate functions and bias and peephole slices.
template <typename A>
struct Direction {
  Cell cell = Cell::kLstm;
  bool lbr = false;           // GRU's linear_before_reset
  bool input_forget = false;  // LSTM's coupled input and forget gates
  bool back = false;          // runs backwards in time
  int64_t S = 0, B = 0, H = 0, GH = 0, D = 1, d = 0;
  const int64_t* lengths = nullptr;
  GateFn<A> f, g, h;  // the gates', the candidate's (RNN: f), LSTM's output's (no clip)
  const A *w = nullptr, *r = nullptr, *wb = nullptr, *rb = nullptr, *p = nullptr;

  ONNXAMP_HOST_DEVICE bool Lstm() const { return cell == Cell::kLstm; }
  // GRU without linear_before_reset: its candidate reads (r * H_{t-1}) * Rh^T, a second product and launch per step.
  ONNXAMP_HOST_DEVICE bool TwoPhases() const { return cell == Cell::kGru && !lbr; }

  ONNXAMP_HOST_DEVICE int64_t Length(int64_t b) const { return lengths ? lengths[b] : S; }
  ONNXAMP_HOST_DEVICE bool Active(int64_t s, int64_t b) const { return s < Length(b); }
  // The time index row b reads at step s.
  ONNXAMP_HOST_DEVICE int64_t Time(int64_t s, int64_t b) const { return back ? Length(b) - 1 - s : s; }
};

template <typename A>
Direction<A> MakeDirection(const Spec& spec, const Sizes& n, const Inputs<A>& in, int d) {
  Direction<A> dir;
  dir.cell = spec.cell;
  dir.lbr = spec.cell == Cell::kGru && spec.linear_before_reset;
  dir.input_forget = spec.input_forget;
  dir.back = spec.Backwards(d);
  dir.S = n.seq;
  dir.B = n.batch;
  dir.H = n.hidden;
  dir.GH = spec.Gates() * n.hidden;
  dir.D = n.dirs;
  dir.d = d;
  dir.lengths = in.lengths;
  const Activation* acts = spec.acts.data() + d * spec.ActsPerDirection();
  const A clip = static_cast<A>(spec.clip);
  dir.f = {acts[0], clip};
  dir.g = {spec.cell == Cell::kRnn ? acts[0] : acts[1], clip};
  dir.h = {spec.cell == Cell::kLstm ? acts[2] : acts[0], A(0)};
  dir.w = in.w + d * dir.GH * n.input;
  dir.r = in.r + d * dir.GH * n.hidden;
  dir.wb = in.b + d * 2 * dir.GH;
  dir.rb = dir.wb + dir.GH;
  dir.p = spec.cell == Cell::kLstm ? in.p + d * 3 * n.hidden : nullptr;
  return dir;
}

// gx[row, k] += Wb[k] + Rb[k] (GRU with linear_before_reset: Rbh sits inside the reset product, not here).
template <typename A>
struct AddInputBias {
  Direction<A> dir;
  A* gx;
  ONNXAMP_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t k = i % dir.GH;
    gx[i] += dir.wb[k] + (dir.lbr && k >= 2 * dir.H ? A(0) : dir.rb[k]);
  }
};

// One forward step s over [batch, hidden]: the gate inputs z of the step's rows from gx (time index) and gh (H_{t-1}
// * R^T), the new states in place of h and c, and then (Emit) the row's Y and trace. GRU without linear_before_reset
// runs it twice: phase 0 writes u = r * H_{t-1} for the candidate's product, phase 1 reads uh = u * Rh^T.
template <typename A>
struct ForwardStep {
  Direction<A> dir;
  int64_t s = 0;
  int phase = 0;
  const A* gx = nullptr;  // [seq, batch, GH]
  const A* gh = nullptr;  // [batch, GH]
  A* z = nullptr;         // [batch, GH]: the step's gate inputs (the trace's, or scratch)
  A* h = nullptr;         // [batch, hidden]
  A* c = nullptr;         // LSTM: [batch, hidden]
  A* q = nullptr;         // GRU with linear_before_reset, traced: [batch, hidden] of the step
  A* u = nullptr;         // GRU without linear_before_reset: [batch, hidden]
  const A* uh = nullptr;  // GRU without linear_before_reset: [batch, hidden]
  A* y = nullptr;         // [seq, dirs, batch, hidden] or null
  A* trace_h = nullptr;   // [batch, hidden] of the step, or null
  A* trace_c = nullptr;   // LSTM: [batch, hidden] of the step, or null

  ONNXAMP_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t H = dir.H, b = i / H, j = i % H;
    if (!dir.Active(s, b)) {
      if (!dir.TwoPhases() || phase == 1) Emit(b, j, false);
      return;
    }
    const int64_t t = dir.Time(s, b);
    const A* xg = gx + (t * dir.B + b) * dir.GH;
    const A* hg = gh + b * dir.GH;
    A* zr = z + b * dir.GH;
    A& hb = h[i];
    if (dir.cell == Cell::kRnn) {
      zr[j] = xg[j] + hg[j];
      hb = dir.f.Value(zr[j]);
    } else if (dir.cell == Cell::kLstm) {
      const A* p = dir.p;
      A cb = c[i];
      const A zi = xg[j] + hg[j] + p[j] * cb;
      const A zf = xg[2 * H + j] + hg[2 * H + j] + p[2 * H + j] * cb;
      const A zc = xg[3 * H + j] + hg[3 * H + j];
      const A gi = dir.f.Value(zi);
      const A gf = dir.input_forget ? A(1) - gi : dir.f.Value(zf);
      const A gc = dir.g.Value(zc);
      cb = gf * cb + gi * gc;
      const A zo = xg[H + j] + hg[H + j] + p[H + j] * cb;
      hb = dir.f.Value(zo) * dir.h.Value(cb);
      c[i] = cb;
      zr[j] = zi;
      zr[H + j] = zo;
      zr[2 * H + j] = zf;
      zr[3 * H + j] = zc;
    } else if (phase == 0) {
      zr[j] = xg[j] + hg[j];
      zr[H + j] = xg[H + j] + hg[H + j];
      const A reset = dir.f.Value(zr[H + j]);
      if (!dir.lbr) {
        u[i] = reset * hb;
        return;
      }
      const A qv = hg[2 * H + j] + dir.rb[2 * H + j];
      if (q) q[i] = qv;
      zr[2 * H + j] = xg[2 * H + j] + reset * qv;
      hb = GruState(zr, j, hb);
    } else {
      zr[2 * H + j] = xg[2 * H + j] + uh[i];
      hb = GruState(zr, j, hb);
    }
    Emit(b, j, true);
  }

  // GRU's new state: (1 - update) * g(candidate input) + update * H_{t-1}.
  ONNXAMP_HOST_DEVICE A GruState(const A* zr, int64_t j, A hp) const {
    const A update = dir.f.Value(zr[j]);
    const A cand = dir.g.Value(zr[2 * dir.H + j]);
    return (A(1) - update) * cand + update * hp;
  }

  ONNXAMP_HOST_DEVICE void Emit(int64_t b, int64_t j, bool active) const {
    const int64_t i = b * dir.H + j;
    if (y && active) y[((dir.Time(s, b) * dir.D + dir.d) * dir.B + b) * dir.H + j] = h[i];
    if (trace_h) trace_h[i] = h[i];
    if (trace_c) trace_c[i] = c[i];
  }
};

// The final states: those after the last step, zero for a row of length 0 (as ONNX Runtime has it).
template <typename A>
struct FinalStates {
  Direction<A> dir;
  const A* h;
  const A* c;
  A* y_h;  // or null
  A* y_c;  // or null
  ONNXAMP_HOST_DEVICE void operator()(int64_t i) const {
    const bool empty = dir.Length(i / dir.H) == 0;
    if (y_h) y_h[i] = empty ? A(0) : h[i];
    if (y_c) y_c[i] = empty ? A(0) : c[i];
  }
};

// The state gradients entering the last step: dY_h and dY_c, zero for a row of length 0 (its final states are
// constants).
template <typename A>
struct InitStateGrads {
  Direction<A> dir;
  const A* dy_h;  // or null
  const A* dy_c;  // or null
  A* dh;
  A* dc;  // LSTM only
  ONNXAMP_HOST_DEVICE void operator()(int64_t i) const {
    const bool live = dir.Length(i / dir.H) > 0;
    dh[i] = live && dy_h ? dy_h[i] : A(0);
    if (dc) dc[i] = live && dy_c ? dy_c[i] : A(0);
  }
};

// One backward step s over [batch, hidden]: the gate-input gradients dz of the step's rows (into dgh by step, and
// into dgx by time index), LSTM's dC_{t-1} in place of dc, and `direct`, the share of dH_{t-1} that does not pass
// through R. GRU without linear_before_reset runs it twice: phase 0 writes u = r * H_{t-1} and the candidate's
// gradient dzh for the products, phase 1 reads du = dzh * Rh for the reset gate.
template <typename A>
struct BackwardStep {
  Direction<A> dir;
  int64_t s = 0;
  int phase = 0;
  const A* z = nullptr;     // the trace's gate inputs of the step [batch, GH]
  const A* hp = nullptr;    // H_{t-1} of the step [batch, hidden]
  const A* cp = nullptr;    // LSTM: C_{t-1} of the step
  const A* cell = nullptr;  // LSTM: C_t of the step
  const A* q = nullptr;     // GRU with linear_before_reset: the trace's q of the step
  const A* dy = nullptr;    // [seq, dirs, batch, hidden] or null
  const A* dh = nullptr;    // dH_t [batch, hidden]
  A* dc = nullptr;          // LSTM: dC_t in, dC_{t-1} out
  A* direct = nullptr;      // [batch, hidden]
  A* dz = nullptr;          // dgh's rows of the step [batch, GH]
  A* dgx = nullptr;         // [seq, batch, GH] by time index
  A* u = nullptr;           // GRU without linear_before_reset: u of the step [batch, hidden]
  A* dzh = nullptr;         // GRU without linear_before_reset: dzh of the step [batch, hidden]
  const A* du = nullptr;    // GRU without linear_before_reset: dzh * Rh of the step

  ONNXAMP_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t H = dir.H, b = i / H, j = i % H;
    if (!dir.Active(s, b)) return;
    const int64_t t = dir.Time(s, b);
    const A* zr = z + b * dir.GH;
    A* dzr = dz + b * dir.GH;
    A* gx = dgx + (t * dir.B + b) * dir.GH;
    const GateFn<A>&f = dir.f, &g = dir.g;
    if (phase == 1) {  // GRU without linear_before_reset: the reset gate
      const A v = du[i] * hp[i] * f.Grad(zr[H + j]);
      dzr[H + j] = v;
      gx[H + j] = v;
      direct[i] += du[i] * f.Value(zr[H + j]);
      return;
    }
    const A dhb = dh[i] + (dy ? dy[((t * dir.D + dir.d) * dir.B + b) * H + j] : A(0));
    if (dir.cell == Cell::kRnn) {
      const A v = dhb * f.Grad(zr[j]);
      dzr[j] = v;
      gx[j] = v;
      direct[i] = 0;
    } else if (dir.cell == Cell::kLstm) {
      const A* p = dir.p;
      const A in = f.Value(zr[j]), din = f.Grad(zr[j]);
      const A o = f.Value(zr[H + j]), dout = f.Grad(zr[H + j]);
      const A fg = dir.input_forget ? A(1) - in : f.Value(zr[2 * H + j]);
      const A dforget = dir.input_forget ? A(0) : f.Grad(zr[2 * H + j]);
      const A cand = g.Value(zr[3 * H + j]), dcand = g.Grad(zr[3 * H + j]);
      const A hc = dir.h.Value(cell[i]), dhc = dir.h.Grad(cell[i]);
      const A coupled = dir.input_forget ? A(1) : A(0);
      const A dzo = dhb * hc * dout;
      const A dcell = dc[i] + dhb * o * dhc + dzo * p[H + j];
      const A dfg = dcell * cp[i];
      const A dzi = (dcell * cand - coupled * dfg) * din;
      const A dzf = dfg * dforget;
      const A dzc = dcell * in * dcand;
      dc[i] = dcell * fg + dzi * p[j] + dzf * p[2 * H + j];
      dzr[j] = gx[j] = dzi;
      dzr[H + j] = gx[H + j] = dzo;
      dzr[2 * H + j] = gx[2 * H + j] = dzf;
      dzr[3 * H + j] = gx[3 * H + j] = dzc;
      direct[i] = 0;
    } else {
      const A update = f.Value(zr[j]), dupdate = f.Grad(zr[j]);
      const A reset = f.Value(zr[H + j]);
      const A cand = g.Value(zr[2 * H + j]), dcand = g.Grad(zr[2 * H + j]);
      const A dzc = dhb * (A(1) - update) * dcand;
      direct[i] = dhb * update;
      dzr[j] = gx[j] = dhb * (hp[i] - cand) * dupdate;
      gx[2 * H + j] = dzc;
      if (dir.lbr) {
        dzr[H + j] = gx[H + j] = dzc * q[i] * f.Grad(zr[H + j]);
        dzr[2 * H + j] = dzc * reset;  // the gradient of H_{t-1} * Rh^T + Rbh
      } else {
        u[i] = reset * hp[i];
        dzh[i] = dzc;
      }
    }
  }
};

// dH_{t-1} = dZ * R + direct for the rows active at step s; the others pass their gradient through unchanged.
template <typename A>
struct StepStateGrad {
  Direction<A> dir;
  int64_t s;
  const A* dhp;
  const A* direct;
  A* dh;
  ONNXAMP_HOST_DEVICE void operator()(int64_t i) const {
    if (dir.Active(s, i / dir.H)) dh[i] = dhp[i] + direct[i];
  }
};

// The bias gradients: column sums of dgx (Wb, and Rb but for GRU's Rbh inside the reset product, whose sums are
// dgh's), rows in order (deterministic).
template <typename A>
struct BiasGrads {
  Direction<A> dir;
  int64_t rows;
  const A* dgx;
  const A* dgh;
  A* dwb;
  A* drb;
  ONNXAMP_HOST_DEVICE void operator()(int64_t k) const {
    const bool inside = dir.lbr && k >= 2 * dir.H;
    A sum_x = 0, sum_h = 0;
    for (int64_t row = 0; row < rows; ++row) {
      sum_x += dgx[row * dir.GH + k];
      if (inside) sum_h += dgh[row * dir.GH + k];
    }
    dwb[k] = sum_x;
    drb[k] = inside ? sum_h : sum_x;
  }
};

// LSTM's peephole gradients [3 * hidden] (input, output, forget), summed over the active rows in rnn_core.cc's order
// (steps last first, rows in order).
template <typename A>
struct PeepholeGrads {
  Direction<A> dir;
  const A* dgh;     // [seq, batch, GH]
  const A* cp_all;  // C_{t-1} by step [seq, batch, hidden]
  const A* c_all;   // C_t by step (the trace's)
  A* dp;
  ONNXAMP_HOST_DEVICE void operator()(int64_t j) const {
    const int64_t H = dir.H;
    A pi = 0, po = 0, pf = 0;
    for (int64_t s = dir.S - 1; s >= 0; --s) {
      for (int64_t b = 0; b < dir.B; ++b) {
        if (!dir.Active(s, b)) continue;
        const A* dz = dgh + (s * dir.B + b) * dir.GH;
        const int64_t k = (s * dir.B + b) * H + j;
        pi += dz[j] * cp_all[k];
        po += dz[H + j] * c_all[k];
        pf += dz[2 * H + j] * cp_all[k];
      }
    }
    dp[j] = pi;
    dp[H + j] = po;
    dp[2 * H + j] = pf;
  }
};

// ---- the passes -------------------------------------------------------------------------------------------------

// p on the engine: nothing for an empty C; C = 0 (or unchanged when accumulating) for k = 0.
template <typename A, typename Engine>
Status RunProduct(Engine& e, const Product<A>& p) {
  if (p.m == 0 || p.n == 0) return Status::Ok();
  if (p.k == 0) return p.accumulate ? Status::Ok() : e.ForEach(p.m * p.n, Fill<A>{p.c, A(0)});
  return e.Gemm(p);
}

template <typename A>
Product<A> MakeProduct(int64_t m, int64_t n, int64_t k, bool trans_a, const A* a, int64_t lda, bool trans_b, const A* b,
                       int64_t ldb, A* c, bool accumulate) {
  Product<A> p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.trans_a = trans_a;
  p.a = a;
  p.lda = lda;
  p.trans_b = trans_b;
  p.b = b;
  p.ldb = ldb;
  p.c = c;
  p.accumulate = accumulate;
  return p;
}

// Runs direction d: writes the hidden state of each (time, row) into y ([seq, dirs, batch, hidden]; rows past their
// length stay as they are, so the caller zeroes y first) and the final states into y_h and y_c ([batch, hidden] of
// direction d). y, y_h, y_c may be null; `trace` (null: not kept) receives what Backward needs, sized by the caller.
template <typename A, typename Engine>
Status Forward(Engine& e, const Spec& spec, const Sizes& n, const Inputs<A>& in, int d, A* y, A* y_h, A* y_c,
               const Trace<A>* trace) {
  const int64_t S = n.seq, B = n.batch, I = n.input, H = n.hidden;
  if (B == 0 || H == 0) return Status::Ok();
  const Direction<A> dir = MakeDirection(spec, n, in, d);
  const int64_t GH = dir.GH;
  const bool lstm = dir.Lstm(), two_phases = dir.TwoPhases();
  const A *w = dir.w, *r = dir.r;

  ONNXAMP_ASSIGN_OR_RETURN(A * gx, e.template Alloc<A>(S * B * GH));
  ONNXAMP_RETURN_IF_ERROR(RunProduct(e, MakeProduct(S * B, GH, I, false, in.x, I, true, w, I, gx, false)));
  ONNXAMP_RETURN_IF_ERROR(e.ForEach(S * B * GH, AddInputBias<A>{dir, gx}));

  ONNXAMP_ASSIGN_OR_RETURN(A * h, e.template Alloc<A>(B * H));
  ONNXAMP_ASSIGN_OR_RETURN(A * gh, e.template Alloc<A>(B * GH));
  ONNXAMP_RETURN_IF_ERROR(e.ForEach(B * H, Copy<A>{h, in.h0 + d * B * H}));
  A* c = nullptr;
  if (lstm) {
    ONNXAMP_ASSIGN_OR_RETURN(c, e.template Alloc<A>(B * H));
    ONNXAMP_RETURN_IF_ERROR(e.ForEach(B * H, Copy<A>{c, in.c0 + d * B * H}));
  }
  A *z_scratch = nullptr, *u = nullptr, *uh = nullptr;
  if (!trace) {
    ONNXAMP_ASSIGN_OR_RETURN(z_scratch, e.template Alloc<A>(B * GH));
  }
  if (two_phases) {
    ONNXAMP_ASSIGN_OR_RETURN(u, e.template Alloc<A>(B * H));
    ONNXAMP_ASSIGN_OR_RETURN(uh, e.template Alloc<A>(B * H));
    // Rows past their length keep their u; the product reads every row.
    ONNXAMP_RETURN_IF_ERROR(e.ForEach(B * H, Fill<A>{u, A(0)}));
  }
  for (int64_t s = 0; s < S; ++s) {
    ONNXAMP_RETURN_IF_ERROR(
        RunProduct(e, MakeProduct(B, GH, H, false, static_cast<const A*>(h), H, true, r, H, gh, false)));
    ForwardStep<A> step;
    step.dir = dir;
    step.s = s;
    step.gx = gx;
    step.gh = gh;
    step.z = trace ? trace->z + s * B * GH : z_scratch;
    step.h = h;
    step.c = c;
    step.q = trace && dir.lbr ? trace->q + s * B * H : nullptr;
    step.u = u;
    step.uh = uh;
    step.y = y;
    step.trace_h = trace ? trace->h + s * B * H : nullptr;
    step.trace_c = trace && lstm ? trace->c + s * B * H : nullptr;
    ONNXAMP_RETURN_IF_ERROR(e.ForEach(B * H, step));
    if (two_phases) {
      ONNXAMP_RETURN_IF_ERROR(
          RunProduct(e, MakeProduct(B, H, H, false, static_cast<const A*>(u), H, true, r + 2 * H * H, H, uh, false)));
      step.phase = 1;
      ONNXAMP_RETURN_IF_ERROR(e.ForEach(B * H, step));
    }
  }
  if (y_h || y_c) ONNXAMP_RETURN_IF_ERROR(e.ForEach(B * H, FinalStates<A>{dir, h, c, y_h, y_c}));
  return Status::Ok();
}

// Back-propagates direction d through time from its trace: dy ([seq, dirs, batch, hidden]) and dy_h, dy_c ([batch,
// hidden] of direction d) may each be null (no gradient). Adds dX into grads.dx and writes direction d's slices of the
// others; for B == 0 or H == 0 it writes nothing (the caller zeroes the gradients first).
template <typename A, typename Engine>
Status Backward(Engine& e, const Spec& spec, const Sizes& n, const Inputs<A>& in, int d, const Trace<A>& trace,
                const A* dy, const A* dy_h, const A* dy_c, const Grads<A>& grads) {
  const int64_t S = n.seq, B = n.batch, I = n.input, H = n.hidden;
  if (B == 0 || H == 0) return Status::Ok();
  const Direction<A> dir = MakeDirection(spec, n, in, d);
  const int64_t GH = dir.GH;
  const bool lstm = dir.Lstm(), two_phases = dir.TwoPhases();
  const A *w = dir.w, *r = dir.r;

  // Gate-input gradients by time index (for W, X and the biases) and by step (for R, against H_{t-1} by step).
  ONNXAMP_ASSIGN_OR_RETURN(A * dgx, e.template Alloc<A>(S * B * GH));
  ONNXAMP_ASSIGN_OR_RETURN(A * dgh, e.template Alloc<A>(S * B * GH));
  ONNXAMP_RETURN_IF_ERROR(e.ForEach(S * B * GH, Fill<A>{dgx, A(0)}));
  ONNXAMP_RETURN_IF_ERROR(e.ForEach(S * B * GH, Fill<A>{dgh, A(0)}));
  // H_{t-1} (and C_{t-1}) by step: the initial state, then the trace's states shifted by one step.
  auto previous = [&](const A* first, const A* traced, A** out) -> Status {
    ONNXAMP_ASSIGN_OR_RETURN(*out, e.template Alloc<A>(S * B * H));
    ONNXAMP_RETURN_IF_ERROR(e.ForEach(B * H, Copy<A>{*out, first}));
    return e.ForEach((S - 1) * B * H, Copy<A>{*out + B * H, traced});
  };
  A *hp_all = nullptr, *cp_all = nullptr;
  if (S > 0) {
    ONNXAMP_RETURN_IF_ERROR(previous(in.h0 + d * B * H, trace.h, &hp_all));
    if (lstm) ONNXAMP_RETURN_IF_ERROR(previous(in.c0 + d * B * H, trace.c, &cp_all));
  }
  A *u_all = nullptr, *dzh_all = nullptr, *du = nullptr;
  if (two_phases) {
    ONNXAMP_ASSIGN_OR_RETURN(u_all, e.template Alloc<A>(S * B * H));
    ONNXAMP_ASSIGN_OR_RETURN(dzh_all, e.template Alloc<A>(S * B * H));
    ONNXAMP_ASSIGN_OR_RETURN(du, e.template Alloc<A>(B * H));
    // Rows past their length add nothing to dRh: zeros there.
    ONNXAMP_RETURN_IF_ERROR(e.ForEach(S * B * H, Fill<A>{u_all, A(0)}));
    ONNXAMP_RETURN_IF_ERROR(e.ForEach(S * B * H, Fill<A>{dzh_all, A(0)}));
  }
  ONNXAMP_ASSIGN_OR_RETURN(A * dh, e.template Alloc<A>(B * H));
  ONNXAMP_ASSIGN_OR_RETURN(A * direct, e.template Alloc<A>(B * H));
  ONNXAMP_ASSIGN_OR_RETURN(A * dhp, e.template Alloc<A>(B * H));
  A* dc = nullptr;
  if (lstm) {
    ONNXAMP_ASSIGN_OR_RETURN(dc, e.template Alloc<A>(B * H));
  }
  ONNXAMP_RETURN_IF_ERROR(e.ForEach(B * H, InitStateGrads<A>{dir, dy_h, dy_c, dh, dc}));

  for (int64_t s = S - 1; s >= 0; --s) {
    BackwardStep<A> step;
    step.dir = dir;
    step.s = s;
    step.z = trace.z + s * B * GH;
    step.hp = hp_all + s * B * H;
    step.cp = lstm ? cp_all + s * B * H : nullptr;
    step.cell = lstm ? trace.c + s * B * H : nullptr;
    step.q = dir.lbr ? trace.q + s * B * H : nullptr;
    step.dy = dy;
    step.dh = dh;
    step.dc = dc;
    step.direct = direct;
    step.dz = dgh + s * B * GH;
    step.dgx = dgx;
    step.u = two_phases ? u_all + s * B * H : nullptr;
    step.dzh = two_phases ? dzh_all + s * B * H : nullptr;
    step.du = du;
    ONNXAMP_RETURN_IF_ERROR(e.ForEach(B * H, step));
    if (two_phases) {
      // d(r * H_{t-1}) = dzh * Rh, then the reset gate's and H_{t-1}'s shares of it.
      ONNXAMP_RETURN_IF_ERROR(RunProduct(
          e, MakeProduct(B, H, H, false, static_cast<const A*>(step.dzh), H, false, r + 2 * H * H, H, du, false)));
      step.phase = 1;
      ONNXAMP_RETURN_IF_ERROR(e.ForEach(B * H, step));
    }
    ONNXAMP_RETURN_IF_ERROR(
        RunProduct(e, MakeProduct(B, H, GH, false, static_cast<const A*>(step.dz), GH, false, r, H, dhp, false)));
    ONNXAMP_RETURN_IF_ERROR(e.ForEach(B * H, StepStateGrad<A>{dir, s, dhp, direct, dh}));
  }
  ONNXAMP_RETURN_IF_ERROR(e.ForEach(B * H, Copy<A>{grads.dh0 + d * B * H, dh}));
  if (lstm) ONNXAMP_RETURN_IF_ERROR(e.ForEach(B * H, Copy<A>{grads.dc0 + d * B * H, dc}));

  A* dw = grads.dw + d * GH * I;
  A* dr = grads.dr + d * GH * H;
  const A *cdgx = dgx, *cdgh = dgh;
  ONNXAMP_RETURN_IF_ERROR(RunProduct(e, MakeProduct(GH, I, S * B, true, cdgx, GH, false, in.x, I, dw, false)));
  ONNXAMP_RETURN_IF_ERROR(RunProduct(e, MakeProduct(S * B, I, GH, false, cdgx, GH, false, w, I, grads.dx, true)));
  ONNXAMP_RETURN_IF_ERROR(
      RunProduct(e, MakeProduct(GH, H, S * B, true, cdgh, GH, false, static_cast<const A*>(hp_all), H, dr, false)));
  if (two_phases) {
    ONNXAMP_RETURN_IF_ERROR(RunProduct(e, MakeProduct(H, H, S * B, true, static_cast<const A*>(dzh_all), H, false,
                                                      static_cast<const A*>(u_all), H, dr + 2 * H * H, false)));
  }
  A* dwb = grads.db + d * 2 * GH;
  ONNXAMP_RETURN_IF_ERROR(e.ForEach(GH, BiasGrads<A>{dir, S * B, cdgx, cdgh, dwb, dwb + GH}));
  if (lstm) {
    ONNXAMP_RETURN_IF_ERROR(e.ForEach(H, PeepholeGrads<A>{dir, cdgh, cp_all, trace.c, grads.dp + d * 3 * H}));
  }
  return Status::Ok();
}

}  // namespace onnxamp::cuda::recurrence
