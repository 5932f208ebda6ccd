// Host entry points of the CUDA elementwise kernels (unary math, binary arithmetic, comparisons and logic, Min/Max,
// Pow, Cast, Clip, Where, Dropout). The OpKernel classes (elementwise_kernels.cc and friends, compiled by the host
// compiler) check attributes and shapes and call these; the .cu files of this folder implement them.
//
// Every launcher is asynchronous on `stream`, does nothing for n == 0, and returns Unimplemented for an element type
// it does not take and the launch error (naming `what`) when the kernel cannot start.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"

namespace onnxamp::cuda::ew {

inline constexpr int kMaxInputs = 3;
inline constexpr int kMaxDims = 8;

// How the inputs of an elementwise op are read to produce its contiguous output: the merged form of a
// runtime/ops/common/broadcast.h BroadcastPlan (size-1 dims dropped, mergeable dims merged). strides[i][k] is input
// i's element stride along merged dim k (0 where it is broadcast); the innermost stride is always 0 or 1.
struct Geometry {
  int64_t n = 0;  // output elements
  int rank = 1;   // merged dims, 1..kMaxDims
  int num_inputs = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[kMaxInputs][kMaxDims] = {};
};

// Element-by-element geometry of `n` outputs over inputs of the same shape (a rank-1 plan with unit strides).
Geometry FlatGeometry(int64_t n, int num_inputs);

// ---- unary ------------------------------------------------------------------------------------------------------

enum class UnaryOp {
  kSqrt,
  kExp,
  kLog,
  kNeg,
  kAbs,
  kReciprocal,
  kRelu,
  kLeakyRelu,  // alpha
  kElu,        // alpha
  kSigmoid,
  kTanh,
  kErf,
  kGelu,
  kGeluTanh,
  kSoftplus,
  kNot,  // bool only
  kSin,
  kCos,
  kFloor,
  kCeil,
  kRound,        // halves to even
  kHardSigmoid,  // alpha, beta
  kHardSwish,
  kMish,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kSign,  // every numeric type
  kSoftsign,
  kSelu,             // alpha, beta = gamma
  kCelu,             // alpha (not 0)
  kThresholdedRelu,  // alpha
  kShrink,           // alpha = lambd, beta = bias; every numeric type
};

// y[i] = op(x[i]) for i < n, in the compute type (float for fp16/bf16). Types per op as the CPU kernels take them.
Status LaunchUnary(UnaryOp op, DType dtype, const void* x, void* y, int64_t n, float alpha, float beta,
                   cudaStream_t stream, std::string_view what);

// y[i] = isnan(x[i]) (IsNaN), or x[i] is +inf and `positive` or -inf and `negative` (IsInf), for float types.
Status LaunchIsNanInf(bool inf, bool negative, bool positive, DType dtype, const void* x, bool* y, int64_t n,
                      cudaStream_t stream, std::string_view what);

// ---- binary -----------------------------------------------------------------------------------------------------

enum class BinaryOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMin,
  kMax,
  // Bool results:
  kEqual,
  kLess,
  kGreater,
  kLessOrEqual,
  kGreaterOrEqual,
  kAnd,  // bool inputs only
  kOr,
  kXor,
  // Same type as the inputs again:
  kPRelu,       // a < 0 ? b * a : a (b the slope; integers wrap)
  kModFloor,    // integers: the remainder with the divisor's sign (fmod = 0); x % 0 = 0
  kModTrunc,    // the remainder with the dividend's sign (fmod = 1; floats through fmod); x % 0 = 0 for integers
  kShiftLeft,   // unsigned integers: a << b, 0 for shifts of the type's width or more
  kShiftRight,  // unsigned integers: a >> b, likewise
};

// out = op(a, b) with a and b read through `g` (two inputs); out has dtype `dtype` for Add..Max and kPRelu..kShiftRight
// and bool for the comparisons and logic. Add, Sub, Mul wrap for integers; Div truncates, x / 0 = 0, INT_MIN / -1
// wraps; Min and Max propagate NaN. `out` may be `a` (Min/Max of more than two inputs accumulate in place).
Status LaunchBinary(BinaryOp op, DType dtype, const void* a, const void* b, void* out, const Geometry& g,
                    cudaStream_t stream, std::string_view what);

