// OptimizeGraphForCuda (MatMul / Gemm + bias + activation -> FusedMatMul): which patterns fuse, with which inputs
// and attributes, and every case where fusing would change a result or a visible value, so it must not. Pure graph
// code: runs without a GPU. The fused kernel's numbers are checked against the unfused graph in linalg_test.cc.
#include "runtime/cuda/graph_rewrite.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ir/model.h"
#include "runtime/ir/verify.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "tests/cuda/graph_rewrite_test_util.h"
#include "tests/runtime/layout_test_util.h"

namespace onnxamp::cuda {
namespace {

using Dims = std::vector<int64_t>;

// Builds small graphs: typed inputs, initializers, Constant nodes and nodes by op type.
class Builder : public GraphBuilder {
 public:
  explicit Builder(DType dtype = DType::kFloat32, int64_t opset = 17) : GraphBuilder(dtype, {{"", opset}}) {}

  ir::Tensor Filled(const Dims& dims, double value) const {
    ir::Tensor t(dtype(), dims);
    const Status st = ops::DispatchFloat(dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      for (T& x : t.mutable_values<T>()) x = ops::Store<T>(static_cast<ops::ComputeType<T>>(value));
      return Status::Ok();
    });
    EXPECT_TRUE(st.ok());
    return t;
  }

  ir::Value* Init(const std::string& name, const Dims& dims, double value = 0.25) {
    ir::Value* v = g().CreateValue(name);
    ir::Shape shape;
    for (int64_t d : dims) shape.push_back(ir::Dim::Value(d));
    v->set_type(ir::ValueType::Tensor(dtype(), shape));
    g().SetInitializer(v, Filled(dims, value));
    return v;
  }

  // A Constant node holding a scalar.
  ir::Value* Scalar(const std::string& name, double value) {
    ir::Value* v = g().CreateValue(name);
    ir::Node* n = g().AddNode("Constant", {}, {v}, name);
    n->SetAttribute(ir::Attribute::TensorValue("value", Filled({}, value)));
    return v;
  }

  ir::Node* NodeOf(const ir::Value* v) const { return v->producer(); }

  // x -> 0.5 * x * (1 + erf(x / sqrt 2)) as models/transformer.onnx writes it (Div, Erf, Add, Mul, Mul).
  ir::Value* ErfGelu(ir::Value* x, double sqrt2 = std::sqrt(2.0), double one = 1.0, double half = 0.5) {
    ir::Value* d = Op("Div", {x, Scalar("sqrt2", sqrt2)}, "gelu_div");
    ir::Value* e = Op("Erf", {d}, "gelu_erf");
    ir::Value* a = Op("Add", {e, Scalar("one", one)}, "gelu_add");
    ir::Value* m = Op("Mul", {x, a}, "gelu_mul");
    return Op("Mul", {m, Scalar("half", half)}, "gelu_out");
  }
};

// Runs the rewrite and checks what always holds: the graph verifies and its outputs keep their names.
void Optimize(ir::Model& model) {
  std::vector<std::string> outputs;
  for (const ir::Value* v : model.graph->outputs()) outputs.push_back(v->name());
  exec::SessionOptions options;
  options.device = exec::Device::kCuda;
  ASSERT_TRUE(OptimizeGraphForCuda(model, options).ok());
  const Status verified = ir::Verify(model);
  ASSERT_TRUE(verified.ok()) << verified.message();
  std::vector<std::string> after;
  for (const ir::Value* v : model.graph->outputs()) after.push_back(v->name());
  EXPECT_EQ(after, outputs);
}

// The fused node: its op, domain, input names and activation; the model imports com.onnxamp.
void ExpectFused(const ir::Model& model, const std::vector<std::string>& inputs, const std::string& activation,
                 const std::string& output) {
  const ir::Node* f = FindOp(*model.graph, kFusedMatMulOp);
  ASSERT_NE(f, nullptr) << "no FusedMatMul node";
  EXPECT_EQ(f->domain(), kFusedMatMulDomain);
  std::vector<std::string> got;
  for (const ir::Value* v : f->inputs()) got.push_back(v ? v->name() : "");
  EXPECT_EQ(got, inputs);
  EXPECT_EQ(f->GetString("activation", ""), activation);
  EXPECT_EQ(f->output(0)->name(), output);
  EXPECT_EQ(model.OpsetVersion(kFusedMatMulDomain), 1);
}

void ExpectUnchanged(const ir::Model& model, const std::vector<std::string>& ops) {
  EXPECT_EQ(OpTypes(*model.graph), ops);
  EXPECT_EQ(model.OpsetVersion(kFusedMatMulDomain), 0);
}

class GraphRewriteTest : public ::testing::Test {};

// ---- patterns that fuse -----------------------------------------------------------------------------------------

TEST_F(GraphRewriteTest, MatMulBias) {
  Builder b;
  ir::Value* y =
      b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 3, 4}), b.Init("W", {4, 5})}, "mm"), b.Init("B", {5})}, "Y");
  b.Output(y);
  Optimize(b.model());
  EXPECT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp});
  ExpectFused(b.model(), {"X", "W", "B"}, "", "Y");
  EXPECT_EQ(b.g().FindValue("mm"), nullptr) << "the intermediate value is gone";
}

