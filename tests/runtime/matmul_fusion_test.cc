// The session optimizer's GEMM fusion (exec::FuseMatMulEpilogues: MatMul / Gemm + scale + bias + activation ->
// FusedMatMul): which patterns fuse, with which inputs and attributes, and every case where fusing would change a
// result or a visible value, so it must not; and that sessions on the fused graph compute what the unfused one does.
// The fused kernels' numbers are checked against the reference loop in ops/fused_matmul_test.cc (CPU) and
// tests/cuda/linalg_test.cc (CUDA).

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/session.h"
#include "runtime/ir/model.h"
#include "runtime/ir/verify.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/matmul/fused_matmul.h"
#include "tests/runtime/graph_builder_test_util.h"
#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::testing {
namespace {

using ops::kFusedMatMulDomain;
using ops::kFusedMatMulOp;

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

  // A Constant node holding a scalar (of the builder's type, or float).
  ir::Value* Scalar(const std::string& name, double value, bool as_float = false) {
    ir::Value* v = g().CreateValue(name);
    ir::Node* n = g().AddNode("Constant", {}, {v}, name);
    ir::Tensor t = Filled({}, value);
    if (as_float) {
      t = ir::Tensor(DType::kFloat32, {});
      t.mutable_values<float>()[0] = static_cast<float>(value);
    }
    n->SetAttribute(ir::Attribute::TensorValue("value", std::move(t)));
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

  // x -> 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + c * x^3))) as exporters write it. Form 0: PyTorch's export of
  // gelu(approximate="tanh") before opset 20 (x * (x * x), constants first, (x * s) * 0.5 as 0.5 * (x * s)); form 1:
  // GPT-2's gelu_new (0.5 * x first, Pow(x, 3), constants second, (0.5 x) * s); form 2: (x * x) * x and x * (s * 0.5).
  ir::Value* TanhGelu(ir::Value* x, int form, double c = 0.044715) {
    ir::Value* cube = form == 0   ? Op("Mul", {x, Op("Mul", {x, x}, "gelu_sq")}, "gelu_cube")
                      : form == 1 ? Op("Pow", {x, Scalar("three", 3.0)}, "gelu_cube")
                                  : Op("Mul", {Op("Mul", {x, x}, "gelu_sq"), x}, "gelu_cube");
    ir::Value* cubic =
        form == 0 ? Op("Mul", {Scalar("c", c), cube}, "gelu_cubic") : Op("Mul", {cube, Scalar("c", c)}, "gelu_cubic");
    ir::Value* inner = Op("Add", {x, cubic}, "gelu_inner");
    const double k = std::sqrt(2.0 / M_PI);
    ir::Value* scaled = form == 0 ? Op("Mul", {Scalar("k", k), inner}, "gelu_scaled")
                                  : Op("Mul", {inner, Scalar("k", k)}, "gelu_scaled");
    ir::Value* t = Op("Tanh", {scaled}, "gelu_tanh");
    ir::Value* s =
        form == 0 ? Op("Add", {Scalar("one", 1.0), t}, "gelu_sum") : Op("Add", {t, Scalar("one", 1.0)}, "gelu_sum");
    if (form == 0) return Op("Mul", {Scalar("half", 0.5), Op("Mul", {x, s}, "gelu_xs")}, "gelu_out");
    if (form == 1) return Op("Mul", {Op("Mul", {x, Scalar("half", 0.5)}, "gelu_hx"), s}, "gelu_out");
    return Op("Mul", {x, Op("Mul", {s, Scalar("half", 0.5)}, "gelu_hs")}, "gelu_out");
  }
};

// Runs a CPU session's optimizer and checks what always holds: the graph verifies and its outputs keep their names.
void Optimize(ir::Model& model) {
  std::vector<std::string> outputs;
  for (const ir::Value* v : model.graph->outputs()) outputs.push_back(v->name());
  exec::SessionOptions options;
  ASSERT_TRUE(exec::OptimizeForInference(model, options).ok());
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

class MatMulFusion : public ::testing::Test {};

// ---- patterns that fuse -----------------------------------------------------------------------------------------

TEST_F(MatMulFusion, MatMulBias) {
  Builder b;
  ir::Value* y =
      b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 3, 4}), b.Init("W", {4, 5})}, "mm"), b.Init("B", {5})}, "Y");
  b.Output(y);
  Optimize(b.model());
  EXPECT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp});
  ExpectFused(b.model(), {"X", "W", "B"}, "", "Y");
  EXPECT_EQ(b.g().FindValue("mm"), nullptr) << "the intermediate value is gone";
}

