// CUDA kernels of the channels-last ops (ChannelsLastConv, ChannelsLastMaxPool, ChannelsLastAveragePool,
// ChannelsLastGlobalAveragePool; see graph_optimizer.h) against the CPU reference kernels of the same ops, and that
// reference against the plain op (FusedConv, MaxPool, AveragePool, GlobalAveragePool) on the same values with the
// channels moved: odd channel counts, batch 1 and 3, 1-D/2-D/3-D, strides, dilations, groups and depthwise,
// symmetric and asymmetric pads, bias or none, Z of Y's shape or broadcast, Relu, the direct kernels
// (ONNXAMP_CUDA_CONV_DIRECT=1), the pools' ceil_mode, pads, count_include_pad and dilations, grid-stride sizes, the
// errors; and a small fp16 ResNet-like model whose CUDA session runs its convolution chain channels-last.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
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
using op_test::RandomValues;
using op_test::TensorOf;

// `t` with its dims permuted: dim i of the result is dim perm[i] of t (any element type, by bytes).
ir::Tensor Permute(const ir::Tensor& t, const std::vector<size_t>& perm) {
  const Dims& in = t.dims();
  const size_t rank = in.size();
  Dims out_dims(rank);
  for (size_t i = 0; i < rank; ++i) out_dims[i] = in[perm[i]];
  ir::Tensor out(t.dtype(), out_dims);
  const size_t elem = static_cast<size_t>(DTypeBits(t.dtype()) / 8);
  Dims in_strides(rank, 1);
  for (size_t d = rank; d-- > 1;) in_strides[d - 1] = in_strides[d] * in[d];
  const int64_t count = Count(out_dims);
  const std::byte* src = t.data();
  std::byte* dst = out.mutable_data();
  Dims coord(rank, 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t offset = 0;
    for (size_t d = 0; d < rank; ++d) offset += coord[d] * in_strides[perm[d]];
    std::memcpy(dst + static_cast<size_t>(i) * elem, src + static_cast<size_t>(offset) * elem, elem);
    for (size_t d = rank; d-- > 0;) {  // next output coordinate, row-major
      if (++coord[d] < out_dims[d]) break;
      coord[d] = 0;
    }
  }
  return out;
}

// [N, C, spatial...] -> [N, spatial..., C] (W [M, C/g, k...] -> [M, k..., C/g]).
ir::Tensor ToChannelsLast(const ir::Tensor& t) {
  std::vector<size_t> perm = {0};
  for (size_t d = 2; d < t.dims().size(); ++d) perm.push_back(d);
  perm.push_back(1);
  return Permute(t, perm);
}

Dims ChannelsLastDims(const Dims& logical) {
  Dims out = {logical[0]};
  out.insert(out.end(), logical.begin() + 2, logical.end());
  out.push_back(logical[1]);
  return out;
}

std::vector<DType> ChannelsLastTypes() { return {DType::kFloat32, DType::kFloat16, DType::kBFloat16}; }

// The channels-last node on CUDA against its CPU reference (ExpectCudaMatchesCpu with `tol`), and that reference
// against `plain` (the plain op on the same values in NCHW order) with its output moved to channels-last
// (`move_output`; GlobalAveragePool's output is the same in both).
void ExpectMatches(const OpTester& cl, const OpTester& plain, bool move_output, const std::string& what,
                   Tolerance tol) {
  ExpectCudaMatchesCpu(cl, what, tol);
  StatusOr<std::vector<ir::Tensor>> ref = cl.Run();
  ASSERT_TRUE(ref.ok()) << what << ": cpu channels-last: " << ref.status().message();
  StatusOr<std::vector<ir::Tensor>> want = plain.Run();
  ASSERT_TRUE(want.ok()) << what << ": cpu plain: " << want.status().message();
  const ir::Tensor expected = move_output ? ToChannelsLast((*want)[0]) : (*want)[0];
  ASSERT_EQ((*ref)[0].dims(), expected.dims()) << what;
  ExpectClose((*ref)[0], AsDoubles(expected), what + " (cpu reference vs plain op)", ToleranceFor(expected.dtype()));
}

// ---- ChannelsLastConv -------------------------------------------------------------------------------------------

