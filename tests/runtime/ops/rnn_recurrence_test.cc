// The CUDA recurrent kernels' algorithm (runtime/cuda/ops/rnn/rnn_recurrence.h, a header without CUDA dependencies)
// run on the host, against the CPU kernels' rnn::Forward and rnn::Backward: no GPU or CUDA toolkit needed, so that
// the passes' indexing, phases and order are checked on every machine (and under ASan). The host engine hands out
// memory filled with NaN (a read of anything not written first shows up in the results) and runs each element-wise
// launch in forward and in reversed order, which must agree bit for bit (no element of a launch depends on another's
// write). tests/cuda/rnn_test.cc runs the same ops on the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/ops/rnn/rnn_recurrence.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/rnn/rnn.h"
#include "tests/runtime/ops/tolerance.h"

namespace onnxamp::testing {
namespace {

namespace rnn = ops::rnn;
namespace rec = cuda::recurrence;
using op_test::RandomValues;
using op_test::TensorOf;

class HostEngine {
 public:
  explicit HostEngine(bool reversed) : reversed_(reversed) {}

  template <typename T>
  StatusOr<T*> Alloc(int64_t n) {
    if (n == 0) return nullptr;
    // Stored as doubles: aligned for every element type the passes allocate.
    const size_t words = (static_cast<size_t>(n) * sizeof(T) + sizeof(double) - 1) / sizeof(double);
    blocks_.push_back(std::make_unique<double[]>(words));
    T* p = reinterpret_cast<T*>(blocks_.back().get());
    std::fill(p, p + n, std::numeric_limits<T>::quiet_NaN());
    return p;
  }

  template <typename A>
  Status Gemm(const rec::Product<A>& p) {
    EXPECT_TRUE(p.m > 0 && p.n > 0 && p.k > 0);
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        A sum = 0;
        for (int64_t k = 0; k < p.k; ++k) {
          const A a = p.trans_a ? p.a[k * p.lda + i] : p.a[i * p.lda + k];
          const A b = p.trans_b ? p.b[j * p.ldb + k] : p.b[k * p.ldb + j];
          sum += a * b;
        }
        A& c = p.c[i * p.n + j];
        c = p.accumulate ? c + sum : sum;
      }
    }
    return Status::Ok();
  }

  template <typename F>
  Status ForEach(int64_t n, const F& f) {
    for (int64_t i = 0; i < n; ++i) f(reversed_ ? n - 1 - i : i);
    return Status::Ok();
  }

 private:
  bool reversed_;
  std::vector<std::unique_ptr<double[]>> blocks_;
};

struct Case {
  rnn::Cell cell = rnn::Cell::kLstm;
  int directions = 1;
  bool reverse = false;
  bool ragged = false;  // sequence lengths {S, 2, 0, S - 1}
  double clip = 0;
  bool other_acts = false;
  bool lbr = false, input_forget = false;
  bool dy = true;  // dY given (dY_h and dY_c always)
  int64_t seq = 4, batch = 4, input = 3, hidden = 5;
  bool batch_major = false;
};

std::string Describe(const Case& c) {
  const char* cells[] = {"RNN", "GRU", "LSTM"};
  return std::string(cells[static_cast<int>(c.cell)]) + " dirs " + std::to_string(c.directions) +
         (c.reverse ? " reverse" : "") + (c.ragged ? " ragged" : "") + " clip " + std::to_string(c.clip) +
         (c.other_acts ? " other activations" : "") + (c.lbr ? " linear_before_reset" : "") +
         (c.input_forget ? " input_forget" : "") + (c.dy ? "" : " no dY") + " S " + std::to_string(c.seq) + " B " +
         std::to_string(c.batch) + " I " + std::to_string(c.input) + " H " + std::to_string(c.hidden);
}

rnn::Spec SpecOf(const Case& c) {
  rnn::Spec s;
  s.cell = c.cell;
  s.hidden = c.hidden;
  s.directions = c.directions;
  s.reverse = c.reverse;
  s.clip = c.clip;
  s.input_forget = c.input_forget;
  s.linear_before_reset = c.lbr;
  s.batch_major = c.batch_major;
  using rnn::Fn;
  std::vector<rnn::Activation> one;
  if (c.cell == rnn::Cell::kRnn) {
    one = {c.other_acts ? rnn::Activation{Fn::kRelu} : rnn::Activation{Fn::kTanh}};
  } else if (c.cell == rnn::Cell::kGru) {
    one = c.other_acts ? std::vector<rnn::Activation>{{Fn::kHardSigmoid, 0.2, 0.5}, {Fn::kSoftsign}}
                       : std::vector<rnn::Activation>{{Fn::kSigmoid}, {Fn::kTanh}};
  } else {
    one = c.other_acts ? std::vector<rnn::Activation>{{Fn::kSigmoid}, {Fn::kScaledTanh, 0.9, 1.1}, {Fn::kElu, 0.7}}
                       : std::vector<rnn::Activation>{{Fn::kSigmoid}, {Fn::kTanh}, {Fn::kTanh}};
  }
  for (int d = 0; d < c.directions; ++d) {
    for (const rnn::Activation& a : one) {
      // The second direction's functions differ a little where they take parameters.
      rnn::Activation b = a;
      if (d == 1 && a.fn == Fn::kElu) b.alpha = 1.3;
      s.acts.push_back(b);
    }
  }
  return s;
}

