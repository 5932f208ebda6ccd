// The signal ops of audio front-ends (CPU): DFT (opsets 17-25), STFT (17-25), HannWindow, HammingWindow,
// BlackmanWindow and MelWeightMatrix (17-25), with com.onnxamp DFTGrad and STFTGrad.
//
//   DFT(input [..., n, ..., 1 or 2], dft_length?, axis (an attribute before opset 20, an input from 20); inverse,
//     onesided) -> [..., L or L/2 + 1, ..., 2]: the discrete Fourier transform of length L (dft_length, else n; the
//     signal is cut or zero-padded to it) along `axis`, of a real (last dim 1) or complex (2) input. inverse: the
//     inverse transform, scaled by 1/L. onesided: the first L/2 + 1 frequencies (real input, forward only).
//   STFT(signal [B, T, 1 or 2], frame_step, window? [W], frame_length?; onesided = 1) -> [B, frames, bins, 2]: the
//     DFT of each frame signal[f * frame_step + n] * window[n], n < frame_length (the window's length, or
//     frame_length; no window: ones), frames = (T - frame_length) / frame_step + 1.
//   HannWindow, HammingWindow, BlackmanWindow(size; periodic = 1, output_datatype) -> [size]: the window over
//     denominator N = size (periodic) or size - 1 (symmetric).
//   MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz; output_datatype) ->
//     [dft_length / 2 + 1, num_mel_bins] triangular filters, computed as the ONNX reference and ONNX Runtime do.
//   DFTGrad(dY, X) -> dX and STFTGrad(dY, signal, frame_step, window?, frame_length?) -> dsignal, dwindow: the
//     adjoints of these linear maps (the transposed sums), in double.
// Sums run in double over a table of the L-th roots of unity (a direct O(L^2) transform per signal):
// spectral_transform.h, shared with the CUDA kernels, as are the checks and plans (spectral.h).
#include <cmath>
#include <numbers>
#include <optional>
#include <vector>

#include "runtime/executor/graph_match.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/spectral/spectral.h"

namespace onnxamp::ops {
namespace spectral {
namespace {

// A scalar integer input (int32 or int64); nullopt when omitted or empty.
StatusOr<std::optional<int64_t>> ScalarInt(const exec::KernelContext& ctx, size_t i, const char* role) {
  const ir::Tensor* t = ctx.input(i);
  if (t == nullptr || t->num_elements() == 0) return std::optional<int64_t>();
  if (t->num_elements() != 1) {
    return InvalidArgument(InputLabel(ctx, i, role), " must be a scalar, got ", ShapeToString(t->dims()));
  }
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInt64s(*t, InputLabel(ctx, i, role), true));
  return std::optional<int64_t>(v[0]);
}

// An error naming input i unless it is float, float16, bfloat16 or double.
Status CheckFloat(const exec::KernelContext& ctx, size_t i, const char* role) {
  const ir::Tensor* t = ctx.input(i);
  if (!exec::IsFloatType(t->dtype())) {
    return InvalidArgument(InputLabel(ctx, i, role), " is ", DTypeName(t->dtype()), ", expected a float type");
  }
  return Status::Ok();
}

}  // namespace

Twiddles::Twiddles(int64_t l) : c(static_cast<size_t>(l)), s(static_cast<size_t>(l)) {
  for (int64_t m = 0; m < l; ++m) {
    const double a = 2.0 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(l);
    c[static_cast<size_t>(m)] = std::cos(a);
    s[static_cast<size_t>(m)] = std::sin(a);
  }
}

Status CheckIncomingGradient(const exec::KernelContext& ctx, const std::vector<int64_t>& dims) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, RequireInput(ctx, 0, "dY"));
  if (dy->dims() != dims) {
    return InvalidArgument(InputLabel(ctx, 0, "dY"), " has shape ", ShapeToString(dy->dims()), ", expected ",
                           ShapeToString(dims));
  }
  return CheckFloat(ctx, 0, "dY");
}

