// CUDA dnn kernels against the CPU reference: Conv (1-D/2-D/3-D/4-D, groups and depthwise, strides, dilations,
// asymmetric pads, every auto_pad mode, bias), FusedConv (ReLU, residual Z of Y's shape or broadcast),
// ConvTranspose (output_padding, output_shape, groups, dilations, asymmetric and negative pads), MaxPool (Indices,
// storage_order, ceil_mode, dilations, int8/uint8), AveragePool (count_include_pad, ceil_mode), the global pools,
// and BatchNormalization (inference and training, opsets 7/9/14/15, mixed parameter types), per element type; the
// convolutions also on the direct kernels (ONNXAMP_CUDA_CONV_DIRECT=1); attribute errors as on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/broadcast.h"
#include "tests/cuda/conv_test_util.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/runtime/ops/tolerance.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;
using op_test::DTypeParamName;
using op_test::FloatTypes;
using op_test::Op;
using op_test::RandomValues;
using op_test::TensorOf;

// The CUDA convolution against the CPU's, with ConvTolerance.
void ExpectConvMatches(const OpTester& t, const std::string& what) {
  StatusOr<std::vector<ir::Tensor>> cpu = t.Run();
  ASSERT_TRUE(cpu.ok()) << what << ": cpu: " << cpu.status().message();
  ExpectCudaMatchesCpu(t, what, ConvTolerance(t, (*cpu)[0]));
}

// ---- Conv -------------------------------------------------------------------------------------------------------

std::vector<ConvCase> ConvCases() {
  return {
      {"2d", {2, 3, 7, 9}, 4, {3, 3}},
      {"2d_stride2_pads", {1, 3, 8, 8}, 5, {3, 3}, 1, {2, 2}, {}, {1, 1, 1, 1}},
      {"2d_asymmetric_pads_group2", {2, 4, 7, 6}, 6, {3, 2}, 2, {}, {}, {0, 1, 2, 0}},
      {"2d_dilation2", {1, 3, 11, 10}, 3, {3, 3}, 1, {}, {2, 2}, {2, 2, 2, 2}},
      {"depthwise", {2, 8, 9, 9}, 8, {3, 3}, 8, {}, {}, {1, 1, 1, 1}},
      {"depthwise_multiplier2", {1, 4, 6, 6}, 8, {3, 3}, 4, {1, 2}},
      {"same_upper", {1, 3, 7, 8}, 4, {4, 3}, 1, {2, 2}, {}, {}, "SAME_UPPER"},
      {"same_lower", {1, 3, 7, 8}, 4, {4, 3}, 1, {2, 2}, {}, {}, "SAME_LOWER"},
      {"valid", {1, 2, 9, 7}, 3, {3, 3}, 1, {2, 1}, {}, {}, "VALID"},
      {"1d", {3, 5, 17}, 6, {5}, 1, {2}, {}, {2, 1}},
      {"1d_dilated_no_bias", {1, 3, 20}, 2, {3}, 1, {}, {3}, {}, "", false},
      {"3d", {1, 3, 5, 6, 7}, 4, {3, 3, 3}, 1, {}, {}, {1, 1, 1, 1, 1, 1}},
      {"3d_strided_asymmetric", {2, 2, 6, 5, 4}, 3, {2, 3, 2}, 1, {2, 1, 2}, {}, {0, 1, 1, 1, 0, 0}},
      {"4d_spatial", {1, 2, 3, 4, 3, 3}, 2, {2, 2, 2, 2}, 1, {}, {}, {1, 0, 0, 1, 0, 1, 1, 0}},
      {"1x1_no_bias", {2, 16, 5, 5}, 8, {1, 1}, 1, {}, {}, {}, "", false},
      {"single_element", {1, 1, 1, 1}, 1, {1, 1}},
      {"odd_channels_batch3", {3, 7, 5, 3}, 5, {2, 3}, 1, {1, 2}, {}, {1, 0, 0, 1}},
      {"empty_batch", {0, 3, 5, 5}, 4, {3, 3}},
      {"wide_reduction", {1, 64, 9, 9}, 16, {3, 3}, 1, {}, {}, {1, 1, 1, 1}},
  };
}

