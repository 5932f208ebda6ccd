// CUDA launchers for Softmax / LogSoftmax and for SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss.
//
// Softmax along the middle axis of [outer, n, inner] in three passes over a row (NaN-propagating maximum, sum of
// exp(x - max), then the scaled or shifted store), with float accumulation for fp16/bf16:
//   inner == 1: a group of threads per contiguous row (8 lanes for rows up to 64, a warp up to 2048, the block
//               above), folded with shuffles;
//   inner > 1:  a thread per (outer, inner) position, consecutive threads on consecutive positions (coalesced).
// The same kernels, asked for statistics instead of outputs, give the loss kernels max and log(sum) per position.
#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_device.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"

namespace onnxamp::cuda::norm_reduce {
namespace {

// What a softmax kernel writes: y (Softmax or LogSoftmax), or per row its max and log(sum(exp(x - max))).
template <typename T>
struct SoftmaxOut {
  T* y = nullptr;
  bool log = false;
  ComputeType<T>* stat_max = nullptr;
  ComputeType<T>* stat_log_sum = nullptr;
};

template <typename T>
__global__ void SoftmaxRowKernel(const T* __restrict__ x, int64_t rows, int64_t n, SoftmaxOut<T> out, int group) {
  using A = ComputeType<T>;
  __shared__ A smem[kRowBlock / kWarp];
  const int per_block = blockDim.x / group;
  const int gid = threadIdx.x / group, lane = threadIdx.x % group;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * per_block; base < rows;
       base += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t row = base + gid;
    const bool active = row < rows;
    const int64_t len = active ? n : 0;
    const T* xr = x + (active ? row : 0) * n;
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t j = lane; j < len; j += group) m = MaxNan(m, LoadValue<T>(xr[j]));
    m = GroupReduce(
        m, group, [](A a, A b) { return MaxNan(a, b); }, smem);
    A s = 0;
    for (int64_t j = lane; j < len; j += group) s += ExpOf<A>(LoadValue<T>(xr[j]) - m);
    s = GroupReduce(
        s, group, [](A a, A b) { return a + b; }, smem);
    if (!active) continue;
    if (out.y == nullptr) {
      if (lane == 0) {
        out.stat_max[row] = m;
        out.stat_log_sum[row] = LogOf(s);
      }
      continue;
    }
    T* yr = out.y + row * n;
    if (out.log) {
      // (x - m) - log(s) rather than x - (m + log s): x - m is exact near the maximum.
      const A log_s = LogOf(s);
      for (int64_t j = lane; j < len; j += group) yr[j] = StoreValue<T>((LoadValue<T>(xr[j]) - m) - log_s);
    } else {
      const A inv = A(1) / s;
      for (int64_t j = lane; j < len; j += group) yr[j] = StoreValue<T>(ExpOf<A>(LoadValue<T>(xr[j]) - m) * inv);
    }
  }
}

template <typename T>
__global__ void SoftmaxColumnKernel(const T* __restrict__ x, int64_t outer, int64_t n, int64_t inner,
                                    SoftmaxOut<T> out) {
  using A = ComputeType<T>;
  const int64_t count = outer * inner;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < count;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = p / inner, i = p - o * inner;
    const T* xc = x + o * n * inner + i;
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t j = 0; j < n; ++j) m = MaxNan(m, LoadValue<T>(xc[j * inner]));
    A s = 0;
    for (int64_t j = 0; j < n; ++j) s += ExpOf<A>(LoadValue<T>(xc[j * inner]) - m);
    if (out.y == nullptr) {
      out.stat_max[p] = m;
      out.stat_log_sum[p] = LogOf(s);
      continue;
    }
    T* yc = out.y + o * n * inner + i;
    if (out.log) {
      const A log_s = LogOf(s);
      for (int64_t j = 0; j < n; ++j) yc[j * inner] = StoreValue<T>((LoadValue<T>(xc[j * inner]) - m) - log_s);
    } else {
      const A inv = A(1) / s;
      for (int64_t j = 0; j < n; ++j) yc[j * inner] = StoreValue<T>(ExpOf<A>(LoadValue<T>(xc[j * inner]) - m) * inv);
    }
  }
}

