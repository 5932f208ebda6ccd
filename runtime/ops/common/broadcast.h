// Numpy-style broadcasting: output shapes, compatibility checks and a fast index iterator over broadcast inputs.
//
// Multidirectional broadcasting (Add, Where, Min, ...): shapes are right-aligned and each output dim is the one
// dim that is not 1 (or 1). Unidirectional broadcasting (PRelu's slope, Expand-like checks, Gemm's C): one
// shape must broadcast to a given target without changing it.
//
// BroadcastPlan describes how N inputs map onto one output in element strides, with adjacent dims merged
// wherever every input allows it, so that the common cases become one or two loops:
//   same shapes           -> rank 1, all inner strides 1
//   tensor op scalar      -> rank 1, the scalar's stride 0
//   [N, C] op [C]         -> rank 2, dims {N, C}, the row's strides {0, 1}
//   [N, C, HW] op [C, 1]  -> rank 3, dims {N, C, HW}, the per-channel strides {0, 1, 0}
// ForEachBroadcastSpan walks a range of output elements as spans along the innermost merged dim, where every
// input's stride is 0 or 1; kernels specialise their inner loop on those two cases so the compiler vectorizes it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace onnxamp::ops {

// "[2,3,4]" ("[]" for a scalar).
std::string ShapeToString(std::span<const int64_t> dims);

// The multidirectional broadcast of two shapes, or InvalidArgument naming both shapes and the clashing dims:
// "shapes [2,3] and [4] cannot be broadcast: dim 3 vs 4 (axis -1)".
StatusOr<std::vector<int64_t>> BroadcastShapes(std::span<const int64_t> a, std::span<const int64_t> b);

// The multidirectional broadcast of N shapes (N >= 1). The error names the two inputs (by index) that clash
// and both of their shapes.
StatusOr<std::vector<int64_t>> BroadcastShapes(const std::vector<std::vector<int64_t>>& shapes);

// OK when `from` broadcasts unidirectionally to `to`: rank(from) <= rank(to) and each right-aligned dim of
// `from` is 1 or equal to the dim of `to`. Otherwise InvalidArgument naming `what` and both shapes:
// "slope shape [3] cannot be broadcast to [2,4]: dim 3 vs 4 (axis -1)".
Status CheckUnidirectionalBroadcast(std::span<const int64_t> from, std::span<const int64_t> to,
                                    std::string_view what = "input");

// Element strides of a contiguous tensor of shape `in` read as the broadcast shape `out` (right-aligned; 0 where
// `in` has no dim or a dim of 1). `in` must broadcast unidirectionally to `out` (ONNXAMP_CHECK).
std::vector<int64_t> BroadcastStrides(std::span<const int64_t> in, std::span<const int64_t> out);

// How N contiguous inputs are read to produce one contiguous output.
class BroadcastPlan {
 public:
  // Multidirectional: the output shape is the broadcast of the inputs' shapes. Fails like BroadcastShapes.
  static StatusOr<BroadcastPlan> Make(const std::vector<std::vector<int64_t>>& input_shapes);
  // The same over shapes the caller keeps (the per-run path of the elementwise kernels: no copies of the shapes).
  static StatusOr<BroadcastPlan> Make(std::span<const std::span<const int64_t>> input_shapes);
  // Unidirectional: every input must broadcast to `output_shape`, which is kept as given (Expand-like uses,
  // accumulating into an output). The error names the input index and both shapes.
  static StatusOr<BroadcastPlan> MakeTo(const std::vector<int64_t>& output_shape,
                                        const std::vector<std::vector<int64_t>>& input_shapes);

  // The full (unmerged) output shape.
  const std::vector<int64_t>& output_dims() const { return output_dims_; }
  int64_t num_elements() const { return num_elements_; }
  size_t num_inputs() const { return num_inputs_; }

  // Merged form: rank() dims (at least 1; size-1 output dims are dropped, adjacent dims merged where every
  // input's strides allow it). stride(i, k) is input i's element stride along merged dim k (0: broadcast).
  int rank() const { return static_cast<int>(dims_.size()); }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t stride(size_t input, int axis) const { return strides_[input * dims_.size() + axis]; }
  // The innermost merged dim, and input i's stride along it (always 0 or 1).
  int64_t inner_size() const { return dims_.back(); }
  int64_t inner_stride(size_t input) const { return stride(input, rank() - 1); }

