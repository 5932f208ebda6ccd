// RNN, GRU, LSTM and their com.onnxamp RNNGrad kernel: float32, float16 and bfloat16 against float64 on the same
// (rounded) values, every linalg implementation alike, and the one-line errors for bad attributes and inputs.
// tests/peer/rnn_ort.py checks the forward semantics against ONNX Runtime; tests/trainer/grad_rnn_test.cc the
// gradients against finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/common/cpu_features.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_avx2.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/op_tester.h"
#include "tests/runtime/ops/linalg_test_util.h"
#include "tests/runtime/ops/tolerance.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

constexpr int64_t kS = 5, kB = 3, kI = 4, kH = 3;

int64_t Gates(const std::string& op) { return op == "RNN" ? 1 : op == "GRU" ? 3 : 4; }

// A bidirectional (or forward) node with sequence lengths, initial states and (LSTM) peepholes, its float inputs in
// `dtype`; `grad` makes it the RNNGrad node of that forward, fed dY, dY_h (and dY_c). Batch kB (3) has lengths {5, 2,
// 4}; a larger one full, zero and other lengths.
OpTester Node(const std::string& op, DType dtype, bool grad, int64_t batch = kB, bool bidirectional = true) {
  OpTester t = grad ? InternalOp(ops::kRnnGradOp) : op_test::Op(op, 14);
  if (grad) t.Attr(ir::Attribute::String("forward_op", op));
  t.Attr(ir::Attribute::Int("hidden_size", kH))
      .Attr(ir::Attribute::String("direction", bidirectional ? "bidirectional" : "forward"));
  const int64_t D = bidirectional ? 2 : 1;
  if (op == "GRU") t.Attr(ir::Attribute::Int("linear_before_reset", 1));
  const int64_t G = Gates(op);
  uint32_t seed = 40;
  auto random = [&](Dims d, double lo, double hi) {
    int64_t n = 1;
    for (int64_t v : d) n *= v;
    return TensorOf(dtype, d, RandomValues(dtype, n, seed++, lo, hi));
  };
  t.Input(random({kS, batch, kI}, -1.5, 1.5));
  t.Input(random({D, G * kH, kI}, -0.7, 0.7));
  t.Input(random({D, G * kH, kH}, -0.7, 0.7));
  t.Input(random({D, 2 * G * kH}, -0.5, 0.5));
  std::vector<int32_t> lengths = {5, 2, 4};
  if (batch != 3) {
    lengths.clear();
    for (int64_t b = 0; b < batch; ++b) lengths.push_back(static_cast<int32_t>(b % 3 == 0 ? kS : (b * 7) % (kS + 1)));
  }
  t.Input(MakeTensor<int32_t>({batch}, lengths));
  t.Input(random({D, batch, kH}, -0.8, 0.8));
  if (op == "LSTM") {
    t.Input(random({D, batch, kH}, -0.8, 0.8));
    t.Input(random({D, 3 * kH}, -0.6, 0.6));
  } else if (grad) {
    t.OmittedInput().OmittedInput();
  }
  if (grad) {
    t.Input(random({kS, D, batch, kH}, -1, 1));
    t.Input(random({D, batch, kH}, -1, 1));
    if (op == "LSTM") t.Input(random({D, batch, kH}, -1, 1));
    t.num_outputs = op == "LSTM" ? 8 : 6;
    t.omit_outputs = {false, false, false, false, true};  // sequence_lens has no gradient
  } else {
    t.num_outputs = op == "LSTM" ? 3 : 2;
  }
  return t;
}

class RnnKernelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RnnKernelTest, EveryTypeAndLinalgAgreesWithFloat64) {
  const std::string op = GetParam();
  for (bool grad : {false, true}) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      // The same values in float64: the reference.
      OpTester wide = Node(op, t, grad);
      for (auto& in : wide.inputs) {
        if (in && in->dtype() == t) in = TensorOf(DType::kFloat64, in->dims(), AsDoubles(*in));
      }
      const std::vector<ir::Tensor> want = RunWith(wide, ops::LinalgImpl::kReference);
      std::vector<ops::LinalgImpl> impls = {ops::LinalgImpl::kReference, ops::LinalgImpl::kPortable};
      if (ops::OneDnnAvailable()) impls.push_back(ops::LinalgImpl::kOneDnn);
      for (ops::LinalgImpl impl : impls) {
        const std::vector<ir::Tensor> got = RunWith(Node(op, t, grad), impl);
        ASSERT_EQ(got.size(), want.size());
        for (size_t k = 0; k < got.size(); ++k) {
          const std::string what =
              op + (grad ? " RNNGrad" : "") + " output " + std::to_string(k) + " " + ops::LinalgImplName(impl);
          ASSERT_EQ(got[k].dtype(), t) << what;
          ASSERT_EQ(got[k].dims(), want[k].dims()) << what;
          // Gradients sum over steps and rows: allow float32 some headroom over its one-rounding tolerance.
          Tolerance tol = ToleranceFor(t);
          if (t == DType::kFloat32) tol = {1e-5, 1e-5};
          ExpectClose(got[k], AsDoubles(want[k]), what, tol);
        }
      }
    }
  }
}

