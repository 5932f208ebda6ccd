// Gradient clipping over a ParameterStore: by the global norm (torch.nn.utils.clip_grad_norm_ with norm_type 2) or
// by value (torch.nn.utils.clip_grad_value_).
#pragma once

#include <cstddef>
#include <span>

#include "runtime/common/status.h"
#include "runtime/executor/thread_pool.h"
#include "trainer/state/parameter_store.h"

namespace onnxamp::trainer {

// The float32 L2 norm of `values`, summed in the order of PyTorch's vectorised CPU kernel for
// torch.linalg.vector_norm(ord=2) with AVX2 (8 interleaved float32 partial sums of squares over the whole multiples
// of 8, the partial sums added left to right, then the remaining elements), then sqrt. PyTorch's AVX-512, threaded
// and CUDA reductions sum in other orders: results agree to rounding, not bitwise.
float L2Norm(std::span<const float> values);

// The global norm of the gradients that exist (store.has_grad): the L2 norm of the per-parameter L2 norms, as
// clip_grad_norm_ computes it (vector_norm(stack(norms))). May be inf or NaN.
float GlobalGradNorm(const ParameterStore& store);

// clip_grad_norm_(max_norm, norm_type=2, error_if_nonfinite=True): computes the global norm; when it is finite,
// multiplies every existing gradient by optim_math::ClipCoefficient(total, max_norm) (clamped to at most 1, as
// PyTorch does; a factor of 1 leaves the bits unchanged) and returns the total norm before clipping. When it is inf or
// NaN it changes nothing and fails (FailedPrecondition) naming the first parameter whose gradient norm is not
// finite, or saying that the sum of squares overflowed float32. (PyTorch's default error_if_nonfinite=False would
// instead scale every gradient by 0 or NaN; after GradScaler's check, a non-finite norm of finite gradients can
// only come from that overflow.) max_norm must be finite and > 0.
StatusOr<float> ClipGradNorm(ParameterStore& store, double max_norm);

// clip_grad_value_(clip_value): every element of every existing gradient clamped to [-clip_value, clip_value]
// (optim_math::ClampElement, with clip_value rounded to float32 as ATen takes it; NaN stays NaN), in ranges on `pool`
// (null: the calling thread). clip_value must be finite and > 0.
Status ClipGradValue(ParameterStore& store, double clip_value, exec::ThreadPool* pool = nullptr);

}  // namespace onnxamp::trainer
