// The float GEMM for CPUs with AVX2 and FMA but without AVX-512, where oneDNN 2.6 has no blocked-weights matmul
// and runs its generic sgemm (which packs both operands on every call).
//
// C = alpha * op(A) * op(B) + beta * C for any GemmArgs<float> layout. op(B) is packed into strips of 16 columns
// (zero-padded at the right edge), kGemmAvx2Kc rows at a time; each task packs blocks of A (either layout) into
// contiguous panels of 6 rows (zero rows past the edge) in a per-thread buffer. A register kernel of 6 rows x 16
// columns (12 accumulators) runs over every (panel of A, strip of B) pair, with the strip of B in L1 and the block
// of A in L2. A constant B (an initializer) can be packed once (GemmAvx2PackB) and passed to every call, as ONNX
// Runtime's MLAS prepacks its weights; otherwise each call packs the part of B it needs into a per-thread buffer.
// Results differ from GemmReference only in summation order.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/gemm.h"

namespace onnxamp::ops {

// Rows of op(B) per packed block (the k extent of one pass of the register kernel).
inline constexpr int64_t kGemmAvx2Kc = 256;
// Columns per packed strip.
inline constexpr int64_t kGemmAvx2Nr = 16;

// One matrix op(B) [k, n] in the packed layout: blocks of kGemmAvx2Kc rows (the last may be shorter), each made of
// the strips of 16 columns of that block, strip after strip, each strip row after row. The block starting at row
// k0 (with kc rows) holds strip s at data[k0 * padded_n + s * kc * 16].
struct GemmAvx2PackedB {
  int64_t k = 0, n = 0, padded_n = 0;
  std::vector<float> data;
};

// True when this CPU has AVX2 and FMA (GemmAvx2 may run).
bool GemmAvx2Supported();

// Whether GemmRunner runs float products on GemmAvx2 instead of oneDNN (LinalgImpl::kOneDnn only): kAuto (the
// default) where the CPU has AVX2 and FMA but no AVX-512F (AVX-512 CPUs keep oneDNN's blocked-weights kernels);
// tests force kAlways (on a CPU with AVX2 and FMA) or kNever.
enum class GemmAvx2Use { kAuto, kAlways, kNever };
void SetGemmAvx2Use(GemmAvx2Use use);
// True when GemmRunner (kOneDnn) takes GemmAvx2 for float products on this CPU under the current setting.
bool GemmRunnerUsesAvx2();

// Packs op(B) of `g` (b, ldb, trans_b, k, n; one matrix: the batch is ignored) into a new packed copy. Only on a
// CPU where GemmAvx2Supported().
GemmAvx2PackedB GemmAvx2PackB(const GemmArgs<float>& g);

// Runs g (k >= 1, every other extent >= 1) with the AVX2 kernels, split over `threads` by columns of C (and rows,
// when there are too few columns) when it is large enough. `packed`, when given, is op(B) packed from the B every
// matrix of the batch shares (g.batch == 1 or g.batch_stride_b == 0); g.b is then not read. Only on a CPU where
// GemmAvx2Supported().
void GemmAvx2(const GemmArgs<float>& g, const GemmAvx2PackedB* packed, exec::ThreadPool& threads);

}  // namespace onnxamp::ops
