// FuseBackwardGemms (training sessions on CUDA): the weight gradient's GEMM + Cast to float becomes one FusedMatMul
// with a float output, and the bias gradient's SumToShape (+ Cast) its second output; and every case where it must
// not fire. Pure graph code: runs without a GPU. The numbers of the fused node are checked against MatMul + Cast by
// the CPU reference kernel's tests (tests/runtime/ops/fused_matmul_test.cc) and on the GPU by
// tests/cuda_trainer/backward_gemm_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/cuda/graph_rewrite.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ir/model.h"
#include "runtime/ir/verify.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/graph_builder_test_util.h"

namespace onnxamp::cuda {
namespace {

using testing::FindOp;
using testing::GraphBuilder;
using testing::OpTypes;

using Dims = std::vector<int64_t>;

class Builder : public GraphBuilder {
 public:
  explicit Builder(DType dtype) : GraphBuilder(dtype, {{"", 17}, {exec::kInternalDomain, 1}}) {}

  ir::Value* Cast(ir::Value* x, const std::string& out, DType to = DType::kFloat32) {
    return Op("Cast", {x}, out, {ir::Attribute::Int("to", static_cast<int64_t>(to))});
  }
  // SumToShape(g, Shape(like)).
  ir::Value* SumTo(ir::Value* grad, ir::Value* like, const std::string& out) {
    return Op(ops::kSumToShapeOp, {grad, Op("Shape", {like}, out + "_shape")}, out, {}, exec::kInternalDomain);
  }
};

// Runs the CUDA passes of a session in `mode`; the graph must verify and keep its outputs.
void Optimize(ir::Model& model, exec::SessionMode mode = exec::SessionMode::kTraining) {
  std::vector<std::string> outputs;
  for (const ir::Value* v : model.graph->outputs()) outputs.push_back(v->name());
  // OptimizeGraphForCuda leaves a graph that does not verify alone: the test graphs must verify.
  const Status valid = ir::Verify(model);
  ASSERT_TRUE(valid.ok()) << valid.message();
  exec::SessionOptions options;
  options.device = exec::Device::kCuda;
  options.mode = mode;
  const Status st = OptimizeGraphForCuda(model, options);
  ASSERT_TRUE(st.ok()) << st.message();
  const Status verified = ir::Verify(model);
  ASSERT_TRUE(verified.ok()) << verified.message();
  std::vector<std::string> after;
  for (const ir::Value* v : model.graph->outputs()) after.push_back(v->name());
  EXPECT_EQ(after, outputs);
}

std::vector<std::string> Names(const std::vector<ir::Value*>& values) {
  std::vector<std::string> names;
  for (const ir::Value* v : values) names.push_back(v ? v->name() : "");
  return names;
}

// The backward pass of a Linear (Y = X W^T + b, as Gemm transB): dW = Cast(Gemm(dY, X, transA)), db =
// Cast(SumToShape(dY, Shape(b))).
struct Linear {
  explicit Linear(DType t, bool with_bias = true) : b(t) {
    dy = b.Input("dy", {-1, 4});
    x = b.Input("x", {-1, 6});
    dw16 = b.Op("Gemm", {dy, x}, "dw16", {ir::Attribute::Int("transA", 1)});
    dw = b.Cast(dw16, "dw");
    b.Output(dw);
    if (with_bias) {
      bias = b.Input("bias16", {4});
      db16 = b.SumTo(dy, bias, "db16");
      db = b.Cast(db16, "db");
      b.Output(db);
    }
  }
  Builder b;
  ir::Value *dy, *x, *dw16, *dw, *bias = nullptr, *db16 = nullptr, *db = nullptr;
};

TEST(FuseBackwardGemms, LinearWeightAndBiasGradientsBecomeOneFp32Gemm) {
  for (const DType t : {DType::kFloat16, DType::kBFloat16}) {
    Linear l(t);
    Optimize(l.b.model());
    ASSERT_EQ(OpTypes(l.b.g()), std::vector<std::string>{kFusedMatMulOp}) << DTypeName(t);
    const ir::Node* f = FindOp(l.b.g(), kFusedMatMulOp);
    EXPECT_EQ(f->domain(), kFusedMatMulDomain);
    EXPECT_EQ(Names(f->inputs()), (std::vector<std::string>{"dy", "x"}));
    EXPECT_EQ(Names(f->outputs()), (std::vector<std::string>{"dw", "db"}));
    EXPECT_EQ(f->GetInt("transA", 0), 1);
    EXPECT_EQ(f->GetInt("output_type", 0), static_cast<int64_t>(DType::kFloat32));
    EXPECT_EQ(f->GetString("bias_grad", ""), "A");
    EXPECT_EQ(l.b.model().OpsetVersion(kFusedMatMulDomain), 1);
    // The Shape node that fed only the SumToShape went with it; the bias input stays.
    EXPECT_NE(l.b.g().FindValue("bias16"), nullptr);
  }
}

TEST(FuseBackwardGemms, InferenceSessionsAndGraphOptimizationOffLeaveItAlone) {
  {
    Linear l(DType::kFloat16);
    Optimize(l.b.model(), exec::SessionMode::kInference);
    EXPECT_EQ(FindOp(l.b.g(), kFusedMatMulOp), nullptr);
  }
  Linear l(DType::kFloat16);
  exec::SessionOptions options;
  options.device = exec::Device::kCuda;
  options.mode = exec::SessionMode::kTraining;
  options.graph_optimization = exec::GraphOptimization::kNone;
  ASSERT_TRUE(OptimizeGraphForCuda(l.b.model(), options).ok());
  EXPECT_EQ(FindOp(l.b.g(), kFusedMatMulOp), nullptr);
}

TEST(FuseBackwardGemms, Fp32TrainingFusesTheBiasGradientOnly) {
  // FP32: no Casts; dW is the Gemm's own output, db the SumToShape's.
  Builder b(DType::kFloat32);
  ir::Value* dy = b.Input("dy", {-1, 4});
  b.Output(b.Op("Gemm", {dy, b.Input("x", {-1, 6})}, "dw", {ir::Attribute::Int("transA", 1)}));
  b.Output(b.SumTo(dy, b.Input("bias", {4}), "db"));
  Optimize(b.model());
  ASSERT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp});
  const ir::Node* f = FindOp(b.g(), kFusedMatMulOp);
  EXPECT_EQ(Names(f->outputs()), (std::vector<std::string>{"dw", "db"}));
  EXPECT_EQ(f->FindAttribute("output_type"), nullptr);
  EXPECT_EQ(f->GetString("bias_grad", ""), "A");
}

