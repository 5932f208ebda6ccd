// Float GEMMs small enough that a library call's fixed cost dominates (a transformer block with a model width of a
// few hundred: 32x64 by 64x256): a direct AVX-512 kernel with no packing of A or B (B is read in place, one row of
// 64 columns per step, from L1/L2), used by GemmRunner in place of oneDNN for such shapes. Like the other GEMM cores
// it differs from GemmReference only in summation order.
#pragma once

#include <cstdint>

#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/gemm.h"

namespace onnxamp::ops {

// True when RunSmallGemm takes `g` (after batch folding): this CPU has AVX-512 (and SetSmallGemm(true)), and
// B is small (k * n at most 256K elements) and the product at most 16M multiply-adds.
bool SmallGemmApplies(const GemmArgs<float>& g);

// Runs g (which SmallGemmApplies to): C = alpha * op(A) * op(B) + beta * C, split over `threads` by rows of C when
// large enough. A transposed A is read in place; a transposed B is first copied into a per-thread scratch in plain
// layout.
void RunSmallGemm(const GemmArgs<float>& g, exec::ThreadPool& threads);

// op(B) of g, whose B is transposed ([n, k] stored, ldb), into dst as plain [k, n] (the first matrix of a batch):
// what RunSmallGemm does at each call, for a caller that keeps the result of a constant B.
void TransposeBToPlain(const GemmArgs<float>& g, float* dst);

// Whether GemmRunner takes its direct kernels for small float shapes: this small GEMM, and Gemv for matrix-vector
// shapes. Tests turn them off (false) to reach the blocked GEMM and oneDNN with the same shapes; true restores the
// default.
void SetSmallGemm(bool allowed);
bool SmallGemmAllowed();

}  // namespace onnxamp::ops
