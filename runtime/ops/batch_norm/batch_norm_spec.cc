// BatchNormalization: attribute parsing and the view of X shared by every backend (see batch_norm.h).
#include "runtime/ops/batch_norm/batch_norm.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"

namespace onnxamp::ops {

Status ParseBatchNormSpec(const exec::KernelInfo& info, BatchNormSpec* spec) {
  const ir::Node& node = info.node;
  spec->opset = info.opset;
  spec->epsilon = node.GetFloat("epsilon", 1e-5f);
  spec->momentum = node.GetFloat("momentum", 0.9f);
  if (!(spec->epsilon >= 0)) return InvalidArgument("attribute 'epsilon' must be >= 0, got ", spec->epsilon);
  if (spec->opset < 9) {
    const int64_t spatial = node.GetInt("spatial", 1);
    if (spatial != 0 && spatial != 1) return InvalidArgument("attribute 'spatial' must be 0 or 1, got ", spatial);
    spec->spatial = spatial == 1;
  }
  bool extra_outputs = false;
  for (size_t i = 1; i < node.outputs().size(); ++i) extra_outputs |= node.output(i) != nullptr;
  if (spec->opset >= 14) {
    const int64_t mode = node.GetInt("training_mode", 0);
    if (mode != 0 && mode != 1) return InvalidArgument("attribute 'training_mode' must be 0 or 1, got ", mode);
    spec->training = mode == 1;
    if (!spec->training && extra_outputs) {
      return InvalidArgument("outputs running_mean and running_var exist only with attribute 'training_mode' = 1");
    }
    if (node.outputs().size() > 3) {
      return InvalidArgument("expected at most 3 outputs at opset ", spec->opset, ", got ", node.outputs().size());
    }
  } else {
    // Opset 6 says the mode with `is_test`; later opsets before 14 by the outputs requested.
    const bool is_test = spec->opset < 7 && node.GetInt("is_test", 0) != 0;
    if (is_test && extra_outputs) {
      return InvalidArgument("attribute 'is_test' = 1 allows only output Y, but more outputs are requested");
    }
    spec->training = extra_outputs;
  }
  return Status::Ok();
}

StatusOr<BatchNormShape> ResolveBatchNormShape(const ir::Tensor* x, const BatchNormSpec& spec) {
  if (!x) return InvalidArgument("input 0 (X) is missing");
  if (x->rank() < 2) {
    return InvalidArgument("input 0 (X): expected rank >= 2 ([N, C, ...]), got shape ",
                           reduce::DimsToString(x->dims()));
  }
  BatchNormShape shape;
  shape.batch = x->dims()[0];
  const int64_t spatial_size = reduce::Product(x->dims(), 2);
  shape.params = spec.spatial ? x->dims()[1] : x->dims()[1] * spatial_size;
  shape.run = spec.spatial ? spatial_size : 1;
  return shape;
}

}  // namespace onnxamp::ops