OpTester ConvTester(const ConvCase& c, DType dtype, const std::string& op = "Conv", const std::string& domain = "",
                    int64_t opset = 17) {
  OpTester t = Op(op, opset);
  t.domain = domain;
  if (c.group != 1) t.Attr(ir::Attribute::Int("group", c.group));
  if (!c.strides.empty()) t.Attr(ir::Attribute::Ints("strides", c.strides));
  if (!c.dilations.empty()) t.Attr(ir::Attribute::Ints("dilations", c.dilations));
  if (!c.pads.empty()) t.Attr(ir::Attribute::Ints("pads", c.pads));
  if (!c.auto_pad.empty()) t.Attr(ir::Attribute::String("auto_pad", c.auto_pad));
  Dims w = {c.m, c.x[1] / c.group};
  w.insert(w.end(), c.kernel.begin(), c.kernel.end());
  t.Input(Random(dtype, c.x, 11)).Input(Random(dtype, w, 12));
  if (c.bias) t.Input(Random(dtype, {c.m}, 13));
  return t;
}

class CudaConvTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaConvTest, MatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (const ConvCase& c : ConvCases()) ExpectConvMatches(ConvTester(c, GetParam()), "Conv " + c.name);
}

TEST_P(CudaConvTest, DirectKernelsMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (const ConvCase& c : ConvCases()) {
    ExpectConvMatches(DirectConv(ConvTester(c, GetParam())), "Conv (direct) " + c.name);
  }
}

TEST_P(CudaConvTest, SecondRunWithNewShapeAndValues) {
  ONNXAMP_REQUIRE_CUDA();
  // One session, two input shapes: the kernel's cached plan must follow the shapes.
  const DType dtype = GetParam();
  OpTester t = Op("Conv", 17);
  t.Attr(ir::Attribute::Ints("pads", {1, 1, 1, 1}));
  t.Input(Random(dtype, {1, 3, 6, 6}, 1)).Input(Random(dtype, {4, 3, 3, 3}, 2)).Input(Random(dtype, {4}, 3));
  std::vector<ir::Tensor> xs;
  for (const Dims& x_dims : {Dims{1, 3, 6, 6}, Dims{2, 3, 9, 5}, Dims{1, 3, 6, 6}}) {
    xs.push_back(Random(dtype, x_dims, static_cast<uint32_t>(x_dims[0] * 100 + x_dims[2])));
  }
  ExpectConvRerunsMatchCpu(
      t, ir::Shape{ir::Dim::Param("N"), ir::Dim::Value(3), ir::Dim::Param("H"), ir::Dim::Param("W")}, xs);
}

INSTANTIATE_TEST_SUITE_P(Float, CudaConvTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(CudaConvLargeTest, GridStrideEpilogue) {
  ONNXAMP_REQUIRE_CUDA();
  // 4 * 2050 * 2050 outputs > 65535 blocks * 256 threads: the epilogue's grid-stride loop wraps.
  ConvCase c{"large_1x1", {1, 2, 2050, 2050}, 4, {1, 1}};
  ExpectConvMatches(ConvTester(c, DType::kFloat16), "Conv large fp16");
  ExpectConvMatches(ConvTester(c, DType::kFloat32), "Conv large fp32");
}

// ---- FusedConv --------------------------------------------------------------------------------------------------

class CudaFusedConvTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaFusedConvTest, MatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  enum class Z { kNone, kSame, kChannel, kRank3, kGrow };
  struct Variant {
    std::string name;
    std::string activation;  // "-" leaves the attribute out
    bool bias;
    Z z;
  };
  const std::vector<Variant> variants = {
      {"relu", "Relu", false, Z::kNone},
      {"bias_relu", "Relu", true, Z::kNone},
      {"bias_z_relu", "Relu", true, Z::kSame},  // cudnnConvolutionBiasActivationForward where it applies
      {"z_relu_no_bias", "Relu", false, Z::kSame},
      {"bias_z_no_activation", "", true, Z::kSame},
      {"no_activation_attribute", "-", true, Z::kNone},
      {"z_broadcast_channel", "Relu", true, Z::kChannel},
      {"z_broadcast_rank3", "", true, Z::kRank3},
      {"z_broadcast_grows_output", "Relu", true, Z::kGrow},
  };
  for (const ConvCase& c :
       {ConvCase{"padded", {2, 4, 7, 6}, 6, {3, 3}, 1, {}, {}, {1, 1, 1, 1}},
        ConvCase{"strided_asymmetric_group2", {1, 4, 7, 6}, 4, {3, 3}, 2, {2, 1}, {}, {0, 1, 1, 0}}}) {
    // Y's shape from a plain convolution on the CPU.
    StatusOr<std::vector<ir::Tensor>> plain = ConvTester(c, DType::kFloat32).Run();
    ASSERT_TRUE(plain.ok()) << plain.status().message();
    const Dims y = (*plain)[0].dims();
    for (const Variant& v : variants) {
      ConvCase cc = c;
      cc.bias = v.bias;
      OpTester t = ConvTester(cc, dtype, exec::kFusedConvOp, exec::kInternalDomain, 1);
      if (v.activation != "-") t.Attr(ir::Attribute::String("activation", v.activation));
      if (v.z != Z::kNone) {
        Dims z = y;
        if (v.z == Z::kChannel) z = {1, y[1], 1, 1};
        if (v.z == Z::kRank3) z = {y[1], y[2], 1};
        if (v.z == Z::kGrow) z.insert(z.begin(), 3);
        if (!v.bias) t.OmittedInput();
        t.Input(Random(dtype, z, 14));
      }
      ExpectConvMatches(t, "FusedConv " + c.name + " " + v.name);
    }
  }
}

