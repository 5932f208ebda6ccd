// ConvGrad (CPU, com.onnxamp): the gradients of Conv, dX, dW and dB (each an optional output), from dY, X and W with
// Conv's attributes (runtime/ops/gradient_ops.h). A table maps every (kernel tap, output position) to the input
// position it reads (or none, in the padding). Two implementations of the same contract:
//   - the plain reference: dX runs the table backwards (a transposed convolution: each image channel gathers from
//     its group's output channels), dW correlates dY with X through it, dB sums dY;
//   - im2col + GEMM (the session's GEMM core, as the forward's portable path): per image and group, cols = im2col(X),
//     dW += dY cols^T, dcols = W^T dY, then dX = col2im(dcols). fp16/bf16 run it in float.
// Every element is summed in a fixed order (float accumulation for fp16/bf16/float, double for double; images one
// after another), so results do not depend on the thread count.
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
void ConvGradReference(const ConvProblem& p, const std::vector<int64_t>& table, const T* dy, const T* x, const T* w,
                       T* dx, T* dw, T* db, exec::ThreadPool& threads) {
  using A = AccumType<T>;
  const WindowGeometry& g = p.geo;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.kernel_size();
  const int64_t cg = p.c / p.group, mg = p.m / p.group;
  if (dx) {
    // One image channel (n, c) at a time: it receives from the mg output channels of its group.
    threads.ParallelFor(p.n * p.c, 1, [&](int64_t begin, int64_t end) {
      std::vector<A> acc(static_cast<size_t>(in_size));
      for (int64_t plane = begin; plane < end; ++plane) {
        const int64_t n = plane / p.c, c = plane % p.c, grp = c / cg, ic = c % cg;
        std::fill(acc.begin(), acc.end(), A(0));
        for (int64_t oc = grp * mg; oc < (grp + 1) * mg; ++oc) {
          const T* dyp = dy + (n * p.m + oc) * out_size;
          const T* wp = w + (oc * cg + ic) * k_size;
          for (int64_t ki = 0; ki < k_size; ++ki) {
            const A wv = LoadAccum(wp[ki]);
            const int64_t* tap = table.data() + ki * out_size;
            for (int64_t oi = 0; oi < out_size; ++oi) {
              if (tap[oi] >= 0) acc[static_cast<size_t>(tap[oi])] += LoadAccum(dyp[oi]) * wv;
            }
          }
        }
        T* dxp = dx + plane * in_size;
        for (int64_t i = 0; i < in_size; ++i) dxp[i] = StoreAccum<T>(acc[static_cast<size_t>(i)]);
      }
    });
  }
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
  if (db) {
    for (int64_t oc = 0; oc < p.m; ++oc) {
      A sum = 0;
      for (int64_t n = 0; n < p.n; ++n) {
        const T* dyp = dy + (n * p.m + oc) * out_size;
        for (int64_t oi = 0; oi < out_size; ++oi) sum += LoadAccum(dyp[oi]);
      }
      db[oc] = StoreAccum<T>(sum);
    }
  }
}

// im2col + GEMM, float or double; outputs may be null (not requested).
template <typename F>
Status ConvGradGemm(const GemmRunner& gemm, const ConvProblem& p, const std::vector<int64_t>& table, const F* dy,
                    const F* x, const F* w, F* dx, F* dw, F* db, exec::ThreadPool& threads) {
  const WindowGeometry& g = p.geo;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.kernel_size();
  const int64_t cg = p.c / p.group, mg = p.m / p.group, rows = cg * k_size;
  std::vector<F> cols(static_cast<size_t>(rows * out_size));
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t grp = 0; grp < p.group; ++grp) {
      const F* dyg = dy + (n * p.m + grp * mg) * out_size;
      if (dw) {
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
      if (dx) {
        // dcols [rows, out] = W_g^T [rows, mg] dY_g [mg, out], then added into dX's planes through the table.
        GemmArgs<F> args;
        args.m = rows;
        args.n = out_size;
        args.k = mg;
        args.trans_a = true;
        args.a = w + grp * mg * rows;
        args.b = dyg;
        args.c = cols.data();
        SetDenseLayout(args);
        ONNXAMP_RETURN_IF_ERROR(gemm.Run(args, threads));
        F* dxg = dx + (n * p.c + grp * cg) * in_size;
        threads.ParallelFor(cg, 1, [&](int64_t begin, int64_t end) {
          for (int64_t ic = begin; ic < end; ++ic) {
            F* plane = dxg + ic * in_size;
            std::fill(plane, plane + in_size, F(0));
            for (int64_t ki = 0; ki < k_size; ++ki) {
              const int64_t* tap = table.data() + ki * out_size;
              const F* src = cols.data() + (ic * k_size + ki) * out_size;
              for (int64_t oi = 0; oi < out_size; ++oi) {
                if (tap[oi] >= 0) plane[tap[oi]] += src[oi];
              }
            }
          }
        });
      }
    }
  }
  if (dw && p.n == 0) std::fill(dw, dw + p.m * rows, F(0));
  if (db) {
    for (int64_t oc = 0; oc < p.m; ++oc) {
      F sum = 0;
      for (int64_t n = 0; n < p.n; ++n) {
        const F* dyp = dy + (n * p.m + oc) * out_size;
        for (int64_t oi = 0; oi < out_size; ++oi) sum += dyp[oi];
      }
      db[oc] = sum;
    }
  }
  return Status::Ok();
}

