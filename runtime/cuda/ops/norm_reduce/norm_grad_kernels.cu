// CUDA launchers for LayerNormalizationGrad and GroupNormalizationGrad (declared in norm_grad_launch.h).
//
// dX: one group of threads per normalised block (a LayerNorm row, a GroupNorm (sample, group)), sized by the block's
// length as in the forward kernels; the block sums are double and reduced in a fixed tree order (GroupReduce).
// LayerNorm's dScale/dB: the rows are cut into a number of chunks fixed by the shape; one thread per (chunk, column)
// sums its rows in order into a double partial, then one thread per scale element adds the partials of its
// columns in column then chunk order. GroupNorm's dScale/dBias: per (sample, channel) sums written by the dX kernel,
// added over the samples (and a group's channels) in order by one thread per parameter, as the CPU adds them.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_grad_launch.h"
#include "runtime/cuda/ops/norm_reduce/norm_param_device.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_device.cuh"

namespace onnxamp::cuda::norm_reduce {
namespace {

// ---- LayerNormalizationGrad --------------------------------------------------------------------------------------

// Mul and Sub (norm_reduce_device.cuh) keep nvcc from contracting `a - b * c` into one FMA: for short rows (inv_std
// up to 1/sqrt(epsilon)) that last-bit difference would be amplified into dX.
template <typename T, typename A>
__global__ void LayerNormGradDxKernel(const T* __restrict__ dy, const T* __restrict__ x, T* __restrict__ dx,
                                      int64_t rows, int64_t cols, const A* __restrict__ scale,
                                      const A* __restrict__ mean, const A* __restrict__ inv, int group) {
  __shared__ double smem[kRowBlock / kWarp];
  auto add = [](double a, double b) { return a + b; };
  const int per_block = blockDim.x / group;
  const int gid = threadIdx.x / group, lane = threadIdx.x % group;
  const double n = static_cast<double>(cols);
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * per_block; base < rows;
       base += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t row = base + gid;
    const bool active = row < rows;
    const int64_t len = active ? cols : 0;
    const int64_t off = (active ? row : 0) * cols;
    const A m = active ? mean[row] : A(0), is = active ? inv[row] : A(0);
    double sum_g = 0, sum_gx = 0;
    for (int64_t j = lane; j < len; j += group) {
      const A xhat = Mul(Sub(static_cast<A>(LoadValue<T>(x[off + j])), m), is);
      const A gj = Mul(static_cast<A>(LoadValue<T>(dy[off + j])), scale[j]);
      sum_g += static_cast<double>(gj);
      sum_gx += static_cast<double>(Mul(gj, xhat));
    }
    sum_g = GroupReduce(sum_g, group, add, smem);
    sum_gx = GroupReduce(sum_gx, group, add, smem);
    if (!active) continue;
    const A mean_g = static_cast<A>(sum_g / n), mean_gx = static_cast<A>(sum_gx / n);
    for (int64_t j = lane; j < len; j += group) {
      const A xhat = Mul(Sub(static_cast<A>(LoadValue<T>(x[off + j])), m), is);
      const A gj = Mul(static_cast<A>(LoadValue<T>(dy[off + j])), scale[j]);
      dx[off + j] = StoreValue<T>(static_cast<ComputeType<T>>(Mul(is, Sub(Sub(gj, mean_g), Mul(xhat, mean_gx)))));
    }
  }
}

// partial_s/partial_b[chunk * cols + j] = the sums over the chunk's rows, in order, of dY * xhat and dY at column j.
template <typename T, typename A>
__global__ void LayerNormGradColumnsKernel(const T* __restrict__ dy, const T* __restrict__ x, int64_t rows,
                                           int64_t cols, int64_t rows_per_chunk, const A* __restrict__ mean,
                                           const A* __restrict__ inv, double* __restrict__ partial_s,
                                           double* __restrict__ partial_b) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  if (j >= cols) return;
  const int64_t r0 = chunk * rows_per_chunk, r1 = min(rows, r0 + rows_per_chunk);
  double s = 0, b = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t k = r * cols + j;
    const A gy = static_cast<A>(LoadValue<T>(dy[k]));
    s += static_cast<double>(gy * ((static_cast<A>(LoadValue<T>(x[k])) - mean[r]) * inv[r]));
    b += static_cast<double>(gy);
  }
  if (partial_s) partial_s[chunk * cols + j] = s;
  if (partial_b) partial_b[chunk * cols + j] = b;
}

