// LRN and com.onnxamp LRNGrad: the attributes and the input checks, shared by the CPU kernel (lrn_cpu.cc) and the
// CUDA kernel (runtime/cuda/ops/norm_reduce/norm_more_ops.cc), so that both refuse the same nodes with the same
// messages and window the same channels.
#pragma once

#include <cstdint>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {

// LRN's attributes; `grad` for LRNGrad(dY, X).
struct LrnSpec {
  bool grad = false;
  int64_t size = 0;
  float alpha = 1e-4f, beta = 0.75f, bias = 1.0f;
};

inline Status ParseLrnSpec(const exec::KernelInfo& info, LrnSpec* spec) {
  spec->grad = info.node.op_type() == kLrnGradOp;
  spec->size = info.node.GetInt("size", 0);
  spec->alpha = info.node.GetFloat("alpha", 1e-4f);
  spec->beta = info.node.GetFloat("beta", 0.75f);
  spec->bias = info.node.GetFloat("bias", 1.0f);
  if (spec->size <= 0) return InvalidArgument("attribute 'size' must be given and positive, got ", spec->size);
  return Status::Ok();
}

// A node's checked inputs, X viewed as [n, c, run] (run: the product of the dims after the channels), and the window
// of channel ch: [ch - lo, ch + hi] clipped to [0, c). scale = alpha / size in double.
struct LrnShape {
  const ir::Tensor* x = nullptr;
  const ir::Tensor* dy = nullptr;  // LRNGrad only
  int64_t n = 0, c = 0, run = 1;
  int64_t lo = 0, hi = 0;
  double scale = 0;
};

// X (input 0, or 1 for LRNGrad) present with rank >= 2, and LRNGrad's dY present with X's type and shape.
inline StatusOr<LrnShape> ResolveLrnShape(const exec::KernelContext& ctx, const LrnSpec& spec) {
  LrnShape s;
  const size_t xi = spec.grad ? 1 : 0;
  ONNXAMP_ASSIGN_OR_RETURN(s.x, RequireInput(ctx, xi, "X"));
  if (spec.grad) {
    ONNXAMP_ASSIGN_OR_RETURN(s.dy, RequireInput(ctx, 0, "dY"));
    if (s.dy->dtype() != s.x->dtype() || s.dy->dims() != s.x->dims()) {
      return InvalidArgument(InputLabel(ctx, 0, "dY"), " must have X's type and shape ", ShapeToString(s.x->dims()));
    }
  }
  if (s.x->rank() < 2) {
    return InvalidArgument(InputLabel(ctx, xi, "X"), " must be [N, C, ...], got ", ShapeToString(s.x->dims()));
  }
  s.n = s.x->dims()[0];
  s.c = s.x->dims()[1];
  s.run = DimProduct(s.x->dims(), 2, s.x->dims().size());
  s.lo = (spec.size - 1) / 2;
  s.hi = spec.size - 1 - s.lo;
  s.scale = static_cast<double>(spec.alpha) / static_cast<double>(spec.size);
  return s;
}

}  // namespace onnxamp::ops
