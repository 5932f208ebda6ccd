// Device training keeps a low-precision copy of every parameter next to its FP32 master weights, rewritten by the
// optimizer step in the same pass that updates the master (trainer/cuda/fused_optimizer.h). This rewrite makes the
// graphs read those copies: the Cast from a parameter to the AMP dtype, which mixed-precision training graphs start
// with (training_graph.cc, RestoreMasterWeights), becomes a graph input of that dtype, so the forward pass no longer
// converts the weights on every step. The gradient still reaches the FP32 parameter: autodiff's Cast back of the
// low-precision gradient is an ordinary node of the backward pass, not the forward Cast removed here.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/ir/model.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {

// A parameter's low-precision copy, a graph input of the rewritten graph.
struct LowPrecisionWeight {
  size_t param = 0;   // index into TrainingGraphs::params
  std::string input;  // the new graph input ("<param>_fp16" or a unique variant)
};

// Replaces every `Cast(to = low)` whose input is a parameter (a graph input of `model` named in `params`) by a new
// graph input of dtype `low` and the parameter's shape, read by all of the Cast's consumers; the Cast is removed.
// Returns the new inputs in order of `params`. Nothing changes when `low` is not float16 or bfloat16 or no such Cast
// exists. A parameter cast twice to the same dtype gets one input.
std::vector<LowPrecisionWeight> ExternalizeWeightCasts(ir::Model& model, const std::vector<Parameter>& params,
                                                       DType low);

}  // namespace onnxamp::trainer
