// Building blocks of the normalisation ops (BatchNormalization, LayerNormalization, GroupNormalization,
// InstanceNormalization): sums and squared deviations of contiguous runs accumulated in eight lanes of type A
// (float for fp16/bf16/float, double for double), and the affine normalisation of a run.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce.h"

namespace onnxamp::ops::reduce {

// Accumulator of the normalisation statistics of T: at least float.
template <typename T>
using NormAcc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Sum of x[0..n).
template <typename A, typename T>
inline A SumRun(const T* x, int64_t n) {
  A lanes[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += static_cast<A>(LoadFast<T>(x[j + l]));
  }
  for (; j < n; ++j) lanes[0] += static_cast<A>(LoadFast<T>(x[j]));
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// Sum of (x[j] - mean)^2 over [0..n).
template <typename A, typename T>
inline A SumSquaredDeviationRun(const T* x, int64_t n, A mean) {
  A lanes[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) {
      const A d = static_cast<A>(LoadFast<T>(x[j + l])) - mean;
      lanes[l] += d * d;
    }
  }
  for (; j < n; ++j) {
    const A d = static_cast<A>(LoadFast<T>(x[j])) - mean;
    lanes[0] += d * d;
  }
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// Mean and population variance of x[0..n) (two passes; n > 0).
template <typename A, typename T>
inline void MomentsRun(const T* x, int64_t n, A* mean, A* var) {
  *mean = SumRun<A>(x, n) / static_cast<A>(n);
  *var = SumSquaredDeviationRun<A>(x, n, *mean) / static_cast<A>(n);
}

// 1 / sqrt(var + epsilon).
template <typename A>
inline A InvStdDev(A var, double epsilon) {
  return A(1) / std::sqrt(var + static_cast<A>(epsilon));
}

// y[j] = (x[j] - mean) * scale + bias over [0..n), scale already multiplied by the inverse standard deviation.
template <typename A, typename T>
inline void NormalizeRun(const T* x, T* y, int64_t n, A mean, A scale, A bias) {
  for (int64_t j = 0; j < n; ++j)
    y[j] = StoreFast<T>(static_cast<ComputeType<T>>((LoadFast<T>(x[j]) - mean) * scale + bias));
}

// Group normalisation of x viewed as [batch, groups, channels_per_group, run]: each (batch, group) block of
// channels_per_group * run values is normalised by its own mean and variance, then channel c (of C = groups *
// channels_per_group) is scaled by scale[c] and shifted by bias[c]. InstanceNormalization is groups = C.
template <typename T, typename A>
void GroupNormalize(const T* x, T* y, int64_t batch, int64_t groups, int64_t channels_per_group, int64_t run,
                    const std::vector<A>& scale, const std::vector<A>& bias, double epsilon, exec::ThreadPool& pool) {
  const int64_t block = channels_per_group * run;
  ParallelOver(pool, batch * groups, block, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const T* in = x + b * block;
      T* out = y + b * block;
      A mean = 0, var = 0;
      if (block > 0) MomentsRun<A>(in, block, &mean, &var);
      const A inv = InvStdDev(var, epsilon);
      const int64_t c0 = (b % groups) * channels_per_group;
      for (int64_t c = 0; c < channels_per_group; ++c) {
        NormalizeRun<A>(in + c * run, out + c * run, run, mean, inv * scale[c0 + c], bias[c0 + c]);
      }
    }
  });
}

// Dims as "[2,3,4]" for messages.
inline std::string DimsToString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(dims[i]);
  }
  s += ']';
  return s;
}

// The values of a per-channel parameter tensor (scale, bias, mean, var: any float type) as doubles; fails naming
// `what` unless it is present, of a float type, and holds `count` elements.
inline StatusOr<std::vector<double>> ReadParam(const ir::Tensor* t, int64_t count, std::string_view what) {
  if (!t) return InvalidArgument(what, " is missing");
  if (t->num_elements() != count) {
    return InvalidArgument(what, ": expected ", count, " elements, got shape ", DimsToString(t->dims()));
  }
  std::vector<double> out;
  out.reserve(static_cast<size_t>(count));
  Status st = DispatchFloat(t->dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    for (T v : t->values<T>()) out.push_back(static_cast<double>(LoadFast<T>(v)));
    return Status::Ok();
  });
  if (!st.ok()) return st.WithContext(what);
  return out;
}

// Writes `values` into a float-typed tensor of as many elements, rounding to its type.
inline Status WriteParam(ir::Tensor* t, const std::vector<double>& values) {
  return DispatchFloat(t->dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T* out = t->mutable_values<T>().data();
    for (size_t i = 0; i < values.size(); ++i) out[i] = StoreFast<T>(static_cast<ComputeType<T>>(values[i]));
    return Status::Ok();
  });
}

}  // namespace onnxamp::ops::reduce
