// CUDA shape and data-movement kernels against the CPU reference, bit for bit: Identity, Reshape, Flatten,
// Squeeze, Unsqueeze, Shape, Size (aliasing or host results), Transpose (tiled and strided), Concat, Split, Slice,
// Expand and Tile, over fp32/fp16/bf16/int64/bool/int8, ranks 0..6, empty dims, negative axes, every attribute
// variant, a tensor above the grid-stride threshold, and errors reported as the CPU reports them.
#include <gtest/gtest.h>

#include <limits>

#include "tests/cuda/tensor_test_util.h"

namespace onnxamp::testing::cuda_tensor {
namespace {

class CudaTensorMove : public ::testing::TestWithParam<DType> {};

TEST_P(CudaTensorMove, IdentityReshapeFlatten) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  ExpectExact(Node("Identity", 16).Input(Distinct(dt, {3, 5})), "Identity");
  ExpectExact(Node("Identity", 16).Input(Distinct(dt, {0, 4})), "Identity empty");
  ExpectExact(Node("Reshape", 13).Input(Distinct(dt, {2, 3, 4})).Input(I64({4, -1})), "Reshape -1");
  ExpectExact(Node("Reshape", 13).Input(Distinct(dt, {2, 3, 4})).Input(I64({0, 0, 2, 2})), "Reshape 0 copies");
  ExpectExact(Node("Reshape", 13).Input(Distinct(dt, {7})).Input(I64({1, 7, 1, 1, 1, 1})), "Reshape rank 6");
  ExpectExact(
      Node("Reshape", 14).Attr(ir::Attribute::Int("allowzero", 1)).Input(Distinct(dt, {0, 3})).Input(I64({3, 0})),
      "Reshape allowzero");
  ExpectExact(Node("Reshape", 4).Attr(ir::Attribute::Ints("shape", {6, 2})).Input(Distinct(dt, {3, 4})),
              "Reshape-4 attribute");
  for (int64_t axis : {0, 1, 2, -1, 3}) {
    ExpectExact(Node("Flatten", 13).Attr(ir::Attribute::Int("axis", axis)).Input(Distinct(dt, {2, 3, 5})),
                "Flatten axis " + std::to_string(axis));
  }
}

TEST_P(CudaTensorMove, SqueezeUnsqueezeShapeSize) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  ExpectExact(Node("Squeeze", 13).Input(Distinct(dt, {1, 3, 1, 4})).Input(I64({0, -2})), "Squeeze input axes");
  ExpectExact(Node("Squeeze", 13).Input(Distinct(dt, {1, 3, 1, 4})), "Squeeze all");
  ExpectExact(Node("Squeeze", 11).Attr(ir::Attribute::Ints("axes", {2})).Input(Distinct(dt, {2, 3, 1})),
              "Squeeze-11 attribute");
  ExpectExact(Node("Unsqueeze", 13).Input(Distinct(dt, {3, 4})).Input(I64({0, -1})), "Unsqueeze input axes");
  ExpectExact(Node("Unsqueeze", 11).Attr(ir::Attribute::Ints("axes", {1, 3})).Input(Distinct(dt, {3, 4})),
              "Unsqueeze-11 attribute");
  ExpectExact(Node("Unsqueeze", 13).Input(Distinct(dt, {})).Input(I64({0})), "Unsqueeze scalar");
  ExpectExact(Node("Shape", 13).Input(Distinct(dt, {2, 0, 5})), "Shape");
  ExpectExact(Node("Shape", 15)
                  .Attr(ir::Attribute::Int("start", -2))
                  .Attr(ir::Attribute::Int("end", 10))
                  .Input(Distinct(dt, {2, 3, 5})),
              "Shape start/end");
  ExpectExact(Node("Size", 13).Input(Distinct(dt, {2, 3, 5})), "Size");
  ExpectExact(Node("Size", 13).Input(Distinct(dt, {})), "Size scalar");
}

TEST(CudaTensorMoveErrors, ShapeOpErrors) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectBothRunError(Node("Reshape", 13).Input(Distinct(DType::kFloat32, {2, 3})).Input(I64({4, -1})),
                     "cannot reshape input [2,3]");
  ExpectBothRunError(Node("Squeeze", 13).Input(Distinct(DType::kFloat32, {2, 3})).Input(I64({0})),
                     "cannot squeeze axis 0");
  ExpectCudaCreateError(Node("Unsqueeze", 11).Input(Distinct(DType::kFloat32, {2})), "needs the ints attribute 'axes'");
}

