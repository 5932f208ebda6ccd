// UseFusedGelu (trainer/graph/training_graph.h): the erf-form GELU a model spells out in five nodes becomes one
// com.onnxamp Gelu, in each way the pattern's products associate, and only where nothing else reads its inside; the
// rewritten graph computes the same values (fp16: rounded once); the training graphs of the bundled transformer
// differentiate one Gelu with one GeluGrad in every precision, while their evaluation graphs keep the pattern (which
// the sessions fuse into FusedMatMul).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "converter/convert.h"
#include "converter/model_clone.h"
#include "runtime/common/half.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/session.h"
#include "runtime/ir/verify.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/op_tester.h"
#include "tests/trainer/train_test_util.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {
namespace {

using testing::MakeTensor;
using testing::Values;

// How the products of 0.5 * x * (1 + erf(x / sqrt 2)) are written.
enum class Form {
  kXTimesSumThenHalf,  // (x * (1 + erf)) * 0.5, x / sqrt 2 as Div
  kHalfXTimesSum,      // (x * 0.5) * (1 + erf)
  kXTimesHalfSum,      // x * ((1 + erf) * 0.5)
  kScaledByMul,        // the first, with x * sqrt(1/2) for the Div
};

struct Builder {
  ir::Model model;
  ir::Graph& g() { return *model.graph; }
  DType type = DType::kFloat32;
  int next = 0;

  ir::Value* Constant(double v) {
    ir::Value* c = g().CreateValue(StrCat("c", next++));
    ir::Tensor t(type, {});
    if (type == DType::kFloat16) {
      t.mutable_values<Float16>()[0] = Float16(static_cast<float>(v));
    } else {
      t.mutable_values<float>()[0] = static_cast<float>(v);
    }
    g().SetInitializer(c, std::move(t));
    return c;
  }
  ir::Value* Node(const char* op, std::vector<ir::Value*> in) {
    ir::Value* out = g().CreateValue(StrCat("v", next++));
    g().AddNode(op, std::move(in), {out}, StrCat(op, next++));
    return out;
  }
  // The pattern reading x; `sqrt2` is the divisor the model uses.
  ir::Value* ErfGelu(ir::Value* x, Form form, double sqrt2 = std::sqrt(2.0)) {
    ir::Value* scaled =
        form == Form::kScaledByMul ? Node("Mul", {x, Constant(1 / sqrt2)}) : Node("Div", {x, Constant(sqrt2)});
    ir::Value* sum = Node("Add", {Node("Erf", {scaled}), Constant(1)});
    switch (form) {
      case Form::kHalfXTimesSum:
        return Node("Mul", {Node("Mul", {x, Constant(0.5)}), sum});
      case Form::kXTimesHalfSum:
        return Node("Mul", {x, Node("Mul", {sum, Constant(0.5)})});
      default:
        return Node("Mul", {Node("Mul", {x, sum}), Constant(0.5)});
    }
  }
  // 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + c * x^3))): PyTorch's export before opset 20 (x * (x * x), then
  // 0.5 * (x * s)) or, `gpt2`, GPT-2's gelu_new (Pow(x, 3), then (0.5 * x) * s).
  ir::Value* TanhGelu(ir::Value* x, bool gpt2, double c = 0.044715) {
    ir::Value* cube = gpt2 ? Node("Pow", {x, Constant(3)}) : Node("Mul", {x, Node("Mul", {x, x})});
    ir::Value* inner = Node("Add", {x, Node("Mul", {Constant(c), cube})});
    ir::Value* sum = Node("Add", {Constant(1), Node("Tanh", {Node("Mul", {inner, Constant(std::sqrt(2 / M_PI))})})});
    if (gpt2) return Node("Mul", {Node("Mul", {Constant(0.5), x}), sum});
    return Node("Mul", {Constant(0.5), Node("Mul", {x, sum})});
  }
};

// x [4, 8] -> Add(bias) -> the pattern(s) -> y.
Builder Model(Form form, DType type = DType::kFloat32, int chained = 1) {
  Builder b;
  b.type = type;
  b.model.opset_imports = {{"", 17}};
  ir::Value* x = b.g().CreateValue("x");
  x->set_type(ir::ValueType::Tensor(type, ir::Shape{ir::Dim::Value(4), ir::Dim::Value(8)}));
  b.g().AddInput(x);
  ir::Value* v = b.Node("Add", {x, b.Constant(0.25)});
  for (int i = 0; i < chained; ++i) v = b.ErfGelu(v, form);
  v->set_type(ir::ValueType::Tensor(type, ir::Shape{ir::Dim::Value(4), ir::Dim::Value(8)}));
  b.g().AddOutput(v);
  return b;
}

std::vector<float> Inputs(uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-7, 7);
  std::vector<float> v(32);
  for (float& f : v) f = u(gen);
  v[0] = 0;
  v[1] = -6.5f;  // where 1 + erf(x / sqrt 2) nearly cancels
  return v;
}

