// CUDA Cast, CastLike, Clip, Where and Dropout against the CPU reference: every numeric/bool type pair for Cast with
// rounding, saturation and NaN; Clip's attribute and input forms; Where over every engine path; Dropout in inference
// and training mode (the device mask equals the CPU's for the same seed), with its statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tests/cuda/elementwise_test_util.h"

namespace onnxamp::testing::cuda_ew {
namespace {

const std::vector<DType> kFloat = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};

std::vector<DType> CastTypes() {
  std::vector<DType> t = AllNumericTypes();
  t.push_back(DType::kBool);
  return t;
}

// ---- Cast -------------------------------------------------------------------------------------------------------

// Source values that exercise a conversion from `from`: fractions, negatives, halfway cases of fp16/bf16 rounding,
// values beyond every integer range (saturation), NaN and infinities.
std::vector<double> CastSources(DType from) {
  const double inf = std::numeric_limits<double>::infinity();
  if (from == DType::kBool) return {0, 1, 1, 0};
  if (IsFloatingPoint(from)) {
    return {0.0,   -0.0,   0.5,          -0.5,  1.5,   -2.5,   2.75,         -3.99,         127.5,
            128.0, -128.5, 255.9,        256.0, -1.0,  1000.7, 65504.0,      65520.0,       1e5,
            -1e5,  3e9,    -3e9,         1e19,  -1e19, 1e30,   1.0009765625, 1.00048828125, 3.14159265358979,
            1e-8,  -6e-8,  std::nan(""), inf,   -inf};
  }
  std::vector<double> v = {0, 1, 2, 3, 100, 127, 200, 255};
  switch (from) {
    case DType::kInt8:
      return {0, 1, -1, 127, -128, 100, -100, 5};
    case DType::kInt16:
      v.insert(v.end(), {-1, -128, -32768, 32767, 2049, -300});
      return v;
    case DType::kInt32:
      v.insert(v.end(), {-1, -2147483648.0, 2147483647.0, 16777217, 65536, -70000});
      return v;
    case DType::kInt64:
      v.insert(v.end(), {-1, -9223372036854775808.0, 9007199254740993.0, 4294967297.0, -70000, 16777217});
      return v;
    case DType::kUint16:
      v.insert(v.end(), {65535, 2049, 300});
      return v;
    case DType::kUint32:
      v.insert(v.end(), {4294967295.0, 16777217, 70000});
      return v;
    case DType::kUint64:
      v.insert(v.end(), {18446744073709549568.0, 9007199254740993.0, 4294967297.0});
      return v;
    default:
      return v;
  }
}

struct CastPair {
  DType from, to;
};

std::vector<CastPair> CastPairs() {
  std::vector<CastPair> out;
  for (DType f : CastTypes()) {
    for (DType t : CastTypes()) out.push_back({f, t});
  }
  return out;
}

class CudaCastTest : public ::testing::TestWithParam<CastPair> {};

// Cast is exact on both sides (the same rules, bit for bit): no tolerance.
TEST_P(CudaCastTest, MatchesCpuExactly) {
  ONNXAMP_REQUIRE_CUDA();
  const auto [from, to] = GetParam();
  const std::vector<double> v = CastSources(from);
  const std::string name = std::string(DTypeName(from)) + " -> " + std::string(DTypeName(to));
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{static_cast<int64_t>(v.size())}, {}, {0}, {2, 0}}) {
    std::vector<double> values(v.begin(), v.begin() + NumElements(dims));
    OpTester t = Tester("Cast", 19);
    t.Attr(ir::Attribute::Int("to", static_cast<int64_t>(to))).Input(Make(from, dims, values));
    ExpectCudaMatchesCpu(t, "Cast " + name + " " + ShapeName(dims), Tolerance{0, 0});
  }
  // Odd-sized random data (vector body and scalar tail).
  OpTester big = Tester("Cast", 13);
  big.Attr(ir::Attribute::Int("to", static_cast<int64_t>(to))).Input(Input(from, {3, 1001}, 7, -300, 300));
  ExpectCudaMatchesCpu(big, "Cast " + name + " [3,1001]", Tolerance{0, 0});
  // CastLike takes the target type from its second input.
  OpTester like = Tester("CastLike", 15);
  like.Input(Make(from, {static_cast<int64_t>(v.size())}, v)).Input(Input(to, {2}, 1, 0, 1));
  ExpectCudaMatchesCpu(like, "CastLike " + name, Tolerance{0, 0});
}

