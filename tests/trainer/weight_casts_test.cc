// ExternalizeWeightCasts: the AMP training graphs read low-precision weight inputs instead of casting the FP32
// parameters, and compute exactly what they computed before.
#include "trainer/graph/weight_casts.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "importer/model_io.h"
#include "runtime/common/half.h"
#include "runtime/executor/session.h"
#include "runtime/ir/verify.h"
#include "tests/trainer/train_test_util.h"

namespace onnxamp::trainer {
namespace {

using test_util::LoadReference;
using test_util::LowCopy;

int ParameterCasts(const ir::Model& m, const std::vector<Parameter>& params) {
  int n = 0;
  for (const ir::Node* node : m.graph->nodes()) {
    if (node->op_type() != "Cast" || !node->input(0)) continue;
    for (const Parameter& p : params) n += node->input(0)->name() == p.name;
  }
  return n;
}

TEST(WeightCastsTest, TheRewrittenGraphComputesTheSameLossAndGradients) {
  for (DType low : {DType::kFloat16, DType::kBFloat16}) {
    const ir::Model model = LoadReference("cnn.onnx");
    TrainingGraphOptions options;
    options.amp = low;
    StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, options);
    ASSERT_TRUE(g.ok()) << g.status().message();
    ir::Model rewritten = converter::CloneModel(g->train);
    const int casts = ParameterCasts(rewritten, g->params);
    ASSERT_GT(casts, 0);
    const std::vector<LowPrecisionWeight> weights = ExternalizeWeightCasts(rewritten, g->params, low);
    EXPECT_EQ(static_cast<int>(weights.size()), casts);
    EXPECT_EQ(ParameterCasts(rewritten, g->params), 0);
    ASSERT_TRUE(ir::Verify(rewritten).ok()) << ir::Verify(rewritten).message();
    for (const LowPrecisionWeight& w : weights) {
      const ir::Value* v = rewritten.graph->FindValue(w.input);
      ASSERT_NE(v, nullptr) << w.input;
      EXPECT_TRUE(v->is_graph_input());
      EXPECT_EQ(v->type().elem_type(), low);
    }

    // The same feeds (plus the low-precision copies) give the same bits.
    std::vector<ir::Tensor> feeds;
    ir::Tensor x(DType::kFloat32, {2, 3, 32, 32});
    auto xv = x.mutable_values<float>();
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(static_cast<int>(i * 7919 % 201) - 100) / 64;
    x.set_name(g->data_inputs[0]);
    feeds.push_back(x);
    ir::Tensor labels(DType::kInt64, {2});
    labels.mutable_values<int64_t>()[0] = 3;
    labels.mutable_values<int64_t>()[1] = 7;
    labels.set_name(g->labels);
    feeds.push_back(labels);
    test_util::AddInitialStateFeeds(*g, 1024, &feeds);
    std::vector<ir::Tensor> rewritten_feeds = feeds;
    for (const LowPrecisionWeight& w : weights) {
      rewritten_feeds.push_back(LowCopy(g->params[w.param].initial, low, w.input));
    }
    exec::SessionOptions so;
    so.num_threads = 1;
    so.mode = exec::SessionMode::kTraining;
    auto before = exec::Session::Create(converter::CloneModel(g->train), so);
    ASSERT_TRUE(before.ok()) << before.status().message();
    auto after = exec::Session::Create(std::move(rewritten), so);
    ASSERT_TRUE(after.ok()) << after.status().message();
    auto want = (*before)->Run(feeds);
    ASSERT_TRUE(want.ok()) << want.status().message();
    auto got = (*after)->Run(rewritten_feeds);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ(want->size(), got->size());
    for (size_t i = 0; i < want->size(); ++i) {
      EXPECT_TRUE((*want)[i].SameContents((*got)[i])) << DTypeName(low) << ": output " << i;
    }
  }
}

TEST(WeightCastsTest, NothingChangesWithoutMixedPrecision) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, {});
  ASSERT_TRUE(g.ok()) << g.status().message();
  ir::Model m = converter::CloneModel(g->train);
  const size_t nodes = m.graph->num_nodes();
  EXPECT_TRUE(ExternalizeWeightCasts(m, g->params, DType::kUndefined).empty());
  EXPECT_TRUE(ExternalizeWeightCasts(m, g->params, DType::kFloat16).empty());  // an FP32 graph has no such Cast
  EXPECT_EQ(m.graph->num_nodes(), nodes);
}

}  // namespace
}  // namespace onnxamp::trainer
