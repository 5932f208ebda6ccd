// ExpandGradientOps: the ONNX Gradient operator (ai.onnx.preview.training) on small graphs, run by a session and
// checked against closed forms and central differences: the operator's own examples, a y of many elements, xs naming
// intermediate values, evaluation at other inputs, zs, gradients y does not depend on, skipped outputs, a second
// derivative, a node whose backward pass asks it for an optional output, and errors that leave the model unchanged.
#include "trainer/autodiff/gradient_op.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "importer/model_io.h"
#include "importer/onnx_proto.h"
#include "runtime/executor/session.h"
#include "tests/runtime/ir_build_util.h"
#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"

namespace onnxamp::trainer {
namespace {

using testing::Input;
using testing::MakeTensor;
using testing::Named;
using testing::Node1;
using testing::Values;

ir::Model NewModel() {
  ir::Model m;
  m.opset_imports = {{"", 17}, {kGradientOpDomain, 1}};
  return m;
}

// A Gradient node writing graph outputs `outs` ("" leaves that output empty).
ir::Node* AddGradient(ir::Graph& g, std::vector<ir::Value*> in, const std::vector<std::string>& outs,
                      std::vector<std::string> xs, const std::string& y, std::vector<std::string> zs = {},
                      const std::string& name = "grad") {
  std::vector<ir::Value*> out_values;
  for (const std::string& o : outs) {
    if (o.empty()) {
      out_values.push_back(nullptr);
      continue;
    }
    ir::Value* v = g.CreateValue(o);
    g.AddOutput(v);
    out_values.push_back(v);
  }
  ir::Node* n = g.AddNode("Gradient", std::move(in), std::move(out_values), name, kGradientOpDomain);
  n->SetAttribute(ir::Attribute::Strings("xs", std::move(xs)));
  if (!zs.empty()) n->SetAttribute(ir::Attribute::Strings("zs", std::move(zs)));
  n->SetAttribute(ir::Attribute::String("y", y));
  return n;
}

// The model's ONNX bytes: what tells two models apart.
std::string Bytes(const ir::Model& m) {
  onnx::ModelProto proto;
  importer::ModelToProto(m, &proto);
  return proto.SerializeAsString();
}

int CountOps(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : g.nodes()) n += node->op_type() == op;
  return n;
}

// Expands, verifies, runs with `inputs`, returns the graph outputs `fetch`.
std::vector<ir::Tensor> ExpandAndRun(ir::Model m, const std::vector<ir::Tensor>& inputs,
                                     const std::vector<std::string>& fetch, int expected_expansions = 1) {
  StatusOr<int> n = ExpandGradientOps(m);
  EXPECT_TRUE(n.ok()) << n.status().message();
  if (!n.ok()) return {};
  EXPECT_EQ(*n, expected_expansions);
  EXPECT_FALSE(HasGradientOps(m));
  return testing::gradtest::RunModel(std::move(m), inputs, fetch);
}

// The operator's first example (ONNX's test_gradient_of_add): c = a + b, dc/da = dc/db = 1. The backward pass reads
// the graph's own Add: no second Add is computed.
TEST(GradientOp, GradientOfAdd) {
  ir::Model m = NewModel();
  ir::Graph& g = *m.graph;
  ir::Value* a = Input(g, "a", DType::kFloat32, {});
  ir::Value* b = Input(g, "b", DType::kFloat32, {});
  g.AddOutput(Node1(g, "Add", {a, b}, "c"));
  AddGradient(g, {a, b}, {"dc_da", "dc_db"}, {"a", "b"}, "c");
  ir::Model copy = converter::CloneModel(m);
  ASSERT_TRUE(ExpandGradientOps(copy).ok());
  EXPECT_EQ(CountOps(*copy.graph, "Add"), 1);
  auto out =
      ExpandAndRun(std::move(m), {Named(MakeTensor<float>({}, {1}), "a"), Named(MakeTensor<float>({}, {2}), "b")},
                   {"c", "dc_da", "dc_db"});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(Values<float>(out[0]), std::vector<float>{3});
  EXPECT_EQ(Values<float>(out[1]), std::vector<float>{1});
  EXPECT_EQ(Values<float>(out[2]), std::vector<float>{1});
}

// The second (test_gradient_of_add_and_mul): d = (a + b) * a, dd/da = 2a + b, dd/db = a.
TEST(GradientOp, GradientOfAddAndMul) {
  ir::Model m = NewModel();
  ir::Graph& g = *m.graph;
  ir::Value* a = Input(g, "a", DType::kFloat32, {});
  ir::Value* b = Input(g, "b", DType::kFloat32, {});
  ir::Value* c = Node1(g, "Add", {a, b}, "c");
  g.AddOutput(Node1(g, "Mul", {c, a}, "d"));
  AddGradient(g, {a, b}, {"dd_da", "dd_db"}, {"a", "b"}, "d");
  auto out =
      ExpandAndRun(std::move(m), {Named(MakeTensor<float>({}, {1}), "a"), Named(MakeTensor<float>({}, {2}), "b")},
                   {"d", "dd_da", "dd_db"});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(Values<float>(out[0]), std::vector<float>{3});
  EXPECT_EQ(Values<float>(out[1]), std::vector<float>{4});
  EXPECT_EQ(Values<float>(out[2]), std::vector<float>{1});
}

// A y of many elements is differentiated as their sum: y = x * x, dy/dx = 2x; w broadcasts: y2 = x * w, dy2/dw = sum x.
TEST(GradientOp, ManyElementYIsSummed) {
  ir::Model m = NewModel();
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {2, 3});
  ir::Value* w = Input(g, "w", DType::kFloat32, {3});
  ir::Value* y = Node1(g, "Mul", {x, x}, "y");
  ir::Value* y2 = Node1(g, "Mul", {x, w}, "y2");
  g.AddOutput(y);
  g.AddOutput(y2);
  AddGradient(g, {x}, {"dy_dx"}, {"x"}, "y", {}, "g1");
  AddGradient(g, {x, w}, {"dy2_dx", "dy2_dw"}, {"x", "w"}, "y2", {}, "g2");
  auto out = ExpandAndRun(
      std::move(m),
      {Named(MakeTensor<float>({2, 3}, {1, -2, 3, 0.5f, 4, -1}), "x"), Named(MakeTensor<float>({3}, {2, 3, 4}), "w")},
      {"dy_dx", "dy2_dx", "dy2_dw"}, 2);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{2, -4, 6, 1, 8, -2}));
  EXPECT_EQ(Values<float>(out[1]), (std::vector<float>{2, 3, 4, 2, 3, 4}));
  EXPECT_EQ(Values<float>(out[2]), (std::vector<float>{1.5f, 2, 2}));
  EXPECT_EQ(out[2].dims(), (std::vector<int64_t>{3}));
}

