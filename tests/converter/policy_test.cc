// PrecisionPolicy: the default table, overrides by op and node, and the JSON form.
#include "converter/policy.h"

#include <gtest/gtest.h>

#include "runtime/ir/graph.h"

namespace onnxamp::converter {
namespace {

class PolicyTest : public ::testing::Test {
 protected:
  const ir::Node* Make(const std::string& op, const std::string& name, const std::string& domain = "") {
    ir::Value* out = g_.CreateValue(g_.UniqueName("v"));
    return g_.AddNode(op, {}, {out}, name, domain);
  }
  ir::Graph g_{"main"};
};

TEST_F(PolicyTest, DefaultTable) {
  const PrecisionPolicy p = PrecisionPolicy::Default();
  for (const char* op : {"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum"}) {
    EXPECT_EQ(p.Decide(*Make(op, "")).precision, Precision::kLow) << op;
  }
  for (const char* op : {"Softmax", "LogSoftmax", "ReduceMean", "ReduceSum", "LayerNormalization", "Exp", "Log", "Pow",
                         "CumSum", "Range", "TopK", "SoftmaxCrossEntropyLoss", "BatchNormalization"}) {
    EXPECT_EQ(p.Decide(*Make(op, "")).precision, Precision::kKeep) << op;
  }
  for (const char* op : {"Add", "Relu", "Reshape", "Resize", "Where"}) {
    EXPECT_EQ(p.Decide(*Make(op, "")).precision, Precision::kFollow) << op;
  }
  EXPECT_EQ(p.Decide(*Make("Softmax", "")).reason, "op table: Softmax");
  // Other domains follow, even with a listed op type.
  EXPECT_EQ(p.Decide(*Make("MatMul", "", "com.example")).precision, Precision::kFollow);
}

// The whole default table, as the op folders' OpInfos give it (runtime/ops/op_info.h).
TEST_F(PolicyTest, DefaultTableIsExactlyTheExpectedTable) {
  std::map<std::string, Precision> expected;
  for (const char* op : {"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum",
                         // Beyond DESIGN.md's table: the recurrent ops, which torch.autocast runs in FP16 (cuDNN).
                         "RNN", "GRU", "LSTM"}) {
    expected[op] = Precision::kLow;
  }
  for (const char* op :
       {"ReduceSum", "ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
        "ReduceSumSquare", "Softmax", "LogSoftmax", "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss",
        "LayerNormalization", "GroupNormalization", "InstanceNormalization", "LpNormalization", "BatchNormalization",
        "MeanVarianceNormalization", "Exp", "Log", "Pow", "Reciprocal", "Softplus", "CumSum", "Range", "TopK",
        // Beyond DESIGN.md's table: what torch.autocast keeps in FP32 of the ops added later.
        "Tan", "Asin", "Acos", "Sinh", "Cosh", "LRN", "GridSample",
        // Box coordinates (onnxconverter-common keeps RoiAlign in FP32) and calibrated quantization scales.
        "RoiAlign", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearMatMul", "QLinearConv",
        // Products of many pivots.
        "Det",
        // Sums over a whole signal.
        "DFT", "STFT",
        // A text pipeline's n-gram counts and weights.
        "TfIdfVectorizer"}) {
    expected[op] = Precision::kKeep;
  }
  EXPECT_EQ(PrecisionPolicy::Default().op_table(), expected);
}

TEST_F(PolicyTest, NodeOverridesComeBeforeTheTable) {
  PrecisionPolicy p = PrecisionPolicy::Default();
  ASSERT_TRUE(p.AddKeepNodePattern("head/.*").ok());
  ASSERT_TRUE(p.AddLowNodePattern("head/sm|body/.*").ok());
  p.AddKeepNodeName("body/exact");
  p.SetOp("Relu", Precision::kLow);
  EXPECT_EQ(p.Decide(*Make("MatMul", "head/proj")).precision, Precision::kKeep);  // keep wins over low
  EXPECT_EQ(p.Decide(*Make("MatMul", "head/proj")).reason, "--keep-node 'head/.*'");
  EXPECT_EQ(p.Decide(*Make("Softmax", "body/sm")).precision, Precision::kLow);
  EXPECT_EQ(p.Decide(*Make("MatMul", "body/exact")).precision, Precision::kKeep);
  EXPECT_EQ(p.Decide(*Make("Relu", "r")).precision, Precision::kLow);
  EXPECT_EQ(p.Decide(*Make("MatMul", "xhead/proj")).precision, Precision::kLow);  // whole-name match only
}

TEST_F(PolicyTest, InvalidPatternIsAnError) {
  PrecisionPolicy p;
  Status st = p.AddKeepNodePattern("a(");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'a('"), std::string::npos) << st.message();
}

TEST_F(PolicyTest, JsonRoundTrip) {
  auto p = PrecisionPolicy::FromJson(
      R"({"low": ["Relu"], "keep": ["MatMul"], "follow": ["Softmax"], "keep_nodes": ["n.*"], "default": "follow"})",
      "policy.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->Decide(*Make("Relu", "")).precision, Precision::kLow);
  EXPECT_EQ(p->Decide(*Make("MatMul", "")).precision, Precision::kKeep);
  EXPECT_EQ(p->Decide(*Make("Softmax", "")).precision, Precision::kFollow);
  EXPECT_EQ(p->Decide(*Make("Gemm", "")).precision, Precision::kLow);  // unlisted ops keep their default
  EXPECT_EQ(p->Decide(*Make("Gemm", "n1")).precision, Precision::kKeep);
  auto again = PrecisionPolicy::FromJson(p->ToJson(), "again");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->op_table(), p->op_table());
  EXPECT_EQ(again->ToJson(), p->ToJson());
}

TEST_F(PolicyTest, JsonErrorsNameKeyAndFile) {
  auto bad_key = PrecisionPolicy::FromJson(R"({"lo": ["Relu"]})", "p.json");
  ASSERT_FALSE(bad_key.ok());
  EXPECT_NE(bad_key.status().message().find("p.json"), std::string::npos);
  EXPECT_NE(bad_key.status().message().find("'lo'"), std::string::npos);
  auto bad_regex = PrecisionPolicy::FromJson(R"({"keep_nodes": ["(("]})", "p.json");
  ASSERT_FALSE(bad_regex.ok());
  EXPECT_NE(bad_regex.status().message().find("(("), std::string::npos);
  EXPECT_FALSE(PrecisionPolicy::FromJson("{", "p.json").ok());
  EXPECT_FALSE(PrecisionPolicy::FromJson(R"({"low": "MatMul"})", "p.json").ok());
  EXPECT_FALSE(PrecisionPolicy::FromJson(R"({"default": "fast"})", "p.json").ok());
  EXPECT_EQ(PrecisionPolicy::FromJsonFile("/nonexistent/policy.json").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace onnxamp::converter
