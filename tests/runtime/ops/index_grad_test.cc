// Kernel tests of the com.onnxamp gradient ops of the index family: GatherGrad (hand-computed scatter-add with
// repeated indices, every axis, negative and scalar indices per float type against a double reference, float32
// against float64, thread-count independence, errors) and DropoutGrad (inference mode, ratio 0, and in training mode
// the forward's mask recomputed: from the copied seed attribute or, through seed_from, from the forward node's
// per-node seed, across RunOptions::rng_step values). (The builders' finite-difference checks are in
// tests/trainer/grad_index_test.cc.)
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/op_tester.h"
#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

using ir::Attribute;
using ops::ShapeToString;

class IndexGradTest : public ::testing::TestWithParam<DType> {};

// ---- GatherGrad

OpTester GatherGradOp(int64_t axis, const ir::Tensor& dy, const ir::Tensor& indices,
                      const std::vector<int64_t>& data_dims) {
  OpTester t = InternalOp(ops::kGatherGradOp);
  t.Attr(Attribute::Int("axis", axis)).Input(dy).Input(indices);
  t.Input(Int64Tensor({static_cast<int64_t>(data_dims.size())}, data_dims));
  return t;
}

// Gather's backward in double: dData[o, idx[j], i] += dY[o, j, i].
std::vector<double> ReferenceGatherGrad(const std::vector<double>& dy, const std::vector<int64_t>& idx,
                                        const std::vector<int64_t>& data_dims, int64_t axis) {
  int64_t outer = 1, inner = 1, count = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(data_dims.size()); ++d) {
    if (d < axis) outer *= data_dims[d];
    if (d > axis) inner *= data_dims[d];
    count *= data_dims[d];
  }
  const int64_t dim = data_dims[axis], n = static_cast<int64_t>(idx.size());
  std::vector<double> dx(count, 0.0);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t row = idx[j] < 0 ? idx[j] + dim : idx[j];
      for (int64_t i = 0; i < inner; ++i) dx[(o * dim + row) * inner + i] += dy[(o * n + j) * inner + i];
    }
  }
  return dx;
}

TEST(GatherGradKernelTest, RepeatedIndicesAccumulate) {
  // data [3, 2], indices [2, 0, 2] along axis 0: rows 2 and 0 receive dY's rows, row 2 twice.
  auto out = RunOk(
      GatherGradOp(0, TensorOf(DType::kFloat32, {3, 2}, {1, 2, 3, 4, 5, 6}), Int64Tensor({3}, {2, 0, 2}), {3, 2}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{3, 2}));
  ExpectClose(out[0], {3, 4, 0, 0, 6, 8});
  // Axis 1 with a negative index: data [2, 3], indices [-1, 0].
  out = RunOk(GatherGradOp(1, TensorOf(DType::kFloat32, {2, 2}, {1, 2, 3, 4}), Int64Tensor({2}, {-1, 0}), {2, 3}));
  ASSERT_EQ(out.size(), 1u);
  ExpectClose(out[0], {2, 0, 1, 4, 0, 3});
}

TEST_P(IndexGradTest, GatherGradMatchesReference) {
  const DType dtype = GetParam();
  const std::vector<int64_t> data_dims = {3, 4, 5};
  struct Case {
    int64_t axis;
    std::vector<int64_t> idx_dims;
    std::vector<int64_t> idx;
  };
  for (const Case& c : {Case{0, {}, {-2}}, Case{0, {4}, {2, -1, 0, 2}}, Case{1, {2, 3}, {3, 3, -4, 0, 1, 3}},
                        Case{-1, {2}, {4, -1}}, Case{2, {}, {1}}, Case{-3, {2, 2}, {0, 0, 0, 1}}}) {
    const int64_t axis = c.axis < 0 ? c.axis + 3 : c.axis;
    std::vector<int64_t> dy_dims(data_dims.begin(), data_dims.begin() + axis);
    dy_dims.insert(dy_dims.end(), c.idx_dims.begin(), c.idx_dims.end());
    dy_dims.insert(dy_dims.end(), data_dims.begin() + axis + 1, data_dims.end());
    int64_t count = 1;
    for (int64_t d : dy_dims) count *= d;
    const std::vector<double> dy = Rounded(dtype, RandomValues(count, 21));
    const std::string what = "axis " + std::to_string(c.axis) + " indices " + ShapeToString(c.idx_dims);
    auto out = RunOk(GatherGradOp(c.axis, TensorOf(dtype, dy_dims, dy), Int64Tensor(c.idx_dims, c.idx), data_dims));
    ASSERT_EQ(out.size(), 1u) << what;
    EXPECT_EQ(out[0].dtype(), dtype) << what;
    EXPECT_EQ(out[0].dims(), data_dims) << what;
    Tolerance tol = ToleranceFor(dtype);
    tol.atol *= 10;  // sums of a few terms
    ExpectClose(out[0], ReferenceGatherGrad(dy, c.idx, data_dims, axis), what, tol);
  }
}