// A NaN in the residual Z reaches the fused ReLU's output as on the CPU, whose Relu keeps NaN as PyTorch's does:
// cuDNN's convolution-bias-activation (its ReLU descriptor asks for NaN propagation), the separate epilogue and the
// direct kernels alike. An AMP step whose forward overflows to NaN before a ReLU must still see the NaN.
TEST_P(CudaFusedConvTest, ReluKeepsNaNAsTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  ConvCase c{"nan", {1, 4, 6, 6}, 4, {3, 3}, 1, {}, {}, {1, 1, 1, 1}};
  c.bias = true;
  const Dims y = {1, 4, 6, 6};
  std::vector<double> zv = AsDoubles(Random(dtype, y, 14));
  for (size_t i : {5, 77, 143}) zv[i] = std::nan("");
  for (bool direct : {false, true}) {
    const std::string what = std::string("FusedConv NaN in Z") + (direct ? " (direct kernels)" : "");
    OpTester t = ConvTester(c, dtype, exec::kFusedConvOp, exec::kInternalDomain, 1);
    t.Attr(ir::Attribute::String("activation", "Relu"));
    t.Input(TensorOf(dtype, y, zv));
    t.options.kernels.cuda_conv_direct = direct;
    StatusOr<std::vector<ir::Tensor>> cpu = t.Run();
    ASSERT_TRUE(cpu.ok()) << what << ": cpu: " << cpu.status().message();
    const std::vector<double> cpu_y = AsDoubles((*cpu)[0]);
    for (size_t i = 0; i < cpu_y.size(); ++i) ASSERT_EQ(std::isnan(cpu_y[i]), std::isnan(zv[i])) << what << " " << i;
    ExpectConvMatches(t, what);
  }
}

TEST_P(CudaFusedConvTest, DirectKernelMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  OpTester t = ConvTester({"fused", {2, 4, 7, 6}, 6, {3, 3}, 1, {}, {}, {1, 1, 1, 1}}, dtype, exec::kFusedConvOp,
                          exec::kInternalDomain, 1);
  t.options.kernels.cuda_conv_direct = true;
  t.Attr(ir::Attribute::String("activation", "Relu"));
  t.Input(Random(dtype, {2, 6, 7, 6}, 14));
  ExpectConvMatches(t, "FusedConv (direct)");
}

