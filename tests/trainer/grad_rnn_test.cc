// Finite-difference checks of the gradient builders of RNN, GRU and LSTM (one com.onnxamp RNNGrad node): every
// direction mode, sequence lengths shorter than X (and 0), layout 1, initial states, LSTM peepholes, input_forget and
// clip, GRU with and without linear_before_reset, other activation functions, and losses on any subset of Y, Y_h, Y_c.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/session.h"

#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"

namespace onnxamp::testing {
namespace {

using namespace gradtest;  // NOLINT

struct RnnCase {
  std::string name;
  std::string op;  // RNN, GRU, LSTM
  std::string direction = "forward";
  bool lengths = false;      // sequence_lens {4, 2, 3} (batch 3, seq 4)
  bool batch_major = false;  // layout 1 (opset 14)
  bool bias = true;
  bool initial = false;    // initial_h (and initial_c)
  bool peepholes = false;  // LSTM P
  std::vector<ir::Attribute> attrs = {};
  std::vector<bool> omit_outputs = {};  // outputs left out of the model (and so of the loss)
  bool zero_length = false;             // sequence_lens {4, 0, 3}: row 1's final states are zeros
};

// The case's node with float64 inputs (float32 with `dtype`).
OpTester MakeTester(const RnnCase& c, DType dtype = DType::kFloat64) {
  const int64_t S = 4, B = 3, I = 3, H = 2;
  const int64_t D = c.direction == "bidirectional" ? 2 : 1;
  const int64_t G = c.op == "RNN" ? 1 : c.op == "GRU" ? 3 : 4;
  OpTester t = Op(c.op, c.batch_major ? 14 : 7);
  t.Attr(ir::Attribute::Int("hidden_size", H)).Attr(ir::Attribute::String("direction", c.direction));
  if (c.batch_major) t.Attr(ir::Attribute::Int("layout", 1));
  for (const ir::Attribute& a : c.attrs) t.Attr(a);
  uint32_t seed = 11;
  t.Input(Doubles(c.batch_major ? Dims{B, S, I} : Dims{S, B, I}, seed++, -1.5, 1.5));
  t.Input(Doubles({D, G * H, I}, seed++, -0.8, 0.8));
  t.Input(Doubles({D, G * H, H}, seed++, -0.8, 0.8));
  if (c.bias) {
    t.Input(Doubles({D, 2 * G * H}, seed++, -0.5, 0.5));
  } else {
    t.OmittedInput();
  }
  if (c.lengths) {
    t.Input(MakeTensor<int32_t>({B}, {4, c.zero_length ? 0 : 2, 3}));
  } else {
    t.OmittedInput();
  }
  const Dims state = c.batch_major ? Dims{B, D, H} : Dims{D, B, H};
  if (c.initial) {
    t.Input(Doubles(state, seed++, -0.7, 0.7));
  } else {
    t.OmittedInput();
  }
  if (c.op == "LSTM") {
    if (c.initial) {
      t.Input(Doubles(state, seed++, -0.7, 0.7));
    } else {
      t.OmittedInput();
    }
    if (c.peepholes) t.Input(Doubles({D, 3 * H}, seed++, -0.6, 0.6));
  }
  t.num_outputs = c.op == "LSTM" ? 3 : 2;
  t.omit_outputs = c.omit_outputs;
  if (dtype == DType::kFloat32) {
    for (std::optional<ir::Tensor>& in : t.inputs) {
      if (!in || in->dtype() != DType::kFloat64) continue;
      const auto v = in->values<double>();
      in = MakeTensor<float>(in->dims(), std::vector<float>(v.begin(), v.end()));
    }
  }
  return t;
}

class RnnGradTest : public ::testing::TestWithParam<RnnCase> {};

// In an inference-mode session RNNGrad recomputes the forward.
TEST_P(RnnGradTest, MatchesFiniteDifferences) {
  ExpectGradientsMatchFiniteDifferences(MakeTester(GetParam()), GetParam().name);
}

// In a training session it reads the trace the forward node stashed (stash_recurrent_traces).
TEST_P(RnnGradTest, MatchesFiniteDifferencesFromStashedTraces) {
  OpTester t = MakeTester(GetParam());
  t.options.mode = exec::SessionMode::kTraining;
  ExpectGradientsMatchFiniteDifferences(t, GetParam().name);
}

std::vector<std::string> Acts(std::initializer_list<const char*> names) { return {names.begin(), names.end()}; }

INSTANTIATE_TEST_SUITE_P(
    Cases, RnnGradTest,
    ::testing::Values(
        RnnCase{.name = "rnn", .op = "RNN"},
        RnnCase{.name = "rnn_bidirectional_lengths",
                .op = "RNN",
                .direction = "bidirectional",
                .lengths = true,
                .initial = true},
        RnnCase{.name = "rnn_reverse_layout1_softsign",
                .op = "RNN",
                .direction = "reverse",
                .lengths = true,
                .batch_major = true,
                .bias = false,
                .initial = true,
                .attrs = {ir::Attribute::Strings("activations", Acts({"Softsign"}))}},
        RnnCase{.name = "rnn_y_h_only_leaky",
                .op = "RNN",
                .attrs = {ir::Attribute::Strings("activations", Acts({"LeakyRelu"})),
                          ir::Attribute::Floats("activation_alpha", {0.3f})},
                .omit_outputs = {true, false}},
        RnnCase{.name = "gru", .op = "GRU"},
        RnnCase{.name = "gru_linear_before_reset",
                .op = "GRU",
                .initial = true,
                .attrs = {ir::Attribute::Int("linear_before_reset", 1)}},
        RnnCase{.name = "gru_reverse_lengths", .op = "GRU", .direction = "reverse", .lengths = true, .initial = true},
        RnnCase{.name = "gru_bidirectional_layout1_lbr",
                .op = "GRU",
                .direction = "bidirectional",
                .lengths = true,
                .batch_major = true,
                .initial = true,
                .attrs = {ir::Attribute::Int("linear_before_reset", 1)}},
        RnnCase{.name = "gru_bidirectional_lengths_y_only",
                .op = "GRU",
                .direction = "bidirectional",
                .lengths = true,
                .bias = false,
                .initial = true,
                .omit_outputs = {false, true}},
        RnnCase{.name = "gru_activations",
                .op = "GRU",
                .initial = true,
                .attrs = {ir::Attribute::Strings("activations", Acts({"HardSigmoid", "ScaledTanh"})),
                          ir::Attribute::Floats("activation_alpha", {0.25f, 1.5f}),
                          ir::Attribute::Floats("activation_beta", {0.45f, 0.7f})}},
        RnnCase{.name = "gru_zero_length_layout1",
                .op = "GRU",
                .direction = "reverse",
                .lengths = true,
                .batch_major = true,
                .initial = true,
                .zero_length = true},
        RnnCase{.name = "lstm", .op = "LSTM"},
        RnnCase{.name = "lstm_peepholes_initial", .op = "LSTM", .initial = true, .peepholes = true},
        RnnCase{.name = "lstm_bidirectional_lengths_peepholes",
                .op = "LSTM",
                .direction = "bidirectional",
                .lengths = true,
                .initial = true,
                .peepholes = true},
        RnnCase{.name = "lstm_reverse_layout1",
                .op = "LSTM",
                .direction = "reverse",
                .lengths = true,
                .batch_major = true,
                .initial = true,
                .peepholes = true},
        RnnCase{.name = "lstm_input_forget",
                .op = "LSTM",
                .lengths = true,
                .initial = true,
                .peepholes = true,
                .attrs = {ir::Attribute::Int("input_forget", 1)}},
        RnnCase{.name = "lstm_clip",
                .op = "LSTM",
                .direction = "bidirectional",
                .initial = true,
                .attrs = {ir::Attribute::Float("clip", 0.9f)}},
        RnnCase{.name = "lstm_activations",
                .op = "LSTM",
                .initial = true,
                .peepholes = true,
                .attrs = {ir::Attribute::Strings("activations", Acts({"Sigmoid", "Softsign", "Elu"})),
                          ir::Attribute::Floats("activation_alpha", {0.7f})}},
        RnnCase{.name = "lstm_y_c_only",
                .op = "LSTM",
                .direction = "bidirectional",
                .lengths = true,
                .initial = true,
                .peepholes = true,
                .omit_outputs = {true, true, false}},
        RnnCase{.name = "lstm_y_h_y_c",
                .op = "LSTM",
                .lengths = true,
                .initial = true,
                .omit_outputs = {true, false, false}},
        RnnCase{.name = "lstm_zero_length",
                .op = "LSTM",
                .direction = "bidirectional",
                .lengths = true,
                .initial = true,
                .peepholes = true,
                .zero_length = true}),
    [](const ::testing::TestParamInfo<RnnCase>& info) { return info.param.name; });

// A CPU training session hands each forward node's trace to its RNNGrad (the node becomes com.onnxamp RNNTraining,
// the RNNGrad gets input 11), and the gradients are those of the recomputing kernel, bit for bit: float64 and float32
// (traces in the compute type), every cell, directions, lengths, layout 1.
TEST(RnnGradTest, TrainingSessionsStashTracesWithTheSameGradients) {
  const RnnCase cases[] = {
      {.name = "lstm", .op = "LSTM", .direction = "bidirectional", .lengths = true, .initial = true, .peepholes = true},
      {.name = "gru_lbr",
       .op = "GRU",
       .direction = "reverse",
       .lengths = true,
       .batch_major = true,
       .attrs = {ir::Attribute::Int("linear_before_reset", 1)}},
      {.name = "gru", .op = "GRU", .direction = "bidirectional", .lengths = true, .zero_length = true},
      {.name = "rnn_y_h", .op = "RNN", .initial = true, .omit_outputs = {true, false}},
  };
  for (const RnnCase& c : cases) {
    for (DType dtype : {DType::kFloat64, DType::kFloat32}) {
      SCOPED_TRACE(c.name + " " + std::string(DTypeName(dtype)));
      const OpTester t = MakeTester(c, dtype);
      std::vector<std::string> wrt;
      for (size_t i = 0; i < t.inputs.size(); ++i) {
        if (t.inputs[i] && t.inputs[i]->dtype() == dtype) wrt.push_back("in" + std::to_string(i));
      }
      std::vector<std::string> gradients;
      exec::SessionOptions training = CpuSessionOptions(1);
      training.mode = exec::SessionMode::kTraining;
      ir::Model stashed = SumLossGradientModel(t, wrt, &gradients);
      ASSERT_EQ(gradients.size(), wrt.size());
      ASSERT_TRUE(exec::OptimizeForInference(stashed, training).ok());
      int forward = 0, with_trace = 0;
      for (const ir::Node* n : stashed.graph->nodes()) {
        forward += n->op_type() == "RNNTraining" && n->GetString("forward_op", "") == c.op;
        with_trace += n->op_type() == "RNNGrad" && n->input(11) && n->input(11)->producer() &&
                      n->input(11)->producer()->op_type() == "RNNTraining";
        EXPECT_NE(n->op_type(), c.op);
      }
      EXPECT_EQ(forward, 1);
      EXPECT_EQ(with_trace, 1);

      exec::RunOptions fetch;
      fetch.fetch = gradients;
      auto run = [&](ir::Model m, const exec::SessionOptions& options) {
        StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(std::move(m), options);
        EXPECT_TRUE(session.ok()) << session.status().message();
        StatusOr<std::vector<ir::Tensor>> out = session.ok()
                                                    ? (*session)->Run(t.Feeds(), fetch)
                                                    : StatusOr<std::vector<ir::Tensor>>(Internal("no session"));
        EXPECT_TRUE(out.ok()) << out.status().message();
        return out.ok() ? *out : std::vector<ir::Tensor>{};
      };
      const std::vector<ir::Tensor> from_trace = run(std::move(stashed), training);
      const std::vector<ir::Tensor> recomputed = run(SumLossGradientModel(t, wrt, &gradients), CpuSessionOptions(1));
      ASSERT_EQ(from_trace.size(), wrt.size());
      ASSERT_EQ(recomputed.size(), wrt.size());
      for (size_t k = 0; k < wrt.size(); ++k) {
        ASSERT_EQ(from_trace[k].dims(), recomputed[k].dims()) << wrt[k];
        EXPECT_TRUE(std::ranges::equal(from_trace[k].bytes(), recomputed[k].bytes())) << wrt[k];
      }
    }
  }
}

// RNNGrad refuses a trace that does not fit its inputs.
TEST(RnnGradTest, RefusesATraceOfTheWrongShape) {
  OpTester t = MakeTester({.name = "lstm", .op = "LSTM"});
  std::vector<std::string> gradients;
  ir::Model m = SumLossGradientModel(t, {"in0", "in1", "in2"}, &gradients);
  ir::Graph& g = *m.graph;
  ir::Value* bad = g.CreateValue("bad_trace");
  bad->set_type(ir::ValueType::Tensor(DType::kFloat64));
  g.AddInput(bad);
  for (ir::Node* n : g.nodes()) {
    if (n->op_type() != "RNNGrad") continue;
    while (n->inputs().size() < 11) n->AddInput(nullptr);
    n->AddInput(bad);
  }
  std::vector<ir::Tensor> feeds = t.Feeds();
  ir::Tensor trace = MakeTensor<double>({1, 5}, {1, 2, 3, 4, 5});
  trace.set_name("bad_trace");
  feeds.push_back(std::move(trace));
  StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(std::move(m), CpuSessionOptions(1));
  ASSERT_TRUE(session.ok()) << session.status().message();
  exec::RunOptions fetch;
  fetch.fetch = gradients;
  StatusOr<std::vector<ir::Tensor>> out = (*session)->Run(feeds, fetch);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(
      out.status().message().find("input 11 (the forward's trace): expected double of shape [1,144], got double [1,5]"),
      std::string::npos)
      << out.status().message();
}

// The builder emits one RNNGrad node and nothing for sequence_lens.
TEST(RnnGradTest, EmitsOneRnnGradNode) {
  OpTester t = Op("LSTM", 14);
  t.Attr(ir::Attribute::Int("hidden_size", 2));
  t.Input(Doubles({3, 2, 4}, 1)).Input(Doubles({1, 8, 4}, 2)).Input(Doubles({1, 8, 2}, 3));
  t.num_outputs = 1;
  const std::vector<std::string> ops = EmittedOps(t, {"in0", "in1", "in2"});
  EXPECT_TRUE(Contains(ops, "RNNGrad"));
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "RNNGrad"), 1);
}

}  // namespace
}  // namespace onnxamp::testing