Status DftSpec::Init(const exec::KernelInfo& info) {
  grad = info.node.domain() == exec::kInternalDomain;
  opset = grad ? info.node.GetInt("opset", 20) : info.opset;
  inverse = info.node.GetInt("inverse", 0) != 0;
  onesided = info.node.GetInt("onesided", 0) != 0;
  axis_attr = info.node.GetInt("axis", 1);
  if (inverse && onesided) return Unimplemented("onesided with inverse is not supported");
  return Status::Ok();
}

StatusOr<DftPlan> PlanDft(const exec::KernelContext& ctx, const DftSpec& spec) {
  const size_t xi = spec.grad ? 1 : 0, base = spec.grad ? 2 : 1;  // DFTGrad(dY, X, dft_length?, axis?)
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* xp, RequireInput(ctx, xi, "input"));
  ONNXAMP_RETURN_IF_ERROR(CheckFloat(ctx, xi, "input"));
  const ir::Tensor& x = *xp;
  const std::string label = InputLabel(ctx, base - 1, "input");
  const int64_t rank = x.rank();
  if (rank < 2 || (x.dims().back() != 1 && x.dims().back() != 2)) {
    return InvalidArgument(label, " must be [..., 1 or 2] (real or complex), got ", ShapeToString(x.dims()));
  }
  int64_t axis = spec.axis_attr;
  if (spec.opset >= 20) {
    ONNXAMP_ASSIGN_OR_RETURN(std::optional<int64_t> a, ScalarInt(ctx, base + 1, "axis"));
    axis = a.value_or(-2);
  }
  // The last dim holds the real and imaginary parts: the axis is one of the others.
  if (axis < -rank || axis >= rank - 1 || axis == -1) {
    return InvalidArgument("axis ", axis, " is outside the signal dims of ", label, " ", ShapeToString(x.dims()));
  }
  if (axis < 0) axis += rank;
  DftPlan p;
  p.channels = x.dims().back();
  if (spec.onesided && p.channels == 2) return Unimplemented("onesided applies to a real input (last dim 1)");
  p.outer = DimProduct(x.dims(), 0, static_cast<size_t>(axis));
  p.inner = DimProduct(x.dims(), static_cast<size_t>(axis) + 1, x.dims().size() - 1);
  p.t.n_in = x.dims()[axis];
  ONNXAMP_ASSIGN_OR_RETURN(std::optional<int64_t> l, ScalarInt(ctx, base, "dft_length"));
  p.t.l = l.value_or(p.t.n_in);
  if (p.t.l < 1) return InvalidArgument("dft_length is ", p.t.l, ", expected at least 1");
  if (p.t.l > kMaxTransformLength) {
    return InvalidArgument("dft_length ", p.t.l, " is above ", kMaxTransformLength, " (a direct O(L^2) transform)");
  }
  p.t.inverse = spec.inverse;
  p.t.scale = spec.inverse ? 1.0 / static_cast<double>(p.t.l) : 1.0;
  p.t.out_len = spec.onesided ? p.t.l / 2 + 1 : p.t.l;
  p.out_dims = x.dims();
  p.out_dims[static_cast<size_t>(axis)] = p.t.out_len;
  p.out_dims.back() = 2;
  ONNXAMP_RETURN_IF_ERROR(CheckFitsInMemory(x.dtype(), p.out_dims, "the DFT's output"));
  return p;
}

