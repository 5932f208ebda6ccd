// The integer and QLinear ops of quantized models (CPU): MatMulInteger and ConvInteger (opsets 10-25), QLinearMatMul
// and QLinearConv (10-25), as ONNX Runtime's quantizer writes them (its QOperator format and dynamic quantization).
//
//   MatMulInteger(A, B, a_zero_point?, b_zero_point?) -> int32 (A - a_zp) x (B - b_zp), numpy matmul batching;
//     a_zp per tensor or per row of A ([M]), b_zp per tensor or per column of B ([N]).
//   ConvInteger(x, w, x_zero_point?, w_zero_point?) -> int32 conv(x - x_zp, w - w_zp); w_zp per tensor or per output
//     channel ([M]). Conv's attributes.
//   QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp) and QLinearConv(x, x_scale, x_zp, w, w_scale,
//     w_zp, y_scale, y_zp, B?) -> requantized: y = saturate(round_half_even(float(acc) * s) + y_zp), with acc the
//     integer product (plus QLinearConv's int32 bias) and s = a_scale * b_scale / y_scale in float per row/column
//     (QLinearConv: per output channel), as ONNX Runtime computes it.
//
// The products run on the double GEMM core (im2col for the convolutions): every product of 8- or 16-bit integers and
// every sum below 2^53 is exact in double, so the integer results are exact. int8 and uint8 operands (each operand's
// zero point of its type).
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/gemm_util.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/conv/conv_kernels.h"
#include "runtime/ops/matmul/fused_matmul.h"
#include "runtime/ops/quantize/qlinear.h"

namespace onnxamp::ops {
namespace {

// An 8-bit operand minus its zero point, as double. The zero point (same type) is one value, or `groups` values
// applied to consecutive runs of `run` elements cycling every groups * run elements (rows of A: run K, groups M;
// output channels of w: run C/g*k, groups M), or per column (`per_column`: element j % groups).
struct ZeroPoint {
  std::vector<double> values = {0.0};
};

StatusOr<ZeroPoint> ReadZeroPoint(const exec::KernelContext& ctx, size_t i, const char* role, DType operand,
                                  int64_t per_axis) {
  ZeroPoint z;
  const ir::Tensor* t = ctx.input(i);
  if (t == nullptr) return z;
  ONNXAMP_RETURN_IF_ERROR(CheckIntegerZeroPoint(ctx, i, role, operand, per_axis));
  const int64_t n = t->num_elements();
  z.values.resize(static_cast<size_t>(n));
  if (operand == DType::kInt8) {
    for (int64_t k = 0; k < n; ++k) z.values[static_cast<size_t>(k)] = t->values<int8_t>()[k];
  } else {
    for (int64_t k = 0; k < n; ++k) z.values[static_cast<size_t>(k)] = t->values<uint8_t>()[k];
  }
  return z;
}

// t - zero point as a double tensor of t's shape; the zero point of element e is zp[(e / run) % groups] (one value:
// groups 1).
ir::Tensor Centered(const ir::Tensor& t, const ZeroPoint& zp, int64_t run) {
  ir::Tensor centered(DType::kFloat64, t.dims());
  double* out = centered.mutable_values<double>().data();
  const int64_t groups = static_cast<int64_t>(zp.values.size());
  for (int64_t e = 0; e < t.num_elements(); ++e) {
    const double v = t.dtype() == DType::kInt8 ? t.values<int8_t>()[e] : t.values<uint8_t>()[e];
    out[e] = v - zp.values[static_cast<size_t>(groups == 1 ? 0 : (e / run) % groups)];
  }
  return centered;
}

// A float scale input: one value or `per_axis` values (float; float16 and bfloat16 from opset 21), as float, each
// finite.
StatusOr<std::vector<float>> ReadScale(const exec::KernelContext& ctx, size_t i, const char* role, int64_t per_axis) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* t, CheckQLinearScale(ctx, i, role, per_axis));
  const std::string label = InputLabel(ctx, i, role);
  const int64_t n = t->num_elements();
  std::vector<float> out(static_cast<size_t>(n));
  ONNXAMP_RETURN_IF_ERROR(DispatchFloat(t->dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    for (int64_t k = 0; k < n; ++k) out[static_cast<size_t>(k)] = static_cast<float>(Load(t->values<T>()[k]));
    return Status::Ok();
  }));
  for (float s : out) {
    if (!std::isfinite(s)) return InvalidArgument(label, " holds ", s, ": a scale must be finite");
  }
  return out;
}

