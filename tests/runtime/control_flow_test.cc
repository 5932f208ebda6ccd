// If, Loop and Scan in the executor: subgraphs reading enclosing values (also through a nested subgraph), values a
// subgraph reads kept through the graph optimizer's fusions, loop-carried values that change shape, scan outputs
// (stacked, reversed, on other axes, empty), and the errors for bad conditions and bodies. The ONNX backend suite's
// If/Loop/Scan cases and tests/peer/control_flow_ort.py check the ops' semantics against the reference and ONNX
// Runtime.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/executor/profile.h"
#include "runtime/executor/session.h"
#include "tests/runtime/op_tester.h"
#include "tests/runtime/subgraph_builder.h"

namespace onnxamp::testing {
namespace {

using G = SubgraphBuilder;

ir::Model NewModel() {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  return m;
}

ir::Tensor Bool(bool b) {
  ir::Tensor t(DType::kBool, {});
  t.mutable_values<uint8_t>()[0] = b ? 1 : 0;
  return t;
}

ir::Tensor Int64(std::vector<int64_t> dims, const std::vector<int64_t>& v) { return MakeTensor<int64_t>(dims, v); }
ir::Tensor Float(std::vector<int64_t> dims, const std::vector<float>& v) { return MakeTensor<float>(dims, v); }

StatusOr<std::vector<ir::Tensor>> RunModel(ir::Model m, const std::vector<ir::Tensor>& inputs,
                                           exec::SessionOptions options = CpuSessionOptions(2)) {
  ONNXAMP_ASSIGN_OR_RETURN(std::unique_ptr<exec::Session> s, exec::Session::Create(std::move(m), options));
  return s->Run(inputs);
}

ir::Model CopyOf(const ir::Model& m) {
  ir::Model copy;
  copy.opset_imports = m.opset_imports;
  copy.graph = m.graph->Clone();
  return copy;
}

// y = If(c) then Add(x, w) [2,3], else If(c2) then Mul(x, w) else ReduceSum(x) [1,1]. The inner then-branch reads
// w, which the outer else-branch does not: the outer If passes it on to the inner one.
ir::Model NestedIf() {
  ir::Model m = NewModel();
  G top(m.graph.get());
  top.In("x", DType::kFloat32, std::vector<int64_t>{2, 3});
  top.In("c", DType::kBool, std::vector<int64_t>{});
  top.In("c2", DType::kBool, std::vector<int64_t>{});
  top.Init("w", Float({2, 3}, {1, 2, 3, 4, 5, 6}));
  auto then_g = Graph("then");
  G t(then_g.get());
  t.N("Add", {"x", "w"}, {"sum"});
  t.Out("sum", DType::kFloat32);
  auto inner_then = Graph("inner_then");
  G it(inner_then.get());
  it.N("Mul", {"x", "w"}, {"prod"});
  it.Out("prod", DType::kFloat32);
  auto inner_else = Graph("inner_else");
  G ie(inner_else.get());
  ie.N("ReduceSum", {"x"}, {"total"}, {ir::Attribute::Int("keepdims", 1)});
  ie.Out("total", DType::kFloat32);
  auto else_g = Graph("else");
  G e(else_g.get());
  ir::Node* inner = e.N("If", {"c2"}, {"inner_y"});
  inner->SetAttribute(ir::Attribute::GraphValue("then_branch", std::move(inner_then)));
  inner->SetAttribute(ir::Attribute::GraphValue("else_branch", std::move(inner_else)));
  e.Out("inner_y", DType::kFloat32);
  ir::Node* outer = top.N("If", {"c"}, {"y"});
  outer->SetAttribute(ir::Attribute::GraphValue("then_branch", std::move(then_g)));
  outer->SetAttribute(ir::Attribute::GraphValue("else_branch", std::move(else_g)));
  top.Out("y", DType::kFloat32);
  return m;
}

TEST(IfTest, RunsTheBranchTheConditionPicksWithTheValuesItReads) {
  const ir::Tensor x = Float({2, 3}, {1, 1, 1, 2, 2, 2});
  struct Case {
    bool c, c2;
    std::vector<int64_t> dims;
    std::vector<float> want;
  };
  for (const Case& k : {Case{true, false, {2, 3}, {2, 3, 4, 6, 7, 8}}, Case{false, true, {2, 3}, {1, 2, 3, 8, 10, 12}},
                        Case{false, false, {1, 1}, {9}}}) {
    auto out = RunModel(NestedIf(), {Named(x, "x"), Named(Bool(k.c), "c"), Named(Bool(k.c2), "c2")});
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ((*out)[0].dims(), k.dims) << k.c << k.c2;
    EXPECT_EQ(Values<float>((*out)[0]), k.want) << k.c << k.c2;
  }
}

TEST(IfTest, AConditionThatIsNotABoolIsRefused) {
  auto out = RunModel(NestedIf(), {Named(Float({2, 3}, {}), "x"), Named(Bool(true), "c"), Named(Bool(true), "c2")});
  ASSERT_TRUE(out.ok());
  // A condition of the wrong type is refused, naming the input.
  ir::Model m = NestedIf();
  m.graph->FindValue("c")->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{}));
  auto bad =
      RunModel(std::move(m), {Named(Float({2, 3}, {}), "x"), Named(Float({}, {1}), "c"), Named(Bool(true), "c2")});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cond"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("bool"), std::string::npos) << bad.status().message();
}