// xs may name an intermediate value: H = W * X, Y = H * Z + W. With xs = [H, Z] (the operator's third picture), H is
// an independent variable: dY/dH = Z, dY/dZ = H. With xs = [W, H], W's path through H is cut: dY/dW = 1.
TEST(GradientOp, IntermediateValuesAreCut) {
  ir::Model m = NewModel();
  ir::Graph& g = *m.graph;
  ir::Value* w = Input(g, "W", DType::kFloat32, {2});
  ir::Value* x = Input(g, "X", DType::kFloat32, {2});
  ir::Value* z = Input(g, "Z", DType::kFloat32, {2});
  ir::Value* h = Node1(g, "Mul", {w, x}, "H");
  ir::Value* hz = Node1(g, "Mul", {h, z}, "HZ");
  g.AddOutput(Node1(g, "Add", {hz, w}, "Y"));
  AddGradient(g, {h, z}, {"dY_dH", "dY_dZ"}, {"H", "Z"}, "Y");
  // dY/dW through both paths: X * Z + 1.
  AddGradient(g, {w, x, z}, {"dY_dW"}, {"W"}, "Y", {"X", "Z"}, "gw");
  // With H in xs too, W's path through H is cut: dY/dW = 1.
  AddGradient(g, {w, h, z}, {"dY_dW_cut", "dY_dH_2"}, {"W", "H"}, "Y", {"Z"}, "gwh");
  auto out = ExpandAndRun(std::move(m),
                          {Named(MakeTensor<float>({2}, {2, 3}), "W"), Named(MakeTensor<float>({2}, {5, 7}), "X"),
                           Named(MakeTensor<float>({2}, {-1, 4}), "Z")},
                          {"Y", "dY_dH", "dY_dZ", "dY_dW", "dY_dW_cut", "dY_dH_2"}, 3);
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{-8, 87}));
  EXPECT_EQ(Values<float>(out[1]), (std::vector<float>{-1, 4}));
  EXPECT_EQ(Values<float>(out[2]), (std::vector<float>{10, 21}));
  EXPECT_EQ(Values<float>(out[3]), (std::vector<float>{-4, 29}));
  EXPECT_EQ(Values<float>(out[4]), (std::vector<float>{1, 1}));
  EXPECT_EQ(Values<float>(out[5]), (std::vector<float>{-1, 4}));
}

