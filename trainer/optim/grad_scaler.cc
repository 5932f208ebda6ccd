// GradScaler: option checks, unscale + non-finite check over flat buffers, and the scale update.
#include "trainer/optim/grad_scaler.h"

#include <atomic>
#include <cmath>
#include <limits>

#include "trainer/optim/optim_math.h"
#include "trainer/optim/ranges.h"
#include "trainer/state/parameter_store.h"

namespace onnxamp::trainer {
namespace {

Status CheckScale(double scale, const char* what) {
  if (!std::isfinite(scale) || scale <= 0.0 || !std::isfinite(static_cast<float>(scale)) ||
      static_cast<float>(scale) == 0.0f) {
    return InvalidArgument("loss scaler: ", what, " must be a finite float32 > 0, got ", scale);
  }
  return Status::Ok();
}

// The dynamic-mode checks shared by Create and Restore.
Status CheckDynamic(double growth_factor, double backoff_factor, int64_t growth_interval) {
  if (!(growth_factor > 1.0) || !std::isfinite(growth_factor)) {
    return InvalidArgument("loss scaler: growth_factor must be finite and > 1, got ", growth_factor);
  }
  if (!(backoff_factor > 0.0 && backoff_factor < 1.0)) {
    return InvalidArgument("loss scaler: backoff_factor must be in (0, 1), got ", backoff_factor);
  }
  if (growth_interval < 1 || growth_interval > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument("loss scaler: growth_interval must be in [1, 2^31-1], got ", growth_interval);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<GradScaler> GradScaler::Create(const GradScalerOptions& options) {
  GradScaler scaler;
  scaler.mode_ = options.mode;
  if (options.mode == LossScaleMode::kDisabled) return scaler;
  ONNXAMP_RETURN_IF_ERROR(
      CheckScale(options.init_scale, options.mode == LossScaleMode::kStatic ? "the static scale" : "init_scale"));
  scaler.scale_ = static_cast<float>(options.init_scale);
  if (options.mode == LossScaleMode::kStatic) return scaler;
  ONNXAMP_RETURN_IF_ERROR(CheckDynamic(options.growth_factor, options.backoff_factor, options.growth_interval));
  if (!(options.min_scale >= 0.0) || static_cast<float>(options.min_scale) > scaler.scale_) {
    return InvalidArgument("loss scaler: min_scale must be in [0, init_scale = ", options.init_scale, "], got ",
                           options.min_scale);
  }
  scaler.growth_factor_ = options.growth_factor;
  scaler.backoff_factor_ = options.backoff_factor;
  scaler.growth_interval_ = static_cast<int32_t>(options.growth_interval);
  scaler.min_scale_ = static_cast<float>(options.min_scale);
  return scaler;
}

float GradScaler::inv_scale() const { return optim_math::InverseScale(scale()); }

bool GradScaler::UnscaleAndCheck(float* grads, size_t n) const {
  if (!enabled()) return false;
  const float inv = inv_scale();
  bool found_inf = false;
  for (size_t i = 0; i < n; ++i) {
    const float g = grads[i];
    if (!optim_math::IsFinite(g)) found_inf = true;
    grads[i] = optim_math::UnscaleElement(g, inv);
  }
  return found_inf;
}

bool GradScaler::UnscaleAndCheck(ParameterStore& store, exec::ThreadPool* pool) const {
  if (!enabled()) return false;
  std::atomic<bool> found_inf{false};
  float* grads = store.grads_data();
  ForRanges(pool, store.flat_size(), [&](size_t b, size_t e) {
    if (UnscaleAndCheck(grads + b, e - b)) found_inf.store(true, std::memory_order_relaxed);
  });
  return found_inf.load();
}

void GradScaler::Update(bool found_inf) {
  if (mode_ != LossScaleMode::kDynamic) return;
  optim_math::UpdateScale(&scale_, &growth_tracker_, found_inf, growth_factor_, backoff_factor_, growth_interval_,
                          min_scale_);
}

std::optional<GradScalerState> GradScaler::State() const {
  if (!enabled()) return std::nullopt;
  GradScalerState state;
  state.scale = scale_;
  state.growth_factor = growth_factor_;
  state.backoff_factor = backoff_factor_;
  state.growth_interval = growth_interval_;
  state.growth_tracker = growth_tracker_;
  return state;
}

Status GradScaler::Restore(const GradScalerState& state) {
  if (!enabled()) return Status::Ok();
  ONNXAMP_RETURN_IF_ERROR(CheckScale(state.scale, "the checkpoint's scale"));
  if (mode_ == LossScaleMode::kStatic) {
    scale_ = state.scale;
    return Status::Ok();
  }
  ONNXAMP_RETURN_IF_ERROR(CheckDynamic(state.growth_factor, state.backoff_factor, state.growth_interval));
  if (state.growth_tracker < 0 || state.growth_tracker >= state.growth_interval) {
    return InvalidArgument("loss scaler: the checkpoint's _growth_tracker must be in [0, growth_interval = ",
                           state.growth_interval, "), got ", state.growth_tracker);
  }
  if (state.scale < min_scale_) {
    return InvalidArgument("loss scaler: the checkpoint's scale ", state.scale, " is below min_scale ", min_scale_);
  }
  scale_ = state.scale;
  growth_factor_ = state.growth_factor;
  backoff_factor_ = state.backoff_factor;
  growth_interval_ = static_cast<int32_t>(state.growth_interval);
  growth_tracker_ = state.growth_tracker;
  return Status::Ok();
}

}  // namespace onnxamp::trainer
