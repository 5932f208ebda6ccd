// ConvGrad and ConvTransposeGrad (CPU, com.onnxamp): the gradients of Conv and ConvTranspose, dX, dW and dB (each an
// optional output), from dY, X and W with the forward's attributes (runtime/ops/gradient_ops.h). Both are handled as
// one Conv problem (for ConvTranspose, the Conv whose adjoint it is) and reuse the forward implementations
// (conv/conv_kernels.h): Conv's dX is a ConvTranspose of dY with W, ConvTranspose's dX a Conv of dY with W. dW
// correlates the Conv's output gradient with its input through a table that maps every (kernel tap, output position)
// to the input position it reads (or none, in the padding): a plain loop (reference) or, per image and group,
// cols = im2col(input) and dW += dY cols^T with the session's GEMM core. dB sums dY per channel. fp16/bf16 run in
// float. Every element is summed in a fixed order (float accumulation for fp16/bf16/float, double for double; images
// one after another), so results do not depend on the thread count. ConvGrad in float (and fp16/bf16 through float)
// with the oneDNN linalg implementation runs oneDNN's backward-data and backward-weights primitives instead
// (conv_grad_onednn.h: split so that the results do not depend on the thread count either).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/conv_onednn.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_util.h"
#include "runtime/ops/conv/conv_grad_onednn.h"
#include "runtime/ops/conv/conv_kernels.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

// For tap ki and output position oi: the offset in an input plane that the tap reads, or -1 in the padding.
std::vector<int64_t> TapOffsets(const WindowGeometry& g) {
  const size_t nsp = g.rank();
  const int64_t out_size = g.out_size(), k_size = g.kernel_size();
  std::vector<int64_t> table(static_cast<size_t>(k_size * out_size));
  std::vector<int64_t> o(nsp), kk(nsp);
  for (int64_t ki = 0; ki < k_size; ++ki) {
    UnravelIndex(ki, g.kernel, kk);
    for (int64_t oi = 0; oi < out_size; ++oi) {
      UnravelIndex(oi, g.out, o);
      int64_t offset = 0;
      bool inside = true;
      for (size_t d = 0; d < nsp && inside; ++d) {
        const int64_t pos = o[d] * g.stride[d] - g.pad_begin[d] + kk[d] * g.dilation[d];
        inside = pos >= 0 && pos < g.in[d];
        offset = offset * g.in[d] + pos;
      }
      table[ki * out_size + oi] = inside ? offset : -1;
    }
  }
  return table;
}

template <typename T>
void ConvGradReference(const ConvProblem& p, const std::vector<int64_t>& table, const T* dy, const T* x, T* dw,
                       exec::ThreadPool& threads) {
  using A = AccumType<T>;
  const WindowGeometry& g = p.geo;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.kernel_size();
  const int64_t cg = p.c / p.group, mg = p.m / p.group;
  if (dw) {
    // One filter row (oc, ic) at a time: every tap correlates dY[:, oc] with X[:, its group's channel ic].
    threads.ParallelFor(p.m * cg, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t oc = row / cg, ic = row % cg, c = (oc / mg) * cg + ic;
        for (int64_t ki = 0; ki < k_size; ++ki) {
          const int64_t* tap = table.data() + ki * out_size;
          A sum = 0;
          for (int64_t n = 0; n < p.n; ++n) {
            const T* dyp = dy + (n * p.m + oc) * out_size;
            const T* xp = x + (n * p.c + c) * in_size;
            for (int64_t oi = 0; oi < out_size; ++oi) {
              if (tap[oi] >= 0) sum += LoadAccum(dyp[oi]) * LoadAccum(xp[tap[oi]]);
            }
          }
          dw[row * k_size + ki] = StoreAccum<T>(sum);
        }
      }
    });
  }
}

