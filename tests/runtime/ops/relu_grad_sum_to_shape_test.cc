// Bit-exactness tests of the CPU ReluGrad and SumToShape kernels (com.onnxamp) against the straightforward definitions
// they replaced: ReluGrad on fp16/bf16 compares bit patterns instead of converting Y to float, so every one of the
// 65536 Y patterns is checked against Load<T>(y) > 0; SumToShape walks G in merged runs, so its results are checked
// bit for bit against a per-element walk (double accumulators, each output summed in element order, rounded once) over
// broadcast patterns, size-1 dims, scalar targets, empty tensors, runs longer than the kernel's conversion buffer and
// all 65536 fp16/bf16 patterns. (The builders' finite-difference checks are in tests/trainer/grad_elementwise_test.cc.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;
using ops::ShapeToString;

// The bit pattern of element i of a float tensor (any of the four float types), widened to 64 bits.
uint64_t BitsAt(const ir::Tensor& t, size_t i) {
  uint64_t bits = 0;
  const size_t size = t.nbytes() / static_cast<size_t>(t.num_elements());
  std::memcpy(&bits, t.bytes().data() + i * size, size);  // little-endian: the low bytes
  return bits;
}

// Expects `got` to hold exactly `want`'s bits (NaNs may differ in payload and sign when `any_nan` is set).
void ExpectSameBits(const ir::Tensor& got, const ir::Tensor& want, const std::string& what, bool any_nan = false) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.dims(), want.dims()) << what;
  const std::vector<double> g = AsDoubles(got), w = AsDoubles(want);
  int mismatches = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (any_nan && std::isnan(g[i]) && std::isnan(w[i])) continue;
    if (BitsAt(got, i) == BitsAt(want, i)) continue;
    ADD_FAILURE() << what << ": element " << i << " is " << g[i] << " (bits 0x" << std::hex << BitsAt(got, i)
                  << "), want " << std::dec << w[i] << " (bits 0x" << std::hex << BitsAt(want, i) << ")";
    if (++mismatches == 5) return;
  }
}

// ---- ReluGrad on fp16/bf16 ----------------------------------------------------------------------------------------

// dY patterns, all nonzero: ordinary values of both signs, subnormals, infinities and NaNs.
constexpr uint16_t kHalfGrads[] = {0x3C00, 0xBC00, 0x0001, 0x8001, 0x7BFF, 0x7C00, 0xFC00, 0x7E01, 0xFFFF, 0x1234};
constexpr uint16_t kBFloat16Grads[] = {0x3F80, 0xBF80, 0x0001, 0x8001, 0x7F7F, 0x7F80, 0xFF80, 0x7FC1, 0xFFFF, 0x1234};

template <typename T>
void CheckReluGradOnEveryPattern(const uint16_t (&grads)[10], int threads) {
  SCOPED_TRACE(std::string(DTypeName(ops::DTypeOf<T>())) + ", " + std::to_string(threads) + " threads");
  constexpr int64_t kPatterns = 65536;
  ir::Tensor dy(ops::DTypeOf<T>(), {kPatterns}), y(ops::DTypeOf<T>(), {kPatterns});
  auto dyv = dy.mutable_values<T>();
  auto yv = y.mutable_values<T>();
  for (int64_t i = 0; i < kPatterns; ++i) {
    yv[i] = T::FromBits(static_cast<uint16_t>(i));
    dyv[i] = T::FromBits(grads[(i * 7 + i / 3) % 10]);  // varies independently of Y's pattern
  }
  OpTester t = InternalOp(ops::kReluGradOp);
  t.options.num_threads = threads;
  t.Input(dy).Input(y);
  const std::vector<ir::Tensor> out = RunOk(t);
  ASSERT_EQ(out.size(), 1u);
  const auto got = out[0].values<T>();
  ASSERT_EQ(static_cast<int64_t>(got.size()), kPatterns);
  int mismatches = 0;
  for (int64_t i = 0; i < kPatterns && mismatches < 5; ++i) {
    // The definition the kernel replaced: Y converted to float and compared with 0.
    const T want = ops::Load<T>(yv[i]) > 0 ? dyv[i] : ops::Store<T>(0);
    if (got[i].bits == want.bits) continue;
    ++mismatches;
    ADD_FAILURE() << "Y bits 0x" << std::hex << yv[i].bits << ", dY bits 0x" << dyv[i].bits << ": got 0x" << got[i].bits
                  << ", want 0x" << want.bits;
  }
}

TEST(ReluGradCpuBits, EveryHalfPatternMatchesTheFloatCompare) {
  CheckReluGradOnEveryPattern<Float16>(kHalfGrads, 1);
  CheckReluGradOnEveryPattern<Float16>(kHalfGrads, 3);  // split across threads at odd boundaries
}

TEST(ReluGradCpuBits, EveryBFloat16PatternMatchesTheFloatCompare) {
  CheckReluGradOnEveryPattern<BFloat16>(kBFloat16Grads, 1);
  CheckReluGradOnEveryPattern<BFloat16>(kBFloat16Grads, 3);
}

