// GEMM cores shared by the linalg kernels (MatMul, Gemm, Conv, ConvTranspose, Einsum), and the switch that picks
// which implementation those kernels use.
//
// Three implementations of the same contract:
//   - GemmReference: the plain triple loop, accumulating in T in order k = 0..K-1. The ground truth.
//   - GemmPortable: a cache-blocked GEMM in plain C++ (packed panels, a register-tiled inner kernel, the
//     session's thread pool). Used when onnxamp is built without oneDNN, and for double.
//   - oneDNN's matmul primitive (float only), through GemmRunner, when built with oneDNN; on CPUs with AVX2 but
//     without AVX-512, GemmRunner runs float products on its own AVX2 GEMM instead (gemm_avx2.h).
// All of them compute C = alpha * op(A) * op(B) + beta * C with FP32 (or FP64) accumulation; they differ only in
// summation order.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/common/half.h"
#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/executor/thread_pool.h"

namespace onnxamp::ops {

struct GemmAvx2PackedB;

// Which implementation the linalg kernels use: the session's choice (exec::KernelOptions::linalg, from
// SessionOptions), read once by each kernel when it is created.
using LinalgImpl = exec::LinalgImpl;

const char* LinalgImplName(LinalgImpl impl);
// True when onnxamp was built with oneDNN.
bool OneDnnAvailable();
// The implementation a kernel created with `info` uses: its session's choice, kPortable for kOneDnn without oneDNN.
LinalgImpl LinalgImplFor(const exec::KernelInfo& info);
// `impl`, or kPortable for kOneDnn in a build without oneDNN.
LinalgImpl AvailableLinalgImpl(LinalgImpl impl);

// One (possibly batched) GEMM over row-major matrices: for b in [0, batch),
//   C_b[m, n] = alpha * sum_k op(A_b)[m, k] * op(B_b)[k, n] + beta * C_b[m, n]
// where A_b = a + b * batch_stride_a (op(A) is A^T, stored [k, m], when trans_a) and likewise for B and C.
// A batch stride of 0 broadcasts that operand over the batch. beta == 0 makes C write-only: its old contents
// (NaN included) are ignored. A and B are of type T, C of type TC (bfloat16 inputs accumulate into float).
template <typename T, typename TC = T>
struct GemmArgs {
  int64_t batch = 1;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  const T* a = nullptr;
  int64_t lda = 0, batch_stride_a = 0;
  const T* b = nullptr;
  int64_t ldb = 0, batch_stride_b = 0;
  TC* c = nullptr;
  int64_t ldc = 0, batch_stride_c = 0;
  TC alpha = 1;
  TC beta = 0;
};

// Fills the leading dimensions of a packed (dense) problem: lda = trans_a ? m : k, ldb = trans_b ? k : n,
// ldc = n, and batch strides m*k, k*n, m*n (0 for an operand marked broadcast).
template <typename T, typename TC>
void SetDenseLayout(GemmArgs<T, TC>& g, bool broadcast_a = false, bool broadcast_b = false) {
  g.lda = g.trans_a ? g.m : g.k;
  g.ldb = g.trans_b ? g.k : g.n;
  g.ldc = g.n;
  g.batch_stride_a = broadcast_a ? 0 : g.m * g.k;
  g.batch_stride_b = broadcast_b ? 0 : g.k * g.n;
  g.batch_stride_c = g.m * g.n;
}

// How oneDNN calls use the session's threads. kShared: one call runs on all of them (oneDNN's own OpenMP
// parallelism, a team of num_threads beside the pool's threads). kSplit (the default): the kernels cut a problem
// into parts (images, rows, columns, channel or group blocks) that run single-threaded on the pool's threads, so
// that oneDNN starts no threads of its own to compete with the pool's for the cores. Tests set both.
enum class OneDnnThreading { kShared, kSplit };
OneDnnThreading GetOneDnnThreading();
void SetOneDnnThreading(OneDnnThreading mode);

// The plain triple loop (float or double).
template <typename T>
void GemmReference(const GemmArgs<T>& g);

// The blocked GEMM (float or double), parallel over output tiles on `threads`. Its register kernel is plain C++
// (vectorized for the baseline ISA), or AVX2+FMA intrinsics where the CPU has them.
template <typename T>
void GemmPortable(const GemmArgs<T>& g, exec::ThreadPool& threads);

// True when GemmPortable runs its AVX2 kernel. SetPortableGemmAvx2(false) makes it use the baseline kernel
// (tests check both); true restores the default (AVX2 where the CPU has it).
bool PortableGemmUsesAvx2();
void SetPortableGemmAvx2(bool allowed);

// Runs GEMMs for one kernel with the implementation chosen when it was made. For kOneDnn it keeps oneDNN
// matmul primitives per problem shape (created on first use, reused after; thread-safe). Double always runs on
// GemmPortable (kReference: GemmReference).
class GemmRunner {
 public:
  explicit GemmRunner(LinalgImpl impl);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  LinalgImpl impl() const { return impl_; }