// im2col + GEMM, float or double; outputs may be null (not requested).
template <typename F>
Status ConvGradGemm(const GemmRunner& gemm, const ConvProblem& p, const std::vector<int64_t>& table, const F* dy,
                    const F* x, F* dw, exec::ThreadPool& threads) {
  const WindowGeometry& g = p.geo;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.kernel_size();
  const int64_t cg = p.c / p.group, mg = p.m / p.group, rows = cg * k_size;
  std::vector<F> cols(static_cast<size_t>(rows * out_size));
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t grp = 0; grp < p.group; ++grp) {
      const F* dyg = dy + (n * p.m + grp * mg) * out_size;
      {
        // cols[ic * k_size + ki][oi] = X[ic] at tap ki of output oi (0 in the padding).
        const F* xg = x + (n * p.c + grp * cg) * in_size;
        threads.ParallelFor(rows, 4, [&](int64_t begin, int64_t end) {
          for (int64_t row = begin; row < end; ++row) {
            const F* xc = xg + (row / k_size) * in_size;
            const int64_t* tap = table.data() + (row % k_size) * out_size;
            F* dst = cols.data() + row * out_size;
            for (int64_t oi = 0; oi < out_size; ++oi) dst[oi] = tap[oi] >= 0 ? xc[tap[oi]] : F(0);
          }
        });
        // dW_g [mg, rows] (+)= dY_g [mg, out] cols^T.
        GemmArgs<F> args;
        args.m = mg;
        args.n = rows;
        args.k = out_size;
        args.trans_b = true;
        args.a = dyg;
        args.b = cols.data();
        args.c = dw + grp * mg * rows;
        args.beta = n == 0 ? F(0) : F(1);
        SetDenseLayout(args);
        ONNXAMP_RETURN_IF_ERROR(gemm.Run(args, threads));
      }
    }
  }
  if (p.n == 0) std::fill(dw, dw + p.m * rows, F(0));
  return Status::Ok();
}

// dB: dY summed per channel over the images and positions (AccumType accumulation, a fixed order).
template <typename T>
void ChannelSums(const T* dy, int64_t n, int64_t channels, int64_t plane, T* db) {
  for (int64_t c = 0; c < channels; ++c) {
    AccumType<T> sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T* dyp = dy + (i * channels + c) * plane;
      for (int64_t k = 0; k < plane; ++k) sum += LoadAccum(dyp[k]);
    }
    db[c] = StoreAccum<T>(sum);
  }
}

// dX and dW of ConvGrad and ConvTransposeGrad, in a type the implementations take (any T for the reference; float
// or double for GEMM). `p` is the Conv: ConvGrad's own, or for ConvTransposeGrad the Conv whose adjoint the
// ConvTranspose is (input: dY's shape, output: X's). ConvGrad: dX = ConvTranspose(dY, W), dW correlates dY with X.
// ConvTransposeGrad: dX = Conv(dY, W), dW correlates X (in the role of the Conv's output gradient) with dY.
// `onednn` (float ConvGrad only, else null) takes both gradients when it supports the problem.
template <typename T>
Status ConvInputWeightGrads(bool transpose, bool reference, const GemmRunner& gemm, const ConvProblem& p, const T* dy,
                            const T* x, const T* w, T* dx, T* dw, exec::ThreadPool& threads,
                            const OneDnnConvGrad* onednn = nullptr) {
  if constexpr (std::is_same_v<T, float>) {
    if (onednn && !transpose && !reference && OneDnnConvGrad::Supported(p)) {
      return onednn->Backward(p, dy, w, x, dx, dw, threads);
    }
  }
  if (dx) {
    if (transpose) {
      if (reference) {
        ConvForwardReference<T>(p, dy, w, nullptr, dx);
      } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        ONNXAMP_RETURN_IF_ERROR(ConvForwardGemm<T>(gemm, threads, p, dy, w, nullptr, dx));
      }
    } else {
      const ConvProblem adjoint{p.n, p.m, p.c, p.group, SwapInOut(p.geo)};
      if (reference) {
        ConvTransposeForwardReference<T>(adjoint, dy, w, nullptr, dx);
      } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        ONNXAMP_RETURN_IF_ERROR(ConvTransposeForwardGemm<T>(gemm, threads, adjoint, dy, w, nullptr, dx));
      }
    }
  }
  if (dw) {
    const std::vector<int64_t> table = TapOffsets(p.geo);
    const T* conv_dy = transpose ? x : dy;
    const T* conv_x = transpose ? dy : x;
    if (reference) {
      ConvGradReference<T>(p, table, conv_dy, conv_x, dw, threads);
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      ONNXAMP_RETURN_IF_ERROR(ConvGradGemm<T>(gemm, p, table, conv_dy, conv_x, dw, threads));
    }
  }
  return Status::Ok();
}

