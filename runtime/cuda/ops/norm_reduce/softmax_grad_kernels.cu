// CUDA launchers for SoftmaxGrad / LogSoftmaxGrad and SoftmaxCrossEntropyLossGrad / NegativeLogLikelihoodLossGrad.
//
// The softmax gradients take the geometry of the forward kernels (softmax_kernels.cu): a group of threads per
// contiguous row when inner == 1 (8 lanes, a warp or the block, by row length), folded with shuffles in a fixed
// order, else a thread per (outer, inner) position summing along n in index order. Each row is read twice: the sum,
// then the store.
//
// The loss gradients run a thread per output element; for reduction "mean" one block first sums the weights of the
// non-ignored positions in double (a fixed-order block reduction), as the CPU divides by that total.
#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/norm_reduce/grad_launch.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_device.cuh"

namespace onnxamp::cuda::norm_reduce {
namespace {

// ---- SoftmaxGrad / LogSoftmaxGrad ------------------------------------------------------------------------------

// dx from one element's dy and y and its row's sum s.
template <bool kLog, typename A>
__device__ __forceinline__ A SoftmaxGradValue(A g, A y, A s) {
  return kLog ? g - ExpOf<A>(y) * s : y * (g - s);
}

template <bool kLog, typename T>
__global__ void SoftmaxGradRowKernel(const T* __restrict__ dy, const T* __restrict__ y, T* __restrict__ dx,
                                     int64_t rows, int64_t n, int group) {
  using A = ComputeType<T>;
  __shared__ A smem[kRowBlock / kWarp];
  const int per_block = blockDim.x / group;
  const int gid = threadIdx.x / group, lane = threadIdx.x % group;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * per_block; base < rows;
       base += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t row = base + gid;
    const bool active = row < rows;
    const int64_t len = active ? n : 0;
    const int64_t offset = (active ? row : 0) * n;
    A s = 0;
    for (int64_t j = lane; j < len; j += group) {
      const A g = LoadValue<T>(dy[offset + j]);
      s += kLog ? g : g * LoadValue<T>(y[offset + j]);
    }
    s = GroupReduce(
        s, group, [](A a, A b) { return a + b; }, smem);
    for (int64_t j = lane; j < len; j += group) {
      dx[offset + j] =
          StoreValue<T>(SoftmaxGradValue<kLog, A>(LoadValue<T>(dy[offset + j]), LoadValue<T>(y[offset + j]), s));
    }
  }
}

template <bool kLog, typename T>
__global__ void SoftmaxGradColumnKernel(const T* __restrict__ dy, const T* __restrict__ y, T* __restrict__ dx,
                                        int64_t outer, int64_t n, int64_t inner) {
  using A = ComputeType<T>;
  const int64_t count = outer * inner;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < count;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = p / inner, i = p - o * inner;
    const int64_t base = o * n * inner + i;
    A s = 0;
    for (int64_t j = 0; j < n; ++j) {
      const A g = LoadValue<T>(dy[base + j * inner]);
      s += kLog ? g : g * LoadValue<T>(y[base + j * inner]);
    }
    for (int64_t j = 0; j < n; ++j) {
      const int64_t k = base + j * inner;
      dx[k] = StoreValue<T>(SoftmaxGradValue<kLog, A>(LoadValue<T>(dy[k]), LoadValue<T>(y[k]), s));
    }
  }
}

template <bool kLog, typename T>
Status RunSoftmaxGrad(const T* dy, const T* y, T* dx, int64_t outer, int64_t n, int64_t inner, cudaStream_t stream,
                      const char* what) {
  if (outer * n * inner == 0) return Status::Ok();
  if (inner == 1) {
    const int group = GroupForRow(n);
    SoftmaxGradRowKernel<kLog, T><<<RowBlocks(outer, group), kRowBlock, 0, stream>>>(dy, y, dx, outer, n, group);
  } else {
    SoftmaxGradColumnKernel<kLog, T>
        <<<GridFor(outer * inner), kThreadsPerBlock, 0, stream>>>(dy, y, dx, outer, n, inner);
  }
  return CheckLaunch(what);
}

// ---- loss gradients --------------------------------------------------------------------------------------------

inline constexpr int kTotalThreads = 1024;

template <typename S>
__global__ void WeightsToDoubleKernel(const S* __restrict__ src, double* __restrict__ dst, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = static_cast<double>(LoadValue<S>(src[i]));
  }
}

// Whether label t at a position counts: not ignore_index and inside [0, classes).
__device__ __forceinline__ bool Counts(int64_t t, bool has_ignore_index, int64_t ignore_index, int64_t classes) {
  return !(has_ignore_index && t == ignore_index) && t >= 0 && t < classes;
}

// total[0] = the sum over the positions that count of weight[t] (1 without weights), in double; one block.
template <typename L>
__global__ void WeightTotalKernel(const L* __restrict__ labels, const double* __restrict__ weights, int64_t positions,
                                  bool has_ignore_index, int64_t ignore_index, int64_t classes,
                                  double* __restrict__ total) {
  __shared__ double smem[kTotalThreads / kWarp];
  double w = 0;
  for (int64_t p = threadIdx.x; p < positions; p += blockDim.x) {
    const int64_t t = static_cast<int64_t>(labels[p]);
    if (Counts(t, has_ignore_index, ignore_index, classes)) w += weights ? weights[t] : 1.0;
  }
  w = GroupReduce(
      w, static_cast<int>(blockDim.x), [](double a, double b) { return a + b; }, smem);
  if (threadIdx.x == 0) total[0] = w;
}