// Transpose: (input dims, perm); an empty perm is the default (reversed dims).
struct TransposeCase {
  std::vector<int64_t> dims;
  std::vector<int64_t> perm;
};

TEST_P(CudaTensorMove, Transpose) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  const std::vector<TransposeCase> cases = {
      {{2, 3}, {}},                              // 2-D, default perm: tiled
      {{33, 65}, {1, 0}},                        // tiles with ragged edges
      {{4, 5, 6}, {0, 2, 1}},                    // batched tiles
      {{3, 40, 70}, {0, 2, 1}},                  // several tiles per matrix
      {{2, 3, 4, 5}, {3, 1, 0, 2}},              // general strided
      {{1, 7, 1, 9}, {2, 3, 0, 1}},              // size-1 dims dropped: a 2-D transpose
      {{3, 128, 8}, {1, 0, 2}},                  // inner dim stays: row copies (widened)
      {{2, 4, 6, 8}, {0, 2, 1, 3}},              // merged to [2,4,6,8] -> rows of 8
      {{2, 1, 3, 2, 2, 3}, {5, 4, 3, 2, 1, 0}},  // rank 6
      {{2, 3, 2, 3, 2, 3}, {1, 0, 3, 2, 5, 4}},  // rank 6, pairs swapped
      {{0, 3}, {1, 0}},                          // empty
      {{4, 0, 2}, {2, 0, 1}},                    // empty middle dim
      {{}, {}},                                  // scalar
      {{5}, {0}},                                // rank 1
      {{6, 1}, {1, 0}},                          // a reshape in disguise
  };
  for (const TransposeCase& c : cases) {
    OpTester t = Node("Transpose", 13);
    if (!c.perm.empty() || c.dims.empty()) t.Attr(ir::Attribute::Ints("perm", c.perm));
    t.Input(Distinct(dt, c.dims));
    ExpectExact(t, "Transpose " + ops::ShapeToString(c.dims) + " perm " + ops::ShapeToString(c.perm));
  }
}

TEST_P(CudaTensorMove, Concat) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  ExpectExact(Node("Concat", 13)
                  .Attr(ir::Attribute::Int("axis", 0))
                  .Input(Distinct(dt, {2, 3}, 1))
                  .Input(Distinct(dt, {5, 3}, 2)),
              "Concat axis 0");
  ExpectExact(Node("Concat", 13)
                  .Attr(ir::Attribute::Int("axis", 1))
                  .Input(Distinct(dt, {2, 3, 4}, 1))
                  .Input(Distinct(dt, {2, 0, 4}, 2))
                  .Input(Distinct(dt, {2, 7, 4}, 3)),
              "Concat axis 1 with an empty input");
  ExpectExact(Node("Concat", 13)
                  .Attr(ir::Attribute::Int("axis", -1))
                  .Input(Distinct(dt, {3, 1, 2, 5}, 1))
                  .Input(Distinct(dt, {3, 1, 2, 3}, 2))
                  .Input(Distinct(dt, {3, 1, 2, 1}, 3)),
              "Concat axis -1 odd widths");
  ExpectExact(Node("Concat", 13).Attr(ir::Attribute::Int("axis", 0)).Input(Distinct(dt, {7})), "Concat one input");
  ExpectExact(Node("Concat", 13)
                  .Attr(ir::Attribute::Int("axis", 2))
                  .Input(Distinct(dt, {2, 2, 16}, 1))
                  .Input(Distinct(dt, {2, 2, 32}, 2)),
              "Concat wide rows");
  ExpectExact(Node("Concat", 1).Input(Distinct(dt, {2, 3}, 1)).Input(Distinct(dt, {2, 2}, 2)),
              "Concat-1 default axis 1");
}

TEST(CudaTensorMoveErrors, ConcatErrors) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectCudaCreateError(Node("Concat", 13).Input(Distinct(DType::kFloat32, {2})), "attribute 'axis' is required");
  ExpectBothRunError(Node("Concat", 13)
                         .Attr(ir::Attribute::Int("axis", 0))
                         .Input(Distinct(DType::kFloat32, {2, 3}))
                         .Input(Distinct(DType::kFloat32, {2, 4})),
                     "which does not match input 0's shape");
  ExpectBothRunError(Node("Concat", 13).Attr(ir::Attribute::Int("axis", 2)).Input(Distinct(DType::kFloat32, {2, 3})),
                     "axis 2 is out of range for rank 2");
}

