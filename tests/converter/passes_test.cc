// Converter passes on small hand-built graphs: classification, shared casts, initializers used in two
// precisions, pinned inputs, existing casts, fold rules, --keep-io-types, idempotence and the report.
#include <gtest/gtest.h>

#include "converter/convert.h"
#include "converter/model_clone.h"
#include "converter/passes/passes.h"
#include "tests/converter/converter_test_util.h"

namespace onnxamp::converter::testing {
namespace {

// x[2,4] -> MatMul(W) -> Softmax -> y;  MatMul output also -> Relu -> z.
ir::Model MatMulSoftmax() {
  ir::Model m = NewModel();
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {2, 4});
  b.Init("W", {4, 3}, {0.5f, -0.25f, 1.0f});
  b.Node("MatMul", {"x", "W"}, {"h"});
  b.Node("Softmax", {"h"}, {"y"}, {ir::Attribute::Int("axis", 1)});
  b.Node("Relu", {"h"}, {"r"});
  b.Node("Exp", {"h"}, {"z"});
  b.Output("y", DType::kFloat32, {2, 3});
  b.Output("r", DType::kFloat32, {2, 3});
  b.Output("z", DType::kFloat32, {2, 3});
  return m;
}

TEST(PassesTest, PassesKeepTheGraphValid) {
  ir::Model m = MatMulSoftmax();
  ConvertReport report;
  RunPassesVerified(m, ConvertOptions{}, &report);
  EXPECT_EQ(OnnxCheck(m), "");
}

TEST(ConvertTest, ClassifiesAndSharesOneCastPerValueAndType) {
  ir::Model m = MatMulSoftmax();
  ConvertReport report;
  ASSERT_TRUE(ConvertModel(m, ConvertOptions{}, &report).ok());
  const ir::Graph& g = *m.graph;
  EXPECT_EQ(ElemType(g, "x"), DType::kFloat16);
  EXPECT_EQ(ElemType(g, "W"), DType::kFloat16);
  EXPECT_EQ(ElemType(g, "h"), DType::kFloat16);
  EXPECT_EQ(ElemType(g, "r"), DType::kFloat16);  // Relu follows its fp16 input
  // Softmax and Exp both read h in float through one shared Cast.
  ir::Node* softmax = NodesOf(g, "Softmax")[0];
  ir::Node* exp = NodesOf(g, "Exp")[0];
  EXPECT_EQ(softmax->input(0), exp->input(0));
  EXPECT_EQ(softmax->input(0)->type().elem_type(), DType::kFloat32);
  EXPECT_EQ(testing::ProducerOp(softmax, 0), "Cast");
  // Outputs are fp16 again under their own names.
  EXPECT_EQ(ElemType(g, "y"), DType::kFloat16);
  EXPECT_EQ(ElemType(g, "z"), DType::kFloat16);
  EXPECT_EQ(g.outputs()[0]->name(), "y");
  EXPECT_EQ(report.casts_inserted, 3);  // h->fp32, y->fp16, z->fp16
  EXPECT_EQ(report.nodes_total, 4);
  EXPECT_EQ(report.nodes_low, 2);  // MatMul, Relu
  EXPECT_EQ(report.bytes_before, 48);
  EXPECT_EQ(report.bytes_after, 24);
  EXPECT_EQ(OnnxCheck(m), "");
}

TEST(ConvertTest, SecondConversionChangesNothing) {
  ir::Model m = MatMulSoftmax();
  ConvertReport first, second;
  ASSERT_TRUE(ConvertModel(m, ConvertOptions{}, &first).ok());
  EXPECT_FALSE(IsConverted(MatMulSoftmax(), ConvertOptions{}));
  EXPECT_TRUE(IsConverted(m, ConvertOptions{}));
  const size_t nodes = m.graph->num_nodes();
  ASSERT_TRUE(ConvertModel(m, ConvertOptions{}, &second).ok());
  EXPECT_EQ(m.graph->num_nodes(), nodes);
  EXPECT_EQ(second.casts_inserted, 0);
  EXPECT_EQ(second.casts_folded, 0);
  EXPECT_EQ(second.casts_final, first.casts_final);
}

TEST(ConvertTest, SharedInitializerIsNeverRetypedUnderAnFp32Consumer) {
  ir::Model m = NewModel();
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {3, 3});
  b.Init("W", {3, 3}, {70000.0f, 1e-9f, 2.0f});
  b.Node("MatMul", {"x", "W"}, {"h"});
  b.Node("Pow", {"W", "x"}, {"p"});  // Pow stays FP32 and reads W directly
  b.Output("h", DType::kFloat32, {3, 3});
  b.Output("p", DType::kFloat32, {3, 3});
  ConvertReport report;
  ASSERT_TRUE(ConvertModel(m, ConvertOptions{}, &report).ok());
  const ir::Graph& g = *m.graph;
  EXPECT_EQ(g.FindValue("W")->initializer()->dtype(), DType::kFloat32);
  ir::Node* pow = NodesOf(g, "Pow")[0];
  ir::Node* mm = NodesOf(g, "MatMul")[0];
  EXPECT_EQ(pow->input(0)->name(), "W");
  ASSERT_NE(mm->input(1)->initializer(), nullptr);
  EXPECT_EQ(mm->input(1)->initializer()->dtype(), DType::kFloat16);
  ASSERT_EQ(report.tensors.size(), 1u);
  EXPECT_TRUE(report.tensors[0].duplicated);
  EXPECT_EQ(report.tensors[0].clamped, 3);          // 70000 three times in 9 elements
  EXPECT_EQ(report.tensors[0].flushed_to_zero, 3);  // 1e-9
  EXPECT_FLOAT_EQ(HalfBitsToFloat(mm->input(1)->initializer()->values<uint16_t>()[0]), 65504.0f);
  EXPECT_EQ(OnnxCheck(m), "");
}