std::vector<ConvCase> ConvCases() {
  return {
      {"2d_c3_pads", {1, 3, 8, 8}, 4, {3, 3}, 1, {}, {}, {1, 1, 1, 1}},
      {"2d_c7_batch3_stride2", {3, 7, 9, 10}, 5, {3, 3}, 1, {2, 2}, {}, {1, 1, 1, 1}},
      {"2d_c17_dilation2", {1, 17, 11, 10}, 8, {3, 3}, 1, {}, {2, 2}, {2, 2, 2, 2}},
      {"2d_asymmetric_pads", {2, 7, 7, 6}, 6, {3, 2}, 1, {}, {}, {0, 1, 2, 0}},
      {"2d_group2", {2, 8, 7, 6}, 6, {3, 3}, 2, {}, {}, {1, 1, 1, 1}},
      {"depthwise", {2, 16, 9, 9}, 16, {3, 3}, 16, {}, {}, {1, 1, 1, 1}},
      {"depthwise_c7_stride2", {1, 7, 6, 6}, 7, {3, 3}, 7, {2, 2}},
      {"depthwise_multiplier2", {3, 3, 6, 5}, 6, {3, 3}, 3, {1, 2}, {}, {1, 0, 1, 1}},
      {"same_upper", {1, 3, 7, 8}, 4, {4, 3}, 1, {2, 2}, {}, {}, "SAME_UPPER"},
      {"valid_m17", {1, 3, 9, 7}, 17, {3, 3}, 1, {2, 1}, {}, {}, "VALID"},
      {"1d_asymmetric", {3, 5, 17}, 6, {5}, 1, {2}, {}, {2, 1}},
      {"1d_c17_no_bias", {1, 17, 20}, 3, {3}, 1, {}, {2}, {1, 1}, "", false},
      {"3d", {1, 3, 5, 6, 7}, 4, {3, 3, 3}, 1, {}, {}, {1, 1, 1, 1, 1, 1}},
      {"3d_c7_strided_asymmetric", {2, 7, 6, 5, 4}, 3, {2, 3, 2}, 1, {2, 1, 2}, {}, {0, 1, 1, 1, 0, 0}},
      {"1x1_no_bias", {2, 16, 5, 5}, 8, {1, 1}, 1, {}, {}, {}, "", false},
      {"single_element", {1, 1, 1, 1}, 1, {1, 1}},
      {"wide_reduction", {1, 64, 9, 9}, 32, {3, 3}, 1, {}, {}, {1, 1, 1, 1}},
      {"empty_batch", {0, 3, 5, 5}, 4, {3, 3}},
  };
}

// Z of the residual: none, Y's shape, per output channel ([1, 1.., M]), per position ([1, out..., 1]), or growing a
// batch of 1 to 3 ([3, out..., M]).
enum class ZKind { kNone, kSame, kChannel, kSpatial, kGrowBatch };

struct ConvPair {
  OpTester cl;     // ChannelsLastConv on channels-last tensors
  OpTester plain;  // FusedConv on the same values in NCHW order
};

// Y's logical dims for `c` (the plain convolution on the CPU).
Dims ConvOutputDims(const ConvCase& c);

ConvPair MakeConvPair(const ConvCase& c, DType dtype, bool relu, bool bias, ZKind z_kind) {
  ConvPair p{InternalOp(exec::kChannelsLastConvOp), InternalOp(exec::kFusedConvOp)};
  for (OpTester* t : {&p.cl, &p.plain}) {
    if (c.group != 1) t->Attr(ir::Attribute::Int("group", c.group));
    if (!c.strides.empty()) t->Attr(ir::Attribute::Ints("strides", c.strides));
    if (!c.dilations.empty()) t->Attr(ir::Attribute::Ints("dilations", c.dilations));
    if (!c.pads.empty()) t->Attr(ir::Attribute::Ints("pads", c.pads));
    if (!c.auto_pad.empty()) t->Attr(ir::Attribute::String("auto_pad", c.auto_pad));
    if (relu) t->Attr(ir::Attribute::String("activation", "Relu"));
  }
  Dims w_dims = {c.m, c.x[1] / c.group};
  w_dims.insert(w_dims.end(), c.kernel.begin(), c.kernel.end());
  const ir::Tensor x = Random(dtype, c.x, 11), w = Random(dtype, w_dims, 12);
  p.plain.Input(x).Input(w);
  p.cl.Input(ToChannelsLast(x)).Input(ToChannelsLast(w));
  if (bias) {
    const ir::Tensor b = Random(dtype, {c.m}, 13);
    p.plain.Input(b);
    p.cl.Input(b);
  }
  if (z_kind != ZKind::kNone) {
    const Dims y = ConvOutputDims(c);
    Dims z = y;
    if (z_kind == ZKind::kChannel) {
      z.assign(y.size(), 1);
      z[1] = y[1];
    } else if (z_kind == ZKind::kSpatial) {
      z[0] = 1;
      z[1] = 1;
    } else if (z_kind == ZKind::kGrowBatch) {
      z[0] = 3;
    }
    if (!bias) {
      p.plain.OmittedInput();
      p.cl.OmittedInput();
    }
    const ir::Tensor zt = Random(dtype, z, 14);
    p.plain.Input(zt);
    p.cl.Input(ToChannelsLast(zt));
  }
  return p;
}