TEST_F(MatMulFusion, BiasFirstOperandAndRelu) {
  Builder b;
  ir::Value* mm = b.Op("MatMul", {b.Input("X", {3, 4}), b.Init("W", {4, 6})}, "mm");
  b.Output(b.Op("Relu", {b.Op("Add", {b.Init("B", {1, 6}), mm}, "add")}, "Y"));
  Optimize(b.model());
  EXPECT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp});
  ExpectFused(b.model(), {"X", "W", "B"}, "Relu", "Y");
}

TEST_F(MatMulFusion, ReluWithoutBias) {
  Builder b;
  b.Output(b.Op("Relu", {b.Op("MatMul", {b.Input("X", {3, 4}), b.Init("W", {4, 6})}, "mm")}, "Y"));
  Optimize(b.model());
  ExpectFused(b.model(), {"X", "W"}, "Relu", "Y");
}

TEST_F(MatMulFusion, ErfGeluPatternAsInTheTransformerModel) {
  Builder b;
  ir::Value* x =
      b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 8, 4}), b.Init("W", {4, 16})}, "mm"), b.Init("B", {16})}, "fc1");
  b.Output(b.ErfGelu(x));
  Optimize(b.model());
  // The Constant nodes of sqrt 2, 1 and 0.5 are read by nothing any more and go too.
  EXPECT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp});
  ExpectFused(b.model(), {"X", "W", "B"}, "Gelu", "gelu_out");
}

TEST_F(MatMulFusion, TanhGeluFormsAsExportersWriteThem) {
  for (int form = 0; form < 3; ++form) {
    Builder b;
    ir::Value* x =
        b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 8, 4}), b.Init("W", {4, 16})}, "mm"), b.Init("B", {16})}, "fc1");
    b.Output(b.TanhGelu(x, form));
    Optimize(b.model());
    EXPECT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp}) << "form " << form;
    ExpectFused(b.model(), {"X", "W", "B"}, "GeluTanh", "gelu_out");
  }
}

TEST_F(MatMulFusion, TanhGeluThatDiffersOrIsReadInside) {
  {  // 0.0447 is not the cubic coefficient
    Builder b;
    ir::Value* x = b.Op("MatMul", {b.Input("X", {3, 4}), b.Init("W", {4, 6})}, "mm");
    b.Output(b.TanhGelu(x, 1, 0.0447));
    Optimize(b.model());
    EXPECT_NE(FindOp(b.g(), "Tanh"), nullptr);
    EXPECT_EQ(FindOp(b.g(), kFusedMatMulOp), nullptr);
  }
  {  // the tanh is a graph output too
    Builder b;
    ir::Value* x = b.Op("MatMul", {b.Input("X", {3, 4}), b.Init("W", {4, 6})}, "mm");
    b.Output(b.TanhGelu(x, 0));
    b.Output(b.g().FindValue("gelu_tanh"));
    Optimize(b.model());
    EXPECT_NE(FindOp(b.g(), "Tanh"), nullptr);
    EXPECT_EQ(FindOp(b.g(), kFusedMatMulOp), nullptr);
  }
}