TEST(ConvertTest, ExistingCastToFloatFeedingLowConsumerIsRetargeted) {
  ir::Model m = NewModel();
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {2, 2});
  b.Input("ids", DType::kInt64, {2, 2});
  b.Node("Cast", {"ids"}, {"f"}, {ir::Attribute::Int("to", 1)});
  b.Node("Cast", {"x"}, {"xf"}, {ir::Attribute::Int("to", 1)});  // a no-op in the FP32 model
  b.Node("Add", {"xf", "f"}, {"s"});
  b.Node("MatMul", {"s", "s"}, {"y"});
  b.Output("y", DType::kFloat32, {2, 2});
  ASSERT_TRUE(ConvertModel(m, ConvertOptions{}).ok());
  const ir::Graph& g = *m.graph;
  for (ir::Node* c : NodesOf(g, "Cast")) {
    EXPECT_NE(c->GetInt("to", 0), 1) << c->Describe() << " still casts to float";
  }
  EXPECT_EQ(ElemType(g, "s"), DType::kFloat16);
  EXPECT_EQ(NodesOf(g, "Cast").size(), 1u);  // ids -> fp16; the no-op Cast on x is folded
  EXPECT_EQ(OnnxCheck(m), "");
}

TEST(ConvertTest, ResizeScalesAndRoiStayFloat) {
  ir::Model m = NewModel(13);
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {1, 1, 2, 2});
  b.Init("roi", {0}, {});
  b.Init("scales", {4}, {1.0f, 1.0f, 2.0f, 2.0f});
  b.Init("W", {1, 1, 1, 1}, {2.0f});
  b.Node("Conv", {"x", "W"}, {"c"});
  b.Node("Resize", {"c", "roi", "scales"}, {"y"});
  b.Output("y", DType::kFloat32, {1, 1, 4, 4});
  ASSERT_TRUE(ConvertModel(m, ConvertOptions{}).ok());
  const ir::Graph& g = *m.graph;
  ir::Node* resize = NodesOf(g, "Resize")[0];
  EXPECT_EQ(resize->input(0)->type().elem_type(), DType::kFloat16);
  EXPECT_EQ(resize->input(1)->initializer()->dtype(), DType::kFloat32);
  EXPECT_EQ(resize->input(2)->initializer()->dtype(), DType::kFloat32);
  EXPECT_EQ(resize->input(2)->name(), "scales");
  EXPECT_EQ(OnnxCheck(m), "");
  // And it runs, giving the nearest-neighbour upsampling of 2*x.
  ir::Tensor x = testing::RandomTensor({1, 1, 2, 2}, 1);
  x.set_name("x");
  auto out = testing::RunModel(m, {x});
  ASSERT_TRUE(out.ok()) << out.status().message();
  std::vector<double> y = testing::AsDoubles((*out)[0]);
  ASSERT_EQ(y.size(), 16u);
  EXPECT_NEAR(y[0], 2.0 * x.values<float>()[0], 2e-3);
  EXPECT_NEAR(y[15], 2.0 * x.values<float>()[3], 2e-3);
}

TEST(ConvertTest, UpsampleScalesStayFloat) {
  ir::Model m = NewModel(9);
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {1, 1, 2, 2});
  b.Init("scales", {4}, {1.0f, 1.0f, 2.0f, 2.0f});
  b.Node("Upsample", {"x", "scales"}, {"y"});
  b.Output("y", DType::kFloat32, {1, 1, 4, 4});
  ASSERT_TRUE(ConvertModel(m, ConvertOptions{}).ok());
  ir::Node* up = NodesOf(*m.graph, "Upsample")[0];
  EXPECT_EQ(up->input(0)->type().elem_type(), DType::kFloat16);
  EXPECT_EQ(up->input(1)->initializer()->dtype(), DType::kFloat32);
  EXPECT_EQ(OnnxCheck(m), "");
}