// RNNGrad skips the products of dX, dW and dR that no one requests and writes float32 and float64 gradients straight
// into its outputs: any subset of the outputs holds the same bits as when all are requested.
TEST_P(RnnKernelTest, GradientsOfAnySubsetOfOutputsAreTheSameBits) {
  const std::string op = GetParam();
  const ops::LinalgImpl impl = ops::OneDnnAvailable() ? ops::LinalgImpl::kOneDnn : ops::LinalgImpl::kPortable;
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16}) {
    const OpTester all = Node(op, t, true);
    const std::vector<ir::Tensor> want = RunWith(all, impl);
    ASSERT_EQ(want.size(), static_cast<size_t>(all.num_outputs - 1));
    // Output k of the node is want[k] below 4 and want[k - 1] above (sequence_lens has none).
    for (int only = 0; only < all.num_outputs; ++only) {
      if (only == 4) continue;
      for (bool alone : {true, false}) {  // output `only` alone, or every output but it
        OpTester some = all;
        some.omit_outputs.assign(static_cast<size_t>(all.num_outputs), !alone);
        some.omit_outputs[4] = true;
        some.omit_outputs[static_cast<size_t>(only)] = alone ? false : true;
        const std::vector<ir::Tensor> got = RunWith(some, impl);
        size_t next = 0;
        for (int k = 0; k < all.num_outputs; ++k) {
          if (some.omit_outputs[static_cast<size_t>(k)]) continue;
          ASSERT_LT(next, got.size());
          const ir::Tensor& w = want[static_cast<size_t>(k < 4 ? k : k - 1)];
          EXPECT_TRUE(std::ranges::equal(got[next].bytes(), w.bytes()))
              << op << " " << DTypeName(t) << " output " << k << (alone ? " alone" : " without output ") << only;
          ++next;
        }
      }
    }
  }
}

// On two or more threads a bidirectional node runs its directions at once (each on one thread, its dX share summed
// after both), and a step of 16 rows or more runs its rows in chunks at once (each chunk's product with R and cells
// on one thread): the same bits as on one thread, forward and RNNGrad, float32 and float64, ragged lengths.
TEST_P(RnnKernelTest, DirectionsAndRowsInParallelGiveTheSameBitsAsOneThread) {
  const std::string op = GetParam();
  // The GEMMs the per-step products run on: the session's (on AVX-512 CPUs the small GEMM), the AVX2 kernel with R
  // packed once (what AVX2-only CPUs run), the portable one.
  struct Path {
    const char* name;
    ops::LinalgImpl impl;
    ops::GemmAvx2Use avx2;
  };
  std::vector<Path> paths = {{"portable", ops::LinalgImpl::kPortable, ops::GemmAvx2Use::kAuto}};
  if (ops::OneDnnAvailable()) {
    paths.push_back({"onednn", ops::LinalgImpl::kOneDnn, ops::GemmAvx2Use::kAuto});
    if (CpuHasAvx2Fma()) paths.push_back({"onednn+avx2", ops::LinalgImpl::kOneDnn, ops::GemmAvx2Use::kAlways});
  }
  for (const Path& path : paths) {
    ops::SetGemmAvx2Use(path.avx2);
    for (const auto& [batch, bidirectional] :
         std::vector<std::pair<int64_t, bool>>{{kB, true}, {40, false}, {24, true}}) {
      for (bool grad : {false, true}) {
        for (DType t : {DType::kFloat32, DType::kFloat64}) {
          OpTester node = Node(op, t, grad, batch, bidirectional);
          const std::vector<ir::Tensor> want = RunWith(node, path.impl);
          for (int threads : {2, 3}) {
            node.options = CpuSessionOptions(threads);
            const std::vector<ir::Tensor> got = RunWith(node, path.impl);
            ASSERT_EQ(got.size(), want.size());
            for (size_t k = 0; k < got.size(); ++k) {
              EXPECT_TRUE(std::ranges::equal(got[k].bytes(), want[k].bytes()))
                  << path.name << " " << op << (grad ? " RNNGrad" : "") << " " << DTypeName(t) << " batch " << batch
                  << (bidirectional ? " bidirectional" : " forward") << " output " << k << ", " << threads
                  << " threads";
            }
          }
        }
      }
    }
  }
  ops::SetGemmAvx2Use(ops::GemmAvx2Use::kAuto);
}

