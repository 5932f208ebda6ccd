// Gradient clipping: the global norm (per-parameter float32 norms, the norm of norms, the clip coefficient), and by
// value.
#include "trainer/optim/clip.h"

#include <cmath>
#include <vector>

#include "trainer/optim/optim_math.h"
#include "trainer/optim/ranges.h"

namespace onnxamp::trainer {

float L2Norm(std::span<const float> values) {
  constexpr size_t kLanes = 8;
  float lanes[kLanes] = {};
  const size_t n = values.size();
  const size_t whole = n - n % kLanes;
  size_t i = 0;
  for (; i < whole; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) lanes[l] += values[i + l] * values[i + l];
  }
  float sum = lanes[0];
  for (size_t l = 1; l < kLanes; ++l) sum = sum + lanes[l];
  for (; i < n; ++i) sum += values[i] * values[i];
  return std::sqrt(sum);
}

float GlobalGradNorm(const ParameterStore& store) {
  std::vector<float> norms;
  for (size_t i = 0; i < store.size(); ++i) {
    if (store.has_grad(i)) norms.push_back(L2Norm(store.grad(i)));
  }
  return L2Norm(norms);
}

StatusOr<float> ClipGradNorm(ParameterStore& store, double max_norm) {
  if (!std::isfinite(max_norm) || max_norm <= 0.0) {
    return InvalidArgument("gradient clipping: max_norm must be finite and > 0, got ", max_norm);
  }
  std::vector<float> norms;
  std::vector<size_t> params;
  for (size_t i = 0; i < store.size(); ++i) {
    if (!store.has_grad(i)) continue;
    norms.push_back(L2Norm(store.grad(i)));
    params.push_back(i);
  }
  const float total = L2Norm(norms);
  if (!optim_math::IsFinite(total)) {
    for (size_t k = 0; k < norms.size(); ++k) {
      if (!optim_math::IsFinite(norms[k])) {
        return FailedPrecondition("gradient clipping: the gradient norm of parameter '", store.name(params[k]), "' is ",
                                  norms[k], " (it holds inf/NaN, or its sum of squares overflowed float32)");
      }
    }
    return FailedPrecondition("gradient clipping: the total gradient norm is ", total,
                              " (the sum of squares of the per-parameter norms overflowed float32)");
  }
  const float coef = optim_math::ClipCoefficient(total, static_cast<float>(max_norm));
  for (size_t i : params) {
    for (float& g : store.grad(i)) g = g * coef;
  }
  return total;
}

Status ClipGradValue(ParameterStore& store, double clip_value, exec::ThreadPool* pool) {
  if (!std::isfinite(clip_value) || clip_value <= 0.0) {
    return InvalidArgument("gradient clipping: clip_value must be finite and > 0, got ", clip_value);
  }
  const float v = static_cast<float>(clip_value);
  for (size_t i = 0; i < store.size(); ++i) {
    if (!store.has_grad(i)) continue;
    float* g = store.grad(i).data();
    ForRanges(pool, store.numel(i), [&](size_t b, size_t e) {
      for (size_t j = b; j < e; ++j) g[j] = optim_math::ClampElement(g[j], v);
    });
  }
  return Status::Ok();
}

}  // namespace onnxamp::trainer
