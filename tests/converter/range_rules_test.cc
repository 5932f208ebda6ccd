// Range rules (converter/range_rules.h): which nodes --init-max, --data-max and --max-reduction-depth keep in FP32
// on a small hand-built model, the reasons they give, that a node the policy keeps already is not listed, and the
// errors; the kept nodes convert as FP32 and the model stays within range where the plain conversion overflows.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "converter/convert.h"
#include "converter/range_rules.h"
#include "tests/converter/converter_test_util.h"

namespace onnxamp::converter {
namespace {

using testing::Builder;
using testing::NewModel;
using testing::NodeNamed;
using testing::RandomTensor;

// x [4, 64] -> MatMul by w1 [64, 64] (values up to 3) -> "mm1" -> Mul by 100 ("scale") -> MatMul by w2 [64, 8]
// (one value 1e5) -> "mm2" -> y [4, 8]; an unnamed Relu on mm1's output feeds nothing else but a second output.
ir::Model Model() {
  ir::Model m = NewModel();
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {4, 64});
  b.Init("w1", {64, 64}, {3.0f, -1.0f, 0.5f, 2.0f});
  b.Init("hundred", {1}, {100.0f});
  std::vector<float> w2(64 * 8, 0.01f);
  w2[5] = 1e5f;
  b.Init("w2", {64, 8}, w2);
  b.Node("MatMul", {"x", "w1"}, {"h1"}, {}, "mm1");
  b.Node("Mul", {"h1", "hundred"}, {"h2"}, {}, "scale");
  b.Node("MatMul", {"h2", "w2"}, {"y"}, {}, "mm2");
  b.Node("Relu", {"h1"}, {"r"}, {}, "");
  b.Output("y", DType::kFloat32, {4, 8});
  b.Output("r", DType::kFloat32, {4, 64});
  return m;
}

std::vector<std::vector<ir::Tensor>> Samples() {
  ir::Tensor x = RandomTensor({4, 64}, 3, -1.0f, 1.0f);
  x.set_name("x");
  return {{x}};
}

std::vector<std::string> Names(const std::vector<KeptNode>& kept) {
  std::vector<std::string> names;
  for (const KeptNode& k : kept) names.push_back(k.name);
  return names;
}

TEST(RangeRulesTest, InitMaxKeepsTheReadersOfLargeConstants) {
  ir::Model m = Model();
  RangeRuleOptions o;
  o.init_max = 65504;
  StatusOr<std::vector<KeptNode>> kept = ApplyRangeRules(m, PrecisionPolicy::Default(), {}, o);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  ASSERT_EQ(Names(*kept), std::vector<std::string>{"mm2"});
  EXPECT_EQ((*kept)[0].op_type, "MatMul");
  EXPECT_EQ((*kept)[0].reason, "--init-max 6.55e+04: constant 'w2' holds |x| = 1e+05");
  // The unnamed Relu got a name, so that a policy can keep it.
  int unnamed = 0;
  for (const ir::Node* n : m.graph->nodes()) unnamed += n->name().empty();
  EXPECT_EQ(unnamed, 0);
}

TEST(RangeRulesTest, DataMaxKeepsNodesWhoseValuesRunLarge) {
  ir::Model m = Model();
  RangeRuleOptions o;
  o.data_max = 512;
  // h1 = x w1 stays within |x| <= 64 * 3 = 192; h2 = 100 h1 passes 512; y is larger still.
  StatusOr<std::vector<KeptNode>> kept = ApplyRangeRules(m, PrecisionPolicy::Default(), Samples(), o);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  EXPECT_EQ(Names(*kept), (std::vector<std::string>{"scale", "mm2"}));
  EXPECT_EQ((*kept)[0].reason.rfind("--data-max 512: output 'h2' reaches |x| = ", 0), 0u) << (*kept)[0].reason;
  EXPECT_NE((*kept)[0].reason.find(" on the samples"), std::string::npos);
  EXPECT_EQ((*kept)[1].reason.rfind("--data-max 512: input 'h2' reaches", 0), 0u) << (*kept)[1].reason;
  // A node the policy keeps already is not listed again.
  PrecisionPolicy policy = PrecisionPolicy::Default();
  policy.SetOp("Mul", Precision::kKeep);
  kept = ApplyRangeRules(m, policy, Samples(), o);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  EXPECT_EQ(Names(*kept), std::vector<std::string>{"mm2"});
}

TEST(RangeRulesTest, MaxReductionDepthKeepsLongSums) {
  ir::Model m = Model();
  RangeRuleOptions o;
  o.max_reduction_depth = 32;  // both MatMuls sum 64 products per output (from x's and w2's static dims)
  StatusOr<std::vector<KeptNode>> kept = ApplyRangeRules(m, PrecisionPolicy::Default(), {}, o);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  EXPECT_EQ(Names(*kept), (std::vector<std::string>{"mm1", "mm2"}));
  EXPECT_EQ((*kept)[0].reason, "--max-reduction-depth 32: sums 64 products per output");
  o.max_reduction_depth = 64;
  kept = ApplyRangeRules(m, PrecisionPolicy::Default(), {}, o);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  EXPECT_TRUE(kept->empty());
}

TEST(RangeRulesTest, KeptNodesConvertAsFp32AndKeepTheOutputFinite) {
  ir::Model plain = Model();
  ASSERT_TRUE(ConvertModel(plain, {DType::kFloat16, PrecisionPolicy::Default(), true}).ok());
  StatusOr<std::vector<ir::Tensor>> out = testing::RunModel(plain, Samples()[0]);
  ASSERT_TRUE(out.ok()) << out.status().message();
  bool overflow = false;
  for (double v : testing::AsDoubles((*out)[0])) overflow = overflow || !std::isfinite(v);
  EXPECT_TRUE(overflow);  // fp16 cannot hold y

  ir::Model m = Model();
  RangeRuleOptions o;
  o.data_max = 512;
  o.init_max = 65504;
  StatusOr<std::vector<KeptNode>> kept = ApplyRangeRules(m, PrecisionPolicy::Default(), Samples(), o);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  ConvertOptions options{DType::kFloat16, PrecisionPolicy::Default(), true};
  for (const KeptNode& k : *kept) options.policy.AddKeepNodeName(k.name);
  ASSERT_TRUE(ConvertModel(m, options).ok());
  EXPECT_EQ(NodeNamed(*m.graph, "mm2")->output(0)->type().elem_type(), DType::kFloat32);
  EXPECT_EQ(NodeNamed(*m.graph, "mm1")->output(0)->type().elem_type(), DType::kFloat16);
  out = testing::RunModel(m, Samples()[0]);
  ASSERT_TRUE(out.ok()) << out.status().message();
  for (double v : testing::AsDoubles((*out)[0])) EXPECT_TRUE(std::isfinite(v));
}

TEST(RangeRulesTest, Errors) {
  ir::Model m = Model();
  RangeRuleOptions o;
  o.data_max = 512;
  EXPECT_EQ(ApplyRangeRules(m, PrecisionPolicy::Default(), {}, o).status().message(),
            "--data-max needs sample inputs (--data FILE)");
  o = RangeRuleOptions();
  o.init_max = -1;
  EXPECT_FALSE(ApplyRangeRules(m, PrecisionPolicy::Default(), {}, o).ok());
  o = RangeRuleOptions();
  o.data_max = NAN;
  EXPECT_FALSE(ApplyRangeRules(m, PrecisionPolicy::Default(), Samples(), o).ok());
  o = RangeRuleOptions();
  o.data_max = 1;
  ir::Tensor wrong = RandomTensor({4, 63}, 1);
  wrong.set_name("x");
  EXPECT_FALSE(ApplyRangeRules(m, PrecisionPolicy::Default(), {{wrong}}, o).ok());
}

}  // namespace
}  // namespace onnxamp::converter
