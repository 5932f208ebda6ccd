// Finite-difference checks of the data-movement gradient builders (Slice, Split, Pad, GatherElements, TopK) over
// their opset and attribute variants, in float64 on odd shapes. (The kernels of their com.onnxamp *Grad ops are
// checked by hand in tests/trainer/grad_scatter_kernel_test.cc.)
#include <gtest/gtest.h>

#include <climits>
#include <optional>
#include <string>
#include <vector>

#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"
#include "trainer/autodiff/autodiff.h"

namespace onnxamp::testing {
namespace {

using gradtest::Contains;
using gradtest::Dims;
using gradtest::DimsName;
using gradtest::Doubles;
using gradtest::EmittedOps;
using gradtest::Int64s;
using gradtest::Op;
using ir::Attribute;

ir::Tensor Ints1(const std::vector<int64_t>& values) { return Int64s({static_cast<int64_t>(values.size())}, values); }

std::string Join(const std::vector<int64_t>& v) { return DimsName(v); }

// ---- Slice

TEST(SliceGradTest, AttributeOpsets) {
  struct Case {
    int64_t opset;
    Dims x;
    std::vector<int64_t> starts, ends;
    std::optional<std::vector<int64_t>> axes;
  };
  const std::vector<Case> cases = {
      {9, {5, 3}, {1, 0}, {4, 2}, std::nullopt},     // axes default to 0, 1, ...
      {9, {3, 5, 2}, {-4}, {INT_MAX}, {{1}}},        // negative start, "to the end"
      {8, {3, 5, 2}, {0, -1}, {2, 100}, {{-1, 0}}},  // negative axis, end clamped
      {1, {4, 3}, {1}, {3}, {{0}}},                  // (built only: the check's loss needs opset 8)
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    OpTester t = Op("Slice", c.opset);
    t.Attr(Attribute::Ints("starts", c.starts)).Attr(Attribute::Ints("ends", c.ends));
    if (c.axes) t.Attr(Attribute::Ints("axes", *c.axes));
    t.Input(Doubles(c.x, seed++));
    const std::string what = "Slice opset " + std::to_string(c.opset) + " x " + DimsName(c.x) + " starts " +
                             Join(c.starts) + " ends " + Join(c.ends);
    if (c.opset >= 8) {
      ExpectGradientsMatchFiniteDifferences(t, what);
    }
    EXPECT_TRUE(Contains(EmittedOps(t), ops::kSliceGradOp)) << what;
  }
}

TEST(SliceGradTest, InputOpsets) {
  struct Case {
    int64_t opset;
    Dims x;
    std::vector<int64_t> starts, ends;
    std::optional<std::vector<int64_t>> axes, steps;
  };
  const int64_t kMax = INT64_MAX, kMin = INT64_MIN;
  const std::vector<Case> cases = {
      {10, {5, 3}, {1}, {4}, std::nullopt, std::nullopt},
      {13, {7, 3}, {1, 0}, {kMax, 3}, std::nullopt, {{2, 1}}},           // step 2 to the end
      {13, {3, 7}, {-1}, {kMin}, {{1}}, {{-1}}},                         // reversed whole axis
      {13, {3, 7, 2}, {5, -2}, {0, 0}, {{1, 0}}, {{-2, -1}}},            // negative steps, exclusive ends
      {11, {4, 5}, {-100, 1}, {100, -1}, {{0, -1}}, {{3, 1}}},           // clamped starts/ends, step 3
      {18, {5, 3}, {2}, {2}, {{0}}, std::nullopt},                       // empty slice: the gradient is zero
      {13, {2, 9}, {8}, {-100}, {{-1}}, {{-3}}},                         // negative step past the start
      {13, {3, 4, 5}, {1, 4, 0}, {3, 0, 5}, {{0, 2, 1}}, {{1, -2, 2}}},  // axes out of order
  };
  uint32_t seed = 10;
  for (const Case& c : cases) {
    OpTester t = Op("Slice", c.opset);
    t.Input(Doubles(c.x, seed++)).Input(Ints1(c.starts)).Input(Ints1(c.ends));
    if (c.axes) {
      t.Input(Ints1(*c.axes));
    } else if (c.steps) {
      t.OmittedInput();
    }
    if (c.steps) t.Input(Ints1(*c.steps));
    const std::string what = "Slice opset " + std::to_string(c.opset) + " x " + DimsName(c.x) + " starts " +
                             Join(c.starts) + " ends " + Join(c.ends) + (c.axes ? " axes " + Join(*c.axes) : "") +
                             (c.steps ? " steps " + Join(*c.steps) : "");
    GradCheckOptions o;
    o.wrt = {0};
    const bool empty = c.starts == c.ends;
    if (empty) o.min_abs = -1;  // nothing is read: an all-zero gradient is right
    ExpectGradientsMatchFiniteDifferences(t, what, o);
  }
}

// int32 starts/ends (Slice accepts both index types).
TEST(SliceGradTest, Int32Bounds) {
  OpTester t = Op("Slice", 13);
  ir::Tensor starts(DType::kInt32, {1}), ends(DType::kInt32, {1});
  starts.mutable_values<int32_t>()[0] = -3;
  ends.mutable_values<int32_t>()[0] = INT32_MAX;
  t.Input(Doubles({5, 2}, 30)).Input(starts).Input(ends);
  GradCheckOptions o;
  o.wrt = {0};
  ExpectGradientsMatchFiniteDifferences(t, "Slice int32 bounds", o);
}

// ---- Split

TEST(SplitGradTest, Opsets) {
  struct Case {
    int64_t opset;
    Dims x;
    std::optional<int64_t> axis;
    int outputs;
    std::optional<std::vector<int64_t>> split;  // attribute before 13, input from 13
    std::optional<int64_t> num_outputs;         // 18+
  };
  const std::vector<Case> cases = {
      {8, {6, 3}, std::nullopt, 3, std::nullopt, std::nullopt},  // even split along 0
      {8, {2, 7}, 1, 2, {{3, 4}}, std::nullopt},                 // split attribute
      {11, {2, 3, 5}, -1, 3, {{1, 3, 1}}, std::nullopt},
      {13, {5, 3}, 0, 2, {{4, 1}}, std::nullopt},      // split input
      {13, {3, 4}, 1, 2, std::nullopt, std::nullopt},  // even, no split input
      {18, {7, 2}, 0, 3, std::nullopt, {3}},           // num_outputs: 3, 3, 1 (uneven last chunk)
      {18, {2, 5, 3}, 1, 2, std::nullopt, {2}},        // 3, 2
  };
  uint32_t seed = 40;
  for (const Case& c : cases) {
    OpTester t = Op("Split", c.opset);
    t.num_outputs = c.outputs;
    if (c.axis) t.Attr(Attribute::Int("axis", *c.axis));
    if (c.num_outputs) t.Attr(Attribute::Int("num_outputs", *c.num_outputs));
    if (c.split && c.opset < 13) t.Attr(Attribute::Ints("split", *c.split));
    t.Input(Doubles(c.x, seed++));
    if (c.split && c.opset >= 13) t.Input(Ints1(*c.split));
    const std::string what = "Split opset " + std::to_string(c.opset) + " x " + DimsName(c.x) + " outputs " +
                             std::to_string(c.outputs) + (c.split ? " split " + Join(*c.split) : "");
    GradCheckOptions o;
    o.wrt = {0};
    ExpectGradientsMatchFiniteDifferences(t, what, o);
    // Outputs the loss does not read contribute zeros of their shape.
    for (int skip = 0; skip < c.outputs; ++skip) {
      GradCheckOptions partial = o;
      partial.skip_outputs = {skip};
      ExpectGradientsMatchFiniteDifferences(t, what + " without output " + std::to_string(skip), partial);
    }
    if (c.outputs > 2) {
      GradCheckOptions one = o;
      for (int k = 1; k < c.outputs; ++k) one.skip_outputs.push_back(k);
      ExpectGradientsMatchFiniteDifferences(t, what + " output 0 only", one);
    }
  }
}

// ---- Pad

TEST(PadGradTest, ConstantMode) {
  struct Case {
    int64_t opset;
    Dims x;
    std::vector<int64_t> pads;
    std::optional<std::vector<int64_t>> axes;  // 18+
    bool value;                                // a constant_value input (11+)
  };
  const std::vector<Case> cases = {
      {8, {3, 5}, {1, 0, 2, 3}, std::nullopt, false},           // pads attribute
      {8, {4, 5}, {-1, 2, 0, -2}, std::nullopt, false},         // crops and pads
      {11, {3, 2, 5}, {0, 1, 2, 1, 0, 1}, std::nullopt, true},  // pads input, constant_value
      {13, {5, 4}, {-2, 1, 1, -3}, std::nullopt, true},         // crops: the gradient pads with zeros
      {18, {3, 4, 5}, {2, -1, 0, 3}, {{2, 0}}, true},           // axes input
      {19, {3, 5}, {1, 1}, {{-1}}, false},
  };
  uint32_t seed = 60;
  for (const Case& c : cases) {
    OpTester t = Op("Pad", c.opset);
    if (c.opset < 11) {
      t.Attr(Attribute::Ints("pads", c.pads)).Attr(Attribute::Float("value", 0.5f));
      t.Input(Doubles(c.x, seed++));
    } else {
      t.Input(Doubles(c.x, seed++)).Input(Ints1(c.pads));
      if (c.value) {
        t.Input(Doubles({}, seed++, 0.25, 0.75));
      } else if (c.axes) {
        t.OmittedInput();
      }
      if (c.axes) t.Input(Ints1(*c.axes));
    }
    const std::string what = "Pad constant opset " + std::to_string(c.opset) + " x " + DimsName(c.x) + " pads " +
                             Join(c.pads) + (c.axes ? " axes " + Join(*c.axes) : "");
    ExpectGradientsMatchFiniteDifferences(t, what);  // X and, when given, constant_value
    EXPECT_FALSE(Contains(EmittedOps(t), ops::kPadGradOp)) << what;
  }
  // Opset 1 ("paddings"): built only (the check's loss needs opset 8).
  OpTester t1 = Op("Pad", 1);
  t1.Attr(Attribute::Ints("paddings", {1, 0, 0, 2})).Input(Doubles({2, 3}, 70));
  EXPECT_TRUE(Contains(EmittedOps(t1), "Pad"));
}

TEST(PadGradTest, EdgeReflectWrap) {
  struct Case {
    int64_t opset;
    std::string mode;
    Dims x;
    std::vector<int64_t> pads;
    std::optional<std::vector<int64_t>> axes;
  };
  const std::vector<Case> cases = {
      {8, "edge", {3, 4}, {2, 1, 3, 0}, std::nullopt},     // pads attribute
      {8, "reflect", {3, 4}, {2, 3, 1, 3}, std::nullopt},  // pads near the size: elements used 3 times
      {13, "edge", {2, 3, 5}, {0, 2, 4, 1, 0, 2}, std::nullopt},
      {13, "reflect", {5, 3}, {-1, 2, 3, -1}, std::nullopt},  // crop then reflect
      {13, "reflect", {1, 6}, {0, 5, 0, 5}, std::nullopt},    // reflect by the whole length - 1
      {18, "edge", {3, 4, 2}, {3, 1, 0, 2}, {{1, -1}}},       // axes input
      {19, "wrap", {3, 4}, {5, 2, 1, 6}, std::nullopt},       // wrap more than once around
      {19, "wrap", {4, 5}, {-1, 3, 2, -2}, std::nullopt},     // crop then wrap
      {19, "wrap", {2, 3, 4}, {3, 2, 1, 5}, {{0, 2}}},
  };
  uint32_t seed = 80;
  for (const Case& c : cases) {
    OpTester t = Op("Pad", c.opset);
    t.Attr(Attribute::String("mode", c.mode));
    if (c.opset < 11) {
      t.Attr(Attribute::Ints("pads", c.pads)).Input(Doubles(c.x, seed++));
    } else {
      t.Input(Doubles(c.x, seed++)).Input(Ints1(c.pads));
      if (c.axes) t.OmittedInput().Input(Ints1(*c.axes));
    }
    const std::string what = "Pad " + c.mode + " opset " + std::to_string(c.opset) + " x " + DimsName(c.x) + " pads " +
                             Join(c.pads) + (c.axes ? " axes " + Join(*c.axes) : "");
    ExpectGradientsMatchFiniteDifferences(t, what);
    EXPECT_TRUE(Contains(EmittedOps(t), ops::kPadGradOp)) << what;
  }
  // constant_value given but unused by the mode: its gradient is zero (and must still be set).
  OpTester t = Op("Pad", 13);
  t.Attr(Attribute::String("mode", "edge"));
  t.Input(Doubles({2, 3}, 90)).Input(Ints1({1, 1, 0, 2})).Input(Doubles({}, 91));
  GradCheckOptions o;
  o.wrt = {0};
  ExpectGradientsMatchFiniteDifferences(t, "Pad edge with constant_value", o);
  ir::Model m = t.BuildModel();
  ir::Graph& g = *m.graph;
  ir::Value* s = g.CreateValue("loss");
  g.AddNode("ReduceSum", {g.outputs()[0]}, {s}, "sum")->SetAttribute(Attribute::Int("keepdims", 0));
  g.AddOutput(s);
  StatusOr<trainer::GradientResult> r = trainer::BuildGradients(m, {"loss", {"in2"}, ""});
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto session = exec::Session::Create(std::move(m), CpuSessionOptions(1, 0));
  ASSERT_TRUE(session.ok()) << session.status().message();
  exec::RunOptions run;
  run.fetch = {r->gradients[0]};
  auto out = (*session)->Run(t.Feeds(), run);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ((*out)[0].num_elements(), 1);
  EXPECT_EQ((*out)[0].values<double>()[0], 0.0);
}

// ---- GatherElements

TEST(GatherElementsGradTest, AxesAndDuplicateIndices) {
  struct Case {
    int64_t opset;
    std::optional<int64_t> axis;
    Dims data, idx_dims;
    std::vector<int64_t> idx;
  };
  const std::vector<Case> cases = {
      {11, std::nullopt, {3, 2}, {4, 2}, {0, 1, 2, 2, 0, 0, 2, 1}},           // repeated rows along 0 accumulate
      {13, 1, {2, 5}, {2, 7}, {4, 4, 0, -1, 2, 4, 1, 0, 0, 0, -5, 3, 3, 3}},  // negative and repeated indices
      {13, -1, {3, 4, 5}, {2, 3, 6}, {0, 1, 2, 3, 4, 4, 1,  1,  1,  1, 0, -2, 3, 3, 2, 2, 1, 0,
                                      4, 0, 4, 0, 4, 0, -1, -1, -1, 2, 2, 3,  1, 0, 1, 0, 3, 3}},
      {13, 1, {2, 3, 3}, {2, 2, 3}, {0, 2, 1, 2, 2, 0, 1, 1, 1, 0, 2, 2}},  // indices smaller than data off the axis
  };
  uint32_t seed = 100;
  for (const Case& c : cases) {
    OpTester t = Op("GatherElements", c.opset);
    if (c.axis) t.Attr(Attribute::Int("axis", *c.axis));
    t.Input(Doubles(c.data, seed++)).Input(Int64s(c.idx_dims, c.idx));
    const std::string what = "GatherElements opset " + std::to_string(c.opset) + " axis " +
                             (c.axis ? std::to_string(*c.axis) : "default") + " data " + DimsName(c.data) +
                             " indices " + DimsName(c.idx_dims);
    ExpectGradientsMatchFiniteDifferences(t, what);
    EXPECT_TRUE(Contains(EmittedOps(t), ops::kGatherElementsGradOp)) << what;
  }
}

// ---- TopK

TEST(TopKGradTest, Opsets) {
  struct Case {
    int64_t opset;
    Dims x;
    int64_t k;
    std::optional<int64_t> axis;
    std::optional<int64_t> largest;  // 11+
    bool omit_indices;
  };
  const std::vector<Case> cases = {
      {8, {3, 5}, 2, std::nullopt, std::nullopt, false},  // k attribute, last axis
      {10, {5, 3}, 3, 0, std::nullopt, false},            // k input
      {11, {2, 7, 3}, 4, 1, 0, false},                    // smallest
      {11, {3, 4}, 4, -1, 1, true},                       // k = the whole axis; Indices not requested
      {13, {2, 3, 5}, 1, 0, std::nullopt, true},
  };
  uint32_t seed = 120;
  for (const Case& c : cases) {
    OpTester t = Op("TopK", c.opset);
    t.num_outputs = 2;
    if (c.omit_indices) t.omit_outputs = {false, true};
    if (c.axis) t.Attr(Attribute::Int("axis", *c.axis));
    if (c.largest) t.Attr(Attribute::Int("largest", *c.largest));
    if (c.opset < 10) t.Attr(Attribute::Int("k", c.k));
    t.Input(Doubles(c.x, seed++));
    if (c.opset >= 10) t.Input(Ints1({c.k}));
    const std::string what = "TopK opset " + std::to_string(c.opset) + " x " + DimsName(c.x) + " k " +
                             std::to_string(c.k) + (c.omit_indices ? " without Indices" : "");
    GradCheckOptions o;
    o.wrt = {0};
    ExpectGradientsMatchFiniteDifferences(t, what, o);
    EXPECT_TRUE(Contains(EmittedOps(t), ops::kGatherElementsGradOp)) << what;
  }
}

}  // namespace
}  // namespace onnxamp::testing
