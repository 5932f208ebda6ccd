// Launchers of the CUDA kernels of the index and movement gradient ops (GatherGrad, GatherElementsGrad, PadGrad,
// ResizeGrad; SliceGrad is a fill and a strided copy): the host kernels in index_grad_cuda.cc resolve shapes and
// build tables on the host, these queue the work on `stream` without synchronising.
//
// Every sum has a fixed order that does not depend on the launch geometry, so a run gives the same bits every time
// (no atomics): repeated targets are grouped by a stable sort, or summed by one thread through per-axis inverse
// tables, in the order the CPU reference adds them. Element types are the float types (`dtype`: float32, float16,
// bfloat16, float64); sums are in float (double for float64).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"

namespace onnxamp::cuda {

// Device scratch for a launcher: at least `bytes` (null for 0), valid until the work the launcher queued has run.
// A launcher calls it at most once.
using GradScratchFn = std::function<StatusOr<void*>(size_t bytes)>;

// GatherGrad: dY viewed as [outer, count, inner], dX as [outer, dim, inner] (zeroed here). dX[o, r, i] = the sum,
// in index order, of dY[o, j, i] over the j with indices[j] == r (negative indices count from the end; an index
// outside [-dim, dim) contributes nothing). The indices (int32 or int64, device memory) are sorted stably by row.
Status LaunchGatherGrad(DType dtype, void* dx, const void* dy, const void* indices, bool indices_int64, int64_t outer,
                        int64_t dim, int64_t count, int64_t inner, const GradScratchFn& scratch, cudaStream_t stream);

// Most dims GatherElementsGrad and the inverse-map gradient kernels take.
inline constexpr int kMaxGradRank = 16;

// GatherElementsGrad: dY and the indices have dims idx_dims[0..rank); dX (zeroed here) has data_strides (contiguous
// strides of data's dims). Each dY element is added at its position with the axis coordinate replaced by its index
// (negative counts from the end of `dim`; outside [-dim, dim): dropped), repeated positions in row-major order of dY.
struct GatherElementsGradArgs {
  int rank = 0;
  int axis = 0;
  int64_t dim = 0;
  int64_t dx_count = 0;
  int64_t idx_dims[kMaxGradRank] = {};
  int64_t data_strides[kMaxGradRank] = {};
};
Status LaunchGatherElementsGrad(DType dtype, void* dx, const void* dy, const void* indices, bool indices_int64,
                                const GatherElementsGradArgs& args, const GradScratchFn& scratch, cudaStream_t stream);

// The adjoint of a gather whose source index along each axis is a function of the output index along that axis
// (Pad in every mode, Resize nearest). Per axis k, the output indices that read input index v are
// table[offsets[k] + table[starts[k] + v] .. table[starts[k] + v + 1]) (ascending; `starts` holds in_dims[k] + 1
// entries per axis, relative to offsets[k]). dX[v] = the sum of dY over every combination of those output indices,
// in row-major order of dY (dy_strides: dY's contiguous strides). rank in [1, kMaxGradRank].
struct MapAdjointArgs {
  int rank = 0;
  int64_t in_dims[kMaxGradRank] = {};
  int64_t dy_strides[kMaxGradRank] = {};
  int64_t starts[kMaxGradRank] = {};   // offset of axis k's in_dims[k] + 1 list bounds in the table
  int64_t offsets[kMaxGradRank] = {};  // offset of axis k's output indices in the table
};
Status LaunchMapAdjoint(DType dtype, void* dx, const void* dy, const int64_t* table, const MapAdjointArgs& args,
                        cudaStream_t stream);

// The adjoint of one separable linear/cubic Resize pass over one axis: src [outer, out, inner], dst [outer, in,
// inner]. dst[b, v, i] = sum over the taps (o, k) reading v, in order of o then k, of w * src[b, o, i], multiply and
// add rounded separately in the compute type (float, double for float64) as the CPU does. The taps of v are
// entry_o/entry_w[bounds[v] .. bounds[v + 1]) (device memory; weights in the compute type). src/dst hold the data
// type when *_is_storage, else the compute type.
struct ResizeAdjointPassArgs {
  int64_t outer = 0, in = 0, out = 0, inner = 0;
  const int64_t* bounds = nullptr;
  const int64_t* entry_o = nullptr;
  const void* entry_w = nullptr;
  bool src_is_storage = true;
  bool dst_is_storage = true;
};
Status LaunchResizeAdjointPass(DType dtype, void* dst, const void* src, const ResizeAdjointPassArgs& args,
                               cudaStream_t stream);

}  // namespace onnxamp::cuda
