// Training on CUDA against the CPU trainer: the same model, data, batches and options on both, step by step. Each
// test skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "importer/model_io.h"
#include "tests/trainer/train_test_util.h"
#include "trainer/bn_update.h"
#include "trainer/cuda/cuda_training.h"
#include "trainer/trainer.h"

namespace onnxamp::trainer {
namespace {

#define REQUIRE_CUDA_TRAINING()                                                                   \
  do {                                                                                            \
    if (!::onnxamp::trainer::cuda::RegisterCudaTraining()) GTEST_SKIP() << "no CUDA device here"; \
  } while (0)

using test_util::LoadReference;

Dataset Data(const ir::Model& model, std::vector<int64_t> sample_dims, int64_t n, int64_t classes, uint32_t seed) {
  return test_util::RandomClassData(model, std::move(sample_dims), n, classes, seed);
}

// 64 sequences of 32 tokens of transformer.onnx with a class label per position.
StatusOr<Dataset> TokenData(const ir::Model& model) {
  ir::Tensor ids(DType::kInt64, {64, 32});
  ir::Tensor labels(DType::kInt64, {64, 32});
  for (int64_t i = 0; i < 64 * 32; ++i) {
    ids.mutable_values<int64_t>()[i] = (i * 37) % 128;
    labels.mutable_values<int64_t>()[i] = (i * 11 + 3) % 128;
  }
  ids.set_name("input_ids");
  labels.set_name("labels");
  ONNXAMP_ASSIGN_OR_RETURN(Dataset raw, Dataset::FromTensors({ids, labels}, "tokens"));
  BindOptions bind;
  bind.labels.array = "labels";
  bind.labels.kind = LabelKind::kClassIndices;
  return raw.Bind(DataInputs(*model.graph), bind);
}

struct TrainRun {
  std::vector<StepRecord> steps;
  std::vector<ir::Tensor> values;
  TrainerState state;
};

// With `metrics`, drains after each step it lists and reports that metric (a plateau schedule's evaluation).
TrainRun Train(const ir::Model& model, TrainerOptions o, const Dataset& data, exec::Device device,
               std::unique_ptr<Trainer>* keep = nullptr, const std::map<int64_t, double>& metrics = {}) {
  o.device = device;
  TrainRun r;
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
  EXPECT_TRUE(t.ok()) << t.status().message();
  if (!t.ok()) return r;
  // Queue everything, drain in a few chunks (the device path), as the CLI does.
  while (!(*t)->Done()) {
    Status st = (*t)->StepAsync();
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st.ok()) return r;
    const auto metric = metrics.find((*t)->steps_done());
    if ((*t)->steps_done() % 7 == 0 || (*t)->Done() || metric != metrics.end()) {
      StatusOr<std::vector<StepRecord>> recs = (*t)->Drain();
      EXPECT_TRUE(recs.ok()) << recs.status().message();
      if (!recs.ok()) return r;
      r.steps.insert(r.steps.end(), recs->begin(), recs->end());
    }
    if (metric != metrics.end()) {
      StatusOr<bool> lowered = (*t)->ReportMetric(metric->second);
      EXPECT_TRUE(lowered.ok()) << lowered.status().message();
    }
  }
  Status st = (*t)->SyncFromDevice();
  EXPECT_TRUE(st.ok()) << st.message();
  r.values = (*t)->TrainedValues();
  r.state = (*t)->State();
  if (keep) *keep = std::move(t).value();
  return r;
}

double MaxRelDiff(const ir::Tensor& a, const ir::Tensor& b) {
  double num = 0, den = 0;
  const auto x = a.values<float>();
  const auto y = b.values<float>();
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(x[i]) - y[i]));
    den = std::max(den, std::fabs(static_cast<double>(y[i])));
  }
  return den > 0 ? num / den : num;
}

