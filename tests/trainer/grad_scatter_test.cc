// Finite-difference checks of the gradient builders of ScatterElements, ScatterND (no reduction, and add with
// repeated indices) and GatherND (batch_dims 0 and 1, repeated tuples summed), and the refusal of the reductions
// that have no gradient.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"

namespace onnxamp::testing {
namespace {

using namespace gradtest;  // NOLINT

TEST(ScatterGradTest, ScatterElementsMatchesFiniteDifferences) {
  // No reduction: distinct positions (a repeated one would keep only the last write, which a central difference sees
  // and PyTorch's scatter backward, like this one, does not model).
  OpTester t = Op("ScatterElements", 13);
  t.Attr(ir::Attribute::Int("axis", 1));
  t.Input(Doubles({3, 4}, 1)).Input(Int64s({3, 2}, {3, 0, 1, -1, 2, 0})).Input(Doubles({3, 2}, 2));
  ExpectGradientsMatchFiniteDifferences(t, "ScatterElements none");

  OpTester add = Op("ScatterElements", 16);
  add.Attr(ir::Attribute::Int("axis", 0)).Attr(ir::Attribute::String("reduction", "add"));
  add.Input(Doubles({3, 2}, 3)).Input(Int64s({4, 2}, {2, 0, 2, 1, 0, 0, -1, 1})).Input(Doubles({4, 2}, 4));
  ExpectGradientsMatchFiniteDifferences(add, "ScatterElements add, repeated indices");
}

TEST(ScatterGradTest, ScatterNDMatchesFiniteDifferences) {
  OpTester t = Op("ScatterND", 13);
  t.Input(Doubles({4, 3}, 5)).Input(Int64s({2, 1}, {3, 1})).Input(Doubles({2, 3}, 6));
  ExpectGradientsMatchFiniteDifferences(t, "ScatterND none, rows");

  OpTester elems = Op("ScatterND", 13);
  elems.Input(Doubles({2, 3, 2}, 7)).Input(Int64s({3, 3}, {0, 1, 1, 1, -1, 0, 1, 0, 1})).Input(Doubles({3}, 8));
  ExpectGradientsMatchFiniteDifferences(elems, "ScatterND none, elements");

  OpTester add = Op("ScatterND", 16);
  add.Attr(ir::Attribute::String("reduction", "add"));
  add.Input(Doubles({3, 2}, 9)).Input(Int64s({3, 1}, {2, 0, 2})).Input(Doubles({3, 2}, 10));
  ExpectGradientsMatchFiniteDifferences(add, "ScatterND add, repeated rows");
}

TEST(ScatterGradTest, GatherNDMatchesFiniteDifferences) {
  OpTester t = Op("GatherND", 13);
  t.Input(Doubles({3, 4}, 11)).Input(Int64s({4, 1}, {2, 0, -1, 1}));
  ExpectGradientsMatchFiniteDifferences(t, "GatherND rows, repeated");

  OpTester batched = Op("GatherND", 13);
  batched.Attr(ir::Attribute::Int("batch_dims", 1));
  batched.Input(Doubles({2, 3, 2}, 12)).Input(Int64s({2, 3, 2}, {0, 1, 2, 0, 0, 1, 1, 1, 2, 1, -3, 0}));
  ExpectGradientsMatchFiniteDifferences(batched, "GatherND batch_dims 1, elements");
}

TEST(ScatterGradTest, ReductionsWithoutAGradientAreRefused) {
  for (const char* reduction : {"mul", "max"}) {
    OpTester t = Op("ScatterND", 18);
    t.Attr(ir::Attribute::String("reduction", reduction));
    t.Input(Doubles({3}, 13)).Input(Int64s({1, 1}, {0})).Input(Doubles({1}, 14));
    const std::string error = gradtest::GradientError(t);
    EXPECT_NE(error.find(std::string("ScatterND with reduction '") + reduction + "' has no gradient"),
              std::string::npos)
        << error;
  }
}

}  // namespace
}  // namespace onnxamp::testing
