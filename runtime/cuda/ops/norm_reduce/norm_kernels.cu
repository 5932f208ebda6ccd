// CUDA launchers for LayerNormalization, GroupNormalization and InstanceNormalization.
//
// Each normalised block (a LayerNorm row, a GroupNorm (sample, group)) is handled by a group of threads (8 lanes,
// a warp or the whole block, by its length) in three passes like the CPU: the mean, the sum of squared deviations
// from it (population variance), then the affine store. Statistics are float (double for double data or a double
// stash type). Scale and bias parameters of any float type are first expanded into the statistics type in scratch,
// through their broadcast (LayerNorm) or group-to-channel map (GroupNorm opsets 18-20).
#include <cstdint>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_param_device.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_device.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"

namespace onnxamp::cuda::norm_reduce {
namespace {

// dst[i] = src[i] stored as D (rounded to nearest even for fp16/bf16).
template <typename A, typename D>
__global__ void ConvertKernel(const A* __restrict__ src, D* __restrict__ dst, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = StoreValue<D>(static_cast<ComputeType<D>>(src[i]));
  }
}

// Mean and population variance of the `len` values of `v` (a block of a group's threads); 0 and 0 when len == 0,
// as the CPU kernels. Every thread of the group must call it.
template <typename T, typename A>
__device__ __forceinline__ void GroupMoments(const T* v, int64_t len, int lane, int group, A* smem, A* mean, A* var) {
  auto add = [](A a, A b) { return a + b; };
  A s = 0;
  for (int64_t j = lane; j < len; j += group) s += static_cast<A>(LoadValue<T>(v[j]));
  s = GroupReduce(s, group, add, smem);
  const A m = len > 0 ? s / static_cast<A>(len) : A(0);
  A q = 0;
  for (int64_t j = lane; j < len; j += group) {
    const A d = static_cast<A>(LoadValue<T>(v[j])) - m;
    q += d * d;
  }
  q = GroupReduce(q, group, add, smem);
  *mean = m;
  *var = len > 0 ? q / static_cast<A>(len) : A(0);
}

template <typename T, typename A>
__global__ void LayerNormKernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols,
                                const A* __restrict__ scale, const A* __restrict__ bias, A epsilon,
                                A* __restrict__ mean_out, A* __restrict__ inv_out, int group) {
  __shared__ A smem[kRowBlock / kWarp];
  const int per_block = blockDim.x / group;
  const int gid = threadIdx.x / group, lane = threadIdx.x % group;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * per_block; base < rows;
       base += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t row = base + gid;
    const bool active = row < rows;
    const int64_t len = active ? cols : 0;
    const T* xr = x + (active ? row : 0) * cols;
    A mean, var;
    GroupMoments<T, A>(xr, len, lane, group, smem, &mean, &var);
    if (!active) continue;
    const A inv = A(1) / SqrtOf(var + epsilon);
    T* yr = y + row * cols;
    for (int64_t j = lane; j < len; j += group) {
      A v = (static_cast<A>(LoadValue<T>(xr[j])) - mean) * inv * scale[j];
      if (bias) v += bias[j];
      yr[j] = StoreValue<T>(static_cast<ComputeType<T>>(v));
    }
    if (lane == 0) {
      if (mean_out) mean_out[row] = mean;
      if (inv_out) inv_out[row] = inv;
    }
  }
}

template <typename T, typename A>
Status RunLayerNorm(const LayerNormArgs& a, const ScratchFn& scratch, cudaStream_t stream) {
  const bool convert_stats = a.stat_dtype != (std::is_same_v<A, double> ? DType::kFloat64 : DType::kFloat32);
  const bool want_stats = a.mean != nullptr || a.inv_std != nullptr;
  const size_t param_bytes = AlignScratch(static_cast<size_t>(a.cols) * sizeof(A));
  const size_t stat_bytes = convert_stats && want_stats ? AlignScratch(static_cast<size_t>(a.rows) * sizeof(A)) : 0;
  ONNXAMP_ASSIGN_OR_RETURN(void* base_ptr, scratch(2 * param_bytes + 2 * stat_bytes));
  char* base = static_cast<char*>(base_ptr);
  A* scale = reinterpret_cast<A*>(base);
  A* bias = a.has_bias ? reinterpret_cast<A*>(base + param_bytes) : nullptr;
  A* mean = nullptr;
  A* inv = nullptr;
  if (convert_stats) {
    if (a.mean) mean = reinterpret_cast<A*>(base + 2 * param_bytes);
    if (a.inv_std) inv = reinterpret_cast<A*>(base + 2 * param_bytes + stat_bytes);
  } else {
    mean = static_cast<A*>(a.mean);
    inv = static_cast<A*>(a.inv_std);
  }
  ONNXAMP_RETURN_IF_ERROR(ExpandParam<A>(a.scale, scale, a.cols, stream, "LayerNormalization scale"));
  if (bias) ONNXAMP_RETURN_IF_ERROR(ExpandParam<A>(a.bias, bias, a.cols, stream, "LayerNormalization bias"));
  const int group = GroupForRow(a.cols);
  LayerNormKernel<T, A><<<RowBlocks(a.rows, group), kRowBlock, 0, stream>>>(
      static_cast<const T*>(a.x), static_cast<T*>(a.y), a.rows, a.cols, scale, bias, static_cast<A>(a.epsilon), mean,
      inv, group);
  ONNXAMP_RETURN_IF_ERROR(CheckLaunch("LayerNormalization"));
  if (!convert_stats || !want_stats) return Status::Ok();
  return DispatchFloat(a.stat_dtype, "LayerNormalization statistics", [&](auto tag) -> Status {
    using D = typename decltype(tag)::type;
    if (a.mean) {
      ConvertKernel<A, D><<<GridFor(a.rows), kThreadsPerBlock, 0, stream>>>(mean, static_cast<D*>(a.mean), a.rows);
      ONNXAMP_RETURN_IF_ERROR(CheckLaunch("LayerNormalization mean"));
    }
    if (a.inv_std) {
      ConvertKernel<A, D><<<GridFor(a.rows), kThreadsPerBlock, 0, stream>>>(inv, static_cast<D*>(a.inv_std), a.rows);
      ONNXAMP_RETURN_IF_ERROR(CheckLaunch("LayerNormalization inv_std_dev"));
    }
    return Status::Ok();
  });
}

