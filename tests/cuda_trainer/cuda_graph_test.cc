// CUDA Graph capture of the training step (TrainerOptions::cuda_graph) against eager steps on the same GPU: the same
// model, data and options, the records, weights, optimizer state, scaler and buffers bit for bit; and the paths
// that do not replay (a partial last batch, micro-batches of different sizes, a failing capture). Each test skips
// without a CUDA device.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/trainer/train_test_util.h"
#include "trainer/cuda/cuda_training.h"
#include "trainer/trainer.h"

namespace onnxamp::trainer {
namespace {

#define REQUIRE_CUDA_TRAINING()                                                                   \
  do {                                                                                            \
    if (!::onnxamp::trainer::cuda::RegisterCudaTraining()) GTEST_SKIP() << "no CUDA device here"; \
  } while (0)

using test_util::LoadReference;

struct GraphRun {
  std::vector<StepRecord> steps;
  std::vector<ir::Tensor> values;
  TrainerState state;
  DeviceGraphStats stats;
};

// Trains to the end, draining every 5 steps; with `restore_at` > 0, restores the trainer's own state (synchronised
// from the device) after that step, as a resume does; after a drain at a step that `metrics` lists, reports that
// metric (a plateau schedule's evaluation).
GraphRun Train(const ir::Model& model, TrainerOptions o, const Dataset& data, CudaGraphMode mode,
               int64_t restore_at = 0, const std::map<int64_t, double>& metrics = {}) {
  o.device = exec::Device::kCuda;
  o.cuda_graph = mode;
  GraphRun r;
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
  EXPECT_TRUE(t.ok()) << t.status().message();
  if (!t.ok()) return r;
  while (!(*t)->Done()) {
    Status st = (*t)->StepAsync();
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st.ok()) return r;
    if ((*t)->steps_done() % 5 == 0 || (*t)->Done()) {
      StatusOr<std::vector<StepRecord>> recs = (*t)->Drain();
      EXPECT_TRUE(recs.ok()) << recs.status().message();
      if (!recs.ok()) return r;
      r.steps.insert(r.steps.end(), recs->begin(), recs->end());
      if (const auto m = metrics.find((*t)->steps_done()); m != metrics.end()) {
        StatusOr<bool> lowered = (*t)->ReportMetric(m->second);
        EXPECT_TRUE(lowered.ok()) << lowered.status().message();
      }
    }
    if ((*t)->steps_done() == restore_at) {
      StatusOr<std::vector<StepRecord>> recs = (*t)->Drain();
      EXPECT_TRUE(recs.ok()) << recs.status().message();
      if (!recs.ok()) return r;
      r.steps.insert(r.steps.end(), recs->begin(), recs->end());
      Status synced = (*t)->SyncFromDevice();
      EXPECT_TRUE(synced.ok()) << synced.message();
      Status restored = (*t)->Restore((*t)->State());
      EXPECT_TRUE(restored.ok()) << restored.message();
      if (!synced.ok() || !restored.ok()) return r;
    }
  }
  Status st = (*t)->SyncFromDevice();
  EXPECT_TRUE(st.ok()) << st.message();
  r.values = (*t)->TrainedValues();
  r.state = (*t)->State();
  r.stats = (*t)->device_graph_stats();
  return r;
}

bool SameBytes(const ir::Tensor& a, const ir::Tensor& b) {
  return a.dtype() == b.dtype() && a.dims() == b.dims() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
}

// Every record, weight, optimizer state buffer, committed buffer and the scaler, bit for bit.
void ExpectBitIdentical(const GraphRun& graph, const GraphRun& eager, const std::string& what) {
  ASSERT_EQ(graph.steps.size(), eager.steps.size()) << what;
  ASSERT_FALSE(eager.steps.empty()) << what;
  for (size_t i = 0; i < eager.steps.size(); ++i) {
    const StepRecord& g = graph.steps[i];
    const StepRecord& e = eager.steps[i];
    EXPECT_EQ(g.step, e.step) << what;
    EXPECT_EQ(std::memcmp(&g.loss, &e.loss, sizeof(double)), 0)
        << what << " step " << e.step << ": " << g.loss << " vs " << e.loss;
    EXPECT_EQ(g.loss_scale, e.loss_scale) << what << " step " << e.step;
    EXPECT_EQ(g.skipped, e.skipped) << what << " step " << e.step;
    EXPECT_EQ(g.lr, e.lr) << what << " step " << e.step;
    EXPECT_EQ(g.grad_norm, e.grad_norm) << what << " step " << e.step;
    EXPECT_EQ(g.samples, e.samples) << what << " step " << e.step;
  }
  ASSERT_EQ(graph.values.size(), eager.values.size()) << what;
  for (size_t i = 0; i < eager.values.size(); ++i) {
    EXPECT_TRUE(SameBytes(graph.values[i], eager.values[i])) << what << ": " << eager.values[i].name();
  }
  EXPECT_EQ(graph.state.steps_done, eager.state.steps_done) << what;
  EXPECT_EQ(graph.state.steps_taken, eager.state.steps_taken) << what;
  EXPECT_EQ(graph.state.skipped, eager.state.skipped) << what;
  EXPECT_EQ(graph.state.rng_step, eager.state.rng_step) << what;
  ASSERT_EQ(graph.state.optimizer_state.size(), eager.state.optimizer_state.size()) << what;
  for (size_t k = 0; k < eager.state.optimizer_state.size(); ++k) {
    const auto& [name, tensors] = eager.state.optimizer_state[k];
    EXPECT_EQ(graph.state.optimizer_state[k].first, name) << what;
    ASSERT_EQ(graph.state.optimizer_state[k].second.size(), tensors.size()) << what << ": " << name;
    for (size_t i = 0; i < tensors.size(); ++i) {
      EXPECT_TRUE(SameBytes(graph.state.optimizer_state[k].second[i], tensors[i]))
          << what << ": " << name << " of " << tensors[i].name();
    }
  }
  ASSERT_EQ(graph.state.buffers.size(), eager.state.buffers.size()) << what;
  for (size_t b = 0; b < eager.state.buffers.size(); ++b) {
    EXPECT_TRUE(SameBytes(graph.state.buffers[b], eager.state.buffers[b]))
        << what << ": " << eager.state.buffers[b].name();
  }
  ASSERT_EQ(graph.state.scaler.has_value(), eager.state.scaler.has_value()) << what;
  if (eager.state.scaler) {
    EXPECT_EQ(graph.state.scaler->scale, eager.state.scaler->scale) << what;
    EXPECT_EQ(graph.state.scaler->growth_tracker, eager.state.scaler->growth_tracker) << what;
  }
}

// Whether some skipped steps were replayed ones (the eager steps come first).
bool SkippedInAReplay(const GraphRun& graph) {
  for (const StepRecord& r : graph.steps) {
    if (r.skipped && r.step > graph.stats.eager_steps) return true;
  }
  return false;
}

// mlp.onnx with a Dropout (opset 17: the training graph sets training_mode) after its first Relu.
ir::Model MlpWithDropout() {
  ir::Model m = LoadReference("mlp.onnx");
  ir::Graph& g = *m.graph;
  ir::Node* relu = nullptr;
  for (ir::Node* n : g.nodes()) {
    if (n->op_type() == "Relu") {
      relu = n;
      break;
    }
  }
  EXPECT_NE(relu, nullptr) << "mlp.onnx has no Relu";
  if (!relu) return m;
  ir::Value* hidden = relu->output(0);
  ir::Value* dropped = g.CreateValue(g.UniqueName(hidden->name() + "_dropped"));
  dropped->set_type(hidden->type());
  const std::vector<ir::Use> uses = hidden->uses();
  for (const ir::Use& u : uses) u.node->SetInput(static_cast<size_t>(u.index), dropped);
  ir::Node* after = nullptr;
  bool seen = false;
  for (ir::Node* n : g.nodes()) {
    if (seen) {
      after = n;
      break;
    }
    seen = n == relu;
  }
  g.InsertNode(after, "Dropout", {hidden}, {dropped}, "hidden_dropout");
  return m;
}

// Makes every capture fail while alive.
class FailingCaptures {
 public:
  FailingCaptures() { cuda::FailCudaGraphCapturesForTesting(true); }
  ~FailingCaptures() { cuda::FailCudaGraphCapturesForTesting(false); }
};

TEST(CudaGraphTest, MlpStepsReplayBitIdenticallyUnderASchedule) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("mlp.onnx");
  // 192 samples in batches of 16: no partial batch, so every step after the warm-up replays.
  const Dataset data = test_util::RandomClassData(model, {256}, 192, 10, 11);
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdamW}) {
    TrainerOptions o;
    o.optimizer = kind;
    o.sgd.momentum = 0.9;
    o.schedule.kind = LrScheduleKind::kCosine;  // the learning rate changes every step
    o.schedule.base_lr = 0.01;
    o.schedule.warmup_steps = 3;
    o.batch_size = 16;
    o.steps = 30;
    o.threads = 1;
    const std::string what = kind == OptimizerKind::kSgd ? "sgd" : "adamw";
    const GraphRun eager = Train(model, o, data, CudaGraphMode::kOff);
    // The comparison below needs deterministic kernels: two eager runs agree bit for bit.
    ExpectBitIdentical(Train(model, o, data, CudaGraphMode::kOff), eager, what + " eager twice");
    const GraphRun graph = Train(model, o, data, CudaGraphMode::kOn);
    ExpectBitIdentical(graph, eager, what + " captured");
    EXPECT_EQ(graph.stats.failed_captures, 0) << what << ": " << graph.stats.last_failure;
    EXPECT_EQ(graph.stats.captures, 1) << what;
    EXPECT_EQ(graph.stats.eager_steps, 2) << what << " (the planning step and one warm-up step)";
    EXPECT_EQ(graph.stats.replays, 28) << what;
    EXPECT_EQ(eager.stats.captures + eager.stats.replays, 0) << what;
  }
}

