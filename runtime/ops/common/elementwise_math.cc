// The float math over arrays, compiled for the baseline instruction set, AVX2 and AVX-512, chosen at run time.

// No contraction of a * b + c into an FMA (which AVX-512 has): every version must round exactly like the others.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "runtime/ops/common/elementwise_math.h"

#include <cmath>
#include <limits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 reports its own AVX-512 intrinsics (those built on _mm512_undefined_ps) as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define ONNXAMP_HAVE_X86_PATHS 1
#endif

namespace onnxamp::ops {
namespace {

// The bodies compiled once per instruction set must be inlined into each version (GCC would otherwise call one
// baseline copy from all of them).
#if defined(__GNUC__)
#define ONNXAMP_MATH_INLINE inline __attribute__((always_inline))
#else
#define ONNXAMP_MATH_INLINE inline
#endif

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

// Name##Dispatch(dy, x, dx, n): dx[i] = dy[i] * Fn(x[i]), the same way.
#define ONNXAMP_GRAD_ARRAY(Name, Fn)                                                                           \
  void Name##Baseline(const float* dy, const float* x, float* dx, int64_t n) {                                 \
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * Fn(x[i]);                                                  \
  }                                                                                                            \
  __attribute__((target("avx2"))) void Name##Avx2(const float* dy, const float* x, float* dx, int64_t n) {     \
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * Fn(x[i]);                                                  \
  }                                                                                                            \
  __attribute__((target(ONNXAMP_AVX512_TARGET))) void Name##Avx512(const float* dy, const float* x, float* dx, \
                                                                   int64_t n) {                                \
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * Fn(x[i]);                                                  \
  }                                                                                                            \
  void Name##Dispatch(const float* dy, const float* x, float* dx, int64_t n) {                                 \
    if (kIsa == Isa::kAvx512) return Name##Avx512(dy, x, dx, n);                                               \
    if (kIsa == Isa::kAvx2) return Name##Avx2(dy, x, dx, n);                                                   \
    Name##Baseline(dy, x, dx, n);                                                                              \
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
#define ONNXAMP_GRAD_ARRAY(Name, Fn)                                           \
  void Name##Dispatch(const float* dy, const float* x, float* dx, int64_t n) { \
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * Fn(x[i]);                  \
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
ONNXAMP_FLOAT_ARRAY(GeluErf, FastGeluErf)
ONNXAMP_FLOAT_ARRAY(GeluTanh, FastGeluTanh)
ONNXAMP_FLOAT_ARRAY(Relu, FastRelu)
ONNXAMP_GRAD_ARRAY(GeluGrad, FastGeluGrad)
ONNXAMP_GRAD_ARRAY(GeluTanhGrad, FastGeluTanhGrad)

// Softmax's exponentials and their sum; the sum in 16 lanes folded in a fixed tree, so every version adds in the
// same order.
ONNXAMP_MATH_INLINE float SoftmaxExpBody(const float* in, float max, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = SoftmaxExp(in[i] - max);
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) lanes[l] += out[i + l];
  for (int l = 0; i < n; ++i, ++l) lanes[l] += out[i];
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
  return lanes[0];
}

// NaN-propagating maximum, branch-free.
ONNXAMP_MATH_INLINE float MaxNan(float a, float b) { return Select((a >= b) | (a != a), a, b); }

ONNXAMP_MATH_INLINE float MaxBody(const float* in, int64_t n) {
  float lanes[16];
  for (float& l : lanes) l = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) lanes[l] = MaxNan(lanes[l], in[i + l]);
  for (int l = 0; i < n; ++i, ++l) lanes[l] = MaxNan(lanes[l], in[i]);
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) lanes[l] = MaxNan(lanes[l], lanes[l + w]);
  return lanes[0];
}

template <ArithOp kOp>
ONNXAMP_MATH_INLINE float Arith(float x, float y) {
  if constexpr (kOp == ArithOp::kAdd) return x + y;
  if constexpr (kOp == ArithOp::kSub) return x - y;
  if constexpr (kOp == ArithOp::kMul) return x * y;
  return x / y;
}

