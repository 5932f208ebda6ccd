// QuantizeLinear, DequantizeLinear, the integer and QLinear ops, Unique, BitShift, Det, NonMaxSuppression and RoiAlign
// beyond the backend suite and the ONNX Runtime
// comparison (tests/peer/more_ops_ort.py): the layouts and types the kernels refuse, with their one-line
// errors, and RoiAlignGrad against the forward (the adjoint identity <RoiAlign(X), G> = <X, RoiAlignGrad(G)>).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

TEST(QuantizeOpTest, ScaleLayoutErrors) {
  OpTester per_axis_old = Op("QuantizeLinear", 10);
  per_axis_old.Input(MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6})).Input(MakeTensor<float>({3}, {1, 1, 1}));
  ExpectRunError(per_axis_old, "must be a scalar at opset 10, got [3]");
  OpTester wrong_len = Op("QuantizeLinear", 13);
  wrong_len.Input(MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6})).Input(MakeTensor<float>({2}, {1, 1}));
  ExpectRunError(wrong_len, "expected a scalar or [3] (dim 1 of x [2,3])");
  OpTester blocked = Op("DequantizeLinear", 21);
  blocked.Attr(ir::Attribute::Int("block_size", 2))
      .Input(MakeTensor<int8_t>({2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}))
      .Input(MakeTensor<float>({2, 2}, {1, 1, 1, 1}));
  ExpectRunError(blocked, "expected [2,3] for blocks of 2 along axis 1 of x [2,5]");
  OpTester zero = Op("QuantizeLinear", 13);
  zero.Input(MakeTensor<float>({2}, {1, 2})).Input(MakeTensor<float>({}, {0.0f}));
  ExpectRunError(zero, "a scale must be finite and non-zero");
  OpTester zp_shape = Op("DequantizeLinear", 13);
  zp_shape.Input(MakeTensor<uint8_t>({2}, {1, 2}))
      .Input(MakeTensor<float>({}, {0.5f}))
      .Input(MakeTensor<uint8_t>({2}, {1, 1}));
  ExpectRunError(zp_shape, "expected the scale's []");
  // A scale of a wrong type and a wrong length: the length is reported first (the layout is checked before the
  // output type), and a BitShift of a signed type whose operands do not broadcast reports the shapes first.
  OpTester int_scale = Op("DequantizeLinear", 13);
  int_scale.Input(MakeTensor<int8_t>({2, 3}, {1, 2, 3, 4, 5, 6})).Input(MakeTensor<int32_t>({5}, {1, 1, 1, 1, 1}));
  ExpectRunError(int_scale, "expected a scalar or [3] (dim 1 of x [2,3])");
  OpTester shift = Op("BitShift", 11);
  shift.Attr(ir::Attribute::String("direction", "LEFT"))
      .Input(MakeTensor<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6}))
      .Input(MakeTensor<int32_t>({4}, {1, 1, 1, 1}));
  auto refused = shift.Run();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().find("expected uint8"), std::string::npos) << refused.status().message();
  OpTester fp8 = Op("DequantizeLinear", 19);
  fp8.Input(ir::Tensor(DType::kFloat8E4M3FN, {2})).Input(MakeTensor<float>({}, {0.5f}));
  ExpectRunError(fp8, "supported are int8, uint8, int16, uint16 and int32");
}

TEST(QuantizeOpTest, OneElementScaleAndZeroPointOfDifferentShapes) {
  OpTester t = Op("DequantizeLinear", 13);
  t.Input(MakeTensor<uint8_t>({3}, {0, 10, 255}))
      .Input(MakeTensor<float>({}, {0.5f}))
      .Input(MakeTensor<uint8_t>({1}, {10}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{-5.0f, 0.0f, 122.5f}));
}

