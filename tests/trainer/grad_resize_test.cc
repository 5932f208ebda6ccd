// Finite-difference checks of the Resize and Upsample gradient builder (and so of the ResizeGrad kernel, the adjoint
// of the forward's interpolation tables): nearest with every nearest_mode, linear (1-D to 3-D) and cubic
// (cubic_coeff_a, exclude_outside) with every coordinate_transformation_mode, scales and sizes, antialias, axes and
// keep_aspect_ratio_policy at 18, half_pixel_symmetric at 19, tf_crop_and_resize with extrapolated positions, Resize
// 10/11 signatures and Upsample 7/9. Odd shapes and scales whose source coordinates avoid nearest-mode ties.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"
#include "trainer/autodiff/autodiff.h"

namespace onnxamp::testing {
namespace {

using gradtest::Dims;
using gradtest::Doubles;

ir::Tensor Floats(const std::vector<float>& v) { return MakeTensor<float>({static_cast<int64_t>(v.size())}, v); }

struct ResizeCase {
  std::string name;
  int64_t opset = 13;
  Dims x;
  std::string mode = "nearest";
  std::string coord = {};    // coordinate_transformation_mode
  std::string nearest = {};  // nearest_mode
  std::vector<float> scales = {};
  Dims sizes = {};
  std::vector<float> roi = {};
  std::vector<ir::Attribute> extra = {};
};

OpTester ResizeTester(const ResizeCase& c) {
  OpTester t = gradtest::Op("Resize", c.opset);
  t.Attr(ir::Attribute::String("mode", c.mode));
  if (!c.coord.empty()) t.Attr(ir::Attribute::String("coordinate_transformation_mode", c.coord));
  if (!c.nearest.empty()) t.Attr(ir::Attribute::String("nearest_mode", c.nearest));
  for (const ir::Attribute& a : c.extra) t.Attr(a);
  t.Input(Doubles(c.x, 7));
  if (c.opset < 11) {
    t.Input(Floats(c.scales));
    return t;
  }
  if (!c.roi.empty() || c.opset < 13) {
    t.Input(Floats(c.roi));
  } else {
    t.OmittedInput();
  }
  if (!c.scales.empty() || c.opset < 13) {
    t.Input(Floats(c.scales));
  } else {
    t.OmittedInput();
  }
  if (!c.sizes.empty()) t.Input(gradtest::Int64s({static_cast<int64_t>(c.sizes.size())}, c.sizes));
  return t;
}

class ResizeGradTest : public ::testing::TestWithParam<ResizeCase> {};

TEST_P(ResizeGradTest, MatchesFiniteDifferences) {
  GradCheckOptions options;
  options.wrt = {0};
  ExpectGradientsMatchFiniteDifferences(ResizeTester(GetParam()), GetParam().name, options);
}

void PrintTo(const ResizeCase& c, std::ostream* os) { *os << c.name; }

std::vector<ResizeCase> Cases() {
  std::vector<ResizeCase> cases;
  // Nearest: every nearest_mode, up and down, with coordinate modes that move the source coordinate.
  const std::vector<float> up = {1, 1, 1.7f, 2.3f}, down = {1, 1, 0.6f, 0.7f};
  for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
    for (const char* coord : {"half_pixel", "asymmetric", "align_corners", "tf_half_pixel_for_nn"}) {
      cases.push_back(
          {std::string("Nearest_") + nearest + "_" + coord + "_Up", 13, {1, 2, 3, 5}, "nearest", coord, nearest, up});
    }
    cases.push_back({std::string("Nearest_") + nearest + "_Down",
                     13,
                     {2, 1, 5, 7},
                     "nearest",
                     "pytorch_half_pixel",
                     nearest,
                     down});
  }
  // Linear and cubic: every coordinate mode, scales and sizes.
  for (const char* mode : {"linear", "cubic"}) {
    for (const char* coord : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}) {
      cases.push_back({std::string(mode) + "_" + coord + "_Scales", 13, {1, 2, 3, 5}, mode, coord, {}, up});
      cases.push_back(
          {std::string(mode) + "_" + coord + "_Sizes", 13, {2, 1, 5, 4}, mode, coord, {}, {}, {2, 1, 3, 7}});
    }
  }
  cases.push_back({"Linear3d", 13, {1, 1, 3, 2, 3}, "linear", "half_pixel", {}, {1, 1, 1.5f, 2.5f, 0.7f}});
  cases.push_back({"Linear1dSizes", 13, {2, 5}, "linear", "align_corners", {}, {}, {2, 8}});
  cases.push_back({"CubicCoeffExcludeOutside",
                   13,
                   {1, 2, 4, 5},
                   "cubic",
                   "half_pixel",
                   {},
                   {1, 1, 1.6f, 0.8f},
                   {},
                   {},
                   {ir::Attribute::Float("cubic_coeff_a", -0.5f), ir::Attribute::Int("exclude_outside", 1)}});
  // tf_crop_and_resize: a roi that reaches outside the input, so some outputs take the extrapolation value.
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    cases.push_back({std::string("CropAndResize_") + mode,
                     13,
                     {1, 1, 4, 5},
                     mode,
                     "tf_crop_and_resize",
                     {},
                     {},
                     {1, 1, 5, 6},
                     {0, 0, -0.2f, 0.1f, 1, 1, 0.9f, 1.3f},
                     {ir::Attribute::Float("extrapolation_value", 0.5f)}});
  }
  // Opset 18: antialias when downsampling, axes, keep_aspect_ratio_policy.
  cases.push_back({"AntialiasLinearDown",
                   18,
                   {1, 2, 7, 9},
                   "linear",
                   "half_pixel",
                   {},
                   {1, 1, 0.45f, 0.6f},
                   {},
                   {},
                   {ir::Attribute::Int("antialias", 1)}});
  cases.push_back({"AntialiasCubicDown",
                   18,
                   {1, 1, 8, 7},
                   "cubic",
                   "pytorch_half_pixel",
                   {},
                   {1, 1, 0.4f, 0.7f},
                   {},
                   {},
                   {ir::Attribute::Int("antialias", 1)}});
  cases.push_back({"AxesScales",
                   18,
                   {1, 2, 3, 5},
                   "linear",
                   "half_pixel",
                   {},
                   {2.3f, 1.6f},
                   {},
                   {},
                   {ir::Attribute::Ints("axes", {3, 2})}});
  cases.push_back(
      {"AxesSizesNotLarger",
       18,
       {2, 1, 3, 5},
       "nearest",
       "half_pixel",
       "round_prefer_ceil",
       {},
       {7, 4},
       {},
       {ir::Attribute::Ints("axes", {2, 3}), ir::Attribute::String("keep_aspect_ratio_policy", "not_larger")}});
  cases.push_back({"SizesNotSmallerCubic",
                   18,
                   {1, 1, 3, 4},
                   "cubic",
                   "half_pixel",
                   {},
                   {},
                   {1, 1, 5, 5},
                   {},
                   {ir::Attribute::String("keep_aspect_ratio_policy", "not_smaller")}});
  cases.push_back({"HalfPixelSymmetric", 19, {1, 2, 3, 5}, "linear", "half_pixel_symmetric", {}, {1, 1, 1.7f, 0.6f}});
  // Resize-11 (roi and scales always given) and Resize-10 (scales only; asymmetric coordinates).
  cases.push_back({"Resize11LinearSizes", 11, {1, 2, 3, 4}, "linear", "asymmetric", {}, {}, {1, 2, 5, 7}});
  cases.push_back({"Resize11Cubic", 11, {1, 1, 4, 3}, "cubic", "align_corners", {}, {1, 1, 1.5f, 2.4f}});
  cases.push_back({"Resize10Nearest", 10, {1, 2, 3, 5}, "nearest", {}, {}, {1, 1, 1.7f, 0.6f}});
  cases.push_back({"Resize10Linear", 10, {1, 2, 3, 5}, "linear", {}, {}, {1, 1, 2.3f, 1.4f}});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Variants, ResizeGradTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

