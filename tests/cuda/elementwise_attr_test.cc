// CUDA Mod, PRelu, BitShift, IsNaN, IsInf, Sum and Mean against the CPU reference: every registered element type,
// the broadcast shapes of every engine path, each attribute, the integer edge cases (x % 0, INT_MIN % -1, shifts of the
// type's width), NaN and infinities, and the CPU's errors. Sum and Mean add in the CPU's order in the same compute
// type and round once, so they must equal the CPU bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/cuda/elementwise_test_util.h"

namespace onnxamp::testing::cuda_ew {
namespace {

const std::vector<DType> kFloat = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
const std::vector<DType> kUnsigned = {DType::kUint8, DType::kUint16, DType::kUint32, DType::kUint64};

std::string Name(DType t) { return std::string(DTypeName(t)); }

// ---- Mod ----------------------------------------------------------------------------------------------------------

// Every type with fmod = 1, the integers with fmod = 0 too, over every broadcast path; divisors never 0 here.
TEST(CudaMod, MatchesCpuOnEveryBroadcast) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType t : AllNumericTypes()) {
    for (int64_t fmod : {0, 1}) {
      if (IsFloatingPoint(t) && fmod == 0) continue;
      uint32_t seed = 3;
      for (const auto& [da, db] : BinaryShapes()) {
        std::vector<double> b = ValuesFor(t, static_cast<size_t>(NumElements(db)), seed++, 1, 9);
        if (t != DType::kUint8 && t != DType::kUint16 && t != DType::kUint32 && t != DType::kUint64) {
          for (size_t i = 0; i < b.size(); i += 2) b[i] = -b[i];  // both signs of divisor
        }
        OpTester m = Tester("Mod", 13);
        m.Attr(ir::Attribute::Int("fmod", fmod));
        m.Input(Input(t, da, seed++, -100, 100)).Input(Make(t, db, b));
        ExpectCudaMatchesCpu(
            m, "Mod fmod " + std::to_string(fmod) + " " + Name(t) + " " + ShapeName(da) + " % " + ShapeName(db));
      }
    }
  }
}

TEST(CudaMod, ZeroDivisorsSignsAndSpecialValues) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType t : {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64}) {
    for (int64_t fmod : {0, 1}) {
      OpTester m = Tester("Mod", 13);
      m.Attr(ir::Attribute::Int("fmod", fmod));
      m.Input(Make(t, {10}, {7, -7, 7, -7, 0, 5, -128, -128, 6, -6}))
          .Input(Make(t, {10}, {3, 3, -3, -3, 4, 0, -1, 3, 3, -3}));
      ExpectCudaMatchesCpu(m, "Mod signs " + Name(t) + " fmod " + std::to_string(fmod));
    }
  }
  ExpectCudaMatchesCpu(Tester("Mod", 13)
                           .Attr(ir::Attribute::Int("fmod", 0))
                           .Input(Make(DType::kInt32, {2}, {-2147483648.0, -2147483648.0}))
                           .Input(Make(DType::kInt32, {2}, {-1, 7})),
                       "Mod INT_MIN");
  for (DType t : kUnsigned) {
    ExpectCudaMatchesCpu(
        Tester("Mod", 13).Input(Make(t, {5}, {7, 0, 200, 9, 1})).Input(Make(t, {5}, {3, 4, 0, 9, 200})),
        "Mod unsigned " + Name(t));
  }
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (DType t : kFloat) {
    ExpectCudaMatchesCpu(Tester("Mod", 13)
                             .Attr(ir::Attribute::Int("fmod", 1))
                             .Input(Make(t, {8}, {5.5, -5.5, 5.5, 1, inf, nan, 3, -0.0}))
                             .Input(Make(t, {8}, {2, 2, -2, 0, 2, 2, inf, 1})),
                         "Mod float special " + Name(t));
  }
}

// ---- PRelu --------------------------------------------------------------------------------------------------------