  // True when input i is read exactly in output order (same element count as the output, no broadcast).
  bool IsFull(size_t input) const;
  // True when input i has one element (read at offset 0 for every output element).
  bool IsScalar(size_t input) const;

 private:
  // Sets num_elements_ and the merged dims and strides from output_dims_ (already set) and the input shapes.
  void Finish(std::span<const std::span<const int64_t>> input_shapes);

  std::vector<int64_t> output_dims_;
  int64_t num_elements_ = 0;
  size_t num_inputs_ = 0;
  std::vector<int64_t> dims_;
  std::vector<int64_t> strides_;  // num_inputs_ x dims_.size(), row-major
};

// Walks output elements [begin, end) of `plan` as spans along the innermost merged dim. For each span calls
// fn(out_offset, in_offsets, len): output elements [out_offset, out_offset + len) read input i at
// in_offsets[i] + j * plan.inner_stride(i) for j in [0, len). Spans never cross a row of the innermost dim;
// a partial first and last row are handled. in_offsets points to plan.num_inputs() values.
template <typename Fn>
void ForEachBroadcastSpan(const BroadcastPlan& plan, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;
  const int rank = plan.rank();
  const size_t n_in = plan.num_inputs();
  const int64_t inner = plan.inner_size();
  // Odometer over the outer merged dims, with each input's offset kept up to date incrementally.
  constexpr int kInlineRank = 8;
  constexpr size_t kInlineInputs = 4;
  int64_t index_buf[kInlineRank];
  int64_t offset_buf[kInlineInputs];
  std::vector<int64_t> index_heap, offset_heap;
  int64_t* index = index_buf;
  int64_t* offsets = offset_buf;
  if (rank > kInlineRank) {
    index_heap.resize(rank);
    index = index_heap.data();
  }
  if (n_in > kInlineInputs) {
    offset_heap.resize(n_in);
    offsets = offset_heap.data();
  }
  int64_t row = begin / inner;
  int64_t col = begin % inner;
  for (size_t i = 0; i < n_in; ++i) offsets[i] = col * plan.inner_stride(i);
  for (int k = rank - 2; k >= 0; --k) {
    const int64_t d = plan.dims()[k];
    index[k] = row % d;
    row /= d;
    for (size_t i = 0; i < n_in; ++i) offsets[i] += index[k] * plan.stride(i, k);
  }
  int64_t pos = begin;
  while (pos < end) {
    const int64_t len = std::min(inner - col, end - pos);
    fn(pos, static_cast<const int64_t*>(offsets), len);
    pos += len;
    if (pos >= end) break;
    // Next row: rewind the inner dim, then advance the odometer.
    for (size_t i = 0; i < n_in; ++i) offsets[i] -= col * plan.inner_stride(i);
    col = 0;
    for (int k = rank - 2; k >= 0; --k) {
      if (++index[k] < plan.dims()[k]) {
        for (size_t i = 0; i < n_in; ++i) offsets[i] += plan.stride(i, k);
        break;
      }
      for (size_t i = 0; i < n_in; ++i) offsets[i] -= (plan.dims()[k] - 1) * plan.stride(i, k);
      index[k] = 0;
    }
  }
}

// The element offset in a contiguous input of shape `in` read by output element `out_index` of the broadcast shape
// `out`, by plain division over the unmerged dims: the reference that BroadcastPlan and ForEachBroadcastSpan are
// tested against, and a way to do one-off lookups. `in` must broadcast unidirectionally to `out`.
int64_t BroadcastInputOffset(std::span<const int64_t> in, std::span<const int64_t> out, int64_t out_index);

// Opset 1-6 broadcasting of binary ops (attributes `broadcast` and `axis`): B's shape must equal A's, or with
// broadcast=1 be a contiguous run of A's dims starting at `axis` (default: A's trailing dims; a scalar B always
// fits). Returns B's shape padded with 1s to A's rank, ready for BroadcastPlan::MakeTo(A's shape, ...). The error
// names both shapes.
StatusOr<std::vector<int64_t>> LegacyBroadcastShape(std::span<const int64_t> a, std::span<const int64_t> b,
                                                    bool broadcast, std::optional<int64_t> axis);

}  // namespace onnxamp::ops