TEST_P(CudaTensorMove, Split) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  ExpectExact(Node("Split", 13, 3).Input(Distinct(dt, {2, 6, 3})).Attr(ir::Attribute::Int("axis", 1)), "Split even");
  ExpectExact(Node("Split", 13, 3).Input(Distinct(dt, {7, 3})).Input(I64({2, 0, 5})), "Split input sizes");
  ExpectExact(Node("Split", 11, 2)
                  .Attr(ir::Attribute::Int("axis", -1))
                  .Attr(ir::Attribute::Ints("split", {1, 4}))
                  .Input(Distinct(dt, {3, 5})),
              "Split-11 attribute, negative axis");
  ExpectExact(Node("Split", 18, 3).Attr(ir::Attribute::Int("num_outputs", 3)).Input(Distinct(dt, {7, 2})),
              "Split-18 num_outputs uneven");
  OpTester omitted = Node("Split", 13, 3).Input(Distinct(dt, {6, 2}));
  omitted.omit_outputs = {false, true, false};
  ExpectExact(omitted, "Split with an omitted output");
  ExpectExact(Node("Split", 13, 2).Input(Distinct(dt, {0, 4})).Attr(ir::Attribute::Int("axis", 1)), "Split empty");
}

TEST(CudaTensorMoveErrors, SplitErrors) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectBothRunError(Node("Split", 13, 2).Input(Distinct(DType::kFloat32, {5})).Input(I64({2, 2})),
                     "split [2,2] sums to 4");
  ExpectBothRunError(Node("Split", 13, 2).Input(Distinct(DType::kFloat32, {5})), "cannot split axis 0 of size 5");
  ExpectCudaCreateError(
      Node("Split", 18, 2).Attr(ir::Attribute::Int("num_outputs", 3)).Input(Distinct(DType::kFloat32, {6})),
      "attribute 'num_outputs' is 3 but the node has 2 outputs");
}

// Slice at opset 13: starts, ends, axes (empty: omitted), steps (empty: omitted).
struct SliceCase {
  std::vector<int64_t> dims, starts, ends, axes, steps;
};

TEST_P(CudaTensorMove, Slice) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::vector<SliceCase> cases = {
      {{10}, {2}, {7}, {}, {}},
      {{10}, {-3}, {kMax}, {}, {}},
      {{10}, {kMax}, {kMin}, {}, {-1}},  // the whole axis reversed
      {{10}, {8}, {1}, {}, {-3}},        // negative step
      {{4, 6, 5}, {1, 0}, {3, 6}, {0, 2}, {1, 2}},
      {{4, 6, 5}, {0, -1}, {kMax, -6}, {-1, 1}, {2, -2}},
      {{3, 4}, {2}, {1}, {0}, {}},                                        // empty result
      {{0, 4}, {0}, {2}, {1}, {}},                                        // empty input
      {{2, 3, 4, 5, 2, 3}, {1, 1, 1}, {4, 5, 3}, {2, 3, -1}, {2, 3, 1}},  // rank 6
      {{3, 64}, {0, 16}, {3, 48}, {}, {}},                                // inner rows: widened copies
  };
  for (const SliceCase& c : cases) {
    OpTester t = Node("Slice", 13);
    t.Input(Distinct(dt, c.dims)).Input(I64(c.starts)).Input(I64(c.ends));
    if (!c.axes.empty()) {
      t.Input(I64(c.axes));
    } else if (!c.steps.empty()) {
      t.OmittedInput();
    }
    if (!c.steps.empty()) t.Input(I64(c.steps));
    ExpectExact(t, "Slice " + ops::ShapeToString(c.dims) + " starts " + ops::ShapeToString(c.starts) + " ends " +
                       ops::ShapeToString(c.ends) + " steps " + ops::ShapeToString(c.steps));
  }
  ExpectExact(Node("Slice", 13).Input(Distinct(dt, {5, 4})).Input(I32({1, 1})).Input(I32({4, 3})),
              "Slice int32 starts/ends");
  ExpectExact(Node("Slice", 9)
                  .Attr(ir::Attribute::Ints("starts", {1}))
                  .Attr(ir::Attribute::Ints("ends", {-1}))
                  .Attr(ir::Attribute::Ints("axes", {1}))
                  .Input(Distinct(dt, {3, 6})),
              "Slice-9 attributes");
}