// A plateau schedule's reductions rebuild the optimizer's scalar table (a new generation): the step graph is captured
// again after each, and the run stays the eager run's, bit for bit.
TEST(CudaGraphTest, PlateauReductionsRecaptureAndMatchEager) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("mlp.onnx");
  const Dataset data = test_util::RandomClassData(model, {256}, 192, 10, 14);
  TrainerOptions o;
  o.optimizer = OptimizerKind::kAdamW;
  o.schedule.kind = LrScheduleKind::kPlateau;
  o.schedule.base_lr = 0.01;
  o.schedule.patience = 0;
  o.schedule.gamma = 0.5;
  o.batch_size = 16;
  o.steps = 25;
  o.threads = 1;
  const std::map<int64_t, double> metrics = {{5, 1.0}, {10, 2.0}, {15, 3.0}};  // reductions after steps 10 and 15
  const GraphRun eager = Train(model, o, data, CudaGraphMode::kOff, 0, metrics);
  const GraphRun graph = Train(model, o, data, CudaGraphMode::kOn, 0, metrics);
  ExpectBitIdentical(graph, eager, "plateau");
  EXPECT_EQ(graph.stats.failed_captures, 0) << graph.stats.last_failure;
  EXPECT_EQ(graph.stats.captures, 3);
  ASSERT_EQ(eager.steps.size(), 25u);
  EXPECT_EQ(eager.steps[10].lr, 0.005);
  EXPECT_EQ(eager.steps[24].lr, 0.0025);
}

