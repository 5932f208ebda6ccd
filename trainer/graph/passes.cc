// The trainer's graph steps as GraphPasses (see passes.h).
#include "trainer/graph/passes.h"

#include <utility>

namespace onnxamp::trainer {

std::unique_ptr<passes::GraphPass> MakeAttachLossPass(LossOptions options, AttachedLoss* result) {
  auto run = [options = std::move(options), result](ir::Model& model, const passes::PassContext&,
                                                    bool* changed) -> Status {
    ONNXAMP_ASSIGN_OR_RETURN(*result, AttachLoss(model, options));
    *changed = true;
    return Status::Ok();
  };
  return passes::MakePass("attach_loss", std::move(run));
}

std::unique_ptr<passes::GraphPass> MakeGradientPass(GradientRequest request, const AttachedLoss* loss,
                                                    GradientResult* result) {
  auto run = [request = std::move(request), loss, result](ir::Model& model, const passes::PassContext&,
                                                          bool* changed) -> Status {
    GradientRequest r = request;
    if (r.loss.empty()) {
      if (!loss || loss->loss.empty()) {
        return InvalidArgument("no loss to differentiate: the request names none and no attach_loss pass ran before");
      }
      r.loss = loss->loss;
    }
    ONNXAMP_ASSIGN_OR_RETURN(*result, BuildGradients(model, r));
    *changed = result->nodes_added > 0;
    return Status::Ok();
  };
  return passes::MakePass("build_gradients", std::move(run));
}

}  // namespace onnxamp::trainer
