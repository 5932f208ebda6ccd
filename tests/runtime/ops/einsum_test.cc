// Einsum kernel: hand-computed equations (matmul, transpose, diagonal, trace, sums, outer products, ellipsis
// broadcasting, implicit output order, three operands, size-1 broadcasting), the GEMM fast path against the
// reference loop on random shapes for every element type, equation parsing, and errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/ops/einsum/einsum_equation.h"
#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

struct Operand {
  Dims dims;
  std::vector<double> values;
};

OpTester EinsumTester(DType dtype, const std::string& equation, const std::vector<Operand>& ops) {
  OpTester t = MakeTester("Einsum", 12);
  t.Attr(ir::Attribute::String("equation", equation));
  for (const Operand& op : ops) t.Input(TensorOf(dtype, op.dims, op.values));
  return t;
}

struct HandCase {
  std::string equation;
  std::vector<Operand> inputs;
  Dims out_dims;
  std::vector<double> out;
};

TEST(Einsum, HandComputed) {
  const Operand m23{{2, 3}, {1, 2, 3, 4, 5, 6}};
  const Operand m32{{3, 2}, {1, 0, 0, 1, 1, 1}};
  const Operand sq{{3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  const Operand v3{{3}, {1, 2, 3}};
  const Operand w2{{2}, {10, 20}};
  const std::vector<HandCase> cases = {
      {"ij,jk->ik", {m23, m32}, {2, 2}, {4, 5, 10, 11}},
      {"ij,jk", {m23, m32}, {2, 2}, {4, 5, 10, 11}},
      {"ij->ji", {m23}, {3, 2}, {1, 4, 2, 5, 3, 6}},
      {"ji", {m23}, {3, 2}, {1, 4, 2, 5, 3, 6}},  // implicit output is alphabetical: "ij"
      {"ii->i", {sq}, {3}, {1, 5, 9}},
      {"ii", {sq}, {}, {15}},
      {"ij->", {m23}, {}, {21}},
      {"ij->j", {m23}, {3}, {5, 7, 9}},
      {"i,i", {v3, v3}, {}, {14}},
      {"i,j->ij", {w2, v3}, {2, 3}, {10, 20, 30, 20, 40, 60}},
      {"Ab,bC->AC", {m23, m32}, {2, 2}, {4, 5, 10, 11}},
      {"bA", {m23}, {3, 2}, {1, 4, 2, 5, 3, 6}},  // implicit order puts uppercase first: "Ab"
      {"...j,j->...", {m23, v3}, {2}, {14, 32}},
      {"ij,jk,kl->il", {m23, m32, Operand{{2, 1}, {1, 2}}}, {2, 1}, {14, 32}},
      {"iij,j->i", {Operand{{2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}}, w2}, {2}, {50, 230}},
      {"ij,ij->ij", {m23, Operand{{1, 3}, {1, 0, -1}}}, {2, 3}, {1, 0, -3, 4, 0, -6}},  // size-1 broadcast
  };
  for (const HandCase& c : cases) {
    for (ops::LinalgImpl impl : AvailableImpls()) {
      auto out = RunWith(EinsumTester(DType::kFloat32, c.equation, c.inputs), impl);
      ASSERT_EQ(out.size(), 1u) << c.equation;
      EXPECT_EQ(out[0].dims(), c.out_dims) << c.equation << " " << ops::LinalgImplName(impl);
      ExpectNear(out[0], c.out, {}, StrCat(c.equation, " ", ops::LinalgImplName(impl)));
    }
  }
}

TEST(Einsum, EllipsisBroadcastsBatchDims) {
  // "...ij,...jk->...ik" with batch [2, 1] x [3]: 2 x 3 products of 1x2 by 2x1.
  const Operand a{{2, 1, 1, 2}, {1, 2, 3, 4}};
  const Operand b{{3, 2, 1}, {1, 1, 1, 0, 0, 1}};
  for (ops::LinalgImpl impl : AvailableImpls()) {
    auto out = RunWith(EinsumTester(DType::kFloat32, "...ij,...jk->...ik", {a, b}), impl);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dims(), (Dims{2, 3, 1, 1}));
    EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{3, 1, 2, 7, 3, 4})) << ops::LinalgImplName(impl);
  }
}

struct RandomCase {
  std::string equation;
  std::vector<Dims> shapes;
};

class EinsumTyped : public ::testing::TestWithParam<DType> {};