void ExpectSameRun(const TrainRun& cuda, const TrainRun& cpu, double loss_rel, double value_rel,
                   const std::string& what) {
  ASSERT_EQ(cuda.steps.size(), cpu.steps.size()) << what;
  for (size_t i = 0; i < cpu.steps.size(); ++i) {
    const StepRecord& g = cuda.steps[i];
    const StepRecord& c = cpu.steps[i];
    EXPECT_EQ(g.step, c.step) << what;
    EXPECT_EQ(g.skipped, c.skipped) << what << " step " << c.step;
    EXPECT_EQ(g.loss_scale, c.loss_scale) << what << " step " << c.step;
    EXPECT_EQ(g.samples, c.samples) << what << " step " << c.step;
    EXPECT_DOUBLE_EQ(g.lr, c.lr) << what << " step " << c.step;
    if (std::isfinite(c.loss)) {
      EXPECT_NEAR(g.loss, c.loss, loss_rel * std::max(1.0, std::fabs(c.loss))) << what << " step " << c.step;
    }
  }
  ASSERT_EQ(cuda.values.size(), cpu.values.size()) << what;
  for (size_t i = 0; i < cpu.values.size(); ++i) {
    EXPECT_EQ(cuda.values[i].name(), cpu.values[i].name()) << what;
    EXPECT_LE(MaxRelDiff(cuda.values[i], cpu.values[i]), value_rel) << what << ": " << cpu.values[i].name();
  }
  EXPECT_EQ(cuda.state.steps_taken, cpu.state.steps_taken) << what;
  EXPECT_EQ(cuda.state.skipped, cpu.state.skipped) << what;
}

TEST(CudaTrainerTest, Fp32MlpMatchesTheCpuStepByStep) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("mlp.onnx");
  const Dataset data = Data(model, {256}, 200, 10, 1);
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdamW}) {
    TrainerOptions o;
    o.optimizer = kind;
    o.sgd.momentum = 0.9;
    o.schedule.base_lr = 0.01;
    o.batch_size = 16;
    o.steps = 30;
    o.threads = 1;
    const TrainRun cpu = Train(model, o, data, exec::Device::kCpu);
    const TrainRun gpu = Train(model, o, data, exec::Device::kCuda);
    // FP32 GEMMs sum in another order on the GPU: the runs drift apart by rounding only.
    ExpectSameRun(gpu, cpu, 1e-4, 1e-3, kind == OptimizerKind::kSgd ? "sgd" : "adamw");
  }
}

// cnn.onnx under FP16 AMP with SGD and momentum, 12 steps of 16 samples.
TrainerOptions CnnFp16Options() {
  TrainerOptions o;
  o.graph.amp = DType::kFloat16;
  o.optimizer = OptimizerKind::kSgd;
  o.sgd.momentum = 0.9;
  o.schedule.base_lr = 0.01;
  o.batch_size = 16;
  o.steps = 12;
  o.threads = 1;
  return o;
}

TEST(CudaTrainerTest, Fp16AmpCnnTracksTheCpuWithBatchNormAndLossScaling) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("cnn.onnx");
  const Dataset data = Data(model, {3, 32, 32}, 64, 10, 2);
  TrainerOptions o = CnnFp16Options();
  o.scaler.growth_interval = 4;  // the scale grows during the run
  const TrainRun cpu = Train(model, o, data, exec::Device::kCpu);
  const TrainRun gpu = Train(model, o, data, exec::Device::kCuda);
  ExpectSameRun(gpu, cpu, 1e-2, 5e-2, "cnn fp16");
  // The running statistics were committed on the device.
  ASSERT_EQ(gpu.state.buffers.size(), cpu.state.buffers.size());
  for (size_t b = 0; b < cpu.state.buffers.size(); ++b) {
    EXPECT_LE(MaxRelDiff(gpu.state.buffers[b], cpu.state.buffers[b]), 5e-2) << cpu.state.buffers[b].name();
  }
}

TEST(CudaTrainerTest, OverflowSkipsTheSameStepsAsTheCpu) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("mlp.onnx");
  const Dataset data = Data(model, {256}, 96, 10, 3);
  TrainerOptions o;
  o.graph.amp = DType::kFloat16;
  o.graph.loss.kind = LossKind::kCrossEntropy;
  o.optimizer = OptimizerKind::kAdam;
  o.batch_size = 16;
  o.steps = 40;
  o.threads = 1;
  o.scaler.init_scale = 1073741824.0;  // 2^30: FP16 gradients overflow until the scale has backed off far enough
  const TrainRun cpu = Train(model, o, data, exec::Device::kCpu);
  const TrainRun gpu = Train(model, o, data, exec::Device::kCuda);
  ASSERT_FALSE(cpu.steps.empty());
  EXPECT_TRUE(cpu.steps.front().skipped);
  EXPECT_GT(cpu.state.steps_taken, 0);
  ExpectSameRun(gpu, cpu, 1e-2, 5e-2, "overflow");
}

