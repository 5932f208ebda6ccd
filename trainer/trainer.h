// The training loop on the CPU runtime: batches from a Dataset, the train graph run with the trainer's own parameter
// and buffer memory bound as inputs, gradient accumulation, the GradScaler, clipping, the optimizer and the LR
// schedule, BatchNormalization statistics committed only on taken steps; evaluation on the eval graph.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/session.h"
#include "runtime/ir/model.h"
#include "trainer/data/dataset.h"
#include "trainer/data/sampler.h"
#include "trainer/device_training.h"
#include "trainer/graph/training_graph.h"
#include "trainer/graph/weight_casts.h"
#include "trainer/optim/grad_scaler.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/optim/optimizer.h"
#include "trainer/optim/param_groups.h"
#include "trainer/state/parameter_store.h"
#include "trainer/step_graph_policy.h"
#include "trainer/step_profile.h"

namespace onnxamp::trainer {

struct TrainerOptions {
  TrainingGraphOptions graph;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  SgdOptions sgd;
  AdamOptions adam = AdamWDefaults();
  RadamOptions radam;
  NadamOptions nadam;
  RmspropOptions rmsprop;
  AdagradOptions adagrad;
  LionOptions lion;
  // Per-parameter learning-rate factors and weight-decay exclusion (param_groups.h); by default every parameter
  // trains with the optimizer's and the schedule's settings.
  ParamGroupOptions param_groups;
  LrScheduleOptions schedule;  // total_steps is filled in from the run's length for cosine
  GradScalerOptions scaler;    // the mode is set from graph.amp unless a static scale was asked for
  int64_t batch_size = 32;
  LastBatch last_batch = LastBatch::kPartial;
  int64_t epochs = 0;  // one of epochs / steps (steps wins when both are set)
  int64_t steps = 0;
  int accumulate = 1;     // micro-batches per optimizer step
  double clip_norm = 0;   // 0: no clipping by the global norm
  double clip_value = 0;  // > 0: every gradient element clamped to [-clip_value, clip_value] (not with clip_norm)
  // > 0 (and < 1): keep an exponential moving average of the parameters and float32 buffers, updated after every
  // step taken as ema.lerp_(value, optim_math::EmaWeight(ema_decay, ema_warmup, updates before)); evaluation and
  // ExportValues use it, TrainedValues stays the live model. 0: no average.
  double ema_decay = 0;
  bool ema_warmup = false;  // the decay ramps up as min(ema_decay, (1 + n) / (10 + n)) over the first updates
  // >= 0 (not with ema_decay): stochastic weight averaging instead, the equal average of the weights after every step
  // taken once swa_start steps were taken (optim_math::SwaWeight; the same buffers as the moving average, used the
  // same way). -1: none.
  int64_t swa_start = -1;
  // Whether the trainer keeps an average of the weights (ema_decay or swa_start).
  bool averaging() const { return ema_decay > 0 || swa_start >= 0; }
  uint64_t seed = 0;    // shuffling and Dropout
  bool shuffle = true;  // false: every epoch in file order
  int threads = 0;      // CPU threads (0: one per hardware thread)
  int64_t top_k = 0;    // > 1: evaluation also reports top-K accuracy (classification losses)
  // Where the step runs: the CPU runtime, or a device (Device::kCuda: the whole step on the GPU, device_index picks
  // it; needs the CUDA training library registered, trainer/cuda/).
  exec::Device device = exec::Device::kCpu;
  int device_index = 0;
  // Device::kCuda: capture the whole step (forward, loss, backward, optimizer) as a CUDA Graph after warm-up and
  // replay it (trainer/step_graph_policy.h, docs/training.md "CUDA Graphs"). Off by default: not yet run on a GPU.
  CudaGraphMode cuda_graph = CudaGraphMode::kOff;
  // Profile the steps after the first (Trainer::profile()): node times of the train graph's runs, batch and optimizer
  // time. Profiled runs time every node (a device synchronises per step); the results do not change.
  bool profile = false;
};

// What one optimizer step did.
struct StepRecord {
  int64_t step = 0;      // 1-based, counting skipped steps
  double loss = 0;       // mean loss of the step's samples (as computed in the step's precision)
  float loss_scale = 1;  // the scale this step used
  bool skipped = false;  // inf/NaN gradients: no update
  int64_t skipped_total = 0;
  double lr = 0;          // the learning rate applied (or that would have been)
  double grad_norm = -1;  // the global norm before clipping (-1 when not clipping or skipped)
  int64_t samples = 0;
  uint64_t epoch = 0;  // the epoch of the step's last batch
  double seconds = 0;  // wall time of the step
};

// Everything beyond the options that a run needs to continue bit for bit (trainer/checkpoint/ saves and loads it).
struct TrainerState {
  int64_t steps_done = 0;   // optimizer steps attempted
  int64_t steps_taken = 0;  // not skipped: the LR schedule's position
  int64_t skipped = 0;
  uint64_t rng_step = 0;  // micro-batches run: the Dropout seed of the next one
  BatchCursor cursor;     // the sampler's position (the epoch's shuffle follows from the seed and the epoch)
  std::optional<GradScalerState> scaler;  // nullopt when loss scaling is disabled
  std::vector<int64_t> step_counts;       // per parameter (torch's state['step']); empty before the first step
  std::vector<ir::Tensor> params;         // FP32 master weights, named after the parameters
  // Optimizer state buffers allocated so far ("exp_avg", ...): one FP32 tensor per parameter, named after it.
  std::vector<std::pair<std::string, std::vector<ir::Tensor>>> optimizer_state;
  std::vector<ir::Tensor> buffers;  // committed running statistics, named after the buffers
  // With TrainerOptions::ema_decay: the buffers' averages, named after the buffers (the parameters' averages are the
  // optimizer state kEmaState); else empty.
  std::vector<ir::Tensor> ema_buffers;
  // With the plateau schedule: its state (the rate, the best metric, the counters); else nullopt.
  std::optional<PlateauState> plateau;
};

// The name of the parameters' moving average among the optimizer state buffers (ParameterStore, checkpoints).
inline constexpr char kEmaState[] = "ema";

struct EvalRecord {
  double loss = 0;       // mean over samples
  double accuracy = -1;  // classification losses: the fraction of non-ignored positions whose argmax is the label
  // With TrainerOptions::top_k = K > 1: the fraction whose label is among the K highest scores (ties broken by the
  // lower class index, as for the argmax), and K; else -1 and 0.
  double top_k_accuracy = -1;
  int64_t top_k = 0;
  int64_t samples = 0;
};

// The groups of the trained parameters `params` under options.param_groups (AssignParamGroups on their names and
// ranks); the CPU optimizer and a device's fused optimizer both take them from here.
StatusOr<ParamGroups> ParameterGroupsOf(const TrainerOptions& options, const TrainingGraphs& graphs);

class Trainer {
 public:
  // Builds the training graphs from `model`, the sessions, the parameter store, optimizer, schedule and scaler.
  // `train` must be bound (Dataset::Bind) to the model's data inputs and the labels.
  static StatusOr<std::unique_ptr<Trainer>> Create(const ir::Model& model, const TrainerOptions& options,
                                                   Dataset train);

