// RoiAlign and RoiAlignGrad on CUDA (roi_align_launch.h). Built with --fmad=false (runtime/cuda/CMakeLists.txt) so
// that the samples' weights and the sums round as the CPU's do.
#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/elementwise/elementwise_launch.h"
#include "runtime/cuda/ops/sample/roi_align_launch.h"

namespace onnxamp::cuda {
namespace {

template <typename T>
__global__ void RoiAlignKernel(RoiAlignArgs a, const T* __restrict__ x, T* __restrict__ y) {
  using C = ComputeType<T>;
  const int64_t bins = a.out_h * a.out_w, total = a.num_rois * a.channels * bins;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / (a.channels * bins), c = (e / bins) % a.channels, bin = e % bins;
    const int64_t ph = bin / a.out_w, pw = bin % a.out_w;
    const T* plane = x + (a.batch_indices[r] * a.channels + c) * a.height * a.width;
    y[e] = StoreValue<T>(ops::RoiBinValue<C>(a.rois[r], a.height, a.width, ph, pw, a.max_mode,
                                             [&](int64_t pos) { return LoadValue(plane[pos]); }));
  }
}

template <typename T>
__global__ void RoiAlignGradKernel(RoiAlignArgs a, const T* __restrict__ dy, double* __restrict__ acc) {
  const int64_t bins = a.out_h * a.out_w, plane_size = a.height * a.width;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < a.batch * a.channels;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = e / a.channels, c = e % a.channels;
    double* plane = acc + e * plane_size;
    for (int64_t r = 0; r < a.num_rois; ++r) {
      if (a.batch_indices[r] != b) continue;
      const ops::RoiGeometry& g = a.rois[r];
      const T* grad = dy + (r * a.channels + c) * bins;
      const double inv_count = 1.0 / static_cast<double>(g.count);
      for (int64_t ph = 0; ph < a.out_h; ++ph) {
        for (int64_t pw = 0; pw < a.out_w; ++pw) {
          const double gv = static_cast<double>(LoadValue(grad[ph * a.out_w + pw])) * inv_count;
          for (int64_t iy = 0; iy < g.grid_h; ++iy) {
            for (int64_t ix = 0; ix < g.grid_w; ++ix) {
              const ops::RoiSample smp = ops::RoiSampleAt(g, a.height, a.width, ph, pw, iy, ix);
              for (int k = 0; k < 4; ++k) plane[smp.pos[k]] += gv * smp.w[k];
            }
          }
        }
      }
    }
  }
}

}  // namespace

Status LaunchRoiAlign(const RoiAlignArgs& a, cudaStream_t stream) {
  const int64_t total = a.num_rois * a.channels * a.out_h * a.out_w;
  if (total == 0) return Status::Ok();
  return DispatchFloat(a.dtype, "RoiAlign", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    RoiAlignKernel<T>
        <<<GridFor(total), kThreadsPerBlock, 0, stream>>>(a, static_cast<const T*>(a.x), static_cast<T*>(a.y));
    return CheckLaunch("RoiAlign");
  });
}

Status LaunchRoiAlignGrad(const RoiAlignArgs& a, const GradScratchFn& scratch, cudaStream_t stream) {
  const int64_t n = a.batch * a.channels * a.height * a.width;
  if (n == 0) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(void* scratch_ptr, scratch(static_cast<size_t>(n) * sizeof(double)));
  double* acc = static_cast<double*>(scratch_ptr);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(acc, 0, static_cast<size_t>(n) * sizeof(double), stream),
                               "RoiAlignGrad: zeroing dX");
  return DispatchFloat(a.dtype, "RoiAlignGrad", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    RoiAlignGradKernel<T>
        <<<GridFor(a.batch * a.channels), kThreadsPerBlock, 0, stream>>>(a, static_cast<const T*>(a.dy), acc);
    ONNXAMP_RETURN_IF_ERROR(CheckLaunch("RoiAlignGrad"));
    return ew::LaunchCast(DType::kFloat64, a.dtype, acc, a.dx, n, stream, "RoiAlignGrad");
  });
}

}  // namespace onnxamp::cuda