TEST(CudaTrainerTest, AccumulationAndClippingMatchTheCpu) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 120, 10, 4);
  TrainerOptions o;
  o.optimizer = OptimizerKind::kAdamW;
  o.accumulate = 3;
  o.clip_norm = 0.5;
  o.batch_size = 8;
  o.steps = 10;
  o.threads = 1;
  const TrainRun cpu = Train(model, o, data, exec::Device::kCpu);
  const TrainRun gpu = Train(model, o, data, exec::Device::kCuda);
  ExpectSameRun(gpu, cpu, 1e-4, 1e-3, "accumulate + clip");
  for (size_t i = 0; i < cpu.steps.size(); ++i) {
    EXPECT_NEAR(gpu.steps[i].grad_norm, cpu.steps[i].grad_norm, 1e-3 * std::max(1.0, cpu.steps[i].grad_norm));
  }
}

// Parameter groups: biases without weight decay and the last layer at 10x the rate train as on the CPU, and
// differently from the ungrouped run.
TEST(CudaTrainerTest, ParameterGroupsMatchTheCpu) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 120, 10, 5);
  TrainerOptions o;
  o.optimizer = OptimizerKind::kAdamW;
  o.adam.weight_decay = 0.1;
  o.schedule.base_lr = 0.01;
  o.batch_size = 8;
  o.steps = 10;
  o.threads = 1;
  const TrainRun plain = Train(model, o, data, exec::Device::kCuda);
  o.param_groups.no_decay_1d = true;
  o.param_groups.lr_scale = {{"fc2", 10.0}};
  const TrainRun cpu = Train(model, o, data, exec::Device::kCpu);
  const TrainRun gpu = Train(model, o, data, exec::Device::kCuda);
  ExpectSameRun(gpu, cpu, 1e-4, 1e-3, "parameter groups");
  ASSERT_EQ(plain.values.size(), gpu.values.size());
  for (size_t i = 0; i < gpu.values.size(); ++i) {
    const std::string& name = gpu.values[i].name();
    if (name == "fc2.weight" || name == "fc1.bias") {
      EXPECT_GT(MaxRelDiff(gpu.values[i], plain.values[i]), 1e-3) << name;
    }
  }
}

// RMSprop (momentum, centered) and Lion under FP16 AMP: the fused optimizer's kernels train digits_mlp as the CPU
// optimizers do, and differently from each other.
TEST(CudaTrainerTest, RmspropAndLionMatchTheCpu) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 120, 10, 7);
  TrainerOptions o;
  o.graph.amp = DType::kFloat16;
  o.batch_size = 8;
  o.steps = 10;
  o.threads = 1;
  o.optimizer = OptimizerKind::kRmsprop;
  o.rmsprop.momentum = 0.5;
  o.rmsprop.centered = true;
  o.rmsprop.weight_decay = 1e-3;
  const TrainRun rmsprop_cpu = Train(model, o, data, exec::Device::kCpu);
  const TrainRun rmsprop_gpu = Train(model, o, data, exec::Device::kCuda);
  ExpectSameRun(rmsprop_gpu, rmsprop_cpu, 1e-2, 5e-2, "rmsprop fp16");
  o.optimizer = OptimizerKind::kLion;
  o.lion.weight_decay = 0.1;
  o.schedule.base_lr = 3e-4;
  const TrainRun lion_cpu = Train(model, o, data, exec::Device::kCpu);
  const TrainRun lion_gpu = Train(model, o, data, exec::Device::kCuda);
  ExpectSameRun(lion_gpu, lion_cpu, 1e-2, 5e-2, "lion fp16");
  ASSERT_EQ(lion_gpu.values.size(), rmsprop_gpu.values.size());
  EXPECT_GT(MaxRelDiff(lion_gpu.values[0], rmsprop_gpu.values[0]), 1e-3);
}

