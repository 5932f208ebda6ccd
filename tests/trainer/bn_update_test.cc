// RecomputeBatchNormStatistics (torch.optim.swa_utils.update_bn): on x -> BatchNormalization -> Relu ->
// BatchNormalization, the running statistics are the average over the batches of each batch's mean and unbiased
// variance, the second node's taken after the first normalised with the batch's own statistics (training mode), with
// a partial last batch weighing as much as the others.
#include "trainer/bn_update.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/trainer/train_test_util.h"

namespace onnxamp::trainer {
namespace {

constexpr int64_t kChannels = 2;
constexpr int64_t kWidth = 3;
constexpr float kEps = 1e-5f;

ir::Value* Initializer(ir::Graph& g, const std::string& name, std::vector<float> values) {
  ir::Value* v = g.CreateValue(name);
  ir::Tensor t(DType::kFloat32, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.mutable_values<float>()[i] = values[i];
  v->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(static_cast<int64_t>(values.size()))}));
  t.set_name(name);
  g.SetInitializer(v, std::move(t));
  return v;
}

// x [N, 2, width] -> bn1 (scale 2, -1; bias 0.5, 0; running stats that update_bn replaces) -> Relu -> bn2.
ir::Model TwoBatchNorms(int64_t width = kWidth) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->set_type(ir::ValueType::Tensor(
      DType::kFloat32, ir::Shape{ir::Dim::Param("batch"), ir::Dim::Value(kChannels), ir::Dim::Value(width)}));
  g.AddInput(x);
  ir::Value* a = g.CreateValue("a");
  g.AddNode("BatchNormalization",
            {x, Initializer(g, "bn1.scale", {2.0f, -1.0f}), Initializer(g, "bn1.bias", {0.5f, 0.0f}),
             Initializer(g, "bn1.running_mean", {7.0f, 7.0f}), Initializer(g, "bn1.running_var", {9.0f, 9.0f})},
            {a}, "bn1");
  ir::Value* r = g.CreateValue("r");
  g.AddNode("Relu", {a}, {r}, "relu");
  ir::Value* y = g.CreateValue("y");
  g.AddNode("BatchNormalization",
            {r, Initializer(g, "bn2.scale", {1.0f, 1.0f}), Initializer(g, "bn2.bias", {0.0f, 0.0f}),
             Initializer(g, "bn2.running_mean", {7.0f, 7.0f}), Initializer(g, "bn2.running_var", {9.0f, 9.0f})},
            {y}, "bn2");
  g.AddOutput(y);
  return m;
}

// A batch's per-channel mean and (biased or unbiased) variance of x [n, C, W], in double.
void Stats(const std::vector<double>& x, int64_t n, std::vector<double>* mean, std::vector<double>* biased,
           std::vector<double>* unbiased) {
  const double count = static_cast<double>(n * kWidth);
  mean->assign(kChannels, 0.0);
  biased->assign(kChannels, 0.0);
  unbiased->assign(kChannels, 0.0);
  for (int64_t c = 0; c < kChannels; ++c) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t w = 0; w < kWidth; ++w) s += x[(i * kChannels + c) * kWidth + w];
    }
    (*mean)[c] = s / count;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t w = 0; w < kWidth; ++w) {
        const double d = x[(i * kChannels + c) * kWidth + w] - (*mean)[c];
        ss += d * d;
      }
    }
    (*biased)[c] = ss / count;
    (*unbiased)[c] = ss / (count - 1);
  }
}

