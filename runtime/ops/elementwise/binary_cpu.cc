// Broadcasting binary arithmetic (CPU): Add Sub Mul Div Pow, every numeric element type; Mod and PRelu.
//
// Numpy broadcasting from opset 7, the `broadcast`/`axis` attributes before. Integer semantics: Add, Sub and Mul
// wrap (two's complement), Div truncates toward zero like C++ and ONNX Runtime, x / 0 gives 0 and INT_MIN / -1
// wraps to INT_MIN instead of trapping. Pow takes an exponent of any numeric type; an integer base with an
// integer exponent is computed exactly (negative exponents truncate: 0 unless the base is 1 or -1), an integer
// base with a float exponent through double, converted back with Cast's rules.
#include <cmath>
#include <type_traits>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/elementwise_convert.h"
#include "runtime/ops/common/elementwise_math.h"
#include "runtime/ops/common/wrap_arith.h"
#include "runtime/ops/elementwise/binary_attr.h"

namespace onnxamp::ops {
namespace {

struct AddOp {
  static constexpr ArithOp kArith = ArithOp::kAdd;
  template <typename C>
  C operator()(C a, C b) const {
    return WrapAdd(a, b);
  }
};

struct SubOp {
  static constexpr ArithOp kArith = ArithOp::kSub;
  template <typename C>
  C operator()(C a, C b) const {
    return static_cast<C>(static_cast<WrapType<C>>(a) - static_cast<WrapType<C>>(b));
  }
};

struct MulOp {
  static constexpr ArithOp kArith = ArithOp::kMul;
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C> && sizeof(C) < sizeof(int)) {
      // Promotion to int could overflow (65535 * 65535); the low bits of an unsigned product are the answer.
      return static_cast<C>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
    } else {
      return static_cast<C>(static_cast<WrapType<C>>(a) * static_cast<WrapType<C>>(b));
    }
  }
};

struct DivOp {
  static constexpr ArithOp kArith = ArithOp::kDiv;
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == C(0)) return C(0);
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return SubOp()(C(0), a);
      }
      return static_cast<C>(a / b);
    } else {
      return a / b;
    }
  }
};

// Integer power by squaring, wrapping on overflow like repeated multiplication would.
template <typename C, typename E>
C IntPow(C base, E exp) {
  if (exp < E(0)) {
    if (base == C(1)) return C(1);
    if constexpr (std::is_signed_v<C>) {
      if (base == C(-1)) return (exp % 2 == 0) ? C(1) : C(-1);
    }
    return C(0);
  }
  C result = C(1);
  while (exp > E(0)) {
    if (exp & E(1)) result = MulOp()(result, base);
    exp = static_cast<E>(exp >> 1);
    if (exp) base = MulOp()(base, base);
  }
  return result;
}

struct PowOp {
  template <typename C, typename E>
  C operator()(C a, E b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::pow(a, static_cast<C>(b));
    } else if constexpr (std::is_integral_v<E>) {
      return IntPow(a, b);
    } else {
      return FloatToInt<C>(std::pow(static_cast<double>(a), static_cast<double>(b)));
    }
  }
};

// x^e for a float base and a scalar exponent with a cheaper exact form (x*x for 2, sqrt for 0.5, ...).
template <typename T>
bool PowScalarFastPath(exec::ThreadPool& pool, const T* x, double e, T* out, int64_t n) {
  using C = ComputeType<T>;
  if (e == 2.0) {
    UnaryMap(pool, x, out, n, [](C v) { return v * v; });
  } else if (e == 3.0) {
    UnaryMap(pool, x, out, n, [](C v) { return v * v * v; });
  } else if (e == 1.0) {
    UnaryMap(pool, x, out, n, [](C v) { return v; });
  } else if (e == 0.5) {
    UnaryMap(pool, x, out, n, [](C v) { return std::sqrt(v); });
  } else if (e == -1.0) {
    UnaryMap(pool, x, out, n, [](C v) { return C(1) / v; });
  } else {
    return false;
  }
  return true;
}

// Ops with a vectorized float form (elementwise_math.h).
template <typename Op>
concept HasArith = requires {
  Op::kArith;
};

