// QuantizeLinear and DequantizeLinear (CPU, opsets 10-25) and DynamicQuantizeLinear (11-25).
//
//   QuantizeLinear(x, y_scale, y_zero_point?)   y = saturate(round_half_even(x / y_scale) + y_zero_point)
//   DequantizeLinear(x, x_scale, x_zero_point?) y = (x - x_zero_point) * x_scale
//   DynamicQuantizeLinear(x) -> y (uint8), y_scale, y_zero_point: the uint8 range over [min(x, 0), max(x, 0)]
//
// The scale and zero point are one value (per tensor), a 1-D tensor along `axis` (per axis, opset 13+), or from opset
// 21 a tensor of x's rank whose dim `axis` is ceil(x.dims[axis] / block_size) (blocked). Quantized types: int8, uint8,
// int16 and uint16 (opset 21+), and int32 as DequantizeLinear's input; x, the scale and the output are float, float16
// or bfloat16 (opset 19+; before, float and QuantizeLinear's int32 x). The arithmetic is in float, as ONNX Runtime's:
// x / scale rounded half to even (std::nearbyint), (x - zero_point) * scale. The 8-bit float and 4-bit types are not
// supported (the runtime has no kernels for them). QuantizeLinear's output type is the zero point's, else the
// `output_dtype` attribute (21+), else uint8; DequantizeLinear's is the scale's, else `output_dtype` (23+).
//
// Also the training graphs' com.onnxamp FakeQuantize (a QuantizeLinear -> DequantizeLinear pair as one float op) and
// its FakeQuantizeGrad (runtime/ops/gradient_ops.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/quantize/quant_spec.h"
#include "runtime/ops/quantize/quantized_types.h"

namespace onnxamp::ops {
namespace {

// A float tensor's values as double (float, float16, bfloat16, and double when `allow_double`; int32 too when
// `allow_int32`).
StatusOr<std::vector<double>> FloatValues(const ir::Tensor& t, bool allow_int32, bool allow_double,
                                          const std::string& label) {
  if (allow_int32 && t.dtype() == DType::kInt32) {
    std::vector<double> out(static_cast<size_t>(t.num_elements()));
    auto v = t.values<int32_t>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(v[i]);
    return out;
  }
  ONNXAMP_RETURN_IF_ERROR(CheckQuantFloatType(t, allow_int32, allow_double, label));
  return reduce::ReadParam(&t, t.num_elements(), label);
}

// Calls f(o, a, i, k) for every element, k its flat index, in parallel over the outer dims.
template <typename F>
void ForEachQuantElement(exec::ThreadPool& pool, const QuantLayout& l, int64_t n, F&& f) {
  if (l.per_tensor) {
    ParallelRanges(pool, n, kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) f(0, 0, 0, k);
    });
    return;
  }
  ParallelRanges(pool, l.outer * l.dim, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, l.inner)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t r = b; r < e; ++r) {
                     const int64_t o = r / l.dim, a = r % l.dim;
                     for (int64_t i = 0; i < l.inner; ++i) f(o, a, i, r * l.inner + i);
                   }
                 });
}