// Writes acc (double, exact integers) as int32 (wrapping as a 32-bit accumulator would past its range).
void StoreInt32(const std::vector<double>& acc, ir::Tensor& y) {
  int32_t* out = y.mutable_values<int32_t>().data();
  for (size_t e = 0; e < acc.size(); ++e) {
    out[e] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(acc[e])));
  }
}

// Requantizes acc into y (int8 or uint8): round_half_even(float(acc) * scale) + zero point, saturated. The scale of
// element e is scales[(e / run) % groups] or, with `per_column`, scales[e % groups].
Status Requantize(const std::vector<double>& acc, const std::vector<float>& scales, int64_t run, bool per_column,
                  const ir::Tensor& zero_point, ir::Tensor& y) {
  const int64_t groups = static_cast<int64_t>(scales.size());
  auto scale_of = [&](int64_t e) {
    if (groups == 1) return scales[0];
    return scales[static_cast<size_t>(per_column ? e % groups : (e / run) % groups)];
  };
  auto write = [&](auto* out, double zp, double lo, double hi) {
    for (size_t e = 0; e < acc.size(); ++e) {
      const float v = std::nearbyint(static_cast<float>(static_cast<int32_t>(static_cast<int64_t>(acc[e]))) *
                                     scale_of(static_cast<int64_t>(e)));
      const double q = std::isnan(v) ? lo : std::min(std::max(static_cast<double>(v) + zp, lo), hi);
      out[e] = static_cast<std::remove_pointer_t<decltype(out)>>(q);
    }
  };
  if (y.dtype() == DType::kInt8) {
    write(y.mutable_values<int8_t>().data(), zero_point.values<int8_t>()[0], -128.0, 127.0);
  } else {
    write(y.mutable_values<uint8_t>().data(), zero_point.values<uint8_t>()[0], 0.0, 255.0);
  }
  return Status::Ok();
}

// The integer product of two centered operands on the double GEMM core: a [.., M, K] x b [.., K, N].
Status IntegerMatMul(const GemmRunner& gemm, exec::ThreadPool& threads, const MatMulShapes& s, const ir::Tensor& a,
                     const ir::Tensor& b, std::vector<double>* y) {
  y->assign(static_cast<size_t>(s.batch.count * s.m * s.n), 0.0);
  GemmArgs<double> g;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = a.values<double>().data();
  g.b = b.values<double>().data();
  g.c = y->data();
  return RunBroadcastBatch(gemm, threads, g, s.batch);
}

