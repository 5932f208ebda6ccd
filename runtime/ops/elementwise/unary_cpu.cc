// Unary elementwise math and activations (CPU): Sqrt Exp Log Neg Abs Reciprocal Relu LeakyRelu Elu Sigmoid Tanh
// Erf Gelu Softplus; the trigonometric and hyperbolic functions and their inverses; Sign Floor Ceil Round; Softsign
// Selu Celu HardSigmoid HardSwish ThresholdedRelu Shrink Mish. One templated kernel; each op is a functor on the
// compute type (float for fp16/bf16).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/elementwise_math.h"
#include "runtime/ops/common/float_to_int.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

// Wrapping negation for integers (ONNX leaves INT_MIN's negation to the hardware: two's complement wraps).
template <typename C>
inline C WrapNeg(C x) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(U{0} - static_cast<U>(x));
  } else {
    return -x;
  }
}

// Element types an op accepts.
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

// A float attribute read into *out (the default when absent), the error into *st.
void ReadFloat(const exec::KernelInfo& info, const char* name, float* out, Status* st) {
  auto a = FloatAttribute(info.node, name, *out);
  if (!a.ok()) {
    if (st->ok()) *st = a.status();
  } else {
    *out = *a;
  }
}

// Each functor: kTypes, a constructor parsing attributes (errors through Status*), and operator() on the
// compute type.
struct SqrtOp {
  static constexpr Types kTypes = Types::kFloat;
  SqrtOp(const exec::KernelInfo&, Status*) {}
  template <typename C>
  C operator()(C x) const {
    return std::sqrt(x);
  }
  void Block(const float* in, float* out, int64_t n) const { SqrtArray(in, out, n); }
};

struct ExpOp {
  static constexpr Types kTypes = Types::kFloat;
  ExpOp(const exec::KernelInfo&, Status*) {}
  float operator()(float x) const { return FastExp(x); }
  void Block(const float* in, float* out, int64_t n) const { ExpArray(in, out, n); }
  double operator()(double x) const { return std::exp(x); }
};

// The functions of <cmath> that ONNX names one to one: Log, Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh
// Acosh Atanh, Floor Ceil.
#define ONNXAMP_CMATH_OP(Name, fn)                 \
  struct Name##Op {                                \
    static constexpr Types kTypes = Types::kFloat; \
    Name##Op(const exec::KernelInfo&, Status*) {}  \
    template <typename C>                          \
    C operator()(C x) const {                      \
      return std::fn(x);                           \
    }                                              \
  };
ONNXAMP_CMATH_OP(Log, log)

struct NegOp {
  static constexpr Types kTypes = Types::kFloatAndSigned;
  NegOp(const exec::KernelInfo&, Status*) {}
  template <typename C>
  C operator()(C x) const {
    return WrapNeg(x);
  }
};

struct AbsOp {
  static constexpr Types kTypes = Types::kAll;
  AbsOp(const exec::KernelInfo&, Status*) {}
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) {
      return x;
    } else if constexpr (std::is_integral_v<C>) {
      return x < 0 ? WrapNeg(x) : x;
    } else {
      return std::fabs(x);
    }
  }
};

struct ReciprocalOp {
  static constexpr Types kTypes = Types::kFloat;
  ReciprocalOp(const exec::KernelInfo&, Status*) {}
  template <typename C>
  C operator()(C x) const {
    return C(1) / x;
  }
};

struct ReluOp {
  static constexpr Types kTypes = Types::kFloatAndSigned;
  ReluOp(const exec::KernelInfo&, Status*) {}
  template <typename C>
  C operator()(C x) const {
    return Select(x < C(0), C(0), x);  // NaN stays NaN
  }
};

struct LeakyReluOp {
  static constexpr Types kTypes = Types::kFloat;
  float alpha = 0.01f;
  LeakyReluOp(const exec::KernelInfo& info, Status* st) { ReadFloat(info, "alpha", &alpha, st); }
  template <typename C>
  C operator()(C x) const {
    return Select(x < C(0), static_cast<C>(alpha) * x, x);
  }
};

struct EluOp {
  static constexpr Types kTypes = Types::kFloat;
  float alpha = 1.0f;
  EluOp(const exec::KernelInfo& info, Status* st) { ReadFloat(info, "alpha", &alpha, st); }
  template <typename C>
  C operator()(C x) const {
    return x < C(0) ? static_cast<C>(alpha) * std::expm1(x) : x;
  }
};

