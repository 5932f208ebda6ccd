// GradScaler: dynamic loss scaling exactly as torch.amp.GradScaler (bit for bit), plus a min_scale floor and a
// static-scale mode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "runtime/common/status.h"
#include "runtime/executor/thread_pool.h"

namespace onnxamp::trainer {

class ParameterStore;

// How the scale evolves.
enum class LossScaleMode {
  kDynamic,   // torch.amp.GradScaler: back off on inf/NaN, grow after growth_interval clean steps
  kStatic,    // `--loss-scale N`: the scale never changes; steps with inf/NaN gradients are still skipped
  kDisabled,  // plain training: scale 1, gradients are neither unscaled nor checked (GradScaler(enabled=False))
};

struct GradScalerOptions {
  LossScaleMode mode = LossScaleMode::kDynamic;
  double init_scale = 65536.0;  // rounded to float32, as torch.full((), init_scale, dtype=float32)
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  // Beyond PyTorch (dynamic mode): a backoff never takes the scale below min_scale (rounded to float32). 0 means no
  // floor, which is PyTorch's behaviour (repeated overflow can then drive the scale to 0).
  double min_scale = 0.0;
};

// The scaler's state under the keys of GradScaler.state_dict(), for checkpoints.
struct GradScalerState {
  float scale = 65536.0f;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  int32_t growth_tracker = 0;  // "_growth_tracker": consecutive clean steps since the last growth or backoff
};

// The training step's use of the scaler:
//   seed the loss gradient with scale();
//   found_inf = UnscaleAndCheck(grads);           // every gradient buffer of the step, OR-ed together
//   if (!found_inf) { clip; optimizer step; advance the LR schedule; }
//   Update(found_inf);
class GradScaler {
 public:
  // Validates the options as PyTorch does (growth_factor > 1, backoff_factor < 1) and more: init_scale finite and
  // > 0, backoff_factor > 0, 1 <= growth_interval <= INT32_MAX (the tracker is an int32), 0 <= min_scale <=
  // init_scale. A static scale must be finite and > 0; the factors are not used.
  static StatusOr<GradScaler> Create(const GradScalerOptions& options);

  LossScaleMode mode() const { return mode_; }
  bool enabled() const { return mode_ != LossScaleMode::kDisabled; }
  // The current scale (1 when disabled), to seed the loss gradient with.
  float scale() const { return enabled() ? scale_ : 1.0f; }
  // (float)(1.0 / (double)scale()): the factor gradients are multiplied by.
  float inv_scale() const;
  int32_t growth_tracker() const { return growth_tracker_; }
  float min_scale() const { return min_scale_; }

  // Multiplies the n gradients in place by inv_scale() (elementwise in float32, as
  // _amp_foreach_non_finite_check_and_unscale_: every element, even after a non-finite one was seen) and returns
  // true when any element was inf or NaN before the multiplication. Disabled: touches nothing, returns false.
  bool UnscaleAndCheck(float* grads, size_t n) const;
  // The same over the store's whole gradient buffer (padding and parameters without a gradient hold zeros).
  // On `pool` in ranges (trainer/optim/ranges.h) when given: the same bits, the flags OR-ed.
  bool UnscaleAndCheck(ParameterStore& store, exec::ThreadPool* pool = nullptr) const;

  // Ends a step: _amp_update_scale_ in dynamic mode (see optim_math::UpdateScale); nothing in static and disabled
  // modes.
  void Update(bool found_inf);

  // GradScaler.state_dict(): nullopt when disabled (PyTorch returns an empty dict). Static mode reports its scale
  // with PyTorch's default factors and interval and a tracker of 0.
  std::optional<GradScalerState> State() const;
  // GradScaler.load_state_dict(). Dynamic mode takes all five values (PyTorch lets a checkpoint override the
  // constructor's factors), validated like Create plus 0 <= growth_tracker < growth_interval and scale >= min_scale.
  // Static mode takes only the scale (finite, > 0). Disabled: a no-op, as in PyTorch. On error nothing changes.
  Status Restore(const GradScalerState& state);

 private:
  GradScaler() = default;

  LossScaleMode mode_ = LossScaleMode::kDynamic;
  float scale_ = 65536.0f;
  double growth_factor_ = 2.0;
  double backoff_factor_ = 0.5;
  int32_t growth_interval_ = 2000;
  int32_t growth_tracker_ = 0;
  float min_scale_ = 0.0f;
};

}  // namespace onnxamp::trainer
