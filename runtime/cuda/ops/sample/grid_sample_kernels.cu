// GridSample and GridSampleGrad on CUDA (grid_sample_launch.h). Built with --fmad=false (runtime/cuda/CMakeLists.txt)
// so that the taps' weights and the sums round as the CPU's do.
#include <limits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/sample/grid_sample_launch.h"
#include "runtime/cuda/ops/tensor/sorted_segments.cuh"

namespace onnxamp::cuda {
namespace {

namespace gs = ops::grid_sample;

struct Sizes {
  int64_t n, c, h, w, points;
};

template <typename T>
__device__ bool PointTaps(const gs::GridSpec& spec, const T* grid, int64_t e, const Sizes& z, gs::TapList* taps) {
  return gs::SampleTaps<ComputeType<T>>(spec, LoadValue(grid[e * 2]), LoadValue(grid[e * 2 + 1]), z.h, z.w, taps);
}

template <typename T>
__global__ void ForwardKernel(gs::GridSpec spec, const T* __restrict__ x, const T* __restrict__ grid, T* __restrict__ y,
                              Sizes z) {
  const int64_t plane = z.h * z.w;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < z.n * z.points;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = e / z.points, p = e % z.points;
    gs::TapList taps;
    const bool finite = PointTaps(spec, grid, e, z, &taps);
    for (int64_t ch = 0; ch < z.c; ++ch) {
      const T* xc = x + (b * z.c + ch) * plane;
      const double v =
          gs::PointValue(taps, finite, [&](int64_t offset) { return static_cast<double>(LoadValue(xc[offset])); });
      y[(b * z.c + ch) * z.points + p] = StoreValue<T>(static_cast<ComputeType<T>>(v));
    }
  }
}

template <typename T>
__global__ void GridGradKernel(gs::GridSpec spec, const T* __restrict__ x, const T* __restrict__ grid,
                               const T* __restrict__ dy, T* __restrict__ dgrid, Sizes z) {
  const int64_t plane = z.h * z.w;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < z.n * z.points;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = e / z.points, p = e % z.points;
    gs::TapList taps;
    const bool finite = PointTaps(spec, grid, e, z, &taps);
    double gx = finite ? 0 : std::numeric_limits<double>::quiet_NaN(), gy = gx;
    for (int64_t ch = 0; ch < z.c; ++ch) {
      const double g = static_cast<double>(LoadValue(dy[(b * z.c + ch) * z.points + p]));
      const T* xc = x + (b * z.c + ch) * plane;
      gs::AddPointGridGrad(
          taps, g, [&](int64_t offset) { return static_cast<double>(LoadValue(xc[offset])); }, &gx, &gy);
    }
    dgrid[e * 2] = StoreValue<T>(static_cast<ComputeType<T>>(gx * taps.sx));
    dgrid[e * 2 + 1] = StoreValue<T>(static_cast<ComputeType<T>>(gy * taps.sy));
  }
}

// Pair (point e, tap t) at index e * per_point + t: its pixel (b * plane + offset) as the key, or `invalid_key` for a
// tap the point does not have, and its weight.
template <typename T>
__global__ void TapKeysKernel(gs::GridSpec spec, const T* __restrict__ grid, Sizes z, int per_point,
                              uint64_t invalid_key, uint64_t* __restrict__ keys, int* __restrict__ positions,
                              double* __restrict__ weights) {
  const int64_t plane = z.h * z.w;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < z.n * z.points;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    gs::TapList taps;
    PointTaps(spec, grid, e, z, &taps);
    const int64_t b = e / z.points;
    for (int t = 0; t < per_point; ++t) {
      const int64_t i = e * per_point + t;
      const bool has = t < taps.count;
      keys[i] = has ? static_cast<uint64_t>(b * plane + taps.taps[t].offset) : invalid_key;
      weights[i] = has ? taps.taps[t].w : 0.0;
      positions[i] = static_cast<int>(i);
    }
  }
}

