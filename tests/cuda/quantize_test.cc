// CUDA QuantizeLinear, DequantizeLinear and MatMulInteger against the CPU kernels, exactly: every x, scale and
// quantized type, per tensor ([] and [1] scales), per axis (each axis, negative too), blocked (blocks that do and do
// not divide the dim), with and without a zero point, the output_dtype attribute, ties and saturation and NaN, empty
// tensors, and the CPU's errors. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/cuda/elementwise_test_util.h"

namespace onnxamp::testing::cuda_ew {
namespace {

const std::vector<DType> kQuantized = {DType::kInt8, DType::kUint8, DType::kInt16, DType::kUint16};

std::string Name(DType t) { return std::string(DTypeName(t)); }

// A scale layout: the scale's shape for x [4, 6, 5], the axis and the block size (0: none).
struct ScaleCase {
  std::string label;
  std::vector<int64_t> scale_dims;
  int64_t axis;
  int64_t block;
};

const std::vector<ScaleCase>& ScaleCases() {
  static const std::vector<ScaleCase> cases = {
      {"scalar", {}, 1, 0},
      {"one", {1}, 1, 0},
      {"axis0", {4}, 0, 0},
      {"axis1", {6}, 1, 0},
      {"axis-1", {5}, -1, 0},
      {"blocks2_axis1", {4, 3, 5}, 1, 2},
      {"blocks4_axis1", {4, 2, 5}, 1, 4},
      {"blocks2_axis-1", {4, 6, 3}, -1, 2},
  };
  return cases;
}

// Positive scales in [lo, hi] of `dtype` (exact in every float type: multiples of 1/8).
ir::Tensor Scales(DType dtype, const std::vector<int64_t>& dims, uint32_t seed, double lo, double hi) {
  std::vector<double> v = ValuesFor(DType::kInt32, static_cast<size_t>(NumElements(dims)), seed, lo * 8, hi * 8);
  for (double& s : v) s /= 8;
  return Make(dtype, dims, v);
}

OpTester Node(const char* op, const ScaleCase& c) {
  OpTester t = Tester(op, 23);
  t.Attr(ir::Attribute::Int("axis", c.axis));
  if (c.block) t.Attr(ir::Attribute::Int("block_size", c.block));
  return t;
}

TEST(CudaQuantizeLinear, EveryTypeAndLayout) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType xt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt32}) {
    for (DType st : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      for (DType q : kQuantized) {
        uint32_t seed = 1;
        for (const ScaleCase& c : ScaleCases()) {
          const std::string what =
              "QuantizeLinear " + Name(xt) + " scale " + Name(st) + " -> " + Name(q) + " " + c.label;
          const double range = q == DType::kInt16 || q == DType::kUint16 ? 40000 : 400;
          ir::Tensor x = Input(xt, {4, 6, 5}, seed++, -range, range);
          ir::Tensor s = Scales(st, c.scale_dims, seed++, 0.5, 4);
          OpTester with_zp = Node("QuantizeLinear", c);
          with_zp.Input(x).Input(s).Input(Input(q, c.scale_dims, seed++, -20, 20));
          ExpectCudaMatchesCpu(with_zp, what + " zero point", Tolerance{0, 0});
          OpTester typed = Node("QuantizeLinear", c);
          typed.Attr(ir::Attribute::Int("output_dtype", static_cast<int64_t>(q))).Input(x).Input(s);
          ExpectCudaMatchesCpu(typed, what + " output_dtype", Tolerance{0, 0});
        }
      }
    }
  }
}

// Halves to even, saturation at both ends, NaN to the lowest value, infinities, -0; no zero point gives uint8.
TEST(CudaQuantizeLinear, TiesSaturationAndNaN) {
  ONNXAMP_REQUIRE_CUDA();
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> x = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1000, -1000, nan, inf, -inf, -0.0};
  for (DType xt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    ExpectCudaMatchesCpu(Tester("QuantizeLinear", 13).Input(Make(xt, {12}, x)).Input(Make(xt, {}, {1})),
                         "QuantizeLinear ties uint8 " + Name(xt), Tolerance{0, 0});
    for (DType q : kQuantized) {
      ExpectCudaMatchesCpu(
          Tester("QuantizeLinear", 21).Input(Make(xt, {12}, x)).Input(Make(xt, {}, {1})).Input(Make(q, {}, {3})),
          "QuantizeLinear ties " + Name(xt) + " -> " + Name(q), Tolerance{0, 0});
    }
  }
  // int32 x beyond 2^24 rounds to float first; opset 10's scalar scale.
  ExpectCudaMatchesCpu(Tester("QuantizeLinear", 10)
                           .Input(Make(DType::kInt32, {4}, {16777217, -16777217, 300, -7}))
                           .Input(Make(DType::kFloat32, {}, {65536}))
                           .Input(Make(DType::kInt8, {}, {1})),
                       "QuantizeLinear int32 x", Tolerance{0, 0});
  ExpectCudaMatchesCpu(Tester("QuantizeLinear", 13)
                           .Input(Make(DType::kFloat32, {0, 3}, {}))
                           .Input(Make(DType::kFloat32, {3}, {1, 2, 3})),
                       "QuantizeLinear empty", Tolerance{0, 0});
}