StatusOr<StftPlan> PlanStft(const exec::KernelContext& ctx, bool onesided, bool grad, bool read_window) {
  const size_t base = grad ? 1 : 0;  // STFTGrad(dY, signal, frame_step, window?, frame_length?)
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* sp, RequireInput(ctx, base, "signal"));
  ONNXAMP_RETURN_IF_ERROR(CheckFloat(ctx, base, "signal"));
  const ir::Tensor& s = *sp;
  const std::string label = InputLabel(ctx, base, "signal");
  if (s.rank() != 3 || (s.dims()[2] != 1 && s.dims()[2] != 2)) {
    return InvalidArgument(label, " must be [batch, signal_length, 1 or 2], got ", ShapeToString(s.dims()));
  }
  StftPlan p;
  p.batch = s.dims()[0];
  p.length = s.dims()[1];
  p.channels = s.dims()[2];
  ONNXAMP_ASSIGN_OR_RETURN(std::optional<int64_t> step, ScalarInt(ctx, base + 1, "frame_step"));
  if (!step || *step < 1) return InvalidArgument(InputLabel(ctx, base + 1, "frame_step"), " must be at least 1");
  p.step = *step;
  const ir::Tensor* window = ctx.input(base + 2);
  ONNXAMP_ASSIGN_OR_RETURN(std::optional<int64_t> frame, ScalarInt(ctx, base + 3, "frame_length"));
  if (window) {
    if (window->num_elements() == 0) return InvalidArgument(InputLabel(ctx, base + 2, "window"), " is empty");
    if (window->rank() != 1) {
      return InvalidArgument(InputLabel(ctx, base + 2, "window"), " must be 1-D, got ", ShapeToString(window->dims()));
    }
    ONNXAMP_RETURN_IF_ERROR(CheckFloat(ctx, base + 2, "window"));
    if (frame && *frame != window->dims()[0]) {
      return InvalidArgument("frame_length ", *frame, " differs from the window's length ", window->dims()[0]);
    }
    p.frame = window->dims()[0];
    if (read_window) {
      ONNXAMP_ASSIGN_OR_RETURN(p.window, reduce::ReadParam(window, p.frame, "window"));
    }
  } else {
    if (!frame) return InvalidArgument("STFT needs a window or frame_length");
    p.frame = *frame;
    if (read_window) p.window.assign(static_cast<size_t>(std::max<int64_t>(p.frame, 0)), 1.0);
  }
  if (p.frame < 1 || p.frame > p.length) {
    return InvalidArgument("frame_length ", p.frame, " must be in [1, ", p.length, "] (the signal's length)");
  }
  if (onesided && p.channels == 2) return Unimplemented("onesided applies to a real signal (last dim 1)");
  if (p.frame > kMaxTransformLength) {
    return InvalidArgument("frame_length ", p.frame, " is above ", kMaxTransformLength, " (a direct O(L^2) transform)");
  }
  p.frames = (p.length - p.frame) / p.step + 1;
  p.t.l = p.frame;
  p.t.n_in = p.frame;
  p.t.out_len = onesided ? p.frame / 2 + 1 : p.frame;
  p.out_dims = {p.batch, p.frames, p.t.out_len, 2};
  ONNXAMP_RETURN_IF_ERROR(CheckFitsInMemory(s.dtype(), p.out_dims, "the STFT's output"));
  return p;
}

