// The gradients of Scan and Loop (trainer/autodiff/loop_gradient.h) against central differences, in float64: every
// combination of scan directions and axes, two scan inputs, an integer state the body reads (carried by the trace,
// not differentiated), losses on the final states, the scan outputs or both, a Loop with its iteration number in the
// body and one ending on its condition, and Dropout in a body (the backward loop must draw each forward iteration's
// mask, in reverse order). Also what the backward graph holds and which weights become parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/executor/lower_sequences.h"
#include "runtime/executor/session.h"
#include "tests/runtime/op_tester.h"
#include "tests/runtime/subgraph_builder.h"
#include "tests/trainer/grad_check.h"
#include "trainer/autodiff/autodiff.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::testing {
namespace {

using namespace gradtest;  // NOLINT

using G = SubgraphBuilder;

ir::Attribute Value(ir::Tensor t) { return ir::Attribute::TensorValue("value", std::move(t)); }

ir::Tensor Int64(int64_t v) { return MakeTensor<int64_t>({}, {v}); }

ir::Tensor True() {
  ir::Tensor t(DType::kBool, {});
  t.mutable_values<uint8_t>()[0] = 1;
  return t;
}

// training = true Dropout of ratio 0.5 on `in` into `out`, in graph builder `b`.
void Dropout(G& b, const std::string& in, const std::string& out) {
  b.N("Constant", {}, {out + "_ratio"}, {Value(MakeTensor<double>({}, {0.5}))});
  b.N("Constant", {}, {out + "_training"}, {Value(True())});
  b.N("Dropout", {in, out + "_ratio", out + "_training"}, {out});
}

// A Loop body's formal inputs: the iteration number i, the condition cond_in and the float64 state v of `dims` (no
// shape when absent).
void LoopBodyInputs(G& b, std::optional<std::vector<int64_t>> dims) {
  b.In("i", DType::kInt64, std::vector<int64_t>{});
  b.In("cond_in", DType::kBool, std::vector<int64_t>{});
  if (dims) {
    b.In("v", DType::kFloat64, *dims);
  } else {
    b.In("v", DType::kFloat64);
  }
}

// A Loop body's first outputs: cond passed on as cond_out, and the float64 state v_next.
void LoopBodyOutputs(G& b) {
  b.N("Identity", {"cond_in"}, {"cond_out"});
  b.Out("cond_out", DType::kBool);
  b.Out("v_next", DType::kFloat64);
}

// The Loop node (`inputs`: trip count, condition, initial state) running `body`, in graph builder `top`.
void AddLoop(G& top, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
             std::unique_ptr<ir::Graph> body) {
  ir::Node* n = top.N("Loop", inputs, outputs);
  n->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
}

// loss = sum(a * R) (+ sum(b * S)): R and S fixed.
void Loss(G& top, const std::vector<std::pair<std::string, std::vector<int64_t>>>& terms) {
  std::vector<std::string> parts;
  uint32_t seed = 50;
  for (const auto& [name, dims] : terms) {
    top.N("Constant", {}, {name + "_R"}, {Value(Doubles(dims, seed++, -1, 1))});
    top.N("Mul", {name, name + "_R"}, {name + "_r"});
    top.N("ReduceSum", {name + "_r"}, {name + "_l"}, {ir::Attribute::Int("keepdims", 0)});
    parts.push_back(name + "_l");
  }
  if (parts.size() == 1) {
    top.N("Identity", {parts[0]}, {"loss"});
  } else {
    top.N("Add", {parts[0], parts[1]}, {"loss"});
  }
  top.Out("loss", DType::kFloat64);
}

exec::SessionOptions Options(int threads) {
  exec::SessionOptions options = CpuSessionOptions(threads, /*seed=*/17);
  options.mode = exec::SessionMode::kTraining;
  return options;
}

double RunLoss(const ir::Model& m, const std::vector<ir::Tensor>& inputs) {
  auto s = exec::Session::Create(converter::CloneModel(m), Options(1));
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return NAN;
  exec::RunOptions run;
  run.fetch = {"loss"};
  run.rng_step = 3;
  auto out = (*s)->Run(inputs, run);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? (*out)[0].values<double>()[0] : NAN;
}

// Differentiates `model`'s loss with respect to the inputs named `wrt` and compares every element with central
// differences. Returns the training model. `op` (Scan or Loop): the training graph holds three (forward, trace,
// backward), and no value of the forward body leaks into the main graph.
ir::Model ExpectMatchesFiniteDifferences(const ir::Model& model, const std::vector<ir::Tensor>& inputs,
                                         const std::vector<std::string>& wrt, const std::string& op,
                                         const std::string& body_value) {
  ir::Model train = converter::CloneModel(model);
  auto grads = trainer::BuildGradients(train, {.loss = "loss", .wrt = wrt});
  EXPECT_TRUE(grads.ok()) << grads.status().message();
  if (!grads.ok()) return train;
  int loops = 0;
  for (const ir::Node* n : train.graph->nodes()) {
    loops += n->op_type() == op;
    for (const ir::Value* v : n->outputs()) EXPECT_NE(v->name(), body_value) << "a body value in the main graph";
  }
  EXPECT_EQ(loops, 3);
  auto s = exec::Session::Create(converter::CloneModel(train), Options(2));
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return train;
  for (size_t w = 0; w < wrt.size(); ++w) {
    size_t at = 0;
    while (at < inputs.size() && inputs[at].name() != wrt[w]) ++at;
    EXPECT_LT(at, inputs.size()) << wrt[w];
    if (at == inputs.size()) continue;
    exec::RunOptions run;
    run.rng_step = 3;
    if (!grads->gradients[w].empty()) run.fetch = {grads->gradients[w]};
    std::vector<double> analytic(static_cast<size_t>(inputs[at].num_elements()), 0.0);
    if (!run.fetch.empty()) {
      auto got = (*s)->Run(inputs, run);
      EXPECT_TRUE(got.ok()) << got.status().message();
      if (!got.ok()) continue;
      EXPECT_EQ((*got)[0].dims(), inputs[at].dims()) << wrt[w];
      for (size_t i = 0; i < analytic.size(); ++i) analytic[i] = (*got)[0].values<double>()[i];
    }
    for (size_t i = 0; i < analytic.size(); ++i) {
      std::vector<ir::Tensor> plus = inputs, minus = inputs;
      const double eps = 1e-6;
      plus[at].mutable_values<double>()[i] += eps;
      minus[at].mutable_values<double>()[i] -= eps;
      const double fd = (RunLoss(model, plus) - RunLoss(model, minus)) / (2 * eps);
      EXPECT_NEAR(analytic[i], fd, 1e-6 + 1e-5 * std::abs(fd)) << wrt[w] << "[" << i << "]";
    }
  }
  return train;
}

struct ScanCase {
  int64_t in_axis, in_dir, in_dir2, out_axis, out_dir;
  bool final_state, scan_output, dropout;
};

// h0 [2,3], an int64 counter c0 = 0, x (T = 4 steps along in_axis) and x2 [4,3]:
//   body(h, c, xt, x2t): h' = Tanh(h * w + xt + x2t + 0.1 * c) (Dropout after the Tanh when asked), c' = c + 1,
//   y = h' * u. loss = sum(hT * R) and/or sum(Y * S).
ir::Model ScanModel(const ScanCase& k) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("h0", DType::kFloat64, std::vector<int64_t>{2, 3});
  top.In("x", DType::kFloat64, k.in_axis == 0 ? std::vector<int64_t>{4, 2, 3} : std::vector<int64_t>{2, 4, 3});
  top.In("x2", DType::kFloat64, std::vector<int64_t>{4, 3});
  top.In("w", DType::kFloat64, std::vector<int64_t>{2, 3});
  top.In("u", DType::kFloat64, std::vector<int64_t>{2, 3});
  top.N("Constant", {}, {"c0"}, {Value(Int64(0))});
  auto body = Graph("body");
  G b(body.get());
  b.In("h", DType::kFloat64, std::vector<int64_t>{2, 3});
  b.In("c", DType::kInt64, std::vector<int64_t>{});
  b.In("xt", DType::kFloat64, std::vector<int64_t>{2, 3});
  b.In("x2t", DType::kFloat64, std::vector<int64_t>{3});
  b.N("Mul", {"h", "w"}, {"hw"});
  b.N("Add", {"hw", "xt"}, {"a1"});
  b.N("Add", {"a1", "x2t"}, {"a2"});
  b.N("Cast", {"c"}, {"cf"}, {ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat64))});
  b.N("Constant", {}, {"tenth"}, {Value(MakeTensor<double>({}, {0.1}))});
  b.N("Mul", {"cf", "tenth"}, {"cs"});
  b.N("Add", {"a2", "cs"}, {"a3"});
  b.N("Tanh", {"a3"}, {k.dropout ? "th" : "h_next"});
  if (k.dropout) Dropout(b, "th", "h_next");
  b.N("Constant", {}, {"one"}, {Value(Int64(1))});
  b.N("Add", {"c", "one"}, {"c_next"});
  b.N("Mul", {"h_next", "u"}, {"y"});
  b.Out("h_next", DType::kFloat64);
  b.Out("c_next", DType::kInt64);
  b.Out("y", DType::kFloat64);
  ir::Node* n = top.N("Scan", {"h0", "c0", "x", "x2"}, {"hT", "cT", "Y"});
  n->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  n->SetAttribute(ir::Attribute::Int("num_scan_inputs", 2));
  n->SetAttribute(ir::Attribute::Ints("scan_input_axes", {k.in_axis, 0}));
  n->SetAttribute(ir::Attribute::Ints("scan_input_directions", {k.in_dir, k.in_dir2}));
  n->SetAttribute(ir::Attribute::Ints("scan_output_axes", {k.out_axis}));
  n->SetAttribute(ir::Attribute::Ints("scan_output_directions", {k.out_dir}));
  std::vector<std::pair<std::string, std::vector<int64_t>>> terms;
  if (k.final_state) terms.push_back({"hT", {2, 3}});
  if (k.scan_output)
    terms.push_back({"Y", k.out_axis == 0 ? std::vector<int64_t>{4, 2, 3} : std::vector<int64_t>{2, 4, 3}});
  Loss(top, terms);
  return m;
}