TEST(FuseBackwardGemms, MatMulFormSumsBOverItsRows) {
  // Y = X W + b with W [6, 4]: dW = MatMul(X^T, dY), db = SumToShape(dY, [4]).
  Builder b(DType::kFloat16);
  ir::Value* xt = b.Input("xt", {6, 8});
  ir::Value* dy = b.Input("dy", {8, 4});
  ir::Value* bias = b.Input("bias16", {4});
  b.Output(b.Cast(b.Op("MatMul", {xt, dy}, "dw16"), "dw"));
  b.Output(b.Cast(b.SumTo(dy, bias, "db16"), "db"));
  Optimize(b.model());
  ASSERT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp});
  const ir::Node* f = FindOp(b.g(), kFusedMatMulOp);
  EXPECT_EQ(f->GetString("bias_grad", ""), "B");
  EXPECT_EQ(f->FindAttribute("transA"), nullptr);
  EXPECT_EQ(Names(f->outputs()), (std::vector<std::string>{"dw", "db"}));
}

// A Linear on [batch, seq, features] (MatMul + Add): the weight gradient is one GEMM over the flattened rows,
// Gemm(Flatten(X, -1), Flatten(dY, -1), transA), and the bias gradient SumToShape(dY, [N]) of the batched dY.
TEST(FuseBackwardGemms, BiasGradientOfTheBatchedGradientFusesThroughItsFlatten) {
  Builder b(DType::kFloat16);
  ir::Value* x = b.Input("x", {-1, 5, 6});
  ir::Value* dy = b.Input("dy", {-1, 5, 4});
  ir::Value* bias = b.Input("bias16", {4});
  const std::vector<ir::Attribute> last = {ir::Attribute::Int("axis", -1)};
  ir::Value* x2 = b.Op("Flatten", {x}, "x2", last);
  ir::Value* dy2 = b.Op("Flatten", {dy}, "dy2", last);
  b.Output(b.Cast(b.Op("Gemm", {x2, dy2}, "dw16", {ir::Attribute::Int("transA", 1)}), "dw"));
  b.Output(b.Cast(b.SumTo(dy, bias, "db16"), "db"));
  Optimize(b.model());
  EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{"Flatten", "Flatten", kFusedMatMulOp}));
  const ir::Node* f = FindOp(b.g(), kFusedMatMulOp);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->GetString("bias_grad", ""), "B");
  EXPECT_EQ(f->GetInt("output_type", 0), static_cast<int64_t>(DType::kFloat32));
  EXPECT_EQ(Names(f->outputs()), (std::vector<std::string>{"dw", "db"}));
}