  // Runs one optimizer step (`accumulate` micro-batches). Errors: a failed run (naming the node), a non-finite loss
  // where no loss scaling can recover it (FP32 training, or a static scale at the first step).
  StatusOr<StepRecord> Step();
  // The same step, queued: on a device it returns before the step has run, and its record (loss, scale, skipped)
  // becomes known when Drain returns it; on the CPU the step runs and its record waits for Drain. Errors that only
  // the finished step can show (a non-finite loss without loss scaling) come from Drain.
  Status StepAsync();
  // The records of the steps queued since the last Drain, oldest first (waits for a device). A record's `seconds` is
  // the wall time since the previous Drain spread evenly over the records.
  StatusOr<std::vector<StepRecord>> Drain();
  // Steps queued so far (run or not), the step number of the last one.
  int64_t steps_done() const { return steps_done_; }
  // Device training: copies the device's state into the host mirror that State() and TrainedValues() read (call
  // before them, after Drain). Nothing to do on the CPU.
  Status SyncFromDevice();
  // "cpu", or the device and where the training data live.
  std::string DeviceDescription() const;
  // Device training: the most device memory in use at once, all of the device's (bytes, the figure that compares to
  // torch.cuda.max_memory_allocated()); 0 on the CPU.
  uint64_t peak_device_bytes() const;
  // Device training: the most device memory held from the device at once, in use or cached (bytes); 0 on the CPU.
  uint64_t peak_reserved_device_bytes() const;
  // Device training: what CUDA Graph capture did so far (TrainerOptions::cuda_graph); zeros on the CPU.
  DeviceGraphStats device_graph_stats() const;
  // Whether the run has reached --steps / --epochs.
  bool Done() const;
  int64_t total_steps() const { return total_steps_; }

  // Loss (and accuracy for class labels) over every sample of `data` (bound like the training data), in batches of
  // the training batch size, with the current parameters and running statistics (their moving averages with
  // TrainerOptions::ema_decay: the exported model).
  StatusOr<EvalRecord> Evaluate(const Dataset& data);
  // The plateau schedule (TrainerOptions::schedule.kind kPlateau): one evaluation's metric (schedule.maximize says
  // which way is better), as ReduceLROnPlateau.step(metric); true when it lowered the learning rate of the steps from
  // here on (steps queued before keep theirs). Other schedules: false.
  StatusOr<bool> ReportMetric(double metric);
  const LrSchedule& schedule() const { return schedule_; }