class ScanGradTest : public ::testing::TestWithParam<ScanCase> {};

TEST_P(ScanGradTest, MatchesFiniteDifferences) {
  const ScanCase k = GetParam();
  const ir::Model model = ScanModel(k);
  const std::vector<ir::Tensor> inputs = {
      Named(Doubles({2, 3}, 1, -1, 1), "h0"),
      Named(Doubles(k.in_axis == 0 ? std::vector<int64_t>{4, 2, 3} : std::vector<int64_t>{2, 4, 3}, 2, -1, 1), "x"),
      Named(Doubles({4, 3}, 3, -1, 1), "x2"), Named(Doubles({2, 3}, 4, -1, 1), "w"),
      Named(Doubles({2, 3}, 5, -1, 1), "u")};
  ExpectMatchesFiniteDifferences(model, inputs, {"h0", "x", "x2", "w", "u"}, "Scan", "hw");
}

INSTANTIATE_TEST_SUITE_P(Cases, ScanGradTest,
                         ::testing::Values(ScanCase{0, 0, 0, 0, 0, true, true, false},
                                           ScanCase{1, 1, 0, 1, 1, true, true, false},
                                           ScanCase{0, 1, 1, 0, 0, true, false, false},
                                           ScanCase{1, 0, 1, 1, 0, false, true, false},
                                           ScanCase{0, 0, 1, 1, 1, true, true, true}));