// The op's inputs as tensors (float64; layout 0), in the order of the op.
std::vector<ir::Tensor> Tensors(const Case& c) {
  const int64_t D = c.directions, G = c.cell == rnn::Cell::kRnn ? 1 : c.cell == rnn::Cell::kGru ? 3 : 4;
  const int64_t S = c.seq, B = c.batch, I = c.input, H = c.hidden;
  uint32_t seed = 7;
  auto random = [&](std::vector<int64_t> dims, double lo, double hi) {
    int64_t n = 1;
    for (int64_t v : dims) n *= v;
    return TensorOf(DType::kFloat64, dims, RandomValues(static_cast<size_t>(n), seed++, lo, hi));
  };
  std::vector<ir::Tensor> t;
  t.push_back(random({S, B, I}, -1.5, 1.5));
  t.push_back(random({D, G * H, I}, -0.7, 0.7));
  t.push_back(random({D, G * H, H}, -0.7, 0.7));
  t.push_back(random({D, 2 * G * H}, -0.5, 0.5));
  std::vector<double> lengths(static_cast<size_t>(B), static_cast<double>(S));
  if (c.ragged) {
    const int64_t pattern[] = {S, 2, 0, S - 1};
    for (size_t b = 0; b < lengths.size(); ++b) {
      lengths[b] = static_cast<double>(std::clamp<int64_t>(pattern[b % 4], 0, S));
    }
  }
  t.push_back(TensorOf(DType::kInt64, {B}, lengths));
  t.push_back(random({D, B, H}, -0.8, 0.8));
  t.push_back(random({D, B, H}, -0.8, 0.8));
  t.push_back(random({D, 3 * H}, -0.6, 0.6));
  return t;
}

template <typename A>
void ExpectNear(const std::vector<A>& got, const std::vector<A>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double rel = std::is_same_v<A, double> ? 1e-12 : 2e-5, abs = std::is_same_v<A, double> ? 1e-12 : 2e-5;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    ASSERT_TRUE(std::abs(g - w) <= abs + rel * std::abs(w)) << what << " element " << i << ": " << g << " vs " << w;
  }
}

template <typename A>
void ExpectSameBits(const std::vector<A>& a, const std::vector<A>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  if (a.empty()) return;  // memcmp takes no null pointer, even for 0 bytes
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(A)), 0) << what << ": launch order changed the result";
}

// Everything one run produces: forward outputs (Y, Y_h, Y_c) without a trace, then the gradients.
template <typename A>
struct Results {
  std::vector<A> y, y_h, y_c;
  std::vector<A> dx, dw, dr, db, dh0, dc0, dp;
};

// Y, Y_h and Y_c zeroed, dX zeroed, and the other gradients filled with `init`, sized for case c.
template <typename A>
Results<A> Sized(const Case& c, const rnn::Spec& spec, A init) {
  const int64_t S = c.seq, B = c.batch, I = c.input, H = c.hidden, D = c.directions, GH = spec.Gates() * H;
  const bool lstm = c.cell == rnn::Cell::kLstm;
  Results<A> r;
  r.y.assign(static_cast<size_t>(S * D * B * H), A(0));
  r.y_h.assign(static_cast<size_t>(D * B * H), A(0));
  if (lstm) r.y_c.assign(r.y_h.size(), A(0));
  r.dx.assign(static_cast<size_t>(S * B * I), A(0));
  r.dw.assign(static_cast<size_t>(D * GH * I), init);
  r.dr.assign(static_cast<size_t>(D * GH * H), init);
  r.db.assign(static_cast<size_t>(D * 2 * GH), init);
  r.dh0.assign(static_cast<size_t>(D * B * H), init);
  if (lstm) {
    r.dc0.assign(r.dh0.size(), init);
    r.dp.assign(static_cast<size_t>(D * 3 * H), init);
  }
  return r;
}

