// Transpose pieces shared by the CPU kernel, device kernels and the tests: the `perm` attribute (TransposeSpec), a
// plain reference (one division per element) and the fast path the CPU kernel uses (dims simplified, row copies
// when the innermost dim stays innermost, blocked tiles otherwise, split over threads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::ops {

// The parsed `perm` attribute of one Transpose node.
class TransposeSpec {
 public:
  // Reads `perm` (absent: reverse the dims); InvalidArgument when it is not a permutation.
  Status Parse(const ir::Node& node);

  // The permutation for input `x`: the attribute, checked against x's rank (InvalidArgument), or the reversed dims.
  StatusOr<std::vector<int64_t>> Perm(const ir::Tensor& x) const;

 private:
  bool has_perm_ = false;
  std::vector<int64_t> perm_;
};

// Writes the transpose of `src` (shape `dims`, `elem_size`-byte elements, row-major) to `dst`: output dim k is
// input dim perm[k]. perm must be a permutation of [0, dims.size()).
void TransposeReference(const std::byte* src, std::byte* dst, std::span<const int64_t> dims,
                        std::span<const int64_t> perm, size_t elem_size);

// Same result as TransposeReference, fast. elem_size must be 1, 2, 4, 8 or 16; pool may be null.
void TransposeFast(const std::byte* src, std::byte* dst, std::span<const int64_t> dims, std::span<const int64_t> perm,
                   size_t elem_size, exec::ThreadPool* pool);

// Writes the elements of x, viewed with dims `view` (x's element count; a reshape), transposed by perm into y, which
// holds as many elements of x's type: TransposeFast for fixed-size elements, a strided copy for strings. The
// Transpose kernel's core, and DepthToSpace's and SpaceToDepth's (a 6-D view). Unimplemented for sub-byte types.
Status TransposeElements(const ir::Tensor& x, std::span<const int64_t> view, std::span<const int64_t> perm,
                         ir::Tensor* y, exec::ThreadPool* pool);

}  // namespace onnxamp::ops
