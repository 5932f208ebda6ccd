// The OpInfos of the ai.onnx.preview.training optimizer ops (optimizers_cpu.cc).
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

void RegisterPreviewTrainingOpInfos(OpInfoRegistry& r) {
  for (const char* op : {"Adagrad", "Momentum", "Adam"}) {
    r.Add(op, "ai.onnx.preview.training").NotDifferentiable("an optimizer step: it consumes gradients");
  }
}

}  // namespace onnxamp::ops