// The fast path (and the portable/oneDNN GEMMs under it) against the reference loop.
TEST_P(EinsumTyped, FastPathMatchesReference) {
  const DType dtype = GetParam();
  const std::vector<RandomCase> cases = {
      {"ij,jk->ik", {{13, 17}, {17, 9}}},
      {"bij,bjk->bik", {{3, 7, 11}, {3, 11, 5}}},
      {"bhqd,bhkd->bhqk", {{2, 3, 5, 8}, {2, 3, 6, 8}}},
      {"bhqk,bhkd->bqhd", {{2, 3, 5, 6}, {2, 3, 6, 4}}},
      {"ik,jk->ij", {{7, 9}, {5, 9}}},
      {"ki,kj->ij", {{9, 7}, {9, 5}}},
      {"abc,cd->abd", {{4, 5, 6}, {6, 3}}},
      {"bn,anm,bm->ba", {{3, 4}, {2, 4, 5}, {3, 5}}},
      {"ijk->kji", {{3, 4, 5}}},
      {"ijk->j", {{3, 4, 5}}},
      {"iij->ij", {{4, 4, 3}}},
      {"ij,ij->i", {{6, 7}, {6, 7}}},
      {"i,j,k->ijk", {{2}, {3}, {4}}},
      {"...ij,...jk", {{2, 3, 4, 5}, {2, 3, 5, 2}}},
      {"iik,kj->ij", {{3, 3, 4}, {4, 5}}},
      {"aBc,cBd->ad", {{3, 4, 5}, {5, 4, 2}}},
  };
  uint32_t seed = 1;
  for (const RandomCase& c : cases) {
    std::vector<Operand> inputs;
    for (const Dims& d : c.shapes) {
      int64_t n = 1;
      for (int64_t x : d) n *= x;
      // Positive values: no cancellation, so summation order barely matters.
      inputs.push_back(
          {d, RandomValues(dtype, n, seed++, 0, dtype == DType::kInt32 || dtype == DType::kInt64 ? 9 : 1)});
    }
    const auto ref = RunWith(EinsumTester(dtype, c.equation, inputs), ops::LinalgImpl::kReference);
    ASSERT_EQ(ref.size(), 1u) << c.equation;
    const std::vector<double> want = AsDoubles(ref[0]);
    for (ops::LinalgImpl impl : AvailableImpls()) {
      auto out = RunWith(EinsumTester(dtype, c.equation, inputs), impl);
      ASSERT_EQ(out.size(), 1u) << c.equation;
      EXPECT_EQ(out[0].dims(), ref[0].dims()) << c.equation;
      ExpectNear(out[0], want, {}, StrCat(c.equation, " ", ops::LinalgImplName(impl)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, EinsumTyped,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                           DType::kInt32, DType::kInt64),
                         DTypeParamName);

TEST(Einsum, ReferenceAgainstDoubleMatMul) {
  // The reference itself on a batched matmul with odd sizes, against a product computed here.
  const Dims ad = {2, 5, 7}, bd = {2, 7, 3};
  const auto a = RandomValues(DType::kFloat64, 70, 3), b = RandomValues(DType::kFloat64, 42, 4);
  std::vector<double> want;
  for (int bt = 0; bt < 2; ++bt)
    for (int i = 0; i < 5; ++i)
      for (int k = 0; k < 3; ++k) {
        double s = 0;
        for (int j = 0; j < 7; ++j) s += a[(bt * 5 + i) * 7 + j] * b[(bt * 7 + j) * 3 + k];
        want.push_back(s);
      }
  auto out = RunWith(EinsumTester(DType::kFloat64, "bij,bjk->bik", {{ad, a}, {bd, b}}), ops::LinalgImpl::kReference);
  ASSERT_EQ(out.size(), 1u);
  ExpectNear(out[0], want, {}, "reference");
}

TEST(EinsumEquation, Parsing) {
  auto eq = ops::ParseEinsum(" ...ij , jk -> ...ik ");
  ASSERT_TRUE(eq.ok()) << eq.status().ToString();
  ASSERT_EQ(eq->inputs.size(), 2u);
  EXPECT_EQ(eq->inputs[0].ellipsis_at, 0);
  EXPECT_EQ(eq->inputs[0].letters, (std::vector<int>{8, 9}));
  EXPECT_TRUE(eq->explicit_output);
  EXPECT_EQ(eq->output.letters, (std::vector<int>{8, 10}));
  auto plan = ops::PlanEinsum(*eq, {{4, 2, 3}, {3, 5}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->out_dims, (Dims{4, 2, 5}));
}

TEST(Einsum, Errors) {
  const Operand m23{{2, 3}, {}};
  const Operand m43{{4, 3}, {}};
  const std::vector<std::pair<std::pair<std::string, std::vector<Operand>>, std::string>> cases = {
      {{"ij,jk->ik", {m23, m43}}, "label 'j' has size 3 in one input and 4 in input 1"},
      {{"ij->ik", {m23}}, "output label 'k' does not appear in any input"},
      {{"ij->ii", {m23}}, "output label 'i' appears twice"},
      {{"i1->i", {m23}}, "character '1' is not a letter"},
      {{"ijk->i", {m23}}, "input 0 has shape [2,3] (rank 2) but its term has 3 labels"},
      {{"ij,jk->ik", {m23}}, "the equation has 2 input terms but the node has 1 inputs"},
      {{"ii->i", {m23}}, "label 'i' repeats with sizes 2 and 3"},
      {{"i..j->i", {m23}}, "has a '.' that is not part of a single '...'"},
  };
  for (const auto& [c, text] : cases) {
    auto r = EinsumTester(DType::kFloat32, c.first, c.second).Run();
    ASSERT_FALSE(r.ok()) << c.first;
    EXPECT_NE(r.status().message().find(text), std::string::npos) << c.first << ": " << r.status().message();
  }
  OpTester none = MakeTester("Einsum", 12);
  none.Input(TensorOf(DType::kFloat32, {1}, {1}));
  auto r = none.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("attribute 'equation' (STRING) is required"), std::string::npos);
}

}  // namespace
}  // namespace onnxamp::testing