std::vector<float> RunModel(const ir::Model& model, const std::vector<float>& x) {
  exec::SessionOptions options;
  options.num_threads = 1;
  options.graph_optimization = exec::GraphOptimization::kNone;
  auto session = exec::Session::Create(converter::CloneModel(model), options);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return {};
  const DType type = model.graph->inputs()[0]->type().elem_type();
  ir::Tensor in = type == DType::kFloat16 ? MakeTensor<Float16>({4, 8}, x) : MakeTensor<float>({4, 8}, x);
  in.set_name("x");
  auto out = (*session)->Run({in});
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return {};
  return type == DType::kFloat16 ? Values<Float16>((*out)[0]) : Values<float>((*out)[0]);
}

int Count(const ir::Model& m, const std::string& op, const std::string& domain = "") {
  int n = 0;
  for (const ir::Node* node : m.graph->nodes()) n += node->op_type() == op && node->domain() == domain;
  return n;
}

double Gelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double GeluTanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// x [4, 8] float -> Add(0.25) -> the tanh form (Builder::TanhGelu) -> y.
Builder TanhModel(bool gpt2, double c = 0.044715) {
  Builder b;
  b.model.opset_imports = {{"", 17}};
  ir::Value* x = b.g().CreateValue("x");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(4), ir::Dim::Value(8)}));
  b.g().AddInput(x);
  ir::Value* y = b.TanhGelu(b.Node("Add", {x, b.Constant(0.25)}), gpt2, c);
  y->set_type(x->type());
  b.g().AddOutput(y);
  return b;
}

TEST(UseFusedGelu, EveryFormBecomesOneNodeComputingTheSame) {
  for (Form form : {Form::kXTimesSumThenHalf, Form::kHalfXTimesSum, Form::kXTimesHalfSum, Form::kScaledByMul}) {
    const std::string what = StrCat("form ", static_cast<int>(form));
    Builder b = Model(form);
    const size_t initializers = b.g().initializers().size();
    const ir::Value* y = b.g().outputs()[0];
    const std::vector<float> x = Inputs(3);
    const std::vector<float> before = RunModel(b.model, x);
    ASSERT_EQ(UseFusedGelu(b.model), 1) << what;
    EXPECT_TRUE(ir::Verify(b.model).ok()) << what;
    EXPECT_EQ(b.model.OpsetVersion(exec::kInternalDomain), 1) << what;
    EXPECT_EQ(b.g().num_nodes(), 2u) << what;  // the Add and the Gelu
    EXPECT_EQ(Count(b.model, ops::kGeluOp, exec::kInternalDomain), 1) << what;
    EXPECT_EQ(b.g().initializers().size(), initializers - 3) << what << ": the pattern's constants stay";
    EXPECT_EQ(b.g().outputs()[0], y) << what << ": the output value is kept";
    const std::vector<float> after = RunModel(b.model, x);
    ASSERT_EQ(after.size(), before.size()) << what;
    for (size_t i = 0; i < x.size(); ++i) {
      const double exact = Gelu(static_cast<double>(x[i]) + 0.25);
      EXPECT_NEAR(after[i], before[i], 2e-6 * std::max(1.0, std::abs(exact))) << what << " at x = " << x[i];
      EXPECT_NEAR(after[i], exact, 2e-6 * std::max(1.0, std::abs(exact))) << what << " at x = " << x[i];
    }
  }
}