// out[s] = the sum, over the columns j reading scale element s (ascending) and then the chunks (ascending), of
// partial[chunk * cols + j]. The columns of s: its coordinates along the dims where `view` has a stride, every
// coordinate along the broadcast dims.
template <typename T>
__global__ void LayerNormGradFoldKernel(const double* __restrict__ partial, T* __restrict__ out, int64_t count,
                                        int64_t cols, int64_t chunks, ParamView view) {
  for (int64_t s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; s < count;
       s += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t col_stride[kMaxParamDims], at[kMaxParamDims];
    int64_t base = 0, stride = 1;
    for (int d = view.rank - 1; d >= 0; --d) {
      col_stride[d] = stride;
      at[d] = 0;
      if (view.strides[d] != 0) base += (s / view.strides[d]) % view.dims[d] * stride;
      stride *= view.dims[d];
    }
    double acc = 0;
    while (true) {
      int64_t j = base;
      for (int d = 0; d < view.rank; ++d) j += at[d] * col_stride[d];
      for (int64_t c = 0; c < chunks; ++c) acc += partial[c * cols + j];
      int d = view.rank - 1;
      for (; d >= 0; --d) {
        if (view.strides[d] != 0) continue;
        if (++at[d] < view.dims[d]) break;
        at[d] = 0;
      }
      if (d < 0) break;
    }
    out[s] = StoreValue<T>(static_cast<ComputeType<T>>(acc));
  }
}

template <typename T, typename A>
Status RunLayerNormGrad(const LayerNormGradArgs& a, const ScratchFn& scratch, cudaStream_t stream) {
  const bool want_params = a.dscale != nullptr || a.dbias != nullptr;
  // Chunks of rows for the column sums: enough (chunk, column-tile) blocks to fill the device, fixed by the shape.
  const int64_t col_tiles = (a.cols + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const int64_t chunks = want_params ? std::max<int64_t>(1, std::min<int64_t>(a.rows, 1024 / col_tiles)) : 0;
  const int64_t rows_per_chunk = chunks > 0 ? (a.rows + chunks - 1) / chunks : 0;
  const size_t param_bytes = AlignScratch(static_cast<size_t>(a.cols) * sizeof(A));
  const size_t stat_bytes = AlignScratch(static_cast<size_t>(a.rows) * sizeof(A));
  const size_t partial_bytes = AlignScratch(static_cast<size_t>(chunks * a.cols) * sizeof(double));
  ONNXAMP_ASSIGN_OR_RETURN(void* base_ptr, scratch(param_bytes + 2 * stat_bytes + 2 * partial_bytes));
  char* base = static_cast<char*>(base_ptr);
  A* scale = reinterpret_cast<A*>(base);
  A* mean = reinterpret_cast<A*>(base + param_bytes);
  A* inv = reinterpret_cast<A*>(base + param_bytes + stat_bytes);
  double* partial_s = a.dscale ? reinterpret_cast<double*>(base + param_bytes + 2 * stat_bytes) : nullptr;
  double* partial_b =
      a.dbias ? reinterpret_cast<double*>(base + param_bytes + 2 * stat_bytes + partial_bytes) : nullptr;
  ONNXAMP_RETURN_IF_ERROR(ExpandParam<A>(a.scale, scale, a.cols, stream, "LayerNormalizationGrad Scale"));
  ONNXAMP_RETURN_IF_ERROR(ExpandParam<A>(a.mean, mean, a.rows, stream, "LayerNormalizationGrad Mean"));
  ONNXAMP_RETURN_IF_ERROR(ExpandParam<A>(a.inv_std, inv, a.rows, stream, "LayerNormalizationGrad InvStdDev"));
  const T* dy = static_cast<const T*>(a.dy);
  const T* x = static_cast<const T*>(a.x);
  if (a.dx) {
    const int group = GroupForRow(a.cols);
    LayerNormGradDxKernel<T, A><<<RowBlocks(a.rows, group), kRowBlock, 0, stream>>>(
        dy, x, static_cast<T*>(a.dx), a.rows, a.cols, scale, mean, inv, group);
    ONNXAMP_RETURN_IF_ERROR(CheckLaunch("LayerNormalizationGrad dX"));
  }
  if (!want_params) return Status::Ok();
  if (a.rows == 0 || a.cols == 0) {
    // Nothing to sum: zero gradients (zero bits are +0 in every float type).
    for (void* out : {a.dscale, a.dbias}) {
      if (!out) continue;
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out, 0, static_cast<size_t>(a.scale_count) * sizeof(T), stream),
                                   "LayerNormalizationGrad");
    }
    return Status::Ok();
  }
  if (chunks > 65535) return Internal("LayerNormalizationGrad: ", chunks, " row chunks");
  const dim3 grid(static_cast<unsigned int>(col_tiles), static_cast<unsigned int>(chunks));
  LayerNormGradColumnsKernel<T, A>
      <<<grid, kThreadsPerBlock, 0, stream>>>(dy, x, a.rows, a.cols, rows_per_chunk, mean, inv, partial_s, partial_b);
  ONNXAMP_RETURN_IF_ERROR(CheckLaunch("LayerNormalizationGrad column sums"));
  for (int i = 0; i < 2; ++i) {
    double* partial = i == 0 ? partial_s : partial_b;
    void* out = i == 0 ? a.dscale : a.dbias;
    if (!out) continue;
    LayerNormGradFoldKernel<T><<<GridFor(a.scale_count), kThreadsPerBlock, 0, stream>>>(
        partial, static_cast<T*>(out), a.scale_count, a.cols, chunks, a.scale);
    ONNXAMP_RETURN_IF_ERROR(CheckLaunch(i == 0 ? "LayerNormalizationGrad dScale" : "LayerNormalizationGrad dB"));
  }
  return Status::Ok();
}