INSTANTIATE_TEST_SUITE_P(Ops, RnnKernelTest, ::testing::Values("RNN", "GRU", "LSTM"));

TEST(RnnKernelTest, RowsPastTheirLengthAreZeroAndTheFinalStateIsTheLastValidOne) {
  OpTester t = Node("GRU", DType::kFloat32, false);
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  const auto y = (*out)[0].values<float>();
  const auto y_h = (*out)[1].values<float>();
  // Row 1 has length 2: Y at time 2.. is zero in both directions; the forward direction's Y_h is Y at time 1, the
  // backward direction's Y at time 0.
  for (int64_t s = 2; s < kS; ++s) {
    for (int64_t d = 0; d < 2; ++d) {
      for (int64_t j = 0; j < kH; ++j) EXPECT_EQ(y[static_cast<size_t>(((s * 2 + d) * kB + 1) * kH + j)], 0.0f);
    }
  }
  for (int64_t j = 0; j < kH; ++j) {
    EXPECT_EQ(y_h[static_cast<size_t>((0 * kB + 1) * kH + j)], y[static_cast<size_t>(((1 * 2 + 0) * kB + 1) * kH + j)]);
    EXPECT_EQ(y_h[static_cast<size_t>((1 * kB + 1) * kH + j)], y[static_cast<size_t>(((0 * 2 + 1) * kB + 1) * kH + j)]);
  }
}

// A Relu RNN keeps a NaN of the input in the hidden state, as the Relu op and torch.nn.RNN(nonlinearity='relu') do:
// from the NaN's time step on, the row's outputs are NaN; the other rows stay finite.
TEST(RnnKernelTest, ReluActivationKeepsNaN) {
  std::vector<double> x = RandomValues(DType::kFloat32, 4 * 2 * 3, 5);
  x[(1 * 2 + 1) * 3 + 0] = std::nan("");  // time 1, row 1
  OpTester t = op_test::Op("RNN", 14);
  t.Attr(ir::Attribute::Int("hidden_size", 3)).Attr(ir::Attribute::Strings("activations", {"Relu"}));
  t.Input(TensorOf(DType::kFloat32, {4, 2, 3}, x));
  t.Input(TensorOf(DType::kFloat32, {1, 3, 3}, RandomValues(DType::kFloat32, 9, 6)));
  t.Input(TensorOf(DType::kFloat32, {1, 3, 3}, RandomValues(DType::kFloat32, 9, 7)));
  t.num_outputs = 2;
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  const auto y = (*out)[0].values<float>();  // [4, 1, 2, 3]
  for (int64_t s = 0; s < 4; ++s) {
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t j = 0; j < 3; ++j) {
        EXPECT_EQ(std::isnan(y[static_cast<size_t>((s * 2 + b) * 3 + j)]), b == 1 && s >= 1)
            << "time " << s << " row " << b << " unit " << j;
      }
    }
  }
}

OpTester Lstm(std::vector<ir::Attribute> attrs, Dims w = {1, 8, 3}) {
  OpTester t = op_test::Op("LSTM", 14);
  t.Attr(ir::Attribute::Int("hidden_size", 2));
  for (ir::Attribute& a : attrs) t.Attr(std::move(a));
  t.Input(TensorOf(DType::kFloat32, {4, 2, 3}, RandomValues(DType::kFloat32, 24, 1)));
  int64_t n = w[0] * w[1] * w[2];
  t.Input(TensorOf(DType::kFloat32, w, RandomValues(DType::kFloat32, n, 2)));
  t.Input(TensorOf(DType::kFloat32, {1, 8, 2}, RandomValues(DType::kFloat32, 16, 3)));
  return t;
}

