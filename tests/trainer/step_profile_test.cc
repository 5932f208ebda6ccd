// TrainerOptions::profile: the profile of the steps after the first (node times per node and op type, forward or
// backward, data and optimizer time), and that profiling changes no loss, weight or buffer.
#include "trainer/step_profile.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/trainer/train_test_util.h"
#include "trainer/trainer.h"

namespace onnxamp::trainer {
namespace {

using test_util::LoadReference;
using test_util::RandomClassData;

TrainerOptions CnnOptions(bool profile) {
  TrainerOptions o;
  o.graph.loss.kind = LossKind::kCrossEntropy;
  o.optimizer = OptimizerKind::kAdamW;
  o.batch_size = 4;
  o.accumulate = 2;  // two runs of the train graph per step
  o.steps = 3;
  o.threads = 1;
  o.seed = 7;
  o.profile = profile;
  return o;
}

struct TrainedRun {
  std::vector<double> losses;
  std::vector<ir::Tensor> values;
  std::unique_ptr<Trainer> trainer;
};

TrainedRun Train(bool profile) {
  const ir::Model model = LoadReference("cnn.onnx");
  TrainedRun run;
  StatusOr<std::unique_ptr<Trainer>> t =
      Trainer::Create(model, CnnOptions(profile), RandomClassData(model, {3, 32, 32}, 16, 10, 3));
  EXPECT_TRUE(t.ok()) << t.status().message();
  if (!t.ok()) return run;
  run.trainer = std::move(t).value();
  while (!run.trainer->Done()) {
    StatusOr<StepRecord> r = run.trainer->Step();
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) break;
    run.losses.push_back(r->loss);
  }
  run.values = run.trainer->TrainedValues();
  return run;
}

TEST(StepProfile, ProfiledStepsGiveTheSameLossesWeightsAndBuffers) {
  const TrainedRun plain = Train(false);
  const TrainedRun profiled = Train(true);
  EXPECT_EQ(plain.trainer->profile(), nullptr);
  ASSERT_NE(profiled.trainer->profile(), nullptr);
  ASSERT_EQ(plain.losses.size(), 3u);
  EXPECT_EQ(profiled.losses, plain.losses);
  ASSERT_EQ(profiled.values.size(), plain.values.size());
  for (size_t i = 0; i < plain.values.size(); ++i) {
    EXPECT_TRUE(profiled.values[i].SameContents(plain.values[i])) << plain.values[i].name();
  }
}

TEST(StepProfile, CoversForwardAndBackwardNodesDataAndOptimizer) {
  const TrainedRun run = Train(true);
  const StepProfile* p = run.trainer->profile();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->steps(), 2);  // the first of the 3 steps warms up
  ASSERT_FALSE(p->nodes().empty());
  double node_seconds = 0;
  bool conv_forward = false, conv_grad = false, bn_grad = false, loss_forward = false;
  for (const StepProfile::NodeTotal& n : p->nodes()) {
    EXPECT_EQ(n.calls, 4) << n.node;  // 2 profiled steps x 2 micro-batches
    EXPECT_FALSE(n.on_device) << n.node;
    EXPECT_GE(n.seconds, 0) << n.node;
    node_seconds += n.seconds;
    if (n.op_type == "Conv" || n.op_type == "FusedConv") conv_forward = conv_forward || !n.backward;
    if (n.op_type == "ConvGrad") conv_grad = conv_grad || n.backward;
    if (n.op_type == "BatchNormalizationGrad") bn_grad = bn_grad || n.backward;
    if (n.op_type == "SoftmaxCrossEntropyLoss") loss_forward = loss_forward || !n.backward;
    if (n.op_type == "BatchNormTraining") {
      EXPECT_FALSE(n.backward) << n.node;  // the rewritten forward node
    }
    if (n.op_type.size() > 4 && n.op_type.compare(n.op_type.size() - 4, 4, "Grad") == 0) {
      EXPECT_TRUE(n.backward) << n.node;
    }
  }
  EXPECT_TRUE(conv_forward);
  EXPECT_TRUE(conv_grad);
  EXPECT_TRUE(bn_grad);
  EXPECT_TRUE(loss_forward);
  EXPECT_GT(node_seconds, 0);
  EXPECT_LE(node_seconds, p->run_seconds());
  EXPECT_GT(p->data_seconds(), 0);
  EXPECT_GT(p->optimizer_seconds(), 0);
  EXPECT_LE(p->run_seconds() + p->data_seconds() + p->optimizer_seconds(), p->step_seconds());

  const std::string table = p->Format(5);
  for (const char* want : {"profile: 2 steps after 1 warm-up step", "forward nodes", "backward nodes", "optimizer step",
                           "data (batches)", "ConvGrad", "top 5 nodes"}) {
    EXPECT_NE(table.find(want), std::string::npos) << want << "\n" << table;
  }
  EXPECT_EQ(table.find("device"), std::string::npos) << table;
}

