// ParameterStore: 64-byte aligned layout, views that alias the flat buffers (and keep them alive), gradient
// accumulation and zeroing, loading fp32/fp16/bf16/fp64 initial values, optimizer state buffers, and the errors.
#include "trainer/state/parameter_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/dtype.h"

namespace onnxamp::trainer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ir::Tensor FloatTensor(std::vector<int64_t> dims, std::vector<float> values) {
  ir::Tensor t(DType::kFloat32, std::move(dims));
  std::span<float> out = t.mutable_values<float>();
  EXPECT_EQ(out.size(), values.size());
  for (size_t i = 0; i < out.size() && i < values.size(); ++i) out[i] = values[i];
  return t;
}

std::vector<float> Values(const ir::Tensor& t) {
  std::span<const float> v = t.values<float>();
  return {v.begin(), v.end()};
}

std::vector<float> Values(std::span<const float> v) { return {v.begin(), v.end()}; }

ParameterStore MakeStore(std::vector<ParameterSpec> specs) {
  StatusOr<ParameterStore> store = ParameterStore::Create(std::move(specs));
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return std::move(store).value();
}

bool Aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(ParameterStoreTest, EverySliceStartsOn64Bytes) {
  ParameterStore store = MakeStore({{"a", {3}}, {"b", {2, 2}}, {"scalar", {}}, {"empty", {0, 4}}, {"e", {17}}});
  ASSERT_EQ(store.size(), 5u);
  EXPECT_EQ(store.offset(0), 0u);
  EXPECT_EQ(store.offset(1), 16u);
  EXPECT_EQ(store.offset(2), 32u);
  EXPECT_EQ(store.offset(3), 48u);
  EXPECT_EQ(store.offset(4), 48u);  // the empty parameter takes no room
  EXPECT_EQ(store.numel(2), 1u);
  EXPECT_EQ(store.numel(3), 0u);
  EXPECT_EQ(store.flat_size(), 80u);  // 48 + 17 rounded up to 16 floats
  float* state = store.EnsureState("exp_avg");
  for (size_t i = 0; i < store.size(); ++i) {
    EXPECT_TRUE(Aligned64(store.param(i).data())) << i;
    EXPECT_TRUE(Aligned64(store.grad(i).data())) << i;
    EXPECT_TRUE(Aligned64(state + store.offset(i))) << i;
  }
  // Everything starts at zero, padding included.
  for (size_t j = 0; j < store.flat_size(); ++j) {
    ASSERT_EQ(store.params_data()[j], 0.0f);
    ASSERT_EQ(store.grads_data()[j], 0.0f);
    ASSERT_EQ(state[j], 0.0f);
  }
}

TEST(ParameterStoreTest, ParamViewAliasesTheStore) {
  ParameterStore store = MakeStore({{"fc.weight", {2, 3}}, {"fc.bias", {2}}});
  ir::Tensor view = store.ParamView(0);
  EXPECT_EQ(view.name(), "fc.weight");
  EXPECT_EQ(view.dtype(), DType::kFloat32);
  EXPECT_THAT(view.dims(), ElementsAre(2, 3));
  EXPECT_EQ(reinterpret_cast<const float*>(view.data()), store.param(0).data());
  ASSERT_TRUE(store.LoadParam(0, FloatTensor({2, 3}, {1, 2, 3, 4, 5, 6})).ok());
  store.param(0)[4] = 50.0f;  // written through the store
  EXPECT_THAT(Values(view), ElementsAre(1, 2, 3, 4, 50, 6));
  // A view that is the only holder of its buffer writes into the store (ir::Tensor is copy-on-write).
  view.mutable_values<float>()[0] = -1.0f;
  EXPECT_EQ(store.param(0)[0], -1.0f);
  // Gradient views are named after the parameter with ".grad".
  ir::Tensor grad_view = store.GradView(1);
  EXPECT_EQ(grad_view.name(), "fc.bias.grad");
  store.grad(1)[1] = 7.0f;
  EXPECT_THAT(Values(grad_view), ElementsAre(0, 7));
}