TEST(QuantizeOpTest, DynamicQuantizeOfZerosHasScaleOne) {
  OpTester t = Op("DynamicQuantizeLinear", 11, 3);
  t.Input(MakeTensor<float>({4}, {0, 0, 0, 0}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[1].values<float>()[0], 1.0f);
  EXPECT_EQ((*out)[2].values<uint8_t>()[0], 0);
  for (uint8_t v : (*out)[0].values<uint8_t>()) EXPECT_EQ(v, 0);
}

TEST(QuantizeOpTest, RoundsHalfToEvenAndSaturates) {
  OpTester t = Op("QuantizeLinear", 13);
  t.Input(MakeTensor<float>({6}, {0.5f, 1.5f, 2.5f, -0.5f, 1000.0f, -1000.0f})).Input(MakeTensor<float>({}, {1.0f}));
  t.Input(MakeTensor<int8_t>({}, {0}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  const auto v = (*out)[0].values<int8_t>();
  EXPECT_EQ(std::vector<int8_t>(v.begin(), v.end()), (std::vector<int8_t>{0, 2, 2, 0, 127, -128}));
}

TEST(QuantizeOpTest, IntegerOpErrors) {
  OpTester types = Op("MatMulInteger", 10);
  types.Input(MakeTensor<int16_t>({2, 2}, {1, 2, 3, 4})).Input(MakeTensor<int8_t>({2, 2}, {1, 2, 3, 4}));
  ExpectRunError(types, "is int16, expected int8 or uint8");
  OpTester zp = Op("MatMulInteger", 10);
  zp.Input(MakeTensor<uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6}))
      .Input(MakeTensor<uint8_t>({3, 2}, {1, 2, 3, 4, 5, 6}))
      .Input(MakeTensor<uint8_t>({3}, {1, 1, 1}));
  ExpectRunError(zp, "expected one value or [2]");
  OpTester zp_type = Op("ConvInteger", 10);
  zp_type.Input(MakeTensor<uint8_t>({1, 1, 2, 2}, {1, 2, 3, 4}))
      .Input(MakeTensor<uint8_t>({1, 1, 1, 1}, {1}))
      .Input(MakeTensor<int8_t>({}, {0}));
  ExpectRunError(zp_type, "is int8, expected its operand's uint8");
  OpTester bias = Op("QLinearConv", 10);
  bias.Input(MakeTensor<uint8_t>({1, 1, 2, 2}, {1, 2, 3, 4}))
      .Input(MakeTensor<float>({}, {0.1f}))
      .Input(MakeTensor<uint8_t>({}, {0}))
      .Input(MakeTensor<int8_t>({2, 1, 1, 1}, {1, 2}))
      .Input(MakeTensor<float>({}, {0.1f}))
      .Input(MakeTensor<int8_t>({}, {0}))
      .Input(MakeTensor<float>({}, {0.1f}))
      .Input(MakeTensor<uint8_t>({}, {0}))
      .Input(MakeTensor<float>({2}, {0, 0}));
  ExpectRunError(bias, "must be int32 [2], got float [2]");
}

TEST(MiscOpTest, UniqueNanStringsAndBitShiftPastTheWidth) {
  OpTester nan = Op("Unique", 11, 4);
  nan.Input(MakeTensor<float>({5}, {2.0f, std::nanf(""), -1.0f, std::nanf(""), 2.0f}));
  auto out = nan.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  const std::vector<float> y = Values<float>((*out)[0]);
  ASSERT_EQ(y.size(), 3u);  // -1, 2, NaN: NaNs are one value, sorted last
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], 2.0f);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(Int64Values((*out)[3]), (std::vector<int64_t>{1, 2, 2}));
  ir::Tensor words(DType::kString, {4});
  words.mutable_strings() = {"b", "a", "b", "c"};
  OpTester strings = Op("Unique", 11, 3);
  strings.Attr(ir::Attribute::Int("sorted", 0)).Input(words);
  out = strings.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].strings(), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(Int64Values((*out)[2]), (std::vector<int64_t>{0, 1, 0, 2}));
  OpTester shift = Op("BitShift", 11);
  shift.Attr(ir::Attribute::String("direction", "LEFT"))
      .Input(MakeTensor<uint8_t>({3}, {1, 1, 255}))
      .Input(MakeTensor<uint8_t>({3}, {7, 8, 200}));
  out = shift.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  const auto z = (*out)[0].values<uint8_t>();
  EXPECT_EQ(std::vector<uint8_t>(z.begin(), z.end()), (std::vector<uint8_t>{128, 0, 0}));
  OpTester signed_shift = Op("BitShift", 11);
  signed_shift.Attr(ir::Attribute::String("direction", "RIGHT"))
      .Input(MakeTensor<int32_t>({1}, {4}))
      .Input(MakeTensor<int32_t>({1}, {1}));
  ExpectRunError(signed_shift, "expected uint8, uint16, uint32 or uint64");
  OpTester det = Op("Det", 11);
  det.Input(MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  ExpectRunError(det, "must be [..., M, M], got [2,3]");
}