TEST(CudaTensorMoveErrors, SliceErrors) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectBothRunError(Node("Slice", 13)
                         .Input(Distinct(DType::kFloat32, {5}))
                         .Input(I64({0}))
                         .Input(I64({5}))
                         .Input(I64({0}))
                         .Input(I64({0})),
                     "has a zero step for axis 0");
  ExpectCudaCreateError(Node("Slice", 9).Input(Distinct(DType::kFloat32, {5})), "needs the attributes 'starts'");
}

TEST_P(CudaTensorMove, Expand) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  ExpectExact(Node("Expand", 13).Input(Distinct(dt, {3, 1})).Input(I64({2, 3, 4})), "Expand [3,1] to [2,3,4]");
  ExpectExact(Node("Expand", 13).Input(Distinct(dt, {1})).Input(I64({5})), "Expand [1] to [5]");
  ExpectExact(Node("Expand", 13).Input(Distinct(dt, {2, 3})).Input(I64({1, 1})), "Expand to a smaller shape");
  ExpectExact(Node("Expand", 13).Input(Distinct(dt, {1, 3})).Input(I64({0, 3})), "Expand to empty");
  ExpectExact(Node("Expand", 13).Input(Distinct(dt, {})).Input(I64({2, 1, 3, 1, 2, 2})), "Expand scalar to rank 6");
  ExpectExact(Node("Expand", 13).Input(Distinct(dt, {4, 1, 32})).Input(I64({4, 3, 32})), "Expand middle dim");
}

TEST_P(CudaTensorMove, Tile) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  ExpectExact(Node("Tile", 13).Input(Distinct(dt, {2, 3})).Input(I64({2, 3})), "Tile [2,3]");
  ExpectExact(Node("Tile", 13).Input(Distinct(dt, {2, 3})).Input(I64({1, 1})), "Tile ones");
  ExpectExact(Node("Tile", 13).Input(Distinct(dt, {2, 3})).Input(I64({0, 2})), "Tile zero repeats");
  ExpectExact(Node("Tile", 13).Input(Distinct(dt, {5})).Input(I64({3})), "Tile rank 1");
  ExpectExact(Node("Tile", 13).Input(Distinct(dt, {1, 2, 1, 3, 1, 2})).Input(I64({2, 1, 3, 1, 2, 1})), "Tile rank 6");
  ExpectExact(Node("Tile", 5).Input(Distinct(dt, {2, 3})).Input(I64({3}, true)).Input(I64({-1}, true)),
              "Tile-5 tiles and axis");
}

TEST(CudaTensorMoveErrors, ExpandTileErrors) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectBothRunError(Node("Expand", 13).Input(Distinct(DType::kFloat32, {3})).Input(I64({4})),
                     "cannot expand input [3] to [4]");
  ExpectBothRunError(Node("Tile", 13).Input(Distinct(DType::kFloat32, {2, 3})).Input(I64({2})),
                     "repeats [2] has 1 entries");
  ExpectBothRunError(Node("Tile", 13).Input(Distinct(DType::kFloat32, {2, 3})).Input(I64({2, -1})),
                     "has a negative count");
}

// More than 65535 blocks x 256 threads worth of elements: every grid-stride loop goes round more than once.
TEST(CudaTensorMoveLarge, AboveOneGrid) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectExact(Node("Expand", 13).Input(Distinct(DType::kInt8, {1, 4099})).Input(I64({4201, 4099})),
              "Expand to 17.2M int8 elements");
  ExpectExact(
      Node("Transpose", 13).Attr(ir::Attribute::Ints("perm", {1, 0, 2})).Input(Distinct(DType::kInt8, {4099, 4201, 1})),
      "Transpose 17.2M int8 elements, strided");
  ExpectExact(
      Node("Transpose", 13).Attr(ir::Attribute::Ints("perm", {2, 1, 0})).Input(Distinct(DType::kInt8, {3, 5, 1148577})),
      "Transpose 17.2M int8 elements, general");
}

INSTANTIATE_TEST_SUITE_P(Types, CudaTensorMove, ::testing::ValuesIn(MoveTypes()), TypeName);

}  // namespace
}  // namespace onnxamp::testing::cuda_tensor