TEST_F(MatMulFusion, ErfGeluOtherAssociations) {
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

TEST_F(MatMulFusion, GeluOpBothApproximations) {
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

TEST_F(MatMulFusion, GemmWithRowVectorCAndRelu) {
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

TEST_F(MatMulFusion, GemmWithoutCAndBiasAdd) {
  Builder b;
  ir::Value* gemm = b.Op("Gemm", {b.Input("A", {4, 3}), b.Init("B", {4, 5})}, "gemm");
  b.NodeOf(gemm)->SetAttribute(ir::Attribute::Int("transA", 1));
  b.Output(b.Op("Add", {gemm, b.Init("bias", {1, 5})}, "Y"));
  Optimize(b.model());
  ExpectFused(b.model(), {"A", "B", "bias"}, "", "Y");
  EXPECT_EQ(FindOp(b.g(), kFusedMatMulOp)->GetInt("transA", 0), 1);
}

TEST_F(MatMulFusion, HalfAndBFloat16ConstantsRoundedToTheirType) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    Builder b(dtype);
    ir::Value* x =
        b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {3})}, "fc");
    b.Output(b.ErfGelu(x));  // sqrt 2 stored in fp16 is 1.4140625
    Optimize(b.model());
    EXPECT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp}) << DTypeName(dtype);
  }
}

TEST_F(MatMulFusion, SharedConstantStaysForItsOtherReader) {
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

TEST_F(MatMulFusion, BiasAsConstantNode) {
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

TEST_F(MatMulFusion, TwoFusionsInOneGraph) {
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
TEST_F(MatMulFusion, GraphOutputInTheMiddleStopsTheFusionThere) {
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

// A bias the graph computes could have any shape at run time: only constants, graph inputs (checked against their
// declared dims when bound) and casts of them are row vectors for sure.
TEST_F(MatMulFusion, BiasComputedByTheGraph) {
  Builder b;
  ir::Value* bias = b.Op("Relu", {b.Input("B", {3})}, "bias");
  b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), bias}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"Relu", "MatMul", "Add"});
}

TEST_F(MatMulFusion, BiasInputWithASymbolicDim) {
  Builder b;
  b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Input("B", {-1})}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Add"});
}

// ---- non-constant operands that fuse (a training graph's parameters are graph inputs) ---------------------------

TEST_F(MatMulFusion, BiasGraphInputWithStaticDims) {
  Builder b;
  b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Input("B", {3})}, "Y"));
  Optimize(b.model());
  ExpectFused(b.model(), {"X", "W", "B"}, "", "Y");
}

TEST_F(MatMulFusion, BiasInitializerOverridableByAnInput) {
  Builder b;
  ir::Value* bias = b.Init("B", {3});
  b.g().AddInput(bias);
  b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), bias}, "Y"));
  Optimize(b.model());
  ExpectFused(b.model(), {"X", "W", "B"}, "", "Y");
}

// Mixed precision training casts the FP32 parameters: weight and bias are Casts of graph inputs, whose outputs
// declare nothing; the type comes from the Casts' `to`, N from the weight's input.
TEST_F(MatMulFusion, WeightAndBiasCastFromGraphInputs) {
  Builder b(DType::kFloat16);
  auto cast16 = [&](ir::Value* v, const std::string& out) {
    return b.Op("Cast", {v}, out, {ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat16))});
  };
  ir::Value* w = cast16(b.Input("W32", {4, 3}, DType::kFloat32), "W");
  ir::Value* bias = cast16(b.Input("B32", {3}, DType::kFloat32), "B");
  ir::Value* x = b.Input("X", {-1, 4});
  b.Output(b.Op("Relu", {b.Op("Add", {b.Op("MatMul", {x, w}, "mm"), bias}, "add")}, "Y"));
  Optimize(b.model());
  ExpectFused(b.model(), {"X", "W", "B"}, "Relu", "Y");
  EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{"Cast", "Cast", kFusedMatMulOp}));
}

