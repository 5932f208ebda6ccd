// The attribute and shape rules of the binary ops with attributes (Mod, PRelu, BitShift), shared by the CPU kernels
// (binary_cpu.cc, bitshift_cpu.cc) and the CUDA kernels (runtime/cuda/ops/elementwise/math_kernels.cc), so that both
// backends refuse the same nodes with the same messages.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

// Mod's attribute fmod: true for 1 (the dividend's sign, C's fmod), false for 0 (the divisor's sign, Python's %).
inline StatusOr<bool> ReadModFmod(const ir::Node& node) {
  ONNXAMP_ASSIGN_OR_RETURN(int64_t f, IntAttribute(node, "fmod", 0));
  if (f != 0 && f != 1) return InvalidArgument("attribute 'fmod' must be 0 or 1, got ", f);
  return f == 1;
}

// A float Mod needs fmod = 1.
inline Status CheckModType(bool fmod, DType t) {
  if (IsFloatingPoint(t) && !fmod) return InvalidArgument("a float Mod needs attribute fmod = 1");
  return Status::Ok();
}

// BitShift's attribute direction: true for LEFT, false for RIGHT.
inline StatusOr<bool> ReadShiftLeft(const ir::Node& node) {
  const std::string d = node.GetString("direction", "");
  if (d != "LEFT" && d != "RIGHT") return InvalidArgument("attribute 'direction' is '", d, "', expected LEFT or RIGHT");
  return d == "LEFT";
}

// The plan of Mod (prelu false) or PRelu(X, slope) at `opset` over inputs a and b: both present and of one element
// type, numpy broadcasting; PRelu-6 reads a 1-D slope of X's channel count along axis 1 ([C] as [C, 1, ..., 1]), and
// PRelu's result must have X's shape.
inline StatusOr<BroadcastPlan> PlanBinaryAttrInputs(const ir::Tensor* a, const ir::Tensor* b, bool prelu,
                                                    int64_t opset) {
  if (!a || !b) return InvalidArgument("input ", a ? 1 : 0, " is missing");
  if (a->dtype() != b->dtype()) {
    return InvalidArgument("input 1 has element type ", DTypeName(b->dtype()), ", expected ", DTypeName(a->dtype()),
                           " like input 0");
  }
  std::vector<int64_t> b_dims = b->dims();
  if (prelu && opset < 7 && b->rank() == 1 && a->rank() >= 2 && b_dims[0] == a->dims()[1]) {
    b_dims.assign(static_cast<size_t>(a->rank() - 1), 1);
    b_dims[0] = b->dims()[0];
  }
  ONNXAMP_ASSIGN_OR_RETURN(BroadcastPlan plan, MakeBinaryPlan(a->dims(), b_dims, LegacyBroadcast{}));
  if (prelu && plan.output_dims() != a->dims()) {
    return InvalidArgument("input 1 (slope) of shape ", ShapeToString(b->dims()),
                           " does not broadcast to input 0 (X)'s shape ", ShapeToString(a->dims()));
  }
  return plan;
}

// The plan of BitShift(X, Y): both present, Y of X's element type, numpy broadcasting, and then X's type one of the
// unsigned integer types.
inline StatusOr<BroadcastPlan> PlanBitShiftInputs(const exec::KernelContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "X"));
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* y, RequireInput(ctx, 1, "Y"));
  if (y->dtype() != x->dtype()) {
    return InvalidArgument(InputLabel(ctx, 1, "Y"), " is ", DTypeName(y->dtype()), ", expected X's ",
                           DTypeName(x->dtype()));
  }
  ONNXAMP_ASSIGN_OR_RETURN(BroadcastPlan plan, MakeBinaryPlan(x->dims(), y->dims(), LegacyBroadcast{}));
  const DType t = x->dtype();
  if (t != DType::kUint8 && t != DType::kUint16 && t != DType::kUint32 && t != DType::kUint64) {
    return InvalidArgument(InputLabel(ctx, 0, "X"), " is ", DTypeName(t), ", expected uint8, uint16, uint32 or uint64");
  }
  return plan;
}

}  // namespace onnxamp::ops