// Flatten at another axis gives other columns than dY's last dim: the bias gradient stays a SumToShape.
TEST(FuseBackwardGemms, FlattenAtAnotherAxisKeepsTheBiasGradientApart) {
  Builder b(DType::kFloat16);
  ir::Value* x = b.Input("x", {-1, 5, 6});
  ir::Value* dy = b.Input("dy", {-1, 5, 4});
  ir::Value* bias = b.Input("bias16", {4});
  const std::vector<ir::Attribute> axis1 = {ir::Attribute::Int("axis", 1)};
  ir::Value* x2 = b.Op("Flatten", {x}, "x2", axis1);
  ir::Value* dy2 = b.Op("Flatten", {dy}, "dy2", axis1);
  b.Output(b.Cast(b.Op("Gemm", {x2, dy2}, "dw16", {ir::Attribute::Int("transA", 1)}), "dw"));
  b.Output(b.Cast(b.SumTo(dy, bias, "db16"), "db"));
  Optimize(b.model());
  const ir::Node* f = FindOp(b.g(), kFusedMatMulOp);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->FindAttribute("bias_grad"), nullptr);
  EXPECT_NE(FindOp(b.g(), ops::kSumToShapeOp), nullptr);
}

TEST(FuseBackwardGemms, BatchedMatMulGetsTheFloatOutputButNoBiasGradient) {
  Builder b(DType::kFloat16);
  ir::Value* a = b.Input("a", {2, 8, 6});
  ir::Value* w = b.Input("w", {6, 4});
  ir::Value* y = b.Op("MatMul", {a, w}, "y16");
  b.Output(b.Cast(y, "y"));
  ir::Value* bias = b.Input("bias16", {4});
  b.Output(b.Cast(b.SumTo(w, bias, "db16"), "db"));
  Optimize(b.model());
  EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{kFusedMatMulOp, "Shape", ops::kSumToShapeOp, "Cast"}));
  const ir::Node* f = FindOp(b.g(), kFusedMatMulOp);
  EXPECT_EQ(f->GetInt("output_type", 0), static_cast<int64_t>(DType::kFloat32));
  EXPECT_EQ(f->FindAttribute("bias_grad"), nullptr);
  EXPECT_EQ(f->outputs().size(), 1u);
}

TEST(FuseBackwardGemms, TheFp16ResultReadElsewhereKeepsItsTypeButStillTakesTheBiasGradient) {
  Linear l(DType::kFloat16);
  l.b.Output(l.b.Op("Identity", {l.dw16}, "dw16_copy"));
  Optimize(l.b.model());
  const ir::Node* f = FindOp(l.b.g(), kFusedMatMulOp);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->FindAttribute("output_type"), nullptr);
  // The bias gradient in fp16 (the SumToShape's own output), still cast by the Cast after it.
  EXPECT_EQ(f->GetString("bias_grad", ""), "A");
  EXPECT_EQ(Names(f->outputs()), (std::vector<std::string>{"dw16", "db16"}));
  EXPECT_EQ(OpTypes(l.b.g()), (std::vector<std::string>{kFusedMatMulOp, "Cast", "Cast", "Identity"}));
}

