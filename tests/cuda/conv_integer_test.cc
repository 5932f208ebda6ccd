// CUDA ConvInteger and QLinearConv against the CPU kernel, exactly: both take the products of the 8-bit operands
// minus their zero points in double (exact) and round the same way. uint8 and int8 operands, zero points per tensor and
// per output channel, groups, pads (asymmetric too), strides, dilations, 1-D to 3-D, bias, scales per tensor and per
// output channel, int8 and uint8 outputs with saturation, and the CPU's errors. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cuda/cuda_op_test_util.h"
#include "tests/cuda/elementwise_test_util.h"

namespace onnxamp::testing {
namespace {

using cuda_ew::ExpectSameRunError;
using ir::Attribute;
using op_test::Op;
using op_test::RandomValues;
using op_test::TensorOf;

struct Case {
  std::vector<int64_t> x_dims, w_dims;  // [N, C, spatial...], [M, C/group, kernel...]
  int64_t group = 1;
  std::vector<int64_t> pads, strides, dilations;
  DType x_type = DType::kUint8, w_type = DType::kInt8, y_type = DType::kUint8;
  bool per_channel = false;  // w's zero point and scale per output channel
  bool bias = false;
};

// 8-bit values of `dtype` (int8: [-128, 127], uint8: [0, 255]).
ir::Tensor EightBit(DType dtype, const std::vector<int64_t>& dims, uint32_t seed) {
  const bool s = dtype == DType::kInt8;
  std::vector<double> v = RandomValues(static_cast<size_t>(Count(dims)), seed, s ? -128 : 0, s ? 128 : 256);
  for (double& e : v) e = std::floor(e);
  return TensorOf(dtype, dims, v);
}

OpTester Node(const Case& c, bool qlinear, uint32_t seed) {
  OpTester t = Op(qlinear ? "QLinearConv" : "ConvInteger", 10);
  t.Attr(Attribute::Int("group", c.group));
  if (!c.pads.empty()) t.Attr(Attribute::Ints("pads", c.pads));
  if (!c.strides.empty()) t.Attr(Attribute::Ints("strides", c.strides));
  if (!c.dilations.empty()) t.Attr(Attribute::Ints("dilations", c.dilations));
  const int64_t m = c.w_dims[0];
  const ir::Tensor x = EightBit(c.x_type, c.x_dims, seed), w = EightBit(c.w_type, c.w_dims, seed + 1);
  const ir::Tensor xz = EightBit(c.x_type, {}, seed + 2);
  const ir::Tensor wz = c.per_channel ? EightBit(c.w_type, {m}, seed + 3) : EightBit(c.w_type, {}, seed + 3);
  if (!qlinear) {
    t.Input(x).Input(w).Input(xz).Input(wz);
    return t;
  }
  const std::vector<int64_t> w_scale_dims = c.per_channel ? std::vector<int64_t>{m} : std::vector<int64_t>{};
  t.Input(x).Input(TensorOf(DType::kFloat32, {}, {0.021})).Input(xz);
  t.Input(w).Input(TensorOf(DType::kFloat32, w_scale_dims,
                            RandomValues(static_cast<size_t>(Count(w_scale_dims)), seed + 4, 0.001, 0.02)));
  t.Input(wz).Input(TensorOf(DType::kFloat32, {}, {0.35})).Input(EightBit(c.y_type, {}, seed + 5));
  if (c.bias) {
    std::vector<int32_t> b;
    for (double v : RandomValues(static_cast<size_t>(m), seed + 6, -5000, 5000)) b.push_back(static_cast<int32_t>(v));
    t.Input(MakeTensor<int32_t>({m}, b));
  }
  return t;
}

std::vector<Case> Cases() {
  std::vector<Case> cases = {
      {{2, 3, 7, 6}, {4, 3, 3, 3}},
      {{1, 4, 9, 9}, {6, 2, 3, 2}, 2, {1, 0, 2, 1}, {2, 1}, {1, 2}},
      {{2, 2, 11}, {3, 2, 4}, 1, {2, 1}, {3}, {}},
      {{1, 2, 4, 5, 3}, {2, 2, 2, 2, 2}, 1, {}, {1, 2, 1}, {}},
      {{1, 8, 6, 6}, {8, 1, 3, 3}, 8, {1, 1, 1, 1}, {}, {}},
      {{0, 3, 5, 5}, {2, 3, 3, 3}},
  };
  std::vector<Case> out;
  for (const Case& base : cases) {
    for (int variant = 0; variant < 4; ++variant) {
      Case c = base;
      c.x_type = variant % 2 ? DType::kInt8 : DType::kUint8;
      c.w_type = variant / 2 ? DType::kUint8 : DType::kInt8;
      c.y_type = variant == 1 ? DType::kInt8 : DType::kUint8;
      c.per_channel = variant >= 2;
      c.bias = variant != 0;
      out.push_back(c);
    }
  }
  return out;
}

TEST(CudaConvIntegerTest, ConvIntegerAndQLinearConvAreTheCpus) {
  ONNXAMP_REQUIRE_CUDA();
  uint32_t seed = 1;
  for (bool qlinear : {false, true}) {
    for (const Case& c : Cases()) {
      const std::string what = std::string(qlinear ? "QLinearConv" : "ConvInteger") + " x " +
                               std::string(DTypeName(c.x_type)) + " w " + std::string(DTypeName(c.w_type)) + " rank " +
                               std::to_string(c.x_dims.size()) + " group " + std::to_string(c.group) +
                               (c.per_channel ? " per channel" : "") + (c.bias ? " bias" : "");
      ExpectCudaMatchesCpu(Node(c, qlinear, seed += 7), what, Tolerance{0, 0});
    }
  }
}

TEST(CudaConvIntegerTest, BadInputsAreTheCpuErrors) {
  ONNXAMP_REQUIRE_CUDA();
  Case c = {{1, 3, 5, 5}, {2, 3, 3, 3}};
  OpTester zp = Node(c, false, 1);
  zp.inputs[3] = MakeTensor<uint8_t>({}, {1});  // w is int8
  ExpectSameRunError(zp);
  OpTester scale = Node(c, true, 1);
  scale.inputs[4] = MakeTensor<float>({5}, {1, 1, 1, 1, 1});  // neither one value nor [M]
  ExpectSameRunError(scale);
  OpTester channels = Node(c, false, 1);
  channels.inputs[1] = EightBit(DType::kInt8, {2, 4, 3, 3}, 3);  // C/group of w is not X's
  ExpectSameRunError(channels);
}

}  // namespace
}  // namespace onnxamp::testing
