// Bulk fp16/bf16 <-> float conversions: F16C where the CPU has it, branch-free vectorizable loops otherwise.
#include "runtime/ops/common/elementwise_half.h"

#include <cstring>
#include <string_view>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 reports its own AVX-512 intrinsics (those built on _mm512_undefined_ps) as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <cpuid.h>
#include <immintrin.h>
#define ONNXAMP_HAVE_F16C_PATH 1
#endif

namespace onnxamp::ops {
namespace {

inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// fp16 bits -> float, exact: the exponent and mantissa moved into place and rebiased by a multiply with 2^112
// (which also normalises subnormals); inf and NaN get the float's all-ones exponent back.
inline float HalfBitsToFloatFast(uint16_t h) {
  const float magic = FromBits((254u - 15u) << 23);       // 2^112
  const float was_infnan = FromBits((127u + 16u) << 23);  // 2^16: the image of the fp16 inf exponent
  float o = FromBits(static_cast<uint32_t>(h & 0x7fffu) << 13) * magic;
  uint32_t u = Bits(o);
  u |= (o >= was_infnan) ? (255u << 23) : 0u;
  u |= static_cast<uint32_t>(h & 0x8000u) << 16;
  return FromBits(u);
}

// float -> fp16 bits, round to nearest even, the same results as FloatToHalfBits (half.h) without branches.
inline uint16_t FloatToHalfBitsFast(float f) {
  const uint32_t x = Bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  // Inf or NaN (NaN keeps its top payload bits and becomes quiet), or a finite value >= 65520 -> inf.
  const uint32_t infnan = abs > 0x7f800000u ? (0x7c00u | 0x200u | ((abs >> 13) & 0x3ffu)) : 0x7c00u;
  // Subnormal or zero: adding 0.5 aligns the 10 result bits at the bottom of the float's mantissa; the FPU's
  // round-to-nearest-even does the rounding.
  const float denorm_magic = FromBits(((127u - 15u) + (23u - 10u) + 1u) << 23);  // 0.5
  const uint32_t sub = Bits(FromBits(abs) + denorm_magic) - Bits(denorm_magic);
  // Normal: rebias the exponent and round the mantissa (bias 0xfff plus the result's lowest bit = RNE).
  const uint32_t mant_odd = (abs >> 13) & 1u;
  const uint32_t normal = (abs + (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + mant_odd) >> 13;
  uint32_t r = abs < 0x38800000u ? sub : normal;
  r = abs >= 0x477ff000u ? infnan : r;
  return static_cast<uint16_t>(r | sign);
}

#ifdef ONNXAMP_HAVE_F16C_PATH
__attribute__((target("avx,f16c"))) void HalfToFloatF16c(const Float16* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = HalfBitsToFloatFast(in[i].bits);
}

__attribute__((target("avx,f16c"))) void FloatToHalfF16c(const float* in, Float16* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i].bits = FloatToHalfBitsFast(in[i]);
}

// AVX-512 widths (16 values per instruction), the F16C loops for the rest.
__attribute__((target("avx512f,avx,f16c"))) void HalfToFloatAvx512(const Float16* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(h));
  }
  HalfToFloatF16c(in + i, out + i, n - i);
}

__attribute__((target("avx512f,avx,f16c"))) void FloatToHalfAvx512(const float* in, Float16* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), h);
  }
  FloatToHalfF16c(in + i, out + i, n - i);
}

// bf16: integer arithmetic on the float's bits (the portable loop's, lane by lane), so the results are its results
// bit for bit. Not VCVTNEPS2BF16 (AVX512_BF16): it flushes subnormal inputs to zero.
__attribute__((target("avx2"))) void BFloat16ToFloatAvx2(const BFloat16* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16));
  }
  BFloat16ToFloatPortable(in + i, out + i, n - i);
}

__attribute__((target("avx2"))) void FloatToBFloat16Avx2(const float* in, BFloat16* out, int64_t n) {
  const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    const __m256i high = _mm256_srli_epi32(x, 16);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, bias), _mm256_and_si256(high, one)), 16);
    // |x| and the inf pattern are below 2^31: the signed compare is the unsigned one.
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(high, quiet), nan);
    // Every lane is below 2^16, so the saturating pack is exact; it packs within 128-bit halves.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(packed));
  }
  FloatToBFloat16Portable(in + i, out + i, n - i);
}

__attribute__((target("avx512f"))) void BFloat16ToFloatAvx512(const BFloat16* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    _mm512_storeu_si512(out + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  }
  BFloat16ToFloatPortable(in + i, out + i, n - i);
}

__attribute__((target("avx512f"))) void FloatToBFloat16Avx512(const float* in, BFloat16* out, int64_t n) {
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i x = _mm512_loadu_si512(in + i);
    const __m512i high = _mm512_srli_epi32(x, 16);
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, bias), _mm512_and_si512(high, one)), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, abs_mask), inf);
    const __m512i r = _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(high, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(r));
  }
  FloatToBFloat16Portable(in + i, out + i, n - i);
}

