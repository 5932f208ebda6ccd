// Finite-difference checks of the index-family gradient builders (Gather, Dropout, Where, Expand, Tile) over their
// attribute and opset variants, in float64; and Dropout's training-mode gradient against the forward's own mask
// across RunOptions::rng_step values. (The GatherGrad and DropoutGrad kernels' own tests are in
// tests/runtime/ops/index_grad_test.cc.)
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/session.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"
#include "trainer/autodiff/autodiff.h"

namespace onnxamp::testing {
namespace {

using gradtest::Contains;
using gradtest::Dims;
using gradtest::DimsName;
using gradtest::Doubles;
using gradtest::EmittedOps;
using gradtest::Int64s;
using gradtest::Op;
using ir::Attribute;

ir::Tensor Bools(const Dims& dims, const std::vector<bool>& values) {
  ir::Tensor t(DType::kBool, dims);
  auto out = t.mutable_values<bool>();
  for (size_t i = 0; i < out.size() && i < values.size(); ++i) out[i] = values[i];
  return t;
}

// ---- Gather

TEST(GatherGradTest, AxesAndIndices) {
  struct Case {
    int64_t opset;
    std::optional<int64_t> axis;
    Dims data, idx_dims;
    std::vector<int64_t> idx;
  };
  const std::vector<Case> cases = {
      {13, std::nullopt, {5, 3}, {4}, {1, 4, 1, 0}},  // repeated indices accumulate
      {13, 0, {5, 3}, {}, {3}},                       // scalar index: the axis disappears
      {13, 1, {2, 3, 5}, {2, 2}, {-1, 0, 2, -1}},     // negative indices
      {13, -1, {2, 3, 5}, {3}, {4, 4, -5}},
      {11, -3, {3, 2, 2}, {2, 3}, {0, 2, 2, -3, 1, 0}},
      {8, 2, {2, 3, 5}, {}, {2}},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    OpTester t = Op("Gather", c.opset);
    if (c.axis) t.Attr(Attribute::Int("axis", *c.axis));
    t.Input(Doubles(c.data, seed++)).Input(Int64s(c.idx_dims, c.idx));
    ExpectGradientsMatchFiniteDifferences(t, "Gather opset " + std::to_string(c.opset) + " axis " +
                                                 (c.axis ? std::to_string(*c.axis) : "default") + " data " +
                                                 DimsName(c.data) + " indices " + DimsName(c.idx_dims));
  }
  OpTester t = Op("Gather", 13);
  t.Input(Doubles({4, 2}, 1)).Input(Int64s({2}, {3, 3}));
  EXPECT_TRUE(Contains(EmittedOps(t), ops::kGatherGradOp));
}

// ---- Dropout

// The model of `t` with loss = ReduceSum(first output) and its gradient w.r.t. in0 built (the forward nodes first).
ir::Model WithGradient(const OpTester& t) {
  ir::Model m = t.BuildModel();
  ir::Graph& g = *m.graph;
  ir::Value* s = g.CreateValue("loss");
  s->set_type(ir::ValueType::Tensor(DType::kFloat64, ir::Shape{}));
  g.AddNode("ReduceSum", {g.outputs()[0]}, {s}, "sum")->SetAttribute(Attribute::Int("keepdims", 0));
  g.AddOutput(s);
  StatusOr<trainer::GradientResult> r = trainer::BuildGradients(m, {"loss", {"in0"}, ""});
  EXPECT_TRUE(r.ok()) << r.status().message();
  return m;
}

// The emitted DropoutGrad node of `m`, or null.
const ir::Node* FindDropoutGrad(const ir::Model& m) {
  for (const ir::Node* n : m.graph->nodes()) {
    if (n->op_type() == ops::kDropoutGradOp) return n;
  }
  return nullptr;
}

TEST(DropoutGradTest, InferenceFormsAreIdentity) {
  const ir::Tensor x = Doubles({3, 5}, 1);
  // Opset 13 without training_mode; opset 10 (inference only, with a ratio attribute).
  OpTester t13 = Op("Dropout", 13);
  t13.Input(x);
  OpTester t10 = Op("Dropout", 10);
  t10.Attr(Attribute::Float("ratio", 0.3f)).Input(x);
  for (const OpTester* t : {&t13, &t10}) {
    const std::string what = "Dropout opset " + std::to_string(t->opset) + " inference";
    ExpectGradientsMatchFiniteDifferences(*t, what);
    EXPECT_EQ(FindDropoutGrad(WithGradient(*t)), nullptr) << what;
  }
  // Opsets 7 and 6 with is_test (built only: the autodiff's seed and the check's loss need opset 8).
  OpTester t7 = Op("Dropout", 7);
  t7.Input(x);
  OpTester t6 = Op("Dropout", 6);
  t6.Attr(Attribute::Int("is_test", 1)).Input(x);
  EXPECT_EQ(FindDropoutGrad(WithGradient(t7)), nullptr);
  EXPECT_EQ(FindDropoutGrad(WithGradient(t6)), nullptr);

  // Opset 13 with training_mode a constant false (an initializer no input overrides): Identity too; a graph input
  // (whose value is known only at run time) gives DropoutGrad.
  for (bool constant : {true, false}) {
    ir::Model m;
    m.opset_imports = {{"", 13}};
    ir::Graph& g = *m.graph;
    ir::Value* in = g.CreateValue("in0");
    in->set_type(ir::ValueType::Tensor(DType::kFloat64, ir::Shape{ir::Dim::Value(3), ir::Dim::Value(5)}));
    g.AddInput(in);
    ir::Value* mode = g.CreateValue("mode");
    mode->set_type(ir::ValueType::Tensor(DType::kBool, ir::Shape{}));
    if (constant) {
      g.SetInitializer(mode, Bools({}, {false}));
    } else {
      g.AddInput(mode);
    }
    ir::Value* y = g.CreateValue("y");
    g.AddNode("Dropout", {in, nullptr, mode}, {y}, "dropout");
    ir::Value* s = g.CreateValue("loss");
    g.AddNode("ReduceSum", {y}, {s}, "sum")->SetAttribute(Attribute::Int("keepdims", 0));
    g.AddOutput(s);
    StatusOr<trainer::GradientResult> r = trainer::BuildGradients(m, {"loss", {"in0"}, ""});
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(FindDropoutGrad(m) == nullptr, constant);
  }
}

TEST(DropoutGradTest, TrainingModeFiniteDifferences) {
  // The mask is fixed within a run (and the same for every run at one rng_step), so central differences work.
  for (std::optional<int64_t> seed : {std::optional<int64_t>(), std::optional<int64_t>(11)}) {
    for (int64_t opset : {12, 13}) {
      OpTester t = Op("Dropout", opset);
      if (seed) t.Attr(Attribute::Int("seed", *seed));
      t.Input(Doubles({4, 7}, 3)).Input(Doubles({}, 4, 0.4, 0.4)).Input(Bools({}, {true}));
      GradCheckOptions o;
      o.wrt = {0};
      const std::string what =
          "Dropout opset " + std::to_string(opset) + (seed ? " seed attribute" : " session seed") + " training";
      ExpectGradientsMatchFiniteDifferences(t, what, o);
      t.num_outputs = 2;  // with the mask requested (bool: not in the loss)
      ExpectGradientsMatchFiniteDifferences(t, what + " with mask", o);
      EXPECT_TRUE(Contains(EmittedOps(t), ops::kDropoutGradOp)) << what;
    }
  }
  // Opset 6 in training mode (is_test 0, the default): ratio and training_mode become constants (built only: the
  // autodiff's seed and the check's loss need opset 8).
  OpTester t6 = Op("Dropout", 6);
  t6.Attr(Attribute::Float("ratio", 0.25f)).Input(Doubles({3, 5}, 5));
  const ir::Model m = WithGradient(t6);
  const ir::Node* grad = FindDropoutGrad(m);
  ASSERT_NE(grad, nullptr);
  ASSERT_EQ(grad->inputs().size(), 3u);
  ASSERT_TRUE(grad->input(1)->initializer() && grad->input(2)->initializer());
  EXPECT_EQ(grad->input(1)->initializer()->values<float>()[0], 0.25f);
  EXPECT_TRUE(grad->input(2)->initializer()->values<bool>()[0]);
  EXPECT_EQ(grad->GetString("seed_from", ""), "out0");  // the forward's first output
}

// x -> Dropout(ratio 0.5, training) -> y (and mask) -> loss = sum(y * r). Its gradient w.r.t. x is r * mask / 0.5
// with the forward's mask: the recomputed mask must be the forward's at every rng_step.
TEST(DropoutGradTest, GradientUsesTheForwardMaskAtEveryStep) {
  const int64_t n = 4096;
  for (std::optional<int64_t> seed : {std::optional<int64_t>(), std::optional<int64_t>(5)}) {
    OpTester t = Op("Dropout", 13);
    t.num_outputs = 2;
    if (seed) t.Attr(Attribute::Int("seed", *seed));
    t.Input(Doubles({n}, 6)).Input(Doubles({}, 7, 0.5, 0.5)).Input(Bools({}, {true}));
    ir::Model m = t.BuildModel();
    ir::Graph& g = *m.graph;
    ir::Value* r = g.CreateValue("r");
    const ir::Tensor r_t = Doubles({n}, 8);
    g.SetInitializer(r, r_t);
    ir::Value* p = g.CreateValue("p");
    g.AddNode("Mul", {g.outputs()[0], r}, {p}, "project");
    ir::Value* loss = g.CreateValue("loss");
    g.AddNode("ReduceSum", {p}, {loss}, "sum")->SetAttribute(Attribute::Int("keepdims", 0));
    g.AddOutput(loss);
    StatusOr<trainer::GradientResult> grads = trainer::BuildGradients(m, {"loss", {"in0"}, ""});
    ASSERT_TRUE(grads.ok()) << grads.status().message();
    auto session = exec::Session::Create(std::move(m), CpuSessionOptions(2, 1234));
    ASSERT_TRUE(session.ok()) << session.status().message();
    std::vector<ir::Tensor> masks;
    for (uint64_t step : {1u, 2u, 0u}) {
      exec::RunOptions run;
      run.rng_step = step;
      run.fetch = {"out1", grads->gradients[0]};
      auto out = (*session)->Run(t.Feeds(), run);
      ASSERT_TRUE(out.ok()) << out.status().message();
      const ir::Tensor& mask = (*out)[0];
      const auto dx = (*out)[1].values<double>();
      const std::string what = std::string(seed ? "seed attribute" : "session seed") + ", step " + std::to_string(step);
      int64_t kept = 0, wrong = 0;
      for (int64_t i = 0; i < n; ++i) {
        const bool keep = mask.values<bool>()[i];
        kept += keep;
        wrong += dx[i] != (keep ? r_t.values<double>()[i] * 2.0 : 0.0);
      }
      EXPECT_EQ(wrong, 0) << what << ": the gradient does not follow the forward's mask";
      EXPECT_GT(kept, n / 2 - 200) << what;
      EXPECT_LT(kept, n / 2 + 200) << what;
      for (const ir::Tensor& earlier : masks) EXPECT_FALSE(earlier.SameContents(mask)) << what << ": mask repeats";
      masks.push_back(mask);
    }
  }
}

// ---- Where

TEST(WhereGradTest, BroadcastShapes) {
  struct Case {
    int64_t opset;
    Dims cond, x, y;
  };
  const std::vector<Case> cases = {
      {16, {3, 4}, {3, 4}, {3, 4}},
      {16, {2, 3, 4}, {3, 1}, {4}},  // X and Y broadcast: SumToShape
      {9, {3, 1}, {2, 3, 5}, {}},    // the condition broadcast, Y a scalar
      {16, {5}, {2, 1, 5}, {2, 3, 1}},
  };
  uint32_t seed = 20;
  for (const Case& c : cases) {
    int64_t count = 1;
    for (int64_t d : c.cond) count *= d;
    std::vector<bool> cond(count);
    for (int64_t i = 0; i < count; ++i) cond[i] = (i * 7 + 1) % 3 != 0;
    OpTester t = Op("Where", c.opset);
    t.Input(Bools(c.cond, cond)).Input(Doubles(c.x, seed));
    t.Input(Doubles(c.y, seed + 1));
    seed += 2;
    const std::string what = "Where opset " + std::to_string(c.opset) + " cond " + DimsName(c.cond) + " X " +
                             DimsName(c.x) + " Y " + DimsName(c.y);
    ExpectGradientsMatchFiniteDifferences(t, what);
    GradCheckOptions only_y;
    only_y.wrt = {2};
    ExpectGradientsMatchFiniteDifferences(t, what + " (Y only)", only_y);
  }
}

// ---- Expand

TEST(ExpandGradTest, BroadcastShapes) {
  struct Case {
    int64_t opset;
    Dims x, shape;
  };
  const std::vector<Case> cases = {
      {13, {3, 1}, {2, 3, 4}}, {8, {4}, {3, 4}},  {13, {2, 1, 5}, {2, 3, 1}}, {13, {3, 5}, {3, 5}},
      {13, {}, {2, 3}},        {13, {3, 1}, {1}},  // a shape smaller than the input's: the output is the input's shape
  };
  uint32_t seed = 30;
  for (const Case& c : cases) {
    OpTester t = Op("Expand", c.opset);
    t.Input(Doubles(c.x, seed++)).Input(Int64s({static_cast<int64_t>(c.shape.size())}, c.shape));
    ExpectGradientsMatchFiniteDifferences(
        t, "Expand opset " + std::to_string(c.opset) + " " + DimsName(c.x) + " to " + DimsName(c.shape));
  }
}

// ---- Tile

TEST(TileGradTest, Repeats) {
  struct Case {
    int64_t opset;
    Dims x;
    std::vector<int64_t> repeats;
  };
  const std::vector<Case> cases = {
      {13, {2, 3}, {2, 1}},       {13, {2, 3}, {3, 2}}, {8, {3}, {4}},
      {11, {2, 1, 3}, {1, 3, 2}},  // axes as an attribute before 13

      {13, {2, 3, 1}, {1, 1, 1}}, {13, {}, {}},  // rank 0: Identity
  };
  uint32_t seed = 40;
  for (const Case& c : cases) {
    OpTester t = Op("Tile", c.opset);
    t.Input(Doubles(c.x, seed++)).Input(Int64s({static_cast<int64_t>(c.repeats.size())}, c.repeats));
    ExpectGradientsMatchFiniteDifferences(
        t, "Tile opset " + std::to_string(c.opset) + " " + DimsName(c.x) + " repeats " + DimsName(c.repeats));
  }
}

// The input's rank unknown to the model (no declared shapes): the reduced axes are computed at run time from opset
// 13, refused before.
TEST(TileGradTest, UnknownRank) {
  for (int64_t opset : {13, 12}) {
    OpTester t = Op("Tile", opset);
    const ir::Tensor x = Doubles({2, 3}, 50);
    t.Input(x).Input(Int64s({2}, {2, 3}));
    ir::Model m = t.BuildModel();
    ir::Graph& g = *m.graph;
    for (ir::Value* v : g.inputs()) v->set_type(ir::ValueType::Tensor(v->type().elem_type()));
    ir::Value* r = g.CreateValue("r");
    const ir::Tensor r_t = Doubles({4, 9}, 51);
    g.SetInitializer(r, r_t);
    ir::Value* p = g.CreateValue("p");
    g.AddNode("Mul", {g.outputs()[0], r}, {p}, "project");
    ir::Value* loss = g.CreateValue("loss");
    g.AddNode("ReduceSum", {p}, {loss}, "sum")->SetAttribute(Attribute::Int("keepdims", 0));
    g.AddOutput(loss);
    StatusOr<trainer::GradientResult> grads = trainer::BuildGradients(m, {"loss", {"in0"}, ""});
    if (opset < 13) {
      ASSERT_FALSE(grads.ok());
      EXPECT_NE(grads.status().message().find("rank is unknown"), std::string::npos) << grads.status().message();
      continue;
    }
    ASSERT_TRUE(grads.ok()) << grads.status().message();
    auto session = exec::Session::Create(std::move(m), CpuSessionOptions(1, 0));
    ASSERT_TRUE(session.ok()) << session.status().message();
    exec::RunOptions run;
    run.fetch = {grads->gradients[0]};
    auto out = (*session)->Run(t.Feeds(), run);
    ASSERT_TRUE(out.ok()) << out.status().message();
    // dX[i, j] = sum over the 2 x 3 tiles of r.
    std::vector<double> want(6, 0.0);
    for (int64_t a = 0; a < 4; ++a) {
      for (int64_t b = 0; b < 9; ++b) want[(a % 2) * 3 + b % 3] += r_t.values<double>()[a * 9 + b];
    }
    ASSERT_EQ((*out)[0].dims(), (Dims{2, 3}));
    for (int64_t i = 0; i < 6; ++i) EXPECT_NEAR((*out)[0].values<double>()[i], want[i], 1e-12) << i;
  }
}

}  // namespace
}  // namespace onnxamp::testing