Dims ConvOutputDims(const ConvCase& c) {
  ConvPair p = MakeConvPair(c, DType::kFloat32, false, false, ZKind::kNone);
  StatusOr<std::vector<ir::Tensor>> out = p.plain.Run();
  EXPECT_TRUE(out.ok()) << c.name << ": " << out.status().message();
  return out.ok() ? (*out)[0].dims() : Dims{};
}

// The CUDA convolution against the CPU's, with ConvTolerance; the CPU's against the plain op's.
// `p` with both sides' convolutions forced onto the direct kernels (KernelOptions::cuda_conv_direct).
ConvPair Direct(ConvPair p) {
  p.cl.options.kernels.cuda_conv_direct = true;
  p.plain.options.kernels.cuda_conv_direct = true;
  return p;
}

void ExpectConvMatches(const ConvPair& p, const std::string& what) {
  StatusOr<std::vector<ir::Tensor>> cpu = p.cl.Run();
  ASSERT_TRUE(cpu.ok()) << what << ": cpu: " << cpu.status().message();
  ExpectMatches(p.cl, p.plain, /*move_output=*/true, what, ConvTolerance(p.cl, (*cpu)[0]));
}

class CudaChannelsLastConvTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaChannelsLastConvTest, MatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (const ConvCase& c : ConvCases()) {
    for (bool relu : {false, true}) {
      ExpectConvMatches(MakeConvPair(c, GetParam(), relu, c.bias, ZKind::kNone),
                        "ChannelsLastConv " + c.name + (relu ? " relu" : ""));
    }
  }
}

struct ZVariant {
  std::string name;
  bool relu;
  bool bias;
  ZKind z;
};

std::vector<ZVariant> ZVariants() {
  return {
      {"bias_z_relu", true, true, ZKind::kSame},  // cudnnConvolutionBiasActivationForward where it applies
      {"z_relu_no_bias", true, false, ZKind::kSame},
      {"bias_z_no_activation", false, true, ZKind::kSame},
      {"z_per_channel_relu", true, true, ZKind::kChannel},
      {"z_per_position", false, true, ZKind::kSpatial},
      {"z_per_channel_no_bias", false, false, ZKind::kChannel},
  };
}

TEST_P(CudaChannelsLastConvTest, ResidualZ) {
  ONNXAMP_REQUIRE_CUDA();
  const std::vector<ConvCase> cases = {
      {"2d_c7_batch3", {3, 7, 7, 6}, 6, {3, 3}, 1, {}, {}, {1, 1, 1, 1}},
      {"2d_asymmetric_group2", {1, 4, 7, 6}, 4, {3, 3}, 2, {2, 1}, {}, {0, 1, 1, 0}},
      {"1d_c17", {2, 17, 12}, 5, {3}, 1, {}, {}, {1, 1}},
      {"3d_c3", {1, 3, 4, 5, 6}, 7, {3, 3, 3}, 1, {}, {}, {1, 1, 1, 1, 1, 1}},
      {"depthwise_c17", {1, 17, 6, 6}, 17, {3, 3}, 17, {}, {}, {1, 1, 1, 1}},
  };
  for (const ConvCase& c : cases) {
    for (const ZVariant& v : ZVariants()) {
      ExpectConvMatches(MakeConvPair(c, GetParam(), v.relu, v.bias, v.z), "ChannelsLastConv " + c.name + " " + v.name);
    }
    // A Z of batch 3 over a Y of batch 1 makes Y of batch 3 (same rank, numpy broadcasting).
    if (c.x[0] == 1) {
      ExpectConvMatches(MakeConvPair(c, GetParam(), true, true, ZKind::kGrowBatch),
                        "ChannelsLastConv " + c.name + " z_grows_batch");
    }
  }
}