namespace {

// The gradient kernels' dY (input 0), of the forward's output shape `dims`, as double.
StatusOr<std::vector<double>> IncomingGradient(const exec::KernelContext& ctx, const std::vector<int64_t>& dims) {
  ONNXAMP_RETURN_IF_ERROR(CheckIncomingGradient(ctx, dims));
  return reduce::ReadParam(ctx.input(0), ctx.input(0)->num_elements(), "dY");
}

// One transform per signal: y = the transform of x (contiguous re and im; xi null for a real signal).
void Forward(const Transform& t, const Twiddles& w, const double* xr, const double* xi, double* yr, double* yi) {
  for (int64_t k = 0; k < t.out_len; ++k) {
    DftAt(
        t, w.c.data(), w.s.data(), k,
        [&](int64_t j, double* a, double* b) {
          *a = xr[j];
          *b = xi ? xi[j] : 0.0;
        },
        &yr[k], &yi[k]);
  }
}

// Its adjoint: dx from dy (dxi null: the imaginary parts are not kept).
void Adjoint(const Transform& t, const Twiddles& w, const double* dyr, const double* dyi, double* dxr, double* dxi) {
  for (int64_t j = 0; j < t.n_in; ++j) {
    double im = 0;
    AdjointAt(
        t, w.c.data(), w.s.data(), j,
        [&](int64_t k, double* gr, double* gi) {
          *gr = dyr[k];
          *gi = dyi[k];
        },
        &dxr[j], &im);
    if (dxi) dxi[j] = im;
  }
}

class DftCpu : public exec::OpKernel {
 public:
  DftCpu(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(DftPlan p, PlanDft(ctx, spec_));
    const ir::Tensor* x = ctx.input(spec_.grad ? 1 : 0);
    Twiddles w(p.t.l);
    const int64_t out_len = p.t.out_len, n_in = p.t.n_in;
    if (!spec_.grad) {
      ONNXAMP_ASSIGN_OR_RETURN(const std::vector<double> xv, reduce::ReadParam(x, x->num_elements(), "input"));
      std::vector<double> yv(static_cast<size_t>(p.outer * out_len * p.inner * 2));
      ParallelRanges(ctx.threads(), p.outer * p.inner, 1, [&](int64_t b, int64_t e) {
        std::vector<double> xr(static_cast<size_t>(n_in)), xim(static_cast<size_t>(n_in)),
            yr(static_cast<size_t>(out_len)), yim(static_cast<size_t>(out_len));
        for (int64_t r = b; r < e; ++r) {
          const int64_t o = r / p.inner, i = r % p.inner;
          for (int64_t j = 0; j < n_in; ++j) {
            const size_t at = static_cast<size_t>(((o * n_in + j) * p.inner + i) * p.channels);
            xr[static_cast<size_t>(j)] = xv[at];
            xim[static_cast<size_t>(j)] = p.channels == 2 ? xv[at + 1] : 0.0;
          }
          Forward(p.t, w, xr.data(), p.channels == 2 ? xim.data() : nullptr, yr.data(), yim.data());
          for (int64_t k = 0; k < out_len; ++k) {
            const size_t at = static_cast<size_t>(((o * out_len + k) * p.inner + i) * 2);
            yv[at] = yr[static_cast<size_t>(k)];
            yv[at + 1] = yim[static_cast<size_t>(k)];
          }
        }
      });
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), p.out_dims));
      ONNXAMP_RETURN_IF_ERROR(reduce::WriteParam(y, yv));
      return Status::Ok();
    }
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<double> dyv, IncomingGradient(ctx, p.out_dims));
    std::vector<double> dxv(static_cast<size_t>(x->num_elements()));
    ParallelRanges(ctx.threads(), p.outer * p.inner, 1, [&](int64_t b, int64_t e) {
      std::vector<double> gr(static_cast<size_t>(out_len)), gi(static_cast<size_t>(out_len)),
          dr(static_cast<size_t>(n_in)), di(static_cast<size_t>(n_in));
      for (int64_t r = b; r < e; ++r) {
        const int64_t o = r / p.inner, i = r % p.inner;
        for (int64_t k = 0; k < out_len; ++k) {
          const size_t at = static_cast<size_t>(((o * out_len + k) * p.inner + i) * 2);
          gr[static_cast<size_t>(k)] = dyv[at];
          gi[static_cast<size_t>(k)] = dyv[at + 1];
        }
        Adjoint(p.t, w, gr.data(), gi.data(), dr.data(), p.channels == 2 ? di.data() : nullptr);
        for (int64_t j = 0; j < n_in; ++j) {
          const size_t at = static_cast<size_t>(((o * n_in + j) * p.inner + i) * p.channels);
          dxv[at] = dr[static_cast<size_t>(j)];
          if (p.channels == 2) dxv[at + 1] = di[static_cast<size_t>(j)];
        }
      }
    });
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    ONNXAMP_RETURN_IF_ERROR(reduce::WriteParam(dx, dxv));
    return Status::Ok();
  }

 private:
  DftSpec spec_;
};