// The tanh forms become one Gelu with approximate "tanh", computing what the nine (or eight) nodes did: to float
// rounding of the formula, which both evaluate.
TEST(UseFusedGelu, TanhFormsBecomeOneTanhGelu) {
  for (bool gpt2 : {false, true}) {
    const std::string what = gpt2 ? "gelu_new" : "torch export";
    Builder b = TanhModel(gpt2);
    const size_t initializers = b.g().initializers().size();
    const std::vector<float> in = Inputs(6);
    const std::vector<float> before = RunModel(b.model, in);
    ASSERT_EQ(UseFusedGelu(b.model), 1) << what;
    EXPECT_TRUE(ir::Verify(b.model).ok()) << what;
    EXPECT_EQ(b.g().num_nodes(), 2u) << what;
    const ir::Node* gelu = b.g().outputs()[0]->producer();
    ASSERT_NE(gelu, nullptr);
    EXPECT_EQ(gelu->op_type(), ops::kGeluOp) << what;
    EXPECT_EQ(gelu->GetString("approximate", "none"), "tanh") << what;
    EXPECT_EQ(b.g().initializers().size(), initializers - (gpt2 ? 5 : 4)) << what;
    const std::vector<float> after = RunModel(b.model, in);
    ASSERT_EQ(after.size(), before.size()) << what;
    for (size_t i = 0; i < in.size(); ++i) {
      const double v = static_cast<double>(in[i]) + 0.25;
      const double exact = GeluTanh(v);
      EXPECT_NEAR(after[i], exact, 4e-6 * std::max(1.0, std::abs(exact))) << what << " at x = " << v;
      EXPECT_NEAR(before[i], exact, 4e-6 * std::max(1.0, std::abs(exact))) << what << " at x = " << v;
    }
  }
  {  // a cubic coefficient of 0.045 is another function
    Builder b = TanhModel(true, 0.045);
    EXPECT_EQ(UseFusedGelu(b.model), 0);
  }
}

// Converted to fp16/bf16, the tanh form keeps its Pow and what follows in FP32 (the converter's Casts to float of x
// and of 0.5 x, and one back after the last product): still one Gelu, computing in float and rounding once.
TEST(UseFusedGelu, TanhFormsThroughTheConvertersFloatIsland) {
  for (DType target : {DType::kFloat16, DType::kBFloat16}) {
    for (bool gpt2 : {false, true}) {
      const std::string what = StrCat(DTypeName(target), gpt2 ? " gelu_new" : " torch export");
      Builder b = TanhModel(gpt2);
      converter::ConvertOptions convert;
      convert.target = target;
      convert.keep_io_types = true;
      converter::ConvertReport report;
      ASSERT_TRUE(converter::ConvertModel(b.model, convert, &report).ok()) << what;
      ASSERT_EQ(UseFusedGelu(b.model), 1) << what;
      EXPECT_TRUE(ir::Verify(b.model).ok()) << what;
      EXPECT_EQ(Count(b.model, "Tanh"), 0) << what;
      EXPECT_EQ(Count(b.model, ops::kGeluOp, exec::kInternalDomain), 1) << what;
      const std::vector<float> in = Inputs(7);
      const std::vector<float> after = RunModel(b.model, in);
      ASSERT_EQ(after.size(), in.size()) << what;
      const double unit = target == DType::kFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
      for (size_t i = 0; i < in.size(); ++i) {
        const double v = static_cast<double>(in[i]) + 0.25;
        const double exact = GeluTanh(v);
        // x + 0.25 rounded to the target, then one rounding of the result: a few units of the target.
        EXPECT_NEAR(after[i], exact, 4 * unit * std::max(1.0, std::abs(exact))) << what << " at x = " << v;
      }
    }
  }
}

// The whole tanh form in float between a Cast of a bf16 x and a Cast back: found once (from x, not again from its
// Cast), one Gelu of x in bf16.
TEST(UseFusedGelu, TanhFormBetweenACastAndACastBackIsOneGelu) {
  Builder b;
  b.model.opset_imports = {{"", 17}};
  ir::Value* x = b.g().CreateValue("x");
  x->set_type(ir::ValueType::Tensor(DType::kBFloat16, ir::Shape{ir::Dim::Value(4), ir::Dim::Value(8)}));
  b.g().AddInput(x);
  auto cast = [&](ir::Value* v, DType to, const std::string& name) {
    ir::Value* out = b.g().CreateValue(name);
    b.g().AddNode("Cast", {v}, {out}, name)->SetAttribute(ir::Attribute::Int("to", static_cast<int64_t>(to)));
    return out;
  };
  ir::Value* y = cast(b.TanhGelu(cast(x, DType::kFloat32, "xf"), false), DType::kBFloat16, "y");
  y->set_type(x->type());
  b.g().AddOutput(y);
  ASSERT_EQ(UseFusedGelu(b.model), 1);
  EXPECT_TRUE(ir::Verify(b.model).ok());
  ASSERT_EQ(b.g().num_nodes(), 1u);
  const ir::Node* gelu = y->producer();
  ASSERT_NE(gelu, nullptr);
  EXPECT_EQ(gelu->op_type(), ops::kGeluOp);
  EXPECT_EQ(gelu->input(0), x);
  EXPECT_EQ(gelu->GetString("approximate", "none"), "tanh");
}

