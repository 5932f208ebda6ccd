// Conv (CPU): N-d convolution of X [N, C, D1..Dn] with W [M, C/group, k1..kn] plus an optional bias [M]; strides,
// dilations, explicit pads or auto_pad (SAME_UPPER, SAME_LOWER, VALID), groups. Three implementations of the
// same contract: the plain loop (reference), im2col + the portable GEMM, and oneDNN's convolution (1 to 3 spatial
// dims). fp16/bf16 compute with FP32 accumulation and one rounding on store: bf16 goes to oneDNN as it is where the
// CPU supports it (the products are exact in float), otherwise the inputs are converted to float (F16C where the
// CPU has it); constant weights and bias are converted once and kept.
//
// The same kernel runs the session's FusedConv (internal domain, made by the graph optimizer from Conv [+ Add]
// [+ Relu]): Y = activation(conv(X, W) + B + Z), with an optional fourth input Z (the residual of a following Add;
// broadcast like Add when its shape differs) and attribute `activation` ("Relu" or empty). With oneDNN the sum and
// the ReLU run as post-ops of the convolution primitive; the other implementations apply them after the convolution.
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/conv_onednn.h"
#include "runtime/ops/common/elementwise_half.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_util.h"
#include "runtime/ops/conv/conv_kernels.h"

namespace onnxamp::ops {
namespace {

// im2col for one image and group: cols[(ic * k_size + ki) * out_size + oi] = the input under kernel position ki
// of output position oi (0 in the padding).
template <typename F>
void Im2Col(const ConvProblem& p, const F* x, F* cols, exec::ThreadPool& threads) {
  const WindowGeometry& g = p.geo;
  const size_t nsp = g.rank();
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.kernel_size();
  const int64_t cg = p.c / p.group;
  const int64_t last_out = g.out[nsp - 1], outer_out = out_size / last_out;
  const int64_t s_last = g.stride[nsp - 1], d_last = g.dilation[nsp - 1], p_last = g.pad_begin[nsp - 1];
  const int64_t in_last = g.in[nsp - 1];
  threads.ParallelFor(cg * k_size, 4, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> kk(nsp), o(nsp);
    for (int64_t row = begin; row < end; ++row) {
      const int64_t ic = row / k_size, ki = row % k_size;
      UnravelIndex(ki, g.kernel, kk);
      const F* xc = x + ic * in_size;
      F* dst = cols + row * out_size;
      for (int64_t outer = 0; outer < outer_out; ++outer) {
        // The leading spatial dims of this output row.
        UnravelIndex(outer * last_out, g.out, o);
        int64_t offset = 0;
        bool inside = true;
        for (size_t d = 0; d + 1 < nsp; ++d) {
          const int64_t pos = o[d] * g.stride[d] - g.pad_begin[d] + kk[d] * g.dilation[d];
          inside = inside && pos >= 0 && pos < g.in[d];
          offset = offset * g.in[d] + pos;
        }
        F* drow = dst + outer * last_out;
        if (!inside) {
          std::fill(drow, drow + last_out, F(0));
          continue;
        }
        const F* xrow = xc + offset * in_last;
        const int64_t shift = kk[nsp - 1] * d_last - p_last;
        for (int64_t ow = 0; ow < last_out; ++ow) {
          const int64_t pos = ow * s_last + shift;
          drow[ow] = pos >= 0 && pos < in_last ? xrow[pos] : F(0);
        }
      }
    }
  });
}

}  // namespace