TEST_F(GraphRewriteTest, BiasFirstOperandAndRelu) {
  Builder b;
  ir::Value* mm = b.Op("MatMul", {b.Input("X", {3, 4}), b.Init("W", {4, 6})}, "mm");
  b.Output(b.Op("Relu", {b.Op("Add", {b.Init("B", {1, 6}), mm}, "add")}, "Y"));
  Optimize(b.model());
  EXPECT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp});
  ExpectFused(b.model(), {"X", "W", "B"}, "Relu", "Y");
}

TEST_F(GraphRewriteTest, ReluWithoutBias) {
  Builder b;
  b.Output(b.Op("Relu", {b.Op("MatMul", {b.Input("X", {3, 4}), b.Init("W", {4, 6})}, "mm")}, "Y"));
  Optimize(b.model());
  ExpectFused(b.model(), {"X", "W"}, "Relu", "Y");
}

TEST_F(GraphRewriteTest, ErfGeluPatternAsInTheTransformerModel) {
  Builder b;
  ir::Value* x =
      b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 8, 4}), b.Init("W", {4, 16})}, "mm"), b.Init("B", {16})}, "fc1");
  b.Output(b.ErfGelu(x));
  Optimize(b.model());
  // The Constant nodes of sqrt 2, 1 and 0.5 are read by nothing any more and go too.
  EXPECT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp});
  ExpectFused(b.model(), {"X", "W", "B"}, "Gelu", "gelu_out");
}

TEST_F(GraphRewriteTest, ErfGeluOtherAssociations) {
  // (x * 0.5) * (1 + erf(x * (1 / sqrt 2)))
  {
    Builder b;
    ir::Value* x =
        b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {3})}, "fc");
    ir::Value* h = b.Op("Mul", {b.Scalar("half", 0.5), x}, "h");
    ir::Value* e = b.Op("Erf", {b.Op("Mul", {x, b.Scalar("rsqrt2", std::sqrt(0.5))}, "d")}, "e");
    b.Output(b.Op("Mul", {h, b.Op("Add", {b.Scalar("one", 1.0), e}, "a")}, "Y"));
    Optimize(b.model());
    EXPECT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp});
    ExpectFused(b.model(), {"X", "W", "B"}, "Gelu", "Y");
  }
  // x * ((1 + erf(x / sqrt 2)) * 0.5)
  {
    Builder b;
    ir::Value* x =
        b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {3})}, "fc");
    ir::Value* a = b.Op(
        "Add", {b.Op("Erf", {b.Op("Div", {x, b.Scalar("s", std::sqrt(2.0))}, "d")}, "e"), b.Scalar("one", 1.0)}, "a");
    b.Output(b.Op("Mul", {x, b.Op("Mul", {a, b.Scalar("half", 0.5)}, "h")}, "Y"));
    Optimize(b.model());
    EXPECT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp});
    ExpectFused(b.model(), {"X", "W", "B"}, "Gelu", "Y");
  }
}

TEST_F(GraphRewriteTest, GeluOpBothApproximations) {
  for (const std::string approximate : {"none", "tanh"}) {
    Builder b(DType::kFloat32, 20);
    ir::Value* x =
        b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {3})}, "fc");
    ir::Value* y = b.Op("Gelu", {x}, "Y");
    b.NodeOf(y)->SetAttribute(ir::Attribute::String("approximate", approximate));
    b.Output(y);
    Optimize(b.model());
    ExpectFused(b.model(), {"X", "W", "B"}, approximate == "none" ? "Gelu" : "GeluTanh", "Y");
  }
}

