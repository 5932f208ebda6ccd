// The fused optimizer step of CUDA training (see fused_optimizer.h): multi-tensor kernels over a chunk table, the
// per-element arithmetic of trainer/optim/optim_math.h (built with --fmad=false), the step's scalars in a device
// table indexed by the device's steps_taken counter, and a device ring of step records.
#include "trainer/cuda/fused_optimizer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/half_convert.h"
#include "trainer/cuda/fused_optimizer_plan.h"
#include "trainer/optim/optim_math.h"

namespace onnxamp::trainer::cuda {
namespace {

namespace om = optim_math;

constexpr int kThreads = 512;              // per block of the chunk kernels
constexpr int kClipThreads = 256;          // the one block of the norm kernel
constexpr int64_t kRecordCapacity = 4096;  // the device ring; Step drains when it is full
constexpr int64_t kInitialScalarSteps = 1024;
constexpr int64_t kRebaseScalarSteps = 4096;  // DrainRing rebases the scalar table past this many steps

// Everything the kernels share across a step, in one device allocation.
struct DeviceState {
  float scale = 1;
  int32_t growth_tracker = 0;
  int32_t found_inf = 0;
  int32_t norm_error = 0;
  float seed = 1;
  float total_norm = 0;
  float clip_coef = 1;
  int64_t steps_done = 0;
  int64_t steps_taken = 0;
  int64_t skipped = 0;
  double loss_sum = 0;
  double loss_weight = 0;
  int64_t ring_next = 0;  // the ring slot of the next record (kept on the device: a replayed step reads it)
  int32_t range_inf = 0;  // a micro-batch's gradient reached its chunk's overflow_at (read and cleared by Step)
  float ema_weight = 0;   // the EMA weight of the last step (0 when it was skipped)
};

// FusedStepRecord as the device writes it (trivially copyable, the same on host and device).
struct DeviceRecord {
  int64_t step;
  double loss;
  double lr;
  float loss_scale;
  float grad_norm;
  int32_t skipped;
  int32_t norm_error;
};

// The scaler's constants for the bookkeeping kernel.
struct ScalerParams {
  int32_t dynamic = 0;  // LossScaleMode::kDynamic
  double growth_factor = 2;
  double backoff_factor = 0.5;
  int32_t growth_interval = 2000;
  float min_scale = 0;
};

enum : int32_t { kLowNone = 0, kLowHalf = 1, kLowBFloat16 = 2 };

__device__ __forceinline__ uint16_t ToLowPrecision(float x, int32_t low) {
  return low == kLowHalf ? ::onnxamp::cuda::FloatToHalfBitsHD(x) : ::onnxamp::cuda::FloatToBFloat16BitsHD(x);
}

// A fixed-order block sum of `v` (every thread passes its value; thread 0 gets the sum). Deterministic: the order
// depends on blockDim only.
template <int kBlock>
__device__ __forceinline__ float BlockSum(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
#pragma unroll
  for (int width = kBlock / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width) shared[threadIdx.x] = shared[threadIdx.x] + shared[threadIdx.x + width];
    __syncthreads();
  }
  return shared[0];
}

// Accumulate: acc = first ? g : acc + g, as the CPU trainer sets the first micro-batch's gradient (SetGrad, a -0
// stays -0, as in PyTorch's .grad) and adds the later ones (AccumulateGrad).
// `first_flag` (null: `first`): a device int64, nonzero for a step's first micro-batch (a captured micro-batch's,
// written before each launch). With check, a micro-batch gradient element at or above its chunk's overflow_at sets
// range_inf.
__global__ void __launch_bounds__(kThreads)
    AccumulateKernel(const FusedChunk* chunks, const float* const* grads, float* acc, int32_t first,
                     const int64_t* first_flag, int32_t check, DeviceState* state) {
  const FusedChunk c = chunks[blockIdx.x];
  const float* g = grads[c.param] + c.start;
  float* a = acc + c.flat;
  const bool overwrite = first_flag ? *first_flag != 0 : first != 0;
  bool found = false;
  for (int j = threadIdx.x; j < c.length; j += kThreads) {
    a[j] = overwrite ? g[j] : a[j] + g[j];
    if (c.overflow_at > 0.0f && fabsf(g[j]) >= c.overflow_at) found = true;
  }
  if (check && __syncthreads_or(found) && threadIdx.x == 0) state->range_inf = 1;
}

// The gradient element the update uses: as the session computed it (the CPU trainer's store holds it as such, a -0
// included), unscaled when the scaler checks.
__device__ __forceinline__ float UnscaledGradient(float g, int32_t check, float inv) {
  return check ? om::UnscaleElement(g, inv) : g;
}

// Phase 2: check (and, when clipping, each chunk's sum of squares of the unscaled gradients). Nothing is written but
// the flag and the sums: the update reads the gradients again and unscales them itself, which saves a write and a
// read of every gradient.
// range: compare the gradients with their chunk's overflow_at (no accumulation; with it, AccumulateKernel compared
// each micro-batch's and block 0 turns range_inf into found_inf).
__global__ void __launch_bounds__(kThreads)
    UnscaleKernel(const FusedChunk* chunks, const float* const* grads, DeviceState* state, int32_t check, int32_t clip,
                  int32_t range, float* chunk_sums) {
  __shared__ float shared[kThreads];
  const FusedChunk c = chunks[blockIdx.x];
  const float* g = grads[c.param] + c.start;
  const float inv = check ? om::InverseScale(state->scale) : 1.0f;
  bool found = false;
  float sum = 0.0f;
  for (int j = threadIdx.x; j < c.length; j += kThreads) {
    const float x = g[j];
    if (check && (!om::IsFinite(x) || (range && c.overflow_at > 0.0f && fabsf(x) >= c.overflow_at))) found = true;
    const float u = UnscaledGradient(g[j], check, inv);
    sum = sum + u * u;
  }
  if (check && blockIdx.x == 0 && threadIdx.x == 0 && state->range_inf) {
    found = true;
    state->range_inf = 0;
  }
  if (check && __syncthreads_or(found) && threadIdx.x == 0) state->found_inf = 1;
  if (clip) {
    const float total = BlockSum<kThreads>(sum, shared);
    if (threadIdx.x == 0) chunk_sums[blockIdx.x] = total;
  }
}

// torch.linalg.vector_norm's order as the CPU's L2Norm (trainer/optim/clip.cc): 8 interleaved partial sums over the
// whole multiples of 8, added left to right, then the rest.
__device__ float L2NormSequential(const float* values, int32_t n) {
  float lanes[8] = {};
  const int32_t whole = n - n % 8;
  int32_t i = 0;
  for (; i < whole; i += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += values[i + l] * values[i + l];
  }
  float sum = lanes[0];
  for (int l = 1; l < 8; ++l) sum = sum + lanes[l];
  for (; i < n; ++i) sum += values[i] * values[i];
  return sqrtf(sum);
}

// Phase 3 (clipping): each parameter's norm from its chunks' sums (in chunk order), the norm of norms, the
// coefficient. Nothing when an inf was found (the step is skipped); a non-finite norm sets norm_error.
__global__ void __launch_bounds__(kClipThreads)
    ClipNormKernel(const int32_t* chunk_begin, int32_t params, const float* chunk_sums, float* norms,
                   DeviceState* state, float max_norm) {
  if (state->found_inf) return;
  for (int32_t p = threadIdx.x; p < params; p += kClipThreads) {
    float sum = 0.0f;
    for (int32_t k = chunk_begin[p]; k < chunk_begin[p + 1]; ++k) sum = sum + chunk_sums[k];
    norms[p] = sqrtf(sum);
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  const float total = L2NormSequential(norms, params);
  state->total_norm = total;
  if (!om::IsFinite(total)) {
    state->norm_error = 1;
    return;
  }
  state->clip_coef = om::ClipCoefficient(total, max_norm);
}

// The buffers of the update kernel.
struct UpdateBuffers {
  float* params;
  const float* const* grads;  // per parameter (the gradient table)
  float* state0;  // SGD: momentum_buffer; Adam, RAdam: exp_avg; RMSprop: square_avg; Adagrad: sum; Lion: exp_avg
  float* state1;  // Adam: exp_avg_sq; RMSprop: momentum_buffer
  float* state2;  // Adam: max_exp_avg_sq; RMSprop: grad_avg
  uint16_t* low;  // the low-precision copies (null without)
  float* ema;     // the parameters' moving average (null without)
};

// Phase 4: the optimizer's element function on every element, skipped by every thread on found_inf / norm_error.
template <FusedOptimizerKind kKind>
__global__ void __launch_bounds__(kThreads)
    UpdateKernel(const FusedChunk* chunks, UpdateBuffers b, const DeviceState* state, const FusedStepScalars* scalars,
                 int64_t scalar_base, int32_t groups, int32_t check, int32_t clip, float clip_value, int32_t low) {
  if (state->found_inf || state->norm_error) return;
  const FusedChunk c = chunks[blockIdx.x];
  const float* grad = b.grads[c.param] + c.start;
  const float inv = check ? om::InverseScale(state->scale) : 1.0f;
  const int64_t taken = state->steps_taken;
  const FusedStepScalars& s = scalars[(taken - scalar_base) * groups + c.group];
  const float coef = clip ? state->clip_coef : 1.0f;
  float unused0 = 0.0f, unused1 = 0.0f;
  for (int j = threadIdx.x; j < c.length; j += kThreads) {
    const int64_t k = c.flat + j;
    float g = UnscaledGradient(grad[j], check, inv);
    if (clip) g = g * coef;
    if (clip_value > 0.0f) g = om::ClampElement(g, clip_value);
    float p;
    if constexpr (kKind == FusedOptimizerKind::kSgd) {
      p = om::SgdElement(b.params[k], g, b.state0 ? b.state0 + k : &unused0, taken == 0, s.sgd);
    } else if constexpr (kKind == FusedOptimizerKind::kRadam) {
      p = om::RadamElement(b.params[k], g, b.state0 + k, b.state1 + k, s.radam);
    } else if constexpr (kKind == FusedOptimizerKind::kNadam) {
      p = om::NadamElement(b.params[k], g, b.state0 + k, b.state1 + k, s.nadam);
    } else if constexpr (kKind == FusedOptimizerKind::kRmsprop) {
      p = om::RmspropElement(b.params[k], g, b.state0 + k, b.state2 ? b.state2 + k : &unused1,
                             b.state1 ? b.state1 + k : &unused0, s.rmsprop);
    } else if constexpr (kKind == FusedOptimizerKind::kAdagrad) {
      p = om::AdagradElement(b.params[k], g, b.state0 + k, taken == 0, s.adagrad);
    } else if constexpr (kKind == FusedOptimizerKind::kLion) {
      p = om::LionElement(b.params[k], g, b.state0 + k, s.lion);
    } else {
      p = om::AdamElement(b.params[k], g, b.state0 + k, b.state1 + k, b.state2 ? b.state2 + k : &unused1, s.adam);
    }
    b.params[k] = p;
    if (low != kLowNone) b.low[k] = ToLowPrecision(p, low);
    if (b.ema && s.ema_weight != 0.0f) b.ema[k] = om::Lerp(b.ema[k], p, s.ema_weight);  // 0: SWA before its start
  }
}

// Phase 5 (one thread): the record, the counters, the scale update and the next seed.
__global__ void BookkeepingKernel(DeviceState* state, const FusedStepScalars* scalars, int64_t scalar_base,
                                  int32_t groups, DeviceRecord* ring, ScalerParams scaler, int32_t clip,
                                  float accumulate) {
  const bool found = state->found_inf != 0;
  const bool norm_error = state->norm_error != 0;
  DeviceRecord r;
  r.step = state->steps_done + 1;
  r.loss = state->loss_weight > 0 ? state->loss_sum / state->loss_weight : 0.0;
  r.lr = scalars[(state->steps_taken - scalar_base) * groups].lr;
  state->ema_weight = found || norm_error ? 0.0f : scalars[(state->steps_taken - scalar_base) * groups].ema_weight;
  r.loss_scale = state->scale;
  r.grad_norm = clip && !found ? state->total_norm : -1.0f;
  r.skipped = found || norm_error;
  r.norm_error = norm_error;
  ring[state->ring_next] = r;
  state->ring_next = (state->ring_next + 1) % kRecordCapacity;
  if (found || norm_error) {
    ++state->skipped;
  } else {
    ++state->steps_taken;
  }
  ++state->steps_done;
  // A norm error ends the CPU's step before the scaler's update: the scale stays.
  if (scaler.dynamic && !norm_error) {
    om::UpdateScale(&state->scale, &state->growth_tracker, found, scaler.growth_factor, scaler.backoff_factor,
                    scaler.growth_interval, scaler.min_scale);
  }
  state->seed = state->scale / accumulate;
  state->loss_sum = 0;
  state->loss_weight = 0;
  // found_inf() tells what follows the step whether it was skipped: a norm error skips it too, and the CPU then
  // commits no running statistics either (its step ends at the error).
  state->found_inf = r.skipped ? 1 : 0;
}

__global__ void AddLossKernel(DeviceState* state, const float* loss, double weight) {
  state->loss_sum += static_cast<double>(*loss) * weight;
  state->loss_weight += weight;
}

// SwapEma: a <-> b element by element, and the low-precision copy of the new a.
__global__ void SwapKernel(float* a, float* b, uint16_t* low_of_a, int64_t n, int32_t low) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = a[k];
    const float y = b[k];
    a[k] = y;
    b[k] = x;
    if (low != kLowNone) low_of_a[k] = ToLowPrecision(y, low);
  }
}

