// Whole-model check of mixed-precision training graphs: for the bundled CNN at a batch large enough that its pooled
// element counts exceed float16's range (64 x 32 x 8 x 8 = 131072), every parameter's FP16-AMP gradient points the
// way its FP32 gradient does. A builder that rounds a count or a sum into float16 zeroes or scrambles them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/executor/session.h"
#include "tests/trainer/train_test_util.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {
namespace {

std::vector<ir::Tensor> Gradients(const ir::Model& model, DType amp, const ir::Tensor& x, const ir::Tensor& labels) {
  TrainingGraphOptions options;
  options.amp = amp;
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, options);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return {};
  std::vector<ir::Tensor> feeds = {x, labels};
  feeds[0].set_name(g->data_inputs[0]);
  feeds[1].set_name(g->labels);
  const float scale = amp == DType::kUndefined ? 1.0f : 1024.0f;
  test_util::AddInitialStateFeeds(*g, scale, &feeds);
  exec::SessionOptions so;
  so.mode = exec::SessionMode::kTraining;
  auto session = exec::Session::Create(converter::CloneModel(g->train), so);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return {};
  exec::RunOptions run;
  for (const Parameter& p : g->params) run.fetch.push_back(p.gradient);
  auto out = (*session)->Run(feeds, run);
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return {};
  for (size_t i = 0; i < out->size(); ++i) {
    ir::Tensor& t = (*out)[i];
    for (float& v : t.mutable_values<float>()) v /= scale;
    t.set_name(g->params[i].name);
  }
  return std::move(out).value();
}

TEST(AmpGradientsTest, Fp16CnnGradientsFollowFp32AtALargeBatch) {
  const ir::Model model = test_util::LoadReference("cnn.onnx");
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  ir::Tensor x(DType::kFloat32, {64, 3, 32, 32});
  for (float& v : x.mutable_values<float>()) v = normal(gen);
  ir::Tensor labels(DType::kInt64, {64});
  for (int64_t& v : labels.mutable_values<int64_t>()) v = static_cast<int64_t>(gen() % 10);
  const std::vector<ir::Tensor> fp32 = Gradients(model, DType::kUndefined, x, labels);
  const std::vector<ir::Tensor> fp16 = Gradients(model, DType::kFloat16, x, labels);
  ASSERT_EQ(fp32.size(), fp16.size());
  ASSERT_FALSE(fp32.empty());
  for (size_t i = 0; i < fp32.size(); ++i) {
    const auto a = fp32[i].values<float>();
    const auto b = fp16[i].values<float>();
    ASSERT_EQ(a.size(), b.size()) << fp32[i].name();
    double dot = 0, na = 0, nb = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      dot += static_cast<double>(a[k]) * b[k];
      na += static_cast<double>(a[k]) * a[k];
      nb += static_cast<double>(b[k]) * b[k];
    }
    ASSERT_GT(na, 0) << fp32[i].name();
    EXPECT_GT(nb, 0) << fp32[i].name() << ": the FP16 gradient is zero";
    const double cosine = dot / std::sqrt(na * nb);
    EXPECT_GT(cosine, 0.98) << fp32[i].name();
    EXPECT_NEAR(std::sqrt(nb / na), 1.0, 0.1) << fp32[i].name() << ": norms differ";
  }
}

}  // namespace
}  // namespace onnxamp::trainer