// rnn::Grads or rec::Grads (the same fields in the same order) pointing into r's gradients.
template <typename G, typename A>
G GradsIn(Results<A>& r) {
  auto at = [](std::vector<A>& v) { return v.empty() ? nullptr : v.data(); };
  return G{at(r.dx), at(r.dw), at(r.dr), at(r.db), at(r.dh0), at(r.dc0), at(r.dp)};
}

template <typename A>
Results<A> RunEmulated(const Case& c, const rnn::Spec& spec, const rnn::Inputs<A>& inputs, const std::vector<A> dys[3],
                       bool reversed) {
  HostEngine e(reversed);
  const int64_t S = c.seq, B = c.batch, I = c.input, H = c.hidden, D = c.directions, GH = spec.Gates() * H;
  const bool lstm = c.cell == rnn::Cell::kLstm;
  rec::Sizes n{S, B, I, H, D};
  rec::Inputs<A> in;
  in.x = inputs.x.data();
  in.w = inputs.w.data();
  in.r = inputs.r.data();
  in.b = inputs.b.data();
  in.h0 = inputs.h0.data();
  in.c0 = lstm ? inputs.c0.data() : nullptr;
  in.p = lstm ? inputs.p.data() : nullptr;
  bool ragged = false;
  for (int64_t len : inputs.lengths) ragged = ragged || len != S;
  in.lengths = ragged ? inputs.lengths.data() : nullptr;

  const A nan = std::numeric_limits<A>::quiet_NaN();
  // The gradients but dX start as NaN: Backward must write every element (for B, H > 0).
  Results<A> r = Sized<A>(c, spec, B == 0 || H == 0 ? A(0) : nan);
  for (int d = 0; d < D; ++d) {
    EXPECT_TRUE(rec::Forward<A>(e, spec, n, in, d, r.y.data(), r.y_h.data() + d * B * H,
                                lstm ? r.y_c.data() + d * B * H : nullptr, nullptr)
                    .ok());
  }
  const rec::Grads<A> g = GradsIn<rec::Grads<A>>(r);
  std::vector<A> tz(static_cast<size_t>(S * B * GH), nan), th(static_cast<size_t>(S * B * H), nan);
  std::vector<A> tc(lstm ? th.size() : 0, nan), tq(th.size(), nan);
  rec::Trace<A> trace{tz.data(), th.data(), lstm ? tc.data() : nullptr,
                      c.cell == rnn::Cell::kGru && c.lbr ? tq.data() : nullptr};
  auto at = [&](const std::vector<A>& v, int64_t offset) { return v.empty() ? nullptr : v.data() + offset; };
  for (int d = 0; d < D; ++d) {
    EXPECT_TRUE(rec::Forward<A>(e, spec, n, in, d, nullptr, nullptr, nullptr, &trace).ok());
    EXPECT_TRUE(
        rec::Backward<A>(e, spec, n, in, d, trace, at(dys[0], 0), at(dys[1], d * B * H), at(dys[2], d * B * H), g)
            .ok());
  }
  return r;
}

template <typename A>
Results<A> RunCpu(const Case& c, const rnn::Spec& spec, const rnn::Inputs<A>& inputs, const std::vector<A> dys[3]) {
  const ops::GemmRunner gemm(ops::LinalgImpl::kReference);
  exec::ThreadPool threads(1);
  const int64_t B = c.batch, H = c.hidden, D = c.directions;
  const bool lstm = c.cell == rnn::Cell::kLstm;
  Results<A> r = Sized<A>(c, spec, A(0));
  rnn::Grads<A> g = GradsIn<rnn::Grads<A>>(r);
  std::vector<A> dx_of_d(r.dx.size());  // each direction writes its share of dX
  if (g.dx) g.dx = dx_of_d.data();
  auto at = [&](const std::vector<A>& v, int64_t offset) { return v.empty() ? nullptr : v.data() + offset; };
  for (int d = 0; d < D; ++d) {
    EXPECT_TRUE(rnn::Forward<A>(spec, inputs, d, gemm, threads, r.y.data(), r.y_h.data() + d * B * H,
                                lstm ? r.y_c.data() + d * B * H : nullptr, nullptr)
                    .ok());
    std::vector<A> traced(static_cast<size_t>(rnn::TraceElements(spec, inputs)));
    const rnn::Trace<A> trace = rnn::TraceIn(spec, inputs, traced.data(), 0);
    EXPECT_TRUE(rnn::Forward<A>(spec, inputs, d, gemm, threads, nullptr, nullptr, nullptr, &trace).ok());
    EXPECT_TRUE(rnn::Backward<A>(spec, inputs, d, trace, at(dys[0], 0), at(dys[1], d * B * H), at(dys[2], d * B * H),
                                 gemm, threads, g)
                    .ok());
    for (size_t i = 0; i < dx_of_d.size(); ++i) r.dx[i] += dx_of_d[i];
  }
  return r;
}