TEST(MiscOpTest, EmptyAxesLargeSingularDetAndEmptyScales) {
  // MVN with axes [] normalizes over every axis (ReduceMean's empty axes in its function body).
  OpTester mvn = Op("MeanVarianceNormalization", 13);
  mvn.Attr(ir::Attribute::Ints("axes", {})).Input(MakeTensor<double>({2, 2}, {1, 2, 3, 4}));
  auto out = mvn.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  const std::vector<double> y = Values<double>((*out)[0]);
  const double sd = std::sqrt(1.25);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[static_cast<size_t>(i)], (i + 1 - 2.5) / (sd + 1e-9), 1e-12) << i;
  // The gradient of a singular determinant larger than 32 x 32 is refused, not computed for hours.
  std::vector<double> ones(33 * 33, 1.0);
  OpTester det = InternalOp(ops::kDetGradOp);
  det.Input(MakeTensor<double>({}, {1.0})).Input(MakeTensor<double>({33, 33}, ones));
  ExpectRunError(det, "matrix 0 of X is singular and larger than 32x32");
  // With several, the first one (by index) is named, whatever the threads' order (the CUDA kernel names the same).
  std::vector<double> batch(4 * 33 * 33, 1.0);
  for (int64_t m : {0, 2}) {  // matrices 0 and 2: the identity
    for (int64_t i = 0; i < 33 * 33; ++i) batch[static_cast<size_t>(m * 33 * 33 + i)] = i % 34 == 0 ? 1.0 : 0.0;
  }
  OpTester several = InternalOp(ops::kDetGradOp);
  several.Input(MakeTensor<double>({4}, {1, 1, 1, 1})).Input(MakeTensor<double>({4, 33, 33}, batch));
  several.options.num_threads = 4;
  for (int run = 0; run < 5; ++run) ExpectRunError(several, "matrix 1 of X is singular and larger than 32x32");
  // A per-row scale of an empty A: refused, not read past its end.
  OpTester q = Op("QLinearMatMul", 10);
  q.Input(MakeTensor<uint8_t>({0, 2}, {}))
      .Input(MakeTensor<float>({0}, {}))
      .Input(MakeTensor<uint8_t>({}, {0}))
      .Input(MakeTensor<uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6}))
      .Input(MakeTensor<float>({}, {0.1f}))
      .Input(MakeTensor<uint8_t>({}, {0}))
      .Input(MakeTensor<float>({}, {0.1f}))
      .Input(MakeTensor<uint8_t>({}, {0}));
  ExpectRunError(q, "expected one value or [0]");
}

TEST(MiscOpTest, SpectralEdgesAndRefusals) {
  // A symmetric window of one sample is 1, as numpy's and torch's.
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    OpTester w = Op(op, 17);
    w.Attr(ir::Attribute::Int("periodic", 0)).Input(Int64s({1}, true));
    auto out = w.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{1.0f})) << op;
  }
  OpTester empty = Op("STFT", 17);
  empty.Input(MakeTensor<float>({1, 8, 1}, std::vector<float>(8, 1.0f)))
      .Input(Int64s({2}, true))
      .Input(MakeTensor<float>({0}, {}))
      .Input(Int64s({4}, true));
  ExpectRunError(empty, "(window) is empty");
  OpTester long_dft = Op("DFT", 17);
  long_dft.Input(MakeTensor<float>({1, 4, 1}, {1, 2, 3, 4})).Input(Int64s({int64_t{1} << 20}, true));
  ExpectRunError(long_dft, "dft_length 1048576 is above 65536 (a direct O(L^2) transform)");
  OpTester mel = Op("MelWeightMatrix", 17);
  mel.Input(Int64s({8}, true))
      .Input(Int64s({int64_t{1} << 62}, true))
      .Input(Int64s({int64_t{1} << 62}, true))
      .Input(MakeTensor<float>({}, {0.0f}))
      .Input(MakeTensor<float>({}, {1000.0f}));
  ExpectRunError(mel, "is above 65536");
}

TEST(NmsOpTest, NoBoxesAndErrors) {
  // Without max_output_boxes_per_class nothing is selected.
  OpTester none = Op("NonMaxSuppression", 11);
  none.Input(MakeTensor<float>({1, 2, 4}, {0, 0, 1, 1, 0, 0, 2, 2})).Input(MakeTensor<float>({1, 1, 2}, {0.9f, 0.8f}));
  auto out = none.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{0, 3}));
  OpTester shapes = Op("NonMaxSuppression", 11);
  shapes.Input(MakeTensor<float>({1, 2, 4}, {0, 0, 1, 1, 0, 0, 2, 2})).Input(MakeTensor<float>({1, 1, 3}, {1, 1, 1}));
  ExpectRunError(shapes, "must be [1, num_classes, 2] for boxes [1,2,4], got [1,1,3]");
  OpTester nan = Op("NonMaxSuppression", 11);
  nan.Input(MakeTensor<float>({1, 1, 4}, {0, 0, 1, 1}))
      .Input(MakeTensor<float>({1, 1, 1}, {std::nanf("")}))
      .Input(Int64s({5}));
  ExpectRunError(nan, "holds NaN at [0, 0, 0]");
  OpTester iou = Op("NonMaxSuppression", 11);
  iou.Input(MakeTensor<float>({1, 1, 4}, {0, 0, 1, 1}))
      .Input(MakeTensor<float>({1, 1, 1}, {0.5f}))
      .Input(Int64s({5}))
      .Input(MakeTensor<float>({1}, {1.5f}));
  ExpectRunError(iou, "is 1.5, expected a value in [0, 1]");
}