TEST_P(CudaChannelsLastConvTest, DirectKernelsMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (const ConvCase& c : ConvCases()) {
    ExpectConvMatches(Direct(MakeConvPair(c, GetParam(), false, c.bias, ZKind::kNone)),
                      "ChannelsLastConv (direct) " + c.name);
    if (c.x[0] == 0) continue;
    ExpectConvMatches(Direct(MakeConvPair(c, GetParam(), true, c.bias, ZKind::kSame)),
                      "ChannelsLastConv (direct) " + c.name + " z relu");
    ExpectConvMatches(Direct(MakeConvPair(c, GetParam(), true, true, ZKind::kChannel)),
                      "ChannelsLastConv (direct) " + c.name + " z per channel relu");
  }
}

TEST_P(CudaChannelsLastConvTest, SecondRunWithNewShape) {
  ONNXAMP_REQUIRE_CUDA();
  // One session, three input shapes: the kernel's cached plan (keyed on the logical shapes) must follow them.
  const DType dtype = GetParam();
  ConvPair p =
      MakeConvPair({"rerun", {1, 3, 6, 6}, 4, {3, 3}, 1, {}, {}, {1, 1, 1, 1}}, dtype, true, true, ZKind::kNone);
  std::vector<ir::Tensor> xs;
  for (const Dims& x_dims : {Dims{1, 3, 6, 6}, Dims{2, 3, 9, 5}, Dims{1, 3, 6, 6}}) {
    xs.push_back(ToChannelsLast(Random(dtype, x_dims, static_cast<uint32_t>(x_dims[0] * 100 + x_dims[2]))));
  }
  ExpectConvRerunsMatchCpu(
      p.cl, ir::Shape{ir::Dim::Param("N"), ir::Dim::Param("H"), ir::Dim::Param("W"), ir::Dim::Value(3)}, xs);
}

INSTANTIATE_TEST_SUITE_P(Float, CudaChannelsLastConvTest, ::testing::ValuesIn(ChannelsLastTypes()), DTypeParamName());

TEST(CudaChannelsLastConvDoubleTest, MatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  // double: cuDNN has no NHWC double convolution, so this takes the direct kernel without being forced to.
  for (const ConvCase& c : ConvCases()) {
    ExpectConvMatches(MakeConvPair(c, DType::kFloat64, true, c.bias, ZKind::kNone),
                      "ChannelsLastConv double " + c.name);
  }
}

TEST(CudaChannelsLastConvLargeTest, GridStride) {
  ONNXAMP_REQUIRE_CUDA();
  // 4 * 2050 * 2050 outputs > 65535 blocks * 256 threads: the epilogue's and the direct kernel's grid-stride loops
  // wrap.
  const ConvCase c{"large_1x1", {1, 2, 2050, 2050}, 4, {1, 1}};
  ExpectConvMatches(MakeConvPair(c, DType::kFloat16, true, true, ZKind::kChannel), "ChannelsLastConv large fp16");
  ExpectConvMatches(Direct(MakeConvPair(c, DType::kFloat32, false, true, ZKind::kNone)),
                    "ChannelsLastConv large fp32 (direct)");
}

// ---- ChannelsLastMaxPool / ChannelsLastAveragePool --------------------------------------------------------------

struct PoolCase {
  std::string name;
  Dims x;  // logical [N, C, spatial...]
  Dims kernel;
  Dims strides = {}, dilations = {}, pads = {};
  std::string auto_pad = {};
  int64_t ceil_mode = 0;
  int64_t count_include_pad = 0;  // AveragePool
};

std::vector<PoolCase> PoolCases() {
  return {
      {"2d_c3_stride2", {2, 3, 9, 8}, {3, 3}, {2, 2}},
      {"2d_c7_asymmetric_pads", {1, 7, 7, 6}, {3, 2}, {1, 1}, {}, {1, 0, 2, 1}},
      {"ceil_mode_c17", {1, 17, 8, 7}, {3, 3}, {2, 2}, {}, {1, 1, 1, 1}, "", 1},
      {"ceil_mode_include_pad_batch3", {3, 7, 7, 7}, {3, 3}, {2, 2}, {}, {1, 1, 0, 0}, "", 1, 1},
      {"include_pad", {1, 3, 6, 5}, {3, 3}, {1, 1}, {}, {1, 2, 1, 0}, "", 0, 1},
      {"dilation2", {1, 7, 9, 9}, {3, 3}, {1, 2}, {2, 2}, {1, 1, 1, 1}},
      {"same_upper", {1, 3, 7, 8}, {4, 3}, {2, 2}, {}, {}, "SAME_UPPER"},
      {"same_lower", {2, 17, 7, 8}, {4, 3}, {2, 2}, {}, {}, "SAME_LOWER"},
      {"1d", {3, 7, 19}, {4}, {3}, {}, {1, 2}},
      {"3d", {1, 3, 5, 6, 7}, {2, 3, 2}, {2, 1, 2}, {}, {1, 0, 1, 0, 1, 1}, "", 1},
      {"3d_include_pad", {2, 17, 4, 5, 3}, {3, 3, 3}, {1, 2, 1}, {}, {1, 1, 1, 1, 1, 1}, "", 0, 1},
      {"single_channel", {1, 1, 5, 5}, {2, 2}},
      {"empty_batch", {0, 3, 4, 4}, {2, 2}},
  };
}

