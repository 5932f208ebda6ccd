// GemmSpec: Gemm's attribute parsing and shape checks (see gemm.h).
#include <cmath>

#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/gemm/gemm.h"

namespace onnxamp::ops {

Status GemmSpec::Init(const exec::KernelInfo& info) {
  const ir::Node& node = info.node;
  opset_ = info.opset;
  alpha_ = node.GetFloat("alpha", 1.0f);
  beta_ = node.GetFloat("beta", 1.0f);
  int64_t ta = 0, tb = 0, broadcast = 0;
  ONNXAMP_RETURN_IF_ERROR(GetIntAttr(node, "transA", 0, &ta));
  ONNXAMP_RETURN_IF_ERROR(GetIntAttr(node, "transB", 0, &tb));
  ONNXAMP_RETURN_IF_ERROR(GetIntAttr(node, "broadcast", 0, &broadcast));
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1)) {
    return InvalidArgument("attributes 'transA' and 'transB' must be 0 or 1, got ", ta, " and ", tb);
  }
  trans_a_ = ta == 1;
  trans_b_ = tb == 1;
  // Before opset 7, C is broadcast only when `broadcast` says so.
  c_must_match_ = info.opset < 7 && broadcast == 0;
  return Status::Ok();
}

Status GemmSpec::Resolve(const ir::Tensor* a, const ir::Tensor* b, const ir::Tensor* c, GemmShape* s) const {
  if (!a || !b) return InvalidArgument("inputs A and B are required");
  if (!c && opset_ < 11)
    return InvalidArgument("input C is required before opset 11 (this node is at opset ", opset_, ")");
  for (const ir::Tensor* t : {b, c}) {
    if (t && t->dtype() != a->dtype()) {
      return InvalidArgument("input ", t == b ? "B" : "C", " has element type ", DTypeName(t->dtype()), ", expected ",
                             DTypeName(a->dtype()), " (the type of A)");
    }
  }
  if (a->rank() != 2 || b->rank() != 2) {
    return InvalidArgument("inputs A and B must be 2-D, got A ", ShapeToString(a->dims()), " and B ",
                           ShapeToString(b->dims()));
  }
  s->trans_a = trans_a_;
  s->trans_b = trans_b_;
  s->m = trans_a_ ? a->dims()[1] : a->dims()[0];
  s->k = trans_a_ ? a->dims()[0] : a->dims()[1];
  s->n = trans_b_ ? b->dims()[0] : b->dims()[1];
  const int64_t kb = trans_b_ ? b->dims()[1] : b->dims()[0];
  if (kb != s->k) {
    return InvalidArgument("input A ", ShapeToString(a->dims()), (trans_a_ ? " (transposed)" : ""), " has K = ", s->k,
                           " but input B ", ShapeToString(b->dims()), (trans_b_ ? " (transposed)" : ""),
                           " has K = ", kb);
  }
  s->out_dims = {s->m, s->n};
  s->c_strides.clear();
  if (c) {
    if (c_must_match_ && c->dims() != s->out_dims) {
      return InvalidArgument("input C has shape ", ShapeToString(c->dims()), ", expected ", ShapeToString(s->out_dims),
                             " (attribute 'broadcast' is 0)");
    }
    ONNXAMP_RETURN_IF_ERROR(CheckUnidirectionalBroadcast(c->dims(), s->out_dims, "input C"));
    s->c_strides = BroadcastStrides(c->dims(), s->out_dims);
  }
  return Status::Ok();
}

Status GemmSpec::CheckWholeScalars(DType dtype) const {
  constexpr float kLimit = 9.2e18f;  // inside int64_t's range
  if (alpha_ != std::trunc(alpha_) || beta_ != std::trunc(beta_) || std::abs(alpha_) > kLimit ||
      std::abs(beta_) > kLimit) {
    return InvalidArgument("alpha (", alpha_, ") and beta (", beta_, ") must be whole numbers for element type ",
                           DTypeName(dtype));
  }
  return Status::Ok();
}

}  // namespace onnxamp::ops