// Nodes the autodiff added are backward even when their op is an ordinary one (Add, Reshape, ...); the model's and
// the loss's nodes are forward.
TEST(StepProfile, TellsBackwardNodesFromTheGraphs) {
  const ir::Model model = LoadReference("cnn.onnx");
  StatusOr<TrainingGraphs> graphs = BuildTrainingGraphs(model, CnnOptions(true).graph);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  const StepProfile p(*graphs);
  int forward = 0, backward = 0, plain_backward = 0;
  for (const ir::Node* n : graphs->train.graph->nodes()) {
    const bool b = p.IsBackward(n->op_type(), n->Describe());
    (b ? backward : forward) += 1;
    if (b && n->domain().empty()) ++plain_backward;
  }
  for (const ir::Node* n : graphs->eval.graph->nodes()) {
    EXPECT_FALSE(p.IsBackward(n->op_type(), n->Describe())) << n->Describe();
  }
  EXPECT_GT(forward, 0);
  EXPECT_GT(backward, forward / 2);
  EXPECT_GT(plain_backward, 0);  // e.g. the sums of gradient contributions, the bias gradients' reductions
  EXPECT_TRUE(p.IsBackward("MaxPoolGrad", "MaxPoolGrad 'made by a session'"));
  // A session's fused node takes the pass of the node it is named after.
  bool checked_fused = false;
  for (const ir::Node* n : graphs->train.graph->nodes()) {
    if (n->name().empty()) continue;
    const std::string fused = "FusedMatMul '" + n->name() + "_fused'";
    EXPECT_EQ(p.IsBackward("FusedMatMul", fused), p.IsBackward(n->op_type(), n->Describe())) << fused;
    checked_fused = true;
  }
  EXPECT_TRUE(checked_fused);
  EXPECT_FALSE(p.IsBackward("FusedMatMul", "FusedMatMul 'not a node of the graphs_fused'"));
  // --recompute's copies of forward nodes run in the backward pass.
  EXPECT_TRUE(p.IsBackward("Relu", "Relu 'layer1.relu_recompute'"));
  EXPECT_TRUE(p.IsBackward("FusedMatMul", "FusedMatMul 'fc1_fused_recompute_2'"));
  EXPECT_FALSE(p.IsBackward("Relu", "Relu 'my_recompute_layer'"));
  EXPECT_FALSE(p.IsBackward("Relu", "Relu 'x_recompute_2b'"));
}

// The nodes of If, Loop and Scan bodies (NodeTime::within) are left out of the node totals (the enclosing node's time
// holds theirs) and shown per enclosing node and op type, as shares of the enclosing node's time.
TEST(StepProfile, SubgraphNodesAreSharesOfTheirEnclosingNode) {
  TrainingGraphs graphs;
  StepProfile p(graphs);
  EXPECT_FALSE(p.BeginStep());
  ASSERT_TRUE(p.BeginStep());
  p.AddRun({{"Loop 'l'", "Loop", false, 0.004, ""},
            {"Gemm 'g'", "Gemm", false, 0.001, ""},
            {"MatMul 'm'", "MatMul", false, 0.001, "Loop 'l'"},
            {"MatMul 'm'", "MatMul", false, 0.002, "Loop 'l'"},
            {"If 'i'", "If", false, 0.001, "Loop 'l'"},
            {"Add 'a'", "Add", false, 0.0005, "Loop 'l' > If 'i'"}},
           0.006);
  p.EndStep(0.008);
  ASSERT_EQ(p.nodes().size(), 2u);
  EXPECT_EQ(p.nodes()[0].node, "Loop 'l'");
  EXPECT_EQ(p.nodes()[1].node, "Gemm 'g'");
  const std::string text = p.Format();
  EXPECT_NE(text.find("inside subgraphs"), std::string::npos) << text;
  EXPECT_NE(text.find("Loop 'l': 4.000 ms per step"), std::string::npos) << text;
  EXPECT_NE(text.find("Loop 'l' > If 'i': 1.000 ms per step"), std::string::npos) << text;
  // MatMul: 2 calls, 3 ms of the Loop's 4.
  const size_t matmul = text.find("    MatMul ");
  ASSERT_NE(matmul, std::string::npos) << text;
  const std::string line = text.substr(matmul, text.find('\n', matmul) - matmul);
  EXPECT_NE(line.find("2 calls"), std::string::npos) << line;
  EXPECT_NE(line.find("75.0%"), std::string::npos) << line;
  // The Loop's block comes before the If's (more time).
  EXPECT_LT(text.find("Loop 'l': "), text.find("Loop 'l' > If 'i': "));
}

TEST(StepProfile, SaysSoWhenNoStepWasProfiled) {
  TrainingGraphs graphs;
  StepProfile p(graphs);
  EXPECT_FALSE(p.BeginStep());
  EXPECT_TRUE(p.BeginStep());
  EXPECT_EQ(p.steps(), 0);
  EXPECT_EQ(p.Format(), "profile: no step profiled (the first 1 step warms up; train longer)\n");
}

}  // namespace
}  // namespace onnxamp::trainer