// ---- GroupNormalizationGrad --------------------------------------------------------------------------------------

template <typename T>
__global__ void GroupNormGradKernel(const T* __restrict__ dy, const T* __restrict__ x, T* __restrict__ dx,
                                    int64_t blocks, int64_t groups, int64_t cpg, int64_t run, bool per_channel,
                                    const double* __restrict__ scale, double epsilon, double* __restrict__ sum_dy_xhat,
                                    double* __restrict__ sum_dy, int group) {
  __shared__ double smem[kRowBlock / kWarp];
  auto add = [](double a, double b) { return a + b; };
  const int per_block = blockDim.x / group;
  const int gid = threadIdx.x / group, lane = threadIdx.x % group;
  const int64_t block_len = cpg * run;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * per_block; base < blocks;
       base += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t b = base + gid;
    const bool active = b < blocks;
    const int64_t len = active ? block_len : 0;
    const int64_t r = active ? run : 0;
    const T* xb = x + (active ? b : 0) * block_len;
    const T* dyb = dy + (active ? b : 0) * block_len;
    double mean = 0;
    for (int64_t j = lane; j < len; j += group) mean += static_cast<double>(LoadValue<T>(xb[j]));
    mean = GroupReduce(mean, group, add, smem);
    mean = len > 0 ? mean / static_cast<double>(len) : 0.0;
    double var = 0;
    for (int64_t j = lane; j < len; j += group) {
      const double d = static_cast<double>(LoadValue<T>(xb[j])) - mean;
      var += d * d;
    }
    var = GroupReduce(var, group, add, smem);
    var = len > 0 ? var / static_cast<double>(len) : 0.0;
    const double inv = 1.0 / sqrt(var + epsilon);
    const int64_t grp = (active ? b : 0) % groups, c0 = grp * cpg;
    double sum_g = 0, sum_g_xhat = 0;
    for (int64_t c = 0; c < cpg; ++c) {
      double acc_dy_xhat = 0, acc_dy = 0;
      for (int64_t j = c * r + lane; j < (c + 1) * r; j += group) {
        const double xhat = (static_cast<double>(LoadValue<T>(xb[j])) - mean) * inv;
        const double g = static_cast<double>(LoadValue<T>(dyb[j]));
        acc_dy_xhat += g * xhat;
        acc_dy += g;
      }
      acc_dy_xhat = GroupReduce(acc_dy_xhat, group, add, smem);
      acc_dy = GroupReduce(acc_dy, group, add, smem);
      if (active && lane == 0) {
        sum_dy_xhat[b * cpg + c] = acc_dy_xhat;
        sum_dy[b * cpg + c] = acc_dy;
      }
      const double gamma = active ? scale[per_channel ? c0 + c : grp] : 0.0;
      sum_g += gamma * acc_dy;
      sum_g_xhat += gamma * acc_dy_xhat;
    }
    if (!active || !dx) continue;
    const double mean_g = sum_g / static_cast<double>(len), mean_g_xhat = sum_g_xhat / static_cast<double>(len);
    T* dxb = dx + b * block_len;
    for (int64_t j = lane; j < len; j += group) {
      const double gamma = scale[per_channel ? c0 + j / run : grp];
      const double xhat = (static_cast<double>(LoadValue<T>(xb[j])) - mean) * inv;
      const double g = static_cast<double>(LoadValue<T>(dyb[j])) * gamma;
      dxb[j] = StoreValue<T>(static_cast<ComputeType<T>>(inv * (g - mean_g - xhat * mean_g_xhat)));
    }
  }
}