class QuantizeLinearCpu : public exec::OpKernel {
 public:
  QuantizeLinearCpu(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "x"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* scale, RequireInput(ctx, 1, "y_scale"));
    const ir::Tensor* zp = ctx.input(2);
    ONNXAMP_ASSIGN_OR_RETURN(QuantLayout l, spec_.Layout(ctx, *x, *scale, zp));
    ONNXAMP_ASSIGN_OR_RETURN(const DType out, QuantizeOutputType(ctx, spec_.output_dtype(), zp));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> xd, FloatValues(*x, true, false, InputLabel(ctx, 0, "x")));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> sd, FloatValues(*scale, false, false, InputLabel(ctx, 1, "y_scale")));
    // In float, as ONNX Runtime computes (an int32 x beyond 2^24 rounds to float first).
    const std::vector<float> xs(xd.begin(), xd.end()), s(sd.begin(), sd.end());
    for (size_t k = 0; k < s.size(); ++k) {
      if (!(s[k] != 0.0f) || !std::isfinite(s[k])) {
        return InvalidArgument(InputLabel(ctx, 1, "y_scale"), " holds ", s[k], " at ", k,
                               ": a scale must be finite and non-zero");
      }
    }
    return DispatchQuantized(out, false, "the output type", [&](auto tag) -> Status {
      using Q = typename decltype(tag)::type;
      std::vector<float> z(s.size(), 0.0f);
      if (zp) {
        auto zv = zp->values<Q>();
        for (size_t k = 0; k < z.size(); ++k) z[k] = static_cast<float>(zv[k]);
      }
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, out, x->dims()));
      Q* py = y->mutable_values<Q>().data();
      constexpr float lo = static_cast<float>(std::numeric_limits<Q>::min());
      constexpr float hi = static_cast<float>(std::numeric_limits<Q>::max());
      ForEachQuantElement(ctx.threads(), l, x->num_elements(), [&](int64_t o, int64_t a, int64_t i, int64_t k) {
        const int64_t q = l.ScaleIndex(o, a, i);
        // NaN gives the type's lowest value, as ONNX Runtime's does.
        const float v =
            std::nearbyint(xs[static_cast<size_t>(k)] / s[static_cast<size_t>(q)]) + z[static_cast<size_t>(q)];
        py[k] = static_cast<Q>(std::isnan(v) ? lo : std::clamp(v, lo, hi));
      });
      return Status::Ok();
    });
  }

 private:
  QuantSpec spec_;
};

class DequantizeLinearCpu : public exec::OpKernel {
 public:
  DequantizeLinearCpu(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "x"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* scale, RequireInput(ctx, 1, "x_scale"));
    const ir::Tensor* zp = ctx.input(2);
    ONNXAMP_RETURN_IF_ERROR(CheckDequantizeZeroPoint(ctx, *x, zp));
    ONNXAMP_ASSIGN_OR_RETURN(QuantLayout l, spec_.Layout(ctx, *x, *scale, zp));
    ONNXAMP_ASSIGN_OR_RETURN(const DType out, DequantizeOutputType(spec_.output_dtype(), *scale));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> s, FloatValues(*scale, false, true, InputLabel(ctx, 1, "x_scale")));
    return DispatchQuantized(x->dtype(), true, InputLabel(ctx, 0, "x"), [&](auto tag) -> Status {
      using Q = typename decltype(tag)::type;
      std::vector<double> z(s.size(), 0.0);
      if (zp) {
        auto zv = zp->values<Q>();
        for (size_t k = 0; k < z.size(); ++k) z[k] = static_cast<double>(zv[k]);
      }
      const Q* px = x->values<Q>().data();
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, out, x->dims()));
      return DispatchFloat(out, [&](auto otag) -> Status {
        using T = typename decltype(otag)::type;
        using C = ComputeType<T>;  // float for float, float16 and bfloat16, as ONNX Runtime computes
        T* py = y->mutable_values<T>().data();
        ForEachQuantElement(ctx.threads(), l, x->num_elements(), [&](int64_t o, int64_t a, int64_t i, int64_t k) {
          const size_t q = static_cast<size_t>(l.ScaleIndex(o, a, i));
          py[k] = Store<T>((static_cast<C>(px[k]) - static_cast<C>(z[q])) * static_cast<C>(s[q]));
        });
        return Status::Ok();
      });
    });
  }

 private:
  QuantSpec spec_;
};