TEST(FuseBackwardGemms, DoesNotFireWhereTheResultWouldChangeOrBeSeen) {
  {
    // The fp16 product is a graph output.
    Linear l(DType::kFloat16, false);
    l.b.Output(l.dw16);
    Optimize(l.b.model());
    EXPECT_EQ(OpTypes(l.b.g()), (std::vector<std::string>{"Gemm", "Cast"}));
  }
  {
    // A Cast to double, not float.
    Builder b(DType::kFloat16);
    ir::Value* y = b.Op("Gemm", {b.Input("a", {3, 5}), b.Input("w", {5, 2})}, "y16");
    b.Output(b.Cast(y, "y", DType::kFloat64));
    Optimize(b.model());
    EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{"Gemm", "Cast"}));
  }
  {
    // A float product cast to float (a no-op Cast) is not a widening.
    Builder b(DType::kFloat32);
    ir::Value* y = b.Op("MatMul", {b.Input("a", {3, 5}), b.Input("w", {5, 2})}, "y32");
    b.Output(b.Cast(y, "y"));
    Optimize(b.model());
    EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{"MatMul", "Cast"}));
  }
  {
    // Gemm with C.
    Builder b(DType::kFloat16);
    ir::Value* y = b.Op("Gemm", {b.Input("a", {3, 5}), b.Input("w", {5, 2}), b.Input("c", {2})}, "y16");
    b.Output(b.Cast(y, "y"));
    Optimize(b.model());
    EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{"Gemm", "Cast"}));
  }
  {
    // dY as A without transA: the GEMM sums over dY's columns, not its rows, so the bias gradient stays apart.
    Builder b(DType::kFloat16);
    ir::Value* dy = b.Input("dy", {8, 4});
    b.Output(b.Cast(b.Op("Gemm", {dy, b.Input("w", {4, 6})}, "dx16"), "dx"));
    b.Output(b.Cast(b.SumTo(dy, b.Input("bias16", {4}), "db16"), "db"));
    Optimize(b.model());
    EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{kFusedMatMulOp, "Shape", ops::kSumToShapeOp, "Cast"}));
    EXPECT_EQ(FindOp(b.g(), kFusedMatMulOp)->FindAttribute("bias_grad"), nullptr);
  }
  {
    // A bias gradient whose fp16 sum something else reads too: the product went to float, the sum cannot.
    Linear l(DType::kFloat16);
    l.b.Output(l.b.Op("Identity", {l.db16}, "db16_copy"));
    Optimize(l.b.model());
    const ir::Node* f = FindOp(l.b.g(), kFusedMatMulOp);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->FindAttribute("bias_grad"), nullptr);
    EXPECT_EQ(f->outputs().size(), 1u);
    EXPECT_NE(FindOp(l.b.g(), ops::kSumToShapeOp), nullptr);
  }
  {
    // A SumToShape to [1] of a dY whose columns are not declared would sum the columns too.
    Builder b(DType::kFloat16);
    ir::Value* dy = b.Input("dy", {8, 1});
    dy->set_type(ir::ValueType::Tensor(DType::kFloat16, std::nullopt));
    ir::Value* one = b.Input("one16", {1});
    b.Output(b.Cast(b.Op("Gemm", {dy, b.Input("x", {8, 6})}, "dw16", {ir::Attribute::Int("transA", 1)}), "dw"));
    b.Output(b.Cast(b.SumTo(dy, one, "db16"), "db"));
    Optimize(b.model());
    EXPECT_EQ(FindOp(b.g(), kFusedMatMulOp)->FindAttribute("bias_grad"), nullptr);
  }
}

