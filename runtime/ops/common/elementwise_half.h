// Bulk conversions between fp16/bf16 storage and float, for kernels that compute 16-bit tensors in float blocks.
//
// Results are those of runtime/common/half.h's Float16/BFloat16 conversions (round to nearest even, overflow to
// inf, subnormals kept), computed faster: with the F16C instructions where the CPU has them (chosen at run time),
// with branch-free loops the compiler vectorizes otherwise. One difference is allowed: a signalling-NaN fp16 may
// come back as a quiet NaN (F16C quiets it); it is still a NaN with the same sign.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "runtime/common/half.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/dtype_dispatch.h"

namespace onnxamp::ops {

void HalfToFloat(const Float16* in, float* out, int64_t n);
void FloatToHalf(const float* in, Float16* out, int64_t n);
void BFloat16ToFloat(const BFloat16* in, float* out, int64_t n);
void FloatToBFloat16(const float* in, BFloat16* out, int64_t n);

// Rounds every value to the nearest float16 and back (float16's overflow to inf and subnormals included): what a
// float16 tensor would hold. For float kernels that stand in for float16 ones (the `round_to` attribute of FusedConv
// and BlockedConv).
void RoundToHalfInPlace(float* values, int64_t n);
// The same in ranges of 16K values on `threads` (a convolution's output of a few MiB took as long as a sixth of the
// convolution on one thread).
void RoundToHalfInPlace(float* values, int64_t n, exec::ThreadPool& threads);

// The portable bf16 loops, and which loops BFloat16ToFloat/FloatToBFloat16 take here: "avx512", "avx2" or "portable"
// (all give the same bits). BFloat16ConversionsUsing converts `in` to `out` and back to `back` with the loops of
// `isa`; false (nothing written) when this CPU cannot run them. For tests.
void BFloat16ToFloatPortable(const BFloat16* in, float* out, int64_t n);
void FloatToBFloat16Portable(const float* in, BFloat16* out, int64_t n);
const char* BFloat16ConversionIsa();
bool BFloat16ConversionsUsing(const char* isa, const float* in, BFloat16* out, float* back, int64_t n);

// True when HalfToFloat/FloatToHalf use the F16C instructions on this machine.
bool HalfConversionUsesF16c();

// The portable fp16 loops, whatever the CPU (tests compare them with the F16C path and with half.h).
void HalfToFloatPortable(const Float16* in, float* out, int64_t n);
void FloatToHalfPortable(const float* in, Float16* out, int64_t n);

// Loads n storage values of T into their compute type (a copy for float, a conversion for fp16/bf16), and back.
template <typename T>
inline void LoadBlock(const T* in, ComputeType<T>* out, int64_t n) {
  if constexpr (std::is_same_v<T, Float16>) {
    HalfToFloat(in, out, n);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    BFloat16ToFloat(in, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = in[i];
  }
}

template <typename T>
inline void StoreBlock(const ComputeType<T>* in, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, Float16>) {
    FloatToHalf(in, out, n);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    FloatToBFloat16(in, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = in[i];
  }
}

// Calls f(values, offset, n) for consecutive runs of `in[0, count)` in T's compute type until f returns false: fp16 and
// bf16 converted with LoadBlock into a buffer on the stack, kComputeBlock values at a time (a multiple of 8, so that
// loops keeping 8 partial sums see every element in the lane the whole run would give it); other types in place, as
// one run.
inline constexpr int64_t kComputeBlock = 256;

template <typename T, typename F>
void ForEachComputeBlock(const T* in, int64_t count, F&& f) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    float block[kComputeBlock];
    for (int64_t i = 0; i < count; i += kComputeBlock) {
      const int64_t n = std::min(kComputeBlock, count - i);
      LoadBlock(in + i, block, n);
      if (!f(static_cast<const float*>(block), i, n)) return;
    }
  } else {
    static_assert(std::is_same_v<ComputeType<T>, T>);
    f(in, int64_t{0}, count);
  }
}

}  // namespace onnxamp::ops