__global__ void LowPrecisionKernel(const float* src, uint16_t* dst, int64_t n, int32_t low) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[k] = ToLowPrecision(src[k], low);
  }
}

// Device memory freed with the optimizer.
struct DeviceFree {
  void operator()(void* p) const {
    if (p != nullptr) cudaFree(p);
  }
};
template <typename T>
using DevicePtr = std::unique_ptr<T, DeviceFree>;

template <typename T>
// `count` elements of T from cudaMalloc, their bytes added to *total.
Status AllocDevice(DevicePtr<T>* out, size_t count, const char* what, uint64_t* total) {
  void* p = nullptr;
  if (count > 0) ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, count * sizeof(T)), "fused optimizer: ", what);
  out->reset(static_cast<T*>(p));
  *total += count * sizeof(T);
  return Status::Ok();
}

struct HostFree {
  void operator()(void* p) const {
    if (p != nullptr) cudaFreeHost(p);
  }
};

}  // namespace

struct FusedOptimizer::Impl {
  Impl(const FusedOptimizerOptions& o, cudaStream_t s, FusedLayout l, GradScaler sc, LrSchedule sched)
      : options(o), stream(s), layout(std::move(l)), scaler(std::move(sc)), schedule(std::move(sched)) {}

  FusedOptimizerOptions options;
  cudaStream_t stream = nullptr;
  FusedLayout layout;
  GradScaler scaler;
  LrSchedule schedule;
  std::vector<std::string> state_names;
  int32_t low = kLowNone;
  uint64_t device_bytes = 0;  // what AllocDevice took from cudaMalloc, and the scalar table

