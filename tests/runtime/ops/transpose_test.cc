// Tests of Transpose: the fast path against the plain reference over random shapes and permutations for every
// element size, the op on every element type, the default perm, and bad perms.
#include "runtime/ops/transpose/transpose.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

// The output index -> input index map of a transpose, computed the obvious way.
std::vector<int64_t> TransposeSources(const std::vector<int64_t>& dims, const std::vector<int64_t>& perm) {
  const size_t rank = dims.size();
  std::vector<int64_t> out_dims(rank), in_strides(rank, 1);
  for (size_t k = rank; k-- > 1;) in_strides[k - 1] = in_strides[k] * dims[k];
  for (size_t k = 0; k < rank; ++k) out_dims[k] = dims[perm[k]];
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  std::vector<int64_t> src(static_cast<size_t>(count));
  std::vector<int64_t> idx(rank, 0);
  for (int64_t o = 0; o < count; ++o) {
    int64_t s = 0;
    for (size_t k = 0; k < rank; ++k) s += idx[k] * in_strides[perm[k]];
    src[o] = s;
    for (size_t k = rank; k-- > 0;) {
      if (++idx[k] < out_dims[k]) break;
      idx[k] = 0;
    }
  }
  return src;
}

class TransposeFastVsReference : public ::testing::TestWithParam<size_t> {};

TEST_P(TransposeFastVsReference, RandomShapesAndPerms) {
  const size_t elem = GetParam();
  std::mt19937 rng(1234 + static_cast<unsigned>(elem));
  exec::ThreadPool pool(4);
  for (int iter = 0; iter < 150; ++iter) {
    const size_t rank = 1 + rng() % 5;
    std::vector<int64_t> dims(rank);
    int64_t count = 1;
    for (auto& d : dims) {
      // Mostly small, sometimes 1 (dropped by the simplification), sometimes large enough for several tiles.
      const unsigned pick = rng() % 10;
      d = pick == 0 ? 1 : pick < 8 ? 1 + rng() % 7 : 20 + rng() % 50;
      count *= d;
    }
    if (count > 200000) continue;
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<std::byte> src(static_cast<size_t>(count) * elem), want(src.size()), got(src.size());
    for (auto& b : src) b = std::byte(rng() & 0xff);
    ops::TransposeReference(src.data(), want.data(), dims, perm, elem);
    ops::TransposeFast(src.data(), got.data(), dims, perm, elem, iter % 2 ? &pool : nullptr);
    ASSERT_EQ(got, want) << "dims " << ::testing::PrintToString(dims) << " perm " << ::testing::PrintToString(perm);
  }
}

TEST_P(TransposeFastVsReference, LargeBlockedCasesUseThreads) {
  // The transformer's [B,S,H,D] -> [B,H,D,S] (blocked 2D) and [B,S,H,D] -> [B,H,S,D] (row copies).
  const size_t elem = GetParam();
  exec::ThreadPool pool(4);
  const std::vector<int64_t> dims = {2, 67, 4, 33};
  for (const std::vector<int64_t>& perm :
       {std::vector<int64_t>{0, 2, 3, 1}, std::vector<int64_t>{0, 2, 1, 3}, std::vector<int64_t>{3, 2, 1, 0}}) {
    const size_t n = 2 * 67 * 4 * 33 * elem;
    std::vector<std::byte> src(n), want(n), got(n);
    for (size_t i = 0; i < n; ++i) src[i] = std::byte((i * 7 + i / 251) & 0xff);
    ops::TransposeReference(src.data(), want.data(), dims, perm, elem);
    ops::TransposeFast(src.data(), got.data(), dims, perm, elem, &pool);
    EXPECT_EQ(got, want) << "perm " << ::testing::PrintToString(perm);
  }
}