TEST(IfTest, ABranchWithAnUnsupportedOpIsRefusedWhenTheSessionIsCreated) {
  ir::Model m = NestedIf();
  ir::Node* outer = nullptr;
  for (ir::Node* n : m.graph->nodes()) outer = n;
  ir::Graph* then_g = outer->FindAttribute("then_branch")->g.get();
  for (ir::Node* n : then_g->nodes()) n->set_op_type("NoSuchOp");
  auto s = exec::Session::Create(std::move(m), CpuSessionOptions(1));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("then_branch"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("NoSuchOp"), std::string::npos) << s.status().message();
}

// y = Relu(MatMul(x, W) + b), which the optimizer fuses into one node, and z = If(c) then mm else y: the values
// the branches read survive the fusion.
TEST(IfTest, ValuesABranchReadsSurviveTheGraphOptimizer) {
  ir::Model m = NewModel();
  G top(m.graph.get());
  top.In("x", DType::kFloat32, std::vector<int64_t>{2, 2});
  top.In("c", DType::kBool, std::vector<int64_t>{});
  top.Init("W", Float({2, 2}, {1, -1, 2, 0}));
  top.Init("b", Float({2}, {-1, 0.5f}));
  top.N("MatMul", {"x", "W"}, {"mm"});
  top.N("Add", {"mm", "b"}, {"biased"});
  top.N("Relu", {"biased"}, {"y"});
  auto then_g = Graph("then");
  G t(then_g.get());
  t.N("Identity", {"mm"}, {"a"});
  t.Out("a", DType::kFloat32);
  auto else_g = Graph("else");
  G e(else_g.get());
  e.N("Neg", {"biased"}, {"n"});
  e.Out("n", DType::kFloat32);
  ir::Node* n = top.N("If", {"c"}, {"z"});
  n->SetAttribute(ir::Attribute::GraphValue("then_branch", std::move(then_g)));
  n->SetAttribute(ir::Attribute::GraphValue("else_branch", std::move(else_g)));
  top.Out("y", DType::kFloat32);
  top.Out("z", DType::kFloat32);
  const ir::Tensor x = Float({2, 2}, {1, 2, 3, 4});
  // mm = [[5, -1], [11, -3]], biased = [[4, -0.5], [10, -2.5]].
  for (bool c : {true, false}) {
    exec::SessionOptions options = CpuSessionOptions(2);
    options.graph_optimization = exec::GraphOptimization::kAll;
    auto out = RunModel(CopyOf(m), {Named(x, "x"), Named(Bool(c), "c")}, options);
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{4, 0, 10, 0}));
    const std::vector<float> want = c ? std::vector<float>{5, -1, 11, -3} : std::vector<float>{-4, 0.5f, -10, 2.5f};
    EXPECT_EQ(Values<float>((*out)[1]), want);
  }
}