template <typename T>
Status RunSoftmax(const T* x, int64_t outer, int64_t n, int64_t inner, const SoftmaxOut<T>& out, cudaStream_t stream,
                  const char* what) {
  if (outer * inner == 0 || (out.y != nullptr && n == 0)) return Status::Ok();
  if (inner == 1) {
    const int group = GroupForRow(n);
    SoftmaxRowKernel<T><<<RowBlocks(outer, group), kRowBlock, 0, stream>>>(x, outer, n, out, group);
  } else {
    SoftmaxColumnKernel<T><<<GridFor(outer * inner), kThreadsPerBlock, 0, stream>>>(x, outer, n, inner, out);
  }
  return CheckLaunch(what);
}

// ---- losses ---------------------------------------------------------------------------------------------------

template <typename S>
__global__ void ToDoubleKernel(const S* __restrict__ src, double* __restrict__ dst, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = static_cast<double>(LoadValue<S>(src[i]));
  }
}

struct LossKernelArgs {
  bool softmax;
  bool reduce;  // write per-position loss and weight as doubles (sum / mean) instead of the output
  bool has_ignore_index;
  int64_t ignore_index;
  int64_t positions, classes, inner;
  const double* weights;  // null: 1 for every class
  double* pos_loss;
  double* pos_weight;
};

// Per position p = (b, d) with label t: loss = -weight[t] * logp[t]; 0 (and weight 0) where t is ignore_index; NaN
// where t is outside [0, classes).
template <typename T, typename L>
__global__ void LossKernel(const T* __restrict__ x, const L* __restrict__ labels,
                           const ComputeType<T>* __restrict__ max, const ComputeType<T>* __restrict__ log_sum,
                           T* __restrict__ out, LossKernelArgs a) {
  using A = ComputeType<T>;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < a.positions;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = static_cast<int64_t>(labels[p]);
    A l = 0;
    double w = 0;
    if (!(a.has_ignore_index && t == a.ignore_index)) {
      if (t < 0 || t >= a.classes) {
        l = std::numeric_limits<A>::quiet_NaN();
      } else {
        const int64_t b = p / a.inner, d = p - b * a.inner;
        const A v = LoadValue<T>(x[(b * a.classes + t) * a.inner + d]);
        const A logp = a.softmax ? (v - max[p]) - log_sum[p] : v;
        w = a.weights ? a.weights[t] : 1.0;
        l = -static_cast<A>(w) * logp;
      }
    }
    if (a.reduce) {
      a.pos_loss[p] = static_cast<double>(l);
      a.pos_weight[p] = w;
    } else {
      out[p] = StoreValue<T>(l);
    }
  }
}

inline constexpr int kTotalThreads = 1024;

// out[0] = sum of the losses, or that sum over the sum of the weights (mean), both summed in double; one block.
template <typename T>
__global__ void LossTotalKernel(const double* __restrict__ loss, const double* __restrict__ weight, int64_t count,
                                bool mean, T* __restrict__ out) {
  using A = ComputeType<T>;
  __shared__ double smem[kTotalThreads / kWarp];
  double s = 0, w = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    s += loss[i];
    w += weight[i];
  }
  auto add = [](double a, double b) { return a + b; };
  s = GroupReduce(s, static_cast<int>(blockDim.x), add, smem);
  w = GroupReduce(w, static_cast<int>(blockDim.x), add, smem);
  if (threadIdx.x == 0) out[0] = StoreValue<T>(mean ? static_cast<A>(s / w) : static_cast<A>(s));
}

template <typename S>
Status WeightsToDouble(const void* src, double* dst, int64_t count, cudaStream_t stream) {
  ToDoubleKernel<S><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(static_cast<const S*>(src), dst, count);
  return CheckLaunch("loss weights");
}