// A Scan without states (a map over the steps): y_t = Sin(x_t * w); the trace is not needed.
TEST(ScanGradTest, WithoutStates) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("x", DType::kFloat64, std::vector<int64_t>{3, 4});
  top.In("w", DType::kFloat64, std::vector<int64_t>{4});
  auto body = Graph("body");
  G b(body.get());
  b.In("xt", DType::kFloat64, std::vector<int64_t>{4});
  b.N("Mul", {"xt", "w"}, {"xw"});
  b.N("Sin", {"xw"}, {"y"});
  b.Out("y", DType::kFloat64);
  ir::Node* n = top.N("Scan", {"x"}, {"Y"});
  n->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  n->SetAttribute(ir::Attribute::Int("num_scan_inputs", 1));
  Loss(top, {{"Y", {3, 4}}});
  ir::Model train = converter::CloneModel(m);
  auto grads = trainer::BuildGradients(train, {.loss = "loss", .wrt = {"x", "w"}});
  ASSERT_TRUE(grads.ok()) << grads.status().message();
  int scans = 0;
  for (const ir::Node* node : train.graph->nodes()) scans += node->op_type() == "Scan";
  EXPECT_EQ(scans, 2);  // the forward and the backward
  const ir::Tensor x = Doubles({3, 4}, 1, -1, 1), w = Doubles({4}, 2, -1, 1), r = Doubles({3, 4}, 50, -1, 1);
  auto s = exec::Session::Create(std::move(train), CpuSessionOptions(1));
  ASSERT_TRUE(s.ok()) << s.status().message();
  exec::RunOptions run;
  run.fetch = grads->gradients;
  auto got = (*s)->Run({Named(x, "x"), Named(w, "w")}, run);
  ASSERT_TRUE(got.ok()) << got.status().message();
  for (int64_t t = 0; t < 3; ++t) {
    for (int64_t j = 0; j < 4; ++j) {
      const double xi = x.values<double>()[t * 4 + j], wj = w.values<double>()[j], ri = r.values<double>()[t * 4 + j];
      EXPECT_NEAR((*got)[0].values<double>()[t * 4 + j], ri * std::cos(xi * wj) * wj, 1e-12);
    }
  }
  for (int64_t j = 0; j < 4; ++j) {
    double dw = 0;
    for (int64_t t = 0; t < 3; ++t) {
      const double xi = x.values<double>()[t * 4 + j], wj = w.values<double>()[j], ri = r.values<double>()[t * 4 + j];
      dw += ri * std::cos(xi * wj) * xi;
    }
    EXPECT_NEAR((*got)[1].values<double>()[j], dw, 1e-12);
  }
}