  DevicePtr<float> params, accum, ema;
  std::array<DevicePtr<float>, 3> states;
  DevicePtr<uint16_t> low_copy;
  DevicePtr<FusedChunk> chunks;
  DevicePtr<int32_t> chunk_begin;
  DevicePtr<float> chunk_sums, norms;
  DevicePtr<DeviceState> state;
  DevicePtr<DeviceRecord> ring;
  DevicePtr<const float*> accum_table;  // pointers into `accum`, one per parameter (fixed)

  // The gradient pointer table of the last Step / Accumulate: reused while the pointers do not change; otherwise
  // staged in one of two pinned host slots, each reused only after the event recorded behind its last copy.
  DevicePtr<const float*> grad_table;
  std::vector<const float*> last_grads;
  std::array<std::unique_ptr<const float*[], HostFree>, 2> pinned_tables;
  std::array<cudaEvent_t, 2> table_events = {nullptr, nullptr};
  std::array<bool, 2> table_event_pending = {false, false};
  int next_slot = 0;

  UpdateBuffers update{};  // UpdateSlots(), set by Create; each step adds its gradient table

  // The parameter groups: the scalar table's columns.
  int32_t groups() const { return static_cast<int32_t>(options.groups.groups.size()); }
  // The per-step scalars: device rows [0, scalar_count) are the steps after scalar_base + row steps taken, a column
  // per parameter group (entry row * groups() + group). Grown as steps are enqueued (the device's counter never
  // exceeds scalar_base + the steps enqueued since).
  DevicePtr<FusedStepScalars> scalars;
  std::unique_ptr<FusedStepScalars[], HostFree> pinned_scalars;  // the host copy of every entry
  // Pinned copies replaced by a larger one, still read by pending uploads: freed once the stream was synchronised.
  std::vector<std::unique_ptr<FusedStepScalars[], HostFree>> retired_scalars;
  int64_t scalar_base = 0;
  int64_t scalar_count = 0;
  int64_t scalar_capacity = 0;
  int64_t steps_since_base = 0;  // steps enqueued since scalar_base was set

  int64_t enqueued = 0;                  // steps enqueued since the last drain of the ring
  int64_t ring_first = 0;                // the ring slot of the oldest pending record
  std::vector<FusedStepRecord> drained;  // records drained by Step, returned by the next Drain
  std::vector<DeviceRecord> ring_host;   // the host copy of the ring, reused by every drain
  bool accumulating = false;             // Accumulate was called since the last Step

  // CUDA Graph capture: bumped whenever an address or value that a captured step holds changes; the gradient table
  // of the captured step (its own, so that eager steps in between do not overwrite it).
  uint64_t generation = 0;
  DevicePtr<const float*> capture_table;
  std::vector<const float*> capture_grads;

  ~Impl() {
    cudaStreamSynchronize(stream);
    for (cudaEvent_t e : table_events) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }

  float* state_buffer(const std::string& name) const {
    if (name == "ema") return ema.get();
    for (size_t k = 0; k < state_names.size(); ++k) {
      if (state_names[k] == name) return states[k].get();
    }
    return nullptr;
  }

  // The update kernel's buffers but the gradient table: the optimizer's states by name in the slots its element
  // function reads (null where the options keep no such state). Fixed once the buffers are allocated (`update`).
  UpdateBuffers UpdateSlots() const {
    UpdateBuffers b{params.get(), nullptr, nullptr, nullptr, nullptr, low_copy.get(), ema.get()};
    switch (options.kind) {
      case FusedOptimizerKind::kSgd:
        b.state0 = state_buffer("momentum_buffer");
        break;
      case FusedOptimizerKind::kAdam:
      case FusedOptimizerKind::kAdamW:
        b.state0 = state_buffer("exp_avg");
        b.state1 = state_buffer("exp_avg_sq");
        b.state2 = state_buffer("max_exp_avg_sq");
        break;
      case FusedOptimizerKind::kRadam:
      case FusedOptimizerKind::kNadam:
        b.state0 = state_buffer("exp_avg");
        b.state1 = state_buffer("exp_avg_sq");
        break;
      case FusedOptimizerKind::kRmsprop:
        b.state0 = state_buffer("square_avg");
        b.state1 = state_buffer("momentum_buffer");
        b.state2 = state_buffer("grad_avg");
        break;
      case FusedOptimizerKind::kAdagrad:
        b.state0 = state_buffer("sum");
        break;
      case FusedOptimizerKind::kLion:
        b.state0 = state_buffer("exp_avg");
        break;
    }
    return b;
  }

  Status CheckIndex(size_t i, const char* what) const {
    if (i >= layout.numels.size()) {
      return InvalidArgument("fused optimizer: ", what, ": parameter ", i, " out of range (", layout.numels.size(),
                             " parameters)");
    }
    return Status::Ok();
  }

