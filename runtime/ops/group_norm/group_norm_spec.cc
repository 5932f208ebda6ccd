// GroupNormalization and InstanceNormalization: attribute parsing and grouping shared by every backend (see
// group_norm.h).
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/group_norm/group_norm.h"

namespace onnxamp::ops {

Status ParseGroupNormSpec(const exec::KernelInfo& info, bool instance, GroupNormSpec* spec) {
  const ir::Node& node = info.node;
  spec->instance = instance;
  spec->per_channel = instance || info.opset >= 21;
  spec->epsilon = node.GetFloat("epsilon", 1e-5f);
  if (instance) return Status::Ok();
  spec->groups = node.GetInt("num_groups", 0);
  if (spec->groups <= 0) {
    return InvalidArgument("attribute 'num_groups' must be given and positive, got ", spec->groups);
  }
  if (spec->per_channel) {
    const int64_t stash = node.GetInt("stash_type", 1);
    if (stash != 1) return Unimplemented("attribute 'stash_type' = ", stash, " is not supported (1: float)");
  }
  return Status::Ok();
}

StatusOr<GroupNormShape> ResolveGroupNormShape(const GroupNormSpec& spec, const ir::Tensor* x) {
  if (!x) return InvalidArgument(spec.x_name(), " is missing");
  if (x->rank() < 2) {
    return InvalidArgument(spec.x_name(), ": expected rank >= 2 ([N, C, ...]), got shape ",
                           reduce::DimsToString(x->dims()));
  }
  GroupNormShape shape;
  shape.batch = x->dims()[0];
  shape.channels = x->dims()[1];
  shape.groups = spec.instance ? shape.channels : spec.groups;
  if (!spec.instance && shape.channels % shape.groups != 0) {
    return InvalidArgument("input 0 (X): channel count ", shape.channels,
                           " is not a multiple of attribute 'num_groups' ", shape.groups);
  }
  shape.channels_per_group = spec.instance ? 1 : shape.channels / shape.groups;
  shape.run = reduce::Product(x->dims(), 2);
  shape.param_count = spec.per_channel ? shape.channels : shape.groups;
  return shape;
}

Status ParseGroupNormGradSpec(const exec::KernelInfo& info, GroupNormSpec* spec) {
  const int64_t groups = info.node.GetInt("num_groups", 0);
  spec->instance = groups == 0;
  spec->groups = groups;
  spec->per_channel = info.node.GetInt("per_channel", 1) != 0;
  spec->epsilon = info.node.GetFloat("epsilon", 1e-5f);
  return groups < 0 || (spec->instance && !spec->per_channel)
             ? InvalidArgument("attribute 'num_groups' must be positive (or 0 with per_channel = 1), got ", groups)
             : Status::Ok();
}

StatusOr<GroupNormShape> ResolveGroupNormGradShape(const GroupNormSpec& spec, const ir::Tensor* dy,
                                                   const ir::Tensor* x) {
  if (!dy) return InvalidArgument("input 0 (dY) is required");
  ONNXAMP_ASSIGN_OR_RETURN(const GroupNormShape shape, ResolveGroupNormShape(spec, x));
  if (dy->dtype() != x->dtype() || dy->dims() != x->dims()) {
    return InvalidArgument("input 0 (dY) must have X's type and shape ", reduce::DimsToString(x->dims()));
  }
  return shape;
}

}  // namespace onnxamp::ops
