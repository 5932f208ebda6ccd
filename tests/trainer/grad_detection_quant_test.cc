// Finite-difference checks of the gradients of RoiAlign (avg, both coordinate modes, X only: the rois take none),
// DequantizeLinear (the scale: per tensor and per axis, with and without a zero point), and the zero gradients of
// RandomNormalLike, RandomUniformLike and Bernoulli; the refusals (RoiAlign max, a blocked DequantizeLinear).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"

namespace onnxamp::testing {
namespace {

using gradtest::Doubles;
using gradtest::GradientError;
using gradtest::Int64s;
using gradtest::Op;

ir::Tensor Rois() {
  // Inside, partly outside, and smaller than a pixel; coordinates off the sample grid's integers.
  return MakeTensor<double>({3, 4}, {0.3, 0.7, 4.6, 5.2, -1.4, 2.1, 3.3, 7.9, 2.2, 1.1, 2.6, 1.4});
}

TEST(RoiAlignGrad, MatchesFiniteDifferences) {
  for (int64_t opset : {10, 16}) {
    for (int64_t ratio : {0, 2}) {
      OpTester t = Op("RoiAlign", opset);
      t.Attr(ir::Attribute::Int("output_height", 3))
          .Attr(ir::Attribute::Int("output_width", 2))
          .Attr(ir::Attribute::Int("sampling_ratio", ratio))
          .Attr(ir::Attribute::Float("spatial_scale", 0.75f))
          .Input(Doubles({2, 3, 6, 7}, 5))
          .Input(Rois())
          .Input(Int64s({3}, {1, 0, 1}));
      GradCheckOptions o;
      o.wrt = {0};
      ExpectGradientsMatchFiniteDifferences(t, "RoiAlign-" + std::to_string(opset) + " ratio " + std::to_string(ratio),
                                            o);
    }
  }
}

TEST(RoiAlignGrad, RoisTakeNoGradientAndMaxIsRefused) {
  OpTester t = Op("RoiAlign", 16);
  t.Input(Doubles({1, 2, 4, 4}, 2)).Input(MakeTensor<double>({1, 4}, {0.5, 0.5, 2.5, 3.0})).Input(Int64s({1}, {0}));
  const std::vector<std::string> ops = gradtest::EmittedOps(t, {"in0", "in1"});
  EXPECT_TRUE(gradtest::Contains(ops, "RoiAlignGrad"));
  const std::vector<std::string> names = gradtest::GradientNames(t, {"in0", "in1"});
  ASSERT_EQ(names.size(), 2u);
  EXPECT_FALSE(names[0].empty());
  EXPECT_TRUE(names[1].empty());  // as torchvision's roi_align: the rois are not differentiated
  OpTester m = t;
  m.Attr(ir::Attribute::String("mode", "max"));
  EXPECT_NE(GradientError(m, {"in0"}).find("RoiAlign's gradient covers mode avg only"), std::string::npos)
      << GradientError(m, {"in0"});
}

TEST(DequantizeLinearGrad, ScaleMatchesFiniteDifferences) {
  // Per tensor (a scalar and a [1] scale), per axis (axis 1 and -1), with and without a zero point.
  const ir::Tensor x = MakeTensor<int8_t>(
      {2, 3, 4}, {-128, -7, 0, 5, 127, 33, -1, 2, 9, -60, 70, 1, 3, -3, 4, -4, 100, -100, 8, -8, 16, 0, -16, 64});
  struct Case {
    std::string name;
    std::vector<int64_t> scale_dims;
    int64_t axis;
    bool zero_point;
  };
  for (const Case& c : {Case{"scalar", {}, 1, true}, Case{"[1]", {1}, 1, false}, Case{"axis 1", {3}, 1, true},
                        Case{"axis -1", {4}, -1, false}}) {
    OpTester t = Op("DequantizeLinear", 13);
    t.Attr(ir::Attribute::Int("axis", c.axis)).Input(x).Input(Doubles(c.scale_dims, 3, 0.01, 0.2));
    if (c.zero_point) {
      int64_t n = 1;
      for (int64_t d : c.scale_dims) n *= d;
      std::vector<int8_t> z;
      for (int64_t i = 0; i < n; ++i) z.push_back(static_cast<int8_t>(i % 2 ? -3 : 2));
      t.Input(MakeTensor<int8_t>(c.scale_dims, z));
    }
    GradCheckOptions o;
    o.wrt = {1};
    ExpectGradientsMatchFiniteDifferences(t, "DequantizeLinear " + c.name, o);
  }
}

TEST(DequantizeLinearGrad, BlockedIsRefused) {
  OpTester t = Op("DequantizeLinear", 21);
  t.Attr(ir::Attribute::Int("axis", 1))
      .Attr(ir::Attribute::Int("block_size", 2))
      .Input(MakeTensor<int8_t>({1, 4}, {1, 2, 3, 4}))
      .Input(Doubles({1, 2}, 1, 0.1, 0.2));
  EXPECT_NE(GradientError(t, {"in1"}).find("no gradient for the scale of a blocked DequantizeLinear (block_size 2)"),
            std::string::npos)
      << GradientError(t, {"in1"});
}

TEST(RandomGrad, LikeOpsAndBernoulliHaveZeroGradients) {
  for (const char* op : {"RandomNormalLike", "RandomUniformLike"}) {
    OpTester t = Op(op, 17);
    t.Input(Doubles({3, 4}, 7));
    GradCheckOptions o;
    o.min_abs = -1;  // the gradient is zero
    ExpectGradientsMatchFiniteDifferences(t, op, o);
  }
  OpTester b = Op("Bernoulli", 15);
  b.Input(Doubles({3, 4}, 7, 0.2, 0.8));
  GradCheckOptions o;
  o.min_abs = -1;
  ExpectGradientsMatchFiniteDifferences(b, "Bernoulli", o);
}

}  // namespace
}  // namespace onnxamp::testing
