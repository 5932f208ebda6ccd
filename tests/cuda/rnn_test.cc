// CUDA kernels of RNN, GRU and LSTM and of their com.onnxamp gradient RNNGrad against the CPU kernels: every float
// type, layouts 0 and 1, forward / reverse / bidirectional, sequence lengths (full, ragged, zero), initial states and
// peepholes given or omitted, clip and non-default activations, GRU's linear_before_reset, LSTM's input_forget,
// outputs requested or not, edge sizes (no steps, no input features, a single row or unit), and the CPU's errors for
// bad inputs (lengths outside [0, seq], which the device clamps). tests/runtime/ops/rnn_recurrence_test.cc checks
// the same algorithm on the host. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/ops/gradient_ops.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/cuda/elementwise_test_util.h"

namespace onnxamp::testing {
namespace {

using cuda_ew::ExpectSameRunError;
using ir::Attribute;
using op_test::Op;
using op_test::RandomValues;
using op_test::TensorOf;

int64_t Gates(const std::string& op) { return op == "RNN" ? 1 : op == "GRU" ? 3 : 4; }

struct Case {
  std::string op = "LSTM";
  DType dtype = DType::kFloat32;
  bool grad = false;
  std::string direction = "forward";
  bool batch_major = false;
  int lengths = 0;  // 0: omitted, 1: all full, 2: ragged with a zero
  bool states = true, bias = true, peepholes = true;
  bool variant = false;  // GRU: linear_before_reset; LSTM: input_forget
  bool attrs = false;    // clip and non-default activations
  bool all_outputs = true;
  int64_t seq = 5, batch = 3, input = 4, hidden = 6;
};

std::string Describe(const Case& c) {
  return c.op + (c.grad ? " RNNGrad" : "") + " " + std::string(DTypeName(c.dtype)) + " " + c.direction +
         (c.batch_major ? " layout 1" : "") + " lengths " + std::to_string(c.lengths) + (c.states ? "" : " no states") +
         (c.bias ? "" : " no bias") + (c.peepholes ? "" : " no peepholes") + (c.variant ? " variant" : "") +
         (c.attrs ? " clip+activations" : "") + (c.all_outputs ? "" : " some outputs") + " S" + std::to_string(c.seq) +
         " B" + std::to_string(c.batch) + " I" + std::to_string(c.input) + " H" + std::to_string(c.hidden);
}

OpTester Node(const Case& c) {
  OpTester t = c.grad ? InternalOp(ops::kRnnGradOp) : Op(c.op, 14);
  if (c.grad) t.Attr(Attribute::String("forward_op", c.op));
  t.Attr(Attribute::Int("hidden_size", c.hidden)).Attr(Attribute::String("direction", c.direction));
  if (c.batch_major) t.Attr(Attribute::Int("layout", 1));
  if (c.variant && c.op == "GRU") t.Attr(Attribute::Int("linear_before_reset", 1));
  if (c.variant && c.op == "LSTM") t.Attr(Attribute::Int("input_forget", 1));
  const int64_t D = c.direction == "bidirectional" ? 2 : 1;
  if (c.attrs) {
    t.Attr(Attribute::Float("clip", 0.9f));
    std::vector<std::string> acts = c.op == "RNN"   ? std::vector<std::string>{"Relu"}
                                    : c.op == "GRU" ? std::vector<std::string>{"HardSigmoid", "Softsign"}
                                                    : std::vector<std::string>{"Sigmoid", "ScaledTanh", "Elu"};
    if (D == 2) {
      const std::vector<std::string> one = acts;
      acts.insert(acts.end(), one.begin(), one.end());
    }
    t.Attr(Attribute::Strings("activations", acts));
    if (c.op != "RNN") t.Attr(Attribute::Floats("activation_alpha", {0.25f, 0.8f, 1.2f, 0.3f, 0.9f, 0.7f}));
    if (c.op != "RNN") t.Attr(Attribute::Floats("activation_beta", {0.45f, 1.1f, 0.55f, 0.9f}));
  }
  const int64_t G = Gates(c.op), S = c.seq, B = c.batch, I = c.input, H = c.hidden;
  uint32_t seed = 11;
  auto random = [&](std::vector<int64_t> dims, double lo, double hi) {
    return TensorOf(c.dtype, dims, RandomValues(Count(dims), seed++, lo, hi));
  };
  auto bm = [&](std::vector<int64_t> dims) {  // layout 1 swaps the first two dims of X and the states
    if (c.batch_major) std::swap(dims[0], dims[1]);
    return dims;
  };
  t.Input(random(bm({S, B, I}), -1.5, 1.5));
  t.Input(random({D, G * H, I}, -0.6, 0.6));
  t.Input(random({D, G * H, H}, -0.6, 0.6));
  const bool lstm = c.op == "LSTM";
  if (c.bias) {
    t.Input(random({D, 2 * G * H}, -0.5, 0.5));
  } else {
    t.OmittedInput();
  }
  if (c.lengths == 0) {
    t.OmittedInput();
  } else {
    std::vector<int32_t> lens(static_cast<size_t>(B), static_cast<int32_t>(S));
    if (c.lengths == 2) {
      for (size_t b = 0; b < lens.size(); ++b) lens[b] = static_cast<int32_t>((b * 2 + 1) % (S + 1));
      lens[0] = 0;
    }
    t.Input(MakeTensor<int32_t>({B}, lens));
  }
  if (c.states) {
    t.Input(random(bm({D, B, H}), -0.8, 0.8));
  } else {
    t.OmittedInput();
  }
  if (lstm) {
    if (c.states) {
      t.Input(random(bm({D, B, H}), -0.8, 0.8));
    } else {
      t.OmittedInput();
    }
    if (c.peepholes) {
      t.Input(random({D, 3 * H}, -0.5, 0.5));
    } else {
      t.OmittedInput();
    }
  }
  if (c.grad) {
    if (!lstm) t.OmittedInput().OmittedInput();
    const std::vector<int64_t> y_dims =
        c.batch_major ? std::vector<int64_t>{B, S, D, H} : std::vector<int64_t>{S, D, B, H};
    if (c.all_outputs) {
      t.Input(random(y_dims, -1, 1));
    } else {
      t.OmittedInput();
    }
    t.Input(random(bm({D, B, H}), -1, 1));
    if (lstm) t.Input(random(bm({D, B, H}), -1, 1));
    t.num_outputs = lstm ? 8 : 6;
    t.omit_outputs = {false, false, false, false, true};  // sequence_lens has no gradient
    if (!c.all_outputs) t.omit_outputs = {true, false, true, false, true, !c.states};
  } else {
    t.num_outputs = lstm ? 3 : 2;
    if (!c.all_outputs) t.omit_outputs = {true, false};
  }
  return t;
}

// GEMMs sum in another order than the CPU's, and gradients sum over steps and rows: float32 gets some headroom.
void Check(const Case& c) {
  std::optional<Tolerance> tol;
  if (c.dtype == DType::kFloat32) tol = Tolerance{2e-4, 2e-5};
  ExpectCudaMatchesCpu(Node(c), Describe(c), tol);
}

class CudaRnnTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaRnnTest, EveryTypeLayoutAndDirectionMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (bool grad : {false, true}) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
      for (const char* direction : {"forward", "reverse", "bidirectional"}) {
        for (bool bm : {false, true}) {
          Case c;
          c.op = GetParam();
          c.grad = grad;
          c.dtype = t;
          c.direction = direction;
          c.batch_major = bm;
          c.lengths = bm ? 2 : 0;
          Check(c);
        }
      }
    }
  }
}