// Sum and Mean of float inputs, as the CPU (runtime/ops/min_max/min_max_cpu.cc): `acc` holds the compute type (float
// for fp16/bf16, the type itself otherwise) with the output's element count. LaunchSumAccumulate sets acc = b
// (`first`) or acc = acc + b, with b (of `dtype`) read through `g` (two inputs: acc in full, b); LaunchSumFinish
// stores out = acc / count (`count` > 0, Mean) or acc (count 0, Sum) in `dtype`, rounding once. `out` may be `acc`
// when the compute type is `dtype`.
Status LaunchSumAccumulate(DType dtype, void* acc, const void* b, const Geometry& g, bool first, cudaStream_t stream,
                           std::string_view what);
Status LaunchSumFinish(DType dtype, const void* acc, void* out, int64_t n, int64_t count, cudaStream_t stream,
                       std::string_view what);

// The exponent type LaunchPow takes for a base of type `base` and an exponent of type `exponent`: float32 for
// float32/fp16/bf16 bases, float64 for float64, and for integer bases int64 (integer exponents) or float64 (float
// exponents). The caller converts the exponent with LaunchCast first when the types differ.
DType PowExponentType(DType base, DType exponent);

// out = a ^ b (a of type `base`, b of type `exponent`, which must be PowExponentType of the base and the exponent's
// original type; Internal otherwise): floats through pow in the compute type; integer bases
// with integer exponents exactly (wrapping; a negative exponent gives 0 unless the base is 1 or -1); integer bases with
// float exponents through double, converted with Cast's rules. `scalar_exponent_fast` (b a scalar, a read in full)
// takes x*x, x*x*x, x, sqrt(x), 1/x for exponents 2, 3, 1, 0.5, -1 as the CPU kernel does.
Status LaunchPow(DType base, DType exponent, const void* a, const void* b, void* out, const Geometry& g,
                 bool scalar_exponent_fast, cudaStream_t stream, std::string_view what);

// ---- Cast -------------------------------------------------------------------------------------------------------

// y[i] = Cast<to>(x[i]) for i < n with runtime/ops/common/elementwise_convert.h's rules, bit for bit (fp16/bf16
// rounding as runtime/common/half.h; float to integer truncates, saturates, NaN -> 0; bool is value != 0). Numeric
// types and bool.
Status LaunchCast(DType from, DType to, const void* x, void* y, int64_t n, cudaStream_t stream, std::string_view what);

// ---- Clip, Where, Dropout ---------------------------------------------------------------------------------------

// y = min(max(x, lo), hi). lo / hi: device pointers to one element of `dtype` (null: absent), overridden by the
// attribute bounds when those are set (opsets before 11). Absent bounds are -inf / +inf (lowest / max for integers).
// NaN stays NaN.
Status LaunchClip(DType dtype, const void* x, void* y, int64_t n, const void* lo, const void* hi,
                  std::optional<float> attr_lo, std::optional<float> attr_hi, cudaStream_t stream,
                  std::string_view what);

// out = cond ? x : y through `g` (three inputs: cond, x, y), copying elements of `element_bytes` (1, 2, 4 or 8).
Status LaunchWhere(int element_bytes, const bool* cond, const void* x, const void* y, void* out, const Geometry& g,
                   cudaStream_t stream, std::string_view what);

// Dropout in training mode with drop probability `ratio` in [0, 1]: element i is kept when DropoutUniform(seed, i)
// >= (float)ratio (runtime/ops/dropout/dropout_mask.h, the same hash as the CPU kernel), y = keep ? x * scale : 0 with
// scale = 1 / (1 - ratio) in the compute type (0 for ratio 1). The mask (either may be null) gets keep as bool or as
// 1/0 of `dtype`. Float types. `device_step` (CudaContext::device_rng_step, null: none): the seed used is
// DropoutSeedForStep(seed, *device_step), read when the kernel runs.
Status LaunchDropout(DType dtype, const void* x, void* y, int64_t n, uint64_t seed, double ratio, bool* mask_bool,
                     void* mask_typed, cudaStream_t stream, std::string_view what,
                     const uint64_t* device_step = nullptr);

// out[i] = 1 (true for bool) for i < n.
Status LaunchFillOne(DType dtype, void* out, int64_t n, cudaStream_t stream, std::string_view what);

}  // namespace onnxamp::cuda::ew