  Status Sync(const char* what) {
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "fused optimizer: ", what);
    return Status::Ok();
  }

  // Uploads `grads` as the pointer table unless it equals the last one; returns the device table.
  StatusOr<const float* const*> GradTable(const std::vector<const float*>& grads, const char* what) {
    if (grads.size() != layout.numels.size()) {
      return InvalidArgument("fused optimizer: ", what, " got ", grads.size(), " gradients for ", layout.numels.size(),
                             " parameters");
    }
    for (size_t i = 0; i < grads.size(); ++i) {
      if (grads[i] == nullptr && layout.numels[i] > 0) {
        return InvalidArgument("fused optimizer: ", what, ": the gradient of parameter ", i, " is null");
      }
    }
    if (!capture_grads.empty() && grads == capture_grads) return static_cast<const float* const*>(capture_table.get());
    if (grads == last_grads) return static_cast<const float* const*>(grad_table.get());
    const int slot = next_slot;
    next_slot ^= 1;
    if (table_event_pending[slot]) {
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(table_events[slot]), "fused optimizer: ", what);
      table_event_pending[slot] = false;
    }
    const size_t bytes = grads.size() * sizeof(const float*);
    std::memcpy(pinned_tables[slot].get(), grads.data(), bytes);
    ONNXAMP_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(grad_table.get(), pinned_tables[slot].get(), bytes, cudaMemcpyHostToDevice, stream),
        "fused optimizer: ", what, ": the gradient table");
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventRecord(table_events[slot], stream), "fused optimizer: ", what);
    table_event_pending[slot] = true;
    last_grads = grads;
    return static_cast<const float* const*>(grad_table.get());
  }

  // Makes the scalar table cover index `steps_since_base` (the step about to be enqueued).
  Status EnsureScalars() {
    const int32_t groups = this->groups();
    const int64_t need = steps_since_base + 1;
    if (need <= scalar_count) return Status::Ok();
    if (need > scalar_capacity) {
      const int64_t capacity = std::max<int64_t>(kInitialScalarSteps, scalar_capacity * 2);
      const size_t row = groups * sizeof(FusedStepScalars);
      void* host = nullptr;
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMallocHost(&host, capacity * row), "fused optimizer: the scalar table");
      std::unique_ptr<FusedStepScalars[], HostFree> new_host(static_cast<FusedStepScalars*>(host));
      void* dev = nullptr;
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&dev, capacity * row, stream), "fused optimizer: the scalar table");
      DevicePtr<FusedStepScalars> new_dev(static_cast<FusedStepScalars*>(dev));
      if (scalar_count > 0) {
        std::memcpy(new_host.get(), pinned_scalars.get(), scalar_count * row);
        ONNXAMP_CUDA_RETURN_IF_ERROR(
            cudaMemcpyAsync(new_dev.get(), scalars.get(), scalar_count * row, cudaMemcpyDeviceToDevice, stream),
            "fused optimizer: the scalar table");
      }
      if (scalars) {
        ONNXAMP_CUDA_RETURN_IF_ERROR(cudaFreeAsync(scalars.release(), stream), "fused optimizer: the scalar table");
      }
      scalars = std::move(new_dev);
      ++generation;  // a captured step holds the old table's address
      if (pinned_scalars) retired_scalars.push_back(std::move(pinned_scalars));
      pinned_scalars = std::move(new_host);
      device_bytes += static_cast<uint64_t>(capacity - scalar_capacity) * row;
      scalar_capacity = capacity;
    }
    // Fill up to the capacity at once: entries are never rewritten, so their pinned copies stay valid for the
    // asynchronous upload.
    const int64_t from = scalar_count;
    for (int64_t k = from; k < scalar_capacity; ++k) {
      for (int32_t g = 0; g < groups; ++g) {
        pinned_scalars[k * groups + g] =
            ComputeFusedStepScalars(options, schedule, scalar_base + k, options.groups.groups[static_cast<size_t>(g)]);
      }
    }
    ONNXAMP_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(scalars.get() + from * groups, pinned_scalars.get() + from * groups,
                        (scalar_capacity - from) * groups * sizeof(FusedStepScalars), cudaMemcpyHostToDevice, stream),
        "fused optimizer: the scalar table");
    scalar_count = scalar_capacity;
    return Status::Ok();
  }

  // Restarts the scalar table at `base` steps taken (synchronous: after RestoreCounters).
  Status ResetScalars(int64_t base) {
    ONNXAMP_RETURN_IF_ERROR(Sync("resetting the scalar table"));
    retired_scalars.clear();
    scalar_base = base;
    ++generation;  // a captured step holds the old base
    scalar_count = 0;
    steps_since_base = 0;
    return EnsureScalars();
  }

  ScalerParams scaler_params() const {
    ScalerParams p;
    const std::optional<GradScalerState> s = scaler.State();
    p.dynamic = scaler.mode() == LossScaleMode::kDynamic;
    if (s) {
      p.growth_factor = s->growth_factor;
      p.backoff_factor = s->backoff_factor;
      p.growth_interval = static_cast<int32_t>(s->growth_interval);
    }
    p.min_scale = scaler.min_scale();
    return p;
  }

  StatusOr<DeviceState> ReadDeviceState() {
    ONNXAMP_RETURN_IF_ERROR(Sync("reading the device state"));
    DeviceState s;
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&s, state.get(), sizeof(s), cudaMemcpyDeviceToHost, stream),
                                 "fused optimizer: reading the device state");
    ONNXAMP_RETURN_IF_ERROR(Sync("reading the device state"));
    return s;
  }

  Status WriteDeviceState(const DeviceState& s) {
    ONNXAMP_RETURN_IF_ERROR(Sync("writing the device state"));
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(state.get(), &s, sizeof(s), cudaMemcpyHostToDevice, stream),
                                 "fused optimizer: writing the device state");
    return Sync("writing the device state");
  }

  // Enqueues the kernels of one step on the gradient table `table` (no host bookkeeping, no allocation).
  Status EnqueueStep(const float* const* table);
  // Enqueues the accumulation of the gradients of `table` into `accum`: overwriting when `first` (or, when
  // `first_flag` is set, when the device int64 there is nonzero), else adding. `what` names it in errors.
  Status EnqueueAccumulate(const float* const* table, bool first, const int64_t* first_flag, const char* what) {
    const unsigned blocks = static_cast<unsigned>(layout.chunks.size());
    if (blocks == 0) return Status::Ok();
    AccumulateKernel<<<blocks, kThreads, 0, stream>>>(chunks.get(), table, accum.get(), first ? 1 : 0, first_flag,
                                                      scaler.enabled() ? 1 : 0, state.get());
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "fused optimizer: ", what);
    return Status::Ok();
  }
  // The host's bookkeeping of one enqueued step.
  void CountStep() {
    ++enqueued;
    ++steps_since_base;
    accumulating = false;
  }

  // Copies the pending records back (synchronous) into `drained`.
  Status DrainRing() {
    ONNXAMP_RETURN_IF_ERROR(Sync("draining the step records"));
    retired_scalars.clear();
    if (enqueued == 0) return Status::Ok();
    // Only the pending records: [ring_first, ring_first + enqueued), in at most two pieces where it wraps.
    ring_host.resize(kRecordCapacity);
    const int64_t first_piece = std::min<int64_t>(enqueued, kRecordCapacity - ring_first);
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ring_host.data() + ring_first, ring.get() + ring_first,
                                                 first_piece * sizeof(DeviceRecord), cudaMemcpyDeviceToHost, stream),
                                 "fused optimizer: draining the step records");
    if (enqueued > first_piece) {
      ONNXAMP_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(ring_host.data(), ring.get(), (enqueued - first_piece) * sizeof(DeviceRecord),
                          cudaMemcpyDeviceToHost, stream),
          "fused optimizer: draining the step records");
    }
    ONNXAMP_RETURN_IF_ERROR(Sync("draining the step records"));
    for (int64_t k = 0; k < enqueued; ++k) {
      const DeviceRecord& d = ring_host[(ring_first + k) % kRecordCapacity];
      FusedStepRecord r;
      r.step = d.step;
      r.loss = d.loss;
      r.loss_scale = d.loss_scale;
      r.skipped = d.skipped != 0;
      r.grad_norm = d.grad_norm;
      r.lr = d.lr;
      r.norm_error = d.norm_error != 0;
      drained.push_back(r);
    }
    ring_first = (ring_first + enqueued) % kRecordCapacity;
    enqueued = 0;
    // Keep the scalar table bounded: rebased at the device's step count once kRebaseScalarSteps steps were enqueued
    // since its base. At most kRecordCapacity steps are enqueued between drains, so it never needs more than
    // kRebaseScalarSteps + kRecordCapacity rows (a captured step is captured again after a rebase: a new generation).
    if (steps_since_base >= kRebaseScalarSteps) {
      ONNXAMP_ASSIGN_OR_RETURN(DeviceState d, ReadDeviceState());
      ONNXAMP_RETURN_IF_ERROR(ResetScalars(d.steps_taken));
    }
    return Status::Ok();
  }
};

