// Launchers of the CUDA RoiAlign kernel and of its com.onnxamp gradient RoiAlignGrad (roi_align_kernels.cu):
// roi_align_cuda.cc checks the inputs and computes every roi's geometry with the CPU kernel's helpers
// (runtime/ops/detection/roi_align.h; the rois and batch indices are host inputs), uploads them, and calls these,
// which queue the work on `stream` without synchronising. Every sample comes from the CPU's own roi_sample.h and the
// file is built without FMA contraction: the results are the CPU kernel's bits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/cuda/ops/tensor/index_grad_launch.h"
#include "runtime/ops/detection/roi_sample.h"

namespace onnxamp::cuda {

// X (and dX) [batch, channels, height, width], Y (and dY) [num_rois, channels, out_h, out_w], of `dtype` (a float
// type); rois and batch_indices: device arrays of num_rois entries.
struct RoiAlignArgs {
  DType dtype = DType::kFloat32;
  bool max_mode = false;
  int64_t out_h = 1, out_w = 1;
  int64_t batch = 0, channels = 0, height = 0, width = 0, num_rois = 0;
  const ops::RoiGeometry* rois = nullptr;
  const int64_t* batch_indices = nullptr;
  const void* x = nullptr;   // RoiAlign
  void* y = nullptr;         // RoiAlign
  const void* dy = nullptr;  // RoiAlignGrad
  void* dx = nullptr;        // RoiAlignGrad
};

// Y: one thread per (roi, channel, bin) over its samples in order, in the CPU's compute type (float for float16,
// bfloat16 and float; double for double): avg adds the weighted taps and divides by the sample count, max takes the
// largest weighted tap.
Status LaunchRoiAlign(const RoiAlignArgs& args, cudaStream_t stream);

// dX (mode avg): one thread per (image, channel) walks the rois of its image in order, each bin's samples in order,
// and adds dY / count times each tap's weight at the tap, in double (a plane of doubles per (image, channel) from
// `scratch`, taken once), then one rounding: the CPU's order, no atomics. The parallelism is batch x channels.
Status LaunchRoiAlignGrad(const RoiAlignArgs& args, const GradScratchFn& scratch, cudaStream_t stream);

}  // namespace onnxamp::cuda