// Evaluation at other values (the operator's last picture): Gradient(H1, Z; xs = [H, Z], y = Y) with Y = H * Z and
// H = W * X computes dY/dH = Z and dY/dZ = H1, from a second copy of the forward part; the graph's own Y is untouched.
TEST(GradientOp, EvaluatesAtTheNodesInputs) {
  ir::Model m = NewModel();
  ir::Graph& g = *m.graph;
  ir::Value* w = Input(g, "W", DType::kFloat32, {2});
  ir::Value* x = Input(g, "X", DType::kFloat32, {2});
  ir::Value* z = Input(g, "Z", DType::kFloat32, {2});
  ir::Value* h1 = Input(g, "H1", DType::kFloat32, {2});
  ir::Value* h = Node1(g, "Mul", {w, x}, "H");
  ir::Value* e = Node1(g, "Exp", {h}, "E");
  g.AddOutput(Node1(g, "Mul", {e, z}, "Y"));
  AddGradient(g, {h1, z}, {"dY_dH", "dY_dZ"}, {"H", "Z"}, "Y");
  auto out =
      ExpandAndRun(std::move(m),
                   {Named(MakeTensor<float>({2}, {1, 2}), "W"), Named(MakeTensor<float>({2}, {0.5f, 0.25f}), "X"),
                    Named(MakeTensor<float>({2}, {3, -2}), "Z"), Named(MakeTensor<float>({2}, {0, 1}), "H1")},
                   {"Y", "dY_dH", "dY_dZ"});
  ASSERT_EQ(out.size(), 3u);
  // Y at the graph's own H = [0.5, 0.5].
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{3 * std::exp(0.5f), -2 * std::exp(0.5f)}));
  // dY/dH = exp(H1) * Z, dY/dZ = exp(H1).
  EXPECT_EQ(Values<float>(out[1]), (std::vector<float>{3, -2 * std::exp(1.0f)}));
  EXPECT_EQ(Values<float>(out[2]), (std::vector<float>{1, std::exp(1.0f)}));
}

// zs are inputs of the differentiated function that take no gradient; an xs value y does not depend on gets zeros;
// an empty output skips its gradient (and the nodes only it needs).
TEST(GradientOp, ZsZerosAndSkippedOutputs) {
  ir::Model m = NewModel();
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "X", DType::kFloat32, {2, 3});
  ir::Value* w = Input(g, "W", DType::kFloat32, {3, 2});
  ir::Value* u = Input(g, "U", DType::kFloat32, {4});
  g.AddOutput(Node1(g, "MatMul", {x, w}, "Y"));
  AddGradient(g, {w, u, x}, {"dY_dW", "dY_dU"}, {"W", "U"}, "Y", {"X"}, "gw");
  AddGradient(g, {w, x}, {"", "dY_dX"}, {"W", "X"}, "Y", {}, "gx");
  ir::Model copy = converter::CloneModel(m);
  auto out = ExpandAndRun(
      std::move(m),
      {Named(MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}), "X"),
       Named(MakeTensor<float>({3, 2}, {1, -1, 2, 0, 0.5f, 3}), "W"), Named(MakeTensor<float>({4}, {9, 9, 9, 9}), "U")},
      {"dY_dW", "dY_dU", "dY_dX"}, 2);
  ASSERT_EQ(out.size(), 3u);
  // dY/dW[k][j] = sum_i X[i][k]; dY/dX[i][k] = sum_j W[k][j].
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{5, 5, 7, 7, 9, 9}));
  EXPECT_EQ(Values<float>(out[1]), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_EQ(out[1].dims(), (std::vector<int64_t>{4}));
  EXPECT_EQ(Values<float>(out[2]), (std::vector<float>{0, 2, 3.5f, 0, 2, 3.5f}));
  // The skipped dY/dW of "gx" left no nodes: one backward MatMul per gradient that is asked for.
  ASSERT_TRUE(ExpandGradientOps(copy).ok());
  EXPECT_EQ(CountOps(*copy.graph, "MatMul"), 3);
}

