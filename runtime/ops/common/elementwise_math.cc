// The float math over arrays, compiled for the baseline instruction set, AVX2 and AVX-512, chosen at run time.

// No contraction of a * b + c into an FMA (which AVX-512 has): every version must round exactly like the others.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "runtime/ops/common/elementwise_math.h"

#include <cmath>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ONNXAMP_HAVE_X86_PATHS 1
#endif

namespace onnxamp::ops {
namespace {

enum class Isa { kBaseline, kAvx2, kAvx512 };

#ifdef ONNXAMP_HAVE_X86_PATHS
Isa DetectIsa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return Isa::kAvx512;
  if (__builtin_cpu_supports("avx2")) return Isa::kAvx2;
  return Isa::kBaseline;
}
const Isa kIsa = DetectIsa();

#if defined(__clang__)
#define ONNXAMP_AVX512_TARGET "avx512f"
#else
#define ONNXAMP_AVX512_TARGET "avx512f,prefer-vector-width=512"
#endif

// Name##Dispatch(in, out, n): out[i] = Fn(in[i]) with the loop compiled once per instruction set (Fn is inlined
// into each, so that each is vectorized for its target).
#define ONNXAMP_FLOAT_ARRAY(Name, Fn)                                                                        \
  void Name##Baseline(const float* in, float* out, int64_t n) {                                              \
    for (int64_t i = 0; i < n; ++i) out[i] = Fn(in[i]);                                                      \
  }                                                                                                          \
  __attribute__((target("avx2"))) void Name##Avx2(const float* in, float* out, int64_t n) {                  \
    for (int64_t i = 0; i < n; ++i) out[i] = Fn(in[i]);                                                      \
  }                                                                                                          \
  __attribute__((target(ONNXAMP_AVX512_TARGET))) void Name##Avx512(const float* in, float* out, int64_t n) { \
    for (int64_t i = 0; i < n; ++i) out[i] = Fn(in[i]);                                                      \
  }                                                                                                          \
  void Name##Dispatch(const float* in, float* out, int64_t n) {                                              \
    if (kIsa == Isa::kAvx512) return Name##Avx512(in, out, n);                                               \
    if (kIsa == Isa::kAvx2) return Name##Avx2(in, out, n);                                                   \
    Name##Baseline(in, out, n);                                                                              \
  }

// sqrt with the SSE/AVX instructions (std::sqrt in a loop does not vectorize: it may have to set errno).
void SqrtBaseline(const float* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(out + i, _mm_sqrt_ps(_mm_loadu_ps(in + i)));
  for (; i < n; ++i) out[i] = _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(in[i])));
}
__attribute__((target("avx"))) void SqrtAvx(const float* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_sqrt_ps(_mm256_loadu_ps(in + i)));
  SqrtBaseline(in + i, out + i, n - i);
}
void SqrtDispatch(const float* in, float* out, int64_t n) {
  if (kIsa != Isa::kBaseline) return SqrtAvx(in, out, n);
  SqrtBaseline(in, out, n);
}
#else
const Isa kIsa = Isa::kBaseline;
#define ONNXAMP_FLOAT_ARRAY(Name, Fn)                           \
  void Name##Dispatch(const float* in, float* out, int64_t n) { \
    for (int64_t i = 0; i < n; ++i) out[i] = Fn(in[i]);         \
  }
void SqrtDispatch(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::sqrt(in[i]);
}
#endif

ONNXAMP_FLOAT_ARRAY(Exp, FastExp)
ONNXAMP_FLOAT_ARRAY(Tanh, FastTanh)
ONNXAMP_FLOAT_ARRAY(Erf, FastErf)
ONNXAMP_FLOAT_ARRAY(Sigmoid, FastSigmoid)
ONNXAMP_FLOAT_ARRAY(Gelu, FastGelu)
ONNXAMP_FLOAT_ARRAY(GeluTanh, FastGeluTanh)

}  // namespace

const char* MathArraysIsa() {
  switch (kIsa) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    default:
      return "baseline";
  }
}

void ExpArray(const float* in, float* out, int64_t n) { ExpDispatch(in, out, n); }
void TanhArray(const float* in, float* out, int64_t n) { TanhDispatch(in, out, n); }
void ErfArray(const float* in, float* out, int64_t n) { ErfDispatch(in, out, n); }
void SigmoidArray(const float* in, float* out, int64_t n) { SigmoidDispatch(in, out, n); }
void GeluArray(const float* in, float* out, int64_t n) { GeluDispatch(in, out, n); }
void GeluTanhArray(const float* in, float* out, int64_t n) { GeluTanhDispatch(in, out, n); }
void SqrtArray(const float* in, float* out, int64_t n) { SqrtDispatch(in, out, n); }

}  // namespace onnxamp::ops