FusedOptimizer::FusedOptimizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FusedOptimizer::~FusedOptimizer() = default;

StatusOr<std::unique_ptr<FusedOptimizer>> FusedOptimizer::Create(const FusedOptimizerOptions& options,
                                                                 std::vector<int64_t> numels, cudaStream_t stream) {
  // The CPU's checks of every option.
  ONNXAMP_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> check, MakeOptimizer(options.kind, options));
  ONNXAMP_ASSIGN_OR_RETURN(GradScaler scaler, GradScaler::Create(options.scaler));
  ONNXAMP_ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::Create(options.schedule));
  if (!(options.ema_decay >= 0.0 && options.ema_decay < 1.0)) {
    return InvalidArgument("fused optimizer: ema_decay must be in [0, 1), got ", options.ema_decay);
  }
  if (options.swa_start < -1 || (options.swa_start >= 0 && options.ema_decay > 0)) {
    return InvalidArgument("fused optimizer: swa_start must be -1 or >= 0, and not with ema_decay, got ",
                           options.swa_start);
  }
  if (!std::isfinite(options.clip_norm) || options.clip_norm < 0.0) {
    return InvalidArgument("fused optimizer: clip_norm must be finite and >= 0, got ", options.clip_norm);
  }
  if (!std::isfinite(options.clip_value) || options.clip_value < 0.0 ||
      (options.clip_value > 0 && (options.clip_norm > 0 || !(static_cast<float>(options.clip_value) > 0.0f) ||
                                  !std::isfinite(static_cast<float>(options.clip_value))))) {
    return InvalidArgument(
        "fused optimizer: clip_value must be 0 or a positive finite float32, and not with "
        "clip_norm, got ",
        options.clip_value);
  }
  if (options.accumulate < 1) {
    return InvalidArgument("fused optimizer: accumulate must be >= 1, got ", options.accumulate);
  }
  if (options.low_precision != DType::kUndefined && options.low_precision != DType::kFloat16 &&
      options.low_precision != DType::kBFloat16) {
    return InvalidArgument("fused optimizer: the low-precision copy must be float16 or bfloat16, got ",
                           DTypeName(options.low_precision));
  }
  FusedOptimizerOptions opts = options;
  if (opts.groups.of.empty()) opts.groups = ParamGroups::Single(numels.size());
  // PlanFusedLayout checks the count and the signs of the groups; the table's width here.
  if (opts.groups.groups.empty() ||
      opts.groups.groups.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgument("fused optimizer: ", opts.groups.groups.size(), " parameter groups");
  }
  for (const int32_t g : opts.groups.of) {
    if (g >= 0 && static_cast<size_t>(g) >= opts.groups.groups.size()) {
      return InvalidArgument("fused optimizer: group ", g, " of ", opts.groups.groups.size());
    }
  }
  for (const ParamGroup& g : opts.groups.groups) {
    if (!std::isfinite(g.lr_scale) || g.lr_scale < 0) {
      return InvalidArgument("fused optimizer: a group's learning-rate factor must be finite and >= 0, got ",
                             g.lr_scale);
    }
  }
  ONNXAMP_ASSIGN_OR_RETURN(FusedLayout layout,
                           PlanFusedLayout(numels, kFusedChunkElements, opts.gradient_overflow_at, opts.groups.of));
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device_index), "fused optimizer: device ", options.device_index);

  auto impl = std::make_unique<Impl>(opts, stream, std::move(layout), std::move(scaler), std::move(schedule));
  Impl& m = *impl;
  m.state_names = check->state_names();
  m.low = options.low_precision == DType::kFloat16    ? kLowHalf
          : options.low_precision == DType::kBFloat16 ? kLowBFloat16
                                                      : kLowNone;
  const size_t flat = static_cast<size_t>(m.layout.flat_size);
  const size_t n = m.layout.numels.size();
  const size_t nchunks = m.layout.chunks.size();
  ONNXAMP_RETURN_IF_ERROR(AllocDevice(&m.params, flat, "parameters", &m.device_bytes));
  if (options.accumulate > 1)
    ONNXAMP_RETURN_IF_ERROR(AllocDevice(&m.accum, flat, "accumulated gradients", &m.device_bytes));
  for (size_t k = 0; k < m.state_names.size(); ++k) {
    ONNXAMP_RETURN_IF_ERROR(AllocDevice(&m.states[k], flat, m.state_names[k].c_str(), &m.device_bytes));
  }
  if (opts.averaging()) ONNXAMP_RETURN_IF_ERROR(AllocDevice(&m.ema, flat, "moving average", &m.device_bytes));
  if (m.low != kLowNone)
    ONNXAMP_RETURN_IF_ERROR(AllocDevice(&m.low_copy, flat, "low-precision copies", &m.device_bytes));
  ONNXAMP_RETURN_IF_ERROR(AllocDevice(&m.chunks, std::max<size_t>(nchunks, 1), "chunk table", &m.device_bytes));
  ONNXAMP_RETURN_IF_ERROR(AllocDevice(&m.chunk_begin, n + 1, "chunk table", &m.device_bytes));
  ONNXAMP_RETURN_IF_ERROR(AllocDevice(&m.chunk_sums, std::max<size_t>(nchunks, 1), "norms", &m.device_bytes));
  ONNXAMP_RETURN_IF_ERROR(AllocDevice(&m.norms, std::max<size_t>(n, 1), "norms", &m.device_bytes));
  ONNXAMP_RETURN_IF_ERROR(AllocDevice(&m.state, 1, "state", &m.device_bytes));
  ONNXAMP_RETURN_IF_ERROR(AllocDevice(&m.ring, kRecordCapacity, "step records", &m.device_bytes));
  ONNXAMP_RETURN_IF_ERROR(AllocDevice(&m.grad_table, std::max<size_t>(n, 1), "gradient table", &m.device_bytes));
  for (int slot = 0; slot < 2; ++slot) {
    void* host = nullptr;
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMallocHost(&host, std::max<size_t>(n, 1) * sizeof(const float*)),
                                 "fused optimizer: gradient table");
    m.pinned_tables[slot].reset(static_cast<const float**>(host));
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&m.table_events[slot], cudaEventDisableTiming),
                                 "fused optimizer: gradient table");
  }
  m.update = m.UpdateSlots();
  // Zeroed buffers (padding included), the static tables and the initial state; synchronous.
  for (float* p :
       {m.params.get(), m.accum.get(), m.states[0].get(), m.states[1].get(), m.states[2].get(), m.ema.get()}) {
    if (p != nullptr)
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p, 0, flat * sizeof(float), m.stream), "fused optimizer");
  }
  if (m.low_copy)
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(m.low_copy.get(), 0, flat * 2, m.stream), "fused optimizer");
  if (nchunks > 0) {
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(m.chunks.get(), m.layout.chunks.data(), nchunks * sizeof(FusedChunk),
                                                 cudaMemcpyHostToDevice, m.stream),
                                 "fused optimizer: chunk table");
  }
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(m.chunk_begin.get(), m.layout.chunk_begin.data(),
                                               (n + 1) * sizeof(int32_t), cudaMemcpyHostToDevice, m.stream),
                               "fused optimizer: chunk table");
  if (m.accum) {
    std::vector<const float*> table(n);
    for (size_t i = 0; i < n; ++i) table[i] = m.accum.get() + m.layout.offsets[i];
    ONNXAMP_RETURN_IF_ERROR(AllocDevice(&m.accum_table, std::max<size_t>(n, 1), "accumulation table", &m.device_bytes));
    if (n > 0) {
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(m.accum_table.get(), table.data(), n * sizeof(const float*),
                                                   cudaMemcpyHostToDevice, m.stream),
                                   "fused optimizer: accumulation table");
    }
  }
  DeviceState s;
  s.scale = m.scaler.scale();
  s.seed = s.scale / static_cast<float>(options.accumulate);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(m.state.get(), &s, sizeof(s), cudaMemcpyHostToDevice, m.stream),
                               "fused optimizer: state");
  ONNXAMP_RETURN_IF_ERROR(m.ResetScalars(0));
  ONNXAMP_RETURN_IF_ERROR(m.Sync("creating"));
  return std::unique_ptr<FusedOptimizer>(new FusedOptimizer(std::move(impl)));
}

