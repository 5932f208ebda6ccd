// CUDA unary math and activations: Sqrt Exp Log Neg Abs Reciprocal Relu LeakyRelu Elu Sigmoid Tanh Erf Gelu Softplus,
// the trigonometric and hyperbolic functions and their inverses, Floor Ceil Round Sign, HardSigmoid HardSwish Mish
// Softsign Selu Celu ThresholdedRelu Shrink, Not, IsNaN and IsInf. Each op is a functor on the compute type (float for
// fp16/bf16, the type itself otherwise), written with the same formulas as the CPU kernels
// (runtime/ops/elementwise/unary_cpu.cc) on the device's libm.
#include <cstdint>
#include <type_traits>

#include "runtime/cuda/ops/elementwise/elementwise_engine.cuh"
#include "runtime/ops/common/float_to_int.h"

namespace onnxamp::cuda::ew {
namespace {

template <typename C>
inline constexpr bool kIsF32 = std::is_same_v<C, float>;

// Wrapping negation for integers (two's complement), IEEE negation for floats.
template <typename C>
__device__ __forceinline__ C WrapNeg(C x) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(U{0} - static_cast<U>(x)));
  } else {
    return -x;
  }
}

// The float and double forms of a libm function.
#define ONNXAMP_DEVICE_MATH(Name, f32, f64) \
  struct Name {                             \
    template <typename C>                   \
    __device__ C operator()(C x) const {    \
      if constexpr (kIsF32<C>) {            \
        return f32(x);                      \
      } else {                              \
        return f64(x);                      \
      }                                     \
    }                                       \
  };
ONNXAMP_DEVICE_MATH(SqrtF, sqrtf, sqrt)
ONNXAMP_DEVICE_MATH(ExpF, expf, exp)
ONNXAMP_DEVICE_MATH(LogF, logf, log)

struct NegF {
  template <typename C>
  __device__ C operator()(C x) const {
    return WrapNeg(x);
  }
};

struct AbsF {
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) {
      return x;
    } else if constexpr (std::is_integral_v<C>) {
      return x < C(0) ? WrapNeg(x) : x;
    } else if constexpr (kIsF32<C>) {
      return fabsf(x);
    } else {
      return fabs(x);
    }
  }
};

struct ReciprocalF {
  template <typename C>
  __device__ C operator()(C x) const {
    return C(1) / x;
  }
};

struct ReluF {
  template <typename C>
  __device__ C operator()(C x) const {
    return x < C(0) ? C(0) : x;  // NaN stays NaN, -0 stays -0
  }
};

struct LeakyReluF {
  float alpha;
  template <typename C>
  __device__ C operator()(C x) const {
    return x < C(0) ? static_cast<C>(alpha) * x : x;
  }
};

struct EluF {
  float alpha;
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (kIsF32<C>) {
      return x < 0.0f ? alpha * expm1f(x) : x;
    } else {
      return x < C(0) ? static_cast<C>(alpha) * expm1(x) : x;
    }
  }
};

// 1 / (1 + e^-x), from e^-|x| so that nothing overflows and small results keep their precision.
struct SigmoidF {
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (kIsF32<C>) {
      const float e = expf(-fabsf(x));
      const float s = 1.0f / (1.0f + e);
      return x < 0.0f ? e * s : (x != x ? x : s);
    } else {
      if (x >= 0) return 1 / (1 + exp(-x));
      const double e = exp(x);
      return e / (1 + e);  // NaN falls here and stays NaN
    }
  }
};

struct TanhF {
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (kIsF32<C>) {
      return tanhf(x);
    } else {
      return tanh(x);
    }
  }
};

struct ErfF {
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (std::is_integral_v<C>) {
      return static_cast<C>(erf(static_cast<double>(x)));  // truncated toward zero: -1, 0 or 1
    } else if constexpr (kIsF32<C>) {
      return erff(x);
    } else {
      return erf(x);
    }
  }
};

// x Phi(x) = 0.5 x erfc(-x / sqrt 2); -0 far below zero (where erfc underflows, and for x = -inf).
struct GeluF {
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (kIsF32<C>) {
      return x < -15.0f ? -0.0f : 0.5f * x * erfcf(-x * 0.70710678118654752440f);
    } else {
      return x < -40 ? -0.0 : 0.5 * x * erfc(-x * 0.70710678118654752440);
    }
  }
};

// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) computed as x sigmoid(2 sqrt(2 / pi) (...)), as the CPU does.
struct GeluTanhF {
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (kIsF32<C>) {
      return x * SigmoidF()(1.5957691216057308f * (x + 0.044715f * x * x * x));
    } else {
      return x / (1 + exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)));
    }
  }
};

// log(1 + e^x) without overflow: x + log1p(e^-x) for positive x.
struct SoftplusF {
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (kIsF32<C>) {
      return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    } else {
      return x > C(0) ? x + log1p(exp(-x)) : log1p(exp(x));
    }
  }
};