template <typename T>
Status RunLoss(const LossArgs& args, const ScratchFn& scratch, cudaStream_t stream) {
  using A = ComputeType<T>;
  const char* what = args.softmax ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss";
  const int64_t positions = args.batch * args.inner;
  const bool reduce = args.reduction != LossReduction::kNone;
  if (positions == 0 && !reduce) return Status::Ok();
  // Scratch: [max, log_sum] (softmax), weights as double, per-position loss and weight (sum / mean).
  const size_t stat_bytes = args.softmax ? AlignScratch(static_cast<size_t>(positions) * sizeof(A)) : 0;
  const size_t weight_bytes = args.weights ? AlignScratch(static_cast<size_t>(args.classes) * sizeof(double)) : 0;
  const size_t pos_bytes = reduce ? AlignScratch(static_cast<size_t>(positions) * sizeof(double)) : 0;
  const size_t total = 2 * stat_bytes + weight_bytes + 2 * pos_bytes;
  char* base = nullptr;
  if (total > 0) {
    ONNXAMP_ASSIGN_OR_RETURN(void* p, scratch(total));
    base = static_cast<char*>(p);
  }
  A* max = args.softmax ? reinterpret_cast<A*>(base) : nullptr;
  A* log_sum = args.softmax ? reinterpret_cast<A*>(base + stat_bytes) : nullptr;
  double* weights = args.weights ? reinterpret_cast<double*>(base + 2 * stat_bytes) : nullptr;
  double* pos_loss = reduce ? reinterpret_cast<double*>(base + 2 * stat_bytes + weight_bytes) : nullptr;
  double* pos_weight = reduce ? reinterpret_cast<double*>(base + 2 * stat_bytes + weight_bytes + pos_bytes) : nullptr;
  const T* x = static_cast<const T*>(args.x);
  if (args.softmax && positions > 0) {
    SoftmaxOut<T> stats;
    stats.stat_max = max;
    stats.stat_log_sum = log_sum;
    ONNXAMP_RETURN_IF_ERROR(RunSoftmax<T>(x, args.batch, args.classes, args.inner, stats, stream, what));
  }
  if (weights && args.classes > 0) {
    ONNXAMP_RETURN_IF_ERROR(DispatchFloat(args.weight_dtype, what, [&](auto tag) -> Status {
      return WeightsToDouble<typename decltype(tag)::type>(args.weights, weights, args.classes, stream);
    }));
  }
  LossKernelArgs a{
      args.softmax, reduce,    args.has_ignore_index, args.ignore_index, positions, args.classes, args.inner, weights,
      pos_loss,     pos_weight};
  T* out = static_cast<T*>(args.loss);
  if (positions > 0) {
    if (args.label_dtype == DType::kInt32) {
      LossKernel<T, int32_t><<<GridFor(positions), kThreadsPerBlock, 0, stream>>>(
          x, static_cast<const int32_t*>(args.labels), max, log_sum, out, a);
    } else if (args.label_dtype == DType::kInt64) {
      LossKernel<T, int64_t><<<GridFor(positions), kThreadsPerBlock, 0, stream>>>(
          x, static_cast<const int64_t*>(args.labels), max, log_sum, out, a);
    } else {
      return InvalidArgument(what, ": labels must be int32 or int64, got ", DTypeName(args.label_dtype));
    }
    ONNXAMP_RETURN_IF_ERROR(CheckLaunch(what));
  }
  if (reduce) {
    LossTotalKernel<T>
        <<<1, kTotalThreads, 0, stream>>>(pos_loss, pos_weight, positions, args.reduction == LossReduction::kMean, out);
    ONNXAMP_RETURN_IF_ERROR(CheckLaunch(what));
  }
  return Status::Ok();
}

}  // namespace

Status LaunchSoftmax(bool log, DType dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                     cudaStream_t stream) {
  const char* what = log ? "LogSoftmax" : "Softmax";
  return DispatchFloat(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    SoftmaxOut<T> out;
    out.y = static_cast<T*>(y);
    out.log = log;
    return RunSoftmax<T>(static_cast<const T*>(x), outer, n, inner, out, stream, what);
  });
}

Status LaunchLoss(const LossArgs& args, const ScratchFn& scratch, cudaStream_t stream) {
  return DispatchFloat(
      args.dtype, args.softmax ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss",
      [&](auto tag) -> Status { return RunLoss<typename decltype(tag)::type>(args, scratch, stream); });
}

}  // namespace onnxamp::cuda::norm_reduce
