// Device memory of `onnxamp train --device cuda` on the MLP workload of the PyTorch comparison (three Linear
// 4096x4096 + ReLU, batch 512, MSE, SGD, FP16 AMP): the reported peak is the device's, within a bound computed from
// what a step must hold, and an evaluation does not add the eval session's figures on top of the train session's.
// Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "tools/gen_models/models.h"
#include "trainer/cuda/cuda_training.h"
#include "trainer/trainer.h"

namespace onnxamp::trainer {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr int64_t kWidth = 4096;
constexpr int64_t kBatch = 512;

// `batches` batches of normal inputs and targets of width kWidth.
Dataset RegressionData(const ir::Model& model, int64_t batches) {
  const int64_t n = batches * kBatch;
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  ir::Tensor x(DType::kFloat32, {n, kWidth});
  for (float& v : x.mutable_values<float>()) v = normal(gen);
  x.set_name(model.graph->inputs()[0]->name());
  ir::Tensor y(DType::kFloat32, {n, kWidth});
  for (float& v : y.mutable_values<float>()) v = normal(gen) * 0.1f;
  y.set_name("targets");
  StatusOr<Dataset> d = Dataset::FromTensors({x, y}, "data");
  EXPECT_TRUE(d.ok()) << d.status().message();
  BindOptions bind;
  bind.labels.array = "targets";
  bind.labels.kind = LabelKind::kFloatTargets;
  StatusOr<Dataset> b = d->Bind(DataInputs(*model.graph), bind);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return std::move(b).value();
}

TrainerOptions MlpOptions() {
  TrainerOptions o;
  o.device = exec::Device::kCuda;
  o.graph.amp = DType::kFloat16;
  o.graph.loss.kind = LossKind::kMse;
  o.optimizer = OptimizerKind::kSgd;
  o.schedule.base_lr = 1e-3;
  o.batch_size = kBatch;
  o.steps = 6;
  o.shuffle = false;
  return o;
}

TEST(CudaTrainingMemoryTest, Mlp4096AmpPeakIsWhatAStepHolds) {
  if (!cuda::RegisterCudaTraining()) GTEST_SKIP() << "no CUDA device here";
  const ir::Model model = gen::Mlp4096();
  const Dataset data = RegressionData(model, 4);
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, MlpOptions(), data);
  ASSERT_TRUE(t.ok()) << t.status().message();
  while (!(*t)->Done()) ASSERT_TRUE((*t)->StepAsync().ok());
  ASSERT_TRUE((*t)->Drain().ok());

  // What a step cannot do without: per parameter, the FP32 master (4 B), its FP16 copy (2 B) and the FP32 gradient
  // the train graph hands the optimizer (4 B); the data set on the device.
  const uint64_t params = 3 * (kWidth * kWidth + kWidth);
  const uint64_t data_bytes = 2 * 4 * kBatch * kWidth * 4;  // inputs and targets, FP32, 4 batches
  const uint64_t floor = params * (4 + 2 + 4) + data_bytes;
  // The most it may take (docs/cuda.md, "Device memory of a training step"): besides those, one batch (16 MiB), at
  // most one layer's FP16 weight gradient before its cast (32 MiB; none where the GEMM writes FP32 itself), the
  // activations the backward pass keeps (a few [512, 4096] tensors, under 64 MiB) and the library workspace (at most
  // 32 MiB). A second copy of the gradients (an Identity output copied out of the arena) or every layer's FP16
  // weight gradient kept to the end of the backward pass would not fit.
  const uint64_t bound = floor + (16 + 32 + 64 + 32) * kMiB;
  const uint64_t peak = (*t)->peak_device_bytes();
  const uint64_t reserved = (*t)->peak_reserved_device_bytes();
  EXPECT_GE(peak, floor);
  EXPECT_LE(peak, bound) << "peak " << peak / kMiB << " MiB, floor " << floor / kMiB << " MiB";
  EXPECT_GE(reserved, peak);

  // An evaluation pass runs in the eval session after the train session's step: the device's peak grows by the eval
  // session's arena and outputs at most, not by a second copy of the train session's figures.
  StatusOr<EvalRecord> eval = (*t)->Evaluate(data);
  ASSERT_TRUE(eval.ok()) << eval.status().message();
  EXPECT_LE((*t)->peak_device_bytes(), peak + 64 * kMiB);
}

}  // namespace
}  // namespace onnxamp::trainer