size_t FusedOptimizer::size() const { return impl_->layout.numels.size(); }
int64_t FusedOptimizer::numel(size_t i) const { return impl_->layout.numels.at(i); }
float* FusedOptimizer::param(size_t i) const { return impl_->params.get() + impl_->layout.offsets.at(i); }
void* FusedOptimizer::low_precision(size_t i) const {
  return impl_->low_copy ? impl_->low_copy.get() + impl_->layout.offsets.at(i) : nullptr;
}
const float* FusedOptimizer::seed() const { return &impl_->state.get()->seed; }
uint64_t FusedOptimizer::device_bytes() const { return impl_->device_bytes; }

const int32_t* FusedOptimizer::found_inf() const { return &impl_->state.get()->found_inf; }

const float* FusedOptimizer::ema_weight() const { return &impl_->state.get()->ema_weight; }

std::vector<std::string> FusedOptimizer::state_names() const {
  std::vector<std::string> names = impl_->state_names;
  if (impl_->ema) names.push_back("ema");
  return names;
}

Status FusedOptimizer::SwapEma() {
  Impl& m = *impl_;
  if (!m.ema) return FailedPrecondition("fused optimizer: SwapEma: no moving average is kept");
  const int64_t n = m.layout.flat_size;
  if (n == 0) return Status::Ok();
  const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 4096));
  SwapKernel<<<blocks, 256, 0, m.stream>>>(m.params.get(), m.ema.get(), m.low_copy.get(), n, m.low);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "fused optimizer: SwapEma");
  return Status::Ok();
}

Status FusedOptimizer::LoadParam(size_t i, const float* host) {
  Impl& m = *impl_;
  ONNXAMP_RETURN_IF_ERROR(m.CheckIndex(i, "LoadParam"));
  ONNXAMP_RETURN_IF_ERROR(m.Sync("LoadParam"));
  const int64_t n = m.layout.numels[i];
  if (n == 0) return Status::Ok();
  float* dst = param(i);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, host, n * sizeof(float), cudaMemcpyHostToDevice, m.stream),
                               "fused optimizer: LoadParam of parameter ", i);
  if (m.ema) {
    ONNXAMP_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(m.ema.get() + m.layout.offsets[i], dst, n * sizeof(float), cudaMemcpyDeviceToDevice, m.stream),
        "fused optimizer: LoadParam of parameter ", i);
  }
  if (m.low != kLowNone) {
    const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 4096));
    LowPrecisionKernel<<<blocks, 256, 0, m.stream>>>(dst, static_cast<uint16_t*>(low_precision(i)), n, m.low);
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "fused optimizer: LoadParam of parameter ", i);
  }
  return m.Sync("LoadParam");
}

Status FusedOptimizer::ReadParam(size_t i, float* host) const {
  Impl& m = *impl_;
  ONNXAMP_RETURN_IF_ERROR(m.CheckIndex(i, "ReadParam"));
  ONNXAMP_RETURN_IF_ERROR(m.Sync("ReadParam"));
  const int64_t n = m.layout.numels[i];
  if (n == 0) return Status::Ok();
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, param(i), n * sizeof(float), cudaMemcpyDeviceToHost, m.stream),
                               "fused optimizer: ReadParam of parameter ", i);
  return m.Sync("ReadParam");
}