TEST(CudaDequantizeLinear, EveryTypeAndLayout) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType q : {DType::kInt8, DType::kUint8, DType::kInt16, DType::kUint16, DType::kInt32}) {
    for (DType st : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
      uint32_t seed = 5;
      for (const ScaleCase& c : ScaleCases()) {
        const std::string what = "DequantizeLinear " + Name(q) + " scale " + Name(st) + " " + c.label;
        ir::Tensor x = Input(q, {4, 6, 5}, seed++, -70000, 70000);
        ir::Tensor s = Scales(st, c.scale_dims, seed++, 0.125, 3);
        OpTester plain = Node("DequantizeLinear", c);
        plain.Input(x).Input(s);
        ExpectCudaMatchesCpu(plain, what, Tolerance{0, 0});
        OpTester with_zp = Node("DequantizeLinear", c);
        with_zp.Input(x).Input(s).Input(Input(q, c.scale_dims, seed++, -20, 20));
        ExpectCudaMatchesCpu(with_zp, what + " zero point", Tolerance{0, 0});
        for (DType out : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
          OpTester typed = Node("DequantizeLinear", c);
          typed.Attr(ir::Attribute::Int("output_dtype", static_cast<int64_t>(out))).Input(x).Input(s);
          ExpectCudaMatchesCpu(typed, what + " -> " + Name(out), Tolerance{0, 0});
        }
      }
    }
  }
  ExpectCudaMatchesCpu(
      Tester("DequantizeLinear", 13).Input(Make(DType::kUint8, {0}, {})).Input(Make(DType::kFloat32, {}, {0.5})),
      "DequantizeLinear empty", Tolerance{0, 0});
}

// DynamicQuantizeLinear: the range of x with 0 in it, over sizes that take one and many partial blocks, all-zero and
// one-signed inputs, every output requested or not, exactly.
TEST(CudaDynamicQuantizeLinear, RangeScaleZeroPointAndLevels) {
  ONNXAMP_REQUIRE_CUDA();
  uint32_t seed = 9;
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{}, {1}, {7}, {33, 65}, {3, 1000, 100}, {0}, {2, 0}}) {
    for (const auto& [lo, hi] : std::vector<std::pair<double, double>>{{-3, 5}, {0.5, 2}, {-7, -1}, {0, 0}}) {
      OpTester t = Tester("DynamicQuantizeLinear", 11);
      t.num_outputs = 3;
      t.Input(Input(DType::kFloat32, dims, seed++, lo, hi));
      ExpectCudaMatchesCpu(
          t,
          "DynamicQuantizeLinear " + ShapeName(dims) + " in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
          Tolerance{0, 0});
    }
  }
  // Only y requested.
  OpTester y_only = Tester("DynamicQuantizeLinear", 11);
  y_only.num_outputs = 3;
  y_only.omit_outputs = {false, true, true};
  y_only.Input(Input(DType::kFloat32, {100}, 1, -1, 1));
  ExpectCudaMatchesCpu(y_only, "DynamicQuantizeLinear y only", Tolerance{0, 0});
  ExpectSameRunError(Tester("DynamicQuantizeLinear", 11).Input(Make(DType::kFloat16, {2}, {1, 2})));
}