// ---- SumToShape ---------------------------------------------------------------------------------------------------

// The per-element algorithm the kernel replaced: one double accumulator per output, G walked in element order with a
// multi-index that keeps the output offset up to date, each accumulator rounded once to T.
template <typename T>
ir::Tensor ReferenceSumToShape(const ir::Tensor& g, const Dims& out_dims) {
  const Dims& in_dims = g.dims();
  const size_t rank = in_dims.size();
  const size_t lead = rank - out_dims.size();
  std::vector<int64_t> out_stride(rank, 0);
  int64_t stride = 1;
  for (size_t d = rank; d-- > lead;) {
    out_stride[d] = out_dims[d - lead] != in_dims[d] ? 0 : stride;
    stride *= out_dims[d - lead];
  }
  ir::Tensor y(g.dtype(), out_dims);
  std::vector<double> acc(static_cast<size_t>(y.num_elements()), 0.0);
  const auto in = g.values<T>();
  std::vector<int64_t> index(rank, 0);
  int64_t o = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    acc[static_cast<size_t>(o)] += static_cast<double>(ops::Load<T>(in[i]));
    for (size_t d = rank; d-- > 0;) {
      o += out_stride[d];
      if (++index[d] < in_dims[d]) break;
      o -= out_stride[d] * in_dims[d];
      index[d] = 0;
    }
  }
  auto out = y.mutable_values<T>();
  for (size_t i = 0; i < acc.size(); ++i) out[i] = ops::Store<T>(static_cast<ops::ComputeType<T>>(acc[i]));
  return y;
}

ir::Tensor ReferenceFor(const ir::Tensor& g, const Dims& out_dims) {
  std::optional<ir::Tensor> y;
  const Status st = ops::DispatchFloat(g.dtype(), [&](auto tag) {
    y = ReferenceSumToShape<typename decltype(tag)::type>(g, out_dims);
    return Status::Ok();
  });
  EXPECT_TRUE(st.ok()) << st.message();
  return *std::move(y);
}

// Runs SumToShape(g, out_dims) and expects the reference's bits.
void ExpectSumToShapeMatchesReference(const ir::Tensor& g, const Dims& out_dims, bool any_nan = false) {
  const std::string what =
      std::string(DTypeName(g.dtype())) + " " + ShapeToString(g.dims()) + " to " + ShapeToString(out_dims);
  OpTester t = InternalOp(ops::kSumToShapeOp);
  t.Input(g).Input(Int64Tensor({static_cast<int64_t>(out_dims.size())}, out_dims));
  const std::vector<ir::Tensor> out = RunOk(t);
  ASSERT_EQ(out.size(), 1u) << what;
  ExpectSameBits(out[0], ReferenceFor(g, out_dims), what, any_nan);
}

// Values whose sums depend on the order of the additions: magnitudes spread over 2^-20..2^20, both signs, some -0,
// and now and then +-2^70, which absorbs the smaller values in a double until another one cancels it (so what is
// left depends on the order even after rounding to 8 bits of bfloat16). fp16 gets 2^-24..2^15 instead (it has no
// 2^70; its sums are exact in double whatever the order, so there the test checks the runs' bookkeeping).
std::vector<double> SpreadValues(DType dtype, size_t n, uint32_t seed) {
  const bool half = dtype == DType::kFloat16;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(half ? -24 : -20, half ? 15 : 20);
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const double m = mantissa(gen);
    const int e = exponent(gen);
    if (i % 97 == 5) {
      v[i] = -0.0;
    } else if (!half && i % 13 == 7) {
      v[i] = std::copysign(0x1p70, m);
    } else {
      v[i] = std::ldexp(m, e);
    }
  }
  return v;
}