TEST(ParameterStoreTest, ViewsKeepTheMemoryAlive) {
  auto store = std::make_unique<ParameterStore>(MakeStore({{"w", {4}}}));
  ASSERT_TRUE(store->LoadParam(0, FloatTensor({4}, {1, 2, 3, 4})).ok());
  ir::Tensor view = store->ParamView(0);
  store.reset();
  EXPECT_THAT(Values(view), ElementsAre(1, 2, 3, 4));  // ASan would flag a use after free
}

TEST(ParameterStoreTest, AccumulatesAndZeroesGradients) {
  ParameterStore store = MakeStore({{"w", {3}}, {"b", {1}}});
  EXPECT_FALSE(store.has_grad(0));
  ASSERT_TRUE(store.AccumulateGrad(0, FloatTensor({3}, {1, 2, 3})).ok());
  ASSERT_TRUE(store.AccumulateGrad(0, FloatTensor({3}, {0.5f, -2, 10})).ok());
  EXPECT_TRUE(store.has_grad(0));
  EXPECT_FALSE(store.has_grad(1));
  EXPECT_THAT(Values(store.grad(0)), ElementsAre(1.5f, 0.0f, 13.0f));
  ASSERT_TRUE(store.SetGrad(0, FloatTensor({3}, {4, 5, 6})).ok());
  EXPECT_THAT(Values(store.grad(0)), ElementsAre(4, 5, 6));
  ASSERT_TRUE(store.SetGrad(1, FloatTensor({1}, {9})).ok());
  store.ZeroGrads();
  EXPECT_FALSE(store.has_grad(0));
  EXPECT_FALSE(store.has_grad(1));
  EXPECT_THAT(Values(store.grad(0)), ElementsAre(0, 0, 0));
  EXPECT_THAT(Values(store.grad(1)), ElementsAre(0));
  // Float32 addition, element by element: 1 + 2^-24 rounds back to 1.
  ASSERT_TRUE(store.AccumulateGrad(1, FloatTensor({1}, {1.0f})).ok());
  ASSERT_TRUE(store.AccumulateGrad(1, FloatTensor({1}, {5.9604645e-08f})).ok());
  EXPECT_EQ(store.grad(1)[0], 1.0f);
}

TEST(ParameterStoreTest, LoadsFloat16BFloat16AndFloat64) {
  ParameterStore store = MakeStore({{"h", {3}}, {"bf", {2}}, {"d", {2}}});
  ir::Tensor h(DType::kFloat16, {3});
  std::span<uint16_t> hb = h.mutable_values<uint16_t>();
  hb[0] = 0x3C00;  // 1
  hb[1] = 0xC000;  // -2
  hb[2] = 0x3555;  // 0.333251953125
  ASSERT_TRUE(store.LoadParam(0, h).ok());
  EXPECT_THAT(Values(store.param(0)), ElementsAre(1.0f, -2.0f, 0.333251953125f));
  ir::Tensor bf(DType::kBFloat16, {2});
  bf.mutable_values<uint16_t>()[0] = 0x4049;  // 3.140625
  bf.mutable_values<uint16_t>()[1] = 0xBF80;  // -1
  ASSERT_TRUE(store.LoadParam(1, bf).ok());
  EXPECT_THAT(Values(store.param(1)), ElementsAre(3.140625f, -1.0f));
  ir::Tensor d(DType::kFloat64, {2});
  d.mutable_values<double>()[0] = 0.1;
  d.mutable_values<double>()[1] = -1e-50;  // underflows to -0: allowed
  ASSERT_TRUE(store.LoadParam(2, d).ok());
  EXPECT_EQ(store.param(2)[0], 0.1f);
  EXPECT_EQ(store.param(2)[1], 0.0f);
  EXPECT_TRUE(std::signbit(store.param(2)[1]));
}

TEST(ParameterStoreTest, ReadParamIsAnOwningCopy) {
  ParameterStore store = MakeStore({{"w", {2}}});
  ASSERT_TRUE(store.LoadParam(0, FloatTensor({2}, {1, 2})).ok());
  ir::Tensor copy = store.ReadParam(0);
  EXPECT_EQ(copy.name(), "w");
  store.param(0)[0] = 100.0f;
  EXPECT_THAT(Values(copy), ElementsAre(1, 2));
}