TEST(CudaPRelu, SlopeBroadcastsToX) {
  ONNXAMP_REQUIRE_CUDA();
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{7}, {7}},          {{33, 65}, {}},      {{33, 64}, {64}},
      {{33, 65}, {65}},    {{32, 16}, {32, 1}}, {{2, 3, 4, 5}, {3, 1, 1}},
      {{2, 3, 4, 5}, {1}}, {{0, 3}, {3}},
  };
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt32, DType::kInt64,
                  DType::kUint32, DType::kUint64}) {
    uint32_t seed = 9;
    for (const auto& [dx, ds] : shapes) {
      OpTester p = Tester("PRelu", 16);
      p.Input(Input(t, dx, seed, -10, 10)).Input(Input(t, ds, seed + 1, -3, 3));
      seed += 2;
      ExpectCudaMatchesCpu(p, "PRelu " + Name(t) + " " + ShapeName(dx) + " slope " + ShapeName(ds));
    }
  }
  // PRelu-6: a [C] slope applies along axis 1.
  ExpectCudaMatchesCpu(
      Tester("PRelu", 6).Input(Input(DType::kFloat32, {2, 3, 4}, 1, -5, 5)).Input(Input(DType::kFloat32, {3}, 2, 0, 1)),
      "PRelu-6 channel slope");
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (DType t : kFloat) {
    ExpectCudaMatchesCpu(
        Tester("PRelu", 16).Input(Make(t, {6}, {nan, -inf, inf, -0.0, -2, 2})).Input(Make(t, {}, {0.25})),
        "PRelu special " + Name(t));
  }
}

// ---- BitShift -----------------------------------------------------------------------------------------------------

TEST(CudaBitShift, BothDirectionsOnEveryBroadcast) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType t : kUnsigned) {
    for (const char* dir : {"LEFT", "RIGHT"}) {
      uint32_t seed = 21;
      for (const auto& [da, db] : BinaryShapes()) {
        OpTester s = Tester("BitShift", 11);
        s.Attr(ir::Attribute::String("direction", dir));
        s.Input(Input(t, da, seed, 0, 250)).Input(Input(t, db, seed + 1, 0, 70));  // shifts past the width too
        seed += 2;
        ExpectCudaMatchesCpu(
            s, std::string("BitShift ") + dir + " " + Name(t) + " " + ShapeName(da) + " by " + ShapeName(db));
      }
    }
  }
}

// ---- IsNaN / IsInf ------------------------------------------------------------------------------------------------

TEST(CudaIsNanInf, EveryFlagCombination) {
  ONNXAMP_REQUIRE_CUDA();
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> v = {nan, inf, -inf, 0.0, -0.0, 1e30, -1e30, 65504, 1e-40, 3};
  for (DType t : kFloat) {
    ExpectCudaMatchesCpu(Tester("IsNaN", 13).Input(Make(t, {10}, v)), "IsNaN " + Name(t));
    for (int64_t neg : {0, 1}) {
      for (int64_t pos : {0, 1}) {
        OpTester i = Tester("IsInf", 10);
        i.Attr(ir::Attribute::Int("detect_negative", neg)).Attr(ir::Attribute::Int("detect_positive", pos));
        i.Input(Make(t, {10}, v));
        ExpectCudaMatchesCpu(i, "IsInf " + Name(t) + " neg " + std::to_string(neg) + " pos " + std::to_string(pos));
      }
    }
    uint32_t seed = 2;
    for (const auto& dims : UnaryShapes()) {
      ExpectCudaMatchesCpu(Tester("IsNaN", 13).Input(Input(t, dims, seed++, -5, 5)), "IsNaN " + ShapeName(dims));
    }
  }
}

// ---- Sum / Mean (variadic) ----------------------------------------------------------------------------------------