template <ArithOp kOp>
ONNXAMP_MATH_INLINE void ArithRowsOp(const float* a, int64_t a_row, int64_t a_step, const float* b, int64_t b_row,
                                     int64_t b_step, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* pa = a + r * a_row;
    const float* pb = b + r * b_row;
    float* po = out + r * cols;
    if (a_step && b_step) {
      for (int64_t j = 0; j < cols; ++j) po[j] = Arith<kOp>(pa[j], pb[j]);
    } else if (a_step) {
      const float y = pb[0];
      for (int64_t j = 0; j < cols; ++j) po[j] = Arith<kOp>(pa[j], y);
    } else if (b_step) {
      const float x = pa[0];
      for (int64_t j = 0; j < cols; ++j) po[j] = Arith<kOp>(x, pb[j]);
    } else {
      const float v = Arith<kOp>(pa[0], pb[0]);
      for (int64_t j = 0; j < cols; ++j) po[j] = v;
    }
  }
}

ONNXAMP_MATH_INLINE void ArithRowsBody(ArithOp op, const float* a, int64_t a_row, int64_t a_step, const float* b,
                                       int64_t b_row, int64_t b_step, float* out, int64_t rows, int64_t cols) {
  switch (op) {
    case ArithOp::kAdd:
      return ArithRowsOp<ArithOp::kAdd>(a, a_row, a_step, b, b_row, b_step, out, rows, cols);
    case ArithOp::kSub:
      return ArithRowsOp<ArithOp::kSub>(a, a_row, a_step, b, b_row, b_step, out, rows, cols);
    case ArithOp::kMul:
      return ArithRowsOp<ArithOp::kMul>(a, a_row, a_step, b, b_row, b_step, out, rows, cols);
    case ArithOp::kDiv:
      return ArithRowsOp<ArithOp::kDiv>(a, a_row, a_step, b, b_row, b_step, out, rows, cols);
  }
}

// Sum of v[0..n) in 16 lanes folded in a fixed tree.
ONNXAMP_MATH_INLINE float LaneSum(const float* v, int64_t n) {
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) lanes[l] += v[i + l];
  for (int l = 0; i < n; ++i, ++l) lanes[l] += v[i];
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
  return lanes[0];
}

ONNXAMP_MATH_INLINE void LayerNormRowBody(const float* x, int64_t n, const float* scale, const float* bias,
                                          float epsilon, float* y, float* mean_out, float* inv_out) {
  const float mean = LaneSum(x, n) / static_cast<float>(n);
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int l = 0; l < 16; ++l) {
      const float d = x[i + l] - mean;
      lanes[l] += d * d;
    }
  }
  for (int l = 0; i < n; ++i, ++l) {
    const float d = x[i] - mean;
    lanes[l] += d * d;
  }
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
  const float inv = 1.0f / std::sqrt(lanes[0] / static_cast<float>(n) + epsilon);
  if (bias) {
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * inv * scale[j] + bias[j];
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * inv * scale[j];
  }
  *mean_out = mean;
  *inv_out = inv;
}