// A training graph's backward reads Shape of the intermediate values (for its SumToShape targets): those Shape nodes
// read the fused output instead, which has the same shape.
TEST_F(MatMulFusion, ShapeReadsOfIntermediatesMoveToTheFusedOutput) {
  Builder b;
  ir::Value* mm = b.Op("MatMul", {b.Input("X", {-1, 4}), b.Init("W", {4, 3})}, "mm");
  ir::Value* add = b.Op("Add", {mm, b.Input("B", {3})}, "add");
  ir::Value* y = b.Op("Relu", {add}, "Y");
  b.Output(y);
  b.Output(b.Op("Shape", {mm}, "mm_shape"));
  b.Output(b.Op("Shape", {add}, "add_shape"));
  Optimize(b.model());
  ExpectFused(b.model(), {"X", "W", "B"}, "Relu", "Y");
  int shapes = 0;
  for (const ir::Node* n : b.g().nodes()) {
    if (n->op_type() != "Shape") continue;
    ++shapes;
    EXPECT_EQ(n->input(0)->name(), "Y");
  }
  EXPECT_EQ(shapes, 2);
}

// A reader of the product other than a Shape node keeps it apart, Shape readers or not.
TEST_F(MatMulFusion, ANonShapeReaderOfTheProductStillStopsTheFusion) {
  Builder b;
  ir::Value* mm = b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm");
  b.Output(b.Op("Add", {mm, b.Init("B", {3})}, "Y"));
  b.Output(b.Op("Shape", {mm}, "mm_shape"));
  b.Output(b.Op("Neg", {mm}, "Z"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Add", "Shape", "Neg"});
}

// A [1]-shaped scale after the product of two 1-D operands (a scalar) would make it 1-D: not absorbed. A scalar
// (rank 0) scale is.
TEST_F(MatMulFusion, OneElementScaleAfterAScalarProduct) {
  {
    Builder b;
    ir::Value* s = b.g().CreateValue("s");
    b.g().AddNode("Constant", {}, {s}, "s")->SetAttribute(ir::Attribute::TensorValue("value", b.Filled({1}, 2)));
    b.Output(b.Op("Mul", {b.Op("MatMul", {b.Input("X", {4}), b.Init("W", {4})}, "mm"), s}, "Y"));
    Optimize(b.model());
    ExpectUnchanged(b.model(), {"Constant", "MatMul", "Mul"});
  }
  {
    Builder b;
    b.Output(b.Op("Mul", {b.Op("MatMul", {b.Input("X", {4}), b.Init("W", {4})}, "mm"), b.Scalar("s", 2)}, "Y"));
    Optimize(b.model());
    EXPECT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp});
    EXPECT_FLOAT_EQ(FindOp(b.g(), kFusedMatMulOp)->GetFloat("alpha", 1), 2.0f);
  }
}

TEST_F(MatMulFusion, ProductReadTwice) {
  Builder b;
  ir::Value* mm = b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm");
  b.Output(b.Op("Add", {mm, b.Init("B", {3})}, "Y"));
  b.Output(b.Op("Neg", {mm}, "Z"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Add", "Neg"});
}

TEST_F(MatMulFusion, ProductIsAGraphOutput) {
  Builder b;
  ir::Value* mm = b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm");
  b.Output(mm);
  b.Output(b.Op("Relu", {b.Op("Add", {mm, b.Init("B", {3})}, "add")}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Add", "Relu"});
}

TEST_F(MatMulFusion, BiasNotARowVector) {
  Builder b;  // [M, N] bias: a full matrix, not one value per column
  b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {2, 3})}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Add"});
  Builder c;  // [N, 1]-like broadcast: a scalar bias of one value with N = 3
  c.Output(c.Op("Add", {c.Op("MatMul", {c.Input("X", {2, 4}), c.Init("W", {4, 3})}, "mm"), c.Init("B", {1})}, "Y"));
  Optimize(c.model());
  ExpectUnchanged(c.model(), {"MatMul", "Add"});
}

TEST_F(MatMulFusion, RankTwoBiasWithOneDimensionalA) {
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

TEST_F(MatMulFusion, OneDimensionalBOrUnknownShapes) {
  {
    Builder b;  // [M, K] x [K] drops N: no bias (a [1] bias would broadcast over the [M] result)
    b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4})}, "mm"), b.Init("B", {1})}, "Y"));
    Optimize(b.model());
    ExpectUnchanged(b.model(), {"MatMul", "Add"});
  }
  {
    Builder b;  // but an activation does not care
    b.Output(b.Op("Relu", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4})}, "mm")}, "Y"));
    Optimize(b.model());
    ExpectFused(b.model(), {"X", "W"}, "Relu", "Y");
  }
  Builder c;  // B's shape unknown: N cannot be checked against the bias
  ir::Value* w = c.g().CreateValue("W");
  w->set_type(ir::ValueType::Tensor(DType::kFloat32));
  c.g().AddInput(w);
  c.Output(c.Op("Add", {c.Op("MatMul", {c.Input("X", {2, 4}), w}, "mm"), c.Init("B", {3})}, "Y"));
  Optimize(c.model());
  ExpectUnchanged(c.model(), {"MatMul", "Add"});
}