TEST(CudaGraphTest, DropoutMasksChangeWithEveryReplayAndMatchEager) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = MlpWithDropout();
  const Dataset data = test_util::RandomClassData(model, {256}, 64, 10, 12);
  TrainerOptions o;
  o.optimizer = OptimizerKind::kSgd;
  o.schedule.base_lr = 0;  // the weights stay: a step's loss changes only with its Dropout mask
  o.batch_size = 64;       // the same batch every step
  o.shuffle = false;
  o.steps = 12;
  o.threads = 1;
  const GraphRun eager = Train(model, o, data, CudaGraphMode::kOff);
  const GraphRun graph = Train(model, o, data, CudaGraphMode::kOn);
  ExpectBitIdentical(graph, eager, "dropout");
  EXPECT_EQ(graph.stats.failed_captures, 0) << graph.stats.last_failure;
  EXPECT_GE(graph.stats.replays, 9);
  std::set<double> losses;
  for (size_t i = static_cast<size_t>(graph.stats.eager_steps); i < graph.steps.size(); ++i) {
    losses.insert(graph.steps[i].loss);
  }
  EXPECT_EQ(losses.size(), graph.steps.size() - static_cast<size_t>(graph.stats.eager_steps))
      << "replayed steps drew the same Dropout mask";
}