TEST(ConvertTest, KeepIoTypesCastsOncePerInputAndKeepsOrder) {
  ir::Model m = MatMulSoftmax();
  ConvertOptions options;
  options.keep_io_types = true;
  ConvertReport report;
  ASSERT_TRUE(ConvertModel(m, options, &report).ok());
  const ir::Graph& g = *m.graph;
  EXPECT_EQ(ElemType(g, "x"), DType::kFloat32);
  EXPECT_EQ(ElemType(g, "y"), DType::kFloat32);
  EXPECT_EQ(ElemType(g, "r"), DType::kFloat32);
  int casts_of_x = 0;
  for (const ir::Use& u : g.FindValue("x")->uses()) casts_of_x += u.node->op_type() == "Cast";
  EXPECT_EQ(casts_of_x, 1);
  auto order = g.TopologicalOrder();
  ASSERT_TRUE(order.ok());
  std::vector<ir::Node*> listed;
  for (ir::Node* n : g.nodes()) listed.push_back(n);
  EXPECT_EQ(*order, listed) << "the node list is not in topological order";
  EXPECT_EQ(OnnxCheck(m), "");
  EXPECT_TRUE(IsConverted(m, options));
}

TEST(ConvertTest, LossyCastPairIsKeptLosslessPairIsFolded) {
  ir::Model m = NewModel();
  Builder b(m.graph.get());
  b.Input("a", DType::kFloat32, {2});
  b.Input("h", DType::kFloat16, {2});
  b.Node("Cast", {"a"}, {"a16"}, {ir::Attribute::Int("to", 10)});
  b.Node("Cast", {"a16"}, {"a32"}, {ir::Attribute::Int("to", 1)});  // rounds a: must stay
  b.Node("Softmax", {"a32"}, {"ya"});
  b.Node("Cast", {"h"}, {"h32"}, {ir::Attribute::Int("to", 1)});
  b.Node("Cast", {"h32"}, {"h16"}, {ir::Attribute::Int("to", 10)});  // exact round trip: folded
  b.Node("Relu", {"h16"}, {"yh"});
  b.Output("ya", DType::kFloat32, {2});
  b.Output("yh", DType::kFloat16, {2});
  ConversionState state;
  state.model = &m;
  FoldCastsPass fold(&state);
  bool changed = false;
  ASSERT_TRUE(fold.Run(*m.graph, &changed).ok());
  EXPECT_TRUE(changed);
  EXPECT_EQ(fold.folded(), 2);
  const ir::Graph& g = *m.graph;
  EXPECT_EQ(NodesOf(g, "Relu")[0]->input(0)->name(), "h");
  EXPECT_EQ(NodesOf(g, "Softmax")[0]->input(0)->name(), "a32");
  EXPECT_EQ(NodesOf(g, "Cast").size(), 2u);
  ASSERT_TRUE(ir::Verify(m).ok());
}

TEST(ConvertTest, ConstantOfShapeAndConstantFollowTheirConsumers) {
  ir::Model m = NewModel();
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {2, 2});
  b.InitInt64("shape", {2, 2});
  b.Node("ConstantOfShape", {"shape"}, {"ones"},
         {ir::Attribute::TensorValue("value", testing::RandomTensor({1}, 3, 1.0f, 1.0f))});
  b.Node("Constant", {}, {"k"}, {ir::Attribute::Float("value_float", 1e6f)});
  b.Node("MatMul", {"x", "x"}, {"h"});
  b.Node("Add", {"h", "ones"}, {"s"});
  b.Node("Mul", {"s", "k"}, {"y"});
  b.Output("y", DType::kFloat32, {2, 2});
  ConvertReport report;
  ASSERT_TRUE(ConvertModel(m, ConvertOptions{}, &report).ok());
  const ir::Graph& g = *m.graph;
  EXPECT_EQ(NodesOf(g, "Cast").size(), 0u);
  EXPECT_EQ(ElemType(g, "ones"), DType::kFloat16);
  const ir::Attribute* v = NodesOf(g, "ConstantOfShape")[0]->FindAttribute("value");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->t.dtype(), DType::kFloat16);
  const ir::Attribute* k = NodesOf(g, "Constant")[0]->FindAttribute("value");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->t.dtype(), DType::kFloat16);
  EXPECT_FLOAT_EQ(HalfBitsToFloat(k->t.values<uint16_t>()[0]), 65504.0f);
  bool reported = false;
  for (const auto& t : report.tensors) reported |= t.name == "k" && t.clamped == 1;
  EXPECT_TRUE(reported);
  EXPECT_EQ(OnnxCheck(m), "");
}

TEST(ConvertTest, TiedInputsPromoteToTheWidest) {
  ir::Model m = NewModel();
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {2, 2});
  b.Input("c", DType::kBool, {2, 2});
  b.Node("MatMul", {"x", "x"}, {"h"});      // fp16
  b.Node("Softmax", {"x"}, {"s"});          // fp32
  b.Node("Where", {"c", "h", "s"}, {"w"});  // promotes to fp32
  b.Node("Concat", {"h", "s"}, {"cat"}, {ir::Attribute::Int("axis", 0)});
  b.Output("w", DType::kFloat32, {2, 2});
  b.Output("cat", DType::kFloat32, {4, 2});
  ASSERT_TRUE(ConvertModel(m, ConvertOptions{}).ok());
  const ir::Graph& g = *m.graph;
  ir::Node* where = NodesOf(g, "Where")[0];
  EXPECT_EQ(where->input(1)->type().elem_type(), DType::kFloat32);
  EXPECT_EQ(where->input(2)->type().elem_type(), DType::kFloat32);
  ir::Node* concat = NodesOf(g, "Concat")[0];
  EXPECT_EQ(concat->input(0)->type().elem_type(), DType::kFloat32);
  EXPECT_EQ(concat->input(0), where->input(1));  // the same Cast of h serves both
  EXPECT_EQ(OnnxCheck(m), "");
}