INSTANTIATE_TEST_SUITE_P(Pairs, CudaCastTest, ::testing::ValuesIn(CastPairs()),
                         [](const ::testing::TestParamInfo<CastPair>& info) {
                           return std::string(DTypeName(info.param.from)) + "_to_" +
                                  std::string(DTypeName(info.param.to));
                         });

TEST(CudaCast, LegacyStringTargetAndLargeTensor) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester legacy = Tester("Cast", 1);
  legacy.Attr(ir::Attribute::String("to", "FLOAT16")).Input(Input(DType::kFloat32, {5, 7}, 3, -10, 10));
  ExpectCudaMatchesCpu(legacy, "Cast-1 to FLOAT16", Tolerance{0, 0});
  // More than 65535 x 256 packs of 4 would be needed to loop; one pass over 17M elements checks the bulk and tail.
  OpTester big = Tester("Cast", 19);
  big.Attr(ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat16))).Input(BigFloat({16777219}, 1));
  ExpectCudaMatchesCpu(big, "Cast large float -> float16", Tolerance{0, 0});
}

TEST(CudaCast, ErrorsMatchTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester no_to = Tester("Cast", 19);
  no_to.Input(Make(DType::kFloat32, {1}, {1}));
  ExpectSameCreateError(no_to);
  OpTester bad_code = Tester("Cast", 19);
  bad_code.Attr(ir::Attribute::Int("to", 99)).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectSameCreateError(bad_code);
  OpTester bad_name = Tester("Cast", 1);
  bad_name.Attr(ir::Attribute::String("to", "FLOAT7")).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectSameCreateError(bad_name);
  OpTester fp8 = Tester("Cast", 19);
  fp8.Attr(ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat8E4M3FN))).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectSameCreateError(fp8);
  OpTester saturate = Tester("Cast", 19);
  saturate.Attr(ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat16)))
      .Attr(ir::Attribute::Int("saturate", 2))
      .Input(Make(DType::kFloat32, {1}, {1}));
  ExpectSameCreateError(saturate);
}

// Strings stay on the CPU: the CUDA kernel declines a Cast to string at Create, so a CUDA session places that node
// on the CPU and gives the CPU's strings.
TEST(CudaCast, ToStringRunsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester to_string = Tester("Cast", 19);
  to_string.Attr(ir::Attribute::Int("to", static_cast<int64_t>(DType::kString)))
      .Input(Make(DType::kFloat32, {3}, {1, -2.5, 0.125}));
  StatusOr<std::vector<ir::Tensor>> want = to_string.Run();
  ASSERT_TRUE(want.ok()) << want.status().message();
  to_string.options.device = exec::Device::kCuda;
  StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(to_string.BuildModel(), to_string.options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  ASSERT_EQ((*session)->placement().on_cpu.size(), 1u) << (*session)->DescribePlacement();
  EXPECT_NE((*session)->placement().on_cpu[0].find("Cast"), std::string::npos) << (*session)->DescribePlacement();
  StatusOr<std::vector<ir::Tensor>> got = (*session)->Run(to_string.Feeds());
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->size(), 1u);
  ASSERT_EQ((*got)[0].dtype(), DType::kString);
  EXPECT_EQ((*got)[0].strings(), (*want)[0].strings());
}

// ---- Clip -------------------------------------------------------------------------------------------------------