TEST(CudaGraphTest, BatchNormUnderFp16AmpWithAGrowingScaleMatchesEager) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("cnn.onnx");
  const Dataset data = test_util::RandomClassData(model, {3, 32, 32}, 64, 10, 13);
  TrainerOptions o;
  o.graph.amp = DType::kFloat16;
  o.optimizer = OptimizerKind::kSgd;
  o.sgd.momentum = 0.9;
  o.schedule.base_lr = 0.01;
  o.batch_size = 16;
  o.steps = 12;
  o.threads = 1;
  o.scaler.growth_interval = 3;  // the scale grows during the replays
  const GraphRun eager = Train(model, o, data, CudaGraphMode::kOff);
  const GraphRun graph = Train(model, o, data, CudaGraphMode::kOn);
  ExpectBitIdentical(graph, eager, "cnn fp16");
  EXPECT_FALSE(eager.state.buffers.empty()) << "cnn.onnx has BatchNormalization statistics";
  EXPECT_EQ(graph.stats.failed_captures, 0) << graph.stats.last_failure;
  EXPECT_GE(graph.stats.replays, 9);
  EXPECT_NE(graph.steps.front().loss_scale, graph.steps.back().loss_scale);
}

TEST(CudaGraphTest, OverflowSkipsInReplayedStepsMatchEager) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("mlp.onnx");
  const Dataset data = test_util::RandomClassData(model, {256}, 96, 10, 14);
  TrainerOptions o;
  o.graph.amp = DType::kFloat16;
  o.graph.loss.kind = LossKind::kCrossEntropy;
  o.optimizer = OptimizerKind::kAdam;
  o.batch_size = 16;
  o.steps = 40;
  o.threads = 1;
  o.scaler.init_scale = 1073741824.0;  // 2^30: FP16 gradients overflow until the scale has backed off
  const GraphRun eager = Train(model, o, data, CudaGraphMode::kOff);
  const GraphRun graph = Train(model, o, data, CudaGraphMode::kOn);
  ExpectBitIdentical(graph, eager, "overflow");
  EXPECT_EQ(graph.stats.failed_captures, 0) << graph.stats.last_failure;
  EXPECT_TRUE(SkippedInAReplay(graph));
  EXPECT_GT(graph.state.steps_taken, 0);
}

TEST(CudaGraphTest, APartialLastBatchRunsEagerlyAndTheGraphIsRecaptured) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("mlp.onnx");
  // 40 samples in batches of 16: 16, 16, 8 every epoch.
  const Dataset data = test_util::RandomClassData(model, {256}, 40, 10, 15);
  TrainerOptions o;
  o.optimizer = OptimizerKind::kAdamW;
  o.batch_size = 16;
  o.steps = 12;
  o.threads = 1;
  const GraphRun eager = Train(model, o, data, CudaGraphMode::kOff);
  const GraphRun graph = Train(model, o, data, CudaGraphMode::kAuto);
  ExpectBitIdentical(graph, eager, "partial batches");
  EXPECT_EQ(graph.stats.failed_captures, 0) << graph.stats.last_failure;
  EXPECT_GE(graph.stats.captures, 2);
  EXPECT_GE(graph.stats.eager_steps, 4);  // every partial batch at least
  EXPECT_EQ(graph.stats.eager_steps + graph.stats.replays, 12);
}