// The channels-last pool and the plain one (opset 19: AveragePool with dilations) on the same values.
std::pair<OpTester, OpTester> MakePoolPair(bool max, const PoolCase& c, DType dtype) {
  OpTester cl = InternalOp(max ? exec::kChannelsLastMaxPoolOp : exec::kChannelsLastAveragePoolOp);
  OpTester plain = op_test::Op(max ? "MaxPool" : "AveragePool", 19);
  for (OpTester* t : {&cl, &plain}) {
    t->Attr(ir::Attribute::Ints("kernel_shape", c.kernel));
    if (!c.strides.empty()) t->Attr(ir::Attribute::Ints("strides", c.strides));
    if (!c.dilations.empty()) t->Attr(ir::Attribute::Ints("dilations", c.dilations));
    if (!c.pads.empty()) t->Attr(ir::Attribute::Ints("pads", c.pads));
    if (!c.auto_pad.empty()) t->Attr(ir::Attribute::String("auto_pad", c.auto_pad));
    if (c.ceil_mode) t->Attr(ir::Attribute::Int("ceil_mode", c.ceil_mode));
    if (!max && c.count_include_pad) t->Attr(ir::Attribute::Int("count_include_pad", 1));
  }
  const bool integer = dtype == DType::kInt8 || dtype == DType::kUint8;
  const ir::Tensor x =
      integer ? Random(dtype, c.x, 31, dtype == DType::kInt8 ? -120 : 0, 120) : Random(dtype, c.x, 31, -4, 4);
  plain.Input(x);
  cl.Input(ToChannelsLast(x));
  return {cl, plain};
}

class CudaChannelsLastPoolTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaChannelsLastPoolTest, MaxPoolMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (const PoolCase& c : PoolCases()) {
    auto [cl, plain] = MakePoolPair(true, c, GetParam());
    ExpectMatches(cl, plain, /*move_output=*/true, "ChannelsLastMaxPool " + c.name, CudaToleranceFor(GetParam()));
  }
}

TEST_P(CudaChannelsLastPoolTest, AveragePoolMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (const PoolCase& c : PoolCases()) {
    auto [cl, plain] = MakePoolPair(false, c, GetParam());
    ExpectMatches(cl, plain, /*move_output=*/true, "ChannelsLastAveragePool " + c.name, CudaToleranceFor(GetParam()));
  }
}

TEST_P(CudaChannelsLastPoolTest, GlobalAveragePoolMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  // Odd channel counts and position counts, 1 to 3 spatial dims, more positions than a block has threads, no
  // images, and more (image, channel) pairs than one block covers.
  for (const Dims& x : {Dims{2, 3, 5, 7}, Dims{1, 17, 1, 1}, Dims{3, 7, 3000}, Dims{1, 1, 1}, Dims{0, 3, 4, 4},
                        Dims{3, 17, 3, 4, 5}, Dims{5, 300, 7}}) {
    OpTester cl = InternalOp(exec::kChannelsLastGlobalAveragePoolOp);
    OpTester plain = op_test::Op("GlobalAveragePool", 17);
    const ir::Tensor t = Random(GetParam(), x, 41, -3, 3);
    plain.Input(t);
    cl.Input(ToChannelsLast(t));
    ExpectMatches(cl, plain, /*move_output=*/false, "ChannelsLastGlobalAveragePool " + ops::ShapeToString(x),
                  CudaToleranceFor(GetParam()));
  }
}

std::vector<DType> PoolTypes() { return {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}; }

INSTANTIATE_TEST_SUITE_P(Float, CudaChannelsLastPoolTest, ::testing::ValuesIn(PoolTypes()), DTypeParamName());