struct LoopCase {
  bool early_exit, scan_output, dropout;
};

// v0 [2,3]; body(i, cond, v): v' = Sin(v * w) + 0.1 * i (Dropout after the Sin when asked), y = v' * u; M = 3, or
// M = 10 with cond_out = i < 2 (three iterations either way). loss = sum(vT * R) (+ sum(Y * S)).
ir::Model LoopModel(const LoopCase& k) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("v0", DType::kFloat64, std::vector<int64_t>{2, 3});
  top.In("w", DType::kFloat64, std::vector<int64_t>{2, 3});
  top.In("u", DType::kFloat64, std::vector<int64_t>{2, 3});
  top.N("Constant", {}, {"M"}, {Value(Int64(k.early_exit ? 10 : 3))});
  auto body = Graph("body");
  G b(body.get());
  LoopBodyInputs(b, std::vector<int64_t>{2, 3});
  b.N("Mul", {"v", "w"}, {"vw"});
  b.N("Sin", {"vw"}, {k.dropout ? "s0" : "s"});
  if (k.dropout) Dropout(b, "s0", "s");
  b.N("Cast", {"i"}, {"fi"}, {ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat64))});
  b.N("Constant", {}, {"tenth"}, {Value(MakeTensor<double>({}, {0.1}))});
  b.N("Mul", {"fi", "tenth"}, {"fs"});
  b.N("Add", {"s", "fs"}, {"v_next"});
  b.N("Mul", {"v_next", "u"}, {"y"});
  if (k.early_exit) {
    b.N("Constant", {}, {"two"}, {Value(Int64(2))});
    b.N("Less", {"i", "two"}, {"cond_out"});
  } else {
    b.N("Identity", {"cond_in"}, {"cond_out"});
  }
  b.Out("cond_out", DType::kBool);
  b.Out("v_next", DType::kFloat64);
  b.Out("y", DType::kFloat64);
  AddLoop(top, {"M", "", "v0"}, {"vT", "Y"}, std::move(body));
  std::vector<std::pair<std::string, std::vector<int64_t>>> terms = {{"vT", {2, 3}}};
  if (k.scan_output) terms.push_back({"Y", {3, 2, 3}});
  Loss(top, terms);
  return m;
}

class LoopGradTest : public ::testing::TestWithParam<LoopCase> {};

TEST_P(LoopGradTest, MatchesFiniteDifferences) {
  const LoopCase k = GetParam();
  const ir::Model model = LoopModel(k);
  const std::vector<ir::Tensor> inputs = {Named(Doubles({2, 3}, 1, -1, 1), "v0"), Named(Doubles({2, 3}, 2, -1, 1), "w"),
                                          Named(Doubles({2, 3}, 3, -1, 1), "u")};
  ExpectMatchesFiniteDifferences(model, inputs, {"v0", "w", "u"}, "Loop", "vw");
}

INSTANTIATE_TEST_SUITE_P(Cases, LoopGradTest,
                         ::testing::Values(LoopCase{false, true, false}, LoopCase{true, true, false},
                                           LoopCase{false, false, false}, LoopCase{true, true, true}));

