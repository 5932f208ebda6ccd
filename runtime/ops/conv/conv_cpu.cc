// Conv (CPU): N-d convolution of X [N, C, D1..Dn] with W [M, C/group, k1..kn] plus an optional bias [M]; strides,
// dilations, explicit pads or auto_pad (SAME_UPPER, SAME_LOWER, VALID), groups. Three implementations of the
// same contract: the plain loop (reference), im2col + the portable GEMM, and oneDNN's convolution (1 to 3 spatial
// dims). fp16/bf16 compute with FP32 accumulation and one rounding on store: bf16 goes to oneDNN as it is where the
// CPU supports it (the products are exact in float), otherwise the inputs are converted to float.
#include <algorithm>
#include <mutex>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/conv_onednn.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_util.h"

namespace onnxamp::ops {
namespace {

// The plain loop: every output element sums over its group's input channels and the kernel window, skipping
// positions in the padding.
template <typename T>
void ConvReference(const ConvProblem& p, const T* x, const T* w, const T* b, T* y) {
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

// im2col + GEMM, float or double.
template <typename F>
Status ConvPortable(const GemmRunner& gemm, exec::ThreadPool& threads, const ConvProblem& p, const F* x, const F* w,
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

class ConvCpu : public exec::OpKernel {
 public:
  ConvCpu(const exec::KernelInfo& info, Status* st) : impl_(GetLinalgImpl()), gemm_(impl_) {
    if (!(*st = ParseWindowAttrs(info.node, WindowAttrSpec{}, &attrs_)).ok()) return;
    if (!(*st = GetIntAttr(info.node, "group", 1, &group_)).ok()) return;
    if (group_ < 1) *st = InvalidArgument("attribute 'group' must be >= 1, got ", group_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    const ir::Tensor* w = ctx.input(1);
    const ir::Tensor* b = ctx.input(2);
    if (!x || !w) return InvalidArgument("inputs X and W are required");
    for (const ir::Tensor* t : {w, b}) {
      if (t && t->dtype() != x->dtype()) {
        return InvalidArgument("input ", t == w ? "W" : "B", " has element type ", DTypeName(t->dtype()), ", expected ",
                               DTypeName(x->dtype()), " (the type of X)");
      }
    }
    ONNXAMP_ASSIGN_OR_RETURN(const ConvProblem p, Problem(*x, *w, b));
    std::vector<int64_t> out_dims = {p.n, p.m};
    out_dims.insert(out_dims.end(), p.geo.out.begin(), p.geo.out.end());
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x->values<T>().data();
      const T* pw = w->values<T>().data();
      const T* pb = b ? b->values<T>().data() : nullptr;
      T* py = y->mutable_values<T>().data();
      if (impl_ == LinalgImpl::kReference) {
        ConvReference(p, px, pw, pb, py);
        return Status::Ok();
      }
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        return Fast<T>(ctx.threads(), p, px, pw, pb, py);
      } else {
        // fp16/bf16: FP32 accumulation and one rounding on store. oneDNN takes bf16 inputs as they are (their
        // products are exact in float); otherwise the inputs are converted to float first.
        exec::ThreadPool& threads = ctx.threads();
        std::vector<float> fb(b ? static_cast<size_t>(b->num_elements()) : 0),
            fy(static_cast<size_t>(y->num_elements()));
        if (b) ConvertToFloat(pb, fb.data(), b->num_elements(), threads);
        Status st;
        if (std::is_same_v<T, BFloat16> && impl_ == LinalgImpl::kOneDnn && OneDnnConv::Supported(p) &&
            OneDnnConv::SupportsBf16()) {
          st = onednn_.Run(p, px, pw, true, b ? fb.data() : nullptr, fy.data(), threads);
        } else {
          std::vector<float> fx(static_cast<size_t>(x->num_elements())), fw(static_cast<size_t>(w->num_elements()));
          ConvertToFloat(px, fx.data(), x->num_elements(), threads);
          ConvertToFloat(pw, fw.data(), w->num_elements(), threads);
          st = Fast<float>(threads, p, fx.data(), fw.data(), b ? fb.data() : nullptr, fy.data());
        }
        if (!st.ok()) return st;
        ConvertFromFloat(fy.data(), py, y->num_elements(), threads);
        return Status::Ok();
      }
    });
  }

 private:
  StatusOr<ConvProblem> Problem(const ir::Tensor& x, const ir::Tensor& w, const ir::Tensor* b) const {
    if (x.rank() < 3) {
      return InvalidArgument("input X must have rank >= 3 ([N, C, spatial...]), got ", ShapeToString(x.dims()));
    }
    if (w.rank() != x.rank()) {
      return InvalidArgument("input W has shape ", ShapeToString(w.dims()), ", expected rank ", x.rank(),
                             " (that of X ", ShapeToString(x.dims()), ")");
    }
    ConvProblem p;
    p.n = x.dims()[0];
    p.c = x.dims()[1];
    p.m = w.dims()[0];
    p.group = group_;
    if (p.c != w.dims()[1] * group_) {
      return InvalidArgument("input X ", ShapeToString(x.dims()), " has ", p.c, " channels but W ",
                             ShapeToString(w.dims()), " with group ", group_, " expects ", w.dims()[1] * group_);
    }
    if (p.m % group_ != 0) {
      return InvalidArgument("input W ", ShapeToString(w.dims()), " has ", p.m,
                             " output channels, not a multiple of group ", group_);
    }
    const std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
    const std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel) {
      return InvalidArgument("attribute 'kernel_shape' ", ShapeToString(attrs_.kernel_shape),
                             " disagrees with W's spatial dims ", ShapeToString(kernel));
    }
    if (b && (b->rank() != 1 || b->dims()[0] != p.m)) {
      return InvalidArgument("input B has shape ", ShapeToString(b->dims()), ", expected [", p.m, "]");
    }
    ONNXAMP_ASSIGN_OR_RETURN(p.geo, ForwardGeometry(attrs_, in, kernel));
    return p;
  }

  template <typename F>
  Status Fast(exec::ThreadPool& threads, const ConvProblem& p, const F* x, const F* w, const F* b, F* y) const {
    if constexpr (std::is_same_v<F, float>) {
      if (impl_ == LinalgImpl::kOneDnn && OneDnnConv::Supported(p)) return onednn_.Run(p, x, w, false, b, y, threads);
    }
    return ConvPortable<F>(gemm_, threads, p, x, w, b, y);
  }

  WindowAttrs attrs_;
  int64_t group_ = 1;
  LinalgImpl impl_;
  GemmRunner gemm_;
  OneDnnConv onednn_;
};

}  // namespace

void RegisterConvKernels(exec::KernelRegistry& r) {
  // One kernel for every opset: 1, 11 (no semantic change for valid models), 22 (adds bfloat16).
  r.Register({"Conv",
              "",
              1,
              23,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              0,
              &exec::MakeKernel<ConvCpu>});
}

}  // namespace onnxamp::ops