template <typename A>
void Check(const Case& c) {
  SCOPED_TRACE(Describe(c) + (std::is_same_v<A, double> ? " double" : " float"));
  const rnn::Spec spec = SpecOf(c);
  std::vector<ir::Tensor> tensors = Tensors(c);
  if (std::is_same_v<A, float>) {
    for (size_t k : {0, 1, 2, 3, 5, 6, 7})
      tensors[k] = TensorOf(DType::kFloat32, tensors[k].dims(), AsDoubles(tensors[k]));
  }
  std::vector<const ir::Tensor*> in;
  for (size_t k = 0; k < 8; ++k) in.push_back(k >= 6 && c.cell != rnn::Cell::kLstm ? nullptr : &tensors[k]);
  rnn::Inputs<A> inputs;
  const Status st = rnn::ReadInputs<A>(spec, in, &inputs);
  ASSERT_TRUE(st.ok()) << st.message();
  const int64_t S = c.seq, B = c.batch, H = c.hidden, D = c.directions;
  std::vector<A> dys[3];
  auto random = [](size_t n, uint32_t seed) {
    std::vector<A> v;
    for (double x : RandomValues(n, seed, -1, 1)) v.push_back(static_cast<A>(x));
    return v;
  };
  if (c.dy) dys[0] = random(static_cast<size_t>(S * D * B * H), 91);
  dys[1] = random(static_cast<size_t>(D * B * H), 92);
  if (c.cell == rnn::Cell::kLstm) dys[2] = random(static_cast<size_t>(D * B * H), 93);

  const Results<A> want = RunCpu<A>(c, spec, inputs, dys);
  const Results<A> got = RunEmulated<A>(c, spec, inputs, dys, false);
  const Results<A> got_reversed = RunEmulated<A>(c, spec, inputs, dys, true);
  const std::vector<std::pair<const char*, std::vector<A> Results<A>::*>> fields = {
      {"Y", &Results<A>::y},     {"Y_h", &Results<A>::y_h}, {"Y_c", &Results<A>::y_c}, {"dX", &Results<A>::dx},
      {"dW", &Results<A>::dw},   {"dR", &Results<A>::dr},   {"dB", &Results<A>::db},   {"dH0", &Results<A>::dh0},
      {"dC0", &Results<A>::dc0}, {"dP", &Results<A>::dp}};
  for (const auto& [name, field] : fields) {
    ExpectNear(got.*field, want.*field, name);
    ExpectSameBits(got.*field, got_reversed.*field, name);
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (rnn::Cell cell : {rnn::Cell::kRnn, rnn::Cell::kGru, rnn::Cell::kLstm}) {
    for (int variant = 0; variant < 2; ++variant) {  // GRU: linear_before_reset; LSTM: input_forget
      if (cell == rnn::Cell::kRnn && variant == 1) continue;
      for (int dirs : {1, 2}) {
        for (bool reverse : {false, true}) {
          if (dirs == 2 && reverse) continue;
          for (bool ragged : {false, true}) {
            Case c;
            c.cell = cell;
            c.lbr = cell == rnn::Cell::kGru && variant == 1;
            c.input_forget = cell == rnn::Cell::kLstm && variant == 1;
            c.directions = dirs;
            c.reverse = reverse;
            c.ragged = ragged;
            cases.push_back(c);
            c.clip = 0.8;
            c.other_acts = true;
            c.dy = !ragged;
            cases.push_back(c);
          }
        }
      }
    }
  }
  // Edge sizes: no steps, no input features, one unit, a single row.
  for (rnn::Cell cell : {rnn::Cell::kRnn, rnn::Cell::kGru, rnn::Cell::kLstm}) {
    for (const auto& [S, B, I, H] : std::vector<std::array<int64_t, 4>>{{0, 3, 2, 4}, {3, 2, 0, 4}, {5, 1, 2, 1}}) {
      Case c;
      c.cell = cell;
      c.directions = 2;
      c.ragged = B > 1;
      c.seq = S;
      c.batch = B;
      c.input = I;
      c.hidden = H;
      cases.push_back(c);
    }
  }
  return cases;
}

TEST(CudaRecurrenceOnHostTest, MatchesTheCpuKernelsInFloatAndDouble) {
  const std::vector<Case> cases = Cases();
  ASSERT_EQ(cases.size(), 69u);
  for (const Case& c : cases) {
    Check<float>(c);
    Check<double>(c);
  }
}

}  // namespace
}  // namespace onnxamp::testing