ONNXAMP_DEVICE_MATH(SinF, sinf, sin)
ONNXAMP_DEVICE_MATH(CosF, cosf, cos)
ONNXAMP_DEVICE_MATH(TanF, tanf, tan)
ONNXAMP_DEVICE_MATH(AsinF, asinf, asin)
ONNXAMP_DEVICE_MATH(AcosF, acosf, acos)
ONNXAMP_DEVICE_MATH(AtanF, atanf, atan)
ONNXAMP_DEVICE_MATH(SinhF, sinhf, sinh)
ONNXAMP_DEVICE_MATH(CoshF, coshf, cosh)
ONNXAMP_DEVICE_MATH(AsinhF, asinhf, asinh)
ONNXAMP_DEVICE_MATH(AcoshF, acoshf, acosh)
ONNXAMP_DEVICE_MATH(AtanhF, atanhf, atanh)
ONNXAMP_DEVICE_MATH(FloorF, floorf, floor)
ONNXAMP_DEVICE_MATH(CeilF, ceilf, ceil)
ONNXAMP_DEVICE_MATH(RoundF, rintf, rint)  // the default rounding mode: halves to even, as the CPU's nearbyint
#undef ONNXAMP_DEVICE_MATH

// max(0, min(1, alpha x + beta)); NaN stays NaN (as unary_cpu.cc).
struct HardSigmoidF {
  float alpha, beta;
  template <typename C>
  __device__ C operator()(C x) const {
    const C v = static_cast<C>(alpha) * x + static_cast<C>(beta);
    return v < C(0) ? C(0) : (v > C(1) ? C(1) : v);
  }
};

struct HardSwishF {
  template <typename C>
  __device__ C operator()(C x) const {
    const C v = static_cast<C>(1.0 / 6.0) * x + C(0.5);
    return x * (v < C(0) ? C(0) : (v > C(1) ? C(1) : v));
  }
};

struct MishF {
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (kIsF32<C>) {
      const float sp = x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
      return x * tanhf(sp);
    } else {
      const C sp = x > C(0) ? x + log1p(exp(-x)) : log1p(exp(x));
      return x * tanh(sp);
    }
  }
};

// -1, 0 or 1; 0, -0 and NaN as they are.
struct SignF {
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) {
      return x > C(0) ? C(1) : C(0);
    } else if constexpr (std::is_integral_v<C>) {
      return x > C(0) ? C(1) : (x < C(0) ? C(-1) : C(0));
    } else {
      return x > C(0) ? C(1) : (x < C(0) ? C(-1) : x);
    }
  }
};

struct SoftsignF {
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (kIsF32<C>) {
      return x / (1.0f + fabsf(x));
    } else {
      return x / (C(1) + fabs(x));
    }
  }
};

// gamma * (x > 0 ? x : alpha * (e^x - 1)).
struct SeluF {
  float alpha, gamma;
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (kIsF32<C>) {
      return gamma * (x > 0.0f ? x : alpha * expm1f(x));
    } else {
      return static_cast<C>(gamma) * (x > C(0) ? x : static_cast<C>(alpha) * expm1(x));
    }
  }
};

// x > 0 ? x : alpha * (e^(x / alpha) - 1).
struct CeluF {
  float alpha;
  template <typename C>
  __device__ C operator()(C x) const {
    const C a = static_cast<C>(alpha);
    if constexpr (kIsF32<C>) {
      return x > 0.0f ? x : a * expm1f(x / a);
    } else {
      return x > C(0) ? x : a * expm1(x / a);
    }
  }
};

struct ThresholdedReluF {
  float alpha;
  template <typename C>
  __device__ C operator()(C x) const {
    return x > static_cast<C>(alpha) ? x : (x != x ? x : C(0));
  }
};

// x + bias below -lambd, x - bias above lambd, 0 between; integers through double, saturating as Cast.
struct ShrinkF {
  float lambd, bias;
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (std::is_integral_v<C>) {
      const double v = static_cast<double>(x);
      if (v < -static_cast<double>(lambd)) return ops::FloatToInt<C>(v + bias);
      if (v > static_cast<double>(lambd)) return ops::FloatToInt<C>(v - bias);
      return C(0);
    } else {
      if (x < -static_cast<C>(lambd)) return x + static_cast<C>(bias);
      if (x > static_cast<C>(lambd)) return x - static_cast<C>(bias);
      return x != x ? x : C(0);
    }
  }
};

// IsNaN (inf false) and IsInf on the compute type.
template <typename T>
struct IsNanInfF {
  bool inf, negative, positive;
  __device__ bool operator()(T v) const {
    const ComputeType<T> x = LoadValue(v);
    if (!inf) return x != x;
    return (positive && isinf(x) && x > 0) || (negative && isinf(x) && x < 0);
  }
};

struct NotF {
  __device__ bool operator()(bool x) const { return !x; }
};

// Which element types an op takes (as the CPU registration: unary_cpu.cc's Types).
enum class Types { kFloat, kFloatAndSigned, kAll };