INSTANTIATE_TEST_SUITE_P(Float, CudaFusedConvTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

// ---- ConvTranspose ----------------------------------------------------------------------------------------------

struct ConvTransposeCase {
  std::string name;
  Dims x;  // [N, C, spatial...]
  int64_t m;
  Dims kernel;
  int64_t group = 1;
  Dims strides = {}, dilations = {}, pads = {}, output_padding = {}, output_shape = {};
  std::string auto_pad = {};
  bool bias = true;
};

std::vector<ConvTransposeCase> ConvTransposeCases() {
  return {
      {"2d", {1, 3, 5, 5}, 2, {3, 3}},
      {"stride2_pads_output_padding", {2, 3, 4, 5}, 4, {3, 3}, 1, {2, 2}, {}, {1, 1, 1, 1}, {1, 1}},
      {"group2", {2, 4, 4, 5}, 6, {3, 3}, 2, {1, 2}},
      {"depthwise", {1, 4, 5, 5}, 4, {3, 3}, 4, {2, 2}},
      {"dilation2", {1, 2, 5, 4}, 3, {3, 3}, 1, {}, {2, 2}},
      {"asymmetric_pads", {1, 2, 4, 4}, 3, {3, 3}, 1, {2, 2}, {}, {0, 1, 1, 0}},
      {"output_shape_larger", {1, 2, 3, 3}, 2, {3, 3}, 1, {2, 2}, {}, {}, {}, {8, 8}},
      {"output_shape_odd_pads", {1, 2, 3, 3}, 2, {3, 3}, 1, {2, 2}, {}, {}, {}, {6, 6}},
      {"same_upper", {1, 2, 3, 4}, 3, {3, 3}, 1, {2, 2}, {}, {}, {}, {}, "SAME_UPPER"},
      {"same_lower", {1, 2, 3, 4}, 3, {4, 3}, 1, {2, 2}, {}, {}, {}, {}, "SAME_LOWER"},
      {"1d", {2, 3, 7}, 4, {3}, 1, {3}, {}, {}, {2}},
      {"3d", {1, 2, 3, 4, 3}, 2, {2, 3, 2}, 1, {2, 1, 2}, {}, {1, 0, 0, 1, 0, 1}},
      {"output_padding_below_dilation", {1, 2, 4, 4}, 2, {3, 3}, 1, {}, {2, 2}, {}, {1, 1}},
      {"no_bias_batch3", {3, 5, 3, 2}, 3, {2, 2}, 1, {2, 2}, {}, {}, {}, {}, "", false},
      {"single_element", {1, 1, 1, 1}, 1, {1, 1}},
      {"empty_batch", {0, 2, 3, 3}, 2, {2, 2}},
  };
}

OpTester ConvTransposeTester(const ConvTransposeCase& c, DType dtype) {
  OpTester t = Op("ConvTranspose", 17);
  if (c.group != 1) t.Attr(ir::Attribute::Int("group", c.group));
  if (!c.strides.empty()) t.Attr(ir::Attribute::Ints("strides", c.strides));
  if (!c.dilations.empty()) t.Attr(ir::Attribute::Ints("dilations", c.dilations));
  if (!c.pads.empty()) t.Attr(ir::Attribute::Ints("pads", c.pads));
  if (!c.output_padding.empty()) t.Attr(ir::Attribute::Ints("output_padding", c.output_padding));
  if (!c.output_shape.empty()) t.Attr(ir::Attribute::Ints("output_shape", c.output_shape));
  if (!c.auto_pad.empty()) t.Attr(ir::Attribute::String("auto_pad", c.auto_pad));
  Dims w = {c.x[1], c.m / c.group};
  w.insert(w.end(), c.kernel.begin(), c.kernel.end());
  t.Input(Random(dtype, c.x, 21)).Input(Random(dtype, w, 22));
  if (c.bias) t.Input(Random(dtype, {c.m}, 23));
  return t;
}

class CudaConvTransposeTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaConvTransposeTest, MatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (const ConvTransposeCase& c : ConvTransposeCases()) {
    ExpectConvMatches(ConvTransposeTester(c, GetParam()), "ConvTranspose " + c.name);
  }
}

TEST_P(CudaConvTransposeTest, DirectKernelMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (const ConvTransposeCase& c : ConvTransposeCases()) {
    ExpectConvMatches(DirectConv(ConvTransposeTester(c, GetParam())), "ConvTranspose (direct) " + c.name);
  }
}

