// Converter on sequences (their tensors stay FP32, no tensor Cast on a sequence value) and on reducing
// ScatterND/ScatterElements (kept FP32 as accumulations).
#include <gtest/gtest.h>

#include "converter/convert.h"
#include "converter/policy.h"
#include "tests/converter/converter_test_util.h"

namespace onnxamp::converter::testing {
namespace {

ir::ValueType FloatSeq(std::vector<int64_t> dims) {
  return ir::ValueType::Sequence(ir::ValueType::Tensor(DType::kFloat32, Builder::ToShape(dims)));
}

// No Cast reads or writes a value that is not a tensor.
void ExpectNoCastOnSequences(const ir::Graph& g) {
  for (const ir::Node* c : NodesOf(g, "Cast")) {
    EXPECT_TRUE(!c->input(0)->type().defined() || c->input(0)->type().is_tensor()) << c->Describe();
    EXPECT_TRUE(c->output(0)->type().is_tensor()) << c->Describe();
  }
}

// x[2,2] -> MatMul(W) -> h (fp16 after conversion); SequenceEmpty(float) -> SequenceInsert(h) -> s (a sequence
// graph output); SequenceAt(s, 0) -> Relu -> y.
ir::Model SequenceModel(DType target_of_empty = DType::kFloat32) {
  ir::Model m = NewModel(17);
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {2, 2});
  b.Init("W", {2, 2}, {0.5f, -1.0f, 2.0f, 0.25f});
  b.InitInt64("pos", {0});
  b.Node("MatMul", {"x", "W"}, {"h"});
  b.Node("SequenceEmpty", {}, {"s0"}, {ir::Attribute::Int("dtype", static_cast<int64_t>(target_of_empty))});
  b.Node("SequenceInsert", {"s0", "h"}, {"s"});
  b.Node("Squeeze", {"pos"}, {"i"});
  b.Node("SequenceAt", {"s", "i"}, {"e"});
  b.Node("Relu", {"e"}, {"y"});
  ir::Graph& g = *m.graph;
  g.FindValue("s")->set_type(FloatSeq({2, 2}));
  g.AddOutput(g.FindValue("s"));
  b.Output("y", DType::kFloat32, {2, 2});
  return m;
}

class SequenceTest : public ::testing::TestWithParam<bool> {};  // keep_io_types

TEST_P(SequenceTest, SequenceInsertKeepsFloatTensorsAndTheSequenceOutputItsType) {
  ir::Model m = SequenceModel();
  ConvertOptions options;
  options.keep_io_types = GetParam();
  ConvertReport report;
  RunPassesVerified(m, options, &report);
  const ir::Graph& g = *m.graph;
  EXPECT_EQ(ElemType(g, "h"), DType::kFloat16);  // MatMul still converts
  // SequenceEmpty keeps dtype float and SequenceInsert gets a float tensor (a Cast back from fp16).
  const ir::Node* empty = NodesOf(g, "SequenceEmpty")[0];
  EXPECT_EQ(empty->GetInt("dtype", 0), static_cast<int64_t>(DType::kFloat32));
  const ir::Node* insert = NodesOf(g, "SequenceInsert")[0];
  EXPECT_EQ(insert->input(1)->type().elem_type(), DType::kFloat32);
  EXPECT_EQ(testing::ProducerOp(insert, 1), "Cast");
  // The sequence output is the SequenceInsert's own output, still seq(tensor(float)).
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.outputs()[0]->name(), "s");
  EXPECT_EQ(g.outputs()[0]->producer(), insert);
  EXPECT_EQ(g.outputs()[0]->type(), FloatSeq({2, 2}));
  ExpectNoCastOnSequences(g);
  EXPECT_EQ(ElemType(g, "y"), GetParam() ? DType::kFloat32 : DType::kFloat16);
  EXPECT_EQ(OnnxCheck(m), "");
}

TEST_P(SequenceTest, SequenceConstructOfLowTensorsGetsFloatTensors) {
  ir::Model m = NewModel(17);
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {2, 2});
  b.Init("W", {2, 2}, {1.0f, 2.0f, 3.0f, 4.0f});
  b.Node("MatMul", {"x", "W"}, {"h1"});
  b.Node("MatMul", {"h1", "W"}, {"h2"});
  b.Node("SequenceConstruct", {"h1", "h2"}, {"s"});
  b.Node("ConcatFromSequence", {"s"}, {"y"}, {ir::Attribute::Int("axis", 0)});
  ir::Graph& g = *m.graph;
  g.FindValue("s")->set_type(FloatSeq({2, 2}));
  g.AddOutput(g.FindValue("s"));
  b.Output("y", DType::kFloat32, {4, 2});
  ConvertOptions options;
  options.keep_io_types = GetParam();
  ConvertReport report;
  RunPassesVerified(m, options, &report);
  const ir::Node* construct = NodesOf(g, "SequenceConstruct")[0];
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(construct->input(i)->type().elem_type(), DType::kFloat32) << "input " << i;
    EXPECT_EQ(testing::ProducerOp(construct, i), "Cast") << "input " << i;
  }
  EXPECT_EQ(ElemType(g, "h2"), DType::kFloat16);
  EXPECT_EQ(g.outputs()[0]->type(), FloatSeq({2, 2}));
  ExpectNoCastOnSequences(g);
  EXPECT_EQ(OnnxCheck(m), "");
}

