// Float16 gradients of the averaging ops over more than 65504 elements: GlobalAveragePool, GlobalMaxPool and
// ReduceMean divide dY by an element count, which float16 cannot hold (a batch of 256 images of 32 channels of 8x8 is
// 524288 elements). The share must be computed in float and rounded once, or every gradient upstream is zero (an AMP
// training run then only trains the layers after the pool).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/common/half.h"
#include "runtime/executor/session.h"
#include "tests/runtime/op_tester.h"
#include "trainer/autodiff/autodiff.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

// A float16 tensor of `dims`, zero except `ones` (flat indices), which are 1.
ir::Tensor HalfTensor(const Dims& dims, const std::vector<int64_t>& ones = {}) {
  ir::Tensor t(DType::kFloat16, dims);
  auto v = t.mutable_values<Float16>();
  for (Float16& h : v) h = Float16(0.0f);
  for (int64_t i : ones) v[static_cast<size_t>(i)] = Float16(1.0f);
  return t;
}

// d loss / d in0 (float16) of the one-node model `t` with loss = ReduceSum(Cast(out0, float)), as AMP's FP32 loss
// reads a float16 output.
StatusOr<ir::Tensor> HalfGradient(const OpTester& t) {
  ir::Model model = t.BuildModel();
  ir::Graph& g = *model.graph;
  ir::Value* wide = g.CreateValue("wide");
  g.AddNode("Cast", {g.FindValue("out0")}, {wide}, "cast")
      ->SetAttribute(ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat32)));
  ir::Value* loss = g.CreateValue("loss");
  loss->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{}));
  g.AddNode("ReduceSum", {wide}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
  trainer::GradientRequest request;
  request.loss = "loss";
  request.wrt = {"in0"};
  ONNXAMP_ASSIGN_OR_RETURN(trainer::GradientResult result, trainer::BuildGradients(model, request));
  ONNXAMP_ASSIGN_OR_RETURN(auto session, exec::Session::Create(std::move(model), t.options));
  exec::RunOptions fetch;
  fetch.fetch = result.gradients;
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> out, session->Run(t.Feeds(), fetch));
  if (out.size() != 1) return InvalidArgument("expected one gradient, got ", out.size());
  return std::move(out[0]);
}

// Every element of `g` (float16, X's shape) is `want[i]`, within `rtol`.
void ExpectHalfValues(const StatusOr<ir::Tensor>& g, const Dims& dims, const std::vector<float>& want, float rtol,
                      const std::string& what) {
  ASSERT_TRUE(g.ok()) << what << ": " << g.status().message();
  ASSERT_EQ(g->dtype(), DType::kFloat16) << what;
  ASSERT_EQ(g->dims(), dims) << what;
  const auto got = g->values<Float16>();
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < want.size() && reported < 5; ++i) {
    const float v = static_cast<float>(got[i]);
    if (!(std::fabs(v - want[i]) <= rtol * std::fabs(want[i]))) {
      ADD_FAILURE() << what << ": element " << i << " is " << v << ", want " << want[i];
      ++reported;
    }
  }
}

TEST(Float16AveragingGrad, GlobalAveragePoolOverMoreThan65504Elements) {
  // [2, 64, 32, 32]: 131072 elements, planes of 1024 (an exact share); [4, 32, 25, 25]: 80000, planes of 625.
  for (const Dims& dims : {Dims{2, 64, 32, 32}, Dims{4, 32, 25, 25}}) {
    OpTester t;
    t.op_type = "GlobalAveragePool";
    t.Input(HalfTensor(dims));
    const int64_t n = dims[0] * dims[1] * dims[2] * dims[3], plane = dims[2] * dims[3];
    // dY = 1: each element gets 1 / plane, rounded to float16 once.
    const float share = static_cast<float>(Float16(1.0f / static_cast<float>(plane)));
    ExpectHalfValues(HalfGradient(t), dims, std::vector<float>(static_cast<size_t>(n), share), 0.0f,
                     "GlobalAveragePool " + std::to_string(plane) + "-element planes");
  }
}

TEST(Float16AveragingGrad, GlobalMaxPoolOverMoreThan65504Elements) {
  const Dims dims = {2, 64, 32, 32};
  const int64_t planes = 2 * 64, plane = 32 * 32;
  // Plane p has its maximum 1 at p % 3 + 1 positions (the first ones), so dY = 1 is split 1, 2 or 3 ways.
  std::vector<int64_t> ones;
  std::vector<float> want(static_cast<size_t>(planes * plane), 0.0f);
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t ties = p % 3 + 1;
    for (int64_t j = 0; j < ties; ++j) {
      ones.push_back(p * plane + j);
      want[static_cast<size_t>(p * plane + j)] = 1.0f / static_cast<float>(ties);
    }
  }
  OpTester t;
  t.op_type = "GlobalMaxPool";
  t.Input(HalfTensor(dims, ones));
  ExpectHalfValues(HalfGradient(t), dims, want, 1e-3f, "GlobalMaxPool");
}

TEST(Float16AveragingGrad, ReduceMeanOverMoreThan65504Elements) {
  const Dims dims = {2, 64, 32, 32};
  const std::vector<float> want(static_cast<size_t>(2 * 64 * 32 * 32), 1.0f / 1024.0f);
  // Opset 17 (axes attribute, keepdims 0 and 1) and 18 (axes input).
  for (int64_t keepdims : {0, 1}) {
    OpTester t;
    t.op_type = "ReduceMean";
    t.Attr(ir::Attribute::Ints("axes", {2, 3})).Attr(ir::Attribute::Int("keepdims", keepdims));
    t.Input(HalfTensor(dims));
    ExpectHalfValues(HalfGradient(t), dims, want, 0.0f, "ReduceMean opset 17 keepdims " + std::to_string(keepdims));
  }
  OpTester t;
  t.op_type = "ReduceMean";
  t.opset = 18;
  t.Input(HalfTensor(dims)).Input(MakeTensor<int64_t>({2}, {2, 3}));
  ExpectHalfValues(HalfGradient(t), dims, want, 0.0f, "ReduceMean opset 18");
}

}  // namespace
}  // namespace onnxamp::testing