TEST(ConvertTest, Float64IsLeftAlone) {
  ir::Model m = NewModel();
  Builder b(m.graph.get());
  b.Input("d", DType::kFloat64, {2, 2});
  b.Node("MatMul", {"d", "d"}, {"y"});
  b.Output("y", DType::kFloat64, {2, 2});
  ASSERT_TRUE(ConvertModel(m, ConvertOptions{}).ok());
  EXPECT_EQ(ElemType(*m.graph, "d"), DType::kFloat64);
  EXPECT_EQ(ElemType(*m.graph, "y"), DType::kFloat64);
  EXPECT_EQ(m.graph->num_nodes(), 1u);
}

TEST(ConvertTest, KeepNodeAndKeepOpOverrides) {
  ir::Model m = MatMulSoftmax();
  ConvertOptions options;
  ASSERT_TRUE(options.policy.AddKeepNodePattern("h_.*").ok());
  options.policy.SetOp("Relu", Precision::kKeep);
  ConvertReport report;
  ASSERT_TRUE(ConvertModel(m, options, &report).ok());
  const ir::Graph& g = *m.graph;
  ir::Node* mm = NodesOf(g, "MatMul")[0];
  EXPECT_EQ(mm->input(0)->type().elem_type(), DType::kFloat32);
  EXPECT_EQ(ElemType(g, "h"), DType::kFloat32);
  ASSERT_FALSE(report.kept_fp32.empty());
  EXPECT_EQ(report.kept_fp32[0].reason, "--keep-node 'h_.*'");
  EXPECT_EQ(OnnxCheck(m), "");
}

TEST(ConvertTest, NodesKeptByNameStayKeptWhenConvertedAgain) {
  ir::Model m = MatMulSoftmax();
  ConvertOptions options;
  ASSERT_TRUE(options.policy.AddKeepNodePattern("h_.*").ok());
  ASSERT_TRUE(ConvertModel(m, options, nullptr).ok());
  const std::string mm_name = NodesOf(*m.graph, "MatMul")[0]->name();
  std::string recorded;
  for (const auto& [key, value] : m.metadata_props) {
    if (key == "onnxamp.keep_fp32_nodes") recorded = value;
  }
  EXPECT_EQ(recorded, mm_name);
  // A second conversion with the default policy (no --keep-node) keeps the MatMul in FP32 and changes nothing.
  ir::Model again = CloneModel(m);
  ConvertReport report;
  ASSERT_TRUE(ConvertModel(again, ConvertOptions{}, &report).ok());
  EXPECT_EQ(ElemType(*again.graph, "h"), DType::kFloat32);
  EXPECT_EQ(report.casts_inserted, 0);
  EXPECT_EQ(report.nodes_low, 0);
  EXPECT_TRUE(IsConverted(m, ConvertOptions{}));
  EXPECT_EQ(testing::Serialize(again), testing::Serialize(m));
  // Without a forced node nothing is recorded.
  ir::Model plain = MatMulSoftmax();
  ASSERT_TRUE(ConvertModel(plain, ConvertOptions{}, nullptr).ok());
  for (const auto& kv : plain.metadata_props) EXPECT_NE(kv.first, "onnxamp.keep_fp32_nodes");
}

