// The loss the trainer attaches to a model's output, built from ONNX ops in FP32 (after the precision conversion, so
// it never follows a low-precision input into FP16 overflow).
#pragma once

#include <string>

#include "runtime/common/status.h"
#include "runtime/ir/model.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {

struct AttachedLoss {
  std::string loss;        // the scalar FP32 loss, a graph output
  std::string labels;      // the new graph input with the labels or targets ("" for kModelOutput)
  std::string prediction;  // the model output the loss reads (or whose scores it reads, below)
  // When `prediction` is a Softmax's (Sigmoid's) output and the loss cross-entropy (BCE with logits): the
  // Softmax's (Sigmoid's) input, which the loss reads instead, as the cross-entropy of the probabilities; else "".
  std::string scores;
};

// Appends the loss of `options` to the model's graph. Errors name the output and say what is wrong with it (missing,
// ambiguous, a rank the class axis does not fit). A classifier exported with its Softmax (or Sigmoid) trains on the
// scores before it (AttachedLoss::scores).
StatusOr<AttachedLoss> AttachLoss(ir::Model& model, const LossOptions& options);

}  // namespace onnxamp::trainer