TEST_P(CudaRnnTest, VariantsLengthsAndOmittedInputsMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (bool grad : {false, true}) {
    for (int lengths : {0, 1, 2}) {
      for (int shape = 0; shape < 4; ++shape) {
        Case c;
        c.op = GetParam();
        c.grad = grad;
        c.lengths = lengths;
        c.direction = lengths == 1 ? "reverse" : "bidirectional";
        c.variant = shape % 2 == 1;
        c.attrs = shape >= 2;
        c.states = shape != 1;
        c.bias = shape != 2;
        c.peepholes = shape != 3;
        c.all_outputs = shape != 3;
        Check(c);
      }
    }
  }
}

// What a training session runs (stash_recurrent_traces): com.onnxamp RNNTraining, the forward with output 3 (the
// traces, in the compute type), and RNNGrad reading them as its input 11. Where every row runs every step the traces
// match the CPU's (past a row's length the gate inputs are left unwritten: there only Y, Y_h and Y_c are compared),
// and RNNGrad given the CPU's traces matches the CPU's RNNGrad given the same.
TEST_P(CudaRnnTest, StashedTracesMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    for (const char* direction : {"reverse", "bidirectional"}) {
      for (int lengths : {1, 2}) {
        Case c;
        c.op = GetParam();
        c.dtype = t;
        c.direction = direction;
        c.lengths = lengths;
        c.batch_major = lengths == 2;
        c.variant = lengths == 2;
        OpTester training = Node(c);
        training.op_type = ops::kRnnTrainingOp;
        training.domain = exec::kInternalDomain;
        training.opset = 1;
        training.Attr(Attribute::String("forward_op", c.op));
        training.num_outputs = 4;
        training.omit_outputs.clear();
        if (c.op != "LSTM") training.omit_outputs = {false, false, true, false};  // no Y_c
        const std::string what = Describe(c) + " RNNTraining";
        StatusOr<std::vector<ir::Tensor>> want = training.Run();
        ASSERT_TRUE(want.ok()) << what << ": cpu: " << want.status().message();
        StatusOr<std::vector<ir::Tensor>> got = RunOnCuda(training);
        ASSERT_TRUE(got.ok()) << what << ": cuda: " << got.status().message();
        ASSERT_EQ(got->size(), want->size()) << what;
        for (size_t k = 0; k < got->size(); ++k) {
          const bool is_trace = k + 1 == got->size();
          if (is_trace && lengths == 2) continue;
          ASSERT_EQ((*got)[k].dtype(), (*want)[k].dtype()) << what << " output " << k;
          const DType out = (*got)[k].dtype();
          ExpectClose((*got)[k], AsDoubles((*want)[k]), what + " output " + std::to_string(k),
                      out == DType::kFloat32 ? Tolerance{2e-4, 2e-5} : CudaToleranceFor(out));
        }

        Case g = c;
        g.grad = true;
        OpTester grad = Node(g);
        while (grad.inputs.size() < 11) grad.OmittedInput();
        grad.Input(want->back());
        std::optional<Tolerance> tol;
        if (t == DType::kFloat32) tol = Tolerance{2e-4, 2e-5};
        ExpectCudaMatchesCpu(grad, Describe(g) + " given the CPU's traces", tol);
      }
    }
  }
}

