// The CPU implementations of Conv and ConvTranspose (without their kernels' fusions and type handling), shared by
// their kernels and by the gradient kernels: ConvGrad's dX is a ConvTranspose of dY with W, ConvTransposeGrad's dX a
// Conv of dY with W (conv/conv_grad_cpu.cc). Instantiated for float, double, Float16 and BFloat16 (the plain loops)
// and for float and double (im2col/col2im + GEMM).
#pragma once

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
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

}  // namespace onnxamp::ops