// A GELU of a GELU: the first pattern's output is the second's x; both are replaced.
TEST(UseFusedGelu, ChainedPatterns) {
  Builder b = Model(Form::kXTimesSumThenHalf, DType::kFloat32, 2);
  const std::vector<float> x = Inputs(4);
  const std::vector<float> before = RunModel(b.model, x);
  ASSERT_EQ(UseFusedGelu(b.model), 2);
  EXPECT_TRUE(ir::Verify(b.model).ok());
  EXPECT_EQ(b.g().num_nodes(), 3u);
  const std::vector<float> after = RunModel(b.model, x);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(after[i], before[i], 2e-6 * std::max(1.0f, std::abs(before[i])));
}

// In fp16 the pattern rounds after each of its five ops; the fused node computes in float and rounds once, to
// within an fp16 unit (or 1e-6 where 1 + erf cancels) of the exact value.
TEST(UseFusedGelu, Float16RoundsOnce) {
  Builder b = Model(Form::kXTimesSumThenHalf, DType::kFloat16);
  ASSERT_EQ(UseFusedGelu(b.model), 1);
  std::vector<float> x = Inputs(5);
  for (float& v : x) v = static_cast<float>(Float16(v));
  const std::vector<float> y = RunModel(b.model, x);
  ASSERT_EQ(y.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float xa = static_cast<float>(Float16(x[i] + static_cast<float>(Float16(0.25f))));  // the Add, rounded
    const double exact = Gelu(xa);
    const double ulp = std::ldexp(1.0, std::max(-24, std::ilogb(std::max(std::abs(exact), 1e-30)) - 10));
    EXPECT_LE(std::abs(y[i] - exact), std::max(ulp, 1e-6)) << "x = " << xa;
  }
}

TEST(UseFusedGelu, LeavesPatternsWhoseInsideIsReadOrThatDiffer) {
  {  // the Erf's output is also a graph output
    Builder b = Model(Form::kXTimesSumThenHalf);
    for (ir::Node* n : b.g().nodes()) {
      if (n->op_type() == "Erf") b.g().AddOutput(n->output(0));
    }
    EXPECT_EQ(UseFusedGelu(b.model), 0);
    EXPECT_EQ(Count(b.model, "Erf"), 1);
  }
  {  // x read by a third node
    Builder b = Model(Form::kXTimesSumThenHalf);
    ir::Value* x = nullptr;
    for (ir::Node* n : b.g().nodes()) {
      if (n->op_type() == "Div") x = n->input(0);
    }
    ASSERT_NE(x, nullptr);
    ir::Value* extra = b.Node("Neg", {x});
    b.g().AddOutput(extra);
    EXPECT_EQ(UseFusedGelu(b.model), 0);
  }
  {  // x / 1.5 is not the pattern
    Builder b;
    b.model.opset_imports = {{"", 17}};
    ir::Value* x = b.g().CreateValue("x");
    x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(4), ir::Dim::Value(8)}));
    b.g().AddInput(x);
    ir::Value* y = b.ErfGelu(b.Node("Add", {x, b.Constant(0.25)}), Form::kXTimesSumThenHalf, 1.5);
    b.g().AddOutput(y);
    EXPECT_EQ(UseFusedGelu(b.model), 0);
    EXPECT_EQ(b.model.OpsetVersion(exec::kInternalDomain), 0);
  }
}

// transformer.onnx spells its MLP's GELU out: the train graph has one com.onnxamp Gelu and one GeluGrad and no Erf in
// FP32 and both AMP precisions; the evaluation graph keeps the pattern (its sessions fuse it into the product).
TEST(UseFusedGelu, TransformerTrainGraphDifferentiatesOneGelu) {
  const ir::Model model = test_util::LoadReference("transformer.onnx");
  for (DType amp : {DType::kUndefined, DType::kFloat16, DType::kBFloat16}) {
    TrainingGraphOptions options;
    options.amp = amp;
    options.loss.class_axis = -1;
    StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, options);
    ASSERT_TRUE(g.ok()) << g.status().message();
    const std::string what = amp == DType::kUndefined ? "fp32" : std::string(DTypeName(amp));
    EXPECT_EQ(Count(g->train, ops::kGeluOp, exec::kInternalDomain), 1) << what;
    EXPECT_EQ(Count(g->train, ops::kGeluGradOp, exec::kInternalDomain), 1) << what;
    EXPECT_EQ(Count(g->train, "Erf"), 0) << what;
    EXPECT_EQ(Count(g->eval, "Erf"), 1) << what;
    EXPECT_EQ(Count(g->eval, ops::kGeluOp, exec::kInternalDomain), 0) << what;
  }
}

}  // namespace
}  // namespace onnxamp::trainer
