// Whole-model check of mixed-precision training graphs: for the bundled CNN at a batch large enough that its pooled
// element counts exceed float16's range (64 x 32 x 8 x 8 = 131072), every parameter's FP16-AMP gradient points the
// way its FP32 gradient does. A builder that rounds a count or a sum into float16 zeroes or scrambles them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/executor/session.h"
#include "tests/trainer/train_test_util.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {
namespace {

// The parameters' gradients of one step; `conv_types`: the element type the train graph's first Conv reads.
std::vector<ir::Tensor> Gradients(const ir::Model& model, DType amp, const ir::Tensor& x, const ir::Tensor& labels,
                                  int64_t bfloat16_types_opset = 0, DType* conv_types = nullptr) {
  TrainingGraphOptions options;
  options.amp = amp;
  options.bfloat16_types_opset = bfloat16_types_opset;
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, options);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return {};
  for (const ir::Node* n : g->train.graph->nodes()) {
    if (conv_types && n->op_type() == "Conv") {
      *conv_types = n->input(0)->type().elem_type();
      break;
    }
  }
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

// Cosine and norm ratio of each parameter's gradient against FP32's.
void ExpectFollows(const std::vector<ir::Tensor>& fp32, const std::vector<ir::Tensor>& low, double min_cosine,
                   double norm_tolerance) {
  ASSERT_EQ(fp32.size(), low.size());
  ASSERT_FALSE(fp32.empty());
  for (size_t i = 0; i < fp32.size(); ++i) {
    const auto a = fp32[i].values<float>();
    const auto b = low[i].values<float>();
    ASSERT_EQ(a.size(), b.size()) << fp32[i].name();
    double dot = 0, na = 0, nb = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      dot += static_cast<double>(a[k]) * b[k];
      na += static_cast<double>(a[k]) * a[k];
      nb += static_cast<double>(b[k]) * b[k];
    }
    ASSERT_GT(na, 0) << fp32[i].name();
    EXPECT_GT(nb, 0) << fp32[i].name() << ": the low-precision gradient is zero";
    const double cosine = dot / std::sqrt(na * nb);
    EXPECT_GT(cosine, min_cosine) << fp32[i].name();
    EXPECT_NEAR(std::sqrt(nb / na), 1.0, norm_tolerance) << fp32[i].name() << ": norms differ";
  }
}

// `n` random 3x32x32 images (normal) and labels of 10 classes.
std::pair<ir::Tensor, ir::Tensor> Images(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  ir::Tensor x(DType::kFloat32, {n, 3, 32, 32});
  for (float& v : x.mutable_values<float>()) v = normal(gen);
  ir::Tensor labels(DType::kInt64, {n});
  for (int64_t& v : labels.mutable_values<int64_t>()) v = static_cast<int64_t>(gen() % 10);
  return {std::move(x), std::move(labels)};
}

TEST(AmpGradientsTest, Fp16CnnGradientsFollowFp32AtALargeBatch) {
  const ir::Model model = test_util::LoadReference("cnn.onnx");
  const auto [x, labels] = Images(64, 7);
  const std::vector<ir::Tensor> fp32 = Gradients(model, DType::kUndefined, x, labels);
  const std::vector<ir::Tensor> fp16 = Gradients(model, DType::kFloat16, x, labels);
  ExpectFollows(fp32, fp16, 0.98, 0.1);
}

// BF16 with the types of opset 22 (what Trainer::Create asks for on CUDA): the bundled CNN's convolutions, pools and
// their gradients compute in bfloat16 (without, ONNX's Conv before 22 has none and they stay FP32), and every
// parameter's gradient still points the way its FP32 gradient does (bfloat16 keeps 8 bits of mantissa: a looser
// cosine than FP16's).
TEST(AmpGradientsTest, Bf16ConvolutionsWithOpset22TypesFollowFp32) {
  const ir::Model model = test_util::LoadReference("cnn.onnx");
  const auto [x, labels] = Images(16, 11);
  const std::vector<ir::Tensor> fp32 = Gradients(model, DType::kUndefined, x, labels);
  DType conv_types = DType::kUndefined;
  const std::vector<ir::Tensor> bf16 = Gradients(model, DType::kBFloat16, x, labels, kBFloat16TypesOpset, &conv_types);
  EXPECT_EQ(conv_types, DType::kBFloat16);
  ExpectFollows(fp32, bf16, 0.97, 0.1);
  // The model's own opset (17): the convolutions stay FP32.
  Gradients(model, DType::kBFloat16, x, labels, 0, &conv_types);
  EXPECT_EQ(conv_types, DType::kFloat32);
}

}  // namespace
}  // namespace onnxamp::trainer