TEST(ParameterStoreTest, OptimizerStateBuffers) {
  ParameterStore store = MakeStore({{"w", {2}}, {"b", {1}}});
  EXPECT_EQ(store.FindState("exp_avg"), nullptr);
  EXPECT_EQ(store.StateView("exp_avg", 0).status().code(), StatusCode::kNotFound);
  float* m = store.EnsureState("exp_avg");
  EXPECT_EQ(store.EnsureState("exp_avg"), m);
  EXPECT_EQ(store.FindState("exp_avg"), m);
  store.EnsureState("exp_avg_sq");
  EXPECT_THAT(store.state_names(), ElementsAre("exp_avg", "exp_avg_sq"));
  m[store.offset(1)] = 3.0f;
  StatusOr<ir::Tensor> view = store.StateView("exp_avg", 1);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->name(), "b.exp_avg");
  EXPECT_THAT(Values(*view), ElementsAre(3.0f));
}

TEST(ParameterStoreTest, FindsParametersByName) {
  ParameterStore store = MakeStore({{"w", {2}}, {"b", {1}}});
  StatusOr<size_t> b = store.Find("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, 1u);
  StatusOr<size_t> missing = store.Find("c");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("'c'"));
}

TEST(ParameterStoreTest, CreateRejectsBadSpecs) {
  StatusOr<ParameterStore> twice = ParameterStore::Create({{"w", {2}}, {"w", {3}}});
  EXPECT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("parameter 'w' is listed twice"));
  StatusOr<ParameterStore> unnamed = ParameterStore::Create({{"w", {2}}, {"", {3}}});
  EXPECT_FALSE(unnamed.ok());
  EXPECT_THAT(unnamed.status().message(), HasSubstr("parameter 1 has an empty name"));
  StatusOr<ParameterStore> negative = ParameterStore::Create({{"conv.weight", {2, -1}}});
  EXPECT_FALSE(negative.ok());
  EXPECT_THAT(negative.status().message(), HasSubstr("parameter 'conv.weight'"));
}

TEST(ParameterStoreTest, GradientErrorsNameTheParameter) {
  ParameterStore store = MakeStore({{"fc.weight", {2, 2}}});
  ir::Tensor half(DType::kFloat16, {2, 2});
  Status s = store.AccumulateGrad(0, half);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("gradient of parameter 'fc.weight': expected float [2,2], got float16 [2,2]"));
  s = store.SetGrad(0, FloatTensor({4}, {1, 2, 3, 4}));
  EXPECT_THAT(s.message(), HasSubstr("expected float [2,2], got float [4]"));
  ASSERT_TRUE(ir::Tensor::WithoutData(DType::kFloat32, {2, 2}).ok());
  s = store.AccumulateGrad(0, *ir::Tensor::WithoutData(DType::kFloat32, {2, 2}));
  EXPECT_THAT(s.message(), HasSubstr("no data"));
  EXPECT_FALSE(store.has_grad(0));  // nothing was stored
  EXPECT_THAT(Values(store.grad(0)), ElementsAre(0, 0, 0, 0));
}

TEST(ParameterStoreTest, LoadErrorsNameTheParameterAndChangeNothing) {
  ParameterStore store = MakeStore({{"w", {2}}});
  ASSERT_TRUE(store.LoadParam(0, FloatTensor({2}, {1, 2})).ok());
  ir::Tensor ints(DType::kInt64, {2});
  Status s = store.LoadParam(0, ints);
  EXPECT_THAT(s.message(), HasSubstr("initial value of parameter 'w': expected float, float16, bfloat16 or double, "
                                     "got int64"));
  s = store.LoadParam(0, FloatTensor({1, 2}, {5, 6}));
  EXPECT_THAT(s.message(), HasSubstr("expected dims [2], got [1,2]"));
  ir::Tensor big(DType::kFloat64, {2});
  big.mutable_values<double>()[0] = 3.0;
  big.mutable_values<double>()[1] = 1e39;
  s = store.LoadParam(0, big);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("element 1"));
  EXPECT_THAT(Values(store.param(0)), ElementsAre(1, 2));
}

}  // namespace
}  // namespace onnxamp::trainer