struct LossGradKernelArgs {
  bool softmax;
  bool per_position;  // reduction "none": dLoss has one value per position
  bool has_ignore_index;
  int64_t ignore_index;
  int64_t count, classes, inner;
  const double* weights;  // null: 1 for every class
  const double* total;    // null unless reduction "mean"
};

template <typename T, typename L>
__global__ void LossGradKernel(const T* __restrict__ dloss, const T* __restrict__ x, const L* __restrict__ labels,
                               T* __restrict__ dx, LossGradKernelArgs a) {
  using A = ComputeType<T>;
  const int64_t plane = a.classes * a.inner;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < a.count;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = k / plane, r = k - b * plane;
    const int64_t c = r / a.inner, d = r - c * a.inner;
    const int64_t p = b * a.inner + d;
    const int64_t t = static_cast<int64_t>(labels[p]);
    A v = 0;
    if (!(a.has_ignore_index && t == a.ignore_index)) {
      if (t < 0 || t >= a.classes) {
        v = std::numeric_limits<A>::quiet_NaN();
      } else {
        // The CPU's per-position factor: weight * dLoss in double, divided by the weight total for "mean".
        const double w = a.weights ? a.weights[t] : 1.0;
        double f = w * static_cast<double>(LoadValue<T>(dloss[a.per_position ? p : 0]));
        if (a.total) f /= a.total[0];
        const A fa = static_cast<A>(f);
        const A onehot = c == t ? A(1) : A(0);
        v = a.softmax ? fa * (ExpOf<A>(LoadValue<T>(x[k])) - onehot) : -fa * onehot;
      }
    }
    dx[k] = StoreValue<T>(v);
  }
}

template <typename T, typename L>
Status RunLossGradLabels(const LossGradArgs& args, const double* weights, double* total, cudaStream_t stream,
                         const char* what) {
  const int64_t positions = args.batch * args.inner;
  const L* labels = static_cast<const L*>(args.labels);
  if (total) {
    WeightTotalKernel<L><<<1, kTotalThreads, 0, stream>>>(labels, weights, positions, args.has_ignore_index,
                                                          args.ignore_index, args.classes, total);
    ONNXAMP_RETURN_IF_ERROR(CheckLaunch(what));
  }
  const LossGradKernelArgs a{args.softmax,
                             args.reduction == LossReduction::kNone,
                             args.has_ignore_index,
                             args.ignore_index,
                             positions * args.classes,
                             args.classes,
                             args.inner,
                             weights,
                             total};
  LossGradKernel<T, L><<<GridFor(a.count), kThreadsPerBlock, 0, stream>>>(
      static_cast<const T*>(args.dloss), static_cast<const T*>(args.x), labels, static_cast<T*>(args.dx), a);
  return CheckLaunch(what);
}

template <typename T>
Status RunLossGrad(const LossGradArgs& args, const ScratchFn& scratch, cudaStream_t stream) {
  const char* what = args.softmax ? "SoftmaxCrossEntropyLossGrad" : "NegativeLogLikelihoodLossGrad";
  if (args.batch * args.classes * args.inner == 0) return Status::Ok();
  // Scratch: the weights as double, then the weight total (mean).
  const bool mean = args.reduction == LossReduction::kMean;
  const size_t weight_bytes = args.weights ? AlignScratch(static_cast<size_t>(args.classes) * sizeof(double)) : 0;
  const size_t total_bytes = mean ? sizeof(double) : 0;
  char* base = nullptr;
  if (weight_bytes + total_bytes > 0) {
    ONNXAMP_ASSIGN_OR_RETURN(void* p, scratch(weight_bytes + total_bytes));
    base = static_cast<char*>(p);
  }
  double* weights = args.weights ? reinterpret_cast<double*>(base) : nullptr;
  double* total = mean ? reinterpret_cast<double*>(base + weight_bytes) : nullptr;
  if (weights) {
    ONNXAMP_RETURN_IF_ERROR(DispatchFloat(args.weight_dtype, what, [&](auto tag) -> Status {
      using S = typename decltype(tag)::type;
      WeightsToDoubleKernel<S><<<GridFor(args.classes), kThreadsPerBlock, 0, stream>>>(
          static_cast<const S*>(args.weights), weights, args.classes);
      return CheckLaunch(what);
    }));
  }
  if (args.label_dtype == DType::kInt32) return RunLossGradLabels<T, int32_t>(args, weights, total, stream, what);
  if (args.label_dtype == DType::kInt64) return RunLossGradLabels<T, int64_t>(args, weights, total, stream, what);
  return InvalidArgument(what, ": labels must be int32 or int64, got ", DTypeName(args.label_dtype));
}

}  // namespace

Status LaunchSoftmaxGrad(bool log, DType dtype, const void* dy, const void* y, void* dx, int64_t outer, int64_t n,
                         int64_t inner, cudaStream_t stream) {
  const char* what = log ? "LogSoftmaxGrad" : "SoftmaxGrad";
  return DispatchFloat(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* g = static_cast<const T*>(dy);
    const T* out = static_cast<const T*>(y);
    T* d = static_cast<T*>(dx);
    return log ? RunSoftmaxGrad<true, T>(g, out, d, outer, n, inner, stream, what)
               : RunSoftmaxGrad<false, T>(g, out, d, outer, n, inner, stream, what);
  });
}

Status LaunchLossGrad(const LossGradArgs& args, const ScratchFn& scratch, cudaStream_t stream) {
  return DispatchFloat(
      args.dtype, args.softmax ? "SoftmaxCrossEntropyLossGrad" : "NegativeLogLikelihoodLossGrad",
      [&](auto tag) -> Status { return RunLossGrad<typename decltype(tag)::type>(args, scratch, stream); });
}

}  // namespace onnxamp::cuda::norm_reduce