// Thread (channel, sorted position q) that starts a segment of a pixel: dX there = the sum over the segment of dY at
// the pair's point times its weight.
template <typename T>
__global__ void DxKernel(const T* __restrict__ dy, T* __restrict__ dx, const uint64_t* __restrict__ keys,
                         const int* __restrict__ positions, const double* __restrict__ weights, int64_t count,
                         int per_point, uint64_t invalid_key, Sizes z) {
  const int64_t plane = z.h * z.w;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < count * z.c;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = e / count, q = e % count;
    const uint64_t key = keys[q];
    if (key >= invalid_key || (q > 0 && keys[q - 1] == key)) continue;
    const int64_t b = static_cast<int64_t>(key) / plane, offset = static_cast<int64_t>(key) % plane;
    double acc = 0;
    for (int64_t r = q; r < count && keys[r] == key; ++r) {
      const int pos = positions[r];
      const int64_t p = (pos / per_point) % z.points;
      acc += static_cast<double>(LoadValue(dy[(b * z.c + ch) * z.points + p])) * weights[pos];
    }
    dx[(b * z.c + ch) * plane + offset] = StoreValue<T>(static_cast<ComputeType<T>>(acc));
  }
}

Sizes SizesOf(const GridSampleArgs& a) { return {a.n, a.c, a.h, a.w, a.ho * a.wo}; }

}  // namespace

Status LaunchGridSample(const GridSampleArgs& a, cudaStream_t stream) {
  const Sizes z = SizesOf(a);
  if (z.n * z.points == 0 || z.c == 0) return Status::Ok();
  return DispatchFloat(a.dtype, "GridSample", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ForwardKernel<T><<<GridFor(z.n * z.points), kThreadsPerBlock, 0, stream>>>(
        a.spec, static_cast<const T*>(a.x), static_cast<const T*>(a.grid), static_cast<T*>(a.y), z);
    return CheckLaunch("GridSample");
  });
}

Status LaunchGridSampleGrad(const GridSampleArgs& a, const GradScratchFn& scratch, cudaStream_t stream) {
  const Sizes z = SizesOf(a);
  const char* what = "GridSampleGrad";
  return DispatchFloat(a.dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(a.x);
    const T* grid = static_cast<const T*>(a.grid);
    const T* dy = static_cast<const T*>(a.dy);
    if (a.dgrid && z.n * z.points > 0) {
      GridGradKernel<T>
          <<<GridFor(z.n * z.points), kThreadsPerBlock, 0, stream>>>(a.spec, x, grid, dy, static_cast<T*>(a.dgrid), z);
      ONNXAMP_RETURN_IF_ERROR(CheckLaunch(what));
    }
    const int64_t plane = z.h * z.w;
    if (!a.dx || z.n * z.c * plane == 0) return Status::Ok();
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(a.dx, 0, static_cast<size_t>(z.n * z.c * plane) * sizeof(T), stream),
                                 what, ": zeroing dX");
    if (z.points == 0) return Status::Ok();
    const int per_point = gs::TapsOf(a.spec.mode);
    const int64_t count = z.n * z.points * per_point;
    const uint64_t invalid_key = static_cast<uint64_t>(z.n * plane);
    // One scratch call: the weights first, then the sort's keys, positions and storage.
    const size_t weight_bytes = segments::Align256(static_cast<size_t>(count) * sizeof(double));
    double* weights = nullptr;
    auto with_weights = [&](size_t bytes) -> StatusOr<void*> {
      ONNXAMP_ASSIGN_OR_RETURN(void* p, scratch(weight_bytes + bytes));
      weights = static_cast<double*>(p);
      return static_cast<void*>(static_cast<char*>(p) + weight_bytes);
    };
    ONNXAMP_ASSIGN_OR_RETURN(const segments::SortScratch s,
                             segments::MakeSortScratch(count, invalid_key, with_weights, what));
    TapKeysKernel<T><<<GridFor(z.n * z.points), kThreadsPerBlock, 0, stream>>>(a.spec, grid, z, per_point, invalid_key,
                                                                               s.keys_in, s.positions_in, weights);
    ONNXAMP_RETURN_IF_ERROR(CheckLaunch(what));
    ONNXAMP_RETURN_IF_ERROR(segments::SortKeys(s, stream, what));
    DxKernel<T><<<GridFor(count * z.c), kThreadsPerBlock, 0, stream>>>(
        dy, static_cast<T*>(a.dx), s.keys_out, s.positions_out, weights, count, per_point, invalid_key, z);
    return CheckLaunch(what);
  });
}

}  // namespace onnxamp::cuda
