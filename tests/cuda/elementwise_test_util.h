// Helpers for the CUDA elementwise kernel tests: inputs of any element type from a seeded generator, the shape sets
// the tests sweep, big tensors filled cheaply, and checks that CUDA reports the same errors as the CPU.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runtime/ops/common/broadcast.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/runtime/ops/elementwise_test_util.h"

namespace onnxamp::testing::cuda_ew {

using ew::Make;
using ew::MakeBool;
using ew::NumElements;
using ew::Tester;

// Shapes every unary op runs on: scalar, one element, odd sizes, rank 4, and empty tensors.
inline const std::vector<std::vector<int64_t>>& UnaryShapes() {
  static const std::vector<std::vector<int64_t>> shapes = {{}, {1}, {7}, {33, 65}, {2, 3, 4, 5}, {0}, {3, 0, 2}};
  return shapes;
}

// Shape pairs every binary op runs on, one per path of the engine: same shapes (flat, vectorised and odd), tensor op
// scalar both ways, row broadcast (bias), column broadcast, outer broadcast, general rank > 2 broadcasts, empty.
inline const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>& BinaryShapes() {
  static const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{}, {}},
      {{1}, {1}},
      {{7}, {7}},
      {{33, 65}, {33, 65}},
      {{2, 3, 4, 8}, {2, 3, 4, 8}},
      {{33, 65}, {}},
      {{}, {2, 3, 4, 5}},
      {{33, 64}, {64}},     // row broadcast, vectorisable
      {{33, 65}, {65}},     // row broadcast, odd row
      {{32, 16}, {32, 1}},  // column broadcast
      {{4, 1, 5}, {3, 1}},  // both sides broadcast
      {{2, 3, 4, 5}, {3, 1, 5}},
      {{2, 1, 4, 1}, {1, 3, 1, 6}},
      {{0, 3}, {3}},
      {{1, 1, 7}, {1, 7}},
  };
  return shapes;
}

inline std::string ShapeName(const std::vector<int64_t>& dims) { return ops::ShapeToString(dims); }

// `n` values of `dtype` in [lo, hi]: uniform doubles for float types, uniform integers (the range clipped to the
// type's) for integer types, 0/1 for bool.
inline std::vector<double> ValuesFor(DType dtype, size_t n, uint32_t seed, double lo, double hi) {
  if (dtype == DType::kBool) return ew::RandomInts(n, seed, 0, 1);
  if (IsInteger(dtype)) {
    double tlo = 0, thi = 0;
    switch (dtype) {
      case DType::kInt8:
        tlo = -128, thi = 127;
        break;
      case DType::kUint8:
        tlo = 0, thi = 255;
        break;
      case DType::kInt16:
        tlo = -32768, thi = 32767;
        break;
      case DType::kUint16:
        tlo = 0, thi = 65535;
        break;
      default:
        tlo = dtype == DType::kUint32 || dtype == DType::kUint64 ? 0 : -1e9;
        thi = 1e9;
        break;
    }
    const double a = std::max(std::ceil(lo), tlo), b = std::min(std::floor(hi), thi);
    return ew::RandomInts(n, seed, static_cast<int64_t>(a), static_cast<int64_t>(std::max(a, b)));
  }
  return ew::Random(n, seed, lo, hi);
}

// A tensor of `dtype` and `dims` with ValuesFor values.
inline ir::Tensor Input(DType dtype, const std::vector<int64_t>& dims, uint32_t seed, double lo, double hi) {
  return Make(dtype, dims, ValuesFor(dtype, static_cast<size_t>(NumElements(dims)), seed, lo, hi));
}

// A float32 tensor of `n` elements with a cheap deterministic pattern in [-5, 5) (for the tensors of > 16M elements,
// where a random generator would dominate the test's time).
inline ir::Tensor BigFloat(std::vector<int64_t> dims, int salt) {
  ir::Tensor t(DType::kFloat32, std::move(dims));
  auto v = t.mutable_values<float>();
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(static_cast<int64_t>((i * 7919 + salt) % 1000)) * 0.01f - 5.0f;
  return t;
}

// The element types with their names, for test parameters.
inline const std::vector<DType>& AllNumericTypes() {
  static const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                           DType::kInt8,    DType::kInt16,   DType::kInt32,    DType::kInt64,
                                           DType::kUint8,   DType::kUint16,  DType::kUint32,   DType::kUint64};
  return types;
}

// Expects creating the node's session to fail on CUDA with the CPU's message (CUDA's may add context around it).
inline void ExpectSameCreateError(const OpTester& t) {
  OpTester cpu = t;
  cpu.options.device = exec::Device::kCpu;
  OpTester gpu = t;
  gpu.options.device = exec::Device::kCuda;
  auto want = exec::Session::Create(cpu.BuildModel(), cpu.options);
  auto got = exec::Session::Create(gpu.BuildModel(), gpu.options);
  ASSERT_FALSE(want.ok()) << "the cpu accepted the node";
  ASSERT_FALSE(got.ok()) << "cuda accepted the node; the cpu said: " << want.status().message();
  EXPECT_NE(got.status().message().find(want.status().message()), std::string::npos)
      << "cuda: " << got.status().message() << "\ncpu: " << want.status().message();
}

// Expects running the node to fail on CUDA with the CPU's message (CUDA's may add context around it).
inline void ExpectSameRunError(const OpTester& t) {
  OpTester cpu = t;
  cpu.options.device = exec::Device::kCpu;
  StatusOr<std::vector<ir::Tensor>> want = cpu.Run();
  ASSERT_FALSE(want.ok()) << "the cpu ran the node";
  StatusOr<std::vector<ir::Tensor>> got = RunOnCuda(t);
  ASSERT_FALSE(got.ok()) << "cuda ran the node; the cpu said: " << want.status().message();
  EXPECT_NE(got.status().message().find(want.status().message()), std::string::npos)
      << "cuda: " << got.status().message() << "\ncpu: " << want.status().message();
}

}  // namespace onnxamp::testing::cuda_ew