TEST_F(GraphRewriteTest, GemmWithRowVectorCAndRelu) {
  Builder b;
  ir::Value* gemm = b.Op("Gemm", {b.Input("A", {3, 4}), b.Init("Bt", {5, 4}), b.Init("C", {5})}, "gemm");
  b.NodeOf(gemm)->SetAttribute(ir::Attribute::Int("transB", 1));
  b.NodeOf(gemm)->SetAttribute(ir::Attribute::Float("alpha", 0.5f));
  b.Output(b.Op("Relu", {gemm}, "Y"));
  Optimize(b.model());
  ExpectFused(b.model(), {"A", "Bt", "C"}, "Relu", "Y");
  const ir::Node* f = FindOp(b.g(), kFusedMatMulOp);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->GetInt("transB", 0), 1);
  EXPECT_EQ(f->GetInt("transA", 0), 0);
  EXPECT_EQ(f->GetFloat("alpha", 1.0f), 0.5f);
}

TEST_F(GraphRewriteTest, GemmWithoutCAndBiasAdd) {
  Builder b;
  ir::Value* gemm = b.Op("Gemm", {b.Input("A", {4, 3}), b.Init("B", {4, 5})}, "gemm");
  b.NodeOf(gemm)->SetAttribute(ir::Attribute::Int("transA", 1));
  b.Output(b.Op("Add", {gemm, b.Init("bias", {1, 5})}, "Y"));
  Optimize(b.model());
  ExpectFused(b.model(), {"A", "B", "bias"}, "", "Y");
  EXPECT_EQ(FindOp(b.g(), kFusedMatMulOp)->GetInt("transA", 0), 1);
}

TEST_F(GraphRewriteTest, HalfAndBFloat16ConstantsRoundedToTheirType) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    Builder b(dtype);
    ir::Value* x =
        b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {3})}, "fc");
    b.Output(b.ErfGelu(x));  // sqrt 2 stored in fp16 is 1.4140625
    Optimize(b.model());
    EXPECT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp}) << DTypeName(dtype);
  }
}

TEST_F(GraphRewriteTest, SharedConstantStaysForItsOtherReader) {
  Builder b;
  ir::Value* x =
      b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {3})}, "fc");
  ir::Value* gelu = b.ErfGelu(x);
  b.Output(gelu);
  // Another node reads the `one` constant.
  b.Output(b.Op("Add", {b.Input("Z", {3}), b.g().FindValue("one")}, "Z1"));
  Optimize(b.model());
  ExpectFused(b.model(), {"X", "W", "B"}, "Gelu", "gelu_out");
  EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{kFusedMatMulOp, "Constant", "Add"}));
}

TEST_F(GraphRewriteTest, BiasAsConstantNode) {
  Builder b;
  ir::Value* bias = b.g().CreateValue("B");
  b.g()
      .AddNode("Constant", {}, {bias}, "bias_const")
      ->SetAttribute(ir::Attribute::TensorValue("value", b.Filled({3}, 1)));
  b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), bias}, "Y"));
  Optimize(b.model());
  ExpectFused(b.model(), {"X", "W", "B"}, "", "Y");
  EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{"Constant", kFusedMatMulOp}));
}

TEST_F(GraphRewriteTest, TwoFusionsInOneGraph) {
  Builder b;
  ir::Value* h = b.Op(
      "Relu",
      {b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W1", {4, 8})}, "mm1"), b.Init("B1", {8})}, "add1")},
      "h");
  b.Output(b.Op("Add", {b.Op("MatMul", {h, b.Init("W2", {8, 3})}, "mm2"), b.Init("B2", {3})}, "Y"));
  Optimize(b.model());
  EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{kFusedMatMulOp, kFusedMatMulOp}));
}

// A graph output between the product and the activation: the product and bias fuse, the activation stays.
TEST_F(GraphRewriteTest, GraphOutputInTheMiddleStopsTheFusionThere) {
  Builder b;
  ir::Value* add =
      b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {3})}, "add");
  b.Output(add);
  b.Output(b.Op("Relu", {add}, "Y"));
  Optimize(b.model());
  EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{kFusedMatMulOp, "Relu"}));
  ExpectFused(b.model(), {"X", "W", "B"}, "", "add");
}

// ---- patterns that must not fuse --------------------------------------------------------------------------------

TEST_F(GraphRewriteTest, BiasNotConstant) {
  Builder b;
  b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Input("B", {3})}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Add"});
}

TEST_F(GraphRewriteTest, BiasInitializerOverridableByAnInput) {
  Builder b;
  ir::Value* bias = b.Init("B", {3});
  b.g().AddInput(bias);
  b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), bias}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Add"});
}

