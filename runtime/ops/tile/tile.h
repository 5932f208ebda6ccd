// Tile: the per-run repeat counts, output dims and copy plan, shared by the CPU kernel and device kernels (same
// checks, same messages, same plan).
//
// See tile_cpu.cc for the semantics.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

// One run's repeat count per dim and the output dims (dim_k * repeats_k).
struct TileShape {
  std::vector<int64_t> repeats;
  std::vector<int64_t> out_dims;
};

// Reads the counts of a Tile node at `opset` (tiles/axis before 6, repeats after) for input `x`: InvalidArgument
// on a wrong count or a negative one, OutOfRange when a dim overflows.
StatusOr<TileShape> ResolveTile(const exec::KernelContext& ctx, const ir::Tensor& x, int64_t opset);

// The copy of the input (dims `in_dims`) into the contiguous output: the output viewed as [r0, d0, r1, d1, ...],
// reading the input with stride 0 along every repeat dim. Build it only once the output is allocated (the
// allocation refuses sizes whose strides would overflow).
CopyPlan TileCopyPlan(const std::vector<int64_t>& in_dims, const TileShape& shape);

}  // namespace onnxamp::ops