struct SigmoidOp {
  static constexpr Types kTypes = Types::kFloat;
  SigmoidOp(const exec::KernelInfo&, Status*) {}
  float operator()(float x) const { return FastSigmoid(x); }
  void Block(const float* in, float* out, int64_t n) const { SigmoidArray(in, out, n); }
  double operator()(double x) const {
    // exp of a non-positive number only: no overflow, and small results keep their precision.
    if (x >= 0) return 1 / (1 + std::exp(-x));
    const double e = std::exp(x);
    return e / (1 + e);
  }
};

struct TanhOp {
  static constexpr Types kTypes = Types::kFloat;
  TanhOp(const exec::KernelInfo&, Status*) {}
  float operator()(float x) const { return FastTanh(x); }
  void Block(const float* in, float* out, int64_t n) const { TanhArray(in, out, n); }
  double operator()(double x) const { return std::tanh(x); }
};

struct ErfOp {
  static constexpr Types kTypes = Types::kAll;
  ErfOp(const exec::KernelInfo&, Status*) {}
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_integral_v<C>) {
      return static_cast<C>(std::erf(static_cast<double>(x)));  // truncated toward zero: -1, 0 or 1
    } else if constexpr (std::is_same_v<C, float>) {
      return FastErf(x);
    } else {
      return std::erf(x);
    }
  }
  void Block(const float* in, float* out, int64_t n) const { ErfArray(in, out, n); }
};

struct GeluOp {
  static constexpr Types kTypes = Types::kFloat;
  bool tanh_approx = false;
  GeluOp(const exec::KernelInfo& info, Status* st) {
    auto a = StringAttribute(info.node, "approximate", "none");
    if (!a.ok()) {
      *st = a.status();
    } else if (*a == "tanh") {
      tanh_approx = true;
    } else if (*a != "none") {
      *st = InvalidArgument("attribute 'approximate' must be \"none\" or \"tanh\", got \"", *a, "\"");
    }
  }
  double operator()(double x) const {
    if (tanh_approx) return x / (1 + std::exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)));
    return x < -40 ? -0.0 : 0.5 * x * std::erfc(-x * 0.70710678118654752440);  // -0 below -40 (and at -inf)
  }
  float operator()(float x) const { return tanh_approx ? FastGeluTanh(x) : FastGelu(x); }
  void Block(const float* in, float* out, int64_t n) const {
    if (tanh_approx) return GeluTanhArray(in, out, n);
    GeluArray(in, out, n);
  }
};

// com.onnxamp Gelu: Gelu-20, whose erf form is computed as models spell it out and FusedMatMul's epilogue computes
// it (FastGeluErf: about a third of FastGelu's time here), so that a training graph's forward gives the values its
// evaluation graph and the exported model give.
struct InternalGeluOp : GeluOp {
  using GeluOp::GeluOp;
  using GeluOp::operator();
  float operator()(float x) const { return tanh_approx ? FastGeluTanh(x) : FastGeluErf(x); }
  void Block(const float* in, float* out, int64_t n) const {
    if (tanh_approx) return GeluTanhArray(in, out, n);
    GeluErfArray(in, out, n);
  }
};

struct SoftplusOp {
  static constexpr Types kTypes = Types::kFloat;
  SoftplusOp(const exec::KernelInfo&, Status*) {}
  template <typename C>
  C operator()(C x) const {
    // log(1 + exp(x)) without overflow: x + log1p(exp(-x)) for positive x.
    return x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
};

ONNXAMP_CMATH_OP(Sin, sin)
ONNXAMP_CMATH_OP(Cos, cos)
ONNXAMP_CMATH_OP(Tan, tan)
ONNXAMP_CMATH_OP(Asin, asin)
ONNXAMP_CMATH_OP(Acos, acos)
ONNXAMP_CMATH_OP(Atan, atan)
ONNXAMP_CMATH_OP(Sinh, sinh)
ONNXAMP_CMATH_OP(Cosh, cosh)
ONNXAMP_CMATH_OP(Asinh, asinh)
ONNXAMP_CMATH_OP(Acosh, acosh)
ONNXAMP_CMATH_OP(Atanh, atanh)
ONNXAMP_CMATH_OP(Floor, floor)
ONNXAMP_CMATH_OP(Ceil, ceil)
#undef ONNXAMP_CMATH_OP

// Round: halves to even (the default rounding mode), as numpy.round and ONNX's reference.
struct RoundOp {
  static constexpr Types kTypes = Types::kFloat;
  RoundOp(const exec::KernelInfo&, Status*) {}
  template <typename C>
  C operator()(C x) const {
    return std::nearbyint(x);
  }
};

// Sign: -1, 0 or 1; NaN stays NaN.
struct SignOp {
  static constexpr Types kTypes = Types::kAll;
  SignOp(const exec::KernelInfo&, Status*) {}
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) {
      return x > C(0) ? C(1) : C(0);
    } else if constexpr (std::is_integral_v<C>) {
      return x > C(0) ? C(1) : (x < C(0) ? C(-1) : C(0));
    } else {
      return x > C(0) ? C(1) : (x < C(0) ? C(-1) : x);  // 0, -0 and NaN as they are
    }
  }
};

