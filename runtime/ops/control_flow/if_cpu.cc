// If (CPU, opsets 1-25): runs then_branch or else_branch by the one-element bool `cond` and returns that branch's
// outputs (their shapes may differ between the branches). Tensor outputs only: the sequence and optional outputs of
// opsets 16+ are refused when the session is created, as every sequence value is.
#include <memory>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/control_flow/subgraph.h"

namespace onnxamp::ops {
namespace {

class IfCpu : public exec::OpKernel {
 public:
  IfCpu(const exec::KernelInfo& info, Status* st) {
    for (auto [name, branch] : {std::pair{"then_branch", &then_}, std::pair{"else_branch", &else_}}) {
      StatusOr<std::unique_ptr<SubgraphSession>> s = SubgraphSession::Create(info, name);
      if (!s.ok()) {
        *st = s.status();
        return;
      }
      *branch = std::move(s).value();
      if ((*branch)->num_inputs() != 0) {
        *st = InvalidArgument("'", name, "' must take no inputs, it takes ", (*branch)->num_inputs());
        return;
      }
      if ((*branch)->num_outputs() != info.node.outputs().size()) {
        *st = InvalidArgument("'", name, "' has ", (*branch)->num_outputs(), " outputs, the node ",
                              info.node.outputs().size());
        return;
      }
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* cond_t, RequireInput(ctx, 0, "cond"));
    ONNXAMP_ASSIGN_OR_RETURN(const bool cond, ReadCondition(*cond_t, InputLabel(ctx, 0, "cond")));
    const SubgraphSession& branch = cond ? *then_ : *else_;
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> outputs, branch.Run(ctx, {}, ctx.seed()));
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!ctx.output_requested(i)) continue;
      ONNXAMP_RETURN_IF_ERROR(
          CheckOutputType(ctx, i, outputs[i], StrCat("output ", i, " of '", branch.attribute(), "'")));
      ONNXAMP_RETURN_IF_ERROR(ctx.SetOutput(i, std::move(outputs[i])));
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<SubgraphSession> then_, else_;
};

}  // namespace

void RegisterIfKernels(exec::KernelRegistry& r) {
  r.Register({"If", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<IfCpu>});
}

}  // namespace onnxamp::ops
