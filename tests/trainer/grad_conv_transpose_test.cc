// Finite-difference checks of the ConvTranspose gradient builder (and so of the ConvTransposeGrad kernel it emits):
// 1-D/2-D/3-D, strides, dilations, groups, asymmetric pads, auto_pad, output_padding, output_shape and bias, with
// the reference loops and with the GEMM paths; ConvTransposeGrad's own builder (second derivatives) over the same
// cases. Also what the builder emits (outputs requested only when needed), and ConvGrad again with the reference loops
// (its dX now runs ConvTranspose's implementation).
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"
#include "trainer/autodiff/autodiff.h"

namespace onnxamp::testing {
namespace {

using gradtest::Dims;
using gradtest::Doubles;

struct ConvTransposeCase {
  std::string name;
  Dims x, w;  // w: [C, M / group, k...]
  Dims strides = {}, pads = {}, dilations = {}, output_padding = {}, output_shape = {};
  std::string auto_pad = {};
  int64_t group = 1;
  bool bias = true;
};

OpTester ConvTransposeTester(const ConvTransposeCase& c, exec::LinalgImpl impl) {
  OpTester t = gradtest::Op("ConvTranspose", 17);
  if (!c.strides.empty()) t.Attr(ir::Attribute::Ints("strides", c.strides));
  if (!c.pads.empty()) t.Attr(ir::Attribute::Ints("pads", c.pads));
  if (!c.dilations.empty()) t.Attr(ir::Attribute::Ints("dilations", c.dilations));
  if (!c.output_padding.empty()) t.Attr(ir::Attribute::Ints("output_padding", c.output_padding));
  if (!c.output_shape.empty()) t.Attr(ir::Attribute::Ints("output_shape", c.output_shape));
  if (!c.auto_pad.empty()) t.Attr(ir::Attribute::String("auto_pad", c.auto_pad));
  if (c.group != 1) t.Attr(ir::Attribute::Int("group", c.group));
  t.Input(Doubles(c.x, 1)).Input(Doubles(c.w, 2));
  if (c.bias) t.Input(Doubles({c.w[1] * c.group}, 3));
  t.options.kernels.linalg = impl;
  return t;
}

void PrintTo(const ConvTransposeCase& c, std::ostream* os) { *os << c.name; }

class ConvTransposeGradTest : public ::testing::TestWithParam<ConvTransposeCase> {};

TEST_P(ConvTransposeGradTest, MatchesFiniteDifferences) {
  ExpectGradientsMatchFiniteDifferences(ConvTransposeTester(GetParam(), exec::LinalgImpl::kPortable),
                                        GetParam().name + " (GEMM)");
  ExpectGradientsMatchFiniteDifferences(ConvTransposeTester(GetParam(), exec::LinalgImpl::kReference),
                                        GetParam().name + " (reference)");
}

const std::vector<ConvTransposeCase>& ConvTransposeCases() {
  static const std::vector<ConvTransposeCase> cases = {
      ConvTransposeCase{"ConvTranspose1d", {2, 3, 5}, {3, 2, 3}},
      // A 1x1 kernel with output_padding (allowed by the dilation): the adjoint Conv is not a plain GEMM.
      ConvTransposeCase{"ConvTranspose1x1OutputPaddingDilation", {1, 2, 4}, {2, 3, 1}, {}, {}, {2}, {1}},
      ConvTransposeCase{"ConvTranspose1dStride2OutputPadding", {2, 2, 4}, {2, 3, 3}, {2}, {1, 0}, {}, {1}},
      ConvTransposeCase{"ConvTranspose2dStridePads", {1, 3, 3, 4}, {3, 2, 3, 2}, {2, 3}, {1, 0, 0, 1}},
      ConvTransposeCase{"ConvTranspose2dDilation", {2, 2, 3, 3}, {2, 2, 2, 3}, {}, {}, {2, 1}, {}, {}, {}, 1, false},
      ConvTransposeCase{"ConvTranspose2dGroup2", {1, 4, 3, 3}, {4, 3, 2, 2}, {2, 1}, {}, {}, {}, {}, {}, 2},
      ConvTransposeCase{
          "ConvTranspose2dDepthwise", {2, 3, 3, 3}, {3, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {}, {}, {}, 3},
      // output_shape larger than the natural size: negative derived pads.
      ConvTransposeCase{"ConvTranspose2dOutputShape", {1, 2, 3, 3}, {2, 2, 3, 3}, {2, 2}, {}, {}, {}, {8, 9}},
      ConvTransposeCase{"ConvTranspose2dSameUpper", {1, 2, 3, 4}, {2, 2, 3, 2}, {2, 2}, {}, {}, {}, {}, "SAME_UPPER"},
      ConvTransposeCase{"ConvTranspose2dSameLowerOutputShape",
                        {1, 2, 3, 3},
                        {2, 1, 2, 3},
                        {2, 1},
                        {},
                        {},
                        {},
                        {7, 4},
                        "SAME_LOWER",
                        1,
                        false},
      ConvTransposeCase{"ConvTranspose2dValid", {2, 1, 3, 2}, {1, 2, 2, 3}, {1, 2}, {}, {}, {}, {}, "VALID"},
      ConvTransposeCase{"ConvTranspose3dStridePads", {1, 2, 2, 3, 2}, {2, 2, 2, 2, 3}, {2, 1, 2}, {1, 0, 0, 0, 1, 1}},
      ConvTransposeCase{
          "ConvTranspose3dGroupDilation", {1, 4, 2, 2, 3}, {4, 1, 2, 2, 2}, {}, {}, {1, 2, 1}, {}, {}, {}, 2, false}};
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Variants, ConvTransposeGradTest, ::testing::ValuesIn(ConvTransposeCases()),
                         [](const auto& info) { return info.param.name; });

// ConvTransposeGrad's own builder (second derivatives: a penalty through a generator's upsampling, as StyleGAN2's
// path-length regularisation has): dY of the forward's output shape, every output in the loss, every input
// differentiated.
class ConvTransposeGradGradientTest : public ::testing::TestWithParam<ConvTransposeCase> {};

TEST_P(ConvTransposeGradGradientTest, MatchesFiniteDifferences) {
  const ConvTransposeCase& c = GetParam();
  const OpTester forward = ConvTransposeTester(c, exec::LinalgImpl::kPortable);
  StatusOr<std::vector<ir::Tensor>> y = forward.Run();
  ASSERT_TRUE(y.ok()) << y.status().message();
  OpTester t = InternalOp(ops::kConvTransposeGradOp);
  t.attributes = forward.attributes;
  t.Input(Doubles((*y)[0].dims(), 4)).Input(Doubles(c.x, 1)).Input(Doubles(c.w, 2));
  t.num_outputs = c.bias ? 3 : 2;
  ExpectGradientsMatchFiniteDifferences(t, c.name + " ConvTransposeGrad");
}

INSTANTIATE_TEST_SUITE_P(Variants, ConvTransposeGradGradientTest, ::testing::ValuesIn(ConvTransposeCases()),
                         [](const auto& info) { return info.param.name; });

StatusOr<ir::Model> BuildWithLoss(const OpTester& t, const std::vector<int>& wrt) {
  ir::Model model = t.BuildModel();
  ir::Graph& g = *model.graph;
  ir::Value* loss = g.CreateValue("loss");
  loss->set_type(ir::ValueType::Tensor(DType::kFloat64, ir::Shape{}));
  g.AddNode("ReduceSum", {g.FindValue("out0")}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
  trainer::GradientRequest request;
  request.loss = "loss";
  for (int i : wrt) request.wrt.push_back("in" + std::to_string(i));
  ONNXAMP_RETURN_IF_ERROR(trainer::BuildGradients(model, request).status());
  return model;
}

const ir::Node* FindGradNode(const ir::Model& model) {
  for (const ir::Node* n : model.graph->nodes()) {
    if (n->op_type() == ops::kConvTransposeGradOp && n->domain() == exec::kInternalDomain) return n;
  }
  return nullptr;
}

TEST(ConvTransposeGrad, RequestsOnlyTheOutputsNeeded) {
  const ConvTransposeCase c{"", {2, 3, 3, 3}, {3, 2, 3, 3}, {2, 2}, {1, 1, 1, 1}};
  StatusOr<ir::Model> built = BuildWithLoss(ConvTransposeTester(c, exec::LinalgImpl::kPortable), {1});
  ASSERT_TRUE(built.ok()) << built.status().message();
  const ir::Node* grad = FindGradNode(*built);
  ASSERT_NE(grad, nullptr);
  ASSERT_EQ(grad->outputs().size(), 2u);
  EXPECT_EQ(grad->output(0), nullptr);
  EXPECT_NE(grad->output(1), nullptr);
  built = BuildWithLoss(ConvTransposeTester(c, exec::LinalgImpl::kPortable), {2});
  ASSERT_TRUE(built.ok()) << built.status().message();
  grad = FindGradNode(*built);
  ASSERT_NE(grad, nullptr);
  ASSERT_EQ(grad->outputs().size(), 3u);
  EXPECT_EQ(grad->output(0), nullptr);
  EXPECT_EQ(grad->output(1), nullptr);

  GradCheckOptions only_b;
  only_b.wrt = {2};
  ExpectGradientsMatchFiniteDifferences(ConvTransposeTester(c, exec::LinalgImpl::kPortable), "dB only", only_b);
}

TEST(ConvTransposeGrad, RefusesWhatTheForwardRefuses) {
  ConvTransposeCase c{"", {1, 2, 3}, {2, 2, 3}};
  OpTester t = ConvTransposeTester(c, exec::LinalgImpl::kPortable);
  t.Attr(ir::Attribute::String("auto_pad", "SOMETIMES"));
  StatusOr<ir::Model> built = BuildWithLoss(t, {0});
  ASSERT_FALSE(built.ok());
  EXPECT_NE(built.status().message().find("auto_pad"), std::string::npos) << built.status().message();
}

// ConvGrad's dX runs ConvTranspose's implementation: check it with the plain loops too (the GEMM path is checked in
// grad_conv_pool_bn_test.cc).
TEST(ConvGrad, ReferenceLoopsMatchFiniteDifferences) {
  OpTester t = gradtest::Op("Conv", 17);
  t.Attr(ir::Attribute::Ints("strides", {2, 1}))
      .Attr(ir::Attribute::Ints("pads", {1, 0, 0, 1}))
      .Attr(ir::Attribute::Ints("dilations", {1, 2}))
      .Attr(ir::Attribute::Int("group", 2));
  t.Input(Doubles({2, 4, 6, 5}, 1)).Input(Doubles({6, 2, 3, 2}, 2)).Input(Doubles({6}, 3));
  t.options.kernels.linalg = exec::LinalgImpl::kReference;
  ExpectGradientsMatchFiniteDifferences(t, "Conv (reference)");
}

}  // namespace
}  // namespace onnxamp::testing