TEST(BnUpdate, AveragesEachBatchsStatisticsInTrainingMode) {
  const ir::Model model = TwoBatchNorms();
  constexpr int64_t kSamples = 11, kBatch = 4;  // batches of 4, 4 and 3
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(1.0f, 2.0f);
  ir::Tensor x(DType::kFloat32, {kSamples, kChannels, kWidth});
  for (float& v : x.mutable_values<float>()) v = normal(gen);
  x.set_name("x");
  StatusOr<Dataset> raw = Dataset::FromTensors({x}, "x");
  ASSERT_TRUE(raw.ok()) << raw.status().message();
  BindOptions bind;  // no labels
  StatusOr<Dataset> data = raw->Bind(DataInputs(*model.graph), bind);
  ASSERT_TRUE(data.ok()) << data.status().message();
  BnUpdateOptions o;
  o.batch_size = kBatch;
  o.session.num_threads = 1;
  StatusOr<std::vector<ir::Tensor>> got = RecomputeBatchNormStatistics(model, *data, o);
  ASSERT_TRUE(got.ok()) << got.status().message();

  // The reference, in double: per batch, bn1's statistics, its output with them, Relu, bn2's statistics.
  const float scale[] = {2.0f, -1.0f}, bias[] = {0.5f, 0.0f};
  std::vector<std::vector<double>> sums(4, std::vector<double>(kChannels, 0.0));
  int64_t batches = 0;
  for (int64_t begin = 0; begin < kSamples; begin += kBatch, ++batches) {
    const int64_t n = std::min(kBatch, kSamples - begin);
    std::vector<double> xb(x.values<float>().begin() + begin * kChannels * kWidth,
                           x.values<float>().begin() + (begin + n) * kChannels * kWidth);
    std::vector<double> mean, biased, unbiased;
    Stats(xb, n, &mean, &biased, &unbiased);
    for (int64_t c = 0; c < kChannels; ++c) {
      sums[0][c] += mean[c];
      sums[1][c] += unbiased[c];
    }
    std::vector<double> r(xb.size());
    for (size_t i = 0; i < xb.size(); ++i) {
      const int64_t c = static_cast<int64_t>(i / kWidth) % kChannels;
      const double a = (xb[i] - mean[c]) / std::sqrt(biased[c] + kEps) * scale[c] + bias[c];
      r[i] = std::max(a, 0.0);
    }
    Stats(r, n, &mean, &biased, &unbiased);
    for (int64_t c = 0; c < kChannels; ++c) {
      sums[2][c] += mean[c];
      sums[3][c] += unbiased[c];
    }
  }
  ASSERT_EQ(batches, 3);
  const std::vector<std::string> names = {"bn1.running_mean", "bn1.running_var", "bn2.running_mean", "bn2.running_var"};
  ASSERT_EQ(got->size(), names.size());
  for (size_t k = 0; k < names.size(); ++k) {
    const ir::Tensor* t = nullptr;
    for (const ir::Tensor& g : *got) {
      if (g.name() == names[k]) t = &g;
    }
    ASSERT_NE(t, nullptr) << names[k];
    ASSERT_EQ(t->dims(), (std::vector<int64_t>{kChannels})) << names[k];
    for (int64_t c = 0; c < kChannels; ++c) {
      const double want = sums[k][c] / static_cast<double>(batches);
      EXPECT_NEAR(t->values<float>()[c], want, 2e-6 * std::max(1.0, std::fabs(want))) << names[k] << " " << c;
    }
  }
}

// update_bn resets the statistics first: stale ones (here NaN) do not reach the result.
TEST(BnUpdate, StaleStatisticsDoNotReachTheResult) {
  ir::Model model = TwoBatchNorms();
  ir::Tensor x(DType::kFloat32, {6, kChannels, kWidth});
  for (size_t i = 0; i < x.values<float>().size(); ++i) x.mutable_values<float>()[i] = std::sin(static_cast<float>(i));
  x.set_name("x");
  StatusOr<Dataset> raw = Dataset::FromTensors({x}, "x");
  ASSERT_TRUE(raw.ok());
  BindOptions bind;  // no labels
  StatusOr<Dataset> data = raw->Bind(DataInputs(*model.graph), bind);
  ASSERT_TRUE(data.ok()) << data.status().message();
  BnUpdateOptions o;
  o.batch_size = 4;
  StatusOr<std::vector<ir::Tensor>> clean = RecomputeBatchNormStatistics(model, *data, o);
  ASSERT_TRUE(clean.ok()) << clean.status().message();
  ir::Value* var = model.graph->FindValue("bn2.running_var");
  ir::Tensor nan = *var->initializer();
  for (float& v : nan.mutable_values<float>()) v = NAN;
  model.graph->SetInitializer(var, std::move(nan));
  StatusOr<std::vector<ir::Tensor>> stale = RecomputeBatchNormStatistics(model, *data, o);
  ASSERT_TRUE(stale.ok()) << stale.status().message();
  ASSERT_EQ(stale->size(), clean->size());
  for (size_t i = 0; i < clean->size(); ++i) EXPECT_TRUE((*stale)[i].SameContents((*clean)[i])) << (*clean)[i].name();
  // drop_last: the partial batch of 2 is left out.
  o.drop_last = true;
  StatusOr<std::vector<ir::Tensor>> dropped = RecomputeBatchNormStatistics(model, *data, o);
  ASSERT_TRUE(dropped.ok()) << dropped.status().message();
  EXPECT_FALSE((*dropped)[0].SameContents((*clean)[0]));
}

TEST(BnUpdate, RefusesModelsWithoutStatisticsAndSingleValueChannels) {
  const ir::Model mlp = test_util::LoadReference("mlp.onnx");
  const Dataset data = test_util::RandomClassData(mlp, {256}, 8, 10, 1);
  EXPECT_EQ(RecomputeBatchNormStatistics(mlp, data, {}).status().message(),
            "the model has no BatchNormalization statistics");
  // One sample of width 1 per channel: no unbiased variance.
  ir::Model m = TwoBatchNorms(1);
  ir::Tensor x(DType::kFloat32, {1, kChannels, 1});
  x.set_name("x");
  StatusOr<Dataset> raw = Dataset::FromTensors({x}, "x");
  ASSERT_TRUE(raw.ok());
  BindOptions bind;  // no labels
  StatusOr<Dataset> one = raw->Bind(DataInputs(*m.graph), bind);
  ASSERT_TRUE(one.ok()) << one.status().message();
  const Status st = RecomputeBatchNormStatistics(m, *one, {}).status();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("update_bn: the batch of samples 0-0"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace onnxamp::trainer
