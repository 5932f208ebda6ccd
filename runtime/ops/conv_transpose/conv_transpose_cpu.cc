// ConvTranspose (CPU): the transpose (gradient) of Conv. X [N, C, D1..Dn], W [C, M/group, k1..kn], optional bias
// [M]; strides, dilations, pads, output_padding, output_shape, auto_pad, groups. Two implementations of the same
// contract: the plain gather loop (reference) and GEMM + col2im (the GEMM core: oneDNN when built with it).
// fp16/bf16 are converted to float for the fast path: FP32 accumulation, one rounding on store.
#include <algorithm>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_util.h"
#include "runtime/ops/conv/conv_kernels.h"

namespace onnxamp::ops {
namespace {

// col2im for one image and group: y[om, o] += cols[(om * k_size + ki) * in_size + i] for every (ki, i) that lands
// on o. Output channels are independent, so they are split over the threads.
template <typename F>
void Col2Im(const ConvProblem& p, const F* cols, F* y, exec::ThreadPool& threads) {
  const WindowGeometry& g = p.geo;
  const size_t nsp = g.rank();
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.kernel_size();
  const int64_t mg = p.m / p.group;
  const int64_t last_in = g.in[nsp - 1], outer_in = in_size / last_in;
  const int64_t s_last = g.stride[nsp - 1], d_last = g.dilation[nsp - 1], p_last = g.pad_begin[nsp - 1];
  const int64_t out_last = g.out[nsp - 1];
  threads.ParallelFor(mg, 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> kk(nsp), i(nsp);
    for (int64_t om = begin; om < end; ++om) {
      F* yc = y + om * out_size;
      for (int64_t ki = 0; ki < k_size; ++ki) {
        UnravelIndex(ki, g.kernel, kk);
        const F* src = cols + (om * k_size + ki) * in_size;
        for (int64_t outer = 0; outer < outer_in; ++outer) {
          UnravelIndex(outer * last_in, g.in, i);
          int64_t offset = 0;
          bool inside = true;
          for (size_t d = 0; d + 1 < nsp; ++d) {
            const int64_t pos = i[d] * g.stride[d] - g.pad_begin[d] + kk[d] * g.dilation[d];
            inside = inside && pos >= 0 && pos < g.out[d];
            offset = offset * g.out[d] + pos;
          }
          if (!inside) continue;
          F* yrow = yc + offset * out_last;
          const F* srow = src + outer * last_in;
          const int64_t shift = kk[nsp - 1] * d_last - p_last;
          for (int64_t iw = 0; iw < last_in; ++iw) {
            const int64_t pos = iw * s_last + shift;
            if (pos >= 0 && pos < out_last) yrow[pos] += srow[iw];
          }
        }
      }
    }
  });
}

}  // namespace

// The plain loop: output position o receives input position i through kernel position k when
// o = i * stride - pad_begin + k * dilation.
template <typename T>
void ConvTransposeForwardReference(const ConvProblem& p, const T* x, const T* w, const T* b, T* y) {
  const WindowGeometry& g = p.geo;
  const size_t nsp = g.rank();
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.kernel_size();
  const int64_t cg = p.c / p.group, mg = p.m / p.group;
  std::vector<int64_t> o(nsp), kk(nsp);
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t oc = 0; oc < p.m; ++oc) {
      const int64_t grp = oc / mg, om = oc % mg;
      for (int64_t oi = 0; oi < out_size; ++oi) {
        UnravelIndex(oi, g.out, o);
        AccumType<T> sum = 0;
        for (int64_t ki = 0; ki < k_size; ++ki) {
          UnravelIndex(ki, g.kernel, kk);
          int64_t offset = 0;
          bool hit = true;
          for (size_t d = 0; d < nsp && hit; ++d) {
            const int64_t t = o[d] + g.pad_begin[d] - kk[d] * g.dilation[d];
            hit = t >= 0 && t % g.stride[d] == 0 && t / g.stride[d] < g.in[d];
            offset = offset * g.in[d] + t / g.stride[d];
          }
          if (!hit) continue;
          for (int64_t ic = 0; ic < cg; ++ic) {
            const int64_t c = grp * cg + ic;
            sum += LoadAccum(x[(n * p.c + c) * in_size + offset]) * LoadAccum(w[(c * mg + om) * k_size + ki]);
          }
        }
        if (b) sum += LoadAccum(b[oc]);
        y[(n * p.m + oc) * out_size + oi] = StoreAccum<T>(sum);
      }
    }
  }
}