// The plain loop: every output element sums over its group's input channels and the kernel window, skipping
// positions in the padding.
template <typename T>
void ConvForwardReference(const ConvProblem& p, const T* x, const T* w, const T* b, T* y) {
  const WindowGeometry& g = p.geo;
  const size_t nsp = g.rank();
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.kernel_size();
  const int64_t cg = p.c / p.group, mg = p.m / p.group;
  std::vector<int64_t> o(nsp), kk(nsp);
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t oc = 0; oc < p.m; ++oc) {
      const int64_t grp = oc / mg;
      for (int64_t oi = 0; oi < out_size; ++oi) {
        UnravelIndex(oi, g.out, o);
        AccumType<T> sum = 0;
        for (int64_t ic = 0; ic < cg; ++ic) {
          const T* xc = x + (n * p.c + grp * cg + ic) * in_size;
          const T* wc = w + (oc * cg + ic) * k_size;
          for (int64_t ki = 0; ki < k_size; ++ki) {
            UnravelIndex(ki, g.kernel, kk);
            int64_t offset = 0;
            bool inside = true;
            for (size_t d = 0; d < nsp && inside; ++d) {
              const int64_t pos = o[d] * g.stride[d] - g.pad_begin[d] + kk[d] * g.dilation[d];
              inside = pos >= 0 && pos < g.in[d];
              offset = offset * g.in[d] + pos;
            }
            if (inside) sum += LoadAccum(xc[offset]) * LoadAccum(wc[ki]);
          }
        }
        if (b) sum += LoadAccum(b[oc]);
        y[(n * p.m + oc) * out_size + oi] = StoreAccum<T>(sum);
      }
    }
  }
}

// im2col + GEMM, float or double.
template <typename F>
Status ConvForwardGemm(const GemmRunner& gemm, exec::ThreadPool& threads, const ConvProblem& p, const F* x, const F* w,
                       const F* b, F* y) {
  const WindowGeometry& g = p.geo;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.kernel_size();
  const int64_t cg = p.c / p.group, mg = p.m / p.group;
  bool direct = k_size == 1;  // a 1x1 convolution without stride or padding reads X as it is
  for (size_t d = 0; d < g.rank(); ++d) {
    direct = direct && g.stride[d] == 1 && g.pad_begin[d] == 0 && g.pad_end[d] == 0;
  }
  // One image after another with the GEMM (and im2col) split over the threads; or, with at least as many images
  // as threads, whole images in parallel (the nested loops then run on their own thread).
  auto image = [&](int64_t n, std::vector<F>& cols) -> Status {
    cols.resize(direct ? 0 : static_cast<size_t>(cg * k_size * out_size));
    for (int64_t grp = 0; grp < p.group; ++grp) {
      const F* xg = x + (n * p.c + grp * cg) * in_size;
      if (!direct) Im2Col(p, xg, cols.data(), threads);
      GemmArgs<F> args;
      args.m = mg;
      args.n = out_size;
      args.k = cg * k_size;
      args.a = w + grp * mg * cg * k_size;
      args.b = direct ? xg : cols.data();
      args.c = y + (n * p.m + grp * mg) * out_size;
      SetDenseLayout(args);
      if (b) {
        for (int64_t oc = 0; oc < mg; ++oc) std::fill_n(args.c + oc * out_size, out_size, b[grp * mg + oc]);
        args.beta = 1;
      }
      ONNXAMP_RETURN_IF_ERROR(gemm.Run(args, threads));
    }
    return Status::Ok();
  };
  if (p.n < threads.num_threads()) {
    std::vector<F> cols;
    for (int64_t n = 0; n < p.n; ++n) ONNXAMP_RETURN_IF_ERROR(image(n, cols));
    return Status::Ok();
  }
  std::mutex mu;
  Status first;
  threads.ParallelFor(p.n, 1, [&](int64_t begin, int64_t end) {
    std::vector<F> cols;
    for (int64_t n = begin; n < end; ++n) {
      Status st = image(n, cols);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first.ok()) first = std::move(st);
      }
    }
  });
  return first;
}

template void ConvForwardReference<float>(const ConvProblem&, const float*, const float*, const float*, float*);
template void ConvForwardReference<double>(const ConvProblem&, const double*, const double*, const double*, double*);
template void ConvForwardReference<Float16>(const ConvProblem&, const Float16*, const Float16*, const Float16*,
                                            Float16*);
template void ConvForwardReference<BFloat16>(const ConvProblem&, const BFloat16*, const BFloat16*, const BFloat16*,
                                             BFloat16*);
