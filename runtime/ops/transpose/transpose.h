// Transpose implementations shared by the CPU kernel and its tests: a plain reference (one division per element)
// and the fast path the kernel uses (dims simplified, row copies when the innermost dim stays innermost, blocked
// tiles otherwise, split over threads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "runtime/executor/thread_pool.h"

namespace onnxamp::ops {

// Writes the transpose of `src` (shape `dims`, `elem_size`-byte elements, row-major) to `dst`: output dim k is
// input dim perm[k]. perm must be a permutation of [0, dims.size()).
void TransposeReference(const std::byte* src, std::byte* dst, std::span<const int64_t> dims,
                        std::span<const int64_t> perm, size_t elem_size);

// Same result as TransposeReference, fast. elem_size must be 1, 2, 4, 8 or 16; pool may be null.
void TransposeFast(const std::byte* src, std::byte* dst, std::span<const int64_t> dims, std::span<const int64_t> perm,
                   size_t elem_size, exec::ThreadPool* pool);

}  // namespace onnxamp::ops