Status FusedOptimizer::LoadState(const std::string& name, size_t i, const float* host) {
  Impl& m = *impl_;
  ONNXAMP_RETURN_IF_ERROR(m.CheckIndex(i, "LoadState"));
  float* buffer = m.state_buffer(name);
  if (buffer == nullptr) return InvalidArgument("fused optimizer: LoadState: this optimizer keeps no '", name, "'");
  ONNXAMP_RETURN_IF_ERROR(m.Sync("LoadState"));
  const int64_t n = m.layout.numels[i];
  if (n == 0) return Status::Ok();
  ONNXAMP_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(buffer + m.layout.offsets[i], host, n * sizeof(float), cudaMemcpyHostToDevice, m.stream),
      "fused optimizer: LoadState of '", name, "' of parameter ", i);
  return m.Sync("LoadState");
}

Status FusedOptimizer::ReadState(const std::string& name, size_t i, float* host) const {
  Impl& m = *impl_;
  ONNXAMP_RETURN_IF_ERROR(m.CheckIndex(i, "ReadState"));
  const float* buffer = m.state_buffer(name);
  if (buffer == nullptr) return InvalidArgument("fused optimizer: ReadState: this optimizer keeps no '", name, "'");
  ONNXAMP_RETURN_IF_ERROR(m.Sync("ReadState"));
  const int64_t n = m.layout.numels[i];
  if (n == 0) return Status::Ok();
  ONNXAMP_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host, buffer + m.layout.offsets[i], n * sizeof(float), cudaMemcpyDeviceToHost, m.stream),
      "fused optimizer: ReadState of '", name, "' of parameter ", i);
  return m.Sync("ReadState");
}

std::optional<GradScalerState> FusedOptimizer::ScalerState() const {
  Impl& m = *impl_;
  std::optional<GradScalerState> s = m.scaler.State();
  if (!s || m.scaler.mode() != LossScaleMode::kDynamic) return s;
  StatusOr<DeviceState> d = m.ReadDeviceState();
  ONNXAMP_CHECK(d.ok(), "fused optimizer: ScalerState: ", d.status().message());
  s->scale = d->scale;
  s->growth_tracker = d->growth_tracker;
  return s;
}

Status FusedOptimizer::RestoreScaler(const GradScalerState& state) {
  Impl& m = *impl_;
  // Validated against the device's current state, as GradScaler::Restore checks it.
  GradScaler restored = m.scaler;
  ONNXAMP_RETURN_IF_ERROR(restored.Restore(state));
  if (!restored.enabled()) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(DeviceState d, m.ReadDeviceState());
  d.scale = restored.scale();
  d.growth_tracker = restored.growth_tracker();
  d.seed = d.scale / static_cast<float>(m.options.accumulate);
  ONNXAMP_RETURN_IF_ERROR(m.WriteDeviceState(d));
  m.scaler = std::move(restored);
  ++m.generation;  // a captured step holds the scaler's constants
  return Status::Ok();
}

int64_t FusedOptimizer::steps_taken() const {
  StatusOr<DeviceState> d = impl_->ReadDeviceState();
  ONNXAMP_CHECK(d.ok(), "fused optimizer: steps_taken: ", d.status().message());
  return d->steps_taken;
}

Status FusedOptimizer::SetSchedule(const LrSchedule& schedule) {
  Impl& m = *impl_;
  ONNXAMP_ASSIGN_OR_RETURN(DeviceState d, m.ReadDeviceState());  // the steps queued so far have run with the old rates
  LrSchedule old = m.schedule;
  m.schedule = schedule;
  Status st = m.ResetScalars(d.steps_taken);
  if (!st.ok()) m.schedule = std::move(old);  // the trainer keeps its schedule on failure too
  return st;
}

Status FusedOptimizer::RestoreCounters(int64_t steps_done, int64_t steps_taken, int64_t skipped) {
  Impl& m = *impl_;
  if (steps_done < 0 || steps_taken < 0 || skipped < 0 || steps_taken + skipped != steps_done) {
    return InvalidArgument("fused optimizer: inconsistent step counts: ", steps_done, " done, ", steps_taken,
                           " taken, ", skipped, " skipped");
  }
  ONNXAMP_ASSIGN_OR_RETURN(DeviceState d, m.ReadDeviceState());
  d.steps_done = steps_done;
  d.steps_taken = steps_taken;
  d.skipped = skipped;
  ONNXAMP_RETURN_IF_ERROR(m.WriteDeviceState(d));
  return m.ResetScalars(steps_taken);
}

Status FusedOptimizer::Accumulate(const std::vector<const float*>& grads) {
  Impl& m = *impl_;
  if (!m.accum) {
    return FailedPrecondition("fused optimizer: Accumulate needs accumulate > 1 (it is ", m.options.accumulate, ")");
  }
  ONNXAMP_ASSIGN_OR_RETURN(const float* const* table, m.GradTable(grads, "Accumulate"));
  ONNXAMP_RETURN_IF_ERROR(m.EnqueueAccumulate(table, !m.accumulating, nullptr, "Accumulate"));
  m.accumulating = true;
  return Status::Ok();
}

Status FusedOptimizer::AddLoss(const float* loss, double weight) {
  Impl& m = *impl_;
  if (loss == nullptr) return InvalidArgument("fused optimizer: AddLoss: the loss is null");
  if (!std::isfinite(weight) || weight < 0.0) {
    return InvalidArgument("fused optimizer: AddLoss: the weight must be finite and >= 0, got ", weight);
  }
  AddLossKernel<<<1, 1, 0, m.stream>>>(m.state.get(), loss, weight);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "fused optimizer: AddLoss");
  return Status::Ok();
}

Status FusedOptimizer::Step(const std::vector<const float*>& grads) {
  Impl& m = *impl_;
  const float* const* table = nullptr;
  if (grads.empty() && m.layout.numels.size() > 0) {
    if (!m.accumulating) {
      return FailedPrecondition("fused optimizer: Step without gradients needs Accumulate first");
    }
    table = m.accum_table.get();
  } else {
    ONNXAMP_ASSIGN_OR_RETURN(table, m.GradTable(grads, "Step"));
  }
  if (m.enqueued >= kRecordCapacity) ONNXAMP_RETURN_IF_ERROR(m.DrainRing());
  ONNXAMP_RETURN_IF_ERROR(m.EnsureScalars());
  ONNXAMP_RETURN_IF_ERROR(m.EnqueueStep(table));
  m.CountStep();
  return Status::Ok();
}

Status FusedOptimizer::PrepareGraphStep() {
  Impl& m = *impl_;
  if (m.enqueued >= kRecordCapacity) ONNXAMP_RETURN_IF_ERROR(m.DrainRing());
  return m.EnsureScalars();
}

uint64_t FusedOptimizer::generation() const { return impl_->generation; }

