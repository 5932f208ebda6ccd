// Training on a device backend. The Trainer (trainer.h) keeps the loop, the sampler and the step numbering; a
// DeviceTraining keeps everything the step touches on the device: the sessions, the training data (uploaded once
// when it fits), the FP32 master weights, their low-precision copies and the optimizer state, the GradScaler's
// state and the BatchNormalization buffers. Its steps are queued without host synchronisation; the host learns what
// each step did (loss, scale, skipped) when it drains the records.
//
// The CUDA implementation lives in trainer/cuda/ (onnxamp_trainer_cuda) and registers itself with
// RegisterDeviceTraining; a build without it reports that CUDA training is not available.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"
#include "trainer/data/dataset.h"
#include "trainer/graph/training_graph.h"
#include "trainer/optim/grad_scaler.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/state/parameter_store.h"
#include "trainer/step_graph_policy.h"

namespace onnxamp::trainer {

struct TrainerOptions;
class StepProfile;

// What the device recorded for one step.
struct DeviceStepResult {
  int64_t step = 0;         // 1-based, counting skipped steps
  double loss = 0;          // the step's mean loss over its samples
  float loss_scale = 1;     // the scale the step used
  bool skipped = false;     // inf/NaN found: no update
  double grad_norm = -1;    // the global norm before clipping (-1 without clipping or when skipped)
  double lr = 0;            // the learning rate applied (or that would have been)
  bool norm_error = false;  // clipping met a non-finite norm of finite gradients (float32 overflow): not updated
};

class DeviceTraining {
 public:
  virtual ~DeviceTraining() = default;

  // "cuda:0 NVIDIA H100 80GB HBM3 (...)", and where the data live.
  virtual std::string Describe() const = 0;

  // Queues one optimizer step over `micro_batches` (rows of the training data, one list per micro-batch), the
  // first micro-batch drawing Dropout masks with `rng_step` (the next ones rng_step + 1, ...).
  virtual Status Step(const std::vector<std::vector<int64_t>>& micro_batches, uint64_t rng_step) = 0;
  // Waits for the queued steps and returns what each did, oldest first.
  virtual StatusOr<std::vector<DeviceStepResult>> Drain() = 0;

  // The evaluation graph's outputs (loss, prediction), on the host, for one batch of host arrays bound like the
  // training data (the labels last), with the current weights and committed buffers. Waits for the queued steps.
  virtual StatusOr<std::vector<ir::Tensor>> EvalBatch(const std::vector<ir::Tensor>& batch) = 0;

  // The trainer's host mirror of the device state (synchronous; call after Drain). Download copies the FP32 master
  // weights and the optimizer state into `store` (creating the state buffers the device keeps; the parameters'
  // moving average is the state kEmaState), the committed buffers into `buffers` (same names and order as
  // TrainingGraphs::buffers) and, with TrainerOptions::ema_decay, their moving averages into `ema_buffers` (else it
  // is left empty), and returns the GradScaler's state (nullopt when scaling is off) and the steps taken. Upload sets
  // the device state from the same.
  virtual Status Download(ParameterStore* store, std::vector<ir::Tensor>* buffers, std::vector<ir::Tensor>* ema_buffers,
                          std::optional<GradScalerState>* scaler, int64_t* steps_taken) = 0;
  virtual Status Upload(const ParameterStore& store, const std::vector<ir::Tensor>& buffers,
                        const std::vector<ir::Tensor>& ema_buffers, const std::optional<GradScalerState>& scaler,
                        int64_t steps_done, int64_t steps_taken, int64_t skipped) = 0;

  // With TrainerOptions::ema_decay: exchanges the live parameters (and their low-precision copies) and committed
  // buffers with their moving averages, so that EvalBatch evaluates the averaged model; a second call gives the
  // live values back, bit for bit. Waits for nothing: queued after the steps.
  virtual Status SwapEma() = 0;
  // The learning-rate schedule of the steps queued from now on (after a plateau schedule lowered its rate); steps
  // queued before keep theirs. May synchronise.
  virtual Status SetSchedule(const LrSchedule& schedule) = 0;

  // The most device memory in use at once since the training began (bytes), over everything on its device: both
  // sessions' values, arenas and constants, the training data and the optimizer's buffers; blocks counted at their
  // allocated size (PyTorch's torch.cuda.max_memory_allocated()).
  virtual uint64_t peak_device_bytes() const = 0;
  // The same for the memory held from the device, in use or cached for reuse (torch.cuda.max_memory_reserved()).
  virtual uint64_t peak_reserved_device_bytes() const = 0;

  // Profiles the steps queued from now on into `profile` (null: stops): their train-graph runs with
  // RunOptions::profile, the batch and the optimizer step timed with the device synchronised around them, so that a
  // profiled Step returns when its work has finished.
  virtual void SetProfile(StepProfile* profile) = 0;

  // CUDA Graph capture of the steps (TrainerOptions::cuda_graph): what the steps so far did. Zeros when the
  // implementation captures nothing.
  virtual DeviceGraphStats graph_stats() const { return {}; }

  // What --recompute did to the training session's graph (recompute.h).
  virtual const RecomputeReport& recompute_report() const = 0;
};

using DeviceTrainingFactory = StatusOr<std::unique_ptr<DeviceTraining>> (*)(const TrainerOptions& options,
                                                                            const TrainingGraphs& graphs,
                                                                            const Dataset& train);
// Registers the implementation for `device` (the CUDA one: trainer::cuda::RegisterCudaTraining()).
void RegisterDeviceTraining(exec::Device device, DeviceTrainingFactory factory);
DeviceTrainingFactory FindDeviceTraining(exec::Device device);

}  // namespace onnxamp::trainer