// v, s = Loop(M, cond, v0) { cond_out = i < limit; v_out = v_in + x; s = v_in * 2 }.
ir::Model CountingLoop(bool with_m, bool with_cond) {
  ir::Model m = NewModel();
  G top(m.graph.get());
  top.In("x", DType::kFloat32, std::vector<int64_t>{2});
  top.In("v0", DType::kFloat32, std::vector<int64_t>{2});
  top.In("limit", DType::kInt64, std::vector<int64_t>{});
  if (with_m) top.In("M", DType::kInt64, std::vector<int64_t>{});
  if (with_cond) top.In("cond", DType::kBool, std::vector<int64_t>{});
  top.Init("two", Float({}, {2}));
  auto body = Graph("body");
  G b(body.get());
  b.In("i", DType::kInt64, std::vector<int64_t>{});
  b.In("cond_in", DType::kBool, std::vector<int64_t>{});
  b.In("v_in", DType::kFloat32, std::vector<int64_t>{2});
  b.N("Less", {"i", "limit"}, {"cond_out"});
  b.N("Add", {"v_in", "x"}, {"v_out"});
  b.N("Mul", {"v_in", "two"}, {"s"});
  b.Out("cond_out", DType::kBool, std::vector<int64_t>{});
  b.Out("v_out", DType::kFloat32, std::vector<int64_t>{2});
  b.Out("s", DType::kFloat32, std::vector<int64_t>{2});
  ir::Node* n = top.N("Loop", {with_m ? "M" : "", with_cond ? "cond" : "", "v0"}, {"v", "s_all"});
  n->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  top.Out("v", DType::kFloat32);
  top.Out("s_all", DType::kFloat32);
  return m;
}

TEST(LoopTest, RunsUntilTheTripCountOrTheConditionStopsIt) {
  const ir::Tensor x = Named(Float({2}, {1, 10}), "x");
  const ir::Tensor v0 = Named(Float({2}, {0, 0}), "v0");
  struct Case {
    bool with_m;
    int64_t m;
    bool with_cond, cond;
    int64_t limit;
    int64_t iterations;
  };
  for (const Case& k : {Case{true, 5, true, true, 100, 5},      // the trip count stops it
                        Case{true, 5, true, true, 1, 2},        // the body's condition: i = 0, 1 run, 1 < 1 stops
                        Case{false, 0, false, false, 3, 4},     // no M, no cond: until i < 3 fails (i = 3)
                        Case{true, 5, false, false, 100, 5},    // M only
                        Case{true, 0, true, true, 100, 0},      // M = 0
                        Case{true, 5, true, false, 100, 0}}) {  // cond false from the start
    std::vector<ir::Tensor> in = {x, v0, Named(Int64({}, {k.limit}), "limit")};
    if (k.with_m) in.push_back(Named(Int64({}, {k.m}), "M"));
    if (k.with_cond) in.push_back(Named(Bool(k.cond), "cond"));
    auto out = RunModel(CountingLoop(k.with_m, k.with_cond), in);
    ASSERT_TRUE(out.ok()) << out.status().message();
    const float n = static_cast<float>(k.iterations);
    EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{n, 10 * n})) << k.m << " " << k.limit;
    // The scan output: v_in * 2 of every iteration, stacked; [0, 2] (the body's declared dims) when none ran.
    EXPECT_EQ((*out)[1].dims(), (std::vector<int64_t>{k.iterations, 2}));
    std::vector<float> want;
    for (int64_t i = 0; i < k.iterations; ++i) {
      want.push_back(2.0f * static_cast<float>(i));
      want.push_back(20.0f * static_cast<float>(i));
    }
    EXPECT_EQ(Values<float>((*out)[1]), want);
  }
}