TEST(GatherGradKernelTest, Float32MatchesFloat64AndThreadCount) {
  // An embedding-like case: [50, 300] table, 64 indices with repeats, int32 indices.
  const std::vector<double> dy = Rounded(DType::kFloat32, RandomValues(64 * 300, 22));
  ir::Tensor idx32(DType::kInt32, {8, 8});
  std::vector<int64_t> idx(64);
  for (int i = 0; i < 64; ++i) idx32.mutable_values<int32_t>()[i] = static_cast<int32_t>(idx[i] = (i * 13) % 50);
  OpTester f32 = GatherGradOp(0, TensorOf(DType::kFloat32, {8, 8, 300}, dy), idx32, {50, 300});
  OpTester f64 = GatherGradOp(0, TensorOf(DType::kFloat64, {8, 8, 300}, dy), Int64Tensor({8, 8}, idx), {50, 300});
  OpTester threads = f32;
  threads.options.num_threads = 4;
  auto a = RunOk(f32), b = RunOk(f64), c = RunOk(threads);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(c.size(), 1u);
  ExpectClose(a[0], AsDoubles(b[0]), "float32 vs float64", {1e-6, 1e-6});
  EXPECT_TRUE(a[0].SameContents(c[0])) << "the result depends on the thread count";
}

TEST(GatherGradKernelTest, Errors) {
  const ir::Tensor dy = TensorOf(DType::kFloat32, {2, 2}, {1, 2, 3, 4});
  ExpectRunError(GatherGradOp(0, dy, Int64Tensor({2}, {0, 3}), {3, 2}), "index 3 (element 1 of input");
  ExpectRunError(GatherGradOp(0, dy, Int64Tensor({2}, {0, 1}), {3, 3}), "(dY) has shape [2,2]; expected [2,3]");
  ExpectRunError(GatherGradOp(2, dy, Int64Tensor({2}, {0, 1}), {3, 2}), "axis");
  OpTester bad_shape = InternalOp(ops::kGatherGradOp);
  bad_shape.Input(dy).Input(Int64Tensor({2}, {0, 1})).Input(Int64Tensor({1, 2}, {2, 2}));
  ExpectRunError(bad_shape, "(data_shape) must be a 1-D tensor");
  ExpectRunError(GatherGradOp(0, dy, TensorOf(DType::kFloat32, {2}, {0, 1}), {2, 2}), "must be int32 or int64");
}

// ---- DropoutGrad

ir::Tensor BoolScalar(bool v) {
  ir::Tensor t(DType::kBool, {});
  t.mutable_values<bool>()[0] = v;
  return t;
}

TEST_P(IndexGradTest, DropoutGradInferenceIsIdentity) {
  const DType dtype = GetParam();
  const ir::Tensor dy = TensorOf(dtype, {3, 5}, RandomValues(15, 23));
  // No training_mode, training_mode false, and training with ratio 0.
  for (int form = 0; form < 3; ++form) {
    OpTester t = InternalOp(ops::kDropoutGradOp);
    t.Attr(Attribute::String("seed_from", "y")).Input(dy);
    if (form == 1) t.Input(TensorOf(DType::kFloat32, {}, {0.5})).Input(BoolScalar(false));
    if (form == 2) t.Input(TensorOf(DType::kFloat32, {}, {0.0})).Input(BoolScalar(true));
    auto out = RunOk(t);
    ASSERT_EQ(out.size(), 1u) << form;
    EXPECT_TRUE(out[0].SameContents(dy)) << form;
  }
}