// ResizeGrad's own builder (second derivatives): the forward op again. A ResizeGrad node for `forward` (Resize or
// Upsample at `opset`), dY of the forward's output shape differentiated.
void ExpectResizeGradGradient(const OpTester& forward, const std::string& name) {
  StatusOr<std::vector<ir::Tensor>> y = forward.Run();
  ASSERT_TRUE(y.ok()) << y.status().message();
  OpTester t = InternalOp(ops::kResizeGradOp);
  t.attributes = forward.attributes;
  t.Attr(ir::Attribute::String("forward_op", forward.op_type)).Attr(ir::Attribute::Int("forward_opset", forward.opset));
  t.Input(gradtest::Int64s({static_cast<int64_t>(forward.inputs[0]->rank())}, forward.inputs[0]->dims()));
  for (size_t i = 1; i <= 3; ++i) {
    if (i < forward.inputs.size() && forward.inputs[i]) {
      t.Input(*forward.inputs[i]);
    } else {
      t.OmittedInput();
    }
  }
  t.Input(Doubles((*y)[0].dims(), 8));
  GradCheckOptions options;
  options.wrt = {4};
  options.onnx_opset = forward.opset;
  ExpectGradientsMatchFiniteDifferences(t, name + " ResizeGrad", options);
}

class ResizeGradGradientTest : public ::testing::TestWithParam<ResizeCase> {};