class ConvGradCpu : public exec::OpKernel {
 public:
  ConvGradCpu(const exec::KernelInfo& info, Status* st) : impl_(GetLinalgImpl()), gemm_(impl_) {
    *st = ParseConvAttrs(info.node, /*transpose=*/false, &attrs_, &group_, /*relu=*/nullptr);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* x = ctx.input(1);
    const ir::Tensor* w = ctx.input(2);
    if (!dy) return InvalidArgument("input 0 (dY) is required");
    ONNXAMP_ASSIGN_OR_RETURN(const ConvShape shape, CheckConvInputs(x, w, nullptr, attrs_, group_, false));
    ConvProblem p{shape.n, shape.c, shape.m, shape.group, {}};
    ONNXAMP_ASSIGN_OR_RETURN(p.geo, ForwardGeometry(attrs_, shape.in, shape.kernel));
    std::vector<int64_t> out_dims = {p.n, p.m};
    out_dims.insert(out_dims.end(), p.geo.out.begin(), p.geo.out.end());
    if (dy->dtype() != x->dtype()) {
      return InvalidArgument("input 0 (dY) has element type ", DTypeName(dy->dtype()), ", expected ",
                             DTypeName(x->dtype()), " (the type of X)");
    }
    if (dy->dims() != out_dims) {
      return InvalidArgument("input 0 (dY) has shape ", ShapeToString(dy->dims()), ", expected ",
                             ShapeToString(out_dims), " (Conv's output for X ", ShapeToString(x->dims()), " and W ",
                             ShapeToString(w->dims()), ")");
    }
    ir::Tensor* dx = nullptr;
    ir::Tensor* dw = nullptr;
    ir::Tensor* db = nullptr;
    if (ctx.output_requested(0)) {
      ONNXAMP_ASSIGN_OR_RETURN(dx, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    }
    if (ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(dw, ctx.AllocateOutput(1, x->dtype(), w->dims()));
    }
    if (ctx.output_requested(2)) {
      ONNXAMP_ASSIGN_OR_RETURN(db, ctx.AllocateOutput(2, x->dtype(), {p.m}));
    }
    const std::vector<int64_t> table = TapOffsets(p.geo);
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      auto out = [](ir::Tensor* t) { return t ? t->mutable_values<T>().data() : nullptr; };
      const T* pdy = dy->values<T>().data();
      const T* px = x->values<T>().data();
      const T* pw = w->values<T>().data();
      if (impl_ == LinalgImpl::kReference) {
        ConvGradReference<T>(p, table, pdy, px, pw, out(dx), out(dw), out(db), ctx.threads());
        return Status::Ok();
      }
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        return ConvGradGemm<T>(gemm_, p, table, pdy, px, pw, out(dx), out(dw), out(db), ctx.threads());
      } else {
        // fp16/bf16: in float, each output rounded once on store.
        exec::ThreadPool& threads = ctx.threads();
        auto to_float = [&](const ir::Tensor& t, const T* src) {
          std::vector<float> f(static_cast<size_t>(t.num_elements()));
          ConvertToFloat(src, f.data(), t.num_elements(), threads);
          return f;
        };
        const std::vector<float> fdy = to_float(*dy, pdy), fx = to_float(*x, px), fw = to_float(*w, pw);
        std::vector<float> fdx(dx ? fx.size() : 0), fdw(dw ? fw.size() : 0), fdb(db ? static_cast<size_t>(p.m) : 0);
        ONNXAMP_RETURN_IF_ERROR(ConvGradGemm<float>(gemm_, p, table, fdy.data(), fx.data(), fw.data(),
                                                    dx ? fdx.data() : nullptr, dw ? fdw.data() : nullptr,
                                                    db ? fdb.data() : nullptr, threads));
        if (dx) ConvertFromFloat(fdx.data(), out(dx), dx->num_elements(), threads);
        if (dw) ConvertFromFloat(fdw.data(), out(dw), dw->num_elements(), threads);
        if (db) ConvertFromFloat(fdb.data(), out(db), db->num_elements(), threads);
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

void RegisterConvGradKernels(exec::KernelRegistry& r) {
  r.Register({kConvGradOp,
              exec::kInternalDomain,
              1,
              1,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              0,
              &exec::MakeKernel<ConvGradCpu>});
}

}  // namespace onnxamp::ops