// A Gradient of a Gradient's output: y = x^3, dy/dx = 3x^2, d2y/dx2 = 6x.
TEST(GradientOp, SecondDerivative) {
  ir::Model m = NewModel();
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat64, {3});
  ir::Value* x2 = Node1(g, "Mul", {x, x}, "x2");
  g.AddOutput(Node1(g, "Mul", {x2, x}, "y"));
  AddGradient(g, {x}, {"dy"}, {"x"}, "y", {}, "first");
  AddGradient(g, {x}, {"d2y"}, {"x"}, "dy", {}, "second");
  // The same with the second node first in the graph's order: its y names the first's output, a link by name only.
  ir::Model swapped = converter::CloneModel(m);
  std::vector<ir::Node*> nodes;
  for (ir::Node* n : swapped.graph->nodes()) nodes.push_back(n);
  swapped.graph->MoveNodeBefore(nodes.back(), nodes[nodes.size() - 2]);
  std::vector<std::string> names;
  for (const ir::Node* n : swapped.graph->nodes()) names.push_back(n->name());
  ASSERT_EQ(names, (std::vector<std::string>{"x2_node", "y_node", "second", "first"}));
  for (ir::Model* model : {&m, &swapped}) {
    auto out = ExpandAndRun(std::move(*model), {Named(MakeTensor<double>({3}, {1, -2, 0.5}), "x")}, {"dy", "d2y"}, 2);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(Values<double>(out[0]), (std::vector<double>{3, 12, 0.75}));
    EXPECT_EQ(Values<double>(out[1]), (std::vector<double>{6, -12, 3}));
  }
}

// A leaf written by a node with other outputs the function needs: Split(X) -> A, B, Y = A * B, xs = [X], zs = [A].
// With A held fixed, dY/dX is B's path only: [0, 0, A]. The backward pass reads the Split's A (through the value the
// cut Split writes instead), which the graph's own Split writes.
TEST(GradientOp, LeafFromAMultiOutputNode) {
  ir::Model m = NewModel();
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "X", DType::kFloat32, {4});
  ir::Value* split = g.CreateValue("split");
  g.SetInitializer(split, MakeTensor<int64_t>({2}, {2, 2}));
  ir::Value* a = g.CreateValue("A");
  ir::Value* b = g.CreateValue("B");
  g.AddNode("Split", {x, split}, {a, b}, "split_node");
  g.AddOutput(Node1(g, "Mul", {a, b}, "Y"));
  AddGradient(g, {x, a}, {"dY_dX"}, {"X"}, "Y", {"A"});
  auto out = ExpandAndRun(std::move(m), {Named(MakeTensor<float>({4}, {1, 2, 3, 4}), "X")}, {"dY_dX"});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{0, 0, 1, 2}));
}

// Evaluated at other inputs through a Dropout in training mode: the forward part computed again draws the graph's own
// mask (D's), and its DropoutGrad the same one. Y = Dropout(H) * Z at H1: dY/dH = Z * mask * 2, dY/dZ = H1 * mask * 2.
TEST(GradientOp, RecomputedRandomOpsDrawTheGraphsNumbers) {
  ir::Model m = NewModel();
  ir::Graph& g = *m.graph;
  ir::Value* h = Input(g, "H", DType::kFloat32, {16});
  ir::Value* z = Input(g, "Z", DType::kFloat32, {16});
  ir::Value* h1 = Input(g, "H1", DType::kFloat32, {16});
  ir::Value* ratio = g.CreateValue("ratio");
  g.SetInitializer(ratio, MakeTensor<float>({}, {0.5f}));
  ir::Value* training = g.CreateValue("training");
  ir::Tensor on(DType::kBool, {});
  on.mutable_values<bool>()[0] = true;
  g.SetInitializer(training, on);
  ir::Value* d = g.CreateValue("D");
  g.AddNode("Dropout", {h, ratio, training}, {d}, "dropout");
  g.AddOutput(d);
  g.AddOutput(Node1(g, "Mul", {d, z}, "Y"));
  AddGradient(g, {h1, z}, {"dY_dH", "dY_dZ"}, {"H", "Z"}, "Y");
  std::vector<float> hv, zv, h1v;
  for (int i = 0; i < 16; ++i) {
    hv.push_back(1.0f + i);
    zv.push_back(0.5f * i - 3);
    h1v.push_back(2.0f - 0.25f * i);
  }
  auto out = ExpandAndRun(std::move(m),
                          {Named(MakeTensor<float>({16}, hv), "H"), Named(MakeTensor<float>({16}, zv), "Z"),
                           Named(MakeTensor<float>({16}, h1v), "H1")},
                          {"D", "dY_dH", "dY_dZ"});
  ASSERT_EQ(out.size(), 3u);
  const std::vector<float> dv = Values<float>(out[0]);
  int kept = 0;
  for (int i = 0; i < 16; ++i) {
    const float mask = dv[i] != 0 ? 2.0f : 0.0f;
    kept += dv[i] != 0;
    EXPECT_EQ(Values<float>(out[1])[i], zv[i] * mask) << i;
    EXPECT_EQ(Values<float>(out[2])[i], h1v[i] * mask) << i;
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 16);
}