TEST_P(CudaRnnTest, EdgeSizesMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  // No steps, no input features, one unit, one row, and a batch wide enough for several blocks per step.
  const std::vector<std::array<int64_t, 4>> sizes = {
      {0, 3, 2, 4}, {3, 2, 0, 4}, {6, 1, 3, 1}, {4, 1, 5, 7}, {3, 300, 8, 16}};
  for (bool grad : {false, true}) {
    for (const auto& [S, B, I, H] : sizes) {
      Case c;
      c.op = GetParam();
      c.grad = grad;
      c.direction = "bidirectional";
      c.lengths = B > 1 ? 2 : 0;
      c.seq = S;
      c.batch = B;
      c.input = I;
      c.hidden = H;
      Check(c);
    }
  }
}

TEST_P(CudaRnnTest, BadInputsAreTheCpuErrors) {
  ONNXAMP_REQUIRE_CUDA();
  Case c;
  c.op = GetParam();
  c.lengths = 1;
  {
    // Lengths outside [0, seq]: the CPU refuses them; the device, which cannot raise without a synchronisation,
    // clamps them: the CPU's result for the clamped lengths.
    OpTester t = Node(c);
    t.inputs[4] = MakeTensor<int32_t>({c.batch}, {9, -1, 2});
    EXPECT_FALSE(OpTester(t).Run().ok());
    StatusOr<std::vector<ir::Tensor>> got = RunOnCuda(t);
    ASSERT_TRUE(got.ok()) << got.status().message();
    OpTester clamped = Node(c);
    clamped.inputs[4] = MakeTensor<int32_t>({c.batch}, {static_cast<int32_t>(c.seq), 0, 2});
    StatusOr<std::vector<ir::Tensor>> want = clamped.Run();
    ASSERT_TRUE(want.ok()) << want.status().message();
    ASSERT_EQ(got->size(), want->size());
    for (size_t k = 0; k < got->size(); ++k) {
      ExpectClose((*got)[k], AsDoubles((*want)[k]), "clamped lengths, output " + std::to_string(k),
                  Tolerance{2e-4, 2e-5});
    }
  }
  {
    OpTester t = Node(c);
    t.inputs[2] = TensorOf(c.dtype, {1, Gates(c.op) * c.hidden, c.hidden + 1}, std::vector<double>(1000, 0.5));
    ExpectSameRunError(t);  // R of the wrong shape for hidden_size
  }
  {
    c.grad = true;
    OpTester t = Node(c);
    t.inputs[9] = TensorOf(c.dtype, {1, c.batch + 1, c.hidden}, std::vector<double>(1000, 0.5));
    ExpectSameRunError(t);  // dY_h of the wrong shape
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaRnnTest, ::testing::Values("RNN", "GRU", "LSTM"));

}  // namespace
}  // namespace onnxamp::testing
