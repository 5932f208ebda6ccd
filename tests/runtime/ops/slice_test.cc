// Tests of Slice: every element type, negative steps, clamping of out-of-range starts/ends (INT64_MAX and
// INT64_MIN included), negative axes, default axes/steps, int32 inputs, the opset 1-9 attributes, a random
// comparison against a plain loop written from the spec, and errors.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// Indices that the slice [start:end:step] of a dim picks as the ONNX spec words it: negative values count from
// the end, then starts clamp to [0, dim] ([0, dim-1] for negative steps) and ends to [0, dim] ([-1, dim-1]).
// (Unlike Python, a start below -dim with a negative step still takes element 0.)
std::vector<int64_t> SpecSlice(int64_t dim, int64_t start, int64_t end, int64_t step) {
  std::vector<int64_t> out;
  if (dim == 0) return out;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::min(std::max<int64_t>(start, 0), dim);
    end = std::min(std::max<int64_t>(end, 0), dim);
    for (int64_t i = start; i<end; i = i> kMax - step ? kMax : i + step) out.push_back(i);
  } else {
    start = std::min(std::max<int64_t>(start, 0), dim - 1);
    end = std::min(std::max<int64_t>(end, -1), dim - 1);
    for (int64_t i = start; i > end; i = i < kMin - step ? kMin : i + step) out.push_back(i);
  }
  return out;
}

class SliceTest : public ::testing::TestWithParam<DType> {};

TEST_P(SliceTest, NegativeStepOnEveryType) {
  const DType dt = GetParam();
  OpTester t = Op("Slice", 13);
  // [3,4] codes 0..11; rows 2..0 step -2, columns 1..3.
  t.Input(IotaTensor(dt, {3, 4})).Input(Int64s({-1, 1})).Input(Int64s({kMin, 3})).Input(Int64s({0, 1}));
  t.Input(Int64s({-2, 1}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGathered((*out)[0], dt, {2, 2}, {9, 10, 1, 2});
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SliceTest, ::testing::ValuesIn(MovableDTypes()), DTypeTestName);

TEST(SliceOpTest, MatchesTheSpecOnRandomCases) {
  std::mt19937 rng(77);
  const std::vector<int64_t> specials = {kMax, kMin, -100, 100};
  for (int iter = 0; iter < 300; ++iter) {
    const int64_t dim = rng() % 7;
    auto pick = [&]() -> int64_t {
      return rng() % 5 == 0 ? specials[rng() % 4] : static_cast<int64_t>(rng() % 19) - 9;
    };
    const int64_t start = pick(), end = pick();
    int64_t step = static_cast<int64_t>(rng() % 7) - 3;
    if (step == 0) step = rng() % 2 ? kMax : kMin;
    OpTester t = Op("Slice", 13);
    t.Input(IotaTensor(DType::kInt32, {2, dim})).Input(Int64s({start})).Input(Int64s({end})).Input(Int64s({-1}));
    t.Input(Int64s({step}));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    const std::vector<int64_t> cols = SpecSlice(dim, start, end, step);
    std::vector<int64_t> src;
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c : cols) src.push_back(r * dim + c);
    ExpectGathered((*out)[0], DType::kInt32, {2, static_cast<int64_t>(cols.size())}, src, nullptr,
                   StrCat("dim ", dim, " [", start, ":", end, ":", step, "]"));
  }
}

TEST(SliceOpTest, DefaultsInt32InputsAndOpset1Attributes) {
  OpTester t = Op("Slice", 10);
  t.Input(IotaTensor(DType::kFloat32, {3, 4})).Input(Int32s({1, 0})).Input(Int32s({100, -1}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGathered((*out)[0], DType::kFloat32, {2, 3}, {4, 5, 6, 8, 9, 10});

  OpTester old = Op("Slice", 1);
  old.Input(IotaTensor(DType::kFloat32, {3, 4}));
  old.Attr(ir::Attribute::Ints("starts", {2}))
      .Attr(ir::Attribute::Ints("ends", {4}))
      .Attr(ir::Attribute::Ints("axes", {1}));
  out = old.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGathered((*out)[0], DType::kFloat32, {3, 2}, {2, 3, 6, 7, 10, 11});
}

TEST(SliceOpTest, ErrorsNameTheProblem) {
  auto base = [] {
    OpTester t = Op("Slice", 13);
    t.Input(ir::Tensor(DType::kFloat32, {3, 4}));
    return t;
  };
  OpTester zero = base();
  zero.Input(Int64s({0})).Input(Int64s({2})).Input(Int64s({0})).Input(Int64s({0}));
  ExpectRunError(zero, "zero step for axis 0");
  OpTester lengths = base();
  lengths.Input(Int64s({0, 1})).Input(Int64s({2}));
  ExpectRunError(lengths, "starts [0,1] and ends [2] have different lengths");
  OpTester axis = base();
  axis.Input(Int64s({0})).Input(Int64s({2})).Input(Int64s({2}));
  ExpectRunError(axis, "axes 2 is out of range for rank 2");
  OpTester repeat = base();
  repeat.Input(Int64s({0, 0})).Input(Int64s({2, 2})).Input(Int64s({1, -1}));
  ExpectRunError(repeat, "repeat axis 1");
  OpTester type = base();
  ir::Tensor f(DType::kFloat32, {1});
  type.Input(f).Input(Int64s({2}));
  ExpectRunError(type, "must be int64 or int32, got float");
}

}  // namespace
}  // namespace onnxamp::testing