TEST(CudaChannelsLastPoolInt8Test, MaxPoolMatchesPlainOp) {
  ONNXAMP_REQUIRE_CUDA();
  // The CUDA kernel takes int8/uint8 as MaxPool does; the CPU reference of the channels-last op is float only, so
  // the plain MaxPool on the CPU is the reference.
  for (DType dtype : {DType::kInt8, DType::kUint8}) {
    for (const PoolCase& c : PoolCases()) {
      auto [cl, plain] = MakePoolPair(true, c, dtype);
      StatusOr<std::vector<ir::Tensor>> got = RunOnCuda(cl);
      ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().message();
      StatusOr<std::vector<ir::Tensor>> want = plain.Run();
      ASSERT_TRUE(want.ok()) << c.name << ": " << want.status().message();
      const ir::Tensor expected = ToChannelsLast((*want)[0]);
      ASSERT_EQ((*got)[0].dims(), expected.dims()) << c.name;
      ExpectClose((*got)[0], AsDoubles(expected), "ChannelsLastMaxPool " + c.name, Tolerance{0, 0});
    }
  }
}

TEST(CudaChannelsLastPoolNanTest, NanWins) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester t = InternalOp(exec::kChannelsLastMaxPoolOp);
  t.Attr(ir::Attribute::Ints("kernel_shape", {2, 2}));
  // X [1, 2, 3, 2] (H 2, W 3, C 2): channel 0 has a NaN at (0, 1), in both of its windows; channel 1 none. Double:
  // the CPU reference then runs its own loops (NaN wins), not oneDNN's.
  t.Input(TensorOf(DType::kFloat64, {1, 2, 3, 2}, {1, 6, NAN, 5, 2, 4, 3, 3, 4, 2, 5, 1}));
  ExpectCudaMatchesCpu(t, "ChannelsLastMaxPool NaN");
}

TEST(CudaChannelsLastPoolLargeTest, GridStride) {
  ONNXAMP_REQUIRE_CUDA();
  // 2 * 1024 * 1024 * 8 outputs > 65535 blocks * 256 threads; 70000 * 241 (image, channel) pairs likewise.
  const PoolCase c{"large", {2, 8, 1025, 1025}, {2, 2}, {1, 1}};
  auto [max_cl, max_plain] = MakePoolPair(true, c, DType::kFloat16);
  ExpectMatches(max_cl, max_plain, true, "ChannelsLastMaxPool large", CudaToleranceFor(DType::kFloat16));
  auto [avg_cl, avg_plain] = MakePoolPair(false, c, DType::kFloat32);
  ExpectMatches(avg_cl, avg_plain, true, "ChannelsLastAveragePool large", CudaToleranceFor(DType::kFloat32));
  OpTester gap = InternalOp(exec::kChannelsLastGlobalAveragePoolOp);
  gap.Input(Random(DType::kFloat16, {70000, 2, 241}, 43, -3, 3));
  ExpectCudaMatchesCpu(gap, "ChannelsLastGlobalAveragePool large");
}

// ---- errors -----------------------------------------------------------------------------------------------------

// Expects both devices to refuse the node (at creation or when it runs) with a message containing `fragment`.
void ExpectRefusedOnBoth(OpTester t, const std::string& fragment) {
  for (exec::Device device : {exec::Device::kCpu, exec::Device::kCuda}) {
    t.options.device = device;
    std::string message;
    auto session = exec::Session::Create(t.BuildModel(), t.options);
    if (!session.ok()) {
      message = session.status().message();
    } else {
      StatusOr<std::vector<ir::Tensor>> out = (*session)->Run(t.Feeds());
      ASSERT_FALSE(out.ok()) << exec::DeviceName(device) << ": expected an error containing: " << fragment;
      message = out.status().message();
    }
    EXPECT_NE(message.find(fragment), std::string::npos) << exec::DeviceName(device) << ": " << message;
  }
}

// ChannelsLastConv of X [1, 5, 5, 2] with pads 1 (Y [1, 5, 5, 4] for W [4, 3, 3, 2]).
OpTester ConvWith(const Dims& w, std::optional<Dims> z = std::nullopt) {
  OpTester t = InternalOp(exec::kChannelsLastConvOp);
  t.Attr(ir::Attribute::Ints("pads", {1, 1, 1, 1}));
  t.Input(Random(DType::kFloat32, {1, 5, 5, 2}, 1)).Input(Random(DType::kFloat32, w, 2));
  if (z) t.OmittedInput().Input(Random(DType::kFloat32, *z, 3));
  return t;
}