template <typename T>
constexpr bool Accepts(Types t) {
  if constexpr (kIsFloatLike<T>) {
    return true;
  } else if constexpr (std::is_signed_v<T>) {
    return t != Types::kFloat;
  } else {
    return t == Types::kAll;
  }
}

template <Types kTypes, typename Op>
Status Run(const Op& op, DType dtype, const void* x, void* y, int64_t n, cudaStream_t stream, std::string_view what) {
  return DispatchNumeric(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (Accepts<T>(kTypes)) {
      return RunUnary(MathUnary<Op, T>{op}, static_cast<const T*>(x), static_cast<T*>(y), n, stream, what);
    } else {
      return Unimplemented(what, ": element type ", DTypeName(dtype), " is not supported");
    }
  });
}

}  // namespace

Status LaunchUnary(UnaryOp op, DType dtype, const void* x, void* y, int64_t n, float alpha, float beta,
                   cudaStream_t stream, std::string_view what) {
  switch (op) {
    case UnaryOp::kSqrt:
      return Run<Types::kFloat>(SqrtF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kExp:
      return Run<Types::kFloat>(ExpF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kLog:
      return Run<Types::kFloat>(LogF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kNeg:
      return Run<Types::kFloatAndSigned>(NegF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kAbs:
      return Run<Types::kAll>(AbsF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kReciprocal:
      return Run<Types::kFloat>(ReciprocalF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kRelu:
      return Run<Types::kFloatAndSigned>(ReluF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kLeakyRelu:
      return Run<Types::kFloat>(LeakyReluF{alpha}, dtype, x, y, n, stream, what);
    case UnaryOp::kElu:
      return Run<Types::kFloat>(EluF{alpha}, dtype, x, y, n, stream, what);
    case UnaryOp::kSigmoid:
      return Run<Types::kFloat>(SigmoidF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kTanh:
      return Run<Types::kFloat>(TanhF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kErf:
      return Run<Types::kAll>(ErfF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kGelu:
      return Run<Types::kFloat>(GeluF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kGeluTanh:
      return Run<Types::kFloat>(GeluTanhF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kSoftplus:
      return Run<Types::kFloat>(SoftplusF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kSin:
      return Run<Types::kFloat>(SinF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kCos:
      return Run<Types::kFloat>(CosF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kFloor:
      return Run<Types::kFloat>(FloorF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kCeil:
      return Run<Types::kFloat>(CeilF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kRound:
      return Run<Types::kFloat>(RoundF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kHardSigmoid:
      return Run<Types::kFloat>(HardSigmoidF{alpha, beta}, dtype, x, y, n, stream, what);
    case UnaryOp::kHardSwish:
      return Run<Types::kFloat>(HardSwishF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kMish:
      return Run<Types::kFloat>(MishF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kTan:
      return Run<Types::kFloat>(TanF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kAsin:
      return Run<Types::kFloat>(AsinF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kAcos:
      return Run<Types::kFloat>(AcosF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kAtan:
      return Run<Types::kFloat>(AtanF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kSinh:
      return Run<Types::kFloat>(SinhF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kCosh:
      return Run<Types::kFloat>(CoshF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kAsinh:
      return Run<Types::kFloat>(AsinhF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kAcosh:
      return Run<Types::kFloat>(AcoshF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kAtanh:
      return Run<Types::kFloat>(AtanhF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kSign:
      return Run<Types::kAll>(SignF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kSoftsign:
      return Run<Types::kFloat>(SoftsignF{}, dtype, x, y, n, stream, what);
    case UnaryOp::kSelu:
      return Run<Types::kFloat>(SeluF{alpha, beta}, dtype, x, y, n, stream, what);
    case UnaryOp::kCelu:
      return Run<Types::kFloat>(CeluF{alpha}, dtype, x, y, n, stream, what);
    case UnaryOp::kThresholdedRelu:
      return Run<Types::kFloat>(ThresholdedReluF{alpha}, dtype, x, y, n, stream, what);
    case UnaryOp::kShrink:
      return Run<Types::kAll>(ShrinkF{alpha, beta}, dtype, x, y, n, stream, what);
    case UnaryOp::kNot:
      if (dtype != DType::kBool) return Unimplemented(what, ": element type ", DTypeName(dtype), " is not supported");
      return RunUnary(NotF{}, static_cast<const bool*>(x), static_cast<bool*>(y), n, stream, what);
  }
  return Internal(what, ": unknown unary op ", static_cast<int>(op));
}

Status LaunchIsNanInf(bool inf, bool negative, bool positive, DType dtype, const void* x, bool* y, int64_t n,
                      cudaStream_t stream, std::string_view what) {
  return DispatchFloat(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return RunUnary(IsNanInfF<T>{inf, negative, positive}, static_cast<const T*>(x), y, n, stream, what);
  });
}

}  // namespace onnxamp::cuda::ew