TEST(ConvertTest, BFloat16RaisesTheOpsetOnlyWhenSafe) {
  ir::Model m = NewModel(11);
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {2, 2});
  b.Node("MatMul", {"x", "x"}, {"h"});
  b.Node("Relu", {"h"}, {"y"});
  b.Output("y", DType::kFloat32, {2, 2});
  ConvertOptions options;
  options.target = DType::kBFloat16;
  ConvertReport report;
  ASSERT_TRUE(ConvertModel(m, options, &report).ok());
  EXPECT_EQ(report.opset_before, 11);
  EXPECT_EQ(report.opset_after, 13);
  EXPECT_EQ(ElemType(*m.graph, "h"), DType::kBFloat16);
  EXPECT_EQ(OnnxCheck(m), "");

  // Ops that changed at opset 13 (Unsqueeze's axes became an input, Softmax's axis a single dim): ONNX's version
  // converter rewrites them. Softmax-11 over dims 1 and 2 of [2, 3, 4] becomes a Softmax over their flattening.
  ir::Model u = NewModel(11);
  Builder bu(u.graph.get());
  bu.Input("x", DType::kFloat32, {2, 3, 4});
  bu.Node("Softmax", {"x"}, {"p"}, {ir::Attribute::Int("axis", 1)}, "sm");
  bu.Node("Unsqueeze", {"p"}, {"y"}, {ir::Attribute::Ints("axes", {0})}, "un");
  bu.Output("y", DType::kFloat32, {1, 2, 3, 4});
  ASSERT_TRUE(ConvertModel(u, options, &report).ok());
  EXPECT_EQ(report.opset_before, 11);
  EXPECT_EQ(u.OpsetVersion(""), 13);
  EXPECT_EQ(OnnxCheck(u), "");
  ASSERT_EQ(NodesOf(*u.graph, "Unsqueeze").size(), 1u);
  EXPECT_EQ(NodesOf(*u.graph, "Unsqueeze")[0]->inputs().size(), 2u);  // the axes an input now
  ASSERT_EQ(NodesOf(*u.graph, "Softmax").size(), 1u);
  EXPECT_GE(NodesOf(*u.graph, "Reshape").size() + NodesOf(*u.graph, "Flatten").size(), 1u);

  // Where the converter cannot (its Gemm adapter from opset 6 needs every dim of the inputs as a number): refused,
  // naming the node and why, and the model is unchanged.
  ir::Model s = NewModel(6);
  Builder bs(s.graph.get());
  bs.Input("a", DType::kFloat32, {2, 2})->set_type(ir::ValueType::Tensor(DType::kFloat32));  // no shape
  bs.Init("w", {2, 2}, {0.5f});
  bs.Init("bias", {2}, {0.25f});
  bs.Node("Gemm", {"a", "w", "bias"}, {"y"}, {ir::Attribute::Int("broadcast", 1)}, "fc");
  bs.Node("Softmax", {"y"}, {"p"}, {}, "sm");
  bs.Output("p", DType::kFloat32, {2, 2});
  const std::string before = testing::Serialize(s);
  Status st = ConvertModel(s, options);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("Gemm 'fc' of opset 6"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("input 'a' as a number, and its shape is not known"), std::string::npos) << st.message();
  EXPECT_EQ(testing::Serialize(s), before);
  s.graph->FindValue("a")->set_type(
      ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("batch"), ir::Dim::Value(2)}));
  st = ConvertModel(s, options);
  EXPECT_NE(st.message().find("input 'a' as a number, and some are symbolic"), std::string::npos) << st.message();
  s.graph->FindValue("a")->set_type(
      ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(2), ir::Dim::Value(2)}));
  ASSERT_TRUE(ConvertModel(s, options).ok());
  EXPECT_EQ(OnnxCheck(s), "");
  EXPECT_EQ(s.OpsetVersion(""), 13);
  EXPECT_EQ(NodesOf(*s.graph, "Gemm")[0]->FindAttribute("broadcast"), nullptr);
  // Without the upgrade: refused, naming the opsets.
  options.allow_opset_upgrade = false;
  ir::Model r = NewModel(11);
  Builder br(r.graph.get());
  br.Input("x", DType::kFloat32, {2, 2});
  br.Node("Relu", {"x"}, {"y"});
  br.Output("y", DType::kFloat32, {2, 2});
  st = ConvertModel(r, options);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("opset 13"), std::string::npos) << st.message();
  EXPECT_EQ(ElemType(*r.graph, "x"), DType::kFloat32);
}

