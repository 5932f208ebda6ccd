// Launchers of the CUDA GatherND, ScatterND, ScatterElements (and Scatter) and com.onnxamp GatherNDGrad kernels
// (scatter_kernels.cu), callable from plain C++: the host kernels in scatter_cuda.cc check shapes with the CPU
// kernels' helpers and call these, which queue the work on `stream` without synchronising.
//
// Indices (int32 or int64) are read on the device. An index outside [-dim, dim) addresses nothing: GatherND gives
// zero bytes for its slice, ScatterND/ScatterElements drop its update (data keeps its value), GatherNDGrad drops its
// dY slice. (The CPU kernels report an OutOfRange error instead; see scatter_cuda.cc.)
//
// Repeated destinations are resolved in index order, as on the CPU: the sources are sorted stably by destination
// (sorted_segments.cuh) and one thread per (destination, inner element) applies them in order: the last write wins
// without a reduction; add, mul, max and min combine from data's value in the CPU's arithmetic (fp16/bf16 in float,
// rounded after each update; integers wrap; bool: OR for add and max, AND for mul and min). GatherNDGrad sums from
// zero in float (double for float64) and rounds once. No atomics: the same bits on every run.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/cuda/ops/tensor/index_grad_launch.h"

namespace onnxamp::cuda {

// How ScatterND and ScatterElements combine an update with the destination (ops::ScatterReduction's values).
enum class ScatterCombine : int { kNone = 0, kAdd = 1, kMul = 2, kMax = 3, kMin = 4 };

// Index tuples of GatherND, ScatterND and GatherNDGrad: indices [count, m] with count = batch items * `tuples`; data
// viewed as [rows, slice]. Tuple t (of batch item t / tuples) addresses row (t / tuples) * batch_rows + sum_j c_j *
// row_strides[j], coordinate c_j in [-dims[j], dims[j]) (negative from the end); a tuple with a coordinate outside
// its range addresses no row. m in [1, kMaxGradRank].
struct NdIndexArgs {
  int m = 0;
  int64_t tuples = 0;
  int64_t batch_rows = 0;
  int64_t rows = 0;
  int64_t dims[kMaxGradRank] = {};
  int64_t row_strides[kMaxGradRank] = {};
};

// GatherND: dst [count, slice_units] = the addressed rows of data (slices of slice_units units of `unit` bytes each;
// zero bytes for a tuple that addresses nothing).
Status LaunchGatherND(void* dst, const void* data, const void* indices, bool indices_int64, const NdIndexArgs& args,
                      int64_t count, int64_t slice_units, size_t unit, cudaStream_t stream);

// GatherNDGrad: dx [rows, slice] (zeroed here) = the sum of dY's rows [count, slice] at the rows their tuples address,
// in index order. Float types (`dtype`).
Status LaunchGatherNDGrad(DType dtype, void* dx, const void* dy, const void* indices, bool indices_int64,
                          const NdIndexArgs& args, int64_t count, int64_t slice, const GradScratchFn& scratch,
                          cudaStream_t stream);

// ScatterND: `out` [rows, slice] already holds data; updates' rows [count, slice] go to the rows their tuples address
// in index order, combined by `combine`. kNone takes any element size (`dtype`'s); the reductions the numeric types
// and bool.
Status LaunchScatterND(DType dtype, ScatterCombine combine, void* out, const void* updates, const void* indices,
                       bool indices_int64, const NdIndexArgs& args, int64_t count, int64_t slice,
                       const GradScratchFn& scratch, cudaStream_t stream);

// ScatterElements (and Scatter): `out` (args.dx_count elements) already holds data; updates (and indices) have dims
// args.idx_dims, and each update goes to its own position with the axis coordinate replaced by its index, in
// row-major order of the updates, combined by `combine`.
Status LaunchScatterElements(DType dtype, ScatterCombine combine, void* out, const void* updates, const void* indices,
                             bool indices_int64, const GatherElementsGradArgs& args, const GradScratchFn& scratch,
                             cudaStream_t stream);

}  // namespace onnxamp::cuda
