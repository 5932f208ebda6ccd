// The optimizer step of CUDA training, on the device and without host synchronisation: FP32 master weights and
// optimizer state in flat device buffers, the GradScaler's unscale / inf check / scale update, global-norm clipping
// and SGD / Adam / AdamW / RAdam / NAdam / RMSprop / Adagrad / Lion, each a multi-tensor kernel over all parameters at
// once (a launch per phase, not per parameter), with the same per-element arithmetic as the CPU
// (trainer/optim/optim_math.h) so that both backends compute the same bits for the same inputs (clipping's norm
// excepted: its sum runs in another order).
//
// One step, all on the caller's stream:
//   1. grads: the FP32 gradients of this step, one device pointer per parameter (the session's outputs), or the
//      internal accumulation buffer when micro-batches were added with Accumulate;
//   2. check: found_inf set on the device when any scaled element is inf/NaN (not when loss scaling is disabled);
//      the gradients stay where they are: the update unscales each element as it reads it (UnscaleElement);
//   3. clip (clip_norm > 0, only when no inf was found): per-parameter sums of squares, the global norm, the
//      coefficient (optim_math::ClipCoefficient), applied in the update;
//   4. update (skipped by every thread when found_inf is set): the gradient clipped by value (clip_value > 0), the
//      optimizer's element function on every parameter,
//      and, when a low-precision dtype is set, the FP16/BF16 copy of the new weights written in the same pass;
//   5. bookkeeping (one thread): steps_taken / skipped counters, the GradScaler's UpdateScale, the seed of the next
//      step (scale / accumulate), and the step's record (loss, scale used, skipped, norm, lr).
// The scalars that depend on the step count (learning rate, Adam's bias corrections) are read by the kernels from a
// table indexed by the device's steps_taken counter; the host fills the table with the CPU's own functions
// (LrSchedule::LrAt, ComputeAdamScalars / ComputeSgdScalars / ...), so a skipped step moves nothing on and the host
// never needs to know, until it reads the records, whether a step was taken. The record ring's next slot is on the
// device too, so that a step captured as a CUDA Graph replays without any value from the host.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "trainer/device_training.h"
#include "trainer/optim/grad_scaler.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/optim/optimizer.h"
#include "trainer/optim/param_groups.h"

typedef struct CUstream_st* cudaStream_t;

namespace onnxamp::trainer::cuda {

// The fused step runs every optimizer the CPU has (trainer/optim/optimizer.h).
using FusedOptimizerKind = OptimizerKind;

struct FusedOptimizerOptions {
  FusedOptimizerKind kind = FusedOptimizerKind::kAdamW;
  SgdOptions sgd;
  AdamOptions adam;
  RadamOptions radam;
  NadamOptions nadam;
  RmspropOptions rmsprop;
  AdagradOptions adagrad;
  LionOptions lion;
  LrScheduleOptions schedule;  // total_steps filled in (cosine)
  GradScalerOptions scaler;    // kDisabled: no unscale, no check
  double clip_norm = 0;        // 0: no clipping
  double clip_value = 0;       // > 0: each unscaled gradient element clamped to [-clip_value, clip_value] in the update
  int accumulate = 1;          // micro-batches per step: the seed of the loss gradient is scale / accumulate
  // kFloat16 / kBFloat16: keep a low-precision copy of every parameter, rewritten by each update (and by LoadParam),
  // for forwards that read the weights in that precision. kUndefined: none.
  DType low_precision = DType::kUndefined;
  // Per parameter (empty: none): with the scaler on, a gradient element of magnitude >= this (> 0) is an overflow
  // like inf. For gradients that the unfused graph rounds to FP16 before the Cast to FP32 (whose magnitudes >= 65520
  // become inf there) but that a training session computes in FP32 directly (an FP32-output weight-gradient GEMM):
  // the same steps are skipped either way. With accumulation each micro-batch's gradient is checked.
  std::vector<float> gradient_overflow_at;
  // The parameters' groups (param_groups.h: a learning-rate factor, weight decay or none), as the CPU optimizer's
  // SetGroups; `of` empty: one group with the options' settings. The scalar table holds a column per group.
  ParamGroups groups;
  // > 0: keep a moving average of the parameters (the state "ema"), lerped towards each step's new weights in the
  // update pass with optim_math::EmaWeight(ema_decay, ema_warmup, steps taken before); LoadParam sets it to the
  // parameter, LoadState("ema") apart.
  double ema_decay = 0;
  bool ema_warmup = false;
  // >= 0: stochastic weight averaging in the same buffer instead (optim_math::SwaWeight; not with ema_decay).
  int64_t swa_start = -1;
  bool averaging() const { return ema_decay > 0 || swa_start >= 0; }
  int device_index = 0;
};

// What one step did, as the device recorded it (read back by Drain): the trainer's DeviceStepResult. `loss` is the
// sum of AddLoss weights * losses of the step divided by the sum of weights.
using FusedStepRecord = DeviceStepResult;

class FusedOptimizer {
 public:
  // Allocates the flat buffers (parameters, gradients, the optimizer's state, the low-precision copies) for
  // parameters of `numels` elements, on `stream` (the training session's stream, so that the session's work and the
  // step's are ordered without synchronisation). Validates the options as the CPU optimizers and GradScaler do.
  static StatusOr<std::unique_ptr<FusedOptimizer>> Create(const FusedOptimizerOptions& options,
                                                          std::vector<int64_t> numels, cudaStream_t stream);
  ~FusedOptimizer();