// ConvGrad(dY, X, W) and ConvTransposeGrad(dY, X, W) -> dX, dW, dB (optional outputs) on the CPU.
class ConvGradCpu : public exec::OpKernel {
 public:
  ConvGradCpu(const exec::KernelInfo& info, Status* st)
      : transpose_(info.node.op_type() == kConvTransposeGradOp), impl_(LinalgImplFor(info)), gemm_(impl_) {
    *st = ParseConvAttrs(info.node, transpose_, &attrs_, &group_, /*relu=*/nullptr);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* x = ctx.input(1);
    const ir::Tensor* w = ctx.input(2);
    ONNXAMP_ASSIGN_OR_RETURN(const ConvGradShape resolved, ResolveConvGrad(dy, x, w, attrs_, group_, transpose_));
    const ConvShape& shape = resolved.shape;
    const ConvProblem& p = resolved.problem;
    ONNXAMP_ASSIGN_OR_RETURN(const ConvGradOutputs outputs, AllocateConvGradOutputs(ctx, *x, *w, shape.m));
    ir::Tensor* dx = outputs.dx;
    ir::Tensor* dw = outputs.dw;
    ir::Tensor* db = outputs.db;
    const bool reference = impl_ == LinalgImpl::kReference;
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      auto out = [](ir::Tensor* t) { return t ? t->mutable_values<T>().data() : nullptr; };
      const T* pdy = dy->values<T>().data();
      const T* px = x->values<T>().data();
      const T* pw = w->values<T>().data();
      if (db)
        ChannelSums<T>(pdy, shape.n, shape.m, dy->num_elements() / std::max<int64_t>(1, shape.n * shape.m), out(db));
      if (reference) {
        return ConvInputWeightGrads<T>(transpose_, true, gemm_, p, pdy, px, pw, out(dx), out(dw), ctx.threads());
      }
      const OneDnnConvGrad* onednn = impl_ == LinalgImpl::kOneDnn ? &onednn_ : nullptr;
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        return ConvInputWeightGrads<T>(transpose_, false, gemm_, p, pdy, px, pw, out(dx), out(dw), ctx.threads(),
                                       onednn);
      } else {
        // fp16/bf16: in float, each output rounded once on store. dX reads dY and W, dW reads dY and X; the buffers
        // belong to the calling thread and are kept between runs.
        exec::ThreadPool& threads = ctx.threads();
        thread_local FloatScratch sdy, sx, sw, sdx, sdw;
        auto to_float = [&](const ir::Tensor& t, const T* src, FloatScratch& s) {
          float* f = s.Get(t.num_elements());
          ConvertToFloat(src, f, t.num_elements(), threads);
          return f;
        };
        const float* fdy = to_float(*dy, pdy, sdy);
        const float* fx = dw ? to_float(*x, px, sx) : nullptr;
        const float* fw = dx ? to_float(*w, pw, sw) : nullptr;
        float* fdx = dx ? sdx.Get(dx->num_elements()) : nullptr;
        float* fdw = dw ? sdw.Get(dw->num_elements()) : nullptr;
        Status st = ConvInputWeightGrads<float>(transpose_, false, gemm_, p, fdy, fx, fw, fdx, fdw, threads, onednn);
        if (st.ok() && dx) ConvertFromFloat(fdx, out(dx), dx->num_elements(), threads);
        if (st.ok() && dw) ConvertFromFloat(fdw, out(dw), dw->num_elements(), threads);
        for (FloatScratch* s : {&sdy, &sx, &sw, &sdx, &sdw}) s->Trim();
        return st;
      }
    });
  }

 private:
  bool transpose_ = false;
  WindowAttrs attrs_;
  int64_t group_ = 1;
  LinalgImpl impl_;
  GemmRunner gemm_;
  OneDnnConvGrad onednn_;
};

}  // namespace

void RegisterConvGradKernels(exec::KernelRegistry& r) {
  for (const char* op : {kConvGradOp, kConvTransposeGradOp}) {
    r.Register({op,
                exec::kInternalDomain,
                1,
                1,
                exec::Device::kCpu,
                {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
                0,
                &exec::MakeKernel<ConvGradCpu>});
  }
}

}  // namespace onnxamp::ops