// The plateau schedule on the device: a reduction reported between steps (the fused optimizer's scalar table rebuilt
// from the device's step count) gives the steps after it the lowered rate, as on the CPU; the state restores.
TEST(CudaTrainerTest, PlateauReductionMatchesTheCpu) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 120, 10, 8);
  TrainerOptions o;
  o.optimizer = OptimizerKind::kAdamW;
  o.schedule.kind = LrScheduleKind::kPlateau;
  o.schedule.base_lr = 0.01;
  o.schedule.patience = 0;
  o.schedule.gamma = 0.5;
  o.batch_size = 8;
  o.steps = 12;
  o.threads = 1;
  // Metrics 1, 2 (no better: halve), 3 (halve again), after steps 4, 8 and 10.
  const std::map<int64_t, double> metrics = {{4, 1.0}, {8, 2.0}, {10, 3.0}};
  const TrainRun cpu = Train(model, o, data, exec::Device::kCpu, nullptr, metrics);
  const TrainRun gpu = Train(model, o, data, exec::Device::kCuda, nullptr, metrics);
  ExpectSameRun(gpu, cpu, 1e-4, 1e-3, "plateau");
  ASSERT_EQ(gpu.steps.size(), 12u);
  for (size_t i = 0; i < gpu.steps.size(); ++i) {
    EXPECT_EQ(gpu.steps[i].lr, i < 8 ? 0.01 : i < 10 ? 0.005 : 0.0025) << "step " << i + 1;
  }
  ASSERT_TRUE(gpu.state.plateau.has_value());
  EXPECT_EQ(gpu.state.plateau->lr, 0.0025);
  EXPECT_EQ(gpu.state.plateau->reductions, 2);
}

// --ema on the device: the averages of the parameters and of BatchNorm's running statistics (with skipped FP16
// steps and the warm-up) track the CPU's, the averaged model evaluates as on the CPU, and the evaluation gives the
// live weights back unchanged.
// LoRA on the transformer under FP16 AMP: only the adapters (and the head) train, the frozen weights read as FP16
// constants; the same run as the CPU's, and under a captured CUDA Graph as eager; and on the cnn's Conv weights.
TEST(CudaTrainerTest, LoraMatchesTheCpu) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("transformer.onnx");
  const StatusOr<Dataset> data = TokenData(model);
  ASSERT_TRUE(data.ok()) << data.status().message();
  TrainerOptions o;
  o.graph.amp = DType::kFloat16;
  o.graph.loss.class_axis = -1;
  o.graph.lora.rank = 8;
  o.graph.lora.alpha = 16;
  o.graph.lora.targets = "attn\\.(q|v)\\.weight|mlp\\.fc\\d\\.weight";
  o.graph.lora.train = "lm_head";
  o.schedule.base_lr = 1e-3;
  o.batch_size = 16;
  o.steps = 12;
  o.threads = 1;
  std::unique_ptr<Trainer> cpu_t, gpu_t;
  const TrainRun cpu = Train(model, o, *data, exec::Device::kCpu, &cpu_t);
  const TrainRun gpu = Train(model, o, *data, exec::Device::kCuda, &gpu_t);
  ASSERT_TRUE(cpu_t && gpu_t);
  EXPECT_FALSE(gpu_t->graphs().lora.empty());
  ExpectSameRun(gpu, cpu, 1e-2, 5e-2, "transformer fp16 lora");
  o.cuda_graph = CudaGraphMode::kOn;
  std::unique_ptr<Trainer> graph_t;
  const TrainRun graph = Train(model, o, *data, exec::Device::kCuda, &graph_t);
  ASSERT_TRUE(graph_t);
  ExpectSameRun(graph, gpu, 0, 0, "transformer fp16 lora, captured");
  EXPECT_GT(graph_t->device_graph_stats().replays, 0) << graph_t->device_graph_stats().last_failure;

  // Conv adapters under FP16 AMP (channels-last convolutions on the GPU) as on the CPU.
  const ir::Model cnn = LoadReference("cnn.onnx");
  const Dataset images = Data(cnn, {3, 32, 32}, 48, 10, 10);
  TrainerOptions c = CnnFp16Options();
  c.graph.lora.rank = 4;
  c.graph.lora.targets = "conv";
  c.graph.lora.train = "^fc\\.";
  const TrainRun cpu_conv = Train(cnn, c, images, exec::Device::kCpu);
  const TrainRun gpu_conv = Train(cnn, c, images, exec::Device::kCuda);
  ExpectSameRun(gpu_conv, cpu_conv, 1e-2, 5e-2, "cnn fp16 conv lora");
}