  // Runs `g`. Fails (Internal) only when oneDNN refuses a problem it should accept.
  Status Run(const GemmArgs<float>& g, exec::ThreadPool& threads) const;
  Status Run(const GemmArgs<double>& g, exec::ThreadPool& threads) const;

  // True when bfloat16 products run on oneDNN's bfloat16 matmul as they are (oneDNN on a CPU with bfloat16
  // support).
  bool RunsBf16() const;
  // fp16 or bfloat16 A and B, float C: the products are exact in float and accumulate in FP32; the caller rounds C
  // once on store. Any implementation but kReference (which the kernels run as their own plain loop). Matrix-vector
  // shapes (at most kGemvMaxM rows after folding the batch) stream B as it is stored (gemv.h); bfloat16 goes to
  // oneDNN as it is where RunsBf16(); otherwise A and B are converted to float with vector conversions and run on
  // the float path, B only once when SetConstantB(true) was called (the float copy is kept; where float products run
  // on the AVX2 GEMM, only op(B) packed for it is kept).
  Status Run(const GemmArgs<Float16, float>& g, exec::ThreadPool& threads) const;
  Status Run(const GemmArgs<BFloat16, float>& g, exec::ThreadPool& threads) const;

  // Declares that every call of this runner passes the same B data (an initializer of the model): the float copy of
  // a 16-bit B is then made once and reused while B's address and layout stay the same, and where float products
  // run on the AVX2 GEMM (gemm_avx2.h) op(B) is packed once, at the first product that needs it, and reused likewise;
  // where they run on the small GEMM (gemm_small.h), a transposed B is put in plain layout once.
  // Never for a B that changes between runs (a training session's weights are graph inputs, not initializers).
  void SetConstantB(bool constant) { constant_b_ = constant; }

 private:
  struct OneDnnCache;
  struct FloatB;
  template <typename V>
  struct ConstantBCache;
  // op(B) of g packed for GemmAvx2 when B is constant and shared by the batch (made at the first call), else null.
  std::shared_ptr<const GemmAvx2PackedB> PackedB(const GemmArgs<float>& g) const;
  template <typename T>
  Status RunHalf(const GemmArgs<T, float>& g, exec::ThreadPool& threads) const;

  LinalgImpl impl_;
  std::unique_ptr<OneDnnCache> cache_;
  bool constant_b_ = false;
  std::unique_ptr<FloatB> float_b_;                            // the float copy of a constant 16-bit B
  std::unique_ptr<ConstantBCache<GemmAvx2PackedB>> packed_b_;  // op(B) of a constant float B packed for GemmAvx2
  // op(B) of a constant transposed float B in plain layout, for the small GEMM (gemm_small.h)
  std::unique_ptr<ConstantBCache<std::vector<float>>> plain_b_;
};

}  // namespace onnxamp::ops