TEST(CudaSumMean, VariadicWithBroadcastingExactly) {
  ONNXAMP_REQUIRE_CUDA();
  const std::vector<std::vector<std::vector<int64_t>>> shape_sets = {
      {{7}},                                    // one input
      {{33, 65}, {33, 65}},                     //
      {{2, 1, 4}, {3, 1}, {4}, {}},             // four inputs, all broadcast
      {{5, 6}, {6}, {5, 1}},                    // row then column
      {{2, 3, 4, 5}, {3, 4, 5}, {2, 1, 1, 5}},  // general
      {{1}, {4, 3}},                            // the first input broadcast
      {{0, 3}, {3}},                            // empty
  };
  for (const char* op : {"Sum", "Mean"}) {
    for (DType t : kFloat) {
      uint32_t seed = 60;
      for (const auto& shapes : shape_sets) {
        OpTester tester = Tester(op, 13);
        std::string what = std::string(op) + " " + Name(t);
        for (const auto& dims : shapes) {
          tester.Input(Input(t, dims, seed++, -50, 50));
          what += ' ';
          what += ShapeName(dims);
        }
        ExpectCudaMatchesCpu(tester, what, Tolerance{0, 0});
      }
    }
  }
  // fp16 inputs whose running sum leaves fp16's range and comes back: one rounding at the end, as the CPU.
  ExpectCudaMatchesCpu(Tester("Sum", 13)
                           .Input(Make(DType::kFloat16, {2}, {60000, 1}))
                           .Input(Make(DType::kFloat16, {2}, {60000, 0.0004}))
                           .Input(Make(DType::kFloat16, {2}, {-60000, 0.0004})),
                       "Sum fp16 leaves the range", Tolerance{0, 0});
}

// ---- errors -------------------------------------------------------------------------------------------------------

TEST(CudaElementwiseAttr, ErrorsMatchTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester fmod2 = Tester("Mod", 13);
  fmod2.Attr(ir::Attribute::Int("fmod", 2)).Input(Make(DType::kInt32, {1}, {1})).Input(Make(DType::kInt32, {1}, {1}));
  ExpectSameCreateError(fmod2);
  OpTester float_mod = Tester("Mod", 13);
  float_mod.Input(Make(DType::kFloat32, {1}, {1})).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectSameRunError(float_mod);
  ExpectSameRunError(Tester("Mod", 13).Input(Make(DType::kInt32, {2}, {1, 2})).Input(Make(DType::kInt64, {2}, {1, 2})));
  ExpectSameRunError(Tester("PRelu", 16)
                         .Input(Input(DType::kFloat32, {2, 3}, 1, -1, 1))
                         .Input(Input(DType::kFloat32, {4, 2, 3}, 2, -1, 1)));
  OpTester dir = Tester("BitShift", 11);
  dir.Attr(ir::Attribute::String("direction", "UP"))
      .Input(Make(DType::kUint8, {1}, {1}))
      .Input(Make(DType::kUint8, {1}, {1}));
  ExpectSameCreateError(dir);
  OpTester signed_shift = Tester("BitShift", 11);
  signed_shift.Attr(ir::Attribute::String("direction", "LEFT"))
      .Input(Make(DType::kInt32, {1}, {1}))
      .Input(Make(DType::kInt32, {1}, {1}));
  ExpectSameRunError(signed_shift);
  OpTester mixed_shift = Tester("BitShift", 11);
  mixed_shift.Attr(ir::Attribute::String("direction", "LEFT"))
      .Input(Make(DType::kUint8, {1}, {1}))
      .Input(Make(DType::kUint16, {1}, {1}));
  ExpectSameRunError(mixed_shift);
  ExpectSameRunError(
      Tester("Sum", 13).Input(Input(DType::kFloat32, {2, 3}, 1, -1, 1)).Input(Input(DType::kFloat32, {4}, 2, -1, 1)));
}

}  // namespace
}  // namespace onnxamp::testing::cuda_ew
