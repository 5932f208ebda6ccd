// CUDA broadcasting arithmetic: Add Sub Mul Div Min Max Pow PRelu Mod BitShift and the Sum/Mean accumulation, with
// the CPU kernels' integer semantics (runtime/ops/elementwise/binary_cpu.cc, bitshift_cpu.cc,
// min_max/min_max_cpu.cc): wrapping Add/Sub/Mul, Div truncating with x / 0 = 0 and INT_MIN / -1 wrapping, exact
// integer powers, NaN-propagating Min/Max.
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/cuda/ops/elementwise/elementwise_engine.cuh"
#include "runtime/ops/common/float_to_int.h"
#include "runtime/ops/common/wrap_arith.h"

namespace onnxamp::cuda::ew {
namespace {

// Wrapping arithmetic: ops::WrapType (runtime/ops/common/wrap_arith.h), as on the CPU.
using ::onnxamp::ops::WrapType;

struct AddF {
  template <typename C>
  __device__ C operator()(C a, C b) const {
    return static_cast<C>(static_cast<WrapType<C>>(a) + static_cast<WrapType<C>>(b));
  }
};

struct SubF {
  template <typename C>
  __device__ C operator()(C a, C b) const {
    return static_cast<C>(static_cast<WrapType<C>>(a) - static_cast<WrapType<C>>(b));
  }
};

struct MulF {
  template <typename C>
  __device__ C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C> && sizeof(C) < sizeof(int)) {
      // Promotion to int could overflow (65535 * 65535); the low bits of an unsigned product are the answer.
      return static_cast<C>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
    } else {
      return static_cast<C>(static_cast<WrapType<C>>(a) * static_cast<WrapType<C>>(b));
    }
  }
};

struct DivF {
  template <typename C>
  __device__ C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == C(0)) return C(0);
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return SubF()(C(0), a);
      }
      return static_cast<C>(a / b);
    } else {
      return a / b;
    }
  }
};

struct MaxF {
  template <typename C>
  __device__ C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return (a > b) || (a != a) ? a : b;  // a NaN in either input gives NaN
    } else {
      return a > b ? a : b;
    }
  }
};

struct MinF {
  template <typename C>
  __device__ C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return (a < b) || (a != a) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};

// PRelu: x where x >= 0 (and NaN), slope * x elsewhere; integers wrap as Mul.
struct PReluF {
  template <typename C>
  __device__ C operator()(C x, C slope) const {
    if constexpr (std::is_unsigned_v<C>) {
      return x;
    } else {
      return x < C(0) ? MulF()(slope, x) : x;
    }
  }
};

// Mod: `floor_mod` (fmod = 0, integers only) gives the divisor's sign, like Python's %; otherwise the dividend's, like
// C's fmod (floats). An integer x % 0 gives 0, and x % -1 gives 0 (INT_MIN % -1 would trap), as on the CPU.
struct ModF {
  bool floor_mod;
  template <typename C>
  __device__ C operator()(C a, C b) const {
    if constexpr (std::is_same_v<C, float>) {
      return fmodf(a, b);
    } else if constexpr (std::is_floating_point_v<C>) {
      return fmod(a, b);
    } else {
      if (b == C(0)) return C(0);
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return C(0);
        const C r = static_cast<C>(a % b);
        return floor_mod && r != C(0) && ((r < C(0)) != (b < C(0))) ? static_cast<C>(r + b) : r;
      } else {
        return static_cast<C>(a % b);
      }
    }
  }
};

// BitShift on unsigned integers: a shift by the type's width or more gives 0.
struct ShiftF {
  bool left;
  template <typename C>
  __device__ C operator()(C a, C s) const {
    if constexpr (std::is_unsigned_v<C>) {
      if (s >= static_cast<C>(sizeof(C) * 8)) return C(0);
      return left ? static_cast<C>(a << s) : static_cast<C>(a >> s);
    } else {
      return C(0);  // LaunchBinary takes unsigned types only
    }
  }
};