INSTANTIATE_TEST_SUITE_P(Float, CudaConvTransposeTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

// ---- pooling ----------------------------------------------------------------------------------------------------

struct PoolCase {
  std::string name;
  Dims x;
  Dims kernel;
  Dims strides = {}, dilations = {}, pads = {};
  std::string auto_pad = {};
  int64_t ceil_mode = 0;
  int64_t count_include_pad = 0;  // AveragePool
  int64_t storage_order = 0;      // MaxPool
  bool max_only = false;          // windows entirely in the padding: an average over nothing is left out
};

std::vector<PoolCase> PoolCases() {
  return {
      {"2d_stride2", {2, 3, 9, 8}, {3, 3}, {2, 2}},
      {"2d_asymmetric_pads", {1, 2, 7, 6}, {3, 2}, {1, 1}, {}, {1, 0, 2, 1}},
      {"ceil_mode", {1, 3, 8, 7}, {3, 3}, {2, 2}, {}, {1, 1, 1, 1}, "", 1},
      {"ceil_mode_include_pad", {2, 2, 7, 7}, {3, 3}, {2, 2}, {}, {1, 1, 0, 0}, "", 1, 1},
      {"include_pad", {1, 2, 6, 5}, {3, 3}, {1, 1}, {}, {1, 2, 1, 0}, "", 0, 1},
      {"dilation2", {1, 2, 9, 9}, {3, 3}, {1, 2}, {2, 2}, {1, 1, 1, 1}},
      {"same_upper", {1, 3, 7, 8}, {4, 3}, {2, 2}, {}, {}, "SAME_UPPER"},
      {"same_lower", {1, 3, 7, 8}, {4, 3}, {2, 2}, {}, {}, "SAME_LOWER"},
      {"valid", {1, 1, 8, 9}, {2, 3}, {2, 2}, {}, {}, "VALID"},
      {"1d", {3, 4, 19}, {4}, {3}, {}, {1, 2}},
      {"3d", {1, 2, 5, 6, 7}, {2, 3, 2}, {2, 1, 2}, {}, {1, 0, 1, 0, 1, 1}, "", 1},
      {"4d_spatial", {1, 2, 3, 4, 3, 4}, {2, 2, 2, 2}, {1, 2, 1, 2}},
      {"window_all_padding", {1, 1, 2, 2}, {2, 2}, {3, 3}, {}, {2, 2, 2, 2}, "", 0, 0, 0, true},
      {"storage_order_column", {2, 2, 5, 6}, {2, 3}, {1, 2}, {}, {1, 0, 0, 1}, "", 0, 0, 1},
      {"empty_batch", {0, 2, 4, 4}, {2, 2}},
  };
}

OpTester PoolTester(const std::string& op, const PoolCase& c, DType dtype, int64_t opset) {
  OpTester t = Op(op, opset);
  t.Attr(ir::Attribute::Ints("kernel_shape", c.kernel));
  if (!c.strides.empty()) t.Attr(ir::Attribute::Ints("strides", c.strides));
  if (!c.dilations.empty()) t.Attr(ir::Attribute::Ints("dilations", c.dilations));
  if (!c.pads.empty()) t.Attr(ir::Attribute::Ints("pads", c.pads));
  if (!c.auto_pad.empty()) t.Attr(ir::Attribute::String("auto_pad", c.auto_pad));
  if (c.ceil_mode) t.Attr(ir::Attribute::Int("ceil_mode", c.ceil_mode));
  if (op == "AveragePool" && c.count_include_pad) t.Attr(ir::Attribute::Int("count_include_pad", 1));
  if (op == "MaxPool" && c.storage_order) t.Attr(ir::Attribute::Int("storage_order", c.storage_order));
  const bool integer = dtype == DType::kInt8 || dtype == DType::kUint8;
  t.Input(integer ? Random(dtype, c.x, 31, dtype == DType::kInt8 ? -120 : 0, dtype == DType::kInt8 ? 120 : 250)
                  : Random(dtype, c.x, 31, -4, 4));
  return t;
}

class CudaPoolTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaPoolTest, MaxPoolMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (const PoolCase& c : PoolCases()) {
    // A window entirely in the padding gives -inf; the CPU's oneDNN path (no Indices) may give the lowest float
    // instead, so that case is compared with Indices requested (the CPU's own loops).
    if (!c.max_only) ExpectCudaMatchesCpu(PoolTester("MaxPool", c, GetParam(), 12), "MaxPool " + c.name);
    OpTester with_indices = PoolTester("MaxPool", c, GetParam(), 12);
    with_indices.num_outputs = 2;
    ExpectCudaMatchesCpu(with_indices, "MaxPool with Indices " + c.name);
  }
}

