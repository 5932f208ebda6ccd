// MeanVarianceNormalization, LpNormalization and their com.onnxamp gradients: the attributes, the input checks and
// the axes each normalises over, shared by the CPU kernels (normalize_cpu.cc) and the CUDA kernels
// (runtime/cuda/ops/norm_reduce/norm_more_ops.cc), so that both refuse the same nodes with the same messages.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

// Added to MeanVarianceNormalization's standard deviation before dividing.
inline constexpr double kMvnEpsilon = 1e-9;

// MeanVarianceNormalization's `axes` (default [0, 2, 3]; an empty list: every axis, as ReduceMean's empty axes in
// the function body); `grad` for the com.onnxamp gradient.
struct MvnSpec {
  bool grad = false;
  std::vector<int64_t> axes = {0, 2, 3};
  bool all_axes = false;
};

inline Status ParseMvnSpec(const exec::KernelInfo& info, MvnSpec* spec) {
  spec->grad = info.node.domain() == exec::kInternalDomain;
  const ir::Attribute* axes = info.node.FindAttribute("axes");
  if (axes && axes->type() != ir::AttrType::kInts) return InvalidArgument("attribute 'axes' must be a list of ints");
  if (axes) {
    spec->axes = axes->ints;
    spec->all_axes = spec->axes.empty();
  }
  return Status::Ok();
}

// LpNormalization's `axis` and `p` (1 or 2); `grad` for the com.onnxamp gradient.
struct LpNormSpec {
  bool grad = false;
  int64_t axis = -1;
  int64_t p = 2;
};

inline Status ParseLpNormSpec(const exec::KernelInfo& info, LpNormSpec* spec) {
  spec->grad = info.node.domain() == exec::kInternalDomain;
  auto axis = IntAttribute(info.node, "axis", -1);
  auto p = IntAttribute(info.node, "p", 2);
  if (!axis.ok() || !p.ok()) return axis.ok() ? p.status() : axis.status();
  if (*p != 1 && *p != 2) return InvalidArgument("attribute 'p' is ", *p, ", expected 1 or 2");
  spec->axis = *axis;
  spec->p = *p;
  return Status::Ok();
}

// A normalisation node's inputs: X (input 0 of the forward, 1 of the gradient, named `x_role`) and the gradient's dY
// (input 0), which must match X's type and shape.
struct NormalizeInputs {
  const ir::Tensor* x = nullptr;
  const ir::Tensor* dy = nullptr;
};

inline StatusOr<NormalizeInputs> ResolveNormalizeInputs(const exec::KernelContext& ctx, bool grad,
                                                        std::string_view x_role) {
  NormalizeInputs in;
  if (grad) {
    ONNXAMP_ASSIGN_OR_RETURN(in.dy, RequireInput(ctx, 0, "dY"));
  }
  ONNXAMP_ASSIGN_OR_RETURN(in.x, RequireInput(ctx, grad ? 1 : 0, x_role));
  if (in.dy && (in.dy->dims() != in.x->dims() || in.dy->dtype() != in.x->dtype())) {
    return InvalidArgument("dY ", ShapeToString(in.dy->dims()), " does not match X ", ShapeToString(in.x->dims()));
  }
  return in;
}

// The axes of a rank-`rank` input that a MeanVarianceNormalization node reduces over.
inline StatusOr<std::vector<bool>> MvnReducedAxes(const MvnSpec& spec, int64_t rank) {
  std::vector<bool> reduced(static_cast<size_t>(rank), spec.all_axes);
  if (spec.all_axes) return reduced;
  for (int64_t a : spec.axes) {
    if (a < -rank || a >= rank) {
      return InvalidArgument("attribute 'axes' holds ", a, ", outside [", -rank, ", ", rank - 1, "] for rank ", rank);
    }
    reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  }
  return reduced;
}

// The axis of a rank-`rank` input that an LpNormalization node normalises along (flagged).
inline StatusOr<std::vector<bool>> LpNormReducedAxes(const LpNormSpec& spec, int64_t rank) {
  ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(spec.axis, rank));
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  reduced[static_cast<size_t>(axis)] = true;
  return reduced;
}

}  // namespace onnxamp::ops