class MatMulIntegerCpu : public exec::OpKernel {
 public:
  MatMulIntegerCpu(const exec::KernelInfo& info, Status*)
      : qlinear_(info.node.op_type() == "QLinearMatMul"), gemm_(LinalgImplFor(info)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    // QLinearMatMul: a 0, a_scale 1, a_zp 2, b 3, b_scale 4, b_zp 5, y_scale 6, y_zp 7; MatMulInteger: A 0, B 1,
    // a_zp 2, b_zp 3.
    const size_t ia = 0, ib = qlinear_ ? 3 : 1, iaz = 2, ibz = qlinear_ ? 5 : 3;
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* a, RequireInput(ctx, ia, "A"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* b, RequireInput(ctx, ib, "B"));
    ONNXAMP_RETURN_IF_ERROR(CheckEightBit(ctx, ia, "A"));
    ONNXAMP_RETURN_IF_ERROR(CheckEightBit(ctx, ib, "B"));
    ONNXAMP_ASSIGN_OR_RETURN(MatMulShapes s, PlanMatMulShapes(a->dims(), b->dims(), false, false));
    ONNXAMP_ASSIGN_OR_RETURN(ZeroPoint az, ReadZeroPoint(ctx, iaz, "a_zero_point", a->dtype(), s.m));
    ONNXAMP_ASSIGN_OR_RETURN(ZeroPoint bz, ReadZeroPoint(ctx, ibz, "b_zero_point", b->dtype(), s.n));
    // A's zero point per row: runs of K; B's per column: element j of a row of N (runs of 1 cycling every N).
    std::vector<double> acc;
    ONNXAMP_RETURN_IF_ERROR(IntegerMatMul(gemm_, ctx.threads(), s, Centered(*a, az, s.k), Centered(*b, bz, 1), &acc));
    if (!qlinear_) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kInt32, s.out_dims));
      StoreInt32(acc, *y);
      return Status::Ok();
    }
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<float> as, ReadScale(ctx, 1, "a_scale", s.m));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<float> bs, ReadScale(ctx, 4, "b_scale", s.n));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<float> ys, ReadScale(ctx, 6, "y_scale", 1));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* yz, OutputZeroPoint(ctx));
    if (as.size() > 1 && bs.size() > 1) {
      return Unimplemented("per-row a_scale and per-column b_scale together are not supported");
    }
    // a_scale * b_scale / y_scale per row (runs of N) or per column.
    const bool per_column = bs.size() > 1;
    std::vector<float> scales(std::max(as.size(), bs.size()));
    for (size_t k = 0; k < scales.size(); ++k) {
      scales[k] = as[as.size() > 1 ? k : 0] * bs[bs.size() > 1 ? k : 0] / ys[0];
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, yz->dtype(), s.out_dims));
    return Requantize(acc, scales, s.n, per_column, *yz, *y);
  }

 private:
  bool qlinear_;
  GemmRunner gemm_;
};

}  // namespace

StatusOr<ConvIntegerPlan> ResolveConvInteger(const exec::KernelContext& ctx, const WindowAttrs& attrs, int64_t group,
                                             bool qlinear) {
  // QLinearConv: x 0, x_scale 1, x_zp 2, w 3, w_scale 4, w_zp 5, y_scale 6, y_zp 7, B 8; ConvInteger: x 0, w 1,
  // x_zp 2, w_zp 3.
  const size_t ix = 0, iw = qlinear ? 3 : 1, ixz = 2, iwz = qlinear ? 5 : 3;
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, ix, "x"));
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* w, RequireInput(ctx, iw, "w"));
  ONNXAMP_RETURN_IF_ERROR(CheckEightBit(ctx, ix, "x"));
  ONNXAMP_RETURN_IF_ERROR(CheckEightBit(ctx, iw, "w"));
  if (w->rank() < 1 || w->dims()[0] < 1) {
    return InvalidArgument(InputLabel(ctx, iw, "w"), " has shape ", ShapeToString(w->dims()),
                           ", expected [M, C/group, k...]");
  }
  const int64_t m = w->dims()[0];
  ConvIntegerPlan p;
  ONNXAMP_ASSIGN_OR_RETURN(ZeroPoint xz, ReadZeroPoint(ctx, ixz, "x_zero_point", x->dtype(), 1));
  ONNXAMP_ASSIGN_OR_RETURN(ZeroPoint wz, ReadZeroPoint(ctx, iwz, "w_zero_point", w->dtype(), m));
  p.x_zero_point = std::move(xz.values);
  p.w_zero_point = std::move(wz.values);
  // Conv's shape checks on the operands' dims (as the centered float64 tensors the products take).
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor xd, ir::Tensor::WithoutData(DType::kFloat64, x->dims()));
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor wd, ir::Tensor::WithoutData(DType::kFloat64, w->dims()));
  ONNXAMP_ASSIGN_OR_RETURN(p.shape, CheckConvInputs(&xd, &wd, nullptr, attrs, group, false));
  ONNXAMP_ASSIGN_OR_RETURN(p.geo, ForwardGeometry(attrs, p.shape.in, p.shape.kernel));
  p.out_dims = {p.shape.n, p.shape.m};
  p.out_dims.insert(p.out_dims.end(), p.geo.out.begin(), p.geo.out.end());
  if (!qlinear) return p;
  if (const ir::Tensor* b = ctx.input(8)) {
    if (b->dtype() != DType::kInt32 || b->rank() != 1 || b->dims()[0] != p.shape.m) {
      return InvalidArgument(InputLabel(ctx, 8, "B"), " must be int32 [", p.shape.m, "], got ", DTypeName(b->dtype()),
                             " ", ShapeToString(b->dims()));
    }
    for (int32_t v : b->values<int32_t>()) p.bias.push_back(v);
  }
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<float> xsc, ReadScale(ctx, 1, "x_scale", 1));
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<float> wsc, ReadScale(ctx, 4, "w_scale", p.shape.m));
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<float> ysc, ReadScale(ctx, 6, "y_scale", 1));
  ONNXAMP_ASSIGN_OR_RETURN(p.y_zero_point, OutputZeroPoint(ctx));
  p.scales.resize(wsc.size());
  for (size_t k = 0; k < p.scales.size(); ++k) p.scales[k] = xsc[0] * wsc[k] / ysc[0];
  return p;
}

