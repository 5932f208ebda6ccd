// Branch-free float versions of exp, tanh, erf and the functions built on them, written so that a loop over an
// array vectorizes (no calls, no branches: selects only). Accuracy (checked in tests against double precision over
// dense sweeps): a few ulp, well inside the fp32 tolerance; infinities, NaN and subnormal results handled.
//
// Exp: Cephes' expf polynomial on x - n ln2, times 2^n built from two exponent factors (so that results down to
// the smallest subnormal are right). Tanh and Erf: the rational approximations Eigen and ONNX Runtime's MLAS use
// (odd numerator of degree 13 over an even denominator), on a clamped argument.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace onnxamp::ops {

namespace math_detail {
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
}  // namespace math_detail

// c ? a : b without a branch. For float and double it is done with bit masks: GCC does not if-convert a ternary on
// a float comparison under its default -ftrapping-math, which would keep every loop using one from vectorizing.
template <typename T>
inline T Select(bool c, T a, T b) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    using U = std::conditional_t<std::is_same_v<T, float>, uint32_t, uint64_t>;
    const U m = U{0} - static_cast<U>(c);
    U ua, ub;
    std::memcpy(&ua, &a, sizeof(T));
    std::memcpy(&ub, &b, sizeof(T));
    const U r = (ua & m) | (ub & ~m);
    T out;
    std::memcpy(&out, &r, sizeof(T));
    return out;
  } else {
    return c ? a : b;
  }
}

namespace math_detail {
inline float Clamp(float x, float lo, float hi) {
  // NaN passes through (both comparisons are false).
  x = Select(x < lo, lo, x);
  return Select(x > hi, hi, x);
}
}  // namespace math_detail