// Sum/Mean accumulation: acc = b (first) or acc + b, in the compute type C.
template <typename T>
struct AccumulateF {
  bool first;
  __device__ ComputeType<T> operator()(ComputeType<T> acc, T b) const {
    return first ? LoadValue(b) : acc + LoadValue(b);
  }
};

template <typename T>
struct SumFinishF {
  ComputeType<T> count;  // 0: Sum
  __device__ T operator()(ComputeType<T> v) const { return StoreValue<T>(count != ComputeType<T>(0) ? v / count : v); }
};

// Float bases: pow in the compute type; with `fast` (a scalar exponent and a base read in full) the exact cheaper
// forms the CPU kernel takes for 2, 3, 1, 0.5 and -1.
struct PowFloatF {
  bool fast;
  template <typename C>
  __device__ C operator()(C a, C e) const {
    if (fast) {
      if (e == C(2)) return a * a;
      if (e == C(3)) return a * a * a;
      if (e == C(1)) return a;
      if (e == C(0.5)) {
        if constexpr (std::is_same_v<C, float>) {
          return sqrtf(a);
        } else {
          return sqrt(a);
        }
      }
      if (e == C(-1)) return C(1) / a;
    }
    if constexpr (std::is_same_v<C, float>) {
      return powf(a, e);
    } else {
      return pow(a, e);
    }
  }
};

// Integer bases: by squaring for integer exponents (wrapping like repeated multiplication; negative exponents give 0
// unless the base is 1 or -1), through double for float exponents.
struct PowIntF {
  template <typename C>
  __device__ C operator()(C base, int64_t exp) const {
    if (exp < 0) {
      if (base == C(1)) return C(1);
      if constexpr (std::is_signed_v<C>) {
        if (base == C(-1)) return (exp % 2 == 0) ? C(1) : C(-1);
      }
      return C(0);
    }
    C result = C(1);
    while (exp > 0) {
      if (exp & 1) result = MulF()(result, base);
      exp >>= 1;
      if (exp) base = MulF()(base, base);
    }
    return result;
  }
  template <typename C>
  __device__ C operator()(C base, double exp) const {
    const double b = static_cast<double>(base);
    // An integral exponent by squaring: exact while the result fits 53 bits, where the host's pow (< 1 ulp) is
    // exact too, so that truncation cannot turn a device pow's 8.999... into 8 where the CPU gets 9.
    // A half-integral one (x ** 0.5, x ** 1.5) likewise from the correctly rounded sqrt: exact where the result is
    // an integer (4 ** 0.5 is 2, where a pow within 2 ulp may give 1.999... and truncate to 1).
    const bool integral = exp == trunc(exp), half = !integral && 2.0 * exp == trunc(2.0 * exp);
    if ((integral || half) && fabs(exp) <= 64.0) {
      int n = static_cast<int>(fabs(half ? 2.0 * exp : exp));
      double result = 1.0, sq = half ? sqrt(b) : b;
      while (n > 0) {
        if (n & 1) result *= sq;
        n >>= 1;
        if (n) sq *= sq;
      }
      return ops::FloatToInt<C>(exp < 0 ? 1.0 / result : result);
    }
    return ops::FloatToInt<C>(pow(b, exp));
  }
};

template <typename Op>
Status RunSameType(const Op& op, DType dtype, const void* a, const void* b, void* out, const Geometry& g,
                   cudaStream_t stream, std::string_view what) {
  return DispatchNumeric(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return RunBinary(MathBinary<Op, T, T, T>{op}, static_cast<const T*>(a), static_cast<const T*>(b),
                     static_cast<T*>(out), g, stream, what);
  });
}

}  // namespace