// x [2, 3, 4] (axis 0) or [3, 2, 4] (else), v0 and w [3, 4]; M = `trips`; body: v' = Tanh(v * w + x_t), x_t the
// slice i % 2 of x along `axis` (two iterations gather the same slice), read from x itself, from a Cast of x to its
// own type (`cast` kFloat64), or from a Cast to float32 and back after the Gather (`cast` kFloat32: an FP16/BF16 body
// reading an FP32 activation of the enclosing graph). loss = sum(vT * R).
ir::Model GatherLoopModel(int64_t axis, int64_t trips, DType cast) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("x", DType::kFloat64, axis == 0 ? std::vector<int64_t>{2, 3, 4} : std::vector<int64_t>{3, 2, 4});
  top.In("v0", DType::kFloat64, std::vector<int64_t>{3, 4});
  top.In("w", DType::kFloat64, std::vector<int64_t>{3, 4});
  top.N("Constant", {}, {"M"}, {Value(Int64(trips))});
  auto body = Graph("body");
  G b(body.get());
  LoopBodyInputs(b, std::vector<int64_t>{3, 4});
  b.N("Constant", {}, {"two"}, {Value(Int64(2))});
  b.N("Mod", {"i", "two"}, {"slot"});
  const ir::Attribute gather_axis = ir::Attribute::Int("axis", axis);
  if (cast == DType::kUndefined) {
    b.N("Gather", {"x", "slot"}, {"xt"}, {gather_axis});
  } else {
    b.N("Cast", {"x"}, {"x_cast"}, {ir::Attribute::Int("to", static_cast<int64_t>(cast))});
    b.N("Gather", {"x_cast", "slot"}, {cast == DType::kFloat64 ? "xt" : "xt_cast"}, {gather_axis});
    if (cast != DType::kFloat64) {
      b.N("Cast", {"xt_cast"}, {"xt"}, {ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat64))});
    }
  }
  b.N("Mul", {"v", "w"}, {"vw"});
  b.N("Add", {"vw", "xt"}, {"a"});
  b.N("Tanh", {"a"}, {"v_next"});
  LoopBodyOutputs(b);
  AddLoop(top, {"M", "", "v0"}, {"vT"}, std::move(body));
  Loss(top, {{"vT", {3, 4}}});
  return m;
}

std::vector<ir::Tensor> GatherLoopInputs(int64_t axis) {
  return {Named(Doubles(axis == 0 ? std::vector<int64_t>{2, 3, 4} : std::vector<int64_t>{3, 2, 4}, 1, -1, 1), "x"),
          Named(Doubles({3, 4}, 2, -1, 1), "v0"), Named(Doubles({3, 4}, 3, -1, 1), "w")};
}

// GatherGrad nodes of a training graph: in the main graph, in loop bodies, and the Casts of slice gradients there.
struct GatherGradCount {
  int main = 0, in_bodies = 0, slice_casts = 0;
};
GatherGradCount CountGatherGrads(const ir::Model& train) {
  GatherGradCount c;
  for (const ir::Node* node : train.graph->nodes()) {
    c.main += node->op_type() == "GatherGrad";
    for (const ir::Graph* sub : node->subgraphs()) {
      for (const ir::Node* inner : sub->nodes()) {
        c.in_bodies += inner->op_type() == "GatherGrad";
        c.slice_casts += inner->op_type() == "Cast" && inner->name().find("_grad_slice_cast") != std::string::npos;
      }
    }
  }
  return c;
}

// A Loop body that gathers one slice of an enclosing value per iteration (a scripted loop's x[:, t]), along axis 0
// or 1: the slices' gradients leave the backward Loop as scan outputs and one GatherGrad after it sums them, instead
// of an accumulator of x's size. Also through a Cast of x to its own type (central differences in float64 still
// apply; GatheredSlicesOfACastValue casts to another).
TEST(LoopGradTest, GatheredSlicesOfAnEnclosingValue) {
  // M = 0: no iteration ran, the stacked slices are empty and x's gradient is zeros.
  struct Case {
    int64_t axis, trips;
    DType cast;
  };
  const DType none = DType::kUndefined, same = DType::kFloat64;
  for (auto [axis, trips, cast] : {Case{0, 3, none}, Case{1, 3, none}, Case{-2, 3, none}, Case{0, 0, none},
                                   Case{1, 0, none}, Case{0, 3, same}, Case{1, 3, same}, Case{1, 0, same}}) {
    const std::string what =
        "axis " + std::to_string(axis) + ", M " + std::to_string(trips) + (cast == same ? ", cast" : "");
    const ir::Model train = ExpectMatchesFiniteDifferences(GatherLoopModel(axis, trips, cast), GatherLoopInputs(axis),
                                                           {"x", "v0", "w"}, "Loop", "vw");
    const GatherGradCount count = CountGatherGrads(train);
    EXPECT_EQ(count.main, 1) << what << ": the slices summed after the Loop";
    EXPECT_EQ(count.in_bodies, 0) << what;
    EXPECT_EQ(count.slice_casts, 0) << what;
  }
}