TEST_P(CudaPoolTest, AveragePoolMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  if (GetParam() == DType::kInt8 || GetParam() == DType::kUint8) GTEST_SKIP() << "AveragePool takes float types";
  // Opset 19: AveragePool with dilations.
  for (const PoolCase& c : PoolCases()) {
    if (c.max_only) continue;
    ExpectCudaMatchesCpu(PoolTester("AveragePool", c, GetParam(), 19), "AveragePool " + c.name);
  }
}

TEST_P(CudaPoolTest, GlobalPoolsMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  if (GetParam() == DType::kInt8 || GetParam() == DType::kUint8) GTEST_SKIP() << "global pools take float types";
  // Planes of 1 to 3000 elements (more than one block's threads), rank 2 (one element per plane), no planes, and
  // more planes than blocks in the grid.
  for (const Dims& x : {Dims{2, 3, 5, 7}, Dims{1, 1, 1, 1}, Dims{3, 4, 3000}, Dims{4, 5}, Dims{0, 3, 4, 4},
                        Dims{70000, 1, 3}, Dims{1, 2, 3, 4, 5}}) {
    for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
      OpTester t = Op(op, 17);
      t.Input(Random(GetParam(), x, 41, -3, 3));
      ExpectCudaMatchesCpu(t, std::string(op) + " " + ops::ShapeToString(x));
    }
  }
}

std::vector<DType> PoolTypes() {
  std::vector<DType> types = FloatTypes();
  types.push_back(DType::kInt8);
  types.push_back(DType::kUint8);
  return types;
}

INSTANTIATE_TEST_SUITE_P(Types, CudaPoolTest, ::testing::ValuesIn(PoolTypes()), DTypeParamName());

TEST(CudaPoolNanTest, NanWins) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester t = Op("MaxPool", 12);
  t.Attr(ir::Attribute::Ints("kernel_shape", {2, 2}));
  t.Input(TensorOf(DType::kFloat32, {1, 1, 2, 3}, {1, NAN, 2, 3, 4, 5}));
  t.num_outputs = 2;
  ExpectCudaMatchesCpu(t, "MaxPool NaN");
  OpTester g = Op("GlobalMaxPool", 17);
  g.Input(TensorOf(DType::kFloat32, {1, 2, 3}, {1, NAN, 2, 3, 4, 5}));
  ExpectCudaMatchesCpu(g, "GlobalMaxPool NaN");
}

TEST(CudaPoolLargeTest, GridStride) {
  ONNXAMP_REQUIRE_CUDA();
  // 2 * 8 * 1024 * 1024 outputs > 65535 blocks * 256 threads.
  PoolCase c{"large", {2, 8, 1025, 1025}, {2, 2}, {1, 1}};
  OpTester max = PoolTester("MaxPool", c, DType::kFloat16, 12);
  max.num_outputs = 2;
  ExpectCudaMatchesCpu(max, "MaxPool large");
  ExpectCudaMatchesCpu(PoolTester("AveragePool", c, DType::kFloat32, 19), "AveragePool large");
}

// ---- BatchNormalization -----------------------------------------------------------------------------------------

// X of `dtype`, scale and B of `param`, mean and var of `stat` (var positive).
OpTester BatchNormTester(const Dims& x, int64_t params, DType dtype, DType param, DType stat, int64_t opset) {
  OpTester t = Op("BatchNormalization", opset);
  t.Input(Random(dtype, x, 51, -3, 3))
      .Input(Random(param, {params}, 52, -1.5, 1.5))
      .Input(Random(param, {params}, 53))
      .Input(Random(stat, {params}, 54, -0.5, 0.5))
      .Input(Random(stat, {params}, 55, 0.5, 2));
  return t;
}

class CudaBatchNormTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaBatchNormTest, InferenceMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const Dims& x : {Dims{2, 3, 4, 5}, Dims{1, 1, 1, 1}, Dims{8, 5}, Dims{3, 7, 2, 3, 5}, Dims{0, 3, 4}}) {
    OpTester t = BatchNormTester(x, x[1], dtype, dtype, dtype, 15);
    t.Attr(ir::Attribute::Float("epsilon", 1e-3f));
    ExpectCudaMatchesCpu(t, "BatchNormalization inference " + ops::ShapeToString(x));
  }
  // Opset 15 parameter types of their own: fp32 scale/B and statistics with X of this type.
  ExpectCudaMatchesCpu(BatchNormTester({2, 4, 3, 3}, 4, dtype, DType::kFloat32, DType::kFloat32, 15),
                       "BatchNormalization fp32 parameters");
  ExpectCudaMatchesCpu(BatchNormTester({2, 4, 3, 3}, 4, dtype, DType::kFloat16, DType::kFloat64, 15),
                       "BatchNormalization fp16/double parameters");
}

TEST_P(CudaBatchNormTest, TrainingMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const Dims& x : {Dims{4, 3, 5, 6}, Dims{1, 2, 1, 1}, Dims{16, 6}, Dims{2, 3, 40, 50}}) {
    // Opset 14+: Y, running_mean, running_var.
    OpTester t = BatchNormTester(x, x[1], dtype, dtype, DType::kFloat32, 15);
    t.Attr(ir::Attribute::Int("training_mode", 1)).Attr(ir::Attribute::Float("momentum", 0.8f));
    t.num_outputs = 3;
    ExpectCudaMatchesCpu(t, "BatchNormalization training " + ops::ShapeToString(x));
    // Only Y requested.
    OpTester y_only = t;
    y_only.omit_outputs = {false, true, true};
    ExpectCudaMatchesCpu(y_only, "BatchNormalization training, Y only " + ops::ShapeToString(x));
    // Before opset 14: training by the outputs requested; Y, mean, var, saved_mean, saved_var.
    OpTester old = BatchNormTester(x, x[1], dtype, dtype, dtype, 9);
    old.num_outputs = 5;
    ExpectCudaMatchesCpu(old, "BatchNormalization opset 9 training " + ops::ShapeToString(x));
  }
}

TEST_P(CudaBatchNormTest, SpatialZeroMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  // Opset 7, spatial = 0: one parameter per channel and position.
  for (int outputs : {1, 5}) {
    OpTester t = BatchNormTester({3, 2, 2, 3}, 12, dtype, dtype, dtype, 7);
    t.Attr(ir::Attribute::Int("spatial", 0));
    t.num_outputs = outputs;
    ExpectCudaMatchesCpu(t, "BatchNormalization spatial 0, outputs " + std::to_string(outputs));
  }
}