// torch.jit.script's `outs.append(h)` in a loop: a Loop body computes h' = Tanh(x[:, i] W + h W) in fp16, carries it
// and appends it to the list it carries. The list gets float tensors, as its SequenceEmpty declares (ONNX Runtime
// refuses an fp16 tensor inserted into a float list outside a loop body).
TEST(SequenceTest, ALoopAppendingLowTensorsToItsListGivesItFloatTensors) {
  ir::Model m = NewModel(17);
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {2, 3, 2});
  b.Init("W", {2, 2}, {0.5f, -1.0f, 2.0f, 0.25f});
  b.InitInt64("M", {3});
  b.Node("SequenceEmpty", {}, {"empty"}, {ir::Attribute::Int("dtype", static_cast<int64_t>(DType::kFloat32))});
  b.Init("h0", {2, 2}, {0.0f, 0.0f, 0.0f, 0.0f});
  auto body = std::make_unique<ir::Graph>("body");
  Builder bb(body.get());
  bb.Input("i", DType::kInt64, {});
  bb.Input("cond_in", DType::kBool, {});
  bb.Input("h", DType::kFloat32, {2, 2});
  ir::Value* seq_in = body->CreateValue("outs");
  seq_in->set_type(FloatSeq({2, 2}));
  body->AddInput(seq_in);
  bb.Node("Identity", {"cond_in"}, {"cond_out"});
  bb.Node("Gather", {"x", "i"}, {"xt"}, {ir::Attribute::Int("axis", 1)});
  bb.Node("MatMul", {"xt", "W"}, {"p"});
  bb.Node("MatMul", {"h", "W"}, {"q"});
  bb.Node("Add", {"p", "q"}, {"a"});
  bb.Node("Tanh", {"a"}, {"t"});
  bb.Node("SequenceInsert", {"outs", "t"}, {"outs_next"});
  bb.Output("cond_out", DType::kBool, {});
  bb.Output("t", DType::kFloat32, {2, 2});
  body->AddOutput(body->FindValue("outs_next"));
  body->FindValue("outs_next")->set_type(FloatSeq({2, 2}));
  ir::Node* loop = b.Node("Loop", {"", "", "h0", "empty"}, {"hT", "list"}, {}, "loop");
  loop->SetInput(0, m.graph->FindValue("M"));
  loop->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  b.Node("ConcatFromSequence", {"list"}, {"y"}, {ir::Attribute::Int("axis", 0)});
  b.Output("y", DType::kFloat32, {6, 2});
  b.Output("hT", DType::kFloat32, {2, 2});
  ConvertReport report;
  RunPassesVerified(m, ConvertOptions{}, &report);
  const ir::Graph& g = *m.graph;
  const ir::Graph* converted_body = NodesOf(g, "Loop")[0]->subgraphs()[0];
  EXPECT_EQ(ElemType(*converted_body, "t"), DType::kFloat16);
  const ir::Node* insert = NodesOf(*converted_body, "SequenceInsert")[0];
  EXPECT_EQ(insert->input(1)->type().elem_type(), DType::kFloat32);
  EXPECT_EQ(testing::ProducerOp(insert, 1), "Cast");
  EXPECT_EQ(NodesOf(g, "SequenceEmpty")[0]->GetInt("dtype", 0), static_cast<int64_t>(DType::kFloat32));
  ExpectNoCastOnSequences(*converted_body);
  EXPECT_EQ(OnnxCheck(m), "");
}

INSTANTIATE_TEST_SUITE_P(KeepIoTypes, SequenceTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "KeepIo" : "LowIo"; });