// MatMulInteger: int8/uint8 operands, zero points per tensor, per row of A and per column of B, numpy batching (every
// broadcast form), 1-D operands, sums that wrap an int32 accumulator, exactly.
TEST(CudaMatMulInteger, EveryOperandTypeZeroPointAndBatch) {
  ONNXAMP_REQUIRE_CUDA();
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{5, 7}, {7, 3}}, {{2, 5, 7}, {7, 3}}, {{2, 5, 7}, {2, 7, 3}}, {{3, 1, 5, 7}, {2, 7, 3}}, {{7}, {7, 3}},
      {{5, 7}, {7}},    {{7}, {7}},          {{0, 7}, {7, 3}},       {{4, 33, 65}, {65, 17}},
  };
  uint32_t seed = 3;
  for (DType at : {DType::kUint8, DType::kInt8}) {
    for (DType bt : {DType::kInt8, DType::kUint8}) {
      for (const auto& [da, db] : shapes) {
        const int64_t m = da.size() >= 2 ? da[da.size() - 2] : 1, n = db.size() >= 2 ? db.back() : 1;
        const std::string what =
            "MatMulInteger " + Name(at) + " x " + Name(bt) + " " + ShapeName(da) + " x " + ShapeName(db);
        ir::Tensor a = Input(at, da, seed, -128, 255), b = Input(bt, db, seed + 1, -128, 255);
        seed += 2;
        ExpectCudaMatchesCpu(Tester("MatMulInteger", 10).Input(a).Input(b), what, Tolerance{0, 0});
        ExpectCudaMatchesCpu(
            Tester("MatMulInteger", 10).Input(a).Input(b).Input(Make(at, {}, {3})).Input(Make(bt, {1}, {5})),
            what + " scalar zero points", Tolerance{0, 0});
        if (m == 0) continue;  // no rows: a per-row zero point would be empty, which the CPU refuses
        OpTester per_axis = Tester("MatMulInteger", 10);
        per_axis.Input(a).Input(b).Input(Input(at, {m}, seed, 0, 100)).Input(Input(bt, {n}, seed + 1, 0, 100));
        seed += 2;
        ExpectCudaMatchesCpu(per_axis, what + " per-row and per-column zero points", Tolerance{0, 0});
      }
    }
  }
  // 255 * 255 * 40000 wraps an int32 accumulator: both devices wrap the same way.
  const int64_t k = 40000;
  ExpectCudaMatchesCpu(Tester("MatMulInteger", 10)
                           .Input(Make(DType::kUint8, {1, k}, std::vector<double>(static_cast<size_t>(k), 255)))
                           .Input(Make(DType::kUint8, {k, 1}, std::vector<double>(static_cast<size_t>(k), 255))),
                       "MatMulInteger wrapping", Tolerance{0, 0});
}

// QLinearMatMul: int8/uint8 operands and outputs, scales per tensor, per row of A or per column of B, in float and
// (opset 21) float16/bfloat16, batched and 1-D operands, saturation at both ends, exactly.
TEST(CudaQLinearMatMul, EveryScaleLayoutAndType) {
  ONNXAMP_REQUIRE_CUDA();
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{5, 7}, {7, 3}}, {{2, 5, 7}, {7, 3}}, {{3, 1, 5, 7}, {2, 7, 3}}, {{7}, {7, 3}}, {{5, 7}, {7}}, {{0, 7}, {7, 3}}};
  uint32_t seed = 31;
  for (DType q : {DType::kUint8, DType::kInt8}) {
    for (DType st : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      for (const auto& [da, db] : shapes) {
        const int64_t m = da.size() >= 2 ? da[da.size() - 2] : 1, n = db.size() >= 2 ? db.back() : 1;
        for (int layout = 0; layout < 3; ++layout) {  // per tensor, per row, per column
          if (layout == 1 && m == 0) continue;
          const std::vector<int64_t> a_scale_dims = layout == 1 ? std::vector<int64_t>{m} : std::vector<int64_t>{};
          const std::vector<int64_t> b_scale_dims = layout == 2 ? std::vector<int64_t>{n} : std::vector<int64_t>{};
          OpTester t = Tester("QLinearMatMul", 21);
          t.Input(Input(q, da, seed, -128, 255))
              .Input(Scales(st, a_scale_dims, seed + 1, 0.125, 1))
              .Input(Make(q, {}, {q == DType::kUint8 ? 128.0 : 1.0}))
              .Input(Input(q, db, seed + 2, -128, 255))
              .Input(Scales(st, b_scale_dims, seed + 3, 0.125, 1))
              .Input(Make(q, {}, {q == DType::kUint8 ? 120.0 : -3.0}))
              .Input(Scales(st, {}, seed + 4, 2, 40))
              .Input(Make(q, {}, {q == DType::kUint8 ? 100.0 : 5.0}));
          seed += 5;
          ExpectCudaMatchesCpu(t,
                               "QLinearMatMul " + Name(q) + " scales " + Name(st) + " layout " +
                                   std::to_string(layout) + " " + ShapeName(da) + " x " + ShapeName(db),
                               Tolerance{0, 0});
        }
      }
    }
  }
}

TEST(CudaQLinearMatMul, ErrorsMatchTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  auto node = [](std::vector<int64_t> a_scale, std::vector<int64_t> b_scale) {
    OpTester t = Tester("QLinearMatMul", 21);
    t.Input(Make(DType::kUint8, {2, 2}, {1, 2, 3, 4}))
        .Input(Make(DType::kFloat32, a_scale, std::vector<double>(a_scale.empty() ? 1 : a_scale[0], 0.5)))
        .Input(Make(DType::kUint8, {}, {0}))
        .Input(Make(DType::kUint8, {2, 2}, {1, 2, 3, 4}))
        .Input(Make(DType::kFloat32, b_scale, std::vector<double>(b_scale.empty() ? 1 : b_scale[0], 0.5)))
        .Input(Make(DType::kUint8, {}, {0}))
        .Input(Make(DType::kFloat32, {}, {1}))
        .Input(Make(DType::kUint8, {}, {0}));
    return t;
  };
  ExpectSameRunError(node({2}, {2}));  // per row and per column together
  ExpectSameRunError(node({3}, {}));   // a_scale of the wrong length
}