class DynamicQuantizeLinearCpu : public exec::OpKernel {
 public:
  DynamicQuantizeLinearCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "x"));
    const std::string label = InputLabel(ctx, 0, "x");
    if (x->dtype() != DType::kFloat32) return InvalidArgument(label, " is ", DTypeName(x->dtype()), ", expected float");
    const auto v = x->values<float>();
    // The range always holds 0, so that 0 is exact.
    float lo = 0.0f, hi = 0.0f;
    for (size_t k = 0; k < v.size(); ++k) {
      if (!std::isfinite(v[k])) return InvalidArgument(label, " holds ", v[k], " at ", k, ": its range is undefined");
      lo = std::min(lo, v[k]);
      hi = std::max(hi, v[k]);
    }
    // An all-zero (or empty) x gets scale 1, as ONNX Runtime gives it: a usable scale, and y and the zero point 0.
    const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    const float zero = std::clamp(std::nearbyint(-lo / scale), 0.0f, 255.0f);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kUint8, x->dims()));
    uint8_t* py = y->mutable_values<uint8_t>().data();
    const float* px = v.data();
    ParallelRanges(ctx.threads(), x->num_elements(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        py[k] = static_cast<uint8_t>(std::clamp(std::nearbyint(px[k] / scale) + zero, 0.0f, 255.0f));
      }
    });
    if (ctx.num_outputs() > 1 && ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * s, ctx.AllocateOutput(1, DType::kFloat32, {}));
      s->mutable_values<float>()[0] = scale;
    }
    if (ctx.num_outputs() > 2 && ctx.output_requested(2)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * z, ctx.AllocateOutput(2, DType::kUint8, {}));
      z->mutable_values<uint8_t>()[0] = static_cast<uint8_t>(zero);
    }
    return Status::Ok();
  }
};

// The zero point's values as float (0 without one); a zero point must be one of the quantized types.
StatusOr<std::vector<float>> ZeroPoints(const exec::KernelContext& ctx, size_t input, size_t count) {
  std::vector<float> z(count, 0.0f);
  const ir::Tensor* zp = ctx.input(input);
  if (!zp) return z;
  ONNXAMP_RETURN_IF_ERROR(DispatchQuantized(zp->dtype(), false, InputLabel(ctx, input, "zero_point"), [&](auto tag) {
    using Q = typename decltype(tag)::type;
    auto zv = zp->values<Q>();
    for (size_t k = 0; k < count; ++k) z[k] = static_cast<float>(zv[zv.size() == 1 ? 0 : k]);
    return Status::Ok();
  }));
  return z;
}

// The values of FakeQuantize's scale (input `input`), each finite and non-zero.
StatusOr<std::vector<double>> CheckedScales(const exec::KernelContext& ctx, size_t input, const ir::Tensor& scale) {
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> s, FloatValues(scale, false, true, InputLabel(ctx, input, "scale")));
  for (size_t k = 0; k < s.size(); ++k) {
    if (!(s[k] != 0.0) || !std::isfinite(s[k])) {
      return InvalidArgument(InputLabel(ctx, input, "scale"), " holds ", s[k], " at ", k,
                             ": a scale must be finite and non-zero");
    }
  }
  return s;
}

// com.onnxamp FakeQuantize (runtime/ops/gradient_ops.h): QuantizeLinear's arithmetic (in float; in double for double
// x), then DequantizeLinear's, on the same scale and zero point.
class FakeQuantizeCpu : public exec::OpKernel {
 public:
  FakeQuantizeCpu(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "x"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* scale, RequireInput(ctx, 1, "scale"));
    ONNXAMP_ASSIGN_OR_RETURN(QuantLayout l, spec_.Layout(ctx, 0, *x, *scale));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> s, CheckedScales(ctx, 1, *scale));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<float> z, ZeroPoints(ctx, 2, s.size()));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* px = x->values<T>().data();
      T* py = y->mutable_values<T>().data();
      const C lo = static_cast<C>(spec_.qmin()), hi = static_cast<C>(spec_.qmax());
      ForEachQuantElement(ctx.threads(), l, x->num_elements(), [&](int64_t o, int64_t a, int64_t i, int64_t k) {
        const size_t q = static_cast<size_t>(l.ScaleIndex(o, a, i));
        const C sc = static_cast<C>(s[q]), zc = static_cast<C>(z[q]);
        const C v = std::nearbyint(static_cast<C>(px[k]) / sc) + zc;
        py[k] = Store<T>(((std::isnan(v) ? lo : std::clamp(v, lo, hi)) - zc) * sc);
      });
      return Status::Ok();
    });
  }

 private:
  FakeQuantSpec spec_;
};

