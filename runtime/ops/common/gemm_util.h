// Helpers around the GEMM cores for the linalg kernels: fp16/bf16 <-> float block conversion, the accumulator
// type of the reference loops, the float-type dispatch of MatMul and Gemm, and numpy-style batch broadcasting
// (MatMul, Einsum).
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/elementwise_half.h"
#include "runtime/ops/common/gemm.h"

namespace onnxamp::ops {

// What the reference loops accumulate in: float for float/fp16/bf16 (FP32 accumulation), double for double, and
// a 64-bit unsigned integer for integer types, so that integer products wrap like two's-complement hardware
// (C++ signed overflow would be undefined) and the final cast back keeps the low bits.
template <typename T>
using AccumType = std::conditional_t<kIsFloatLike<T>, ComputeType<T>, uint64_t>;

template <typename T>
inline AccumType<T> LoadAccum(T v) {
  if constexpr (kIsFloatLike<T>) {
    return Load<T>(v);
  } else {
    return static_cast<uint64_t>(v);
  }
}

template <typename T>
inline T StoreAccum(AccumType<T> v) {
  if constexpr (kIsFloatLike<T>) {
    return Store<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

// Converts n fp16/bf16 (or float) values to float, split over `threads` when large (the bulk conversions of
// elementwise_half.h: F16C where the CPU has it).
template <typename T>
void ConvertToFloat(const T* src, float* dst, int64_t n, exec::ThreadPool& threads) {
  static_assert(std::is_same_v<ComputeType<T>, float>);
  threads.ParallelFor(n, 1 << 16,
                      [&](int64_t begin, int64_t end) { LoadBlock(src + begin, dst + begin, end - begin); });
}

// Stores n floats into fp16/bf16 (or float), rounding to nearest even once.
template <typename T>
void ConvertFromFloat(const float* src, T* dst, int64_t n, exec::ThreadPool& threads) {
  static_assert(std::is_same_v<ComputeType<T>, float>);
  threads.ParallelFor(n, 1 << 16,
                      [&](int64_t begin, int64_t end) { StoreBlock(src + begin, dst + begin, end - begin); });
}

// A float buffer owned by the calling thread (declare it thread_local) that grows without initialising its contents:
// every user writes what it then reads. A std::vector per run would clear its elements, and glibc hands large blocks
// back to the kernel when they are freed, so every run would fault the pages in again. A buffer of more than
// kKeptFloats is given back by Trim: what a larger tensor's faults cost is small beside the work on it, and a kept
// buffer of that size would hold memory for the rest of the process.
class FloatScratch {
 public:
  static constexpr size_t kKeptFloats = size_t{1} << 24;  // 64 MiB

  float* Get(int64_t n) {
    if (static_cast<size_t>(n) > size_) {
      data_.reset(new float[static_cast<size_t>(n)]);
      size_ = static_cast<size_t>(n);
    }
    return data_.get();
  }

  void Trim() {
    if (size_ > kKeptFloats) {
      data_.reset();
      size_ = 0;
    }
  }

 private:
  std::unique_ptr<float[]> data_;
  size_t size_ = 0;
};

// The float-type dispatch MatMul and Gemm share. `run(c)` computes the product through the GEMM core into c: y itself
// for float and double; for fp16 and bf16 a float buffer (the operands stay 16-bit: GemmRunner takes them as they
// are, with FP32 accumulation), rounded once to nearest even into y. The buffer belongs to the calling thread and is
// reused, so a steady-state run allocates nothing.
template <typename T, typename Run>
Status RunFloatLinalg(exec::ThreadPool& threads, T* y, int64_t count, Run&& run) {
  static_assert(kIsFloatLike<T>);
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return run(y);
  } else {
    thread_local std::vector<float> buffer;
    if (buffer.size() < static_cast<size_t>(count)) buffer.resize(static_cast<size_t>(count));
    ONNXAMP_RETURN_IF_ERROR(run(buffer.data()));
    ConvertFromFloat(buffer.data(), y, count, threads);
    return Status::Ok();
  }
}

// Two operands' batch dims broadcast numpy-style (right-aligned, 1 stretches).
struct BatchBroadcast {
  std::vector<int64_t> dims;       // the broadcast batch shape
  std::vector<int64_t> offsets_a;  // per batch index (row-major over dims): the matrix index into A's batch
  std::vector<int64_t> offsets_b;
  int64_t count = 1;   // product of dims
  bool a_full = true;  // A's batch is exactly `dims` (offsets_a[i] == i)
  bool b_full = true;
  bool a_single = true;  // A has one matrix (every offset 0)
  bool b_single = true;
};

// Broadcasts batch dims `a` and `b`; InvalidArgument naming both when they are incompatible.
StatusOr<BatchBroadcast> BroadcastBatch(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// Runs `g` (m, n, k, transposes, alpha and beta set; a, b, c the operands' first matrices, dense) over the batch `bc`
// of a numpy matmul: one strided batched call when each operand has every matrix or a single one, else one call per
// output matrix.
template <typename F, typename FC>
Status RunBroadcastBatch(const GemmRunner& gemm, exec::ThreadPool& threads, GemmArgs<F, FC> g,
                         const BatchBroadcast& bc) {
  if ((bc.a_full || bc.a_single) && (bc.b_full || bc.b_single)) {
    g.batch = bc.count;
    SetDenseLayout(g, bc.a_single && bc.count > 1, bc.b_single && bc.count > 1);
    return gemm.Run(g, threads);
  }
  g.batch = 1;
  SetDenseLayout(g);
  const F* a = g.a;
  const F* b = g.b;
  FC* c = g.c;
  for (int64_t bt = 0; bt < bc.count; ++bt) {
    g.a = a + bc.offsets_a[static_cast<size_t>(bt)] * g.m * g.k;
    g.b = b + bc.offsets_b[static_cast<size_t>(bt)] * g.k * g.n;
    g.c = c + bt * g.m * g.n;
    ONNXAMP_RETURN_IF_ERROR(gemm.Run(g, threads));
  }
  return Status::Ok();
}

}  // namespace onnxamp::ops