TEST_P(ResizeGradGradientTest, MatchesFiniteDifferences) {
  ExpectResizeGradGradient(ResizeTester(GetParam()), GetParam().name);
}

INSTANTIATE_TEST_SUITE_P(Variants, ResizeGradGradientTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(UpsampleGrad, MatchesFiniteDifferences) {
  GradCheckOptions options;
  options.wrt = {0};
  for (const char* mode : {"nearest", "linear", "bilinear"}) {
    OpTester t7 = gradtest::Op("Upsample", 7);
    t7.Attr(ir::Attribute::String("mode", mode)).Attr(ir::Attribute::Floats("scales", {1, 1, 2.5f, 1.5f}));
    t7.Input(Doubles({1, 2, 3, 5}, 3));
    ExpectGradientsMatchFiniteDifferences(t7, std::string("Upsample-7 ") + mode, options);
    OpTester t9 = gradtest::Op("Upsample", 9);
    t9.Attr(ir::Attribute::String("mode", mode));
    t9.Input(Doubles({2, 1, 3, 4}, 4)).Input(Floats({1, 1, 1.5f, 2.0f}));
    ExpectGradientsMatchFiniteDifferences(t9, std::string("Upsample-9 ") + mode, options);
    ExpectResizeGradGradient(t7, std::string("Upsample-7 ") + mode);
    ExpectResizeGradGradient(t9, std::string("Upsample-9 ") + mode);
  }
}

TEST(ResizeGrad, EmitsResizeGradAndNoGradientForScales) {
  const ResizeCase c{"", 13, {1, 1, 3, 3}, "linear", "half_pixel", {}, {1, 1, 2, 2}};
  EXPECT_TRUE(gradtest::Contains(gradtest::EmittedOps(ResizeTester(c)), ops::kResizeGradOp));
  // Scales asked for take no gradient (OpInfo::no_gradient_inputs): X's is there, theirs is empty, in Resize-13 and
  // Resize-10 (scales at input 1) and Upsample-9.
  OpTester t = gradtest::Op("Resize", 13);
  t.Attr(ir::Attribute::String("mode", "linear"));
  t.Input(Doubles({1, 1, 3, 3}, 1)).OmittedInput().Input(MakeTensor<double>({4}, {1, 1, 2, 2}));
  ir::Model m = t.BuildModel();
  ir::Graph& g = *m.graph;
  ir::Value* loss = g.CreateValue("loss");
  loss->set_type(ir::ValueType::Tensor(DType::kFloat64, ir::Shape{}));
  g.AddNode("ReduceSum", {g.outputs()[0]}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
  StatusOr<trainer::GradientResult> r = trainer::BuildGradients(m, {"loss", {"in0", "in2"}, ""});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->gradients.size(), 2u);
  EXPECT_FALSE(r->gradients[0].empty());
  EXPECT_TRUE(r->gradients[1].empty());
  for (const char* op : {"Resize", "Upsample"}) {
    OpTester old = gradtest::Op(op, op == std::string("Resize") ? 10 : 9);
    old.Input(Doubles({1, 1, 3, 3}, 2)).Input(MakeTensor<float>({4}, {1, 1, 2, 2}));
    const std::vector<std::string> names = gradtest::GradientNames(old, {"in0", "in1"});
    ASSERT_EQ(names.size(), 2u) << op;
    EXPECT_FALSE(names[0].empty()) << op;
    EXPECT_TRUE(names[1].empty()) << op;
  }
}

}  // namespace
}  // namespace onnxamp::testing