// FuseActivationGradients: the forward layer Y = ReLU(X W^T + b) as the session optimizer fuses it, and the backward
// dX = ReluGrad(dZ V, Y) of the layer after it.
struct ReluLayer {
  explicit ReluLayer(DType t, const char* grad_op = "Gemm", Dims v_dims = {3, 4}) : b(t) {
    x = b.Input("x", {-1, 6});
    y = b.Op(kFusedMatMulOp, {x, b.Input("w", {4, 6}), b.Input("bias", {4})}, "y",
             {ir::Attribute::Int("transB", 1), ir::Attribute::String("activation", "Relu")}, kFusedMatMulDomain);
    y->set_type(ir::ValueType::Tensor(t, ir::Shape{ir::Dim::Param("batch"), ir::Dim::Value(4)}));
    dz = b.Input("dz", v_dims.size() == 2 ? Dims{-1, 3} : Dims{2, 5, 3});
    v = b.Input("v", v_dims);
    g = b.Op(grad_op, {dz, v}, "g");
    dx = b.Op(ops::kReluGradOp, {g, y}, "dx", {}, exec::kInternalDomain);
    b.Output(dx);
  }
  Builder b;
  ir::Value *x, *y, *dz, *v, *g, *dx;
};

TEST(FuseActivationGradients, TheProductBeforeAReluGradAppliesTheForwardMask) {
  for (const DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (const char* op : {"Gemm", "MatMul"}) {
      const std::string what = std::string(DTypeName(t)) + " " + op;
      ReluLayer l(t, op);
      Optimize(l.b.model());
      ASSERT_EQ(OpTypes(l.b.g()), (std::vector<std::string>{kFusedMatMulOp, kFusedMatMulOp})) << what;
      const ir::Node* forward = l.y->producer();
      const ir::Node* backward = l.dx->producer();
      EXPECT_EQ(Names(forward->outputs()), (std::vector<std::string>{"y", "y_relu_mask"})) << what;
      EXPECT_EQ(forward->GetInt("relu_mask", 0), 1) << what;
      const ir::Value* mask = forward->output(1);
      EXPECT_EQ(mask->type().elem_type(), DType::kUint8) << what;
      ASSERT_TRUE(mask->type().shape().has_value()) << what;
      // [rows, 16]: the batch is symbolic, four columns take one 128-bit row.
      EXPECT_EQ(mask->type().shape()->size(), 2u) << what;
      EXPECT_FALSE((*mask->type().shape())[0].is_value()) << what;
      EXPECT_EQ((*mask->type().shape())[1], ir::Dim::Value(16)) << what;
      EXPECT_EQ(Names(backward->inputs()), (std::vector<std::string>{"dz", "v", "", "y_relu_mask"})) << what;
      EXPECT_EQ(Names(backward->outputs()), (std::vector<std::string>{"dx"})) << what;
      EXPECT_EQ(backward->GetString("activation_grad", ""), "Relu") << what;
      EXPECT_EQ(backward->domain(), kFusedMatMulDomain) << what;
      EXPECT_EQ(l.b.g().FindValue("g"), nullptr) << what;
    }
  }
}

TEST(FuseActivationGradients, TwoGradientsOfOneReluShareItsMask) {
  ReluLayer l(DType::kFloat16);
  ir::Value* g2 = l.b.Op("Gemm", {l.b.Input("dz2", {-1, 5}), l.b.Input("v2", {4, 5})}, "g2",
                         {ir::Attribute::Int("transB", 1), ir::Attribute::Float("alpha", 0.5f)});
  l.b.Output(l.b.Op(ops::kReluGradOp, {g2, l.y}, "dx2", {}, exec::kInternalDomain));
  Optimize(l.b.model());
  ASSERT_EQ(OpTypes(l.b.g()), (std::vector<std::string>{kFusedMatMulOp, kFusedMatMulOp, kFusedMatMulOp}));
  const ir::Node* second = l.b.g().FindValue("dx2")->producer();
  EXPECT_EQ(Names(second->inputs()), (std::vector<std::string>{"dz2", "v2", "", "y_relu_mask"}));
  EXPECT_EQ(second->GetInt("transB", 0), 1);
  EXPECT_EQ(second->GetFloat("alpha", 1), 0.5f);
  EXPECT_EQ(l.y->producer()->outputs().size(), 2u);
}