// GEMM + col2im, float or double.
template <typename F>
Status ConvTransposeForwardGemm(const GemmRunner& gemm, exec::ThreadPool& threads, const ConvProblem& p, const F* x,
                                const F* w, const F* b, F* y) {
  const WindowGeometry& g = p.geo;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.kernel_size();
  const int64_t cg = p.c / p.group, mg = p.m / p.group;
  std::vector<F> cols(static_cast<size_t>(mg * k_size * in_size));
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t grp = 0; grp < p.group; ++grp) {
      // cols [mg * k_size, in_size] = W_g^T (W_g is [cg, mg * k_size]) * X_g [cg, in_size].
      GemmArgs<F> args;
      args.m = mg * k_size;
      args.n = in_size;
      args.k = cg;
      args.trans_a = true;
      args.a = w + grp * cg * mg * k_size;
      args.b = x + (n * p.c + grp * cg) * in_size;
      args.c = cols.data();
      SetDenseLayout(args);
      ONNXAMP_RETURN_IF_ERROR(gemm.Run(args, threads));
      F* yg = y + (n * p.m + grp * mg) * out_size;
      for (int64_t om = 0; om < mg; ++om) std::fill_n(yg + om * out_size, out_size, b ? b[grp * mg + om] : F(0));
      Col2Im(p, cols.data(), yg, threads);
    }
  }
  return Status::Ok();
}

template void ConvTransposeForwardReference<float>(const ConvProblem&, const float*, const float*, const float*,
                                                   float*);
template void ConvTransposeForwardReference<double>(const ConvProblem&, const double*, const double*, const double*,
                                                    double*);
template void ConvTransposeForwardReference<Float16>(const ConvProblem&, const Float16*, const Float16*, const Float16*,
                                                     Float16*);
template void ConvTransposeForwardReference<BFloat16>(const ConvProblem&, const BFloat16*, const BFloat16*,
                                                      const BFloat16*, BFloat16*);
template Status ConvTransposeForwardGemm<float>(const GemmRunner&, exec::ThreadPool&, const ConvProblem&, const float*,
                                                const float*, const float*, float*);
template Status ConvTransposeForwardGemm<double>(const GemmRunner&, exec::ThreadPool&, const ConvProblem&,
                                                 const double*, const double*, const double*, double*);

namespace {

class ConvTransposeCpu : public exec::OpKernel {
 public:
  ConvTransposeCpu(const exec::KernelInfo& info, Status* st) : impl_(LinalgImplFor(info)), gemm_(impl_) {
    *st = ParseConvAttrs(info.node, /*transpose=*/true, &attrs_, &group_, nullptr);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    const ir::Tensor* w = ctx.input(1);
    const ir::Tensor* b = ctx.input(2);
    ONNXAMP_ASSIGN_OR_RETURN(const ConvShape shape, CheckConvInputs(x, w, b, attrs_, group_, /*transpose=*/true));
    ConvProblem p{shape.n, shape.c, shape.m, shape.group, {}};
    ONNXAMP_ASSIGN_OR_RETURN(p.geo, TransposeGeometry(attrs_, shape.in, shape.kernel));
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
        ConvTransposeForwardReference(p, px, pw, pb, py);
        return Status::Ok();
      }
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        return ConvTransposeForwardGemm<T>(gemm_, ctx.threads(), p, px, pw, pb, py);
      } else {
        // fp16/bf16: convert to float, compute with FP32 accumulation, round once on store.
        exec::ThreadPool& threads = ctx.threads();
        std::vector<float> fx(static_cast<size_t>(x->num_elements())), fw(static_cast<size_t>(w->num_elements()));
        std::vector<float> fb(b ? static_cast<size_t>(b->num_elements()) : 0),
            fy(static_cast<size_t>(y->num_elements()));
        ConvertToFloat(px, fx.data(), x->num_elements(), threads);
        ConvertToFloat(pw, fw.data(), w->num_elements(), threads);
        if (b) ConvertToFloat(pb, fb.data(), b->num_elements(), threads);
        const Status st = ConvTransposeForwardGemm<float>(gemm_, threads, p, fx.data(), fw.data(),
                                                          b ? fb.data() : nullptr, fy.data());
        if (!st.ok()) return st;
        ConvertFromFloat(fy.data(), py, y->num_elements(), threads);
        return Status::Ok();
      }
    });
  }

 private:
  WindowAttrs attrs_;
  int64_t group_ = 1;
  LinalgImpl impl_;
  GemmRunner gemm_;
};

}  // namespace

void RegisterConvTransposeKernels(exec::KernelRegistry& r) {
  // One kernel for every opset: 1, 11 (no semantic change for valid models), 22 (adds bfloat16).
  r.Register({"ConvTranspose",
              "",
              1,
              23,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              0,
              &exec::MakeKernel<ConvTransposeCpu>});
}

}  // namespace onnxamp::ops