TEST(CudaClip, InputBoundsEveryTypeAndShape) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType t : AllNumericTypes()) {
    const bool is_unsigned = t == DType::kUint8 || t == DType::kUint16 || t == DType::kUint32 || t == DType::kUint64;
    const double lo = is_unsigned ? 3 : -2, hi = is_unsigned ? 20 : 2.5;
    uint32_t seed = 1;
    for (const auto& dims : UnaryShapes()) {
      const std::string what = "Clip " + std::string(DTypeName(t)) + " " + ShapeName(dims);
      ir::Tensor x = Input(t, dims, seed++, is_unsigned ? 0 : -5, is_unsigned ? 40 : 5);
      ExpectCudaMatchesCpu(Tester("Clip", 13).Input(x).Input(Make(t, {}, {lo})).Input(Make(t, {}, {hi})), what);
      ExpectCudaMatchesCpu(Tester("Clip", 13).Input(x).Input(Make(t, {}, {lo})), what + " min only");
      ExpectCudaMatchesCpu(Tester("Clip", 13).Input(x).OmittedInput().Input(Make(t, {}, {hi})), what + " max only");
      ExpectCudaMatchesCpu(Tester("Clip", 13).Input(x), what + " no bounds");
      // min > max: every element becomes max.
      ExpectCudaMatchesCpu(Tester("Clip", 13).Input(x).Input(Make(t, {1}, {hi})).Input(Make(t, {1}, {lo})),
                           what + " min > max");
    }
  }
}

TEST(CudaClip, AttributeBoundsBeforeOpset11) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType t : kFloat) {
    ir::Tensor x = Input(t, {33, 65}, 3, -5, 5);
    const std::string name(DTypeName(t));
    OpTester both = Tester("Clip", 6);
    both.Attr(ir::Attribute::Float("min", -1.5f)).Attr(ir::Attribute::Float("max", 0.75f)).Input(x);
    ExpectCudaMatchesCpu(both, "Clip-6 min max " + name);
    OpTester lo = Tester("Clip", 6);
    lo.Attr(ir::Attribute::Float("min", -1.5f)).Input(x);
    ExpectCudaMatchesCpu(lo, "Clip-6 min " + name);
    OpTester hi = Tester("Clip", 6);
    hi.Attr(ir::Attribute::Float("max", 0.75f)).Input(x);
    ExpectCudaMatchesCpu(hi, "Clip-6 max " + name);
    ExpectCudaMatchesCpu(Tester("Clip", 6).Input(x), "Clip-6 none " + name);
  }
}

// NaN stays NaN; infinities are clipped.
TEST(CudaClip, NaNAndInfinities) {
  ONNXAMP_REQUIRE_CUDA();
  const double inf = std::numeric_limits<double>::infinity();
  for (DType t : kFloat) {
    ir::Tensor x = Make(t, {7}, {std::nan(""), inf, -inf, 0.0, -0.0, 3.0, -3.0});
    ExpectCudaMatchesCpu(Tester("Clip", 13).Input(x).Input(Make(t, {}, {-1})).Input(Make(t, {}, {1})),
                         "Clip NaN " + std::string(DTypeName(t)));
  }
}

TEST(CudaClip, ErrorsMatchTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectSameRunError(
      Tester("Clip", 13).Input(Make(DType::kFloat32, {2}, {1, 2})).Input(Make(DType::kFloat32, {2}, {0, 1})));
  ExpectSameRunError(
      Tester("Clip", 13).Input(Make(DType::kFloat32, {2}, {1, 2})).Input(Make(DType::kFloat64, {}, {0})));
  OpTester bad = Tester("Clip", 6);
  bad.Attr(ir::Attribute::String("min", "x")).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectSameCreateError(bad);
}

// ---- Where ------------------------------------------------------------------------------------------------------