class StftCpu : public exec::OpKernel {
 public:
  StftCpu(const exec::KernelInfo& info, Status*)
      : grad_(info.node.domain() == exec::kInternalDomain), onesided_(info.node.GetInt("onesided", 1) != 0) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const size_t base = grad_ ? 1 : 0;  // STFTGrad(dY, signal, frame_step, window?, frame_length?)
    ONNXAMP_ASSIGN_OR_RETURN(StftPlan p, PlanStft(ctx, onesided_, grad_, /*read_window=*/true));
    const ir::Tensor* signal = ctx.input(base);
    Twiddles w(p.t.l);
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<double> sv, reduce::ReadParam(signal, signal->num_elements(), "signal"));
    const int64_t bins = p.t.out_len;
    if (!grad_) {
      std::vector<double> yv(static_cast<size_t>(p.batch * p.frames * bins * 2));
      ParallelRanges(ctx.threads(), p.batch * p.frames, 1, [&](int64_t b, int64_t e) {
        std::vector<double> xr(static_cast<size_t>(p.frame)), xi(static_cast<size_t>(p.frame)),
            yr(static_cast<size_t>(bins)), yi(static_cast<size_t>(bins));
        for (int64_t r = b; r < e; ++r) {
          const int64_t bi = r / p.frames, f = r % p.frames;
          for (int64_t j = 0; j < p.frame; ++j) {
            const size_t at = static_cast<size_t>((bi * p.length + f * p.step + j) * p.channels);
            const double wv = p.window[static_cast<size_t>(j)];
            xr[static_cast<size_t>(j)] = sv[at] * wv;
            xi[static_cast<size_t>(j)] = p.channels == 2 ? sv[at + 1] * wv : 0.0;
          }
          Forward(p.t, w, xr.data(), p.channels == 2 ? xi.data() : nullptr, yr.data(), yi.data());
          for (int64_t k = 0; k < bins; ++k) {
            yv[static_cast<size_t>((r * bins + k) * 2)] = yr[static_cast<size_t>(k)];
            yv[static_cast<size_t>((r * bins + k) * 2 + 1)] = yi[static_cast<size_t>(k)];
          }
        }
      });
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, signal->dtype(), p.out_dims));
      ONNXAMP_RETURN_IF_ERROR(reduce::WriteParam(y, yv));
      return Status::Ok();
    }
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<double> dyv, IncomingGradient(ctx, p.out_dims));
    // Frames overlap: the adjoint of each frame first (in parallel), then the sums into the signal and window.
    ONNXAMP_RETURN_IF_ERROR(
        CheckFitsInMemory(DType::kFloat64, {p.batch, p.frames, p.frame, 2}, "STFT's frame gradients"));
    std::vector<double> adj(static_cast<size_t>(p.batch * p.frames * p.frame * 2));
    ParallelRanges(ctx.threads(), p.batch * p.frames, 1, [&](int64_t b, int64_t e) {
      std::vector<double> gr(static_cast<size_t>(bins)), gi(static_cast<size_t>(bins)),
          dr(static_cast<size_t>(p.frame)), di(static_cast<size_t>(p.frame));
      for (int64_t r = b; r < e; ++r) {
        for (int64_t k = 0; k < bins; ++k) {
          gr[static_cast<size_t>(k)] = dyv[static_cast<size_t>((r * bins + k) * 2)];
          gi[static_cast<size_t>(k)] = dyv[static_cast<size_t>((r * bins + k) * 2 + 1)];
        }
        Adjoint(p.t, w, gr.data(), gi.data(), dr.data(), di.data());
        for (int64_t j = 0; j < p.frame; ++j) {
          adj[static_cast<size_t>((r * p.frame + j) * 2)] = dr[static_cast<size_t>(j)];
          adj[static_cast<size_t>((r * p.frame + j) * 2 + 1)] = di[static_cast<size_t>(j)];
        }
      }
    });
    std::vector<double> dsig(sv.size(), 0.0), dwin(static_cast<size_t>(p.frame), 0.0);
    for (int64_t r = 0; r < p.batch * p.frames; ++r) {
      const int64_t bi = r / p.frames, f = r % p.frames;
      for (int64_t j = 0; j < p.frame; ++j) {
        const size_t at = static_cast<size_t>((bi * p.length + f * p.step + j) * p.channels);
        const double ar = adj[static_cast<size_t>((r * p.frame + j) * 2)];
        const double ai = adj[static_cast<size_t>((r * p.frame + j) * 2 + 1)];
        const double wv = p.window[static_cast<size_t>(j)];
        dsig[at] += ar * wv;
        if (p.channels == 2) dsig[at + 1] += ai * wv;
        dwin[static_cast<size_t>(j)] += ar * sv[at] + (p.channels == 2 ? ai * sv[at + 1] : 0.0);
      }
    }
    if (ctx.output_requested(0)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * ds, ctx.AllocateOutput(0, signal->dtype(), signal->dims()));
      ONNXAMP_RETURN_IF_ERROR(reduce::WriteParam(ds, dsig));
    }
    if (ctx.num_outputs() > 2 && ctx.output_requested(2) && ctx.input(base + 2)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dw, ctx.AllocateOutput(2, ctx.input(base + 2)->dtype(), {p.frame}));
      ONNXAMP_RETURN_IF_ERROR(reduce::WriteParam(dw, dwin));
    }
    return Status::Ok();
  }

 private:
  bool grad_;
  bool onesided_;
};