struct SoftsignOp {
  static constexpr Types kTypes = Types::kFloat;
  SoftsignOp(const exec::KernelInfo&, Status*) {}
  template <typename C>
  C operator()(C x) const {
    return x / (C(1) + std::fabs(x));
  }
};

// Selu: gamma * (x > 0 ? x : alpha * (exp(x) - 1)), with ONNX's defaults (torch.nn.SELU's constants in float).
struct SeluOp {
  static constexpr Types kTypes = Types::kFloat;
  float alpha = 1.67326319217681884765625f;
  float gamma = 1.05070102214813232421875f;
  SeluOp(const exec::KernelInfo& info, Status* st) {
    ReadFloat(info, "alpha", &alpha, st);
    ReadFloat(info, "gamma", &gamma, st);
  }
  template <typename C>
  C operator()(C x) const {
    return static_cast<C>(gamma) * (x > C(0) ? x : static_cast<C>(alpha) * std::expm1(x));
  }
};

// Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
struct CeluOp {
  static constexpr Types kTypes = Types::kFloat;
  float alpha = 1.0f;
  CeluOp(const exec::KernelInfo& info, Status* st) {
    ReadFloat(info, "alpha", &alpha, st);
    if (st->ok() && alpha == 0) *st = InvalidArgument("attribute 'alpha' must not be 0");
  }
  template <typename C>
  C operator()(C x) const {
    const C a = static_cast<C>(alpha);
    return x > C(0) ? x : a * std::expm1(x / a);
  }
};

// HardSigmoid: max(0, min(1, alpha * x + beta)); NaN stays NaN.
struct HardSigmoidOp {
  static constexpr Types kTypes = Types::kFloat;
  float alpha = 0.2f;
  float beta = 0.5f;
  HardSigmoidOp(const exec::KernelInfo& info, Status* st) {
    ReadFloat(info, "alpha", &alpha, st);
    ReadFloat(info, "beta", &beta, st);
  }
  template <typename C>
  C operator()(C x) const {
    const C v = static_cast<C>(alpha) * x + static_cast<C>(beta);
    return v < C(0) ? C(0) : (v > C(1) ? C(1) : v);
  }
};

// HardSwish: x * max(0, min(1, x / 6 + 1 / 2)) (alpha 1/6 in float, as ONNX's definition and its reference).
struct HardSwishOp {
  static constexpr Types kTypes = Types::kFloat;
  HardSwishOp(const exec::KernelInfo&, Status*) {}
  template <typename C>
  C operator()(C x) const {
    const C v = static_cast<C>(1.0 / 6.0) * x + C(0.5);
    return x * (v < C(0) ? C(0) : (v > C(1) ? C(1) : v));
  }
};

struct ThresholdedReluOp {
  static constexpr Types kTypes = Types::kFloat;
  float alpha = 1.0f;
  ThresholdedReluOp(const exec::KernelInfo& info, Status* st) { ReadFloat(info, "alpha", &alpha, st); }
  template <typename C>
  C operator()(C x) const {
    return x > static_cast<C>(alpha) ? x : (x != x ? x : C(0));
  }
};

// Shrink: x + bias below -lambd, x - bias above lambd, 0 between (every numeric type, computed in the type itself
// for integers, as ONNX Runtime does).
struct ShrinkOp {
  static constexpr Types kTypes = Types::kAll;
  float bias = 0.0f;
  float lambd = 0.5f;
  ShrinkOp(const exec::KernelInfo& info, Status* st) {
    ReadFloat(info, "bias", &bias, st);
    ReadFloat(info, "lambd", &lambd, st);
  }
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_integral_v<C>) {
      const double v = static_cast<double>(x);  // out-of-range results saturate, as Cast's rules
      if (v < -static_cast<double>(lambd)) return FloatToInt<C>(v + bias);
      if (v > static_cast<double>(lambd)) return FloatToInt<C>(v - bias);
      return C(0);
    } else {
      if (x < -static_cast<C>(lambd)) return x + static_cast<C>(bias);
      if (x > static_cast<C>(lambd)) return x - static_cast<C>(bias);
      return x != x ? x : C(0);
    }
  }
};