// A two-node graph: Dropout (opset 13, training mode, ratio `ratio`) of `x` and its DropoutGrad of `dy` with
// seed_from naming the forward's output (and the forward's seed attribute copied when given). Outputs: y, mask, dx.
ir::Model DropoutPair(const ir::Tensor& x, const ir::Tensor& dy, double ratio, std::optional<int64_t> seed) {
  ir::Model m;
  m.opset_imports = {{"", 13}, {exec::kInternalDomain, 1}};
  ir::Graph& g = *m.graph;
  auto input = [&](const std::string& name, const ir::Tensor& t) {
    ir::Value* v = g.CreateValue(name);
    ir::Shape shape;
    for (int64_t d : t.dims()) shape.push_back(ir::Dim::Value(d));
    v->set_type(ir::ValueType::Tensor(t.dtype(), shape));
    g.AddInput(v);
    return v;
  };
  ir::Value* xv = input("x", x);
  ir::Value* dyv = input("dy", dy);
  ir::Value* rv = input("ratio", TensorOf(DType::kFloat32, {}, {ratio}));
  ir::Value* tv = input("training", BoolScalar(true));
  ir::Value* y = g.CreateValue("y");
  ir::Value* mask = g.CreateValue("mask");
  ir::Value* dx = g.CreateValue("dx");
  ir::Node* fwd = g.AddNode("Dropout", {xv, rv, tv}, {y, mask}, "dropout", "");
  ir::Node* bwd = g.AddNode(ops::kDropoutGradOp, {dyv, rv, tv}, {dx}, "dropout_grad", exec::kInternalDomain);
  bwd->SetAttribute(Attribute::String("seed_from", "y"));
  if (seed) {
    fwd->SetAttribute(Attribute::Int("seed", *seed));
    bwd->SetAttribute(Attribute::Int("seed", *seed));
  }
  for (ir::Value* v : {y, mask, dx}) g.AddOutput(v);
  return m;
}

TEST_P(IndexGradTest, DropoutGradRecomputesTheForwardMask) {
  const DType dtype = GetParam();
  const int64_t n = 2000;
  const ir::Tensor x = TensorOf(dtype, {n}, RandomValues(n, 24));
  const std::vector<double> dyv = Rounded(dtype, RandomValues(n, 25));
  ir::Tensor dy = TensorOf(dtype, {n}, dyv);
  for (std::optional<int64_t> seed : {std::optional<int64_t>(), std::optional<int64_t>(5)}) {
    for (uint64_t session_seed : {0u, 77u}) {
      auto session = exec::Session::Create(DropoutPair(x, dy, 0.5, seed), CpuSessionOptions(1, session_seed));
      ASSERT_TRUE(session.ok()) << session.status().message();
      std::vector<ir::Tensor> feeds = {x, dy, TensorOf(DType::kFloat32, {}, {0.5}), BoolScalar(true)};
      const char* names[] = {"x", "dy", "ratio", "training"};
      for (size_t i = 0; i < feeds.size(); ++i) feeds[i].set_name(names[i]);
      std::vector<ir::Tensor> masks;
      for (uint64_t step : {0u, 1u, 9u}) {
        exec::RunOptions run;
        run.rng_step = step;
        auto out = (*session)->Run(feeds, run);
        ASSERT_TRUE(out.ok()) << out.status().message();
        const std::string what = std::string(seed ? "seed attribute" : "seed_from") + ", session seed " +
                                 std::to_string(session_seed) + ", step " + std::to_string(step);
        const ir::Tensor& mask = (*out)[1];
        std::vector<double> want(n);
        int64_t kept = 0;
        for (int64_t i = 0; i < n; ++i) {
          want[i] = mask.values<bool>()[i] ? dyv[i] * 2 : 0.0;
          kept += mask.values<bool>()[i];
        }
        EXPECT_GT(kept, n / 3) << what;
        EXPECT_LT(kept, 2 * n / 3) << what;
        ExpectClose((*out)[2], want, what);
        for (const ir::Tensor& earlier : masks) EXPECT_FALSE(earlier.SameContents(mask)) << what << ": mask repeats";
        masks.push_back(mask);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, IndexGradTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

}  // namespace
}  // namespace onnxamp::testing