TEST_F(MatMulFusion, IntegerProduct) {
  Builder b(DType::kInt32);
  ir::Value* w = b.g().CreateValue("W");
  w->set_type(ir::ValueType::Tensor(DType::kInt32, ir::Shape{ir::Dim::Value(4), ir::Dim::Value(3)}));
  b.g().SetInitializer(w, ir::Tensor(DType::kInt32, {4, 3}));
  b.Output(b.Op("Relu", {b.Op("MatMul", {b.Input("X", {2, 4}), w}, "mm")}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Relu"});
}

TEST_F(MatMulFusion, GemmWithBetaOrFullC) {
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

TEST_F(MatMulFusion, ErfGeluWithAWrongConstant) {
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

TEST_F(MatMulFusion, ErfGeluIntermediateReadTwice) {
  Builder b;
  ir::Value* x =
      b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {3})}, "fc");
  b.Output(b.ErfGelu(x));
  b.Output(b.g().FindValue("gelu_erf"));  // the Erf's output is visible
  Optimize(b.model());
  ExpectFused(b.model(), {"X", "W", "B"}, "", "fc");
  EXPECT_NE(FindOp(b.g(), "Erf"), nullptr);
}

TEST_F(MatMulFusion, OffWhenGraphOptimizationIsOffOrOpsetIsOld) {
  {
    Builder b;
    b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {3})}, "Y"));
    exec::SessionOptions off;
    off.graph_optimization = exec::GraphOptimization::kNone;
    ASSERT_TRUE(exec::OptimizeForInference(b.model(), off).ok());
    ExpectUnchanged(b.model(), {"MatMul", "Add"});
  }
  Builder b(DType::kFloat32, 6);
  b.Output(b.Op("Add", {b.Op("MatMul", {b.Input("X", {2, 4}), b.Init("W", {4, 3})}, "mm"), b.Init("B", {3})}, "Y"));
  Optimize(b.model());
  ExpectUnchanged(b.model(), {"MatMul", "Add"});
}

// ---- scales --------------------------------------------------------------------------------------------------------

float AlphaOf(const ir::Model& model) {
  const ir::Node* f = FindOp(*model.graph, kFusedMatMulOp);
  return f ? f->GetFloat("alpha", 1.0f) : std::nanf("");
}