// A restore rewrites the optimizer's counters and rebases its scalar table, which the captured step holds: the next
// step re-captures at once (no eager warm-up: the shapes did not change).
TEST(CudaGraphTest, ARestoreMidRunRecapturesAndMatchesEager) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("mlp.onnx");
  const Dataset data = test_util::RandomClassData(model, {256}, 192, 10, 18);
  TrainerOptions o;
  o.graph.amp = DType::kFloat16;
  o.optimizer = OptimizerKind::kAdamW;
  o.schedule.kind = LrScheduleKind::kStep;
  o.schedule.step_size = 4;
  o.batch_size = 16;
  o.steps = 14;
  o.threads = 1;
  const GraphRun eager = Train(model, o, data, CudaGraphMode::kOff, /*restore_at=*/7);
  const GraphRun graph = Train(model, o, data, CudaGraphMode::kOn, /*restore_at=*/7);
  ExpectBitIdentical(graph, eager, "restore");
  EXPECT_EQ(graph.stats.failed_captures, 0) << graph.stats.last_failure;
  EXPECT_EQ(graph.stats.captures, 2);
  EXPECT_EQ(graph.stats.eager_steps, 2);
  EXPECT_EQ(graph.stats.replays, 12);
}

// Gradient accumulation: one captured micro-batch launched once per micro-batch (its rows, RNG step and first flag
// written before each launch), then the captured optimizer step.
TEST(CudaGraphTest, AccumulatedStepsReplayBitIdentically) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("digits_mlp.onnx");
  // 96 samples in micro-batches of 8, 2 per step: 6 whole steps per epoch.
  const Dataset data = test_util::RandomClassData(model, {64}, 96, 10, 16);
  TrainerOptions o;
  o.optimizer = OptimizerKind::kAdamW;
  o.schedule.kind = LrScheduleKind::kCosine;
  o.schedule.base_lr = 0.01;
  o.accumulate = 2;
  o.batch_size = 8;
  o.steps = 14;
  o.threads = 1;
  o.clip_norm = 1.0;
  const GraphRun eager = Train(model, o, data, CudaGraphMode::kOff);
  const GraphRun graph = Train(model, o, data, CudaGraphMode::kOn);
  ExpectBitIdentical(graph, eager, "accumulate");
  EXPECT_EQ(graph.stats.failed_captures, 0) << graph.stats.last_failure;
  EXPECT_EQ(graph.stats.captures, 1);
  EXPECT_EQ(graph.stats.eager_steps, 2);
  EXPECT_EQ(graph.stats.replays, 12);
  for (const StepRecord& r : eager.steps) EXPECT_EQ(r.samples, 16) << "step " << r.step;
}

// Each micro-batch's BatchNormalization statistics feed the next one's run and are committed when the step is taken;
// each micro-batch draws its own Dropout mask; FP16 overflow in one micro-batch skips the step.
TEST(CudaGraphTest, AccumulationChainsBuffersDrawsMasksAndSkipsLikeEager) {
  REQUIRE_CUDA_TRAINING();
  {
    const ir::Model model = LoadReference("cnn.onnx");
    const Dataset data = test_util::RandomClassData(model, {3, 32, 32}, 48, 10, 19);
    TrainerOptions o;
    o.graph.amp = DType::kFloat16;
    o.optimizer = OptimizerKind::kSgd;
    o.sgd.momentum = 0.9;
    o.schedule.base_lr = 0.01;
    o.accumulate = 3;
    o.batch_size = 8;
    o.steps = 10;
    o.threads = 1;
    o.scaler.growth_interval = 2;
    const GraphRun eager = Train(model, o, data, CudaGraphMode::kOff);
    const GraphRun graph = Train(model, o, data, CudaGraphMode::kOn);
    ExpectBitIdentical(graph, eager, "cnn fp16 accumulate");
    EXPECT_FALSE(eager.state.buffers.empty()) << "cnn.onnx has BatchNormalization statistics";
    EXPECT_EQ(graph.stats.failed_captures, 0) << graph.stats.last_failure;
    EXPECT_GE(graph.stats.replays, 7);
  }
  {
    const ir::Model model = MlpWithDropout();
    const Dataset data = test_util::RandomClassData(model, {256}, 32, 10, 20);
    TrainerOptions o;
    o.optimizer = OptimizerKind::kSgd;
    o.schedule.base_lr = 0;  // the weights stay: a step's loss changes only with its micro-batches' masks
    o.accumulate = 2;
    o.batch_size = 32;  // the same batch in every micro-batch
    o.shuffle = false;
    o.steps = 10;
    o.threads = 1;
    const GraphRun eager = Train(model, o, data, CudaGraphMode::kOff);
    const GraphRun graph = Train(model, o, data, CudaGraphMode::kOn);
    ExpectBitIdentical(graph, eager, "dropout accumulate");
    EXPECT_EQ(graph.stats.failed_captures, 0) << graph.stats.last_failure;
    std::set<double> losses;
    for (const StepRecord& r : graph.steps) losses.insert(r.loss);
    EXPECT_EQ(losses.size(), graph.steps.size()) << "steps drew the same Dropout masks";
  }
  {
    const ir::Model model = LoadReference("mlp.onnx");
    const Dataset data = test_util::RandomClassData(model, {256}, 96, 10, 21);
    TrainerOptions o;
    o.graph.amp = DType::kFloat16;
    o.graph.loss.kind = LossKind::kCrossEntropy;
    o.optimizer = OptimizerKind::kAdam;
    o.accumulate = 2;
    o.batch_size = 16;
    o.steps = 30;
    o.threads = 1;
    o.scaler.init_scale = 1073741824.0;  // 2^30: FP16 gradients overflow until the scale has backed off
    const GraphRun eager = Train(model, o, data, CudaGraphMode::kOff);
    const GraphRun graph = Train(model, o, data, CudaGraphMode::kOn);
    ExpectBitIdentical(graph, eager, "overflow accumulate");
    EXPECT_EQ(graph.stats.failed_captures, 0) << graph.stats.last_failure;
    EXPECT_TRUE(SkippedInAReplay(graph));
    EXPECT_GT(graph.state.steps_taken, 0);
  }
}