// A profiled run times the nodes of subgraphs too, every call, after the session's own nodes, each naming the nodes
// that enclose it; the profile's op table counts only the session's own nodes (their times include their bodies').
TEST(LoopTest, ProfiledRunsTimeTheNodesOfSubgraphs) {
  {
    auto s = exec::Session::Create(CountingLoop(true, true), CpuSessionOptions(1));
    ASSERT_TRUE(s.ok()) << s.status().message();
    exec::RunOptions run;
    run.profile = true;
    exec::RunStats stats;
    auto out = (*s)->Run({Named(Float({2}, {1, 10}), "x"), Named(Float({2}, {0, 0}), "v0"),
                          Named(Int64({}, {100}), "limit"), Named(Int64({}, {3}), "M"), Named(Bool(true), "cond")},
                         run, &stats);
    ASSERT_TRUE(out.ok()) << out.status().message();
    int own = 0, in_loop = 0;
    for (const exec::NodeTime& t : stats.nodes) {
      if (t.within.empty()) {
        ++own;
        EXPECT_EQ(in_loop, 0) << "the session's own nodes come first";
      } else {
        EXPECT_EQ(t.within, "Loop 'v'") << t.node;
        ++in_loop;
      }
    }
    EXPECT_EQ(own, 1);
    EXPECT_EQ(in_loop, 9);  // Less, Add and Mul, three iterations
    const std::string text = exec::FormatProfile(stats.nodes);
    EXPECT_NE(text.find("profile: 1 nodes"), std::string::npos) << text;
    EXPECT_NE(text.find("Loop 'v': "), std::string::npos) << text;
    EXPECT_NE(text.find("3 calls"), std::string::npos) << text;
  }
  {  // If in If: the inner branch's nodes name both.
    auto s = exec::Session::Create(NestedIf(), CpuSessionOptions(1));
    ASSERT_TRUE(s.ok()) << s.status().message();
    exec::RunOptions run;
    run.profile = true;
    exec::RunStats stats;
    auto out = (*s)->Run(
        {Named(Float({2, 3}, {1, 2, 3, 4, 5, 6}), "x"), Named(Bool(false), "c"), Named(Bool(true), "c2")}, run, &stats);
    ASSERT_TRUE(out.ok()) << out.status().message();
    std::vector<std::string> nested;
    for (const exec::NodeTime& t : stats.nodes) {
      if (!t.within.empty()) nested.push_back(t.within + " : " + t.node);
    }
    // At each level a subgraph's own nodes first, then theirs.
    EXPECT_EQ(nested, (std::vector<std::string>{"If 'y' : If 'inner_y'", "If 'y' > If 'inner_y' : Mul 'prod'"}));
  }
}

TEST(LoopTest, ALoopCarriedValueMayGrow) {
  ir::Model m = NewModel();
  G top(m.graph.get());
  top.In("x", DType::kFloat32, std::vector<int64_t>{1, 2});
  top.In("M", DType::kInt64, std::vector<int64_t>{});
  auto body = Graph("body");
  G b(body.get());
  b.In("i", DType::kInt64, std::vector<int64_t>{});
  b.In("cond_in", DType::kBool, std::vector<int64_t>{});
  b.In("v_in", DType::kFloat32, std::vector<int64_t>{1, 2});  // declared [1, 2], grows: the body's shapes are hints
  b.N("Identity", {"cond_in"}, {"cond_out"});
  b.N("Concat", {"v_in", "x"}, {"v_out"}, {ir::Attribute::Int("axis", 0)});
  b.Out("cond_out", DType::kBool);
  b.Out("v_out", DType::kFloat32);
  ir::Node* n = top.N("Loop", {"M", "", "x"}, {"v"});
  n->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  top.Out("v", DType::kFloat32);
  auto out = RunModel(std::move(m), {Named(Float({1, 2}, {1, 2}), "x"), Named(Int64({}, {3}), "M")});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2}));
}

TEST(LoopTest, BadTripCountsAndBodiesAreRefused) {
  // M of the wrong type, at run time.
  ir::Model m = CountingLoop(true, true);
  m.graph->FindValue("M")->set_type(ir::ValueType::Tensor(DType::kInt32, ir::Shape{}));
  auto bad =
      RunModel(std::move(m), {Named(Float({2}, {}), "x"), Named(Float({2}, {}), "v0"), Named(Int64({}, {1}), "limit"),
                              Named(MakeTensor<int32_t>({}, {2}), "M"), Named(Bool(true), "cond")});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("int64"), std::string::npos) << bad.status().message();
  // A body whose inputs do not match the loop-carried values, when the session is created.
  ir::Model two = CountingLoop(true, true);
  ir::Node* loop = nullptr;
  for (ir::Node* n : two.graph->nodes()) loop = n;
  loop->AddInput(two.graph->FindValue("x"));  // a second loop-carried value the body does not take
  auto s = exec::Session::Create(std::move(two), CpuSessionOptions(1));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("'body' takes 3 inputs"), std::string::npos) << s.status().message();
}

