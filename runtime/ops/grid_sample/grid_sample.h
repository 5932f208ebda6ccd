// GridSample's attributes and shape checks, shared by the CPU kernel (grid_sample_cpu.cc) and the CUDA one
// (runtime/cuda/ops/sample/grid_sample_cuda.cc), with the same messages.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/grid_sample/grid_sample_taps.h"

namespace onnxamp::ops::grid_sample {

// mode (bilinear / linear, nearest, bicubic / cubic), padding_mode (zeros, border, reflection), align_corners.
Status ParseGridSpec(const ir::Node& node, GridSpec* spec);

// X [N, C, H, W] and grid [N, Ho, Wo, 2] checked against each other.
struct GridShape {
  int64_t n, c, h, w, ho, wo;
};

// Checks X (input x_index) and grid (the next input): 4-D X only (5-D is refused), grid [N, Ho, Wo, 2] of X's type.
StatusOr<GridShape> ResolveGrid(const exec::KernelContext& ctx, const ir::Tensor& x, const ir::Tensor& grid,
                                size_t x_index);

// GridSampleGrad's dY (input 0): X's type and shape [N, C, Ho, Wo].
Status CheckGridSampleDy(const exec::KernelContext& ctx, const ir::Tensor& dy, const ir::Tensor& x, const GridShape& s);

}  // namespace onnxamp::ops::grid_sample