// e^x.
inline float FastExp(float x) {
  using namespace math_detail;
  const float xc = Clamp(x, -104.0f, 88.8f);
  // n = round(x / ln2) with the 1.5 * 2^23 trick: adding it leaves the rounded integer in the low mantissa bits.
  const float kShift = 12582912.0f;
  const float t = xc * 1.44269504088896341f + kShift;
  const float n = t - kShift;
  const int32_t ni = static_cast<int32_t>(Bits(t) - Bits(kShift));
  // r = x - n ln2 in two parts (Cody-Waite), |r| <= ln2 / 2.
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n = 2^n1 * 2^n2 with both halves normal (n is in [-150, 128]).
  const int32_t n1 = ni >> 1;
  const int32_t n2 = ni - n1;
  const float s1 = FromBits(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = FromBits(static_cast<uint32_t>(n2 + 127) << 23);
  float y = p * s1 * s2;
  y = Select(x > 88.72283935546875f, std::numeric_limits<float>::infinity(), y);
  return Select(x != x, x, y);
}

// tanh(x).
inline float FastTanh(float x) {
  using namespace math_detail;
  const float xc = Clamp(x, -9.0f, 9.0f);
  const float x2 = xc * xc;
  float p = x2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * xc;
  float q = x2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  const float y = Clamp(p / q, -1.0f, 1.0f);
  // Near 0 tanh(x) = x to float precision (and this keeps -0 and subnormals exact).
  return Select((Bits(x) & 0x7fffffffu) < Bits(0.0004f), x, y);
}

// erf(x).
inline float FastErf(float x) {
  using namespace math_detail;
  const float xc = Clamp(x, -4.0f, 4.0f);  // erf(4) rounds to 1 in float
  const float x2 = xc * xc;
  float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  p = p * xc;
  float q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return Clamp(p / q, -1.0f, 1.0f);
}

// 1 / (1 + e^-x), accurate for large negative x too (e^x / (1 + e^x) there).
inline float FastSigmoid(float x) {
  const float e = FastExp(Select(x < 0.0f, x, -x));  // e^-|x|, never overflows
  const float s = 1.0f / (1.0f + e);
  return Select(x < 0.0f, e * s, Select(x != x, x, s));
}

// erfc(z) for z >= 0 in the form t exp(-z^2 + P(t)), t = 1 / (1 + z / 2) (Numerical Recipes' erfcc: relative error
// below 1.2e-7 in exact arithmetic; in float the rounding of the exponent adds about |z^2| * 6e-8 relative).
inline float FastErfcNonNegative(float z) {
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = t * 0.17087277f + -0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t + -1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t + -0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t + -1.26551223f;
  return t * FastExp(p - z * z);
}

// x Phi(x) = 0.5 x erfc(-x / sqrt 2), with erfc(-z) = 2 - erfc(z) for x > 0: one erfc of a non-negative number,
// which keeps the relative precision of the small results for negative x (where 1 + erf would cancel).
inline float FastGelu(float x) {
  const float e =
      FastErfcNonNegative(math_detail::FromBits(math_detail::Bits(x) & 0x7fffffffu) * 0.70710678118654752440f);
  // Below -15 the result underflows to -0 (and x = -inf would give -inf * 0).
  return Select(x < -15.0f, -0.0f, 0.5f * x * Select(x < 0.0f, e, 2.0f - e));
}

// 0.5 x (1 + erf(x / sqrt 2)) as models write it (Div, Erf, Add, Mul, Mul) and FusedMatMul's Gelu epilogue computes
// it: with FastErf, about half the work of FastGelu. Where erf(x / sqrt 2) rounds to -1 (x below about -5.4) it
// gives -0 for a Gelu of at most 2e-7 in magnitude; FastGelu keeps the relative precision there.
inline float FastGeluErf(float x) { return 0.5f * x * (1.0f + FastErf(x * 0.70710678118654752440f)); }

// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), computed as x sigmoid(2 sqrt(2 / pi) (...)): the same value,
// without 1 + tanh cancelling for negative x.
inline float FastGeluTanh(float x) { return x * FastSigmoid(1.5957691216057308f * (x + 0.044715f * x * x * x)); }

// Gelu's derivative in the erf form, Phi(x) + x phi(x) = 0.5 (1 + erf(x / sqrt 2)) + x e^(-x^2 / 2) / sqrt(2 pi), as
// PyTorch's GELU backward computes it. The x phi(x) term is exactly 0 in float beyond |x| = 15 (e^-112 is below the
// smallest subnormal) and is dropped there, so that +-inf give the limits 1 and 0 rather than inf * 0; NaN stays NaN.
inline float FastGeluGrad(float x) {
  using namespace math_detail;
  const float cdf = 0.5f * (1.0f + FastErf(x * 0.70710678118654752440f));
  const float pdf = 0.39894228040143267794f * FastExp(-0.5f * x * x);
  const float abs_x = FromBits(Bits(x) & 0x7fffffffu);
  return Select(x != x, x, cdf + Select(abs_x < 15.0f, x * pdf, 0.0f));
}

// The derivative of the tanh form x s, s = sigmoid(k u), u = x + c x^3, k = 2 sqrt(2 / pi), c = 0.044715:
// s + x s (1 - s) k (1 + 3 c x^2). Beyond |x| = 100 the second term is 0 in float (k u is past +-88 from |x| of about 9
// on) and is dropped, for the same reason; NaN stays NaN.
inline float FastGeluTanhGrad(float x) {
  using namespace math_detail;
  const float k = 1.5957691216057308f, c = 0.044715f;
  const float x2 = x * x;
  const float s = FastSigmoid(k * (x + c * x2 * x));
  const float abs_x = FromBits(Bits(x) & 0x7fffffffu);
  return Select(x != x, x, s + Select(abs_x < 100.0f, x * s * (1.0f - s) * k * (1.0f + 3.0f * c * x2), 0.0f));
}

// The same derivative with std::exp in C's precision (GeluGrad's float64 path, and the fused GEMM's): the second term
// dropped beyond |x| = 100 as above, so that +-inf give 1 and 0.
template <typename C>
C GeluTanhGradExact(C x) {
  const C k = C(1.5957691216057308);  // 2 sqrt(2/pi)
  const C c = C(0.044715);
  const C s = C(1) / (C(1) + std::exp(-k * (x + c * x * x * x)));
  return s + (std::abs(x) < C(100) ? x * s * (C(1) - s) * k * (C(1) + C(3) * c * x * x) : C(0));
}

// max(x, 0) as the Relu op computes it: NaN stays NaN (x86's max instructions would return the 0).
inline float FastRelu(float x) { return Select(x < 0.0f, 0.0f, x); }

// The functions above over arrays: out[i] = f(in[i]) (in == out allowed). Compiled for the baseline instruction
// set, AVX2 and AVX-512, and dispatched on the CPU at run time; all compile to the same IEEE operations (no
// contraction into FMA), so the results are bit-identical on every machine.
void ExpArray(const float* in, float* out, int64_t n);
void TanhArray(const float* in, float* out, int64_t n);
void ErfArray(const float* in, float* out, int64_t n);
void SigmoidArray(const float* in, float* out, int64_t n);
void GeluArray(const float* in, float* out, int64_t n);
void GeluErfArray(const float* in, float* out, int64_t n);
void SqrtArray(const float* in, float* out, int64_t n);  // IEEE sqrt (correctly rounded)
void GeluTanhArray(const float* in, float* out, int64_t n);
void ReluArray(const float* in, float* out, int64_t n);
// Gradients: dx[i] = dy[i] * FastGeluGrad(x[i]) (GeluGradArray) or FastGeluTanhGrad (GeluTanhGradArray); dx may be
// dy or x.
void GeluGradArray(const float* dy, const float* x, float* dx, int64_t n);
void GeluTanhGradArray(const float* dy, const float* x, float* dx, int64_t n);

// Softmax's exponentials of one row: out[i] = e^(in[i] - max) for i < n, and returns their sum (in a fixed order,
// the same on every machine). Differences below kSoftmaxExpFloor give exactly 0: their exponentials are below
// FLT_MIN (subnormal or 0, negligible against a sum >= 1), and computing subnormals costs a microcode assist per
// instruction on x86 (a causal mask of -1e9 made Softmax a third of a transformer's time).
inline constexpr float kSoftmaxExpFloor = -87.0f;
float SoftmaxExpArray(const float* in, float max, float* out, int64_t n);

// The maximum of in[0..n) (n >= 0; -inf for n == 0), NaN when any element is NaN (as NumPy's max).
float MaxArray(const float* in, int64_t n);

// e^d for one difference d = x - max, flushed below kSoftmaxExpFloor like SoftmaxExpArray.
inline float SoftmaxExp(float d) {
  const bool tiny = d < kSoftmaxExpFloor;
  return Select(tiny, 0.0f, FastExp(Select(tiny, 0.0f, d)));
}

// Float arithmetic over a broadcast pair of rows: out[r * cols + j] = a[r * a_row + j * a_step] op
// b[r * b_row + j * b_step] for r < rows, j < cols, with a_step and b_step each 0 (broadcast) or 1. Plain IEEE
// operations, so every version gives the same bits.
enum class ArithOp { kAdd, kSub, kMul, kDiv };
void ArithRows(ArithOp op, const float* a, int64_t a_row, int64_t a_step, const float* b, int64_t b_row, int64_t b_step,
               float* out, int64_t rows, int64_t cols);

// One row of LayerNormalization: mean and population variance of x[0..n) (n > 0; sums in 16 lanes folded in a
// fixed order), inv = 1 / sqrt(var + epsilon), y[j] = (x[j] - mean) * inv * scale[j] + bias[j] (bias may be null:
// 0). y may be x.
void LayerNormRow(const float* x, int64_t n, const float* scale, const float* bias, float epsilon, float* y,
                  float* mean, float* inv);

// The widest version the array functions use on this machine: "avx512", "avx2" or "baseline".
const char* MathArraysIsa();

}  // namespace onnxamp::ops
