// Host-side planning of the fused optimizer step (trainer/cuda/fused_optimizer.h): the flat layout of the device
// buffers, the chunk table its multi-tensor kernels run over, and the per-step scalars the host computes with the
// CPU optimizers' own functions. Plain C++ (no CUDA): the CPU tests check it without a GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/graph.h"
#include "trainer/cuda/fused_optimizer.h"
#include "trainer/graph/training_graph.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/optim/optim_math.h"

namespace onnxamp::trainer::cuda {

// Elements per chunk: one thread block of every multi-tensor kernel handles one chunk.
inline constexpr int64_t kFusedChunkElements = int64_t{1} << 16;
// Offsets of the parameters in the flat buffers are multiples of this many elements (64 bytes of FP32).
inline constexpr int64_t kFusedAlignmentElements = 16;

// A piece of one parameter: elements [start, start + length) of parameter `param`, at `flat` (= offset of the
// parameter + start) in the flat buffers.
// `overflow_at` > 0: a gradient element of magnitude >= overflow_at counts as an overflow, as if it were inf (see
// FusedOptimizerOptions::gradient_overflow_at). `group`: the parameter's group (FusedOptimizerOptions::groups), the
// column of the step's scalars the update reads.
struct FusedChunk {
  int32_t param = 0;
  int32_t length = 0;
  int64_t start = 0;
  int64_t flat = 0;
  float overflow_at = 0;
  int32_t group = 0;
};

struct FusedLayout {
  std::vector<int64_t> numels;
  std::vector<int64_t> offsets;  // of each parameter in the flat buffers, multiples of kFusedAlignmentElements
  int64_t flat_size = 0;         // elements of each flat buffer, padding included
  // Every element of every parameter in exactly one chunk, parameter by parameter and in order of `start`; a
  // parameter of 0 elements has none.
  std::vector<FusedChunk> chunks;
  // Parameter i's chunks are chunks[chunk_begin[i] .. chunk_begin[i + 1]) (size() + 1 entries).
  std::vector<int32_t> chunk_begin;
};

// The layout of parameters of `numels` elements with chunks of at most `chunk_elements` (> 0); each chunk of
// parameter i carries overflow_at[i] (none when overflow_at is empty) and group[i] (0 when group is empty). Fails on
// a negative numel, an overflow_at or group of another length than numels, a negative or NaN overflow_at, a negative
// group, or when the flat buffers or the chunk count do not fit the index types.
StatusOr<FusedLayout> PlanFusedLayout(const std::vector<int64_t>& numels, int64_t chunk_elements = kFusedChunkElements,
                                      const std::vector<float>& overflow_at = {},
                                      const std::vector<int32_t>& group = {});

// The smallest magnitude that FP16 rounds to inf (65504 + half a unit in the last place).
inline constexpr float kFp16OverflowMagnitude = 65520.0f;

// FusedOptimizerOptions::gradient_overflow_at for `params` of the train graph `train`: kFp16OverflowMagnitude for
// a parameter whose gradient output is made by a Cast to float of an FP16 value (or of a value whose type the graph
// leaves undeclared, as autodiff leaves its gradients), 0 for every other.
std::vector<float> Fp16GradientOverflowThresholds(const ir::Graph& train, const std::vector<Parameter>& params);

// The scalars of the step that follows `steps_taken` steps taken, for the parameters of `group`: the schedule's
// learning rate LrAt(steps_taken) (the step's record; the same for every group) and the optimizer's float32 scalars
// for lr * group.lr_scale and the group's weight decay, computed as the CPU optimizers do (ComputeSgdScalars,
// ComputeAdamScalars and ComputeAdagradScalars with step steps_taken + 1, ComputeRmspropScalars, ComputeLionScalars).
// Only the member of the options' kind is filled.
struct FusedStepScalars {
  double lr = 0;
  optim_math::SgdScalars sgd;
  optim_math::AdamScalars adam;
  optim_math::RadamScalars radam;
  optim_math::NadamScalars nadam;
  optim_math::RmspropScalars rmsprop;
  optim_math::AdagradScalars adagrad;
  optim_math::LionScalars lion;
  float ema_weight = 0;  // options.averaging(): AverageWeight(ema_decay, ema_warmup, swa_start, steps_taken)
};
FusedStepScalars ComputeFusedStepScalars(const FusedOptimizerOptions& options, const LrSchedule& schedule,
                                         int64_t steps_taken, const ParamGroup& group = {});

}  // namespace onnxamp::trainer::cuda