TEST(LoopTest, ScanOutputsBeyondTheMemoryLimitAreRefused) {
  ir::Model m = NewModel();
  G top(m.graph.get());
  top.In("x", DType::kFloat32, std::vector<int64_t>{1024});
  top.In("M", DType::kInt64, std::vector<int64_t>{});
  auto body = Graph("body");
  G b(body.get());
  b.In("i", DType::kInt64, std::vector<int64_t>{});
  b.In("cond_in", DType::kBool, std::vector<int64_t>{});
  b.N("Identity", {"cond_in"}, {"cond_out"});
  b.N("Identity", {"x"}, {"copy"});
  b.Out("cond_out", DType::kBool);
  b.Out("copy", DType::kFloat32);
  ir::Node* n = top.N("Loop", {"M", ""}, {"all"});
  n->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  top.Out("all", DType::kFloat32);
  exec::SessionOptions options = CpuSessionOptions(1);
  options.memory_limit_bytes = 1 << 20;  // 4 KiB per iteration: 128 iterations fill half of it
  auto out = RunModel(std::move(m), {Named(Float({1024}, {}), "x"), Named(Int64({}, {1000}), "M")}, options);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted) << out.status().message();
  EXPECT_NE(out.status().message().find("iteration 128"), std::string::npos) << out.status().message();
}

// Scan over x [2, 3] along axis 1 in reverse with a running sum state [2]; the per-step sums stacked along axis 1.
TEST(ScanTest, SlicesAlongItsAxesInEitherDirection) {
  for (int64_t out_reverse : {0, 1}) {
    ir::Model m = NewModel();
    m.opset_imports = {{"", 16}};
    G top(m.graph.get());
    top.In("s0", DType::kFloat32, std::vector<int64_t>{2});
    top.In("x", DType::kFloat32, std::vector<int64_t>{2, 3});
    auto body = Graph("body");
    G b(body.get());
    b.In("s_in", DType::kFloat32, std::vector<int64_t>{2});
    b.In("col", DType::kFloat32, std::vector<int64_t>{2});
    b.N("Add", {"s_in", "col"}, {"s_out"});
    b.N("Identity", {"s_out"}, {"step"});
    b.Out("s_out", DType::kFloat32);
    b.Out("step", DType::kFloat32);
    ir::Node* n =
        top.N("Scan", {"s0", "x"}, {"s", "steps"},
              {ir::Attribute::Int("num_scan_inputs", 1), ir::Attribute::Ints("scan_input_axes", {1}),
               ir::Attribute::Ints("scan_input_directions", {1}), ir::Attribute::Ints("scan_output_axes", {-1}),
               ir::Attribute::Ints("scan_output_directions", {out_reverse})});
    n->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
    top.Out("s", DType::kFloat32);
    top.Out("steps", DType::kFloat32);
    auto out =
        RunModel(std::move(m), {Named(Float({2}, {0, 100}), "s0"), Named(Float({2, 3}, {1, 2, 3, 4, 5, 6}), "x")});
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{6, 115}));
    // Columns taken 2, 1, 0: running sums 3, 5, 6 and 106, 111, 115 at positions 0, 1, 2 (or 2, 1, 0).
    EXPECT_EQ((*out)[1].dims(), (std::vector<int64_t>{2, 3}));
    const std::vector<float> want =
        out_reverse ? std::vector<float>{6, 5, 3, 115, 111, 106} : std::vector<float>{3, 5, 6, 106, 111, 115};
    EXPECT_EQ(Values<float>((*out)[1]), want);
  }
}