namespace {

class ConvIntegerCpu : public exec::OpKernel {
 public:
  ConvIntegerCpu(const exec::KernelInfo& info, Status* st)
      : qlinear_(info.node.op_type() == "QLinearConv"), gemm_(LinalgImplFor(info)) {
    *st = ParseConvAttrs(info.node, /*transpose=*/false, &attrs_, &group_, nullptr);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ConvIntegerPlan plan, ResolveConvInteger(ctx, attrs_, group_, qlinear_));
    const ir::Tensor* x = ctx.input(0);
    const ir::Tensor* w = ctx.input(qlinear_ ? 3 : 1);
    const ConvShape& shape = plan.shape;
    // The operands minus their zero points in double (w's per output channel: runs of C/group * k).
    const ir::Tensor xd = Centered(*x, ZeroPoint{plan.x_zero_point}, 1);
    const ir::Tensor wd = Centered(*w, ZeroPoint{plan.w_zero_point}, w->num_elements() / shape.m);
    ConvProblem p{shape.n, shape.c, shape.m, shape.group, plan.geo};
    std::vector<double> acc(static_cast<size_t>(p.n * p.m * p.geo.out_size()));
    ONNXAMP_RETURN_IF_ERROR(ConvForwardGemm<double>(gemm_, ctx.threads(), p, xd.values<double>().data(),
                                                    wd.values<double>().data(),
                                                    plan.bias.empty() ? nullptr : plan.bias.data(), acc.data()));
    if (!qlinear_) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kInt32, plan.out_dims));
      StoreInt32(acc, *y);
      return Status::Ok();
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, plan.y_zero_point->dtype(), plan.out_dims));
    // Per output channel: runs of one output plane, cycling every M planes.
    return Requantize(acc, plan.scales, p.geo.out_size(), false, *plan.y_zero_point, *y);
  }

 private:
  bool qlinear_;
  WindowAttrs attrs_;
  int64_t group_ = 1;
  GemmRunner gemm_;
};

}  // namespace

void RegisterQLinearKernels(exec::KernelRegistry& r) {
  for (const char* op : {"MatMulInteger", "QLinearMatMul"}) {
    r.Register({op, "", 10, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<MatMulIntegerCpu>});
  }
  for (const char* op : {"ConvInteger", "QLinearConv"}) {
    r.Register({op, "", 10, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ConvIntegerCpu>});
  }
}

}  // namespace onnxamp::ops