TEST(RnnKernelTest, BadAttributesAndInputsAreOneLineErrors) {
  op_test::ExpectCreateError(Lstm({ir::Attribute::String("direction", "sideways")}),
                             "attribute 'direction' must be forward, reverse or bidirectional, got 'sideways'");
  op_test::ExpectCreateError(Lstm({ir::Attribute::Float("clip", 0)}), "attribute 'clip' must be positive");
  op_test::ExpectCreateError(Lstm({ir::Attribute::Strings("activations", {"Sigmoid", "Tanh", "Swish"})}),
                             "attribute 'activations': unknown function 'Swish'");
  op_test::ExpectCreateError(Lstm({ir::Attribute::Strings("activations", {"Sigmoid", "Tanh"})}),
                             "attribute 'activations': LSTM with 1 direction(s) takes 3 functions, got 2");
  op_test::ExpectCreateError(Lstm({ir::Attribute::Int("layout", 2)}), "attribute 'layout' must be 0 or 1, got 2");
  op_test::ExpectRunError(Lstm({}, {1, 8, 4}), "input 1 (W): expected shape");
  op_test::ExpectRunError(Lstm({ir::Attribute::Int("hidden_size", 3)}), "input 2 (R): expected shape");
  {
    OpTester t = Lstm({});
    t.OmittedInput().Input(MakeTensor<int32_t>({2}, {4, 5}));
    op_test::ExpectRunError(t, "input 4 (sequence_lens): element 1 is 5, outside [0, 4]");
  }
  {
    OpTester t = Lstm({});
    t.Input(TensorOf(DType::kFloat64, {1, 16}, std::vector<double>(16, 0.0)));
    op_test::ExpectRunError(t, "input 3 (B) has element type double, expected float (the type of X)");
  }
  {
    OpTester t = InternalOp(ops::kRnnGradOp);
    t.Attr(ir::Attribute::String("forward_op", "LSTM")).Attr(ir::Attribute::Int("hidden_size", 2));
    const OpTester f = Lstm({});
    for (const auto& in : f.inputs) t.inputs.push_back(in);
    for (int k = 3; k < 8; ++k) t.OmittedInput();
    t.Input(TensorOf(DType::kFloat32, {4, 1, 2, 3}, std::vector<double>(24, 0.0)));
    op_test::ExpectRunError(t, "input 8 (dY): expected float of shape");
  }
  {
    OpTester t = InternalOp(ops::kRnnGradOp);
    t.Attr(ir::Attribute::String("forward_op", "Conv"));
    op_test::ExpectCreateError(t, "attribute 'forward_op': 'Conv' is not a recurrent op");
  }
}

// Shapes with a zero dim pass the element count of X and must not wrap the work buffers' sizes around or loop over
// an enormous sequence; RNN accepts its schema's default activations ["Tanh", "Tanh"] for one direction.
TEST(RnnKernelTest, HostileShapesAreErrorsOrEmptyAndTheSchemaDefaultIsAccepted) {
  {
    OpTester t = op_test::Op("RNN", 14);
    t.Attr(ir::Attribute::Int("hidden_size", 16));
    t.Input(ir::Tensor(DType::kFloat32, {int64_t{1} << 58, 4, 0}))
        .Input(ir::Tensor(DType::kFloat32, {1, 16, 0}))
        .Input(TensorOf(DType::kFloat32, {1, 16, 16}, std::vector<double>(256, 0.1)));
    op_test::ExpectRunError(t, "the recurrence's work buffers");
  }
  for (bool grad : {false, true}) {
    OpTester t = grad ? InternalOp(ops::kRnnGradOp) : op_test::Op("LSTM", 14);
    if (grad) t.Attr(ir::Attribute::String("forward_op", "LSTM"));
    t.Attr(ir::Attribute::Int("hidden_size", 2));
    t.Input(ir::Tensor(DType::kFloat32, {int64_t{1} << 40, 0, 1}))
        .Input(TensorOf(DType::kFloat32, {1, 8, 1}, std::vector<double>(8, 0.1)))
        .Input(TensorOf(DType::kFloat32, {1, 8, 2}, std::vector<double>(16, 0.1)));
    t.num_outputs = grad ? 3 : 2;
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    if (grad) {
      EXPECT_EQ((*out)[1].dims(), (std::vector<int64_t>{1, 8, 1}));
      for (float v : (*out)[1].values<float>()) EXPECT_EQ(v, 0.0f);  // no rows: no gradient
    } else {
      EXPECT_EQ((*out)[1].dims(), (std::vector<int64_t>{1, 0, 2}));
    }
  }
  OpTester rnn = op_test::Op("RNN", 14);
  rnn.Attr(ir::Attribute::Int("hidden_size", 2)).Attr(ir::Attribute::Strings("activations", {"Tanh", "Tanh"}));
  rnn.Input(TensorOf(DType::kFloat32, {3, 2, 2}, RandomValues(DType::kFloat32, 12, 5)))
      .Input(TensorOf(DType::kFloat32, {1, 2, 2}, RandomValues(DType::kFloat32, 4, 6)))
      .Input(TensorOf(DType::kFloat32, {1, 2, 2}, RandomValues(DType::kFloat32, 4, 7)));
  auto out = rnn.Run();
  EXPECT_TRUE(out.ok()) << out.status().message();
}

}  // namespace
}  // namespace onnxamp::testing
