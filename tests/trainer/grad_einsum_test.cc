// Finite-difference checks of the Einsum gradient builder: matrix products, batch, transposes, full and partial
// sums, implicit outputs, outer and dot products, three operands, labels summed within one operand only, broadcast
// labels, ellipses (leading, of different ranks, after a label). Diagonals (a label repeated in one term) and an
// ellipsis the output drops are refused at build time, naming the term.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"
#include "trainer/autodiff/autodiff.h"

namespace onnxamp::testing {
namespace {

using gradtest::Dims;
using gradtest::Doubles;

struct EinsumCase {
  std::string equation;
  std::vector<Dims> shapes;
};

OpTester EinsumTester(const EinsumCase& c) {
  OpTester t = gradtest::Op("Einsum", 12);
  t.Attr(ir::Attribute::String("equation", c.equation));
  uint32_t seed = 3;
  for (const Dims& d : c.shapes) t.Input(Doubles(d, seed++));
  return t;
}

TEST(EinsumGrad, MatchesFiniteDifferences) {
  const std::vector<EinsumCase> cases = {
      {"ij,jk->ik", {{3, 4}, {4, 5}}},
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 3}}},
      {"ij->ji", {{3, 5}}},
      {"ij->", {{3, 5}}},
      {"ijk->j", {{2, 3, 4}}},
      {"ij,jk", {{3, 4}, {4, 2}}},  // implicit: ik
      {"i,i", {{5}, {5}}},          // implicit: scalar
      {"ba,cb", {{3, 2}, {4, 3}}},  // implicit: ac
      {"i,j->ij", {{3}, {4}}},
      {"ij,j->i", {{3, 4}, {4}}},
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
      {"ijk,jl->il", {{2, 3, 4}, {3, 5}}},                // k summed within the first operand only
      {"ij,kl->jl", {{3, 2}, {4, 5}}},                    // i and k each within one operand
      {"Ab,bC->AC", {{2, 3}, {3, 4}}},                    // uppercase labels
      {"ij,ij->ij", {{3, 1}, {3, 4}}},                    // a broadcast label
      {"...ij,...jk->...ik", {{2, 3, 4}, {4, 5}}},        // ellipsis ranks 1 and 0
      {"...ij,...jk->...ik", {{2, 1, 3, 4}, {3, 4, 2}}},  // ellipsis [2,1] and [3] broadcast
      {"...ij,...j", {{2, 3, 4}, {1, 4}}},                // implicit output with ellipsis
      {"i...j,j->...i", {{3, 2, 2, 4}, {4}}},             // ellipsis after a label
      {"i...j,i...j->i...", {{3, 2, 4}, {3, 5, 2, 4}}},   // after a label, of different ranks
  };
  for (const EinsumCase& c : cases) ExpectGradientsMatchFiniteDifferences(EinsumTester(c), "Einsum " + c.equation);
}

StatusOr<trainer::GradientResult> Build(const EinsumCase& c) {
  ir::Model m = EinsumTester(c).BuildModel();
  ir::Graph& g = *m.graph;
  ir::Value* loss = g.CreateValue("loss");
  loss->set_type(ir::ValueType::Tensor(DType::kFloat64, ir::Shape{}));
  g.AddNode("ReduceSum", {g.outputs()[0]}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
  std::vector<std::string> wrt;
  for (size_t i = 0; i < c.shapes.size(); ++i) wrt.push_back("in" + std::to_string(i));
  return trainer::BuildGradients(m, {"loss", wrt, ""});
}

TEST(EinsumGrad, RefusesDiagonalsNamingTheTerm) {
  StatusOr<trainer::GradientResult> r = Build({"ii->i", {{3, 3}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'ii'"), std::string::npos) << r.status().message();
  r = Build({"ij,jjk->ik", {{2, 3}, {3, 3, 4}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'jjk'"), std::string::npos) << r.status().message();
  r = Build({"...ij,jk->ik", {{2, 3, 4}, {4, 5}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'...ij'"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace onnxamp::testing