TEST(FuseActivationGradients, DoesNotFireWhereTheMaskCannotStandIn) {
  const std::vector<std::string> unchanged = {kFusedMatMulOp, "Gemm", ops::kReluGradOp};
  {
    // The unmasked product is seen.
    ReluLayer l(DType::kFloat16);
    l.b.Output(l.g);
    Optimize(l.b.model());
    EXPECT_EQ(OpTypes(l.b.g()), unchanged);
  }
  {
    // A batched B: not one GEMM over Y's rows.
    ReluLayer l(DType::kFloat16, "MatMul", {2, 3, 4});
    Optimize(l.b.model());
    EXPECT_EQ(OpTypes(l.b.g()), (std::vector<std::string>{kFusedMatMulOp, "MatMul", ops::kReluGradOp}));
  }
  {
    // Gemm with transA or with C.
    for (bool with_c : {false, true}) {
      ReluLayer l(DType::kFloat16);
      ir::Node* gemm = l.g->producer();
      if (with_c) {
        gemm->AddInput(l.b.Input("c", {4}));
      } else {
        gemm->SetAttribute(ir::Attribute::Int("transA", 1));
      }
      Optimize(l.b.model());
      EXPECT_EQ(OpTypes(l.b.g()), unchanged) << with_c;
    }
  }
  {
    // Y from a forward product with another activation, or with a float output.
    for (const char* change : {"Gelu", "output_type"}) {
      ReluLayer l(DType::kFloat16);
      ir::Node* forward = l.y->producer();
      if (std::string(change) == "Gelu") {
        forward->SetAttribute(ir::Attribute::String("activation", "Gelu"));
      } else {
        forward->SetAttribute(ir::Attribute::Int("output_type", 1));
      }
      Optimize(l.b.model());
      EXPECT_EQ(OpTypes(l.b.g()), unchanged) << change;
    }
  }
  {
    // Inference sessions run no training pass.
    ReluLayer l(DType::kFloat16);
    Optimize(l.b.model(), exec::SessionMode::kInference);
    EXPECT_EQ(OpTypes(l.b.g()), unchanged);
  }
}

// GeluGrad(dZ V, X) of the tanh form becomes the product with activation_grad "GeluTanh" reading X (no forward node
// involved); the erf form, whose derivative cuBLASLt has no epilogue for, stays.
TEST(FuseActivationGradients, TanhGeluGradientGoesIntoTheProduct) {
  for (const char* approximate : {"tanh", "none"}) {
    Builder b(DType::kFloat16);
    ir::Value* x = b.Input("x", {-1, 4});
    ir::Value* g = b.Op("Gemm", {b.Input("dz", {-1, 3}), b.Input("v", {4, 3})}, "g", {ir::Attribute::Int("transB", 1)});
    b.Output(b.Op(ops::kGeluGradOp, {g, x}, "dx", {ir::Attribute::String("approximate", approximate)},
                  exec::kInternalDomain));
    Optimize(b.model());
    if (std::string(approximate) == "none") {
      EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{"Gemm", ops::kGeluGradOp}));
      continue;
    }
    ASSERT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp});
    const ir::Node* f = FindOp(b.g(), kFusedMatMulOp);
    EXPECT_EQ(Names(f->inputs()), (std::vector<std::string>{"dz", "v", "", "x"}));
    EXPECT_EQ(Names(f->outputs()), (std::vector<std::string>{"dx"}));
    EXPECT_EQ(f->GetString("activation_grad", ""), "GeluTanh");
    EXPECT_EQ(f->GetInt("transB", 0), 1);
  }
  {
    // The product is seen elsewhere: it stays.
    Builder b(DType::kFloat16);
    ir::Value* g = b.Op("MatMul", {b.Input("dz", {-1, 3}), b.Input("v", {3, 4})}, "g");
    b.Output(b.Op(ops::kGeluGradOp, {g, b.Input("x", {-1, 4})}, "dx", {ir::Attribute::String("approximate", "tanh")},
                  exec::kInternalDomain));
    b.Output(g);
    Optimize(b.model());
    EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{"MatMul", ops::kGeluGradOp}));
  }
}

}  // namespace
}  // namespace onnxamp::cuda
