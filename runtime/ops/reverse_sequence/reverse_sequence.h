// ReverseSequence's attributes and input checks, shared by the CPU kernel (reverse_sequence_cpu.cc) and the CUDA
// kernel (runtime/cuda/ops/tensor/reverse_sequence_cuda.cc), so that both refuse the same nodes with the same
// messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

struct ReverseSequenceAxes {
  int64_t batch_axis = 1, time_axis = 0;
};

inline Status ParseReverseSequenceAxes(const ir::Node& node, ReverseSequenceAxes* out) {
  out->batch_axis = node.GetInt("batch_axis", 1);
  out->time_axis = node.GetInt("time_axis", 0);
  if (!((out->batch_axis == 0 && out->time_axis == 1) || (out->batch_axis == 1 && out->time_axis == 0))) {
    return InvalidArgument("attributes 'batch_axis' (", out->batch_axis, ") and 'time_axis' (", out->time_axis,
                           ") must be 0 and 1 in some order");
  }
  return Status::Ok();
}

// One run's geometry: input [T, B, ...] or [B, T, ...] as steps x batch blocks of `inner` elements, and the checked
// lengths (sequence_lens, read on the host: [B], each in [0, T]).
struct ReverseSequenceShape {
  int64_t steps = 0, batch = 0, inner = 1;
  std::vector<int64_t> lens;
};

inline StatusOr<ReverseSequenceShape> ResolveReverseSequence(const exec::KernelContext& ctx,
                                                             const ReverseSequenceAxes& axes) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* lens_t, RequireInput(ctx, 1, "sequence_lens"));
  if (x->rank() < 2) {
    return InvalidArgument(InputLabel(ctx, 0, "input"), " must have rank >= 2, got ", ShapeToString(x->dims()));
  }
  ReverseSequenceShape s;
  s.steps = x->dims()[static_cast<size_t>(axes.time_axis)];
  s.batch = x->dims()[static_cast<size_t>(axes.batch_axis)];
  const std::string label = InputLabel(ctx, 1, "sequence_lens");
  ONNXAMP_ASSIGN_OR_RETURN(s.lens, ReadInt64s(*lens_t, label));
  if (static_cast<int64_t>(s.lens.size()) != s.batch || lens_t->rank() != 1) {
    return InvalidArgument(label, " must be [", s.batch, "] (the batch dim of input ", ShapeToString(x->dims()),
                           "), got ", ShapeToString(lens_t->dims()));
  }
  for (size_t b = 0; b < s.lens.size(); ++b) {
    if (s.lens[b] < 0 || s.lens[b] > s.steps) {
      return InvalidArgument(label, ": element ", b, " is ", s.lens[b], ", outside [0, ", s.steps, "]");
    }
  }
  s.inner = DimProduct(x->dims(), 2, x->dims().size());
  return s;
}

}  // namespace onnxamp::ops