TEST(RoiAlignOpTest, Errors) {
  OpTester idx = Op("RoiAlign", 16);
  idx.Input(MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4}))
      .Input(MakeTensor<float>({1, 4}, {0, 0, 1, 1}))
      .Input(Int64s({3}));
  ExpectRunError(idx, "[0] is 3, outside [0, 1)");
  OpTester rois = Op("RoiAlign", 16);
  rois.Input(MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4}))
      .Input(MakeTensor<float>({1, 3}, {0, 0, 1}))
      .Input(Int64s({0}));
  ExpectRunError(rois, "must be [num_rois, 4], got [1,3]");
  OpTester mode = Op("RoiAlign", 16);
  mode.Attr(ir::Attribute::String("mode", "median"))
      .Input(MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4}))
      .Input(MakeTensor<float>({1, 4}, {0, 0, 1, 1}))
      .Input(Int64s({0}));
  ExpectRunError(mode, "attribute 'mode' is 'median', expected avg or max");
}

TEST(RoiAlignOpTest, HugeRoisAndEmptyPlanesAreRefused) {
  OpTester huge = Op("RoiAlign", 16);
  huge.Input(MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4}))
      .Input(MakeTensor<float>({1, 4}, {0, 0, 1e30f, 1e30f}))
      .Input(Int64s({0}));
  ExpectRunError(huge, "samples (at most 6.71089e+07): a box far larger than the image");
  OpTester grad = InternalOp(ops::kRoiAlignGradOp);
  grad.Input(MakeTensor<float>({1, 1, 1, 1}, {1}))
      .Input(Int64s({1, 1, 0, 4}))
      .Input(MakeTensor<float>({1, 4}, {0, 0, 1, 1}))
      .Input(Int64s({0}));
  ExpectRunError(grad, "is [1,1,0,4], expected a non-empty plane");
}

TEST(RoiAlignOpTest, GradIsTheAdjointOfTheForward) {
  std::mt19937 gen(3);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> xv(2 * 3 * 7 * 9), gv(4 * 3 * 2 * 3);
  for (double& v : xv) v = u(gen);
  for (double& v : gv) v = u(gen);
  const ir::Tensor rois =
      MakeTensor<double>({4, 4}, {0.5, 1.0, 6.5, 5.0, -2.0, -1.0, 3.0, 9.0, 7.9, 5.9, 8.8, 6.4, 1.0, 1.0, 1.0, 1.0});
  const ir::Tensor idx = Int64s({1, 0, 1, 0});
  for (const char* ct : {"half_pixel", "output_half_pixel"}) {
    OpTester f = Op("RoiAlign", 16);
    f.Attr(ir::Attribute::String("coordinate_transformation_mode", ct))
        .Attr(ir::Attribute::Int("output_height", 2))
        .Attr(ir::Attribute::Int("output_width", 3))
        .Input(MakeTensor<double>({2, 3, 7, 9}, xv))
        .Input(rois)
        .Input(idx);
    auto y = f.Run();
    ASSERT_TRUE(y.ok()) << y.status().message();
    OpTester b = InternalOp(ops::kRoiAlignGradOp);
    b.Attr(ir::Attribute::String("coordinate_transformation_mode", ct))
        .Attr(ir::Attribute::Int("output_height", 2))
        .Attr(ir::Attribute::Int("output_width", 3))
        .Input(MakeTensor<double>({4, 3, 2, 3}, gv))
        .Input(Int64s({2, 3, 7, 9}))
        .Input(rois)
        .Input(idx);
    auto dx = b.Run();
    ASSERT_TRUE(dx.ok()) << dx.status().message();
    double lhs = 0, rhs = 0;
    const auto yv = (*y)[0].values<double>();
    const auto dv = (*dx)[0].values<double>();
    for (size_t i = 0; i < gv.size(); ++i) lhs += yv[i] * gv[i];
    for (size_t i = 0; i < xv.size(); ++i) rhs += xv[i] * dv[i];
    EXPECT_NEAR(lhs, rhs, 1e-12 * (1 + std::fabs(lhs))) << ct;
    EXPECT_GT(std::fabs(lhs), 1e-3) << ct;
  }
}

}  // namespace
}  // namespace onnxamp::testing