TEST(CudaChannelsLastErrorTest, RefusedAsOnCpu) {
  ONNXAMP_REQUIRE_CUDA();
  // W of the wrong rank: checked on the logical dims, so both name W [4,2,3] against X [1,2,5,5].
  ExpectRefusedOnBoth(ConvWith({4, 3, 2}), "input W has shape [4,2,3], expected rank 4");
  // W for 3 input channels, X has 2.
  ExpectRefusedOnBoth(ConvWith({4, 3, 3, 3}), "channels but W");
  // Z that does not broadcast against Y [1, 5, 5, 4].
  ExpectRefusedOnBoth(ConvWith({4, 3, 3, 2}, Dims{1, 5, 5, 3}), "cannot be broadcast");
  // Z of another rank than X.
  ExpectRefusedOnBoth(ConvWith({4, 3, 3, 2}, Dims{5, 5, 4}), "expected a channels-last tensor of 4 dims like X");
  {
    OpTester t = ConvWith({4, 3, 3, 2});
    t.Attr(ir::Attribute::String("activation", "Tanh"));
    ExpectRefusedOnBoth(t, "attribute 'activation' is 'Tanh', expected 'Relu' or empty");
  }
  {
    // Four spatial dims: the channels-last ops take 1 to 3.
    OpTester t = InternalOp(exec::kChannelsLastConvOp);
    t.Input(Random(DType::kFloat32, {1, 3, 3, 3, 3, 2}, 1)).Input(Random(DType::kFloat32, {2, 1, 1, 1, 1, 2}, 2));
    ExpectRefusedOnBoth(t, "of 1 to 3 spatial dims");
  }
  {
    OpTester t = InternalOp(exec::kChannelsLastMaxPoolOp);
    t.Attr(ir::Attribute::Ints("kernel_shape", {2}));
    t.Input(Random(DType::kFloat32, {1, 4, 4, 2}, 1));
    ExpectRefusedOnBoth(t, "attribute 'kernel_shape' [2] has 1 dims but input X [1,2,4,4] has 2 spatial dims");
  }
  {
    OpTester t = InternalOp(exec::kChannelsLastAveragePoolOp);
    t.Attr(ir::Attribute::Ints("kernel_shape", {2, 2})).Attr(ir::Attribute::Int("ceil_mode", 2));
    t.Input(Random(DType::kFloat32, {1, 4, 4, 2}, 1));
    ExpectRefusedOnBoth(t, "attributes 'ceil_mode' and 'count_include_pad' must be 0 or 1");
  }
  {
    OpTester t = InternalOp(exec::kChannelsLastGlobalAveragePoolOp);
    t.Input(Random(DType::kFloat32, {2, 3}, 1));
    ExpectRefusedOnBoth(t, "of 1 to 3 spatial dims");
  }
}

// ---- a session: the layout pass on an fp16 ResNet-like model ----------------------------------------------------

