// The converter's passes as one PassPipeline (ConversionPasses): the order ConvertModel runs them in, verification
// after every pass, and a pass appended to the pipeline that breaks the graph named in the error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "converter/convert.h"
#include "converter/passes/passes.h"
#include "runtime/passes/pass.h"
#include "tests/converter/converter_test_util.h"

namespace onnxamp::converter::testing {
namespace {

// x[2,4] -> MatMul(W) -> Relu -> y.
ir::Model MatMulRelu() {
  ir::Model m = NewModel();
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {2, 4});
  b.Init("W", {4, 3}, {0.5f, -0.25f, 1.0f});
  b.Node("MatMul", {"x", "W"}, {"h"});
  b.Node("Relu", {"h"}, {"y"});
  b.Output("y", DType::kFloat32, {2, 3});
  return m;
}

TEST(ConversionPasses, RunInConvertModelsOrderAndConvert) {
  ir::Model m = MatMulRelu();
  ConvertReport report;
  ConversionState state;
  state.model = &m;
  state.report = &report;
  passes::PassPipeline pipeline = ConversionPasses(state);
  EXPECT_EQ(pipeline.names(), (std::vector<std::string>{"classify_precision", "apply_precision_plan", "fold_casts",
                                                        "sort_topologically"}));
  bool changed = false;
  const Status st = pipeline.Run(m, passes::PassContext{}, &changed);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(changed);
  EXPECT_EQ(ElemType(*m.graph, "W"), DType::kFloat16);
  EXPECT_EQ(ElemType(*m.graph, "h"), DType::kFloat16);
  EXPECT_EQ(OnnxCheck(m), "");
}

// Older exporters list initializers among the graph inputs too: the initializer changes type in
// apply_precision_plan together with its declaration, so the graph verifies after every pass.
TEST(ConversionPasses, InitializerThatIsAlsoAGraphInputVerifies) {
  ir::Model m = MatMulRelu();
  m.graph->AddInput(m.graph->FindValue("W"));
  ConvertReport report;
  ConversionState state;
  state.model = &m;
  state.report = &report;
  const Status st = ConversionPasses(state).Run(m, passes::PassContext{});
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(ElemType(*m.graph, "x"), DType::kFloat16);
}

TEST(ConversionPasses, APassThatBreaksTheGraphIsNamed) {
  ir::Model m = MatMulRelu();
  ConvertReport report;
  ConversionState state;
  state.model = &m;
  state.report = &report;
  passes::PassPipeline pipeline = ConversionPasses(state);
  // Retypes W's initializer without its declared type: the graph no longer verifies.
  pipeline.Add("break_initializer_type", [](ir::Model& model, const passes::PassContext&, bool* changed) {
    ir::Value* w = model.graph->FindValue("W");
    model.graph->SetInitializer(w, RandomTensor({4, 3}, 1));
    w->set_type(ir::ValueType::Tensor(DType::kInt64, ir::Shape{ir::Dim::Value(4), ir::Dim::Value(3)}));
    *changed = true;
    return Status::Ok();
  });
  const Status st = pipeline.Run(m, passes::PassContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("pass break_initializer_type left an invalid graph"), std::string::npos) << st.message();
}

TEST(ConversionPasses, ConvertedModelIsAFixedPoint) {
  ir::Model m = MatMulRelu();
  ConvertOptions options;
  options.target = DType::kFloat16;
  ASSERT_TRUE(ConvertModel(m, options).ok());
  // Converting the converted model again changes nothing and still verifies after every pass.
  EXPECT_TRUE(IsConverted(m, options));
}

}  // namespace
}  // namespace onnxamp::converter::testing
