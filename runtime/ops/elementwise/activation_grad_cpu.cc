// EluGrad and GeluGrad (CPU, com.onnxamp): the derivatives of Elu and Gelu times dY, from the forward's input X
// (contracts in runtime/ops/gradient_ops.h). float64 computes in double with the standard library's exp/erf. EluGrad
// computes float types in float with std::exp; GeluGrad computes them with the vectorized FastErf/FastExp of
// elementwise_math.h (a few ulp; the standard library's erfc and exp per element made GeluGrad take 2.3 ms of a
// 10 ms transformer training step), fp16/bf16 widened a block at a time.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/elementwise_math.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

// dX = F(dY, X) elementwise over two inputs of the same float type and shape.
template <typename F>
Status MapGradient(exec::KernelContext& ctx, const F& f) {
  const ir::Tensor* dy = ctx.input(0);
  const ir::Tensor* x = ctx.input(1);
  if (!dy || !x) return InvalidArgument("input ", dy ? 1 : 0, " is missing");
  if (dy->dtype() != x->dtype() || dy->dims() != x->dims()) {
    return InvalidArgument("dY ", DTypeName(dy->dtype()), ShapeToString(dy->dims()), " and X ", DTypeName(x->dtype()),
                           ShapeToString(x->dims()), " must have the same type and shape");
  }
  return DispatchFloat(dy->dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), dy->dims()));
    const auto g = dy->values<T>();
    const auto v = x->values<T>();
    auto out = dx->mutable_values<T>();
    ctx.threads().ParallelFor(static_cast<int64_t>(out.size()), 1 << 12, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = Store<T>(static_cast<C>(Load<T>(g[i]) * f(Load<T>(v[i]))));
    });
    return Status::Ok();
  });
}

using GradArray = void (*)(const float* dy, const float* x, float* dx, int64_t n);

// MapGradient for float64 (per element, `f` in double); float, fp16 and bf16 through `array` (float arrays; the
// 16-bit types widened kBlock elements at a time and dX rounded once).
template <typename F>
Status MapGradientArrays(exec::KernelContext& ctx, GradArray array, const F& f) {
  const ir::Tensor* dy = ctx.input(0);
  const ir::Tensor* x = ctx.input(1);
  if (!dy || !x || dy->dtype() == DType::kFloat64) return MapGradient(ctx, f);
  if (dy->dtype() != x->dtype() || dy->dims() != x->dims()) return MapGradient(ctx, f);  // its error
  return DispatchFloat(dy->dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), dy->dims()));
    const T* g = dy->values<T>().data();
    const T* v = x->values<T>().data();
    T* out = dx->mutable_values<T>().data();
    ParallelRanges(ctx.threads(), dx->num_elements(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>) {
        array(g + begin, v + begin, out + begin, end - begin);
      } else if constexpr (kIsHalfLike<T>) {
        float bg[kBlock], bv[kBlock], bo[kBlock];
        for (int64_t i = begin; i < end; i += kBlock) {
          const int64_t m = std::min(kBlock, end - i);
          LoadBlock(g + i, bg, m);
          LoadBlock(v + i, bv, m);
          array(bg, bv, bo, m);
          StoreBlock(bo, out + i, m);
        }
      }
    });
    return Status::Ok();
  });
}

// Elu: dY where X > 0, else dY * alpha * exp(X) (alpha at 0, as PyTorch).
class EluGradCpu : public exec::OpKernel {
 public:
  EluGradCpu(const exec::KernelInfo& info, Status* st) {
    auto a = FloatAttribute(info.node, "alpha", 1.0f);
    if (!a.ok()) {
      *st = a.status();
    } else {
      alpha_ = *a;
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const double alpha = alpha_;
    return MapGradient(ctx, [alpha](auto x) {
      using C = decltype(x);
      return x > C(0) ? C(1) : static_cast<C>(alpha) * std::exp(x);
    });
  }

 private:
  float alpha_ = 1.0f;
};

// Gelu's derivative. "none": Phi(x) + x phi(x) with Phi the normal CDF and phi its density. "tanh": with
// s = sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), y = x s and y' = s + x s (1 - s) 2u'.
class GeluGradCpu : public exec::OpKernel {
 public:
  GeluGradCpu(const exec::KernelInfo& info, Status* st) {
    auto a = StringAttribute(info.node, "approximate", "none");
    if (!a.ok()) {
      *st = a.status();
    } else if (*a == "tanh") {
      tanh_ = true;
    } else if (*a != "none") {
      *st = InvalidArgument("attribute 'approximate' must be \"none\" or \"tanh\", got \"", *a, "\"");
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    if (tanh_) {
      return MapGradientArrays(ctx, &GeluTanhGradArray, [](auto x) { return GeluTanhGradExact(x); });
    }
    return MapGradientArrays(ctx, &GeluGradArray, [](auto x) {
      using C = decltype(x);
      const C cdf = C(0.5) * std::erfc(-x * C(0.70710678118654752440));
      const C pdf = C(0.39894228040143267794) * std::exp(C(-0.5) * x * x);  // 1/sqrt(2 pi) exp(-x^2/2)
      return cdf + (std::abs(x) < C(40) ? x * pdf : C(0));  // x pdf is 0 beyond 40 (and inf * 0 at +-inf)
    });
  }

 private:
  bool tanh_ = false;
};

}  // namespace

void RegisterActivationGradKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({kEluGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0, &exec::MakeKernel<EluGradCpu>});
  r.Register({kGeluGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0, &exec::MakeKernel<GeluGradCpu>});
}

}  // namespace onnxamp::ops