INSTANTIATE_TEST_SUITE_P(Float, CudaBatchNormTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(CudaBatchNormLargeTest, GridStride) {
  ONNXAMP_REQUIRE_CUDA();
  // 16 * 1050 * 1000 elements > 65535 blocks * 256 threads; training reduces 1.05M values per channel.
  OpTester t = BatchNormTester({1, 16, 1050, 1000}, 16, DType::kFloat32, DType::kFloat32, DType::kFloat32, 15);
  ExpectCudaMatchesCpu(t, "BatchNormalization large inference");
  t.Attr(ir::Attribute::Int("training_mode", 1));
  t.num_outputs = 3;
  ExpectCudaMatchesCpu(t, "BatchNormalization large training");
}

// ---- errors -----------------------------------------------------------------------------------------------------

// Expects both devices to refuse the node at session creation with a message containing `fragment`.
void ExpectCreateErrorOnBoth(OpTester t, const std::string& fragment) {
  for (exec::Device device : {exec::Device::kCpu, exec::Device::kCuda}) {
    t.options.device = device;
    auto session = exec::Session::Create(t.BuildModel(), t.options);
    ASSERT_FALSE(session.ok()) << exec::DeviceName(device) << ": expected an error containing: " << fragment;
    EXPECT_NE(session.status().message().find(fragment), std::string::npos)
        << exec::DeviceName(device) << ": " << session.status().message();
  }
}

TEST(CudaDnnErrorTest, AttributesRefusedAsOnCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const ConvCase conv{"c", {1, 2, 5, 5}, 2, {3, 3}};
  {
    OpTester t = ConvTester(conv, DType::kFloat32);
    t.Attr(ir::Attribute::Int("group", 0));
    ExpectCreateErrorOnBoth(t, "attribute 'group' must be >= 1, got 0");
  }
  {
    OpTester t = ConvTester(conv, DType::kFloat32);
    t.Attr(ir::Attribute::String("auto_pad", "FOO"));
    ExpectCreateErrorOnBoth(t, "attribute 'auto_pad' is 'FOO'");
  }
  {
    OpTester t = ConvTester(conv, DType::kFloat32, exec::kFusedConvOp, exec::kInternalDomain, 1);
    t.Attr(ir::Attribute::String("activation", "Tanh"));
    ExpectCreateErrorOnBoth(t, "attribute 'activation' is 'Tanh', expected 'Relu' or empty");
  }
  {
    OpTester t = ConvTransposeTester({"t", {1, 2, 3, 3}, 2, {3, 3}}, DType::kFloat32);
    t.Attr(ir::Attribute::Ints("strides", {0, 1}));
    ExpectCreateErrorOnBoth(t, "attribute 'strides' must hold values >= 1");
  }
  {
    OpTester t = PoolTester("MaxPool", {"p", {1, 1, 4, 4}, {2, 2}}, DType::kFloat32, 12);
    t.Attr(ir::Attribute::Int("storage_order", 2));
    ExpectCreateErrorOnBoth(t, "attribute 'storage_order' must be 0 or 1, got 2");
  }
  {
    OpTester t = PoolTester("AveragePool", {"p", {1, 1, 4, 4}, {2, 2}}, DType::kFloat32, 19);
    t.Attr(ir::Attribute::Int("ceil_mode", 2));
    ExpectCreateErrorOnBoth(t, "attributes 'ceil_mode' and 'count_include_pad' must be 0 or 1");
  }
  {
    OpTester t = Op("MaxPool", 12);
    t.Input(Random(DType::kFloat32, {1, 1, 4, 4}, 1));
    ExpectCreateErrorOnBoth(t, "attribute 'kernel_shape' is required");
  }
  {
    OpTester t = BatchNormTester({2, 3, 4}, 3, DType::kFloat32, DType::kFloat32, DType::kFloat32, 15);
    t.Attr(ir::Attribute::Float("epsilon", -1.0f));
    ExpectCreateErrorOnBoth(t, "attribute 'epsilon' must be >= 0");
  }
  {
    OpTester t = BatchNormTester({2, 3, 4}, 3, DType::kFloat32, DType::kFloat32, DType::kFloat32, 15);
    t.Attr(ir::Attribute::Int("training_mode", 2));
    ExpectCreateErrorOnBoth(t, "attribute 'training_mode' must be 0 or 1, got 2");
  }
}

TEST(CudaDnnErrorTest, InputErrorsAtRun) {
  ONNXAMP_REQUIRE_CUDA();
  {
    // W expects 3 input channels, X has 2.
    OpTester t = Op("Conv", 17);
    t.Input(Random(DType::kFloat32, {1, 2, 5, 5}, 1)).Input(Random(DType::kFloat32, {4, 3, 3, 3}, 2));
    ExpectCudaRunError(t, "channels but W");
  }
  {
    // The window is larger than the padded input.
    OpTester t = PoolTester("MaxPool", {"p", {1, 1, 2, 2}, {3, 3}}, DType::kFloat32, 12);
    ExpectCudaRunError(t, "is larger than the input");
  }
  {
    OpTester t = Op("GlobalAveragePool", 17);
    t.Input(Random(DType::kFloat32, {2, 3, 0}, 1));
    ExpectCudaRunError(t, "has no spatial elements to pool");
  }
  {
    OpTester t = BatchNormTester({2, 3, 4}, 4, DType::kFloat32, DType::kFloat32, DType::kFloat32, 15);
    ExpectCudaRunError(t, "input 1 (scale): expected 3 elements");
  }
}

}  // namespace
}  // namespace onnxamp::testing