bool DetectAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}

bool DetectAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

bool DetectF16c() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx")) return false;
  // clang 14's __builtin_cpu_supports does not know "f16c": read the CPUID bit instead.
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  return (ecx & bit_F16C) != 0;
}
#endif

const bool kUseF16c =
#ifdef ONNXAMP_HAVE_F16C_PATH
    DetectF16c();
#else
    false;
#endif
const bool kUseAvx512 =
#ifdef ONNXAMP_HAVE_F16C_PATH
    kUseF16c && DetectAvx512();
#else
    false;
#endif

const bool kBf16Avx2 =
#ifdef ONNXAMP_HAVE_F16C_PATH
    DetectAvx2();
#else
    false;
#endif
const bool kBf16Avx512 =
#ifdef ONNXAMP_HAVE_F16C_PATH
    DetectAvx512();
#else
    false;
#endif

}  // namespace

bool HalfConversionUsesF16c() { return kUseF16c; }

void HalfToFloatPortable(const Float16* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = HalfBitsToFloatFast(in[i].bits);
}

void FloatToHalfPortable(const float* in, Float16* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i].bits = FloatToHalfBitsFast(in[i]);
}

void HalfToFloat(const Float16* in, float* out, int64_t n) {
#ifdef ONNXAMP_HAVE_F16C_PATH
  if (kUseAvx512) return HalfToFloatAvx512(in, out, n);
  if (kUseF16c) return HalfToFloatF16c(in, out, n);
#endif
  HalfToFloatPortable(in, out, n);
}

void FloatToHalf(const float* in, Float16* out, int64_t n) {
#ifdef ONNXAMP_HAVE_F16C_PATH
  if (kUseAvx512) return FloatToHalfAvx512(in, out, n);
  if (kUseF16c) return FloatToHalfF16c(in, out, n);
#endif
  FloatToHalfPortable(in, out, n);
}

void RoundToHalfInPlace(float* values, int64_t n) {
  constexpr int64_t kBlock = 1024;
  Float16 half[kBlock];
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t m = std::min(kBlock, n - i);
    FloatToHalf(values + i, half, m);
    HalfToFloat(half, values + i, m);
  }
}

void RoundToHalfInPlace(float* values, int64_t n, exec::ThreadPool& threads) {
  threads.ParallelFor(n, int64_t{1} << 14, [&](int64_t b, int64_t e) { RoundToHalfInPlace(values + b, e - b); });
}

void BFloat16ToFloatPortable(const BFloat16* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = FromBits(static_cast<uint32_t>(in[i].bits) << 16);
}

void FloatToBFloat16Portable(const float* in, BFloat16* out, int64_t n) {
  // Round to nearest even by adding 0x7fff plus the lowest kept bit; NaN is made quiet instead (half.h's rule).
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t x = Bits(in[i]);
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const uint32_t nan = (x >> 16) | 0x40u;
    out[i].bits = static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}

void BFloat16ToFloat(const BFloat16* in, float* out, int64_t n) {
#ifdef ONNXAMP_HAVE_F16C_PATH
  if (kBf16Avx512) return BFloat16ToFloatAvx512(in, out, n);
  if (kBf16Avx2) return BFloat16ToFloatAvx2(in, out, n);
#endif
  BFloat16ToFloatPortable(in, out, n);
}

void FloatToBFloat16(const float* in, BFloat16* out, int64_t n) {
#ifdef ONNXAMP_HAVE_F16C_PATH
  if (kBf16Avx512) return FloatToBFloat16Avx512(in, out, n);
  if (kBf16Avx2) return FloatToBFloat16Avx2(in, out, n);
#endif
  FloatToBFloat16Portable(in, out, n);
}

const char* BFloat16ConversionIsa() { return kBf16Avx512 ? "avx512" : kBf16Avx2 ? "avx2" : "portable"; }

bool BFloat16ConversionsUsing(const char* isa, const float* in, BFloat16* out, float* back, int64_t n) {
  const std::string_view want(isa);
  if (want == "portable") {
    FloatToBFloat16Portable(in, out, n);
    BFloat16ToFloatPortable(out, back, n);
    return true;
  }
#ifdef ONNXAMP_HAVE_F16C_PATH
  if (want == "avx2" && kBf16Avx2) {
    FloatToBFloat16Avx2(in, out, n);
    BFloat16ToFloatAvx2(out, back, n);
    return true;
  }
  if (want == "avx512" && kBf16Avx512) {
    FloatToBFloat16Avx512(in, out, n);
    BFloat16ToFloatAvx512(out, back, n);
    return true;
  }
#endif
  return false;
}

}  // namespace onnxamp::ops
