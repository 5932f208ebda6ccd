// Before a backward pass: the nodes a gradient has to flow through that have no gradient builder of their own but a
// decomposition (runtime/ops/decompose.h: LayerNormalizationGrad, ...) are replaced by the ops it is made of. This is
// how second derivatives reach through the backward ops a first expansion wrote (ONNX's Gradient operator, a
// gradient penalty in `train`): the fused backward kernel stays wherever no gradient flows through it.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/model.h"

namespace onnxamp::trainer {

// Decomposes the nodes of model.graph (not of its subgraphs) that lie on a path from a value named in `wrt` to one
// named in `targets`, have no gradient builder at their opset, and have a decomposition; again for what the
// decompositions added, until none is left. Returns how many nodes were decomposed. Errors name the node; the model
// may then hold a partial decomposition (callers work on a copy).
StatusOr<int> DecomposeForGradients(ir::Model& model, const std::vector<std::string>& wrt,
                                    const std::vector<std::string>& targets);

}  // namespace onnxamp::trainer