// x viewed as [batch * groups blocks of channels_per_group * run values]; channel c of block b is
// (b % groups) * channels_per_group + (position / run).
template <typename T, typename A>
__global__ void GroupNormKernel(const T* __restrict__ x, T* __restrict__ y, int64_t blocks, int64_t groups, int64_t cpg,
                                int64_t run, const A* __restrict__ scale, const A* __restrict__ bias, A epsilon,
                                int group) {
  __shared__ A smem[kRowBlock / kWarp];
  const int per_block = blockDim.x / group;
  const int gid = threadIdx.x / group, lane = threadIdx.x % group;
  const int64_t block_len = cpg * run;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * per_block; base < blocks;
       base += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t b = base + gid;
    const bool active = b < blocks;
    const int64_t len = active ? block_len : 0;
    const T* xb = x + (active ? b : 0) * block_len;
    A mean, var;
    GroupMoments<T, A>(xb, len, lane, group, smem, &mean, &var);
    if (!active) continue;
    const A inv = A(1) / SqrtOf(var + epsilon);
    const int64_t c0 = (b % groups) * cpg;
    T* yb = y + b * block_len;
    for (int64_t j = lane; j < len; j += group) {
      const int64_t c = c0 + j / run;
      const A v = (static_cast<A>(LoadValue<T>(xb[j])) - mean) * (inv * scale[c]) + bias[c];
      yb[j] = StoreValue<T>(static_cast<ComputeType<T>>(v));
    }
  }
}

template <typename T>
Status RunGroupNorm(const GroupNormArgs& a, const ScratchFn& scratch, cudaStream_t stream) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t channels = a.groups * a.channels_per_group;
  const int64_t blocks = a.batch * a.groups;
  if (blocks == 0) return Status::Ok();
  const size_t param_bytes = AlignScratch(static_cast<size_t>(channels) * sizeof(A));
  ONNXAMP_ASSIGN_OR_RETURN(void* base_ptr, scratch(2 * param_bytes));
  A* scale = static_cast<A*>(base_ptr);
  A* bias = reinterpret_cast<A*>(static_cast<char*>(base_ptr) + param_bytes);
  ONNXAMP_RETURN_IF_ERROR(ExpandParam<A>(a.scale, scale, channels, stream, "normalization scale"));
  ONNXAMP_RETURN_IF_ERROR(ExpandParam<A>(a.bias, bias, channels, stream, "normalization bias"));
  const int group = GroupForRow(a.channels_per_group * a.run);
  GroupNormKernel<T, A><<<RowBlocks(blocks, group), kRowBlock, 0, stream>>>(
      static_cast<const T*>(a.x), static_cast<T*>(a.y), blocks, a.groups, a.channels_per_group, a.run, scale, bias,
      static_cast<A>(a.epsilon), group);
  return CheckLaunch("GroupNormalization");
}

}  // namespace

Status LaunchLayerNorm(const LayerNormArgs& args, const ScratchFn& scratch, cudaStream_t stream) {
  if (args.rows == 0) return Status::Ok();
  return DispatchFloat(args.dtype, "LayerNormalization", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (args.stats_double || std::is_same_v<T, double>) return RunLayerNorm<T, double>(args, scratch, stream);
    if constexpr (!std::is_same_v<T, double>) return RunLayerNorm<T, float>(args, scratch, stream);
    return Status::Ok();
  });
}

Status LaunchGroupNorm(const GroupNormArgs& args, const ScratchFn& scratch, cudaStream_t stream) {
  return DispatchFloat(args.dtype, "GroupNormalization", [&](auto tag) -> Status {
    return RunGroupNorm<typename decltype(tag)::type>(args, scratch, stream);
  });
}

}  // namespace onnxamp::cuda::norm_reduce