// A gradient penalty: p = sum((dy/dx)^2) for y = relu(x W1 + b1) W2, and dp/dW1, dp/db1, dp/dW2 by a second
// Gradient node (through ReluGrad's and SumToShape's own builders), against central differences in double.
TEST(GradientOp, GradientPenaltyThroughRelu) {
  ir::Model m = NewModel();
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat64, {3, 4});
  ir::Value* w1 = Input(g, "W1", DType::kFloat64, {4, 5});
  ir::Value* b1 = Input(g, "b1", DType::kFloat64, {5});
  ir::Value* w2 = Input(g, "W2", DType::kFloat64, {5, 2});
  ir::Value* h = Node1(g, "Add", {Node1(g, "MatMul", {x, w1}, "xw"), b1}, "h");
  g.AddOutput(Node1(g, "MatMul", {Node1(g, "Relu", {h}, "r"), w2}, "y"));
  ir::Value* dx = g.CreateValue("dx");
  ir::Node* first = g.AddNode("Gradient", {x, w1, b1, w2}, {dx}, "dy_dx", kGradientOpDomain);
  first->SetAttribute(ir::Attribute::Strings("xs", {"x"}));
  first->SetAttribute(ir::Attribute::Strings("zs", {"W1", "b1", "W2"}));
  first->SetAttribute(ir::Attribute::String("y", "y"));
  ir::Value* p = g.CreateValue("p");
  g.AddNode("ReduceSum", {Node1(g, "Mul", {dx, dx}, "dx2")}, {p}, "penalty")
      ->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(p);
  AddGradient(g, {w1, b1, w2, x}, {"dp_dW1", "dp_db1", "dp_dW2"}, {"W1", "b1", "W2"}, "p", {"x"}, "dp");
  auto values = [](std::vector<int64_t> dims, uint32_t seed) {
    std::vector<double> v;
    uint32_t s = seed;
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    for (int64_t i = 0; i < n; ++i) {
      s = s * 1664525u + 1013904223u;
      v.push_back(static_cast<double>(s >> 8) / (1u << 24) * 2 - 1);
    }
    return v;
  };
  std::vector<std::vector<double>> in = {values({3, 4}, 1), values({4, 5}, 2), values({5}, 3), values({5, 2}, 4)};
  const std::vector<std::vector<int64_t>> dims = {{3, 4}, {4, 5}, {5}, {5, 2}};
  const std::vector<std::string> names = {"x", "W1", "b1", "W2"};
  auto feeds = [&](const std::vector<std::vector<double>>& v) {
    std::vector<ir::Tensor> t;
    for (size_t i = 0; i < v.size(); ++i) t.push_back(Named(MakeTensor<double>(dims[i], v[i]), names[i]));
    return t;
  };
  ir::Model copy = converter::CloneModel(m);
  auto out = ExpandAndRun(std::move(m), feeds(in), {"dp_dW1", "dp_db1", "dp_dW2"}, 2);
  ASSERT_EQ(out.size(), 3u);
  ASSERT_TRUE(ExpandGradientOps(copy).ok());
  auto session = std::move(exec::Session::Create(std::move(copy))).value();
  auto penalty = [&](const std::vector<std::vector<double>>& v) {
    exec::RunOptions run;
    run.fetch = {"p"};
    return Values<double>((*session->Run(feeds(v), run))[0])[0];
  };
  const double step = 1e-6;
  for (size_t k = 1; k < 4; ++k) {
    const std::vector<double> analytic = Values<double>(out[k - 1]);
    ASSERT_EQ(analytic.size(), in[k].size());
    double largest = 0;
    for (size_t i = 0; i < in[k].size(); ++i) {
      auto lo = in, hi = in;
      lo[k][i] -= step;
      hi[k][i] += step;
      const double want = (penalty(hi) - penalty(lo)) / (2 * step);
      EXPECT_NEAR(analytic[i], want, 1e-6 + 1e-6 * std::fabs(want)) << names[k] << "[" << i << "]";
      largest = std::max(largest, std::fabs(analytic[i]));
    }
    // The penalty depends on b1 only through the ReLU mask, piecewise constant: its gradient is zero.
    if (names[k] == "b1") {
      EXPECT_EQ(largest, 0);
    } else {
      EXPECT_GT(largest, 1e-3) << names[k];
    }
  }
}