// ONNX added bfloat16 to Conv, the pools and 40-odd other ops at opset 22 (to ConstantOfShape at 20); the linked
// schemas (ONNX 1.12) stop at 17. A model at 22 converts its convolutions and pools; one at 21 keeps them in float
// (valid ONNX at its opset); bfloat16_types_opset 22 (the trainer's graphs on CUDA) takes 22's types at any opset.
TEST(ConvertTest, BFloat16ConvolutionsFromOpset22) {
  auto cnn = [](int64_t opset) {
    ir::Model m = NewModel(opset);
    Builder b(m.graph.get());
    b.Input("x", DType::kFloat32, {2, 3, 8, 8});
    const ir::Tensor w = RandomTensor({4, 3, 3, 3}, 2, -0.5f, 0.5f);
    b.Init("w", {4, 3, 3, 3}, {w.values<float>().begin(), w.values<float>().end()});
    b.Init("bias", {4}, {0.1f, -0.2f, 0.3f, -0.4f});
    b.Node("Conv", {"x", "w", "bias"}, {"c"}, {ir::Attribute::Ints("pads", {1, 1, 1, 1})}, "conv");
    b.Node("Relu", {"c"}, {"r"}, {}, "relu");
    b.Node("MaxPool", {"r"}, {"p"},
           {ir::Attribute::Ints("kernel_shape", {2, 2}), ir::Attribute::Ints("strides", {2, 2})}, "pool");
    b.Node("GlobalAveragePool", {"p"}, {"y"}, {}, "gap");
    b.Output("y", DType::kFloat32, {2, 4, 1, 1});
    return m;
  };
  const ir::Tensor x = [] {
    ir::Tensor t = RandomTensor({2, 3, 8, 8}, 5);
    t.set_name("x");
    return t;
  }();
  auto ref = RunModel(cnn(22), {x});
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  struct Case {
    int64_t opset, types_opset;
    bool low;
  };
  for (const Case& c : {Case{21, 0, false}, Case{22, 0, true}, Case{17, 22, true}, Case{17, 21, false}}) {
    SCOPED_TRACE(::testing::PrintToString(std::vector<int64_t>{c.opset, c.types_opset}));
    ir::Model m = cnn(c.opset);
    ConvertOptions options;
    options.target = DType::kBFloat16;
    options.keep_io_types = true;
    options.bfloat16_types_opset = c.types_opset;
    ConvertReport report;
    ASSERT_TRUE(ConvertModel(m, options, &report).ok());
    const DType want = c.low ? DType::kBFloat16 : DType::kFloat32;
    const ir::Node* conv = NodeNamed(*m.graph, "conv");
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(conv->input(0)->type().elem_type(), want);
    EXPECT_EQ(conv->input(1)->type().elem_type(), want);
    EXPECT_EQ(ElemType(*m.graph, "p"), want);  // MaxPool follows
    EXPECT_EQ(report.nodes_low, c.low ? 4 : 0) << report.Summary();
    std::string conv_kept;
    for (const KeptNode& k : report.kept_fp32) {
      if (k.name == "conv") conv_kept = k.reason;
    }
    EXPECT_EQ(conv_kept, c.low ? ""
                               : StrCat("Conv-11 has no bfloat16 (opset ", c.opset,
                                        "; ONNX added it at opset 22): computes in float"))
        << report.Summary();
    EXPECT_TRUE(IsConverted(m, options));
    auto got = RunModel(m, {x});
    ASSERT_TRUE(got.ok()) << got.status().message();
    const std::vector<double> a = AsDoubles((*ref)[0]), g = AsDoubles((*got)[0]);
    ASSERT_EQ(a.size(), g.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(g[i], a[i], 2e-2 + 2e-2 * std::abs(a[i])) << i;
  }
}

// Softmax, LogSoftmax and Hardmax of opsets before 13 coerce their input to 2-D around the axis. For bf16 they are
// rewritten without the input's dims (ONNX's own adapter needs them, and wrote symbolic ones as -1 into a Reshape):
// an axis that is the last dim becomes -1, any other a Flatten, the op over the last axis and a Reshape to the input's
// shape. The converted model computes what the opset-11 model computes, for any batch and sequence length.
TEST(ConvertTest, BFloat16AdaptsSoftmaxAxesWithoutTheDims) {
  ir::Model m = NewModel(11);
  Builder b(m.graph.get());
  ir::Value* x = b.Input("x", DType::kFloat32, {1, 1, 4});
  x->set_type(ir::ValueType::Tensor(DType::kFloat32,
                                    ir::Shape{ir::Dim::Param("batch"), ir::Dim::Param("seq"), ir::Dim::Value(4)}));
  // u reshaped to a shape read from an input: a value whose rank neither the model nor ONNX's inference knows.
  ir::Value* u = b.Input("u", DType::kFloat32, {1, 1});
  u->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("p"), ir::Dim::Param("q")}));
  b.Input("new_shape", DType::kInt64, {4});
  b.Node("Reshape", {"u", "new_shape"}, {"u4"});
  b.Node("LogSoftmax", {"x"}, {"over_rows"}, {ir::Attribute::Int("axis", 1)}, "rows");
  b.Node("Softmax", {"x"}, {"last"}, {ir::Attribute::Int("axis", 2)}, "last_axis");
  b.Node("Softmax", {"u4"}, {"unranked"}, {}, "default_axis");  // axis 1 by default before opset 13
  b.Node("Hardmax", {"x"}, {"hard"}, {ir::Attribute::Int("axis", -2)}, "hard");
  for (const char* out : {"over_rows", "last", "unranked", "hard"}) {
    m.graph->AddOutput(m.graph->FindValue(out));
    ir::Shape dims{ir::Dim::Param("batch"), ir::Dim::Param("seq"), ir::Dim::Value(4)};
    if (std::string(out) == "unranked")
      dims = {ir::Dim::Param("a"), ir::Dim::Param("b"), ir::Dim::Param("c"), ir::Dim::Param("d")};
    m.graph->FindValue(out)->set_type(ir::ValueType::Tensor(DType::kFloat32, dims));
  }
  const ir::Model original = CloneModel(m);
  ConvertOptions options;
  options.target = DType::kBFloat16;
  options.keep_io_types = true;
  ConvertReport report;
  ASSERT_TRUE(ConvertModel(m, options, &report).ok());
  EXPECT_EQ(m.OpsetVersion(""), 13);
  EXPECT_EQ(OnnxCheck(m), "");
  for (const ir::Node* n : m.graph->nodes()) {
    if (n->op_type() == "Softmax" || n->op_type() == "LogSoftmax" || n->op_type() == "Hardmax") {
      EXPECT_EQ(n->FindAttribute("axis")->i, -1) << n->name();
    }
  }
  EXPECT_EQ(NodesOf(*m.graph, "Flatten").size(), 3u);  // all but the last-axis Softmax
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{2, 3, 4}, std::vector<int64_t>{3, 5, 4}}) {
    ir::Tensor xt = RandomTensor(dims, 7, -3.0f, 3.0f);
    xt.set_name("x");
    ir::Tensor ut = RandomTensor({dims[1], dims[0] * 6}, 8, -3.0f, 3.0f);
    ut.set_name("u");
    ir::Tensor st(DType::kInt64, {4});
    st.set_name("new_shape");
    const std::vector<int64_t> to = {dims[1], dims[0], 2, 3};
    std::copy(to.begin(), to.end(), st.mutable_values<int64_t>().begin());
    auto want = RunModel(original, {xt, ut, st});
    auto got = RunModel(m, {xt, ut, st});
    ASSERT_TRUE(want.ok()) << want.status().message();
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ(got->size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ((*got)[i].dims(), (*want)[i].dims()) << i;
      const std::vector<double> g = AsDoubles((*got)[i]), w = AsDoubles((*want)[i]);
      ASSERT_EQ(g.size(), w.size());
      double worst = 0;
      for (size_t k = 0; k < g.size(); ++k) worst = std::max(worst, std::abs(g[k] - w[k]) / (1 + std::abs(w[k])));
      EXPECT_LT(worst, 2e-2) << "output " << i;  // bf16 rounding of the inputs
    }
  }
  // The raise was not checked on random inputs (zeros for new_shape cannot reshape u); given inputs, it is.
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("the model raised to opset 13 was not checked against the model: "),
            std::string::npos)
      << report.warnings[0];
  ir::Tensor xt = RandomTensor({2, 3, 4}, 7), ut = RandomTensor({3, 12}, 8), st(DType::kInt64, {4});
  xt.set_name("x");
  ut.set_name("u");
  st.set_name("new_shape");
  const std::vector<int64_t> to = {3, 2, 2, 3};
  std::copy(to.begin(), to.end(), st.mutable_values<int64_t>().begin());
  options.upgrade_check.inputs = {xt, ut, st};
  ir::Model again = CloneModel(original);
  ASSERT_TRUE(ConvertModel(again, options, &report).ok());
  EXPECT_TRUE(report.warnings.empty()) << report.warnings[0];
}