// --recompute on the GPU: the same steps and weights bit for bit as without it (cnn FP16 with BatchNormalization,
// eager and captured, with a lower peak of device memory at batch 128; the transformer in BF16 with its GELU, two
// segments and cheap).
TEST(CudaTrainerTest, RecomputeComputesTheSameBitsInLessMemory) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model cnn = LoadReference("cnn.onnx");
  const Dataset images = Data(cnn, {3, 32, 32}, 256, 10, 12);
  TrainerOptions c = CnnFp16Options();
  c.batch_size = 128;
  c.steps = 4;
  // Each trainer alone on the device, its peak read before the next one starts.
  uint64_t peak[2] = {0, 0};
  TrainRun runs[2];
  for (int on = 0; on < 2; ++on) {
    c.graph.recompute.segments = on ? kRecomputeAuto : 0;
    c.graph.recompute.batch = c.batch_size;
    std::unique_ptr<Trainer> t;
    runs[on] = Train(cnn, c, images, exec::Device::kCuda, &t);
    ASSERT_TRUE(t);
    if (on) {
      EXPECT_GE(t->recompute_report().segments, 2) << t->recompute_report().why_not;
    }
    peak[on] = t->peak_device_bytes();
  }
  ExpectSameRun(runs[1], runs[0], 0, 0, "cnn fp16 recompute");
  int taken = 0;
  for (const StepRecord& r : runs[0].steps) taken += !r.skipped;
  EXPECT_GT(taken, 0);  // the weights moved: their bits compare gradients
  EXPECT_LT(peak[1], peak[0]);
  c.cuda_graph = CudaGraphMode::kOn;
  std::unique_ptr<Trainer> graph_t;
  const TrainRun graph = Train(cnn, c, images, exec::Device::kCuda, &graph_t);
  ASSERT_TRUE(graph_t);
  ExpectSameRun(graph, runs[0], 0, 0, "cnn fp16 recompute, captured");
  EXPECT_GT(graph_t->device_graph_stats().replays, 0) << graph_t->device_graph_stats().last_failure;
  graph_t.reset();

  const ir::Model transformer = LoadReference("transformer.onnx");
  const StatusOr<Dataset> tokens = TokenData(transformer);
  ASSERT_TRUE(tokens.ok()) << tokens.status().message();
  TrainerOptions t;
  t.graph.amp = DType::kBFloat16;
  t.graph.loss.class_axis = -1;
  t.batch_size = 16;
  t.steps = 4;
  t.threads = 1;
  const TrainRun t_plain = Train(transformer, t, *tokens, exec::Device::kCuda);
  for (int segments : {2, kRecomputeCheap}) {
    t.graph.recompute.segments = segments;
    std::unique_ptr<Trainer> keep;
    const TrainRun t_recomputed = Train(transformer, t, *tokens, exec::Device::kCuda, &keep);
    ASSERT_TRUE(keep);
    EXPECT_GT(keep->recompute_report().nodes, 0) << keep->recompute_report().why_not;
    ExpectSameRun(t_recomputed, t_plain, 0, 0, "transformer bf16 recompute " + RecomputeName(segments));
  }
}

// --update-bn's pass on the GPU (the statistics model's BatchNormalization training op with momentum 0, on CUDA)
// against the CPU's, with a partial last batch.
TEST(CudaTrainerTest, UpdateBnMatchesTheCpu) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("cnn.onnx");
  const Dataset data = Data(model, {3, 32, 32}, 40, 10, 9);
  BnUpdateOptions o;
  o.batch_size = 16;
  o.session.num_threads = 1;
  StatusOr<std::vector<ir::Tensor>> cpu = RecomputeBatchNormStatistics(model, data, o);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  o.session.device = exec::Device::kCuda;
  StatusOr<std::vector<ir::Tensor>> gpu = RecomputeBatchNormStatistics(model, data, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  ASSERT_EQ(gpu->size(), cpu->size());
  ASSERT_FALSE(cpu->empty());
  for (size_t i = 0; i < cpu->size(); ++i) {
    EXPECT_EQ((*gpu)[i].name(), (*cpu)[i].name());
    EXPECT_LE(MaxRelDiff((*gpu)[i], (*cpu)[i]), 1e-4) << (*cpu)[i].name();
  }
}