  // The trained parameters and the committed buffers, FP32, named after their initializers.
  std::vector<ir::Tensor> TrainedValues() const;
  // What an export writes: with TrainerOptions::ema_decay the moving averages of the parameters and buffers (the
  // model that Evaluate measures), else TrainedValues().
  std::vector<ir::Tensor> ExportValues() const;
  // The training graphs; each Parameter::initial holds its dtype and dims only (the values are in the store).
  const TrainingGraphs& graphs() const { return graphs_; }
  // What --recompute did to the training session's graph (TrainerOptions::graph.recompute; recompute.h).
  const RecomputeReport& recompute_report() const;
  const GradScaler& scaler() const { return scaler_; }
  const Sampler& sampler() const { return sampler_; }
  const TrainerOptions& options() const { return options_; }
  // The parameters' groups (TrainerOptions::param_groups), in graphs().params order.
  const ParamGroups& param_groups() const { return param_groups_; }
  const Dataset& train_data() const { return train_; }
  // With TrainerOptions::profile: the profile of the steps run so far (StepProfile::Format prints it); else null.
  const StepProfile* profile() const { return profile_.get(); }

  // The state a checkpoint saves, and its restoration into a trainer created with compatible options (the same
  // parameters, buffers and optimizer). Restore checks names, dims and counts and changes nothing on error.
  TrainerState State() const;
  Status Restore(const TrainerState& state);
  // The same state without copying the weights and optimizer state: its tensors are views of the trainer's own
  // memory, valid while the trainer lives and unchanged until its next step or Restore (SaveCheckpoint writes them
  // out from there).
  TrainerState StateView() const;

 private:
  Trainer(TrainerOptions options, Dataset train, TrainingGraphs graphs, ParameterStore store, GradScaler scaler,
          LrSchedule schedule, Sampler sampler)
      : options_(std::move(options)),
        train_(std::move(train)),
        graphs_(std::move(graphs)),
        store_(std::move(store)),
        scaler_(std::move(scaler)),
        schedule_(std::move(schedule)),
        sampler_(std::move(sampler)) {}

  // The feeds of one batch: data arrays, labels, parameters (views of the store), the given buffers.
  // `low`: the graph's low-precision weight inputs (train_low_ or eval_low_), fed from low_copies_.
  std::vector<ir::Tensor> Feeds(std::vector<ir::Tensor> batch, const std::vector<ir::Tensor>& buffers,
                                const std::vector<LowPrecisionWeight>& low) const;
  // Rewrites low_copies_ from the master weights (after they change: creation, an optimizer step, Restore).
  void RefreshLowPrecisionCopies();
  // EMA on the CPU: the update after a step taken (before steps_taken_ counts it), and the exchange of the live
  // parameters and buffers with their averages (twice gives back the same bits).
  void UpdateEma();
  void SwapEma();
  // The training session's threads, for the step's element loops (trainer/optim/ranges.h); null on a device.
  exec::ThreadPool* pool() const { return train_session_ && !device_ ? &train_session_->threads() : nullptr; }
  StatusOr<EvalRecord> EvaluateCurrent(const Dataset& data);
  StatusOr<StepRecord> StepOnCpu();
  // Once the parameters are in the store (or on the device): graphs_.params[i].initial keeps its dtype and dims
  // only (Tensor::WithoutData), so that the trainer holds no second copy of the weights.
  Status ReleaseInitialValues();
  // Checks a finished step's loss: FP32 training, or a static scale at the first step, cannot recover from a
  // non-finite loss.
  Status CheckLoss(const StepRecord& rec) const;

  TrainerOptions options_;
  Dataset train_;
  TrainingGraphs graphs_;
  ParameterStore store_;
  GradScaler scaler_;
  LrSchedule schedule_;
  Sampler sampler_;
  std::unique_ptr<Optimizer> optimizer_;
  ParamGroups param_groups_;
  std::unique_ptr<exec::Session> train_session_;
  std::unique_ptr<exec::Session> eval_session_;
  std::vector<ir::Tensor> buffers_;      // committed running statistics, one per graphs_.buffers entry
  std::vector<ir::Tensor> ema_buffers_;  // their averages (TrainerOptions::ema_decay), each in memory of its own
  // CPU mixed precision: the graphs read each parameter's FP16/BF16 copy (ExternalizeWeightCasts) instead of casting
  // the master weights on every run; low_copies_[i] is parameter i's copy (empty for a parameter no graph reads in
  // low precision). All empty in FP32 and on a device (whose optimizer writes its own copies).
  std::vector<LowPrecisionWeight> train_low_, eval_low_;
  std::vector<ir::Tensor> low_copies_;
  int64_t total_steps_ = 0;
  int64_t steps_done_ = 0;   // optimizer steps attempted
  int64_t steps_taken_ = 0;  // not skipped: the LR schedule's position
  int64_t skipped_ = 0;
  uint64_t rng_step_ = 0;                   // micro-batches run: the Dropout seed of the next one
  std::unique_ptr<DeviceTraining> device_;  // device training; null on the CPU
  RecomputeReport recompute_;               // the CPU training session's
  std::vector<StepRecord> pending_;         // queued steps whose records Drain has not returned
  std::chrono::steady_clock::time_point last_drain_;
  std::unique_ptr<StepProfile> profile_;  // TrainerOptions::profile
};

}  // namespace onnxamp::trainer