// Opset 6's binary ops broadcast only with `broadcast = 1`, B aligned with A from `axis` (or the trailing dims). For
// bf16 the converter gives B the trailing 1-dims itself: ONNX 1.12's adapter unsqueezed B by A's rank less B's whatever
// the axis (Add(x [2, 4, 3, 3], b [4], axis 1) became x + b[4, 1, 1, 1], adding b along the batch). The converted
// model computes what the opset-6 model computes; without the ranks it is refused, naming the node.
TEST(ConvertTest, BFloat16RewritesTheLegacyBroadcastFromAnAxis) {
  ir::Model m = NewModel(6);
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {2, 4, 3, 3});
  b.Init("bias", {4}, {0.5f, -1.0f, 2.0f, 0.25f});
  b.Init("col", {3}, {1.5f, -0.5f, 2.0f});
  b.Node("Add", {"x", "bias"}, {"y"}, {ir::Attribute::Int("broadcast", 1), ir::Attribute::Int("axis", 1)}, "add");
  b.Node("Mul", {"y", "col"}, {"z"}, {ir::Attribute::Int("broadcast", 1)}, "mul");  // the trailing dim, as numpy
  b.Output("z", DType::kFloat32, {2, 4, 3, 3});
  const ir::Model original = CloneModel(m);
  ConvertOptions options;
  options.target = DType::kBFloat16;
  options.keep_io_types = true;
  ASSERT_TRUE(ConvertModel(m, options).ok());
  EXPECT_EQ(m.OpsetVersion(""), 13);
  EXPECT_EQ(OnnxCheck(m), "");
  for (const ir::Node* n : m.graph->nodes()) {
    EXPECT_EQ(n->FindAttribute("broadcast"), nullptr) << n->name();
    if (n->op_type() == "Add" || n->op_type() == "Mul") EXPECT_EQ(n->FindAttribute("axis"), nullptr) << n->name();
  }
  ir::Tensor x = RandomTensor({2, 4, 3, 3}, 3, -2.0f, 2.0f);
  x.set_name("x");
  auto want = RunModel(original, {x});
  auto got = RunModel(m, {x});
  ASSERT_TRUE(want.ok()) << want.status().message();
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ((*got)[0].dims(), (*want)[0].dims());
  const std::vector<double> g = AsDoubles((*got)[0]), w = AsDoubles((*want)[0]);
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 2e-2 * (1 + std::abs(w[i]))) << i;

  // x of unknown rank: the axis cannot be placed.
  ir::Model u = CloneModel(original);
  u.graph->FindValue("x")->set_type(ir::ValueType::Tensor(DType::kFloat32));
  const Status st = ConvertModel(u, options);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("Add 'add' of opset 6 broadcasts 'bias' from axis 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'x''s is not known"), std::string::npos) << st.message();
}