TEST(CudaWhere, EveryTypeAndBroadcast) {
  ONNXAMP_REQUIRE_CUDA();
  const std::vector<std::vector<std::vector<int64_t>>> shape_sets = {
      {{}, {}, {}},
      {{7}, {7}, {7}},
      {{33, 65}, {33, 65}, {33, 65}},
      {{33, 65}, {}, {33, 65}},   // scalar X
      {{33, 65}, {65}, {33, 1}},  // row and column
      {{4, 1, 5}, {3, 1}, {5}},   // general
      {{2, 3, 4, 5}, {1, 3, 1, 5}, {2, 1, 4, 1}},
      {{0, 3}, {3}, {1}},
  };
  for (DType t : CastTypes()) {
    uint32_t seed = 9;
    for (const auto& shapes : shape_sets) {
      ExpectCudaMatchesCpu(Tester("Where", 16)
                               .Input(Input(DType::kBool, shapes[0], seed, 0, 1))
                               .Input(Input(t, shapes[1], seed + 1, -50, 50))
                               .Input(Input(t, shapes[2], seed + 2, -50, 50)),
                           "Where " + std::string(DTypeName(t)) + " " + ShapeName(shapes[0]) + " " +
                               ShapeName(shapes[1]) + " " + ShapeName(shapes[2]));
      seed += 3;
    }
  }
  // Opset 9 and a tensor of more than 65535 x 256 elements.
  ExpectCudaMatchesCpu(Tester("Where", 9)
                           .Input(Input(DType::kBool, {16385, 1025}, 1, 0, 1))
                           .Input(BigFloat({16385, 1025}, 2))
                           .Input(BigFloat({1025}, 3)),
                       "Where large");
}

TEST(CudaWhere, ErrorsMatchTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectSameRunError(Tester("Where", 16)
                         .Input(Make(DType::kBool, {2}, {1, 0}))
                         .Input(Make(DType::kFloat32, {2}, {1, 2}))
                         .Input(Make(DType::kFloat16, {2}, {1, 2})));
}

// ---- Dropout ----------------------------------------------------------------------------------------------------

// Inference: the output is the input and the mask all ones (T before opset 10, bool after).
TEST(CudaDropout, InferenceIsIdentityWithAFullMask) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType t : kFloat) {
    for (int64_t opset : {7, 10, 12, 13}) {
      for (const auto& dims : UnaryShapes()) {
        OpTester d = Tester("Dropout", opset);
        d.num_outputs = 2;
        d.Input(Input(t, dims, 4, -3, 3));
        if (opset >= 12) d.Input(Make(t, {}, {0.3})).Input(MakeBool({}, {false}));
        ExpectCudaMatchesCpu(d, "Dropout inference opset " + std::to_string(opset) + " " + std::string(DTypeName(t)) +
                                    " " + ShapeName(dims));
      }
    }
    OpTester no_mask = Tester("Dropout", 13);
    no_mask.Input(Input(t, {5, 5}, 4, -3, 3));
    ExpectCudaMatchesCpu(no_mask, "Dropout inference without mask " + std::string(DTypeName(t)));
  }
  // Opset 1-6 with is_test = 1.
  OpTester legacy = Tester("Dropout", 6);
  legacy.num_outputs = 2;
  legacy.Attr(ir::Attribute::Int("is_test", 1)).Input(Input(DType::kFloat32, {4, 4}, 1, -1, 1));
  ExpectCudaMatchesCpu(legacy, "Dropout-6 is_test");
}