Status FusedOptimizer::BindCaptureGradients(const std::vector<const float*>& grads) {
  Impl& m = *impl_;
  if (grads.size() != m.layout.numels.size()) {
    return InvalidArgument("fused optimizer: BindCaptureGradients got ", grads.size(), " gradients for ",
                           m.layout.numels.size(), " parameters");
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i] == nullptr && m.layout.numels[i] > 0) {
      return InvalidArgument("fused optimizer: BindCaptureGradients: the gradient of parameter ", i, " is null");
    }
  }
  if (!m.capture_table) {
    ONNXAMP_RETURN_IF_ERROR(
        AllocDevice(&m.capture_table, std::max<size_t>(grads.size(), 1), "capture table", &m.device_bytes));
  }
  // Work already queued may still read the old table (a graph launched before): the copy is ordered after it.
  ONNXAMP_RETURN_IF_ERROR(m.Sync("binding the captured gradients"));
  if (!grads.empty()) {
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(m.capture_table.get(), grads.data(),
                                                 grads.size() * sizeof(const float*), cudaMemcpyHostToDevice, m.stream),
                                 "fused optimizer: the captured gradient table");
  }
  ONNXAMP_RETURN_IF_ERROR(m.Sync("binding the captured gradients"));
  m.capture_grads = grads;
  return Status::Ok();
}

Status FusedOptimizer::CaptureAccumulate(const std::vector<const float*>& grads, const int64_t* first) {
  Impl& m = *impl_;
  if (!m.accum) {
    return FailedPrecondition("fused optimizer: CaptureAccumulate needs accumulate > 1 (it is ", m.options.accumulate,
                              ")");
  }
  if (first == nullptr)
    return InvalidArgument("fused optimizer: CaptureAccumulate: the first-micro-batch flag is null");
  if (m.capture_grads.empty() || grads != m.capture_grads) {
    return FailedPrecondition("fused optimizer: CaptureAccumulate on gradients not bound with BindCaptureGradients");
  }
  return m.EnqueueAccumulate(m.capture_table.get(), false, first, "CaptureAccumulate");
}

Status FusedOptimizer::CaptureStep(const std::vector<const float*>& grads) {
  Impl& m = *impl_;
  if (grads.empty() && !m.layout.numels.empty()) {
    if (!m.accum) return FailedPrecondition("fused optimizer: CaptureStep without gradients needs accumulate > 1");
  } else if (m.capture_grads.empty() || grads != m.capture_grads) {
    return FailedPrecondition("fused optimizer: CaptureStep on gradients not bound with BindCaptureGradients");
  }
  if (m.enqueued >= kRecordCapacity || m.steps_since_base + 1 > m.scalar_count) {
    return FailedPrecondition("fused optimizer: CaptureStep needs PrepareGraphStep first");
  }
  return m.EnqueueStep(grads.empty() ? m.accum_table.get() : m.capture_table.get());
}

void FusedOptimizer::GraphStepLaunched() { impl_->CountStep(); }

Status FusedOptimizer::Impl::EnqueueStep(const float* const* table) {
  Impl& m = *this;
  const unsigned blocks = static_cast<unsigned>(m.layout.chunks.size());
  const int32_t clip = m.options.clip_norm > 0 ? 1 : 0;
  const float clip_value = static_cast<float>(m.options.clip_value);
  const int32_t check = m.scaler.enabled() ? 1 : 0;
  DeviceState* state = m.state.get();
  // found_inf and norm_error are the adjacent int32 members of DeviceState: both cleared.
  static_assert(offsetof(DeviceState, norm_error) == offsetof(DeviceState, found_inf) + sizeof(int32_t));
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(&state->found_inf, 0, 2 * sizeof(int32_t), m.stream),
                               "fused optimizer: Step");
  if (blocks > 0) {
    UnscaleKernel<<<blocks, kThreads, 0, m.stream>>>(m.chunks.get(), table, state, check, clip, m.accum ? 0 : 1,
                                                     m.chunk_sums.get());
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "fused optimizer: Step (unscale)");
  }
  if (clip) {
    ClipNormKernel<<<1, kClipThreads, 0, m.stream>>>(m.chunk_begin.get(), static_cast<int32_t>(m.layout.numels.size()),
                                                     m.chunk_sums.get(), m.norms.get(), state,
                                                     static_cast<float>(m.options.clip_norm));
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "fused optimizer: Step (clip)");
  }
  if (blocks > 0) {
    UpdateBuffers b = m.update;
    b.grads = table;
    // One instantiation of the update kernel per optimizer.
    auto launch = [&](auto kind) {
      UpdateKernel<decltype(kind)::value><<<blocks, kThreads, 0, m.stream>>>(
          m.chunks.get(), b, state, m.scalars.get(), m.scalar_base, m.groups(), check, clip, clip_value, m.low);
    };
    switch (m.options.kind) {
      case FusedOptimizerKind::kSgd:
        launch(std::integral_constant<FusedOptimizerKind, FusedOptimizerKind::kSgd>());
        break;
      case FusedOptimizerKind::kAdam:
        launch(std::integral_constant<FusedOptimizerKind, FusedOptimizerKind::kAdam>());
        break;
      case FusedOptimizerKind::kAdamW:
        launch(std::integral_constant<FusedOptimizerKind, FusedOptimizerKind::kAdamW>());
        break;
      case FusedOptimizerKind::kRadam:
        launch(std::integral_constant<FusedOptimizerKind, FusedOptimizerKind::kRadam>());
        break;
      case FusedOptimizerKind::kNadam:
        launch(std::integral_constant<FusedOptimizerKind, FusedOptimizerKind::kNadam>());
        break;
      case FusedOptimizerKind::kRmsprop:
        launch(std::integral_constant<FusedOptimizerKind, FusedOptimizerKind::kRmsprop>());
        break;
      case FusedOptimizerKind::kAdagrad:
        launch(std::integral_constant<FusedOptimizerKind, FusedOptimizerKind::kAdagrad>());
        break;
      case FusedOptimizerKind::kLion:
        launch(std::integral_constant<FusedOptimizerKind, FusedOptimizerKind::kLion>());
        break;
    }
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "fused optimizer: Step (update)");
  }
  BookkeepingKernel<<<1, 1, 0, m.stream>>>(state, m.scalars.get(), m.scalar_base, m.groups(), m.ring.get(),
                                           m.scaler_params(), clip, static_cast<float>(m.options.accumulate));
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "fused optimizer: Step (bookkeeping)");
  return Status::Ok();
}

StatusOr<std::vector<FusedStepRecord>> FusedOptimizer::Drain() {
  Impl& m = *impl_;
  ONNXAMP_RETURN_IF_ERROR(m.DrainRing());
  // A record with norm_error is returned as the others: Trainer::Drain counts the steps before it and reports it.
  std::vector<FusedStepRecord> out = std::move(m.drained);
  m.drained.clear();
  return out;
}

}  // namespace onnxamp::trainer::cuda
