// The CPU implementations of Conv and ConvTranspose (without their kernels' fusions and type handling), shared by
// their kernels and by the gradient kernels: ConvGrad's dX is a ConvTranspose of dY with W, ConvTransposeGrad's dX a
// Conv of dY with W (conv/conv_grad_cpu.cc). Instantiated for float, double, Float16 and BFloat16 (the plain loops)
// and for float and double (im2col/col2im + GEMM).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_onednn.h"
#include "runtime/ops/common/gemm.h"

namespace onnxamp::ops {

// Conv: x [n, c, geo.in...], w [m, c / group, geo.kernel...], optional b [m] -> y [n, m, geo.out...].
// The plain loop (AccumType accumulation) and im2col + GEMM. (conv/conv_cpu.cc)
template <typename T>
void ConvForwardReference(const ConvProblem& p, const T* x, const T* w, const T* b, T* y);
template <typename F>
Status ConvForwardGemm(const GemmRunner& gemm, exec::ThreadPool& threads, const ConvProblem& p, const F* x, const F* w,
                       const F* b, F* y);

// ConvTranspose: x [n, c, geo.in...], w [c, m / group, geo.kernel...], optional b [m] -> y [n, m, geo.out...], where
// output position o receives input position i through kernel position k when o = i * stride - pad_begin +
// k * dilation. The plain gather loop and GEMM + col2im. (conv_transpose/conv_transpose_cpu.cc)
template <typename T>
void ConvTransposeForwardReference(const ConvProblem& p, const T* x, const T* w, const T* b, T* y);
template <typename F>
Status ConvTransposeForwardGemm(const GemmRunner& gemm, exec::ThreadPool& threads, const ConvProblem& p, const F* x,
                                const F* w, const F* b, F* y);

// The geometry of the adjoint: the same kernel, strides, dilations and begin pads with input and output sizes
// swapped (a Conv's adjoint is a ConvTranspose of the same geometry and conversely). pad_end is the end padding the
// result implies when read as a Conv (output_padding can make it differ from the ConvTranspose's own pad_end);
// ConvTranspose's code does not read it.
inline WindowGeometry SwapInOut(const WindowGeometry& g) {
  WindowGeometry t = g;
  t.in = g.out;
  t.out = g.in;
  for (size_t d = 0; d < g.rank(); ++d) {
    t.pad_end[d] = (t.out[d] - 1) * t.stride[d] - t.pad_begin[d] + (t.kernel[d] - 1) * t.dilation[d] + 1 - t.in[d];
  }
  return t;
}

// ConvGrad / ConvTransposeGrad (com.onnxamp, runtime/ops/gradient_ops.h): X and W checked as the forward checks them
// (`attrs`, `group`, `transpose`), and dY (present, X's element type, the forward's output shape). `problem` is the
// Conv whose data and filter gradients these are: the forward, or the Conv that is the ConvTranspose's adjoint
// (channels and sizes swapped).
struct ConvGradShape {
  ConvShape shape;
  ConvProblem problem;
};
inline StatusOr<ConvGradShape> ResolveConvGrad(const ir::Tensor* dy, const ir::Tensor* x, const ir::Tensor* w,
                                               const WindowAttrs& attrs, int64_t group, bool transpose) {
  if (!dy) return InvalidArgument("input 0 (dY) is required");
  ConvGradShape r;
  ONNXAMP_ASSIGN_OR_RETURN(r.shape, CheckConvInputs(x, w, nullptr, attrs, group, transpose));
  const ConvShape& shape = r.shape;
  ConvProblem& p = r.problem;
  std::vector<int64_t> out_dims = {shape.n, shape.m};
  if (transpose) {
    ONNXAMP_ASSIGN_OR_RETURN(const WindowGeometry geo, TransposeGeometry(attrs, shape.in, shape.kernel));
    p = ConvProblem{shape.n, shape.m, shape.c, shape.group, SwapInOut(geo)};
    out_dims.insert(out_dims.end(), geo.out.begin(), geo.out.end());
  } else {
    p = ConvProblem{shape.n, shape.c, shape.m, shape.group, {}};
    ONNXAMP_ASSIGN_OR_RETURN(p.geo, ForwardGeometry(attrs, shape.in, shape.kernel));
    out_dims.insert(out_dims.end(), p.geo.out.begin(), p.geo.out.end());
  }
  const char* forward = transpose ? "ConvTranspose" : "Conv";
  if (dy->dtype() != x->dtype()) {
    return InvalidArgument("input 0 (dY) has element type ", DTypeName(dy->dtype()), ", expected ",
                           DTypeName(x->dtype()), " (the type of X)");
  }
  if (dy->dims() != out_dims) {
    return InvalidArgument("input 0 (dY) has shape ", ShapeToString(dy->dims()), ", expected ", ShapeToString(out_dims),
                           " (", forward, "'s output for X ", ShapeToString(x->dims()), " and W ",
                           ShapeToString(w->dims()), ")");
  }
  return r;
}

// ConvGrad's optional outputs, each allocated when requested (else null), of X's element type: dX of X's shape, dW
// of W's and dB of [channels] (the forward's output channels).
struct ConvGradOutputs {
  ir::Tensor* dx = nullptr;
  ir::Tensor* dw = nullptr;
  ir::Tensor* db = nullptr;
};
inline StatusOr<ConvGradOutputs> AllocateConvGradOutputs(exec::KernelContext& ctx, const ir::Tensor& x,
                                                         const ir::Tensor& w, int64_t channels) {
  ConvGradOutputs o;
  if (ctx.output_requested(0)) {
    ONNXAMP_ASSIGN_OR_RETURN(o.dx, ctx.AllocateOutput(0, x.dtype(), x.dims()));
  }
  if (ctx.output_requested(1)) {
    ONNXAMP_ASSIGN_OR_RETURN(o.dw, ctx.AllocateOutput(1, x.dtype(), w.dims()));
  }
  if (ctx.output_requested(2)) {
    ONNXAMP_ASSIGN_OR_RETURN(o.db, ctx.AllocateOutput(2, x.dtype(), {channels}));
  }
  return o;
}

}  // namespace onnxamp::ops
