// Evaluation's top-1 and top-k accuracy: scores chosen by hand (ties included) through a model whose prediction is its
// input times a weight of ones, so the counts are known exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "trainer/data/dataset.h"
#include "trainer/log/metrics_log.h"
#include "trainer/trainer.h"

namespace onnxamp::trainer {
namespace {

constexpr int64_t kClasses = 4;

// scores [N,4] = x [N,4] * w [4] (w = ones).
ir::Model ScoreModel() {
  ir::Model model;
  model.graph = std::make_unique<ir::Graph>("top_k_test");
  model.SetOpsetVersion("", 17);
  ir::Graph* g = model.graph.get();
  ir::Value* x = g->CreateValue("x");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("N"), ir::Dim::Value(kClasses)}));
  g->AddInput(x);
  ir::Tensor ones(DType::kFloat32, {kClasses});
  for (float& v : ones.mutable_values<float>()) v = 1;
  ones.set_name("w");
  ir::Value* w = g->CreateValue("w");
  w->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(kClasses)}));
  g->SetInitializer(w, std::move(ones));
  ir::Value* y = g->CreateValue("scores");
  g->AddNode("Mul", {x, w}, {y}, "mul");
  y->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("N"), ir::Dim::Value(kClasses)}));
  g->AddOutput(y);
  return model;
}

// `rows` of scores [N, 4] and their labels as a bound dataset (NaN allowed).
Dataset ScoresOf(const std::vector<std::vector<float>>& rows, const std::vector<int64_t>& labels) {
  ir::Tensor x(DType::kFloat32, {static_cast<int64_t>(rows.size()), kClasses});
  ir::Tensor y(DType::kInt64, {static_cast<int64_t>(rows.size())});
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int64_t c = 0; c < kClasses; ++c) x.mutable_values<float>()[r * kClasses + c] = rows[r][c];
    y.mutable_values<int64_t>()[r] = labels[r];
  }
  x.set_name("x");
  y.set_name("labels");
  StatusOr<Dataset> d = Dataset::FromTensors({x, y}, "scores");
  EXPECT_TRUE(d.ok()) << d.status().message();
  BindOptions bind;
  bind.labels.array = "labels";
  bind.labels.num_classes = kClasses;
  bind.labels.ignore_index = -100;
  bind.allow_non_finite = true;
  StatusOr<Dataset> b = d->Bind({ModelInput{"x", ir::ValueType()}}, bind);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return std::move(b).value();
}

// Rows of scores and their labels: label rank (classes outranking it, ties to the lower index) in the comment.
Dataset Scores() {
  const std::vector<std::vector<float>> rows = {
      {0.1f, 0.5f, 0.3f, 0.2f},   // label 1: rank 0
      {0.1f, 0.5f, 0.3f, 0.2f},   // label 2: rank 1
      {0.4f, 0.4f, 0.4f, 0.1f},   // label 2: ties with 0 and 1, rank 2
      {0.4f, 0.4f, 0.4f, 0.1f},   // label 0: ties, lowest index wins, rank 0
      {0.9f, 0.1f, 0.1f, 0.05f},  // label 3: rank 3
      {0.9f, 0.1f, 0.1f, 0.05f},  // label -100: ignored
  };
  return ScoresOf(rows, {1, 2, 2, 0, 3, -100});
}

EvalRecord Evaluate(int64_t top_k, int64_t batch_size, const Dataset& data = Scores()) {
  TrainerOptions o;
  o.steps = 1;
  o.batch_size = batch_size;
  o.threads = 1;
  o.top_k = top_k;
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(ScoreModel(), o, data);
  EXPECT_TRUE(t.ok()) << t.status().message();
  if (!t.ok()) return {};
  StatusOr<EvalRecord> e = (*t)->Evaluate(data);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? *e : EvalRecord{};
}

TEST(EvalTopK, CountsRanksWithTiesToTheLowerClassIndex) {
  // 5 counted positions (one ignored); label ranks 0, 1, 2, 0, 3.
  for (int64_t batch : {int64_t{6}, int64_t{4}, int64_t{1}}) {
    const EvalRecord top2 = Evaluate(2, batch);
    EXPECT_DOUBLE_EQ(top2.accuracy, 2.0 / 5) << "batch " << batch;
    EXPECT_EQ(top2.top_k, 2);
    EXPECT_DOUBLE_EQ(top2.top_k_accuracy, 3.0 / 5) << "batch " << batch;
    EXPECT_EQ(top2.samples, 6);
  }
  const EvalRecord top3 = Evaluate(3, 6);
  EXPECT_DOUBLE_EQ(top3.accuracy, 2.0 / 5);
  EXPECT_DOUBLE_EQ(top3.top_k_accuracy, 4.0 / 5);
  const EvalRecord top4 = Evaluate(4, 6);
  EXPECT_DOUBLE_EQ(top4.top_k_accuracy, 1.0);
}

// NaN scores rank as an argmax ranks them: above every number, the first NaN above the others. A diverged model's
// NaN logits used to count every position as correct.
TEST(EvalTopK, NaNScoresRankAsAnArgmaxTakesThem) {
  const float nan = std::nanf("");
  const Dataset data = ScoresOf({{nan, nan, nan, nan},     // label 2: classes 0 and 1 (first NaNs) outrank it
                                 {0.1f, nan, 0.3f, 0.2f},  // label 2: the NaN of class 1 outranks it
                                 {0.1f, nan, 0.3f, 0.2f},  // label 1: its own NaN, nothing outranks it
                                 {nan, nan, nan, nan}},    // label 0: the first NaN
                                {2, 2, 1, 0});
  const EvalRecord e = Evaluate(2, 4, data);
  EXPECT_DOUBLE_EQ(e.accuracy, 2.0 / 4);
  EXPECT_DOUBLE_EQ(e.top_k_accuracy, 3.0 / 4);
}

TEST(EvalTopK, OffByDefaultAndForK1) {
  for (int64_t k : {int64_t{0}, int64_t{1}}) {
    const EvalRecord e = Evaluate(k, 6);
    EXPECT_DOUBLE_EQ(e.accuracy, 2.0 / 5);
    EXPECT_EQ(e.top_k, 0);
    EXPECT_EQ(e.top_k_accuracy, -1);
  }
}

TEST(EvalTopK, LoggedInJsonAndTensorBoardScalars) {
  const EvalRecord e = Evaluate(2, 6);
  const std::string json = EvalJson(5, e, 0);
  EXPECT_NE(json.find("\"val_top_k\":2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"val_top_k_accuracy\":0.6"), std::string::npos) << json;
  std::vector<std::string> names;
  for (const Scalar& s : EvalScalars(e)) names.push_back(s.tag);
  EXPECT_EQ(names, (std::vector<std::string>{"val/loss", "val/accuracy", "val/top_k_accuracy"}));
  EXPECT_EQ(EvalJson(5, Evaluate(0, 6), 0).find("top_k"), std::string::npos);
}

TEST(EvalTopK, NegativeKIsRefused) {
  TrainerOptions o;
  o.steps = 1;
  o.top_k = -2;
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(ScoreModel(), o, Scores());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "--top-k must be at least 1");
}

}  // namespace
}  // namespace onnxamp::trainer