TEST(ScatterPolicyTest, ReductionKeepsFp32UnlessTheTableSaysOtherwise) {
  ir::Graph g("main");
  auto make = [&](const std::string& op, const std::string& reduction) {
    ir::Value* out = g.CreateValue(g.UniqueName("v"));
    ir::Node* n = g.AddNode(op, {}, {out}, "");
    if (!reduction.empty()) n->SetAttribute(ir::Attribute::String("reduction", reduction));
    return n;
  };
  PrecisionPolicy p = PrecisionPolicy::Default();
  for (const char* op : {"ScatterND", "ScatterElements"}) {
    for (const char* r : {"add", "mul", "max", "min"}) {
      const Decision d = p.Decide(*make(op, r));
      EXPECT_EQ(d.precision, Precision::kKeep) << op << " " << r;
      EXPECT_EQ(d.reason, std::string(op) + " with reduction='" + r + "'");
    }
    EXPECT_EQ(p.Decide(*make(op, "none")).precision, Precision::kFollow) << op;
    EXPECT_EQ(p.Decide(*make(op, "")).precision, Precision::kFollow) << op;
  }
  p.SetOp("ScatterND", Precision::kFollow);  // an explicit table entry wins
  EXPECT_EQ(p.Decide(*make("ScatterND", "add")).precision, Precision::kFollow);
  EXPECT_EQ(p.Decide(*make("ScatterElements", "add")).precision, Precision::kKeep);
}

struct ScatterCase {
  std::string op;
  std::string reduction;
  DType target;
};

void PrintTo(const ScatterCase& c, std::ostream* os) {
  *os << c.op << " reduction='" << c.reduction << "' " << ShortName(c.target);
}

class ScatterTest : public ::testing::TestWithParam<ScatterCase> {};

// x[4] -> Mul(x) -> d; Scatter*(d, idx, Relu(x)[:2]) -> y. With a reduction the scatter reads and writes FP32.
TEST_P(ScatterTest, ReducingScatterComputesInFp32) {
  const ScatterCase& c = GetParam();
  ir::Model m = NewModel(18);
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {4});
  b.Input("u", DType::kFloat32, {2});
  b.Node("Mul", {"x", "x"}, {"d"});
  b.Node("Relu", {"u"}, {"upd"});
  std::vector<ir::Attribute> attrs;
  if (!c.reduction.empty()) attrs.push_back(ir::Attribute::String("reduction", c.reduction));
  if (c.op == "ScatterND") {
    ir::Tensor idx(DType::kInt64, {2, 1});
    idx.mutable_values<int64_t>()[0] = 1;
    idx.mutable_values<int64_t>()[1] = 3;
    idx.set_name("idx");
    ir::Value* v = m.graph->CreateValue("idx");
    v->set_type(ir::ValueType::Tensor(DType::kInt64, Builder::ToShape({2, 1})));
    m.graph->SetInitializer(v, std::move(idx));
  } else {
    b.InitInt64("idx", {1, 1});
  }
  b.Node(c.op, {"d", "idx", "upd"}, {"y"}, std::move(attrs));
  b.Output("y", DType::kFloat32, {4});
  ConvertOptions options;
  options.target = c.target;
  options.keep_io_types = c.target == DType::kBFloat16;
  ConvertReport report;
  RunPassesVerified(m, options, &report);
  const ir::Graph& g = *m.graph;
  const ir::Node* scatter = NodesOf(g, c.op)[0];
  const bool reduces = !c.reduction.empty() && c.reduction != "none";
  const DType compute = reduces ? DType::kFloat32 : c.target;
  EXPECT_EQ(scatter->input(0)->type().elem_type(), compute);
  EXPECT_EQ(scatter->input(2)->type().elem_type(), compute);
  EXPECT_EQ(scatter->output(0)->type().elem_type(), compute);
  EXPECT_EQ(ElemType(g, "d"), c.target);  // the Mul before it still converts
  EXPECT_EQ(OnnxCheck(m), "");
}

INSTANTIATE_TEST_SUITE_P(Reductions, ScatterTest,
                         ::testing::Values(ScatterCase{"ScatterND", "add", DType::kFloat16},
                                           ScatterCase{"ScatterND", "mul", DType::kFloat16},
                                           ScatterCase{"ScatterND", "max", DType::kBFloat16},
                                           ScatterCase{"ScatterND", "none", DType::kFloat16},
                                           ScatterCase{"ScatterND", "", DType::kBFloat16},
                                           ScatterCase{"ScatterElements", "add", DType::kBFloat16},
                                           ScatterCase{"ScatterElements", "min", DType::kFloat16},
                                           ScatterCase{"ScatterElements", "", DType::kFloat16}),
                         [](const auto& info) {
                           return info.param.op + "_" +
                                  (info.param.reduction.empty() ? "unset" : info.param.reduction) + "_" +
                                  ShortName(info.param.target);
                         });

}  // namespace
}  // namespace onnxamp::converter::testing
