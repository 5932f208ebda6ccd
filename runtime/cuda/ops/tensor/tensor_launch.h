// Launchers of the CUDA shape and data-movement kernels (copies, transposes, gathers, pads, fills, resize passes),
// callable from plain C++: the kernel classes in the .cc files of this folder decide shapes and plans on the host
// and call these, which launch on a stream and return without synchronising.
//
// Data movement never looks at values, so every launcher takes an element size (1, 2, 4, 8 or 16 bytes) instead of
// a type: one kernel instantiation per size serves every dtype. Pointers are device pointers aligned to their
// element size. Every launcher does nothing when its element count is 0 (the pointers may then be null), and
// returns the launch error, if any, with `what` (the op) as context; errors while a kernel runs surface at the next
// synchronisation.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/common/status.h"

namespace onnxamp::cuda {

// Most dims a strided copy, a pad or a gather takes (after size-1 dims are dropped and adjacent dims merged).
inline constexpr int kMaxMoveRank = 16;

// dst[sum_k i_k * dst_strides[k]] = src[sum_k i_k * src_strides[k]] for every index i of dims[0..rank), in units
// of `unit` bytes. Strides are in units and may be 0 (broadcast) or negative (reversed); dst and src point at the
// unit of index 0. rank in [1, kMaxMoveRank].
struct StridedCopyArgs {
  int rank = 0;
  int64_t dims[kMaxMoveRank] = {};
  int64_t dst_strides[kMaxMoveRank] = {};
  int64_t src_strides[kMaxMoveRank] = {};
};
Status LaunchStridedCopy(void* dst, const void* src, const StridedCopyArgs& args, size_t unit, cudaStream_t stream,
                         std::string_view what);

// Batched 2-D transpose through shared-memory tiles: src [batch, rows, cols] -> dst [batch, cols, rows].
Status LaunchTranspose2D(void* dst, const void* src, int64_t batch, int64_t rows, int64_t cols, size_t elem_size,
                         cudaStream_t stream, std::string_view what);

// Fills n elements of `elem_size` bytes with the element at `value` (host memory, read before returning).
Status LaunchFill(void* dst, int64_t n, const void* value, size_t elem_size, cudaStream_t stream,
                  std::string_view what);

// Gather along one axis: data viewed as [outer, dim, inner] (inner in units of `unit` bytes), `count` indices
// (int32 or int64, device memory); dst [outer, count, inner]. A negative index counts from the end of the axis; an
// index outside [-dim, dim) gives zero bytes (the CPU kernel reports an error instead; a device kernel cannot).
Status LaunchGather(void* dst, const void* src, const void* indices, bool indices_int64, int64_t outer, int64_t dim,
                    int64_t count, int64_t inner, size_t unit, cudaStream_t stream, std::string_view what);

// GatherElements: dst has the indices' shape idx_dims[0..rank); dst[p] = src[p with p[axis] replaced by
// indices[p]] where data_strides are the data's contiguous strides. Negative indices wrap; indices outside
// [-dim, dim) give zero bytes, as for LaunchGather.
struct GatherElementsArgs {
  int rank = 0;
  int axis = 0;
  int64_t dim = 0;  // data's size along the axis
  int64_t idx_dims[kMaxMoveRank] = {};
  int64_t data_strides[kMaxMoveRank] = {};
};
Status LaunchGatherElements(void* dst, const void* src, const void* indices, bool indices_int64,
                            const GatherElementsArgs& args, size_t elem_size, cudaStream_t stream,
                            std::string_view what);

// Pad: per axis k, output index o maps to v = o - pad_begin[k]; inside [0, len[k]) it reads input index
// crop[k] + v, outside it follows `mode` (constant: the fill element; edge: clamp; reflect: mirror without
// repeating the edge; wrap: modulo len). in_strides are the input's contiguous strides. rank in [0, kMaxMoveRank].
enum class PadKind : int { kConstant = 0, kEdge = 1, kReflect = 2, kWrap = 3 };
struct PadArgs {
  int rank = 0;
  PadKind mode = PadKind::kConstant;
  int64_t out_dims[kMaxMoveRank] = {};
  int64_t in_strides[kMaxMoveRank] = {};
  int64_t pad_begin[kMaxMoveRank] = {};  // max(0, begin pad)
  int64_t crop[kMaxMoveRank] = {};       // max(0, -begin pad)
  int64_t len[kMaxMoveRank] = {};        // input length after cropping both sides (> 0 unless mode is constant)
};
Status LaunchPad(void* dst, const void* src, const PadArgs& args, const void* fill, size_t elem_size,
                 cudaStream_t stream, std::string_view what);

// Resize, nearest: output index space out_dims[0..rank); per axis k the source index of output index o is
// maps[map_offsets[k] + o] (device memory; -1: the fill element). in_strides are the input's strides.
struct ResizeNearestArgs {
  int rank = 0;
  int64_t out_dims[kMaxMoveRank] = {};
  int64_t in_strides[kMaxMoveRank] = {};
  int64_t map_offsets[kMaxMoveRank] = {};
};
Status LaunchResizeNearest(void* dst, const void* src, const int64_t* maps, const ResizeNearestArgs& args,
                           const void* fill, size_t elem_size, cudaStream_t stream);

// Resize, one separable linear/cubic pass over one axis: src viewed as [outer, in, inner], dst [outer, out, inner].
// Output o sums taps * w[o*taps+k] * src[tap_index[o*taps+k]] in order, skipping zero weights, in the compute type
// (float, or double for double data) with separate multiply and add roundings as the CPU does; extrapolate[o] != 0
// writes `extrapolation` instead. Tables are device memory; `weights` are in the compute type.
enum class ResizeFloat : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2, kFloat64 = 3 };
struct ResizePassArgs {
  int64_t outer = 0, in = 0, out = 0, inner = 0, taps = 0;
  const int64_t* tap_index = nullptr;
  const void* weights = nullptr;
  const uint8_t* extrapolate = nullptr;
  double extrapolation = 0;    // converted to the compute type (as the CPU does)
  bool src_is_storage = true;  // src holds the data type (else the compute type)
  bool dst_is_storage = true;  // dst gets the data type (rounded to nearest even), else the compute type
};
Status LaunchResizePass(void* dst, const void* src, ResizeFloat type, const ResizePassArgs& args, cudaStream_t stream);

}  // namespace onnxamp::cuda