// After raising the opset, the model and the raised model run forward on inputs made from the declared shapes; an
// output that differs (as the adapters' mistakes above made them) refuses the conversion, naming it.
TEST(ConvertTest, RaisedModelsAreComparedOnSyntheticInputs) {
  ir::Model m = NewModel(11);
  Builder b(m.graph.get());
  ir::Value* x = b.Input("x", DType::kFloat32, {1, 3});
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("batch"), ir::Dim::Value(3)}));
  b.Input("ids", DType::kInt64, {2});
  b.Init("w", {3, 3}, {0.5f, -1.0f, 0.25f});
  b.Node("MatMul", {"x", "w"}, {"h"});
  b.Node("Softmax", {"h"}, {"p"}, {ir::Attribute::Int("axis", 1)}, "sm");
  b.Node("Gather", {"p", "ids"}, {"g"}, {ir::Attribute::Int("axis", 1)}, "pick");
  b.Output("g", DType::kFloat32, {1, 2});
  StatusOr<std::vector<ir::Tensor>> inputs = SyntheticInputs(m, 7);
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  ASSERT_EQ(inputs->size(), 2u);
  EXPECT_EQ((*inputs)[0].dims(), (std::vector<int64_t>{2, 3}));  // the symbolic batch is 2
  EXPECT_EQ((*inputs)[1].dtype(), DType::kInt64);
  for (int64_t id : (*inputs)[1].values<int64_t>()) EXPECT_EQ(id, 0);  // a valid index

  StatusOr<ir::Model> raised = UpgradeOpset(m, 13);
  ASSERT_TRUE(raised.ok()) << raised.status().message();
  EXPECT_TRUE(CompareForward(CloneModel(m), CloneModel(*raised), *inputs, "random inputs").ok());
  // A raise that changed a weight: refused, naming the output.
  ir::Value* w = raised->graph->FindValue("w");
  ir::Tensor changed = *w->initializer();
  changed.mutable_values<float>()[0] = 2.0f;
  raised->graph->SetInitializer(w, std::move(changed));
  const Status st = CompareForward(CloneModel(m), CloneModel(*raised), *inputs, "random inputs");
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("the model raised from opset 11 to 13 by ONNX's version converter computes another "
                              "output 'g' on random inputs (element "),
            std::string::npos)
      << st.message();
  // An input without a shape cannot be made.
  m.graph->FindValue("x")->set_type(ir::ValueType::Tensor(DType::kFloat32));
  EXPECT_EQ(SyntheticInputs(m, 7).status().code(), StatusCode::kUnimplemented);
}

// What ONNX 1.12's version converter cannot take is refused before it runs: it looks nodes up by op name alone (a
// node of another domain), and it never returned on the experimental ConstantFill.
TEST(ConvertTest, BFloat16RaiseRefusesWhatTheVersionConverterCannotTake) {
  ConvertOptions options;
  options.target = DType::kBFloat16;
  for (const bool other_domain : {false, true}) {
    ir::Model m = NewModel(9);
    Builder b(m.graph.get());
    b.Input("x", DType::kFloat32, {2, 3});
    ir::Node* odd = b.Node(other_domain ? "Gelu" : "ConstantFill", {"x"}, {"c"}, {}, "odd");
    if (other_domain) {
      odd->set_domain("com.microsoft");
      m.opset_imports.push_back({"com.microsoft", 1});
    }
    b.Node("Softmax", {"c"}, {"y"}, {ir::Attribute::Int("axis", 1)}, "sm");
    b.Output("y", DType::kFloat32, {2, 3});
    const Status st = ConvertModel(m, options);
    EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
    EXPECT_NE(st.message().find(other_domain ? "node Gelu 'odd' of domain 'com.microsoft': ONNX's version converter "
                                               "raises models of the default domain only"
                                             : "node ConstantFill 'odd': no ONNX op of that name at opset 9"),
              std::string::npos)
        << st.message();
  }
}

TEST(ConvertTest, RejectsOtherTargets) {
  ir::Model m = MatMulSoftmax();
  ConvertOptions options;
  options.target = DType::kFloat64;
  Status st = ConvertModel(m, options);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ElemType(*m.graph, "x"), DType::kFloat32);
}

TEST(ConvertTest, ReportJsonAndSummary) {
  ir::Model m = MatMulSoftmax();
  ConvertReport report;
  ASSERT_TRUE(ConvertModel(m, ConvertOptions{}, &report).ok());
  const std::string json = report.ToJson();
  EXPECT_NE(json.find("\"nodes_low\": 2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"target\": \"float16\""), std::string::npos) << json;
  EXPECT_NE(report.Summary().find("2 / 4 nodes in float16"), std::string::npos) << report.Summary();
}

}  // namespace
}  // namespace onnxamp::converter::testing