// A step whose micro-batches differ in size (an epoch's partial last micro-batch) runs eagerly; the whole steps
// around it capture and replay.
TEST(CudaGraphTest, MicroBatchesOfDifferentSizesRunEagerly) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("mlp.onnx");
  // 104 samples in micro-batches of 16: six of 16 and one of 8 every epoch, 2 per step: steps 1-3 whole, step 4
  // mixed (8 then 16), steps 5-6 whole, step 7 mixed, ...
  const Dataset data = test_util::RandomClassData(model, {256}, 104, 10, 22);
  TrainerOptions o;
  o.optimizer = OptimizerKind::kAdamW;
  o.accumulate = 2;
  o.batch_size = 16;
  o.steps = 12;
  o.threads = 1;
  const GraphRun eager = Train(model, o, data, CudaGraphMode::kOff);
  const GraphRun graph = Train(model, o, data, CudaGraphMode::kOn);
  ExpectBitIdentical(graph, eager, "mixed micro-batches");
  EXPECT_EQ(graph.stats.failed_captures, 0) << graph.stats.last_failure;
  EXPECT_GT(graph.stats.eager_steps, 3);
  EXPECT_GE(graph.stats.replays, 1);
  EXPECT_EQ(graph.stats.eager_steps + graph.stats.replays, 12);
}

TEST(CudaGraphTest, AFailingCaptureFallsBackToEagerSteps) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("mlp.onnx");
  const Dataset data = test_util::RandomClassData(model, {256}, 192, 10, 17);
  TrainerOptions o;
  o.optimizer = OptimizerKind::kSgd;
  o.sgd.momentum = 0.9;
  o.schedule.base_lr = 0.01;
  o.batch_size = 16;
  o.steps = 12;
  o.threads = 1;
  const GraphRun eager = Train(model, o, data, CudaGraphMode::kOff);
  GraphRun graph;
  {
    FailingCaptures failing;
    graph = Train(model, o, data, CudaGraphMode::kOn);
  }
  ExpectBitIdentical(graph, eager, "failing captures");
  EXPECT_EQ(graph.stats.captures, 0);
  EXPECT_EQ(graph.stats.replays, 0);
  EXPECT_EQ(graph.stats.failed_captures, StepGraphPolicy::kDefaultMaxFailures);
  EXPECT_EQ(graph.stats.eager_steps, 12);
  EXPECT_FALSE(graph.stats.last_failure.empty());
  // With captures working again, a new trainer captures.
  const GraphRun after = Train(model, o, data, CudaGraphMode::kOn);
  ExpectBitIdentical(after, eager, "after the failing captures");
  EXPECT_EQ(after.stats.captures, 1);
}

}  // namespace
}  // namespace onnxamp::trainer