// The `output_datatype` attribute of the windows and MelWeightMatrix (default float): a numeric element type.
Status OutputDatatype(const ir::Node& node, DType* out) {
  const int64_t code = node.GetInt("output_datatype", 1);
  const std::optional<DType> t = DTypeFromCode(code);
  if (!t || !(IsInteger(*t) || exec::IsFloatType(*t))) {
    return InvalidArgument("attribute 'output_datatype' ", code, " is not a numeric element type");
  }
  *out = *t;
  return Status::Ok();
}

enum class WindowKind { kHann, kHamming, kBlackman };

template <WindowKind K>
class WindowCpu : public exec::OpKernel {
 public:
  WindowCpu(const exec::KernelInfo& info, Status* st) : periodic_(info.node.GetInt("periodic", 1) != 0) {
    *st = OutputDatatype(info.node, &dtype_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(std::optional<int64_t> size, ScalarInt(ctx, 0, "size"));
    if (!size || *size < 0) return InvalidArgument(InputLabel(ctx, 0, "size"), " must be a scalar >= 0");
    ONNXAMP_RETURN_IF_ERROR(CheckFitsInMemory(dtype_, {*size}, "the window"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, dtype_, {*size}));
    // A symmetric window of one sample is 1 (numpy's and torch's; the formula's denominator is 0).
    const double n = periodic_ ? static_cast<double>(*size) : static_cast<double>(*size - 1);
    const bool single = !periodic_ && *size == 1;
    return DispatchNumeric(dtype_, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T* out = y->mutable_values<T>().data();
      for (int64_t i = 0; i < *size; ++i) {
        const double a = n > 0 ? 2.0 * std::numbers::pi * static_cast<double>(i) / n : 0.0;
        double v = 0;
        if constexpr (K == WindowKind::kHann) v = 0.5 - 0.5 * std::cos(a);
        if constexpr (K == WindowKind::kHamming) v = 25.0 / 46.0 - 21.0 / 46.0 * std::cos(a);
        if constexpr (K == WindowKind::kBlackman) v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2.0 * a);
        out[i] = Store<T>(static_cast<ComputeType<T>>(single ? 1.0 : v));
      }
      return Status::Ok();
    });
  }

 private:
  bool periodic_;
  DType dtype_ = DType::kFloat32;
};