// out[k] = the sum over samples n (in order) of per_nc[n * channels + c] for k's channel, or, per group, the sum over
// the group's channels (in order) of those sums.
template <typename T>
__global__ void GroupNormGradParamKernel(const double* __restrict__ per_nc, T* __restrict__ out, int64_t count,
                                         int64_t batch, int64_t channels, int64_t cpg, bool per_channel) {
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double sum = 0;
    const int64_t c0 = per_channel ? k : k * cpg, c1 = per_channel ? k + 1 : (k + 1) * cpg;
    for (int64_t c = c0; c < c1; ++c) {
      double per_c = 0;
      for (int64_t n = 0; n < batch; ++n) per_c += per_nc[n * channels + c];
      sum += per_c;
    }
    out[k] = StoreValue<T>(static_cast<ComputeType<T>>(sum));
  }
}

template <typename T>
Status RunGroupNormGrad(const GroupNormGradArgs& a, const ScratchFn& scratch, cudaStream_t stream) {
  const int64_t channels = a.groups * a.channels_per_group;
  const int64_t blocks = a.batch * a.groups;
  const size_t param_bytes = AlignScratch(static_cast<size_t>(a.param_count) * sizeof(double));
  const size_t sum_bytes = AlignScratch(static_cast<size_t>(a.batch * channels) * sizeof(double));
  ONNXAMP_ASSIGN_OR_RETURN(void* base_ptr, scratch(param_bytes + 2 * sum_bytes));
  char* base = static_cast<char*>(base_ptr);
  double* scale = reinterpret_cast<double*>(base);
  double* sum_dy_xhat = reinterpret_cast<double*>(base + param_bytes);
  double* sum_dy = reinterpret_cast<double*>(base + param_bytes + sum_bytes);
  ONNXAMP_RETURN_IF_ERROR(ExpandParam<double>(a.scale, scale, a.param_count, stream, "GroupNormalizationGrad scale"));
  if (blocks > 0) {
    const int group = GroupForRow(a.channels_per_group * a.run);
    GroupNormGradKernel<T><<<RowBlocks(blocks, group), kRowBlock, 0, stream>>>(
        static_cast<const T*>(a.dy), static_cast<const T*>(a.x), static_cast<T*>(a.dx), blocks, a.groups,
        a.channels_per_group, a.run, a.per_channel, scale, a.epsilon, sum_dy_xhat, sum_dy, group);
    ONNXAMP_RETURN_IF_ERROR(CheckLaunch("GroupNormalizationGrad"));
  }
  for (int i = 0; i < 2; ++i) {
    void* out = i == 0 ? a.dscale : a.dbias;
    if (!out || a.param_count == 0) continue;
    GroupNormGradParamKernel<T><<<GridFor(a.param_count), kThreadsPerBlock, 0, stream>>>(
        i == 0 ? sum_dy_xhat : sum_dy, static_cast<T*>(out), a.param_count, a.batch, channels, a.channels_per_group,
        a.per_channel);
    ONNXAMP_RETURN_IF_ERROR(CheckLaunch(i == 0 ? "GroupNormalizationGrad dScale" : "GroupNormalizationGrad dBias"));
  }
  return Status::Ok();
}

}  // namespace

Status LaunchLayerNormGrad(const LayerNormGradArgs& args, const ScratchFn& scratch, cudaStream_t stream) {
  return DispatchFloat(args.dtype, "LayerNormalizationGrad", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return RunLayerNormGrad<T, ComputeType<T>>(args, scratch, stream);
  });
}

Status LaunchGroupNormGrad(const GroupNormGradArgs& args, const ScratchFn& scratch, cudaStream_t stream) {
  return DispatchFloat(args.dtype, "GroupNormalizationGrad", [&](auto tag) -> Status {
    return RunGroupNormGrad<typename decltype(tag)::type>(args, scratch, stream);
  });
}

}  // namespace onnxamp::cuda::norm_reduce