// X [2, 3, 16, 16] -> Conv+Relu -> Conv+Relu -> Conv + residual Add + Relu -> MaxPool -> Conv(stride 2)+Relu ->
// GlobalAveragePool -> Flatten -> Gemm -> Y [2, 10], all fp16 with constant weights.
ir::Model ResNetLikeModel(DType dtype) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  uint32_t seed = 100;
  auto init = [&](const std::string& name, const Dims& dims, double scale) {
    ir::Value* v = g.CreateValue(name);
    ir::Shape shape;
    for (int64_t d : dims) shape.push_back(ir::Dim::Value(d));
    v->set_type(ir::ValueType::Tensor(dtype, shape));
    g.SetInitializer(v, Random(dtype, dims, ++seed, -scale, scale));
    return v;
  };
  auto node = [&](const std::string& op, std::vector<ir::Value*> ins, const std::string& out,
                  std::vector<ir::Attribute> attrs = {}) {
    ir::Value* v = g.CreateValue(out);
    ir::Node* n = g.AddNode(op, std::move(ins), {v}, out + "_node");
    for (const ir::Attribute& a : attrs) n->SetAttribute(a);
    return v;
  };
  auto conv = [&](ir::Value* x, int64_t c, int64_t m, const std::string& name, int64_t stride) {
    ir::Value* w = init(name + "_w", {m, c, 3, 3}, 1.0 / std::sqrt(9.0 * static_cast<double>(c)));
    ir::Value* b = init(name + "_b", {m}, 0.1);
    return node("Conv", {x, w, b}, name,
                {ir::Attribute::Ints("pads", {1, 1, 1, 1}), ir::Attribute::Ints("strides", {stride, stride})});
  };
  ir::Value* x = g.CreateValue("X");
  x->set_type(ir::ValueType::Tensor(
      dtype, ir::Shape{ir::Dim::Value(2), ir::Dim::Value(3), ir::Dim::Value(16), ir::Dim::Value(16)}));
  g.AddInput(x);
  ir::Value* r1 = node("Relu", {conv(x, 3, 8, "conv1", 1)}, "relu1");
  ir::Value* r2 = node("Relu", {conv(r1, 8, 8, "conv2", 1)}, "relu2");
  ir::Value* sum = node("Add", {conv(r2, 8, 8, "conv3", 1), r1}, "residual");
  ir::Value* r3 = node("Relu", {sum}, "relu3");
  ir::Value* pooled = node("MaxPool", {r3}, "pool",
                           {ir::Attribute::Ints("kernel_shape", {2, 2}), ir::Attribute::Ints("strides", {2, 2})});
  ir::Value* r4 = node("Relu", {conv(pooled, 8, 16, "conv4", 2)}, "relu4");
  ir::Value* gap = node("GlobalAveragePool", {r4}, "gap");
  ir::Value* flat = node("Flatten", {gap}, "flat", {ir::Attribute::Int("axis", 1)});
  ir::Value* y = node("Gemm", {flat, init("fc_w", {16, 10}, 0.25), init("fc_b", {10}, 0.1)}, "Y");
  g.AddOutput(y);
  return m;
}

int CountOp(const ir::Model& m, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : m.graph->nodes()) n += node->op_type() == op;
  return n;
}

TEST(CudaChannelsLastSessionTest, ResNetLikeFp16MatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = DType::kFloat16;
  ir::Tensor x = Random(dtype, {2, 3, 16, 16}, 7, -2, 2);
  x.set_name("X");
  std::vector<ir::Tensor> want;
  {
    exec::SessionOptions cpu_options;
    cpu_options.num_threads = 1;
    auto cpu = exec::Session::Create(ResNetLikeModel(dtype), cpu_options);
    ASSERT_TRUE(cpu.ok()) << cpu.status().message();
    StatusOr<std::vector<ir::Tensor>> out = (*cpu)->Run({x});
    ASSERT_TRUE(out.ok()) << out.status().message();
    want = std::move(out).value();
  }
  for (bool channels_last : {true, false}) {
    const std::string what = channels_last ? "channels-last on" : "channels-last off";
    exec::SessionOptions options;
    options.device = exec::Device::kCuda;
    options.num_threads = 1;
    options.channels_last = channels_last;
    auto session = exec::Session::Create(ResNetLikeModel(dtype), options);
    ASSERT_TRUE(session.ok()) << what << ": " << session.status().message();
    const ir::Model& optimized = (*session)->model();
    const int cl_convs = CountOp(optimized, exec::kChannelsLastConvOp);
    if (channels_last) {
      // The four convolutions form one chain (through the residual Add, the MaxPool and into GlobalAveragePool).
      EXPECT_GT(cl_convs, 0) << what << ": the layout pass made no ChannelsLastConv";
      EXPECT_EQ(CountOp(optimized, "Conv") + CountOp(optimized, exec::kFusedConvOp), 0) << what;
    } else {
      EXPECT_EQ(cl_convs, 0) << what;
      EXPECT_EQ(CountOp(optimized, exec::kChannelsLastMaxPoolOp), 0) << what;
    }
    // Every channels-last node runs on the device.
    for (const std::string& on_cpu : (*session)->placement().on_cpu) {
      EXPECT_EQ(on_cpu.find("ChannelsLast"), std::string::npos) << what << ": " << (*session)->DescribePlacement();
    }
    StatusOr<std::vector<ir::Tensor>> got = (*session)->Run({x});
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().message();
    ASSERT_EQ(got->size(), want.size());
    ASSERT_EQ((*got)[0].dims(), want[0].dims()) << what;
    // Five fp16 layers, each rounded once on both devices but summed in another order: a few fp16 ulps of the
    // output's scale.
    const double scale = MaxAbs(want[0]);
    ExpectClose((*got)[0], AsDoubles(want[0]), "ResNet-like " + what, Tolerance{2e-2, 2e-2 * scale + 1e-3});
  }
}

}  // namespace
}  // namespace onnxamp::testing