template Status ConvForwardGemm<float>(const GemmRunner&, exec::ThreadPool&, const ConvProblem&, const float*,
                                       const float*, const float*, float*);
template Status ConvForwardGemm<double>(const GemmRunner&, exec::ThreadPool&, const ConvProblem&, const double*,
                                        const double*, const double*, double*);

namespace {

// Y = act(Y + Z) in T's compute type, Z of Y's shape (or null), act = ReLU or nothing.
template <typename T>
void Epilogue(const T* z, bool relu, T* y, int64_t count, exec::ThreadPool& threads) {
  if (!z && !relu) return;
  threads.ParallelFor(count, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ComputeType<T> v = Load<T>(y[i]);
      if (z) v += Load<T>(z[i]);
      if (relu) v = v > 0 ? v : (v == v ? ComputeType<T>(0) : v);  // NaN stays NaN, as Relu keeps it
      y[i] = Store<T>(v);
    }
  });
}

// A parameter converted to float: kept for the kernel's lifetime when the input is a constant of the model, else
// converted on every run into a buffer of the calling thread.
struct FloatCopy {
  const void* source = nullptr;
  std::vector<float> values;
};

bool IsConstant(const ir::Value* v) { return v && v->initializer() && !v->is_graph_input(); }

class ConvCpu : public exec::OpKernel {
 public:
  ConvCpu(const exec::KernelInfo& info, Status* st) : impl_(LinalgImplFor(info)), gemm_(impl_) {
    if (!(*st = ParseConvAttrs(info.node, /*transpose=*/false, &attrs_, &group_, &relu_)).ok()) return;
    if (info.node.op_type() == exec::kFusedConvOp && !(*st = ParseRoundTo(info.node, &round_half_)).ok()) return;
    constant_w_ = IsConstant(info.node.input(1));
    constant_b_ = IsConstant(info.node.input(2));
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    const ir::Tensor* w = ctx.input(1);
    const ir::Tensor* b = ctx.input(2);
    const ir::Tensor* z = ctx.input(3);
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<const Resolved> r, Resolve(x, w, b));
    if (round_half_ && x && x->dtype() != DType::kFloat32) {
      return InvalidArgument("attribute 'round_to' needs float32 inputs, got X of ", DTypeName(x->dtype()));
    }
    if (z && z->dtype() != x->dtype()) {
      return InvalidArgument("input Z has element type ", DTypeName(z->dtype()), ", expected ", DTypeName(x->dtype()),
                             " (the type of X)");
    }
    const ConvProblem& p = r->p;
    const std::vector<int64_t>& out_dims = r->out_dims;
    if (z && z->dims() != out_dims) return ComputeBroadcastSum(ctx, p, *x, *w, b, *z, out_dims);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    ONNXAMP_RETURN_IF_ERROR(Convolve(ctx.threads(), p, *x, *w, b, z, relu_, y));
    if (round_half_) RoundToHalfInPlace(y->mutable_values<float>().data(), y->num_elements(), ctx.threads());
    return Status::Ok();
  }

 private:
  // The checked problem for one set of input shapes (X, W, B and their element type).
  struct Resolved {
    DType dtype = DType::kUndefined;
    std::vector<int64_t> x_dims, w_dims, b_dims;
    bool has_b = false;
    ConvProblem p;
    std::vector<int64_t> out_dims;

    bool Matches(const ir::Tensor& x, const ir::Tensor& w, const ir::Tensor* b) const {
      return x.dtype() == dtype && w.dtype() == dtype && (b != nullptr) == has_b && (!b || b->dtype() == dtype) &&
             x.dims() == x_dims && w.dims() == w_dims && (!b || b->dims() == b_dims);
    }
  };

  // Checks the inputs and resolves the geometry; the result for the last input shapes is kept, so that a run with
  // the same shapes as the one before skips the checks and allocates nothing here.
  StatusOr<std::shared_ptr<const Resolved>> Resolve(const ir::Tensor* x, const ir::Tensor* w,
                                                    const ir::Tensor* b) const {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (resolved_ && x && w && resolved_->Matches(*x, *w, b)) return resolved_;
    }
    ONNXAMP_ASSIGN_OR_RETURN(const ConvShape shape, CheckConvInputs(x, w, b, attrs_, group_, /*transpose=*/false));
    auto r = std::make_shared<Resolved>();
    r->p = ConvProblem{shape.n, shape.c, shape.m, shape.group, {}};
    ONNXAMP_ASSIGN_OR_RETURN(r->p.geo, ForwardGeometry(attrs_, shape.in, shape.kernel));
    r->out_dims = {r->p.n, r->p.m};
    r->out_dims.insert(r->out_dims.end(), r->p.geo.out.begin(), r->p.geo.out.end());
    r->dtype = x->dtype();
    r->x_dims = x->dims();
    r->w_dims = w->dims();
    r->has_b = b != nullptr;
    if (b) r->b_dims = b->dims();
    std::lock_guard<std::mutex> lock(mu_);
    resolved_ = r;
    return std::shared_ptr<const Resolved>(std::move(r));
  }

  // Y = act(conv(x, w) + b + z) into y (allocated, of the convolution's shape); z of y's shape or null.
  Status Convolve(exec::ThreadPool& threads, const ConvProblem& p, const ir::Tensor& x, const ir::Tensor& w,
                  const ir::Tensor* b, const ir::Tensor* z, bool relu, ir::Tensor* y) const {
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x.values<T>().data();
      const T* pw = w.values<T>().data();
      const T* pb = b ? b->values<T>().data() : nullptr;
      const T* pz = z ? z->values<T>().data() : nullptr;
      T* py = y->mutable_values<T>().data();
      const int64_t count = y->num_elements();
      if (impl_ == LinalgImpl::kReference) {
        ConvForwardReference(p, px, pw, pb, py);
        Epilogue(pz, relu, py, count, threads);
        return Status::Ok();
      }
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        return Fast<T>(threads, p, px, pw, pb, pz, relu, constant_w_, py, count);
      } else {
        // fp16/bf16: FP32 accumulation, the sum and the ReLU in float, one rounding on store. oneDNN takes bf16 inputs
        // as they are (their products are exact in float); otherwise the inputs are converted to float first.
        thread_local FloatScratch fx, fb, fz, fw, fy_scratch;
        const float* bias = pb ? ToFloat(pb, b->num_elements(), constant_b_, bias_copy_, fb, threads) : nullptr;
        const float* sum = pz ? ToFloat(pz, count, false, bias_copy_, fz, threads) : nullptr;
        float* fy = fy_scratch.Get(count);
        Status st;
        if (std::is_same_v<T, BFloat16> && impl_ == LinalgImpl::kOneDnn && OneDnnConv::Supported(p) &&
            OneDnnConv::SupportsBf16()) {
          st = onednn_.Run(p, px, pw, true, bias, fy, threads, ConvPostOps{sum, relu}, constant_w_);
        } else {
          float* xf = fx.Get(x.num_elements());
          ConvertToFloat(px, xf, x.num_elements(), threads);
          const float* weights = ToFloat(pw, w.num_elements(), constant_w_, weight_copy_, fw, threads);
          st = Fast<float>(threads, p, xf, weights, bias, sum, relu, constant_w_, fy, count);
        }
        if (st.ok()) ConvertFromFloat(fy, py, count, threads);
        for (FloatScratch* f : {&fx, &fb, &fz, &fw, &fy_scratch}) f->Trim();
        return st;
      }
    });
  }

  // Z whose shape differs from the convolution's: the convolution into a temporary, then Y = act(conv + Z) with
  // numpy broadcasting, as the Add and Relu it replaces would compute it.
  Status ComputeBroadcastSum(exec::KernelContext& ctx, const ConvProblem& p, const ir::Tensor& x, const ir::Tensor& w,
                             const ir::Tensor* b, const ir::Tensor& z, const std::vector<int64_t>& conv_dims) const {
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> out_dims, BroadcastShapes(conv_dims, z.dims()));
    ir::Tensor conv = ir::Tensor::Uninitialized(x.dtype(), conv_dims);
    if (conv.num_elements() > 0) ONNXAMP_RETURN_IF_ERROR(Convolve(ctx.threads(), p, x, w, b, nullptr, false, &conv));
    // A float16 node rounds the convolution (its temporary is float16) and then the sum.
    if (round_half_) RoundToHalfInPlace(conv.mutable_values<float>().data(), conv.num_elements(), ctx.threads());
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x.dtype(), out_dims));
    ONNXAMP_RETURN_IF_ERROR(DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* pc = conv.values<T>().data();
      const T* pz = z.values<T>().data();
      T* py = y->mutable_values<T>().data();
      for (int64_t i = 0; i < y->num_elements(); ++i) {
        ComputeType<T> v = Load<T>(pc[BroadcastInputOffset(conv_dims, out_dims, i)]) +
                           Load<T>(pz[BroadcastInputOffset(z.dims(), out_dims, i)]);
        if (relu_) v = v > 0 ? v : (v == v ? ComputeType<T>(0) : v);
        py[i] = Store<T>(v);
      }
      return Status::Ok();
    }));
    if (round_half_) RoundToHalfInPlace(y->mutable_values<float>().data(), y->num_elements(), ctx.threads());
    return Status::Ok();
  }

  // `n` values of a 16-bit parameter as float: kept in `copy` when `constant` (converted on the first run), else in
  // `scratch`.
  template <typename T>
  const float* ToFloat(const T* src, int64_t n, bool constant, FloatCopy& copy, FloatScratch& scratch,
                       exec::ThreadPool& threads) const {
    if (constant) {
      std::lock_guard<std::mutex> lock(mu_);
      if (copy.source != src || copy.values.size() != static_cast<size_t>(n)) {
        copy.values.resize(static_cast<size_t>(n));
        ConvertToFloat(src, copy.values.data(), n, threads);
        copy.source = src;
      }
      return copy.values.data();
    }
    float* out = scratch.Get(n);
    ConvertToFloat(src, out, n, threads);
    return out;
  }

  template <typename F>
  Status Fast(exec::ThreadPool& threads, const ConvProblem& p, const F* x, const F* w, const F* b, const F* z,
              bool relu, bool constant_w, F* y, int64_t count) const {
    if constexpr (std::is_same_v<F, float>) {
      if (impl_ == LinalgImpl::kOneDnn && OneDnnConv::Supported(p)) {
        return onednn_.Run(p, x, w, false, b, y, threads, ConvPostOps{z, relu}, constant_w);
      }
    }
    ONNXAMP_RETURN_IF_ERROR(ConvForwardGemm<F>(gemm_, threads, p, x, w, b, y));
    Epilogue(z, relu, y, count, threads);
    return Status::Ok();
  }

  WindowAttrs attrs_;
  int64_t group_ = 1;
  bool relu_ = false;
  bool round_half_ = false;  // round_to FLOAT16
  bool constant_w_ = false, constant_b_ = false;
  LinalgImpl impl_;
  GemmRunner gemm_;
  OneDnnConv onednn_;
  mutable std::mutex mu_;
  mutable FloatCopy weight_copy_, bias_copy_;
  mutable std::shared_ptr<const Resolved> resolved_;  // guarded by mu_
};

}  // namespace

void RegisterConvKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  // One kernel for every opset: 1, 11 (no semantic change for valid models), 22 (adds bfloat16).
  r.Register({"Conv", "", 1, 23, exec::Device::kCpu, types, 0, &exec::MakeKernel<ConvCpu>});
  // Conv [+ Add] [+ Relu] fused by the session's graph optimizer.
  r.Register(
      {exec::kFusedConvOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0, &exec::MakeKernel<ConvCpu>});
}

}  // namespace onnxamp::ops