// float, fp16 and bf16 operands whose plan has at most two merged dims (same shapes, a scalar, a row or a column
// broadcast): whole rows through ArithRows, vectorized for the CPU's widest ISA; 16-bit values converted in blocks.
// False when the plan has more dims (the general path takes it).
template <typename T>
bool ArithFastPath(exec::ThreadPool& pool, ArithOp op, const BroadcastPlan& plan, const T* a, const T* b, T* out) {
  if (plan.rank() > 2) return false;
  const bool two = plan.rank() == 2;
  const int64_t rows = two ? plan.dims()[0] : 1;
  const int64_t cols = plan.inner_size();
  const int64_t a_row = two ? plan.stride(0, 0) : 0, b_row = two ? plan.stride(1, 0) : 0;
  const int64_t a_step = plan.inner_stride(0), b_step = plan.inner_stride(1);
  // Rows [r0, r1), columns [c0, c1).
  auto run = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if constexpr (std::is_same_v<T, float>) {
      ArithRows(op, a + r0 * a_row + c0 * a_step, a_row, a_step, b + r0 * b_row + c0 * b_step, b_row, b_step,
                out + r0 * cols + c0, r1 - r0, c1 - c0);
    } else {
      alignas(64) float fa[kBlock], fb[kBlock], fo[kBlock];
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; c += kBlock) {
          const int64_t w = std::min(kBlock, c1 - c);
          const T* pa = a + r * a_row + c * a_step;
          const T* pb = b + r * b_row + c * b_step;
          if (a_step) {
            LoadBlock(pa, fa, w);
          } else {
            fa[0] = Load(pa[0]);
          }
          if (b_step) {
            LoadBlock(pb, fb, w);
          } else {
            fb[0] = Load(pb[0]);
          }
          ArithRows(op, fa, 0, a_step, fb, 0, b_step, fo, 1, w);
          StoreBlock(fo, out + r * cols + c, w);
        }
      }
    }
  };
  if (rows >= 2) {
    ParallelRanges(pool, rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(cols, 1)),
                   [&](int64_t r0, int64_t r1) { run(r0, r1, 0, cols); });
  } else {
    ParallelRanges(pool, cols, kElementwiseGrain, [&](int64_t c0, int64_t c1) { run(0, 1, c0, c1); });
  }
  return true;
}

template <typename Op>
class BinaryCpu : public exec::OpKernel {
 public:
  static constexpr bool kPow = std::is_same_v<Op, PowOp>;

  BinaryCpu(const exec::KernelInfo& info, Status* st) { *st = ReadLegacyBroadcast(info.node, info.opset, &legacy_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* a = ctx.input(0);
    const ir::Tensor* b = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(BroadcastPlan plan, PlanBinaryInputs(a, b, !kPow, legacy_));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, a->dtype(), plan.output_dims()));
    if (plan.num_elements() == 0) return Status::Ok();
    return DispatchNumeric(a->dtype(), [&](auto ta) -> Status {
      using TA = typename decltype(ta)::type;
      const TA* pa = a->values<TA>().data();
      TA* po = out->mutable_values<TA>().data();
      if constexpr (kPow) {
        return DispatchNumeric(b->dtype(), [&](auto tb) -> Status {
          using TB = typename decltype(tb)::type;
          const TB* pb = b->values<TB>().data();
          if constexpr (kIsFloatLike<TA>) {
            if (plan.IsScalar(1) && plan.IsFull(0) &&
                PowScalarFastPath(ctx.threads(), pa, static_cast<double>(Load(pb[0])), po, plan.num_elements())) {
              return Status::Ok();
            }
          }
          BinaryBroadcast(ctx.threads(), plan, pa, pb, po, Op());
          return Status::Ok();
        });
      } else {
        const TA* pb = b->values<TA>().data();
        if constexpr (HasArith<Op> && (std::is_same_v<TA, float> || kIsHalfLike<TA>)) {
          if (ArithFastPath(ctx.threads(), Op::kArith, plan, pa, pb, po)) return Status::Ok();
        }
        BinaryBroadcast(ctx.threads(), plan, pa, pb, po, Op());
        return Status::Ok();
      }
    });
  }

 private:
  LegacyBroadcast legacy_;
};