TEST_F(MatMulFusion, ScaleByMulEitherOperandOrDiv) {
  for (int variant = 0; variant < 3; ++variant) {
    Builder b;
    ir::Value* mm = b.Op("MatMul", {b.Input("Q", {2, 4, 8, 16}), b.Input("K", {2, 4, 16, 8})}, "scores");
    ir::Value* y = variant == 0   ? b.Op("Mul", {mm, b.Scalar("s", 0.25)}, "Y")
                   : variant == 1 ? b.Op("Mul", {b.Scalar("s", 0.25), mm}, "Y")
                                  : b.Op("Div", {mm, b.Scalar("s", 4.0)}, "Y");
    b.Output(y);
    Optimize(b.model());
    EXPECT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp}) << variant;
    ExpectFused(b.model(), {"Q", "K"}, "", "Y");
    EXPECT_EQ(AlphaOf(b.model()), 0.25f) << variant;
  }
}

TEST_F(MatMulFusion, ScaleBiasAndGeluInOneNode) {
  Builder b;
  ir::Value* mm = b.Op("MatMul", {b.Input("X", {3, 5, 4}), b.Init("W", {4, 6})}, "mm");
  ir::Value* scaled = b.Op("Mul", {mm, b.Scalar("s", -1.5)}, "scaled");
  b.Output(b.ErfGelu(b.Op("Add", {scaled, b.Init("B", {6})}, "fc")));
  Optimize(b.model());
  EXPECT_EQ(OpTypes(b.g()), std::vector<std::string>{kFusedMatMulOp});
  ExpectFused(b.model(), {"X", "W", "B"}, "Gelu", "gelu_out");
  EXPECT_EQ(AlphaOf(b.model()), -1.5f);
}

TEST_F(MatMulFusion, GemmAlphaTimesTheScale) {
  Builder b;
  ir::Value* gemm = b.Op("Gemm", {b.Input("A", {3, 4}), b.Init("B", {5, 4})}, "gemm",
                         {ir::Attribute::Float("alpha", 3.0f), ir::Attribute::Int("transB", 1)});
  b.Output(b.Op("Relu", {b.Op("Add", {b.Op("Mul", {gemm, b.Scalar("s", 0.5)}, "mul"), b.Init("C", {5})}, "add")}, "Y"));
  Optimize(b.model());
  ExpectFused(b.model(), {"A", "B", "C"}, "Relu", "Y");
  EXPECT_EQ(AlphaOf(b.model()), 1.5f);
  EXPECT_EQ(FindOp(b.g(), kFusedMatMulOp)->GetInt("transB", 0), 1);
}

// The product's inputs carry no type (intermediate values before anything infers them): the scale's and the bias's
// constants tell it, as Mul and Add take operands of one type.
TEST_F(MatMulFusion, UntypedProductTakesTheConstantsType) {
  Builder b;
  ir::Value* x = b.Input("X", {2, 3, 4});
  ir::Value* t = b.Op("Transpose", {x}, "xt", {ir::Attribute::Ints("perm", {0, 2, 1})});
  ASSERT_FALSE(t->type().defined());
  b.Output(b.Op("Mul", {b.Op("MatMul", {t, b.Input("Y", {2, 3, 5})}, "mm"), b.Scalar("s", 0.5)}, "Z"));
  Optimize(b.model());
  EXPECT_EQ(OpTypes(b.g()), (std::vector<std::string>{"Transpose", kFusedMatMulOp}));
  EXPECT_EQ(AlphaOf(b.model()), 0.5f);
}