// Mish: x * tanh(softplus(x)).
struct MishOp {
  static constexpr Types kTypes = Types::kFloat;
  MishOp(const exec::KernelInfo&, Status*) {}
  template <typename C>
  C operator()(C x) const {
    const C sp = x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    return x * std::tanh(sp);
  }
};

template <typename Op>
class UnaryCpu : public exec::OpKernel {
 public:
  UnaryCpu(const exec::KernelInfo& info, Status* st) : op_(info, st) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (X) is missing");
    auto run = [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      if constexpr (Accepts<T>(Op::kTypes)) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
        UnaryMap(ctx.threads(), x->values<T>().data(), y->mutable_values<T>().data(), x->num_elements(), op_);
        return Status::Ok();
      } else {
        return Unimplemented("input 0 (X) has element type ", DTypeName(x->dtype()), ", which ", ctx.node().op_type(),
                             " does not accept");
      }
    };
    return DispatchNumeric(x->dtype(), run);
  }

 private:
  Op op_;
};

std::vector<DType> TypesFor(Types t) {
  std::vector<DType> v = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  if (t != Types::kFloat) v.insert(v.end(), {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64});
  if (t == Types::kAll) v.insert(v.end(), {DType::kUint8, DType::kUint16, DType::kUint32, DType::kUint64});
  return v;
}

template <typename Op>
void Add(exec::KernelRegistry& r, const char* op, int64_t since, int64_t end = 23) {
  r.Register({op, "", since, end, exec::Device::kCpu, TypesFor(Op::kTypes), 0, &exec::MakeKernel<UnaryCpu<Op>>});
}

}  // namespace

void RegisterUnaryKernels(exec::KernelRegistry& r) {
  // Versions 1-5 only add the ignored legacy attribute consumed_inputs; later versions only add element types
  // (bfloat16 at 13, integers for Relu at 14, bfloat16 for LeakyRelu at 16 and Elu/Softplus at 22).
  Add<SqrtOp>(r, "Sqrt", 1);
  Add<ExpOp>(r, "Exp", 1);
  Add<LogOp>(r, "Log", 1);
  Add<NegOp>(r, "Neg", 1);
  Add<AbsOp>(r, "Abs", 1);
  Add<ReciprocalOp>(r, "Reciprocal", 1);
  Add<ReluOp>(r, "Relu", 1);
  Add<LeakyReluOp>(r, "LeakyRelu", 1);
  Add<EluOp>(r, "Elu", 1);
  Add<SigmoidOp>(r, "Sigmoid", 1);
  Add<TanhOp>(r, "Tanh", 1);
  Add<ErfOp>(r, "Erf", 9);
  Add<GeluOp>(r, "Gelu", 20);
  Add<SoftplusOp>(r, "Softplus", 1);
  // Sin..Atan: 7; the hyperbolic functions and Sign: 9; Round: 11; bfloat16 added at 13 (Sign) or 22 (the rest).
  Add<SinOp>(r, "Sin", 7);
  Add<CosOp>(r, "Cos", 7);
  Add<TanOp>(r, "Tan", 7);
  Add<AsinOp>(r, "Asin", 7);
  Add<AcosOp>(r, "Acos", 7);
  Add<AtanOp>(r, "Atan", 7);
  Add<SinhOp>(r, "Sinh", 9);
  Add<CoshOp>(r, "Cosh", 9);
  Add<AsinhOp>(r, "Asinh", 9);
  Add<AcoshOp>(r, "Acosh", 9);
  Add<AtanhOp>(r, "Atanh", 9);
  Add<FloorOp>(r, "Floor", 1);
  Add<CeilOp>(r, "Ceil", 1);
  Add<RoundOp>(r, "Round", 11);
  Add<SignOp>(r, "Sign", 9);
  Add<SoftsignOp>(r, "Softsign", 1);
  Add<SeluOp>(r, "Selu", 1);
  Add<CeluOp>(r, "Celu", 12);
  Add<HardSigmoidOp>(r, "HardSigmoid", 1);
  Add<HardSwishOp>(r, "HardSwish", 14);
  Add<ThresholdedReluOp>(r, "ThresholdedRelu", 10);
  Add<ShrinkOp>(r, "Shrink", 9);
  Add<MishOp>(r, "Mish", 18);
  // Gelu-20 at any opset, for training graphs (gradient_ops.h).
  r.Register({kGeluOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, TypesFor(InternalGeluOp::kTypes), 0,
              &exec::MakeKernel<UnaryCpu<InternalGeluOp>>});
}

}  // namespace onnxamp::ops