// The body gathering from Cast(x) to float32 and casting the slice back: each slice's gradient is cast back to float64
// in the body and one GatherGrad after the Loop sums them, instead of a scatter of x's size and its Cast in every
// iteration. The gradients match the same model without the Casts to float32 rounding.
TEST(LoopGradTest, GatheredSlicesOfACastValue) {
  std::vector<std::vector<ir::Tensor>> grads;
  for (DType cast : {DType::kUndefined, DType::kFloat32}) {
    ir::Model train = GatherLoopModel(1, 3, cast);
    auto g = trainer::BuildGradients(train, {.loss = "loss", .wrt = {"x", "v0", "w"}});
    ASSERT_TRUE(g.ok()) << g.status().message();
    const GatherGradCount count = CountGatherGrads(train);
    EXPECT_EQ(count.main, 1);
    EXPECT_EQ(count.in_bodies, 0);
    EXPECT_EQ(count.slice_casts, cast == DType::kFloat32 ? 1 : 0);
    auto s = exec::Session::Create(std::move(train), CpuSessionOptions(1));
    ASSERT_TRUE(s.ok()) << s.status().message();
    exec::RunOptions run;
    run.fetch = g->gradients;
    auto got = (*s)->Run(GatherLoopInputs(1), run);
    ASSERT_TRUE(got.ok()) << got.status().message();
    grads.push_back(*got);
  }
  for (size_t k = 0; k < 3; ++k) {
    const std::vector<double> want = Values<double>(grads[0][k]), got = Values<double>(grads[1][k]);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "gradient " << k << " [" << i << "]";
  }
}

// Indices whose shape changes from iteration to iteration (Range(0, i + 1)) cannot be stacked: that read keeps the
// accumulator, and the gradient still matches.
TEST(LoopGradTest, GatheredRowsOfChangingCountKeepTheAccumulator) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("x", DType::kFloat64, std::vector<int64_t>{3, 4});
  top.In("v0", DType::kFloat64, std::vector<int64_t>{4});
  top.N("Constant", {}, {"M"}, {Value(Int64(3))});
  auto body = Graph("body");
  G b(body.get());
  LoopBodyInputs(b, std::vector<int64_t>{4});
  b.N("Constant", {}, {"zero"}, {Value(Int64(0))});
  b.N("Constant", {}, {"one"}, {Value(Int64(1))});
  b.N("Add", {"i", "one"}, {"count"});
  b.N("Range", {"zero", "count", "one"}, {"rows"});
  b.N("Gather", {"x", "rows"}, {"xr"});
  b.N("ReduceSum", {"xr"}, {"xs"}, {ir::Attribute::Int("keepdims", 0)});  // axes none: all
  b.N("Mul", {"v", "xs"}, {"vx"});
  b.N("Sin", {"vx"}, {"v_next"});
  LoopBodyOutputs(b);
  AddLoop(top, {"M", "", "v0"}, {"vT"}, std::move(body));
  Loss(top, {{"vT", {4}}});
  const std::vector<ir::Tensor> inputs = {Named(Doubles({3, 4}, 1, -0.5, 0.5), "x"),
                                          Named(Doubles({4}, 2, -1, 1), "v0")};
  ExpectMatchesFiniteDifferences(m, inputs, {"x", "v0"}, "Loop", "vx");
}

// Nesting: a Loop (M = 3) whose body holds an If on its iteration number (then v * w, else Sin(v)) and an inner Scan
// over the rows of x (state s = Tanh(s * w2 + x_t)); v' = If(...) + s_final. Weights read two levels down train.
TEST(LoopGradTest, NestedIfAndScanInTheBody) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("v0", DType::kFloat64, std::vector<int64_t>{3});
  top.In("w", DType::kFloat64, std::vector<int64_t>{3});
  top.In("w2", DType::kFloat64, std::vector<int64_t>{3});
  top.In("x", DType::kFloat64, std::vector<int64_t>{2, 3});
  top.N("Constant", {}, {"M"}, {Value(Int64(3))});
  auto then_g = Graph("then");
  G t(then_g.get());
  t.N("Mul", {"v", "w"}, {"vw"});
  t.Out("vw", DType::kFloat64);
  auto else_g = Graph("else");
  G e(else_g.get());
  e.N("Sin", {"v"}, {"sv"});
  e.Out("sv", DType::kFloat64);
  auto scan_body = Graph("scan_body");
  G sb(scan_body.get());
  sb.In("s", DType::kFloat64, std::vector<int64_t>{3});
  sb.In("xt", DType::kFloat64, std::vector<int64_t>{3});
  sb.N("Mul", {"s", "w2"}, {"sw"});
  sb.N("Add", {"sw", "xt"}, {"sa"});
  sb.N("Tanh", {"sa"}, {"s_next"});
  sb.Out("s_next", DType::kFloat64);
  auto body = Graph("body");
  G b(body.get());
  LoopBodyInputs(b, std::vector<int64_t>{3});
  b.N("Constant", {}, {"zero"}, {Value(Int64(0))});
  b.N("Equal", {"i", "zero"}, {"first"});
  ir::Node* branch = b.N("If", {"first"}, {"picked"});
  branch->SetAttribute(ir::Attribute::GraphValue("then_branch", std::move(then_g)));
  branch->SetAttribute(ir::Attribute::GraphValue("else_branch", std::move(else_g)));
  ir::Node* scan = b.N("Scan", {"v", "x"}, {"s_final"});
  scan->SetAttribute(ir::Attribute::GraphValue("body", std::move(scan_body)));
  scan->SetAttribute(ir::Attribute::Int("num_scan_inputs", 1));
  b.N("Add", {"picked", "s_final"}, {"v_next"});
  LoopBodyOutputs(b);
  AddLoop(top, {"M", "", "v0"}, {"vT"}, std::move(body));
  Loss(top, {{"vT", {3}}});
  const std::vector<ir::Tensor> inputs = {Named(Doubles({3}, 1, -1, 1), "v0"), Named(Doubles({3}, 2, -1, 1), "w"),
                                          Named(Doubles({3}, 3, -1, 1), "w2"), Named(Doubles({2, 3}, 4, -1, 1), "x")};
  ExpectMatchesFiniteDifferences(m, inputs, {"v0", "w", "w2", "x"}, "Loop", "sw");
}