TEST_F(GraphRewriteTest, ProductReadTwice) {
  Builder b;
  ir::Value* mm = b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm");
  b.Output(b.Op("Add", {mm, b.Init("B", {3})}, "Y"));
  b.Output(b.Op("Neg", {mm}, "Z"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Add", "Neg"});
}

TEST_F(GraphRewriteTest, ProductIsAGraphOutput) {
  Builder b;
  ir::Value* mm = b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm");
  b.Output(mm);
  b.Output(b.Op("Relu", {b.Op("Add", {mm, b.Init("B", {3})}, "add")}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Add", "Relu"});
}

TEST_F(GraphRewriteTest, BiasNotARowVector) {
  Builder b;  // [M, N] bias: a full matrix, not one value per column
  b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {2, 3})}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Add"});
  Builder c;  // [N, 1]-like broadcast: a scalar bias of one value with N = 3
  c.Output(c.Op("Add", {c.Op("MatMul", {c.Input("X", {2, 4}), c.Init("W", {4, 3})}, "mm"), c.Init("B", {1})}, "Y"));
  Optimize(c.model());
  ExpectUnchanged(c.model(), {"MatMul", "Add"});
}

TEST_F(GraphRewriteTest, RankTwoBiasWithOneDimensionalA) {
  // [K] x [K, N] is [N]; adding a [1, N] bias makes [1, N]: the fused node would keep [N].
  Builder b;
  b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {1, 3})}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Add"});
  Builder c;  // a [N] bias keeps [N]: fuses
  c.Output(c.Op("Add", {c.Op("MatMul", {c.Input("X", {4}), c.Init("W", {4, 3})}, "mm"), c.Init("B", {3})}, "Y"));
  Optimize(c.model());
  ExpectFused(c.model(), {"X", "W", "B"}, "", "Y");
}

TEST_F(GraphRewriteTest, OneDimensionalBOrUnknownShapes) {
  Builder b;  // [M, K] x [K] drops N
  b.Output(b.Op("Relu", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4})}, "mm")}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Relu"});
  Builder c;  // B's shape unknown: N cannot be checked against the bias
  ir::Value* w = c.g().CreateValue("W");
  w->set_type(ir::ValueType::Tensor(DType::kFloat32));
  c.g().AddInput(w);
  c.Output(c.Op("Add", {c.Op("MatMul", {c.Input("X", {2, 4}), w}, "mm"), c.Init("B", {3})}, "Y"));
  Optimize(c.model());
  ExpectUnchanged(c.model(), {"MatMul", "Add"});
}

TEST_F(GraphRewriteTest, IntegerProduct) {
  Builder b(DType::kInt32);
  ir::Value* w = b.g().CreateValue("W");
  w->set_type(ir::ValueType::Tensor(DType::kInt32, ir::Shape{ir::Dim::Value(4), ir::Dim::Value(3)}));
  b.g().SetInitializer(w, ir::Tensor(DType::kInt32, {4, 3}));
  b.Output(b.Op("Relu", {b.Op("MatMul", {b.Input("X", {2, 4}), w}, "mm")}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Relu"});
}

TEST_F(GraphRewriteTest, GemmWithBetaOrFullC) {
  for (int variant = 0; variant < 2; ++variant) {
    Builder b;
    ir::Value* c = variant == 0 ? b.Init("C", {5}) : b.Init("C", {3, 5});
    ir::Value* gemm = b.Op("Gemm", {b.Input("A", {3, 4}), b.Init("B", {4, 5}), c}, "gemm");
    if (variant == 0) b.NodeOf(gemm)->SetAttribute(ir::Attribute::Float("beta", 2.0f));
    b.Output(b.Op("Relu", {gemm}, "Y"));
    Optimize(b.model());
    ExpectUnchanged(b.model(), {"Gemm", "Relu"});
  }
  Builder b;  // Gemm with a row-vector C and nothing after it: the Gemm kernel adds C itself
  b.Output(b.Op("Gemm", {b.Input("A", {3, 4}), b.Init("B", {4, 5}), b.Init("C", {5})}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"Gemm"});
}

TEST_F(GraphRewriteTest, ErfGeluWithAWrongConstant) {
  const struct {
    const char* what;
    double sqrt2, one, half;
  } cases[] = {{"divisor 2", 2.0, 1.0, 0.5},
               {"divisor 1.41", 1.41, 1.0, 0.5},
               {"one 2", std::sqrt(2.0), 2.0, 0.5},
               {"half 0.6", std::sqrt(2.0), 1.0, 0.6}};
  for (const auto& c : cases) {
    Builder b;
    ir::Value* x =
        b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {3})}, "fc");
    b.Output(b.ErfGelu(x, c.sqrt2, c.one, c.half));
    Optimize(b.model());
    // The product and bias still fuse (the bias Add's output is what the pattern reads); the activation stays.
    EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{kFusedMatMulOp, "Constant", "Div", "Erf", "Constant", "Add",
                                                        "Mul", "Constant", "Mul"}))
        << c.what;
    ExpectFused(b.model(), {"X", "W", "B"}, "", "fc");
  }
}