// LayerNormalization's backward pass reads the statistics its forward node writes as optional outputs, which the
// graph's node does not have: the expansion adds them to it. Checked against central differences in double.
TEST(GradientOp, ForwardNodeGainsOptionalOutputs) {
  ir::Model m = NewModel();
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat64, {2, 4});
  ir::Value* scale = Input(g, "scale", DType::kFloat64, {4});
  ir::Value* bias = Input(g, "bias", DType::kFloat64, {4});
  ir::Value* k = Input(g, "k", DType::kFloat64, {2, 4});
  ir::Value* ln = Node1(g, "LayerNormalization", {x, scale, bias}, "ln");
  ir::Value* y = Node1(g, "Mul", {ln, k}, "y");
  g.AddOutput(y);
  AddGradient(g, {x, scale}, {"dx", "dscale"}, {"x", "scale"}, "y", {}, "g");
  const std::vector<double> xv = {0.3, -1.2, 2.0, 0.7, 1.5, 1.1, -0.4, 0.2};
  const std::vector<double> sv = {1.0, -0.5, 2.0, 0.25};
  const std::vector<double> bv = {0.1, 0.2, 0.3, 0.4};
  const std::vector<double> kv = {1, -2, 3, 0.5, -1, 2, 0.25, 4};
  ir::Model plain = converter::CloneModel(m);
  {
    // The graph's own LayerNormalization, with its statistics: not a second one.
    ir::Model expanded = converter::CloneModel(m);
    ASSERT_TRUE(ExpandGradientOps(expanded).ok());
    ASSERT_EQ(CountOps(*expanded.graph, "LayerNormalization"), 1);
    for (const ir::Node* n : expanded.graph->nodes()) {
      if (n->op_type() == "LayerNormalization") {
        EXPECT_EQ(n->outputs().size(), 3u);
      }
    }
    // With both gradients skipped, nothing is added and the statistics go again.
    ir::Model skipped = converter::CloneModel(m);
    for (ir::Node* n : skipped.graph->nodes()) {
      if (n->op_type() != "Gradient") continue;
      for (size_t i = 0; i < n->outputs().size(); ++i) {
        ir::Value* o = n->output(i);
        n->SetOutput(i, nullptr);
        for (size_t k = 0; k < skipped.graph->outputs().size(); ++k) {
          if (skipped.graph->outputs()[k] == o) skipped.graph->RemoveOutput(k);
        }
        skipped.graph->RemoveValue(o);
      }
    }
    ASSERT_TRUE(ExpandGradientOps(skipped).ok());
    EXPECT_EQ(skipped.graph->num_nodes(), 2u);
    for (const ir::Node* n : skipped.graph->nodes()) {
      if (n->op_type() == "LayerNormalization") {
        EXPECT_EQ(n->output(1), nullptr);
      }
    }
  }
  auto out = ExpandAndRun(std::move(m),
                          {Named(MakeTensor<double>({2, 4}, xv), "x"), Named(MakeTensor<double>({4}, sv), "scale"),
                           Named(MakeTensor<double>({4}, bv), "bias"), Named(MakeTensor<double>({2, 4}, kv), "k")},
                          {"dx", "dscale"});
  ASSERT_EQ(out.size(), 2u);
  // sum(y) at perturbed inputs, from the graph without its Gradient node.
  for (ir::Node* n : plain.graph->nodes()) {
    if (n->op_type() == "Gradient") {
      plain.graph->RemoveNode(n);
      break;
    }
  }
  while (plain.graph->outputs().size() > 1) plain.graph->RemoveOutput(plain.graph->outputs().size() - 1);
  auto session = std::move(exec::Session::Create(std::move(plain))).value();
  auto sum_y = [&](const std::vector<double>& xs, const std::vector<double>& ss) {
    auto r = session->Run({Named(MakeTensor<double>({2, 4}, xs), "x"), Named(MakeTensor<double>({4}, ss), "scale"),
                           Named(MakeTensor<double>({4}, bv), "bias"), Named(MakeTensor<double>({2, 4}, kv), "k")});
    double s = 0;
    for (double v : Values<double>((*r)[0])) s += v;
    return s;
  };
  const double h = 1e-6;
  const std::vector<double> dx = Values<double>(out[0]);
  for (size_t i = 0; i < xv.size(); ++i) {
    std::vector<double> lo = xv, hi = xv;
    lo[i] -= h;
    hi[i] += h;
    EXPECT_NEAR(dx[i], (sum_y(hi, sv) - sum_y(lo, sv)) / (2 * h), 1e-6) << "dx[" << i << "]";
  }
  const std::vector<double> ds = Values<double>(out[1]);
  for (size_t i = 0; i < sv.size(); ++i) {
    std::vector<double> lo = sv, hi = sv;
    lo[i] -= h;
    hi[i] += h;
    EXPECT_NEAR(ds[i], (sum_y(xv, hi) - sum_y(xv, lo)) / (2 * h), 1e-6) << "dscale[" << i << "]";
  }
}