// A while loop (no trip count: the body's condition ends it after three iterations) with two scan outputs that the
// loss adds, so that both get one gradient value (Add passes its dY to both inputs).
TEST(LoopGradTest, WhileLoopWithTwoScanOutputsSharingAGradient) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("v0", DType::kFloat64, std::vector<int64_t>{2, 3});
  top.In("w", DType::kFloat64, std::vector<int64_t>{2, 3});
  ir::Tensor yes(DType::kBool, {});
  yes.mutable_values<uint8_t>()[0] = 1;
  top.N("Constant", {}, {"cond0"}, {Value(yes)});
  auto body = Graph("body");
  G b(body.get());
  LoopBodyInputs(b, std::vector<int64_t>{2, 3});
  b.N("Mul", {"v", "w"}, {"vw"});
  b.N("Sin", {"vw"}, {"v_next"});
  b.N("Cos", {"v"}, {"y1"});
  b.N("Mul", {"v_next", "w"}, {"y2"});
  b.N("Constant", {}, {"two"}, {Value(Int64(2))});
  b.N("Less", {"i", "two"}, {"cond_out"});
  b.Out("cond_out", DType::kBool);
  b.Out("v_next", DType::kFloat64);
  b.Out("y1", DType::kFloat64, std::vector<int64_t>{2, 3});
  b.Out("y2", DType::kFloat64, std::vector<int64_t>{2, 3});
  AddLoop(top, {"", "cond0", "v0"}, {"vT", "Y1", "Y2"}, std::move(body));
  for (const char* y : {"Y1", "Y2"}) {
    m.graph->FindValue(y)->set_type(
        ir::ValueType::Tensor(DType::kFloat64, ir::Shape{ir::Dim::Value(3), ir::Dim::Value(2), ir::Dim::Value(3)}));
  }
  top.N("Add", {"Y1", "Y2"}, {"Y"});
  Loss(top, {{"Y", {3, 2, 3}}});
  const std::vector<ir::Tensor> inputs = {Named(Doubles({2, 3}, 1, -1, 1), "v0"),
                                          Named(Doubles({2, 3}, 2, -1, 1), "w")};
  ExpectMatchesFiniteDifferences(m, inputs, {"v0", "w"}, "Loop", "vw");
}

// Scan-8 (batched) has no gradient: a weight only its body reads is not a parameter.
TEST(ScanGradTest, WeightsReadByScan8BodiesAreNotParameters) {
  ir::Model m;
  m.opset_imports = {{"", 8}};
  G top(m.graph.get());
  top.In("x", DType::kFloat32, std::vector<int64_t>{1, 2, 3});
  top.Init("w", MakeTensor<float>({3}, {1, 2, 3}));
  auto body = Graph("body");
  G b(body.get());
  b.In("xt", DType::kFloat32, std::vector<int64_t>{3});
  b.N("Mul", {"xt", "w"}, {"y"});
  b.Out("y", DType::kFloat32);
  ir::Node* n = top.N("Scan", {"", "x"}, {"Y"});
  n->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  n->SetAttribute(ir::Attribute::Int("num_scan_inputs", 1));
  top.Out("Y", DType::kFloat32);
  auto params = trainer::SelectParameters(m, "");
  ASSERT_TRUE(params.ok()) << params.status().message();
  EXPECT_TRUE(params->empty());
}