#ifdef ONNXAMP_HAVE_X86_PATHS
// The last steps of the 16-lane sums (LaneSum, LayerNormRowBody, SoftmaxExpBody) with lanes 0-7 in `lo` and 8-15 in
// `hi`: the tail's terms (zero-padded: +0 leaves every lane as it is, since no lane of such a sum is -0) go into
// lanes 0.., then the tree 8, 4, 2, 1. GCC keeps those functions' lane arrays on the stack and folds them through
// memory (15 dependent store-forwarded adds), most of the time of a short row.
__attribute__((target("avx2"))) inline float FoldLanesAvx2(__m256 lo, __m256 hi, const float* tail_terms,
                                                           int64_t tail) {
  if (tail > 0) {
    alignas(32) float t[16] = {};
    for (int64_t l = 0; l < tail; ++l) t[l] = tail_terms[l];
    lo = _mm256_add_ps(lo, _mm256_load_ps(t));
    hi = _mm256_add_ps(hi, _mm256_load_ps(t + 8));
  }
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// LayerNormRowBody with its two sums in registers (the same operations in the same order: the same bits).
__attribute__((target("avx2"))) void LayerNormRowAvx2(const float* x, int64_t n, const float* scale, const float* bias,
                                                      float epsilon, float* y, float* mean_out, float* inv_out) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_add_ps(lo, _mm256_loadu_ps(x + i));
    hi = _mm256_add_ps(hi, _mm256_loadu_ps(x + i + 8));
  }
  const float mean = FoldLanesAvx2(lo, hi, x + i, n - i) / static_cast<float>(n);
  const __m256 vmean = _mm256_set1_ps(mean);
  lo = hi = _mm256_setzero_ps();
  for (i = 0; i + 16 <= n; i += 16) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmean);
    const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vmean);
    lo = _mm256_add_ps(lo, _mm256_mul_ps(d0, d0));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(d1, d1));
  }
  float squares[16];
  for (int64_t l = 0; i + l < n; ++l) {
    const float d = x[i + l] - mean;
    squares[l] = d * d;
  }
  const float inv = 1.0f / std::sqrt(FoldLanesAvx2(lo, hi, squares, n - i) / static_cast<float>(n) + epsilon);
  if (bias) {
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * inv * scale[j] + bias[j];
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * inv * scale[j];
  }
  *mean_out = mean;
  *inv_out = inv;
}
__attribute__((target(ONNXAMP_AVX512_TARGET))) void LayerNormRowAvx512(const float* x, int64_t n, const float* scale,
                                                                       const float* bias, float epsilon, float* y,
                                                                       float* mean, float* inv) {
  LayerNormRowBody(x, n, scale, bias, epsilon, y, mean, inv);
}
#endif

#ifdef ONNXAMP_HAVE_X86_PATHS
__attribute__((target("avx2"))) void ArithRowsAvx2(ArithOp op, const float* a, int64_t a_row, int64_t a_step,
                                                   const float* b, int64_t b_row, int64_t b_step, float* out,
                                                   int64_t rows, int64_t cols) {
  ArithRowsBody(op, a, a_row, a_step, b, b_row, b_step, out, rows, cols);
}
__attribute__((target(ONNXAMP_AVX512_TARGET))) void ArithRowsAvx512(ArithOp op, const float* a, int64_t a_row,
                                                                    int64_t a_step, const float* b, int64_t b_row,
                                                                    int64_t b_step, float* out, int64_t rows,
                                                                    int64_t cols) {
  ArithRowsBody(op, a, a_row, a_step, b, b_row, b_step, out, rows, cols);
}
#endif

#ifdef ONNXAMP_HAVE_X86_PATHS
// GCC does not vectorize MaxBody's NaN-propagating select; with intrinsics: max over lanes, NaN tracked apart.
__attribute__((target("avx2"))) float MaxAvx2(const float* in, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 m0 = neg_inf, m1 = neg_inf, nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 x0 = _mm256_loadu_ps(in + i), x1 = _mm256_loadu_ps(in + i + 8);
    nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(x0, x0, _CMP_UNORD_Q), _mm256_cmp_ps(x1, x1, _CMP_UNORD_Q)));
    m0 = _mm256_max_ps(m0, x0);
    m1 = _mm256_max_ps(m1, x1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(in + i);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    m0 = _mm256_max_ps(m0, x);
  }
  if (_mm256_movemask_ps(nan) != 0) return std::numeric_limits<float>::quiet_NaN();
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(m0, m1));
  float r = lanes[0];
  for (int l = 1; l < 8; ++l) r = lanes[l] > r ? lanes[l] : r;
  for (; i < n; ++i) {
    if (in[i] != in[i]) return std::numeric_limits<float>::quiet_NaN();
    r = in[i] > r ? in[i] : r;
  }
  return r;
}
__attribute__((target(ONNXAMP_AVX512_TARGET))) float MaxAvx512(const float* in, int64_t n) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  __m512 m = _mm512_set1_ps(neg_inf);
  __mmask16 nan = 0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(in + i);
    nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    m = _mm512_max_ps(m, x);
  }
  if (i < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 x = _mm512_mask_loadu_ps(_mm512_set1_ps(neg_inf), tail, in + i);
    nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    m = _mm512_max_ps(m, x);
  }
  if (nan) return std::numeric_limits<float>::quiet_NaN();
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  float r = lanes[0];
  for (int l = 1; l < 16; ++l) r = lanes[l] > r ? lanes[l] : r;
  return r;
}
// SoftmaxExpBody with the sum in registers (FoldLanesAvx2): the same bits.
__attribute__((target("avx2"))) float SoftmaxExpAvx2(const float* in, float max, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = SoftmaxExp(in[i] - max);
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_add_ps(lo, _mm256_loadu_ps(out + i));
    hi = _mm256_add_ps(hi, _mm256_loadu_ps(out + i + 8));
  }
  return FoldLanesAvx2(lo, hi, out + i, n - i);
}
__attribute__((target(ONNXAMP_AVX512_TARGET))) float SoftmaxExpAvx512(const float* in, float max, float* out,
                                                                      int64_t n) {
  return SoftmaxExpBody(in, max, out, n);
}
#endif

}  // namespace