int64_t NumElements(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

struct SumCase {
  Dims g, target;
};

class SumToShapeCpuBitsTest : public ::testing::TestWithParam<DType> {};

TEST_P(SumToShapeCpuBitsTest, BroadcastPatternsMatchTheElementwiseWalk) {
  const std::vector<SumCase> cases = {
      // Leading dims removed.
      {{2, 3, 4}, {4}},
      {{2, 3, 4}, {3, 4}},
      {{5, 2, 3, 4}, {3, 4}},
      // [M, N] -> [N] (the bias gradient of a Linear) and [M, N] -> [M, 1].
      {{64, 128}, {128}},
      {{7, 5}, {5}},
      {{7, 5}, {1, 5}},
      {{64, 128}, {64, 1}},
      {{9, 3}, {9, 1}},
      {{13, 6}, {13, 1}},
      // [A, B, C] -> [A, 1, C] and [A, B, C] -> [1, B, 1].
      {{3, 4, 5}, {3, 1, 5}},
      {{2, 70, 3}, {2, 1, 3}},
      {{3, 4, 5}, {1, 4, 1}},
      {{2, 7, 3}, {7, 1}},
      {{5, 11, 13}, {11, 1}},
      {{3, 6, 10}, {3, 6, 1}},  // four-run groups that wrap the kept dim
      {{5, 6, 7, 8}, {6, 1, 8}},
      {{2, 3, 4, 5}, {2, 1, 4, 1}},
      {{4, 3, 2, 5, 3}, {3, 1, 5, 1}},
      // Size-1 dims, in G and in the target.
      {{1, 3, 1, 4}, {3, 1, 4}},
      {{2, 1, 3}, {1, 1, 3}},
      {{3, 1, 5}, {1, 5}},
      {{4, 1}, {1}},
      {{1, 1}, {}},
      {{1, 6, 1}, {6, 1}},
      {{6, 1, 4}, {6, 1, 1}},
      // Scalar targets, and all-1 targets of the same rank.
      {{2, 2}, {}},
      {{1000}, {}},
      {{1}, {}},
      {{3, 5}, {1, 1}},
      {{2, 3, 4}, {1}},
      // Runs longer than the 16-bit types' conversion buffer (4096 floats; a quarter of it for summed runs).
      {{6, 5000}, {6, 1}},
      {{5, 1025}, {5, 1}},
      {{3, 4100}, {4100}},
      {{2, 9000}, {1, 9000}},
      {{3, 2, 4500}, {2, 1}},
      {{10000}, {}},
      {{2, 3000, 2}, {2, 1, 2}},
      // Empty G: the outputs of a dim of size 0 summed away are 0.
      {{0, 3}, {3}},
      {{0, 3}, {1, 3}},
      {{2, 0}, {2, 1}},
      {{0, 4}, {0, 1}},
      {{3, 0}, {0}},
      {{0}, {}},
  };
  uint32_t seed = 11;
  for (const SumCase& c : cases) {
    const ir::Tensor g =
        TensorOf(GetParam(), c.g, SpreadValues(GetParam(), static_cast<size_t>(NumElements(c.g)), seed++));
    ExpectSumToShapeMatchesReference(g, c.target);
  }
}

TEST_P(SumToShapeCpuBitsTest, InfinitiesAndOverflow) {
  // Sums that reach inf in the element type, inf - inf (NaN), and -0 + -0 (+0: the accumulators start at +0).
  std::vector<double> values = SpreadValues(GetParam(), 4 * 300, 5);
  for (size_t i = 0; i < values.size(); i += 37) values[i] = 60000.0;
  values[3] = INFINITY;
  values[4] = -INFINITY;
  values[300 + 7] = INFINITY;
  for (size_t i = 600; i < 900; ++i) values[i] = -0.0;
  const ir::Tensor g = TensorOf(GetParam(), {4, 300}, values);
  ExpectSumToShapeMatchesReference(g, {4, 1});
  ExpectSumToShapeMatchesReference(g, {300});
  ExpectSumToShapeMatchesReference(TensorOf(GetParam(), {300, 4}, values), {300, 1});
}

INSTANTIATE_TEST_SUITE_P(Types, SumToShapeCpuBitsTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

// Every fp16/bf16 pattern (NaNs, signalling ones included, infinities, subnormals, -0) through both loops: each
// output gets one pattern and 1.0, so NaN payloads are deterministic and compared bit for bit as well.
template <typename T>
void CheckSumToShapeOnEveryPattern(uint16_t one) {
  constexpr int64_t kPatterns = 65536;
  ir::Tensor rows(ops::DTypeOf<T>(), {2, kPatterns}), cols(ops::DTypeOf<T>(), {kPatterns, 2});
  auto r = rows.mutable_values<T>();
  auto c = cols.mutable_values<T>();
  for (int64_t i = 0; i < kPatterns; ++i) {
    r[i] = T::FromBits(static_cast<uint16_t>(i));
    r[kPatterns + i] = T::FromBits(one);
    c[2 * i] = T::FromBits(static_cast<uint16_t>(i));
    c[2 * i + 1] = T::FromBits(one);
  }
  ExpectSumToShapeMatchesReference(rows, {kPatterns});
  ExpectSumToShapeMatchesReference(cols, {kPatterns, 1});
}

TEST(SumToShapeCpuBits, EveryHalfPattern) { CheckSumToShapeOnEveryPattern<Float16>(0x3C00); }

TEST(SumToShapeCpuBits, EveryBFloat16Pattern) { CheckSumToShapeOnEveryPattern<BFloat16>(0x3F80); }

// Random 16-bit patterns, several per output: NaNs meet NaNs, whose payload the addition order of the compiled code
// picks, so NaN results only have to be NaN.
TEST(SumToShapeCpuBits, RandomHalfAndBFloat16Patterns) {
  std::mt19937 gen(3);
  std::uniform_int_distribution<int> bits(0, 65535);
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (const SumCase& c : std::vector<SumCase>{{{50, 40}, {40}}, {{50, 40}, {50, 1}}, {{6, 7, 8}, {1, 7, 1}}}) {
      ir::Tensor g(dtype, c.g);
      for (uint16_t& v : g.mutable_values<uint16_t>()) v = static_cast<uint16_t>(bits(gen));
      ExpectSumToShapeMatchesReference(g, c.target, /*any_nan=*/true);
    }
  }
}

}  // namespace
}  // namespace onnxamp::testing
