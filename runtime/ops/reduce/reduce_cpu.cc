// Reduce* (CPU): ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare,
// ReduceLogSum and ReduceLogSumExp, on the shared engine of runtime/ops/common/reduce.h.
//
// Axes come from the `axes` attribute before opset 18 (before 13 for ReduceSum) and from the optional int64 input 1
// from then on, where `noop_with_empty_axes` = 1 turns an empty axes list into a reduction over no axis (each
// output is its element mapped: x, |x|, x*x, ...). Otherwise empty axes reduce every axis. fp16/bf16 accumulate
// in float, integers in 64 bits; ReduceLogSumExp subtracts the per-output maximum before exponentiating.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/reduce/reduce_spec.h"

namespace onnxamp::ops {
namespace {

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

template <typename T>
inline constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Accumulators: sums of integers in 64 bits, sums of floats in their compute type (float for fp16/bf16);
// results that go through sqrt/log/exp in double for integers.
template <typename T>
using SumAcc = std::conditional_t<kIsInt<T>, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>,
                                  std::conditional_t<std::is_same_v<T, bool>, uint8_t, ComputeType<T>>>;
template <typename T>
using RealAcc = std::conditional_t<kIsInt<T>, double, ComputeType<T>>;
template <typename T>
using ExtremeAcc = std::conditional_t<std::is_same_v<T, bool>, uint8_t, ComputeType<T>>;

template <typename T, typename A>
inline A Value(T v) {
  return static_cast<A>(reduce::LoadFast<T>(v));
}

// Integer accumulation wraps around (two's complement, as the storage type would) instead of overflowing, which
// is undefined for signed types; floats add and multiply normally.
template <typename A>
inline A Add(A a, A b) {
  if constexpr (std::is_integral_v<A> && std::is_signed_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename A>
inline A Mul(A a, A b) {
  if constexpr (std::is_integral_v<A> && std::is_signed_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <typename T, typename A>
struct SumOp {
  using Acc = A;
  A Init() const { return A(0); }
  A Map(T v, int64_t) const { return Value<T, A>(v); }
  A Combine(A a, A b) const { return Add(a, b); }
};

template <typename T, typename A>
struct SumSquareOp {
  using Acc = A;
  A Init() const { return A(0); }
  A Map(T v, int64_t) const {
    const A a = Value<T, A>(v);
    return Mul(a, a);
  }
  A Combine(A a, A b) const { return Add(a, b); }
};

template <typename T, typename A>
struct SumAbsOp {
  using Acc = A;
  A Init() const { return A(0); }
  A Map(T v, int64_t) const {
    const A a = Value<T, A>(v);
    if constexpr (std::is_unsigned_v<A>) {
      return a;
    } else {
      return a < 0 ? Mul(a, A(-1)) : a;
    }
  }
  A Combine(A a, A b) const { return Add(a, b); }
};

template <typename T, typename A>
struct ProdOp {
  using Acc = A;
  A Init() const { return A(1); }
  A Map(T v, int64_t) const { return Value<T, A>(v); }
  A Combine(A a, A b) const { return Mul(a, b); }
};

// Max and min propagate NaN; over an empty set they give -inf/+inf (or the type's lowest/highest value).
template <typename T, typename A>
struct MaxOp {
  using Acc = A;
  A Init() const {
    if constexpr (std::numeric_limits<A>::has_infinity) {
      return -std::numeric_limits<A>::infinity();
    } else {
      return std::numeric_limits<A>::lowest();
    }
  }
  A Map(T v, int64_t) const { return Value<T, A>(v); }
  A Combine(A a, A b) const {
    if constexpr (std::is_floating_point_v<A>) {
      return ((a >= b) | (a != a)) ? a : b;
    } else {
      return a >= b ? a : b;
    }
  }
};

template <typename T, typename A>
struct MinOp {
  using Acc = A;
  A Init() const {
    if constexpr (std::numeric_limits<A>::has_infinity) {
      return std::numeric_limits<A>::infinity();
    } else {
      return std::numeric_limits<A>::max();
    }
  }
  A Map(T v, int64_t) const { return Value<T, A>(v); }
  A Combine(A a, A b) const {
    if constexpr (std::is_floating_point_v<A>) {
      return ((a <= b) | (a != a)) ? a : b;
    } else {
      return a <= b ? a : b;
    }
  }
};

// sum(exp(x - shift[o])) for ReduceLogSumExp.
template <typename T, typename A>
struct SumExpOp {
  using Acc = A;
  const A* shift;
  A Init() const { return A(0); }
  A Map(T v, int64_t o) const { return reduce::ExpOf<A>(Value<T, A>(v) - shift[o]); }
  A Combine(A a, A b) const { return a + b; }
};

// An accumulator value stored as T: rounded to nearest even for fp16/bf16, saturated (NaN -> 0) when a real
// result goes to an integer type.
template <typename T, typename A>
inline T Finish(A v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (kIsInt<T> && std::is_floating_point_v<A>) {
    if (v != v) return T(0);
    if (v <= static_cast<A>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<A>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  } else {
    return reduce::StoreFast<T>(static_cast<ComputeType<T>>(v));
  }
}

template <typename T, typename Op, typename F>
void ReduceAndFinish(const T* x, const reduce::ReducePlan& plan, const Op& op, T* y, exec::ThreadPool& pool,
                     F&& finish) {
  std::vector<typename Op::Acc> acc(static_cast<size_t>(plan.out_count));
  reduce::RunReduce(x, plan, op, acc.data(), &pool);
  for (int64_t o = 0; o < plan.out_count; ++o) y[o] = Finish<T>(finish(acc[o], o));
}

template <ReduceKind K, typename T>
void ReduceTyped(const T* x, const reduce::ReducePlan& plan, T* y, exec::ThreadPool& pool) {
  const int64_t n = plan.reduce_count;
  auto same = [](auto a, int64_t) { return a; };
  if constexpr (K == ReduceKind::kSum) {
    ReduceAndFinish(x, plan, SumOp<T, SumAcc<T>>{}, y, pool, same);
  } else if constexpr (K == ReduceKind::kMean) {
    ReduceAndFinish(x, plan, SumOp<T, SumAcc<T>>{}, y, pool, [n](SumAcc<T> a, int64_t) {
      if constexpr (kIsInt<T>) {
        return n == 0 ? SumAcc<T>(0) : static_cast<SumAcc<T>>(a / static_cast<SumAcc<T>>(n));
      } else {
        return a / static_cast<SumAcc<T>>(n);  // 0/0 = NaN for an empty set
      }
    });
  } else if constexpr (K == ReduceKind::kMax) {
    ReduceAndFinish(x, plan, MaxOp<T, ExtremeAcc<T>>{}, y, pool, same);
  } else if constexpr (K == ReduceKind::kMin) {
    ReduceAndFinish(x, plan, MinOp<T, ExtremeAcc<T>>{}, y, pool, same);
  } else if constexpr (K == ReduceKind::kProd) {
    ReduceAndFinish(x, plan, ProdOp<T, SumAcc<T>>{}, y, pool, same);
  } else if constexpr (K == ReduceKind::kL1) {
    ReduceAndFinish(x, plan, SumAbsOp<T, SumAcc<T>>{}, y, pool, same);
  } else if constexpr (K == ReduceKind::kSumSquare) {
    ReduceAndFinish(x, plan, SumSquareOp<T, SumAcc<T>>{}, y, pool, same);
  } else if constexpr (K == ReduceKind::kL2) {
    ReduceAndFinish(x, plan, SumSquareOp<T, RealAcc<T>>{}, y, pool, [](RealAcc<T> a, int64_t) { return std::sqrt(a); });
  } else if constexpr (K == ReduceKind::kLogSum) {
    ReduceAndFinish(x, plan, SumOp<T, RealAcc<T>>{}, y, pool, [](RealAcc<T> a, int64_t) { return std::log(a); });
  } else {
    static_assert(K == ReduceKind::kLogSumExp);
    using A = RealAcc<T>;
    std::vector<A> max(static_cast<size_t>(plan.out_count));
    reduce::RunReduce(x, plan, MaxOp<T, A>{}, max.data(), &pool);
    // A non-finite maximum decides the result by itself: +inf, NaN, or -inf (all -inf, or an empty set).
    std::vector<A> shift(max.size());
    for (size_t o = 0; o < max.size(); ++o) shift[o] = std::isfinite(max[o]) ? max[o] : A(0);
    ReduceAndFinish(x, plan, SumExpOp<T, A>{shift.data()}, y, pool,
                    [&max](A a, int64_t o) { return std::isfinite(max[o]) ? std::log(a) + max[o] : max[o]; });
  }
}

template <ReduceKind K>
class ReduceCpu : public exec::OpKernel {
 public:
  ReduceCpu(const exec::KernelInfo& info, Status* st) {
    *st = ParseReduceSpec(info, K == ReduceKind::kSum ? 13 : 18, &spec_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<bool> mask,
                             ResolveReduceMask(spec_, x, spec_.axes_input ? ctx.input(1) : nullptr));
    const reduce::ReducePlan plan = reduce::MakeReducePlan(x->dims(), mask);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y,
                             ctx.AllocateOutput(0, x->dtype(), reduce::ReducedDims(x->dims(), mask, spec_.keepdims)));
    auto run = [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ReduceTyped<K, T>(x->values<T>().data(), plan, y->mutable_values<T>().data(), ctx.threads());
      return Status::Ok();
    };
    if constexpr (K == ReduceKind::kMax || K == ReduceKind::kMin) {
      return DispatchNumericOrBool(x->dtype(), run);
    } else {
      return DispatchNumeric(x->dtype(), run);
    }
  }

 private:
  ReduceSpec spec_;
};

}  // namespace

void RegisterReduceKernels(exec::KernelRegistry& r) {
  using exec::Device;
  using exec::MakeKernel;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                    DType::kInt32,   DType::kInt64,   DType::kUint32,   DType::kUint64};
  std::vector<DType> extreme_types = types;  // ReduceMax/ReduceMin: also 8-bit integers (12+) and bool (20+)
  extreme_types.insert(extreme_types.end(), {DType::kInt8, DType::kUint8, DType::kBool});
  // One kernel per op covers opsets 1-23: it reads axes from the attribute or from input 1 by opset.
  r.Register({"ReduceSum", "", 1, 23, Device::kCpu, types, 0, &MakeKernel<ReduceCpu<ReduceKind::kSum>>});
  r.Register({"ReduceMean", "", 1, 23, Device::kCpu, types, 0, &MakeKernel<ReduceCpu<ReduceKind::kMean>>});
  r.Register({"ReduceMax", "", 1, 23, Device::kCpu, extreme_types, 0, &MakeKernel<ReduceCpu<ReduceKind::kMax>>});
  r.Register({"ReduceMin", "", 1, 23, Device::kCpu, extreme_types, 0, &MakeKernel<ReduceCpu<ReduceKind::kMin>>});
  r.Register({"ReduceProd", "", 1, 23, Device::kCpu, types, 0, &MakeKernel<ReduceCpu<ReduceKind::kProd>>});
  r.Register({"ReduceL1", "", 1, 23, Device::kCpu, types, 0, &MakeKernel<ReduceCpu<ReduceKind::kL1>>});
  r.Register({"ReduceL2", "", 1, 23, Device::kCpu, types, 0, &MakeKernel<ReduceCpu<ReduceKind::kL2>>});
  r.Register({"ReduceSumSquare", "", 1, 23, Device::kCpu, types, 0, &MakeKernel<ReduceCpu<ReduceKind::kSumSquare>>});
  r.Register({"ReduceLogSum", "", 1, 23, Device::kCpu, types, 0, &MakeKernel<ReduceCpu<ReduceKind::kLogSum>>});
  r.Register({"ReduceLogSumExp", "", 1, 23, Device::kCpu, types, 0, &MakeKernel<ReduceCpu<ReduceKind::kLogSumExp>>});
}

}  // namespace onnxamp::ops