// A scan over a length-0 axis whose body declares no dims: the empty output takes the node's declared rank, and the
// axis counted from the back puts its 0 where an iteration's slices would have gone ([2, 0], not [0, 0]).
TEST(ScanTest, AnEmptyScanOutputOnANegativeAxisTakesTheDeclaredRank) {
  ir::Model m = NewModel();
  G top(m.graph.get());
  top.In("s0", DType::kFloat32, std::vector<int64_t>{2});
  top.In("x", DType::kFloat32);
  m.graph->FindValue("x")->set_type(
      ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(2), ir::Dim::Param("t")}));
  auto body = Graph("body");
  G b(body.get());
  b.In("s_in", DType::kFloat32);
  b.In("col", DType::kFloat32);
  b.N("Add", {"s_in", "col"}, {"s_out"});
  b.N("Identity", {"s_out"}, {"step"});
  b.Out("s_out", DType::kFloat32);
  b.Out("step", DType::kFloat32);
  ir::Node* n = top.N("Scan", {"s0", "x"}, {"s", "steps"},
                      {ir::Attribute::Int("num_scan_inputs", 1), ir::Attribute::Ints("scan_input_axes", {1}),
                       ir::Attribute::Ints("scan_output_axes", {-1})});
  n->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  top.Out("s", DType::kFloat32);
  top.Out("steps", DType::kFloat32);
  m.graph->FindValue("steps")->set_type(
      ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(2), ir::Dim::Param("t")}));
  auto out = RunModel(std::move(m), {Named(Float({2}, {1, 2}), "s0"), Named(Float({2, 0}, {}), "x")});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ((*out)[1].dims(), (std::vector<int64_t>{2, 0}));
}

TEST(ScanTest, ScanInputsOfDifferentLengthsAreRefused) {
  ir::Model m = NewModel();
  G top(m.graph.get());
  top.In("a", DType::kFloat32, std::vector<int64_t>{3});
  top.In("b", DType::kFloat32, std::vector<int64_t>{4});
  auto body = Graph("body");
  G bb(body.get());
  bb.In("x", DType::kFloat32, std::vector<int64_t>{});
  bb.In("y", DType::kFloat32, std::vector<int64_t>{});
  bb.N("Add", {"x", "y"}, {"z"});
  bb.Out("z", DType::kFloat32);
  ir::Node* n = top.N("Scan", {"a", "b"}, {"zs"}, {ir::Attribute::Int("num_scan_inputs", 2)});
  n->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  top.Out("zs", DType::kFloat32);
  auto out = RunModel(std::move(m), {Named(Float({3}, {}), "a"), Named(Float({4}, {}), "b")});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("length 4"), std::string::npos) << out.status().message();
}

// Scan-8: a sequence length past the scan inputs' length is refused, naming the input.
TEST(ScanTest, Scan8RefusesLengthsPastTheInput) {
  ir::Model m = NewModel();
  m.opset_imports = {{"", 8}};
  G top(m.graph.get());
  top.In("lens", DType::kInt64, std::vector<int64_t>{2});
  top.In("s0", DType::kFloat32, std::vector<int64_t>{2, 3});
  top.In("x", DType::kFloat32, std::vector<int64_t>{2, 4, 3});
  auto body = Graph("body");
  G b(body.get());
  b.In("s_in", DType::kFloat32, std::vector<int64_t>{3});
  b.In("x_t", DType::kFloat32, std::vector<int64_t>{3});
  b.N("Add", {"s_in", "x_t"}, {"s_out"});
  b.Out("s_out", DType::kFloat32);
  ir::Node* n = top.N("Scan", {"lens", "s0", "x"}, {"s"}, {ir::Attribute::Int("num_scan_inputs", 1)});
  n->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  top.Out("s", DType::kFloat32);
  auto ok = RunModel(CopyOf(m), {Named(Int64({2}, {4, 1}), "lens"), Named(Float({2, 3}, {}), "s0"),
                                 Named(Float({2, 4, 3}, std::vector<float>(24, 1.0f)), "x")});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(Values<float>((*ok)[0]), (std::vector<float>{4, 4, 4, 1, 1, 1}));
  auto bad = RunModel(std::move(m), {Named(Int64({2}, {5, 1}), "lens"), Named(Float({2, 3}, {}), "s0"),
                                     Named(Float({2, 4, 3}, {}), "x")});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("sequence_lens"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("outside [0, 4]"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace onnxamp::testing