// com.onnxamp FakeQuantizeGrad (runtime/ops/gradient_ops.h).
class FakeQuantizeGradCpu : public exec::OpKernel {
 public:
  FakeQuantizeGradCpu(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 1, "x"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* scale, RequireInput(ctx, 2, "scale"));
    if (dy->dims() != x->dims() || dy->dtype() != x->dtype()) {
      return InvalidArgument(InputLabel(ctx, 0, "dY"), " is ", DTypeName(dy->dtype()), " ", ShapeToString(dy->dims()),
                             ", expected x's ", DTypeName(x->dtype()), " ", ShapeToString(x->dims()));
    }
    ONNXAMP_ASSIGN_OR_RETURN(QuantLayout l, spec_.Layout(ctx, 1, *x, *scale));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> s, CheckedScales(ctx, 2, *scale));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<float> z, ZeroPoints(ctx, 3, s.size()));
    const bool want_dx = ctx.output_requested(0);
    const bool want_ds = ctx.num_outputs() > 1 && ctx.output_requested(1);
    ir::Tensor* dx = nullptr;
    if (want_dx) {
      ONNXAMP_ASSIGN_OR_RETURN(dx, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    }
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* px = x->values<T>().data();
      const T* pdy = dy->values<T>().data();
      T* pdx = dx ? dx->mutable_values<T>().data() : nullptr;
      const C lo = static_cast<C>(spec_.qmin()), hi = static_cast<C>(spec_.qmax());
      // Per scale, its sum (double, in element order within each scale's elements, so that it is deterministic).
      std::vector<double> ds(s.size(), 0.0);
      auto element = [&](size_t q, int64_t k) -> double {
        const C sc = static_cast<C>(s[q]), zc = static_cast<C>(z[q]);
        const C xs = static_cast<C>(px[k]) / sc;
        const C v = std::nearbyint(xs) + zc;
        const bool inside = v >= lo && v <= hi;
        if (pdx) pdx[k] = inside ? pdy[k] : Store<T>(C(0));
        if (!want_ds || std::isnan(v)) return 0.0;
        const double g = static_cast<double>(static_cast<C>(pdy[k]));
        if (inside) return g * (static_cast<double>(v - zc) - static_cast<double>(xs));
        return g * static_cast<double>((v < lo ? lo : hi) - zc);
      };
      if (l.per_tensor) {
        // Ranges summed on their own, then in range order.
        const int64_t n = x->num_elements();
        const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(64, n / kElementwiseGrain));
        std::vector<double> part(static_cast<size_t>(chunks), 0.0);
        ParallelRanges(ctx.threads(), chunks, 1, [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c) {
            double sum = 0;
            for (int64_t k = n * c / chunks; k < n * (c + 1) / chunks; ++k) sum += element(0, k);
            part[static_cast<size_t>(c)] = sum;
          }
        });
        for (double p : part) ds[0] += p;
      } else {
        // Per axis: each scale's elements in one range of the axis.
        ParallelRanges(ctx.threads(), l.dim, 1, [&](int64_t b, int64_t e) {
          for (int64_t a = b; a < e; ++a) {
            double sum = 0;
            for (int64_t o = 0; o < l.outer; ++o) {
              for (int64_t i = 0; i < l.inner; ++i)
                sum += element(static_cast<size_t>(a), (o * l.dim + a) * l.inner + i);
            }
            ds[static_cast<size_t>(a)] = sum;
          }
        });
      }
      if (want_ds) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dscale, ctx.AllocateOutput(1, scale->dtype(), scale->dims()));
        T* pds = dscale->mutable_values<T>().data();
        for (size_t q = 0; q < ds.size(); ++q) pds[q] = Store<T>(static_cast<C>(ds[q]));
      }
      return Status::Ok();
    });
  }

 private:
  FakeQuantSpec spec_;
};

}  // namespace

void RegisterQuantizeKernels(exec::KernelRegistry& r) {
  r.Register({"QuantizeLinear", "", 10, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<QuantizeLinearCpu>});
  r.Register({"DequantizeLinear", "", 10, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<DequantizeLinearCpu>});
  r.Register(
      {"DynamicQuantizeLinear", "", 11, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<DynamicQuantizeLinearCpu>});
  r.Register(
      {kFakeQuantizeOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, {}, 0, &exec::MakeKernel<FakeQuantizeCpu>});
  r.Register({kFakeQuantizeGradOp,
              exec::kInternalDomain,
              1,
              1,
              exec::Device::kCpu,
              {},
              0,
              &exec::MakeKernel<FakeQuantizeGradCpu>});
}

}  // namespace onnxamp::ops