TEST(CudaMatMulInteger, ErrorsMatchTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectSameRunError(
      Tester("MatMulInteger", 10).Input(Make(DType::kInt32, {1, 2}, {1, 2})).Input(Make(DType::kInt8, {2, 1}, {1, 2})));
  ExpectSameRunError(Tester("MatMulInteger", 10)
                         .Input(Make(DType::kInt8, {1, 2}, {1, 2}))
                         .Input(Make(DType::kInt8, {3, 1}, {1, 2, 3})));
  ExpectSameRunError(Tester("MatMulInteger", 10)
                         .Input(Make(DType::kInt8, {2, 2}, {1, 2, 3, 4}))
                         .Input(Make(DType::kInt8, {2, 2}, {1, 2, 3, 4}))
                         .Input(Make(DType::kUint8, {}, {1})));
  ExpectSameRunError(Tester("MatMulInteger", 10)
                         .Input(Make(DType::kInt8, {2, 2}, {1, 2, 3, 4}))
                         .Input(Make(DType::kInt8, {2, 2}, {1, 2, 3, 4}))
                         .Input(Make(DType::kInt8, {}, {1}))
                         .Input(Make(DType::kInt8, {3}, {1, 1, 1})));
}

TEST(CudaQuantizeDequantize, ErrorsMatchTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  // A scale of the wrong length along the axis; before opset 13 only a scalar.
  ExpectSameRunError(Tester("QuantizeLinear", 13)
                         .Input(Input(DType::kFloat32, {2, 3}, 1, -1, 1))
                         .Input(Make(DType::kFloat32, {2}, {1, 1})));
  ExpectSameRunError(Tester("DequantizeLinear", 10)
                         .Input(Input(DType::kUint8, {2, 3}, 1, 0, 9))
                         .Input(Make(DType::kFloat32, {3}, {1, 1, 1})));
  // Zero points of another type or shape.
  ExpectSameRunError(Tester("DequantizeLinear", 13)
                         .Input(Input(DType::kUint8, {2, 3}, 1, 0, 9))
                         .Input(Make(DType::kFloat32, {}, {1}))
                         .Input(Make(DType::kInt8, {}, {1})));
  ExpectSameRunError(Tester("QuantizeLinear", 13)
                         .Input(Input(DType::kFloat32, {2, 3}, 1, -1, 1))
                         .Input(Make(DType::kFloat32, {3}, {1, 1, 1}))
                         .Input(Make(DType::kUint8, {2}, {1, 1})));
  // output_dtype against the zero point's type; an int32 output; a double x; an integer scale.
  OpTester clash = Tester("QuantizeLinear", 21);
  clash.Attr(ir::Attribute::Int("output_dtype", static_cast<int64_t>(DType::kInt8)));
  clash.Input(Input(DType::kFloat32, {3}, 1, -1, 1))
      .Input(Make(DType::kFloat32, {}, {1}))
      .Input(Make(DType::kUint8, {}, {0}));
  ExpectSameRunError(clash);
  ExpectSameRunError(Tester("QuantizeLinear", 21)
                         .Input(Input(DType::kFloat32, {3}, 1, -1, 1))
                         .Input(Make(DType::kFloat32, {}, {1}))
                         .Input(Make(DType::kInt32, {}, {0})));
  ExpectSameRunError(
      Tester("QuantizeLinear", 21).Input(Input(DType::kFloat64, {3}, 1, -1, 1)).Input(Make(DType::kFloat64, {}, {1})));
  ExpectSameRunError(
      Tester("DequantizeLinear", 21).Input(Input(DType::kUint8, {3}, 1, 0, 9)).Input(Make(DType::kInt32, {}, {1})));
  // Blocks that do not match the scale's shape.
  OpTester blocks = Tester("DequantizeLinear", 21);
  blocks.Attr(ir::Attribute::Int("axis", 1)).Attr(ir::Attribute::Int("block_size", 2));
  blocks.Input(Input(DType::kInt8, {2, 5}, 1, -9, 9)).Input(Make(DType::kFloat32, {2, 2}, {1, 1, 1, 1}));
  ExpectSameRunError(blocks);
}

}  // namespace
}  // namespace onnxamp::testing::cuda_ew