class MelWeightMatrixCpu : public exec::OpKernel {
 public:
  MelWeightMatrixCpu(const exec::KernelInfo& info, Status* st) { *st = OutputDatatype(info.node, &dtype_); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(std::optional<int64_t> mels, ScalarInt(ctx, 0, "num_mel_bins"));
    ONNXAMP_ASSIGN_OR_RETURN(std::optional<int64_t> dft, ScalarInt(ctx, 1, "dft_length"));
    ONNXAMP_ASSIGN_OR_RETURN(std::optional<int64_t> rate, ScalarInt(ctx, 2, "sample_rate"));
    if (!mels || !dft || !rate || *mels < 1 || *dft < 1 || *rate < 1) {
      return InvalidArgument("num_mel_bins, dft_length and sample_rate must be scalars of at least 1");
    }
    double edges[2];
    for (size_t k = 0; k < 2; ++k) {
      const ir::Tensor* t = ctx.input(3 + k);
      if (t == nullptr || t->num_elements() != 1) {
        return InvalidArgument(InputLabel(ctx, 3 + k, k ? "upper_edge_hertz" : "lower_edge_hertz"),
                               " must be a float scalar");
      }
      ONNXAMP_RETURN_IF_ERROR(CheckFloat(ctx, 3 + k, k ? "upper_edge_hertz" : "lower_edge_hertz"));
      ONNXAMP_ASSIGN_OR_RETURN(const std::vector<double> edge, reduce::ReadParam(t, 1, "edge"));
      edges[k] = edge[0];
    }
    if (*mels > kMaxTransformLength || *dft > kMaxTransformLength) {
      return InvalidArgument("num_mel_bins ", *mels, " or dft_length ", *dft, " is above ", kMaxTransformLength);
    }
    const int64_t bins = *dft / 2 + 1;
    ONNXAMP_RETURN_IF_ERROR(CheckFitsInMemory(DType::kFloat64, {bins, *mels}, "the mel weight matrix"));
    // The reference's steps: num_mel_bins + 2 points evenly spaced in mel (over num_mel_bins + 2 steps, as the
    // reference divides), back to hertz, then to DFT bins by floor((dft_length + 1) * f / sample_rate).
    const double low = 2595.0 * std::log10(1.0 + edges[0] / 700.0), high = 2595.0 * std::log10(1.0 + edges[1] / 700.0);
    const double step = (high - low) / static_cast<double>(*mels + 2);
    std::vector<int64_t> points(static_cast<size_t>(*mels + 2));
    for (int64_t i = 0; i < *mels + 2; ++i) {
      const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * step + low) / 2595.0) - 1.0);
      const double bin = std::floor(static_cast<double>(*dft + 1) * hz / static_cast<double>(*rate));
      if (!(bin >= 0.0 && bin < static_cast<double>(bins))) {
        return InvalidArgument("mel point ", i, " falls on DFT bin ", bin, ", outside [0, ", bins,
                               "): lower_edge_hertz and upper_edge_hertz must lie in [0, sample_rate / 2]");
      }
      points[static_cast<size_t>(i)] = static_cast<int64_t>(bin);
    }
    std::vector<double> w(static_cast<size_t>(bins * *mels), 0.0);
    for (int64_t i = 0; i < *mels; ++i) {
      const int64_t lo = points[static_cast<size_t>(i)], center = points[static_cast<size_t>(i + 1)],
                    hi = points[static_cast<size_t>(i + 2)];
      if (center == lo) {
        w[static_cast<size_t>(center * *mels + i)] = 1.0;
      } else {
        for (int64_t j = lo; j <= center; ++j) {
          w[static_cast<size_t>(j * *mels + i)] = static_cast<double>(j - lo) / static_cast<double>(center - lo);
        }
      }
      for (int64_t j = center; j < hi; ++j) {
        w[static_cast<size_t>(j * *mels + i)] = static_cast<double>(hi - j) / static_cast<double>(hi - center);
      }
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, dtype_, {bins, *mels}));
    return DispatchNumeric(dtype_, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T* out = y->mutable_values<T>().data();
      for (size_t i = 0; i < w.size(); ++i) out[i] = Store<T>(static_cast<ComputeType<T>>(w[i]));
      return Status::Ok();
    });
  }

 private:
  DType dtype_ = DType::kFloat32;
};

}  // namespace
}  // namespace spectral

void RegisterSpectralKernels(exec::KernelRegistry& r) {
  using spectral::DftCpu;
  using spectral::MelWeightMatrixCpu;
  using spectral::StftCpu;
  using spectral::WindowCpu;
  using spectral::WindowKind;
  r.Register({"DFT", "", 17, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<DftCpu>});
  r.Register({kDftGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, {}, 0, &exec::MakeKernel<DftCpu>});
  r.Register({"STFT", "", 17, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<StftCpu>});
  r.Register({kStftGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, {}, 0, &exec::MakeKernel<StftCpu>});
  r.Register({"HannWindow", "", 17, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<WindowCpu<WindowKind::kHann>>});
  r.Register(
      {"HammingWindow", "", 17, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<WindowCpu<WindowKind::kHamming>>});
  r.Register(
      {"BlackmanWindow", "", 17, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<WindowCpu<WindowKind::kBlackman>>});
  r.Register({"MelWeightMatrix", "", 17, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<MelWeightMatrixCpu>});
}

}  // namespace onnxamp::ops