// The expanded model is an ordinary model: it survives export and import and runs the same.
TEST(GradientOp, ExpandedModelRoundTrips) {
  ir::Model m = NewModel();
  ir::Graph& g = *m.graph;
  ir::Value* a = Input(g, "a", DType::kFloat32, {2});
  ir::Value* t = Node1(g, "Tanh", {a}, "t");
  g.AddOutput(Node1(g, "Mul", {t, a}, "y"));
  AddGradient(g, {a}, {"dy_da"}, {"a"}, "y");
  ASSERT_TRUE(ExpandGradientOps(m).ok());
  StatusOr<ir::Model> back = importer::LoadModelFromBytes(Bytes(m), "", "expanded");
  ASSERT_TRUE(back.ok()) << back.status().message();
  auto session = std::move(exec::Session::Create(std::move(*back))).value();
  exec::RunOptions run;
  run.fetch = {"dy_da"};
  auto out = session->Run({Named(MakeTensor<float>({2}, {0.5f, -1}), "a")}, run);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const std::vector<float> d = Values<float>((*out)[0]);
  for (int i = 0; i < 2; ++i) {
    const float av = i == 0 ? 0.5f : -1.0f;
    const float th = std::tanh(av);
    EXPECT_NEAR(d[i], th + av * (1 - th * th), 1e-6f);
  }
}

std::string Expect(ir::Model& m) {
  const std::string before = Bytes(m);
  StatusOr<int> r = ExpandGradientOps(m);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(Bytes(m), before) << "the model changed on failure";
  return r.ok() ? std::string() : r.status().message();
}

