// The trainer's graph construction steps as GraphPasses (runtime/passes/pass.h), so that they run in a PassPipeline
// beside the converter's and the optimizer's passes, with ir::Verify after each one.
#pragma once

#include <memory>

#include "runtime/passes/pass.h"
#include "trainer/autodiff/autodiff.h"
#include "trainer/graph/loss.h"

namespace onnxamp::trainer {

// "attach_loss": AttachLoss(model, options); what it attached is written to *result (which must outlive the pass).
std::unique_ptr<passes::GraphPass> MakeAttachLossPass(LossOptions options, AttachedLoss* result);

// "build_gradients": BuildGradients(model, request); the gradient outputs are written to *result. An empty
// request.loss takes loss->loss, the loss an attach_loss pass earlier in the same pipeline attached (then `loss` must
// be given). `loss` and `result` must outlive the pass.
std::unique_ptr<passes::GraphPass> MakeGradientPass(GradientRequest request, const AttachedLoss* loss,
                                                    GradientResult* result);

}  // namespace onnxamp::trainer