  size_t size() const;  // parameters
  int64_t numel(size_t i) const;
  // Device addresses, stable for the optimizer's life: parameter i's FP32 master weights, and its low-precision
  // copy (null without one). Both may be bound as inputs of a session on the same device.
  float* param(size_t i) const;
  void* low_precision(size_t i) const;
  // The device FP32 scalar to bind as the loss_scale (seed) input of the next micro-batch: scale / accumulate,
  // rewritten by each Step. Stable address.
  const float* seed() const;
  // The device int32 flag of the last step: 1 when it was skipped (inf/NaN, or a non-finite gradient norm). Stable
  // address; valid for work queued on the stream after Step.
  const int32_t* found_inf() const;
  // The device FP32 EMA weight the last step used (ema_decay > 0; 0 when the step was skipped), for averaging
  // other tensors (the buffers) the same way. Stable address; valid for work queued on the stream after Step.
  const float* ema_weight() const;
  // ema_decay > 0: exchanges the parameters with their moving average and rewrites the low-precision copies from
  // the new parameters (enqueued on the stream; twice gives back the same bits). Fails without an average.
  Status SwapEma();
  // Bytes of device memory the optimizer holds from cudaMalloc (its flat buffers and tables), which no caching
  // allocator counts.
  uint64_t device_bytes() const;

  // Host <-> device (synchronous): parameter values (FP32, numel(i) elements; the low-precision copy is rewritten),
  // optimizer state by name ("momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "square_avg", "grad_avg":
  // the CPU's names; the
  // names kept by this optimizer are state_names(); "ema" with ema_decay), the scaler's state, and the steps taken
  // (the step count of
  // every parameter: all parameters are updated together).
  Status LoadParam(size_t i, const float* host);
  Status ReadParam(size_t i, float* host) const;
  std::vector<std::string> state_names() const;
  Status LoadState(const std::string& name, size_t i, const float* host);
  Status ReadState(const std::string& name, size_t i, float* host) const;  // zeros before the first step
  std::optional<GradScalerState> ScalerState() const;                      // nullopt when scaling is disabled
  Status RestoreScaler(const GradScalerState& state);
  int64_t steps_taken() const;  // synchronous
  // The schedule of the steps enqueued from now on (a plateau schedule's lowered rate): synchronous, rebuilds the
  // scalar table from the device's steps taken (a new generation()).
  Status SetSchedule(const LrSchedule& schedule);
  Status RestoreCounters(int64_t steps_done, int64_t steps_taken, int64_t skipped);

  // Micro-batches (accumulate > 1): Accumulate adds one micro-batch's gradients (device FP32, numel(i) each) into
  // the internal buffer (the first call of a step overwrites it). AddLoss adds weight * (*loss) to the step's loss
  // (loss: a device FP32 scalar).
  Status Accumulate(const std::vector<const float*>& grads);
  Status AddLoss(const float* loss, double weight);

  // Enqueues one step (see above) on the gradients given (device FP32, numel(i) each), or on the accumulated ones
  // when `grads` is empty. Never synchronises.
  Status Step(const std::vector<const float*>& grads);

  // Waits for the stream and returns the records of the steps enqueued since the last Drain, oldest first (a step
  // clipping met a non-finite norm in has norm_error set). Step drains by itself (keeping the records) when more than
  // 4096 are pending.
  StatusOr<std::vector<FusedStepRecord>> Drain();

  // CUDA Graph capture of the training step (trainer/cuda/cuda_training.cc). Everything a step reads that may change
  // from step to step is on the device already (the counters, the scale, the scalar table indexed by steps_taken,
  // the record ring's next slot), so a captured step replays correctly while generation() stays the same: it
  // changes whenever an address or a constant the captured kernels hold changes (the scalar table reallocated or
  // rebased by RestoreCounters, the scaler restored).
  //   PrepareGraphStep: before each step that may be captured or replayed, drains the records when the ring is full
  //     and makes the scalar table cover the next step (eager work: it may allocate and synchronise);
  //   BindCaptureGradients: the gradient pointers of the captured step, uploaded once into a table of their own (so
  //     that eager steps do not overwrite it; synchronous, never while capturing);
  //   CaptureStep: enqueues the step's kernels on those gradients as Step does, without allocating, synchronising or
  //     the host's bookkeeping (fails when the two calls above were not made); with `grads` empty (accumulate > 1),
  //     on the accumulated gradients;
  //   CaptureAccumulate (accumulate > 1): enqueues Accumulate of one micro-batch's gradients, bound as above, reading
  //     whether it is the step's first micro-batch (overwrite instead of add) from the device int64 at `first`, so
  //     that one captured micro-batch serves every micro-batch of a step (no host bookkeeping);
  //   GraphStepLaunched: the host's bookkeeping of one step run by launching the captured graph.
  Status PrepareGraphStep();
  uint64_t generation() const;
  Status BindCaptureGradients(const std::vector<const float*>& grads);
  Status CaptureStep(const std::vector<const float*>& grads);
  Status CaptureAccumulate(const std::vector<const float*>& grads, const int64_t* first);
  void GraphStepLaunched();

 private:
  struct Impl;
  explicit FusedOptimizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace onnxamp::trainer::cuda