TEST_F(MatMulFusion, ScalesThatStay) {
  auto product = [](Builder& b) { return b.Op("MatMul", {b.Input("X", {3, 4}), b.Init("W", {4, 6})}, "mm"); };
  {
    Builder b;  // the product divides the constant, not the other way round
    b.Output(b.Op("Div", {b.Scalar("s", 2.0), product(b)}, "Y"));
    Optimize(b.model());
    ExpectUnchanged(b.model(), {"Constant", "MatMul", "Div"});
  }
  for (double bad : {0.0, std::numeric_limits<double>::infinity()}) {
    Builder b;  // a zero or infinite scale is not a factor to fold
    b.Output(b.Op("Mul", {product(b), b.Scalar("s", bad)}, "Y"));
    Optimize(b.model());
    ExpectUnchanged(b.model(), {"MatMul", "Constant", "Mul"});
  }
  {
    Builder b;  // not a scalar
    b.Output(b.Op("Mul", {product(b), b.Init("S", {6}, 0.5)}, "Y"));
    Optimize(b.model());
    ExpectUnchanged(b.model(), {"MatMul", "Mul"});
  }
  {
    Builder b;  // after a Gemm with C the scale would scale C too
    ir::Value* gemm = b.Op("Gemm", {b.Input("A", {3, 4}), b.Init("B", {4, 5}), b.Init("C", {5})}, "gemm");
    b.Output(b.Op("Mul", {gemm, b.Scalar("s", 0.5)}, "Y"));
    Optimize(b.model());
    ExpectUnchanged(b.model(), {"Gemm", "Constant", "Mul"});
  }
  {
    Builder b(DType::kFloat64);  // a double scale that no float alpha holds
    b.Output(b.Op("Mul", {product(b), b.Scalar("s", 0.1)}, "Y"));
    Optimize(b.model());
    ExpectUnchanged(b.model(), {"MatMul", "Constant", "Mul"});
  }
  {
    Builder b(DType::kFloat64);  // one it does
    b.Output(b.Op("Mul", {product(b), b.Scalar("s", 0.375)}, "Y"));
    Optimize(b.model());
    EXPECT_EQ(AlphaOf(b.model()), 0.375f);
  }
}

// ---- sessions on the fused graph ---------------------------------------------------------------------------------

ir::Tensor Random(DType dtype, const Dims& dims, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return TensorOf(dtype, dims, RandomValues(dtype, n, seed));
}

// The one output of a CPU session on `model` at `level` with `impl`, fed X = input; empty (and a test failure) on an
// error.
std::vector<double> RunSession(ir::Model model, exec::GraphOptimization level, ops::LinalgImpl impl,
                               const ir::Tensor& input) {
  exec::SessionOptions options;
  options.graph_optimization = level;
  options.kernels.linalg = impl;
  auto session = exec::Session::Create(std::move(model), options);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return {};
  ir::Tensor in = input;
  in.set_name("X");
  auto out = (*session)->Run({in});
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return {};
  EXPECT_EQ(out->size(), 1u);
  return AsDoubles((*out)[0]);
}

// A small transformer block's GEMMs (the attention scores scaled, a Gelu MLP with biases, a Relu projection) run by
// CPU sessions with and without the optimizer, for every linalg implementation and float type: the fused graph
// computes what the unfused one does, up to the element type's rounding.
TEST_F(MatMulFusion, SessionsComputeWhatTheUnfusedGraphDoes) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    for (int gelu = 0; gelu < 2; ++gelu) {  // the erf form, the tanh form (GPT-2's)
      auto make_model = [t, gelu] {
        Builder b(t);
        ir::Value* x = b.Input("X", {2, 6, 8});
        ir::Value* xt = b.Op("Transpose", {x}, "xt", {ir::Attribute::Ints("perm", {0, 2, 1})});
        ir::Value* scores = b.Op("Div", {b.Op("MatMul", {x, xt}, "qk"), b.Scalar("d", std::sqrt(8.0))}, "scores");
        ir::Value* attn = b.Op("MatMul", {b.Op("Softmax", {scores}, "p"), x}, "attn");
        ir::Value* fc1 =
            b.Op("Add", {b.Op("MatMul", {attn, b.Init("W1", {8, 16}, 0.1)}, "mm1"), b.Init("B1", {16}, 0.05)}, "fc1");
        ir::Value* fc2 =
            b.Op("Add",
                 {b.Op("MatMul", {gelu == 0 ? b.ErfGelu(fc1) : b.TanhGelu(fc1, 1), b.Init("W2", {16, 4}, -0.2)}, "mm2"),
                  b.Init("B2", {1, 4}, 0.3)},
                 "fc2");
        b.Output(b.Op("Relu", {fc2}, "Y"));
        return std::move(b.model());
      };
      const ir::Tensor input = Random(t, {2, 6, 8}, 3);
      for (ops::LinalgImpl impl : AvailableImpls()) {
        const std::vector<std::vector<double>> results = {
            RunSession(make_model(), exec::GraphOptimization::kNone, impl, input),
            RunSession(make_model(), exec::GraphOptimization::kAll, impl, input)};
        const Tolerance tol = ToleranceFor(t);
        ASSERT_EQ(results[0].size(), results[1].size());
        for (size_t i = 0; i < results[0].size(); ++i) {
          // Values near 1: the unfused graph rounds to T after every op, the fused one once.
          EXPECT_NEAR(results[1][i], results[0][i], 8 * tol.rtol + tol.atol)
              << DTypeName(t) << " on " << ops::LinalgImplName(impl) << ", element " << i << ", gelu " << gelu;
        }
      }
    }
  }
}