TEST(CudaTrainerTest, EmaMatchesTheCpu) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("cnn.onnx");
  const Dataset data = Data(model, {3, 32, 32}, 64, 10, 6);
  TrainerOptions o = CnnFp16Options();
  o.scaler.init_scale = 1048576.0;
  o.ema_decay = 0.9;
  o.ema_warmup = true;
  std::unique_ptr<Trainer> cpu_t, gpu_t;
  const TrainRun cpu = Train(model, o, data, exec::Device::kCpu, &cpu_t);
  const TrainRun gpu = Train(model, o, data, exec::Device::kCuda, &gpu_t);
  ASSERT_TRUE(cpu_t && gpu_t);
  ExpectSameRun(gpu, cpu, 1e-2, 5e-2, "cnn fp16 ema");
  const std::vector<ir::Tensor> cpu_ema = cpu_t->ExportValues();
  const std::vector<ir::Tensor> gpu_ema = gpu_t->ExportValues();
  ASSERT_EQ(cpu_ema.size(), gpu_ema.size());
  for (size_t i = 0; i < cpu_ema.size(); ++i) {
    EXPECT_EQ(gpu_ema[i].name(), cpu_ema[i].name());
    EXPECT_LE(MaxRelDiff(gpu_ema[i], cpu_ema[i]), 5e-2) << cpu_ema[i].name();
    EXPECT_GT(MaxRelDiff(gpu_ema[i], gpu.values[i]), 0.0) << "the average is the live value: " << cpu_ema[i].name();
  }
  StatusOr<EvalRecord> ce = cpu_t->Evaluate(data);
  StatusOr<EvalRecord> ge = gpu_t->Evaluate(data);
  ASSERT_TRUE(ce.ok() && ge.ok());
  EXPECT_NEAR(ge->loss, ce->loss, 1e-2 * std::max(1.0, ce->loss));
  ASSERT_TRUE(gpu_t->SyncFromDevice().ok());
  const std::vector<ir::Tensor> after = gpu_t->TrainedValues();
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(after[i].SameContents(gpu.values[i])) << "changed by the evaluation: " << after[i].name();
  }
}

// A GPU run's state resumes on the CPU and the other way round.
TEST(CudaTrainerTest, StateMovesBetweenCpuAndGpu) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("cnn.onnx");
  const Dataset data = Data(model, {3, 32, 32}, 48, 10, 5);
  TrainerOptions o;
  o.graph.amp = DType::kFloat16;
  o.optimizer = OptimizerKind::kAdamW;
  o.batch_size = 16;
  o.steps = 4;
  o.threads = 1;
  std::unique_ptr<Trainer> gpu_trainer;
  const TrainRun gpu = Train(model, o, data, exec::Device::kCuda, &gpu_trainer);
  ASSERT_TRUE(gpu_trainer);
  // GPU state into a CPU trainer, then both run 4 more steps.
  TrainerOptions longer = o;
  longer.steps = 8;
  longer.device = exec::Device::kCpu;
  StatusOr<std::unique_ptr<Trainer>> cpu = Trainer::Create(model, longer, data);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  ASSERT_TRUE((*cpu)->Restore(gpu.state).ok());
  longer.device = exec::Device::kCuda;
  StatusOr<std::unique_ptr<Trainer>> gpu2 = Trainer::Create(model, longer, data);
  ASSERT_TRUE(gpu2.ok()) << gpu2.status().message();
  Status st = (*gpu2)->Restore(gpu.state);
  ASSERT_TRUE(st.ok()) << st.message();
  for (int k = 0; k < 4; ++k) {
    StatusOr<StepRecord> a = (*cpu)->Step();
    StatusOr<StepRecord> b = (*gpu2)->Step();
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->step, b->step);
    EXPECT_NEAR(b->loss, a->loss, 2e-2 * std::max(1.0, std::fabs(a->loss))) << "step " << a->step;
  }
  // The restored GPU trainer reports the state it was given before stepping on.
  ASSERT_TRUE((*gpu2)->SyncFromDevice().ok());
  EXPECT_EQ((*gpu2)->State().steps_done, 8);
}

TEST(CudaTrainerTest, EvaluationMatchesTheCpu) {
  REQUIRE_CUDA_TRAINING();
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 100, 10, 6);
  TrainerOptions o;
  o.batch_size = 32;
  o.steps = 5;
  o.threads = 1;
  std::unique_ptr<Trainer> cpu_t, gpu_t;
  Train(model, o, data, exec::Device::kCpu, &cpu_t);
  Train(model, o, data, exec::Device::kCuda, &gpu_t);
  ASSERT_TRUE(cpu_t && gpu_t);
  StatusOr<EvalRecord> a = cpu_t->Evaluate(data);
  StatusOr<EvalRecord> b = gpu_t->Evaluate(data);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(b->loss, a->loss, 1e-4 * std::max(1.0, a->loss));
  EXPECT_NEAR(b->accuracy, a->accuracy, 0.02);
  EXPECT_EQ(b->samples, a->samples);
}

}  // namespace
}  // namespace onnxamp::trainer
