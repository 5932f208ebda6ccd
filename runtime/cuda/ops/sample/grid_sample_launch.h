// Launchers of the CUDA GridSample kernel and of its com.onnxamp gradient GridSampleGrad (grid_sample_kernels.cu):
// grid_sample_cuda.cc checks attributes and shapes with the CPU kernel's helpers (runtime/ops/grid_sample/
// grid_sample.h) and calls these, which queue the work on `stream` without synchronising. Every point's taps come from
// the CPU's own grid_sample_taps.h, and the file is compiled without contracting products and sums into FMAs (the CPU
// reference makes none): the results are the CPU kernel's bits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/cuda/ops/tensor/index_grad_launch.h"
#include "runtime/ops/grid_sample/grid_sample_taps.h"

namespace onnxamp::cuda {

// X [n, c, h, w], grid [n, ho, wo, 2], Y and dY [n, c, ho, wo], all of `dtype` (a float type), device memory.
struct GridSampleArgs {
  DType dtype = DType::kFloat32;
  ops::grid_sample::GridSpec spec;
  int64_t n = 0, c = 0, h = 0, w = 0, ho = 0, wo = 0;
  const void* x = nullptr;
  const void* grid = nullptr;
  const void* dy = nullptr;  // GridSampleGrad only
  void* y = nullptr;         // GridSample only
  void* dx = nullptr;        // GridSampleGrad: null when not requested
  void* dgrid = nullptr;     // GridSampleGrad: null when not requested
};

// Y: one thread per grid point, which adds its taps' weighted values in double per channel, rounded once.
Status LaunchGridSample(const GridSampleArgs& args, cudaStream_t stream);

// dGrid: one thread per grid point, as the CPU sums it (channels, then taps). dX: every (point, tap) pair's pixel as
// a key, sorted stably (runtime/cuda/ops/tensor/sorted_segments.cuh), then one thread per (pixel, channel) adds dY
// times the tap's weight over its pairs in the CPU's order (points, then taps), in double from zero; pixels no tap
// reads are zero. No atomics. Takes its scratch (keys, positions, weights: 32 bytes per pair) once from `scratch`.
Status LaunchGridSampleGrad(const GridSampleArgs& args, const GradScratchFn& scratch, cudaStream_t stream);

}  // namespace onnxamp::cuda