// The tanh form as `onnxamp convert` leaves it in a bf16 or fp16 graph: x^3 and what follows in FP32 between a Cast of
// x to float and one back, 0.5 x in the low type and then cast: one FusedMatMul writing the Cast back's output,
// computing what the unfused graph does (to a unit of the low type: the fused node rounds once).
TEST_F(MatMulFusion, TanhGeluThroughTheConvertersCasts) {
  for (DType t : {DType::kBFloat16, DType::kFloat16}) {
    auto make_model = [t] {
      Builder b(t);
      ir::Value* x = b.Op(
          "Add", {b.Op("MatMul", {b.Input("X", {2, 4, 8}), b.Init("W", {8, 16}, 0.1)}, "mm"), b.Init("B", {16})}, "fc");
      const ir::Attribute to_float = ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat32));
      ir::Value* xf = b.Op("Cast", {x}, "fc_fp32", {to_float});
      ir::Value* cubic = b.Op(
          "Mul", {b.Op("Pow", {xf, b.Scalar("three", 3.0, true)}, "cube"), b.Scalar("c", 0.044715, true)}, "cubic");
      ir::Value* scaled =
          b.Op("Mul", {b.Op("Add", {xf, cubic}, "inner"), b.Scalar("k", std::sqrt(2.0 / M_PI), true)}, "scaled");
      ir::Value* sum = b.Op("Add", {b.Op("Tanh", {scaled}, "th"), b.Scalar("one", 1.0, true)}, "sum");
      ir::Value* hf = b.Op("Cast", {b.Op("Mul", {x, b.Scalar("half", 0.5)}, "hx")}, "hx_fp32", {to_float});
      ir::Value* y32 = b.Op("Mul", {hf, sum}, "y32");
      b.Output(b.Op("Cast", {y32}, "Y", {ir::Attribute::Int("to", static_cast<int64_t>(t))}));
      return std::move(b.model());
    };
    ir::Model fused = make_model();
    Optimize(fused);
    EXPECT_EQ(OpTypes(*fused.graph), std::vector<std::string>{kFusedMatMulOp}) << DTypeName(t);
    ExpectFused(fused, {"X", "W", "B"}, "GeluTanh", "Y");
    const ir::Tensor input = Random(t, {2, 4, 8}, 5);
    const ops::LinalgImpl impl = exec::SessionOptions{}.kernels.linalg;
    const std::vector<std::vector<double>> results = {
        RunSession(make_model(), exec::GraphOptimization::kNone, impl, input),
        RunSession(make_model(), exec::GraphOptimization::kAll, impl, input)};
    const double unit = t == DType::kFloat16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
    ASSERT_EQ(results[0].size(), results[1].size());
    for (size_t i = 0; i < results[0].size(); ++i) {
      EXPECT_NEAR(results[1][i], results[0][i], 2 * unit * std::max(1.0, std::abs(results[0][i])))
          << DTypeName(t) << " element " << i;
    }
  }
}

}  // namespace
}  // namespace onnxamp::testing