// Weights read only inside a Loop or Scan body are parameters (trained through the backward loop).
TEST(LoopGradTest, WeightsReadInLoopBodiesAreParameters) {
  ir::Model m = LoopModel({false, true, false});
  m.graph->RemoveInput(m.graph->FindValue("w"));
  m.graph->SetInitializer(m.graph->FindValue("w"), Doubles({2, 3}, 2, -1, 1));
  auto params = trainer::SelectParameters(m, "");
  ASSERT_TRUE(params.ok()) << params.status().message();
  EXPECT_EQ(*params, std::vector<std::string>{"w"});
}

// A Loop whose loop-carried value changes shape cannot be traced: the run fails naming the trace's scan output.
TEST(LoopGradTest, ValuesThatChangeShapeFailWithAMessage) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("v0", DType::kFloat64, std::vector<int64_t>{1});
  top.N("Constant", {}, {"M"}, {Value(Int64(3))});
  auto body = Graph("body");
  G b(body.get());
  LoopBodyInputs(b, std::nullopt);
  b.N("Sin", {"v"}, {"s"});
  b.N("Concat", {"v", "s"}, {"v_next"}, {ir::Attribute::Int("axis", 0)});
  LoopBodyOutputs(b);
  AddLoop(top, {"M", "", "v0"}, {"vT"}, std::move(body));
  top.N("ReduceSum", {"vT"}, {"loss"}, {ir::Attribute::Int("keepdims", 0)});
  top.Out("loss", DType::kFloat64);
  auto grads = trainer::BuildGradients(m, {.loss = "loss", .wrt = {"v0"}});
  ASSERT_TRUE(grads.ok()) << grads.status().message();
  auto s = exec::Session::Create(std::move(m), CpuSessionOptions(1));
  ASSERT_TRUE(s.ok()) << s.status().message();
  exec::RunOptions run;
  run.fetch = grads->gradients;
  auto got = (*s)->Run({Named(MakeTensor<double>({1}, {0.5}), "v0")}, run);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("scan output"), std::string::npos) << got.status().message();
}

// A scripted loop over a list (exec::LowerSequences): for xt in x.unbind(1) (SplitToSequence, SequenceAt of the
// enclosing list in the body), h = Tanh(h * w + xt), outs.append(h), then torch.cat(outs, 1) and outs[-1]. Once
// lowered, the list is a scan output of the Loop and x reaches the body through a Gather: both differentiate like any
// Loop.
TEST(LoopGradTest, ListsAppendedInALoopAfterLowering) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("x", DType::kFloat64, std::vector<int64_t>{2, 4, 3});
  top.In("w", DType::kFloat64, std::vector<int64_t>{2, 3});
  top.N("Constant", {}, {"h0"}, {Value(MakeTensor<double>({2, 3}, std::vector<double>(6, 0.25)))});
  top.N("Constant", {}, {"minus1"}, {Value(Int64(-1))});
  top.N("SplitToSequence", {"x"}, {"steps"}, {ir::Attribute::Int("axis", 1), ir::Attribute::Int("keepdims", 0)});
  top.N("SequenceLength", {"steps"}, {"M"});
  top.N("SequenceEmpty", {}, {"empty"}, {ir::Attribute::Int("dtype", static_cast<int64_t>(DType::kFloat64))});
  auto body = Graph("body");
  G b(body.get());
  LoopBodyInputs(b, std::vector<int64_t>{2, 3});
  body->AddInput(body->CreateValue("outs"));
  b.N("SequenceAt", {"steps", "i"}, {"xt"});
  b.N("Mul", {"v", "w"}, {"vw"});
  b.N("Add", {"vw", "xt"}, {"sum"});
  b.N("Tanh", {"sum"}, {"v_next"});
  b.N("SequenceInsert", {"outs", "v_next"}, {"outs_next"});
  LoopBodyOutputs(b);
  body->AddOutput(body->FindValue("outs_next"));
  AddLoop(top, {"M", "", "h0", "empty"}, {"hT", "list"}, std::move(body));
  top.N("ConcatFromSequence", {"list"}, {"cat"}, {ir::Attribute::Int("axis", 1)});
  top.N("SequenceAt", {"list", "minus1"}, {"last"});
  Loss(top, {{"cat", {2, 12}}, {"last", {2, 3}}});
  bool changed = false;
  ASSERT_TRUE(exec::LowerSequences(m, &changed).ok());
  EXPECT_TRUE(changed);
  const std::vector<ir::Tensor> inputs = {Named(Doubles({2, 4, 3}, 4, -1, 1), "x"),
                                          Named(Doubles({2, 3}, 5, -1, 1), "w")};
  ExpectMatchesFiniteDifferences(m, inputs, {"x", "w"}, "Loop", "vw");
}

}  // namespace
}  // namespace onnxamp::testing