// Training mode: the device hashes (seed, index) exactly as the CPU, so output and mask match the CPU's exactly.
TEST(CudaDropout, TrainingMatchesTheCpuMask) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType t : kFloat) {
    for (double ratio : {0.1, 0.5, 0.9, 1.0}) {
      OpTester d = Tester("Dropout", 13);
      d.num_outputs = 2;
      d.Attr(ir::Attribute::Int("seed", 1234));
      d.Input(Input(t, {33, 65}, 2, -3, 3)).Input(Make(DType::kFloat32, {}, {ratio})).Input(MakeBool({}, {true}));
      ExpectCudaMatchesCpu(d, "Dropout training " + std::string(DTypeName(t)) + " ratio " + std::to_string(ratio));
    }
    // Without a seed attribute: the session's per-node seed (the same for both sessions with the same options).
    OpTester d = Tester("Dropout", 13);
    d.num_outputs = 2;
    d.options.seed = 77;
    d.Input(Input(t, {1000}, 3, -3, 3)).Input(Make(t, {}, {0.25})).Input(MakeBool({}, {true}));
    ExpectCudaMatchesCpu(d, "Dropout training session seed " + std::string(DTypeName(t)));
  }
  // Opset 6 training (is_test = 0) with a mask of the data type.
  OpTester legacy = Tester("Dropout", 6);
  legacy.num_outputs = 2;
  legacy.Attr(ir::Attribute::Float("ratio", 0.4f)).Input(Input(DType::kFloat16, {9, 9}, 1, -1, 1));
  ExpectCudaMatchesCpu(legacy, "Dropout-6 training");
}

// The statistics of the mask on its own: the kept fraction is 1 - ratio, kept elements are scaled by 1 / (1 - ratio),
// dropped ones are 0, and the same seed gives the same mask twice.
TEST(CudaDropout, TrainingStatistics) {
  ONNXAMP_REQUIRE_CUDA();
  const int64_t n = 1 << 20;
  const double ratio = 0.3;
  OpTester d = Tester("Dropout", 13);
  d.num_outputs = 2;
  d.Attr(ir::Attribute::Int("seed", 42));
  d.Input(Make(DType::kFloat32, {n}, std::vector<double>(n, 2.0)))
      .Input(Make(DType::kFloat32, {}, {ratio}))
      .Input(MakeBool({}, {true}));
  auto first = RunOnCuda(d);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = RunOnCuda(d);
  ASSERT_TRUE(second.ok()) << second.status().message();
  ASSERT_EQ(first->size(), 2u);
  const auto y = (*first)[0].values<float>();
  const auto mask = (*first)[1].values<bool>();
  const auto mask2 = (*second)[1].values<bool>();
  const float kept_value = 2.0f * (1.0f / (1.0f - static_cast<float>(ratio)));
  int64_t kept = 0, mismatched = 0, differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    kept += mask[i];
    if (y[i] != (mask[i] ? kept_value : 0.0f)) ++mismatched;
    if (mask[i] != mask2[i]) ++differ;
  }
  // 1M Bernoulli(0.7) draws: the standard deviation of the fraction is 0.00045; allow 10 of them.
  EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - ratio, 0.0045);
  EXPECT_EQ(mismatched, 0) << "output and mask disagree";
  EXPECT_EQ(differ, 0) << "the same seed gave different masks";
  // Another seed gives another mask.
  OpTester other = d;
  other.attributes.clear();
  other.Attr(ir::Attribute::Int("seed", 43));
  auto third = RunOnCuda(other);
  ASSERT_TRUE(third.ok()) << third.status().message();
  const auto mask3 = (*third)[1].values<bool>();
  int64_t changed = 0;
  for (int64_t i = 0; i < n; ++i) changed += mask[i] != mask3[i];
  EXPECT_GT(changed, n / 10);
}

TEST(CudaDropout, ErrorsMatchTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectSameRunError(Tester("Dropout", 13)
                         .Input(Make(DType::kFloat32, {2}, {1, 2}))
                         .Input(Make(DType::kFloat32, {}, {1.5}))
                         .Input(MakeBool({}, {true})));
  ExpectSameRunError(
      Tester("Dropout", 13).Input(Make(DType::kFloat32, {2}, {1, 2})).Input(Make(DType::kFloat32, {2}, {0.5, 0.5})));
  OpTester bad = Tester("Dropout", 10);
  bad.Attr(ir::Attribute::Float("ratio", 2.0f)).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectSameCreateError(bad);
}

}  // namespace
}  // namespace onnxamp::testing::cuda_ew