TEST_P(TransposeFastVsReference, RanksAboveTheInlineDims) {
  // More dims (and more that stay after dropping the 1s and merging) than ops::DimVector keeps inline.
  const size_t elem = GetParam();
  std::mt19937 rng(77 + static_cast<unsigned>(elem));
  for (int iter = 0; iter < 20; ++iter) {
    const size_t rank = 9 + rng() % 4;
    std::vector<int64_t> dims(rank);
    int64_t count = 1;
    for (auto& d : dims) {
      d = rng() % 4 == 0 ? 1 : 2;
      count *= d;
    }
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<std::byte> src(static_cast<size_t>(count) * elem), want(src.size()), got(src.size());
    for (auto& b : src) b = std::byte(rng() & 0xff);
    ops::TransposeReference(src.data(), want.data(), dims, perm, elem);
    ops::TransposeFast(src.data(), got.data(), dims, perm, elem, nullptr);
    ASSERT_EQ(got, want) << "dims " << ::testing::PrintToString(dims) << " perm " << ::testing::PrintToString(perm);
  }
}

INSTANTIATE_TEST_SUITE_P(ElementSizes, TransposeFastVsReference, ::testing::Values(1, 2, 4, 8, 16),
                         [](const ::testing::TestParamInfo<size_t>& info) { return StrCat("bytes", info.param); });

class TransposeOpTest : public ::testing::TestWithParam<DType> {};

TEST_P(TransposeOpTest, PermutesEveryType) {
  const DType dt = GetParam();
  const std::vector<int64_t> dims = {2, 3, 4};
  for (const std::vector<int64_t>& perm :
       {std::vector<int64_t>{1, 0, 2}, std::vector<int64_t>{2, 0, 1}, std::vector<int64_t>{0, 2, 1}}) {
    OpTester t = Op("Transpose", 13);
    t.Input(IotaTensor(dt, dims)).Attr(ir::Attribute::Ints("perm", perm));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectGathered((*out)[0], dt, {dims[perm[0]], dims[perm[1]], dims[perm[2]]}, TransposeSources(dims, perm), nullptr,
                   "perm " + ::testing::PrintToString(perm));
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, TransposeOpTest, ::testing::ValuesIn(MovableDTypes()), DTypeTestName);

TEST(TransposeTest, DefaultPermReversesDims) {
  OpTester t = Op("Transpose", 1);
  t.Input(IotaTensor(DType::kFloat32, {2, 3, 4}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGathered((*out)[0], DType::kFloat32, {4, 3, 2}, TransposeSources({2, 3, 4}, {2, 1, 0}));
}

TEST(TransposeTest, EmptyAndScalarInputs) {
  OpTester empty = Op("Transpose", 13);
  empty.Input(ir::Tensor(DType::kFloat32, {0, 3})).Attr(ir::Attribute::Ints("perm", {1, 0}));
  auto out = empty.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{3, 0}));
  OpTester scalar = Op("Transpose", 13);
  scalar.Input(MakeTensor<float>({}, {5}));
  out = scalar.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<float>((*out)[0]), std::vector<float>{5});
}

TEST(TransposeTest, BadPermsAreRefused) {
  OpTester dup = Op("Transpose", 13);
  dup.Input(ir::Tensor(DType::kFloat32, {2, 3})).Attr(ir::Attribute::Ints("perm", {0, 0}));
  auto session = exec::Session::Create(dup.BuildModel());
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("attribute 'perm' [0,0] is not a permutation"), std::string::npos)
      << session.status().message();
  OpTester rank = Op("Transpose", 13);
  rank.Input(ir::Tensor(DType::kFloat32, {2, 3, 4})).Attr(ir::Attribute::Ints("perm", {1, 0}));
  ExpectRunError(rank, "has 2 entries but the input has rank 3");
  OpTester sub = Op("Transpose", 21);
  sub.Input(ir::Tensor(DType::kInt4, {2, 2})).Attr(ir::Attribute::Ints("perm", {1, 0}));
  auto sub_out = sub.Run();
  ASSERT_FALSE(sub_out.ok());
  EXPECT_EQ(sub_out.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(sub_out.status().message().find("int4"), std::string::npos) << sub_out.status().message();
}

}  // namespace
}  // namespace onnxamp::testing