Status LaunchBinary(BinaryOp op, DType dtype, const void* a, const void* b, void* out, const Geometry& g,
                    cudaStream_t stream, std::string_view what) {
  switch (op) {
    case BinaryOp::kAdd:
      return RunSameType(AddF{}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kSub:
      return RunSameType(SubF{}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kMul:
      return RunSameType(MulF{}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kDiv:
      return RunSameType(DivF{}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kMin:
      return RunSameType(MinF{}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kMax:
      return RunSameType(MaxF{}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kPRelu:
      return RunSameType(PReluF{}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kModFloor:
    case BinaryOp::kModTrunc:
      if (IsFloatingPoint(dtype) && op == BinaryOp::kModFloor) {
        return Internal(what, ": a float Mod takes fmod = 1");
      }
      return RunSameType(ModF{op == BinaryOp::kModFloor}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kShiftLeft:
    case BinaryOp::kShiftRight:
      if (dtype != DType::kUint8 && dtype != DType::kUint16 && dtype != DType::kUint32 && dtype != DType::kUint64) {
        return Unimplemented(what, ": element type ", DTypeName(dtype), " is not supported");
      }
      return RunSameType(ShiftF{op == BinaryOp::kShiftLeft}, dtype, a, b, out, g, stream, what);
    default:
      return LaunchCompareLogic(op, dtype, a, b, static_cast<bool*>(out), g, stream, what);
  }
}

Status LaunchSumAccumulate(DType dtype, void* acc, const void* b, const Geometry& g, bool first, cudaStream_t stream,
                           std::string_view what) {
  return DispatchFloat(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    C* pacc = static_cast<C*>(acc);
    return RunBinary(AccumulateF<T>{first}, static_cast<const C*>(pacc), static_cast<const T*>(b), pacc, g, stream,
                     what);
  });
}

Status LaunchSumFinish(DType dtype, const void* acc, void* out, int64_t n, int64_t count, cudaStream_t stream,
                       std::string_view what) {
  return DispatchFloat(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    return RunUnary(SumFinishF<T>{static_cast<C>(count)}, static_cast<const C*>(acc), static_cast<T*>(out), n, stream,
                    what);
  });
}

DType PowExponentType(DType base, DType exponent) {
  switch (base) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
      return DType::kFloat32;
    case DType::kFloat64:
      return DType::kFloat64;
    default:
      return IsFloatingPoint(exponent) ? DType::kFloat64 : DType::kInt64;
  }
}

Status LaunchPow(DType base, DType exponent, const void* a, const void* b, void* out, const Geometry& g,
                 bool scalar_exponent_fast, cudaStream_t stream, std::string_view what) {
  return DispatchNumeric(base, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* pa = static_cast<const T*>(a);
    T* po = static_cast<T*>(out);
    const DType want = kIsFloatLike<T> ? PowExponentType(base, exponent)
                                       : (exponent == DType::kFloat64 ? DType::kFloat64 : DType::kInt64);
    if (exponent != want) {
      return Internal(what, ": Pow of ", DTypeName(base), " takes a ", DTypeName(want), " exponent, got ",
                      DTypeName(exponent));
    }
    if constexpr (std::is_same_v<T, double>) {
      return RunBinary(MathBinary<PowFloatF, T, double, T>{{scalar_exponent_fast}}, pa, static_cast<const double*>(b),
                       po, g, stream, what);
    } else if constexpr (kIsFloatLike<T>) {
      return RunBinary(MathBinary<PowFloatF, T, float, T>{{scalar_exponent_fast}}, pa, static_cast<const float*>(b), po,
                       g, stream, what);
    } else if (exponent == DType::kFloat64) {
      return RunBinary(MathBinary<PowIntF, T, double, T>{}, pa, static_cast<const double*>(b), po, g, stream, what);
    } else {
      return RunBinary(MathBinary<PowIntF, T, int64_t, T>{}, pa, static_cast<const int64_t*>(b), po, g, stream, what);
    }
  });
}

}  // namespace onnxamp::cuda::ew