TEST(GradientOp, ErrorsNameTheNodeAndLeaveTheModel) {
  auto base = [](ir::Model& m) {
    ir::Graph& g = *m.graph;
    ir::Value* a = Input(g, "a", DType::kFloat32, {2});
    ir::Value* i = Input(g, "i", DType::kInt64, {2});
    g.AddOutput(Node1(g, "Relu", {a}, "y"));
    (void)i;
  };
  {
    ir::Model m = NewModel();
    base(m);
    ir::Node* n = AddGradient(*m.graph, {m.graph->FindValue("a")}, {"d"}, {"a"}, "y");
    n->RemoveAttribute("y");
    EXPECT_EQ(Expect(m), "Gradient 'grad': attribute 'y' must name the value to differentiate");
  }
  {
    ir::Model m = NewModel();
    base(m);
    AddGradient(*m.graph, {m.graph->FindValue("a")}, {"d"}, {"nope"}, "y");
    EXPECT_EQ(Expect(m), "Gradient 'grad': xs names 'nope', which is not a value of the graph");
  }
  {
    ir::Model m = NewModel();
    base(m);
    AddGradient(*m.graph, {m.graph->FindValue("a")}, {"d"}, {"a"}, "y", {"i"});
    EXPECT_EQ(Expect(m), "Gradient 'grad': has 1 inputs; it takes one per name in xs and zs (2)");
  }
  {
    ir::Model m = NewModel();
    base(m);
    AddGradient(*m.graph, {m.graph->FindValue("i")}, {"d"}, {"i"}, "y");
    EXPECT_EQ(Expect(m), "Gradient 'grad': 'i' is not a floating tensor: it has no gradient");
  }
  {
    // y computed from the node's own output.
    ir::Model m = NewModel();
    base(m);
    ir::Graph& g = *m.graph;
    AddGradient(g, {g.FindValue("a")}, {"d"}, {"a"}, "z");
    g.AddOutput(Node1(g, "Add", {g.FindValue("d"), g.FindValue("a")}, "z"));
    EXPECT_EQ(Expect(m), "Gradient 'grad': y 'z' depends on this node's own outputs");
  }
  {
    // Two nodes whose ys read each other's outputs.
    ir::Model m = NewModel();
    base(m);
    ir::Graph& g = *m.graph;
    ir::Value* a = g.FindValue("a");
    AddGradient(g, {a}, {"d1"}, {"a"}, "z2", {}, "one");
    AddGradient(g, {a}, {"d2"}, {"a"}, "z1", {}, "two");
    g.AddOutput(Node1(g, "Mul", {g.FindValue("d1"), a}, "z1"));
    g.AddOutput(Node1(g, "Mul", {g.FindValue("d2"), a}, "z2"));
    EXPECT_EQ(Expect(m),
              "Gradient 'one': y 'z2' depends on Gradient node Gradient 'two', whose y depends on this "
              "node's outputs in turn");
  }
  {
    // A second derivative through an op whose backward node has no gradient of its own (ReduceProdGrad).
    ir::Model m = NewModel();
    base(m);
    ir::Graph& g = *m.graph;
    g.AddOutput(Node1(g, "ReduceProd", {g.FindValue("a")}, "e"));
    AddGradient(g, {g.FindValue("a")}, {"d"}, {"a"}, "e", {}, "first");
    AddGradient(g, {g.FindValue("a")}, {"d2"}, {"a"}, "d", {}, "second");
    const std::string msg = Expect(m);
    EXPECT_NE(msg.find("Gradient 'second': "), std::string::npos) << msg;
    EXPECT_NE(msg.find("lies between"), std::string::npos) << msg;
  }
  {
    // A Gradient node in a subgraph.
    ir::Model m = NewModel();
    base(m);
    ir::Graph& g = *m.graph;
    ir::Value* cond = Input(g, "cond", DType::kBool, {});
    auto branch = [&](const std::string& name) {
      auto body = std::make_unique<ir::Graph>(name);
      ir::Value* a = body->CreateOuterScopeValue("a");
      ir::Value* out = body->CreateValue(name + "_out");
      body->AddNode("Gradient", {a}, {out}, name + "_grad", kGradientOpDomain)
          ->SetAttribute(ir::Attribute::Strings("xs", {"a"}));
      body->AddOutput(out);
      return body;
    };
    ir::Value* r = g.CreateValue("r");
    ir::Node* n = g.AddNode("If", {cond}, {r}, "branch");
    n->SetAttribute(ir::Attribute::GraphValue("then_branch", branch("then")));
    n->SetAttribute(ir::Attribute::GraphValue("else_branch", branch("else")));
    g.AddOutput(r);
    EXPECT_EQ(Expect(m),
              "a Gradient node inside a subgraph (of If 'branch'): only the main graph's Gradient nodes are "
              "expanded");
  }
}

TEST(GradientOp, ModelsWithoutGradientNodesAreLeftAlone) {
  ir::Model m = NewModel();
  ir::Graph& g = *m.graph;
  ir::Value* a = Input(g, "a", DType::kFloat32, {2});
  g.AddOutput(Node1(g, "Relu", {a}, "y"));
  // An unused node stays: the expansion removes only what it added.
  Node1(g, "Neg", {a}, "unused");
  const std::string before = Bytes(m);
  StatusOr<int> n = ExpandGradientOps(m);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
  EXPECT_EQ(Bytes(m), before);
}

}  // namespace
}  // namespace onnxamp::trainer