TEST_F(GraphRewriteTest, ErfGeluIntermediateReadTwice) {
  Builder b;
  ir::Value* x =
      b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {3})}, "fc");
  b.Output(b.ErfGelu(x));
  b.Output(b.g().FindValue("gelu_erf"));  // the Erf's output is visible
  Optimize(b.model());
  ExpectFused(b.model(), {"X", "W", "B"}, "", "fc");
  EXPECT_NE(FindOp(b.g(), "Erf"), nullptr);
}

TEST_F(GraphRewriteTest, OffWhenGraphOptimizationIsOffOrOpsetIsOld) {
  {
    Builder b;
    b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {3})}, "Y"));
    exec::SessionOptions off;
    off.device = exec::Device::kCuda;
    off.graph_optimization = exec::GraphOptimization::kNone;
    ASSERT_TRUE(OptimizeGraphForCuda(b.model(), off).ok());
    ExpectUnchanged(b.model(), {"MatMul", "Add"});
  }
  Builder b(DType::kFloat32, 6);
  b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {3})}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Add"});
}

// ---- channels-last layout --------------------------------------------------------------------------------------

// The session's passes for a CUDA session: the generic inference optimizer, then the CUDA rewrites.
ir::Model OptimizeForCudaSession(ir::Model model, bool channels_last = true) {
  exec::SessionOptions options;
  options.device = exec::Device::kCuda;
  options.channels_last = channels_last;
  EXPECT_TRUE(exec::OptimizeForInference(model, options).ok());
  EXPECT_TRUE(OptimizeGraphForCuda(model, options).ok());
  EXPECT_TRUE(ir::Verify(model).ok());
  return model;
}

TEST_F(GraphRewriteTest, HalfConvolutionChainsGoChannelsLast) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const ir::Model m = OptimizeForCudaSession(testing::ResNetLike(3, 16, 32, dtype));
    EXPECT_EQ(testing::Count(m, exec::kChannelsLastConvOp), 6) << DTypeName(dtype);
    EXPECT_EQ(testing::Count(m, exec::kChannelsLastMaxPoolOp), 1);
    EXPECT_EQ(testing::Count(m, exec::kChannelsLastGlobalAveragePoolOp), 1);
    EXPECT_EQ(testing::Count(m, "Transpose"), 1);  // the input, once
    EXPECT_EQ(m.OpsetVersion(exec::kInternalDomain), 1);
    EXPECT_EQ(testing::Count(m, exec::kBlockedConvOp), 0);  // the CPU's layout is not used on CUDA
  }
}

TEST_F(GraphRewriteTest, Float32ConvolutionsKeepThePlainLayout) {
  const ir::Model m = OptimizeForCudaSession(testing::ResNetLike(3, 16, 32, DType::kFloat32));
  EXPECT_EQ(testing::Count(m, exec::kChannelsLastConvOp), 0);
  EXPECT_EQ(testing::Count(m, exec::kBlockedConvOp), 0);
  EXPECT_EQ(testing::Count(m, exec::kFusedConvOp), 5);  // the 1x1 shortcut has no Relu or residual to fuse
  EXPECT_EQ(testing::Count(m, "Conv"), 1);
  EXPECT_EQ(testing::Count(m, "Transpose"), 0);
}

TEST_F(GraphRewriteTest, ChannelsLastCanBeTurnedOff) {
  const ir::Model m = OptimizeForCudaSession(testing::ResNetLike(3, 16, 32, DType::kFloat16), /*channels_last=*/false);
  EXPECT_EQ(testing::Count(m, exec::kChannelsLastConvOp), 0);
  EXPECT_EQ(testing::Count(m, exec::kFusedConvOp), 5);
}

}  // namespace
}  // namespace onnxamp::cuda