// Mod: fmod = 0 (integers only) takes the divisor's sign, like Python's %; fmod = 1 the dividend's, like C's fmod
// (floats require it). An integer x % 0 gives 0 (ONNX leaves it undefined; x / 0 gives 0 here too).
struct ModOp {
  bool fmod = false;
  ModOp(const exec::KernelInfo& info, Status* st) {
    StatusOr<bool> f = ReadModFmod(info.node);
    if (!f.ok()) {
      *st = f.status();
    } else {
      fmod = *f;
    }
  }
  Status Check(DType t) const { return CheckModType(fmod, t); }
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::fmod(a, b);
    } else {
      if (b == C(0)) return C(0);
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return C(0);  // INT_MIN % -1 would trap
        const C r = static_cast<C>(a % b);
        return !fmod && r != C(0) && ((r < C(0)) != (b < C(0))) ? static_cast<C>(r + b) : r;
      } else {
        return static_cast<C>(a % b);
      }
    }
  }
};

// PRelu: x where x >= 0, slope * x elsewhere (the slope broadcast to X's shape: unidirectionally from opset 7).
struct PReluOp {
  PReluOp(const exec::KernelInfo&, Status*) {}
  Status Check(DType) const { return Status::Ok(); }
  template <typename C>
  C operator()(C x, C slope) const {
    return x < C(0) ? MulOp()(slope, x) : x;  // integers wrap as Mul's
  }
};

// A binary op with attributes and numpy broadcasting (Mod, PRelu); PRelu's result must have X's shape.
template <typename Op>
class BinaryAttrCpu : public exec::OpKernel {
 public:
  static constexpr bool kPRelu = std::is_same_v<Op, PReluOp>;

  BinaryAttrCpu(const exec::KernelInfo& info, Status* st) : op_(info, st), opset_(info.opset) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* a = ctx.input(0);
    const ir::Tensor* b = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(BroadcastPlan plan, PlanBinaryAttrInputs(a, b, kPRelu, opset_));
    ONNXAMP_RETURN_IF_ERROR(op_.Check(a->dtype()));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, a->dtype(), plan.output_dims()));
    if (plan.num_elements() == 0) return Status::Ok();
    return DispatchNumeric(a->dtype(), [&](auto ta) -> Status {
      using T = typename decltype(ta)::type;
      BinaryBroadcast(ctx.threads(), plan, a->values<T>().data(), b->values<T>().data(),
                      out->mutable_values<T>().data(), op_);
      return Status::Ok();
    });
  }

 private:
  Op op_;
  int64_t opset_;
};

std::vector<DType> NumericTypes() {
  return {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,   DType::kInt16,
          DType::kInt32,   DType::kInt64,   DType::kUint8,    DType::kUint16,  DType::kUint32, DType::kUint64};
}

template <typename Op>
void Add(exec::KernelRegistry& r, const char* op) {
  // 1-6: legacy broadcast attributes; 7-23: numpy broadcasting (13, 14 and 15 only add element types).
  r.Register({op, "", 1, 23, exec::Device::kCpu, NumericTypes(), 0, &exec::MakeKernel<BinaryCpu<Op>>});
}

}  // namespace

void RegisterBinaryKernels(exec::KernelRegistry& r) {
  Add<AddOp>(r, "Add");
  Add<SubOp>(r, "Sub");
  Add<MulOp>(r, "Mul");
  Add<DivOp>(r, "Div");
  Add<PowOp>(r, "Pow");
  // Mod: 10 (13 adds bfloat16). PRelu: 6 with the slope broadcast as numpy does, which covers 6's rule; 7
  // unidirectional; 9 and 16 add types.
  r.Register({"Mod", "", 10, 23, exec::Device::kCpu, NumericTypes(), 0, &exec::MakeKernel<BinaryAttrCpu<ModOp>>});
  r.Register({"PRelu",
              "",
              6,
              23,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt32, DType::kInt64,
               DType::kUint32, DType::kUint64},
              0,
              &exec::MakeKernel<BinaryAttrCpu<PReluOp>>});
}

}  // namespace onnxamp::ops