void ArithRows(ArithOp op, const float* a, int64_t a_row, int64_t a_step, const float* b, int64_t b_row, int64_t b_step,
               float* out, int64_t rows, int64_t cols) {
#ifdef ONNXAMP_HAVE_X86_PATHS
  if (kIsa == Isa::kAvx512) return ArithRowsAvx512(op, a, a_row, a_step, b, b_row, b_step, out, rows, cols);
  if (kIsa == Isa::kAvx2) return ArithRowsAvx2(op, a, a_row, a_step, b, b_row, b_step, out, rows, cols);
#endif
  ArithRowsBody(op, a, a_row, a_step, b, b_row, b_step, out, rows, cols);
}

void LayerNormRow(const float* x, int64_t n, const float* scale, const float* bias, float epsilon, float* y,
                  float* mean, float* inv) {
#ifdef ONNXAMP_HAVE_X86_PATHS
  if (kIsa == Isa::kAvx512) return LayerNormRowAvx512(x, n, scale, bias, epsilon, y, mean, inv);
  if (kIsa == Isa::kAvx2) return LayerNormRowAvx2(x, n, scale, bias, epsilon, y, mean, inv);
#endif
  LayerNormRowBody(x, n, scale, bias, epsilon, y, mean, inv);
}

float MaxArray(const float* in, int64_t n) {
#ifdef ONNXAMP_HAVE_X86_PATHS
  if (kIsa == Isa::kAvx512) return MaxAvx512(in, n);
  if (kIsa == Isa::kAvx2) return MaxAvx2(in, n);
#endif
  return MaxBody(in, n);
}

float SoftmaxExpArray(const float* in, float max, float* out, int64_t n) {
#ifdef ONNXAMP_HAVE_X86_PATHS
  if (kIsa == Isa::kAvx512) return SoftmaxExpAvx512(in, max, out, n);
  if (kIsa == Isa::kAvx2) return SoftmaxExpAvx2(in, max, out, n);
#endif
  return SoftmaxExpBody(in, max, out, n);
}

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
void GeluErfArray(const float* in, float* out, int64_t n) { GeluErfDispatch(in, out, n); }
void GeluTanhArray(const float* in, float* out, int64_t n) { GeluTanhDispatch(in, out, n); }
void ReluArray(const float* in, float* out, int64_t n) { ReluDispatch(in, out, n); }
void SqrtArray(const float* in, float* out, int64_t n) { SqrtDispatch(in, out, n); }
void GeluGradArray(const float* dy, const float* x, float* dx, int64_t n) { GeluGradDispatch(dy, x, dx, n); }
void GeluTanhGradArray(const float* dy, const float* x, float* dx, int64_t n) { GeluTanhGradDispatch(dy, x, dx, n); }

}  // namespace onnxamp::ops
