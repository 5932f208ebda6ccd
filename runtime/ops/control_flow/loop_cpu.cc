// Loop (CPU, opsets 1-25): inputs M (optional int64 trip count), cond (optional bool) and N loop-carried values;
// the body takes (iteration_num, cond, N values) and returns (cond, N values, K scan outputs). The loop runs while
// the iteration number is below M (when given) and the condition holds (the cond input, then the body's output); its
// outputs are the N final values and the K scan outputs of every iteration stacked along a new first axis. Without
// M and cond it runs until the body's condition turns false. Loop-carried values may change shape between
// iterations; scan outputs may not. Tensor values only (the sequence and optional values of opsets 16+ are refused
// when the session is created, as every sequence value is). Attribute seed_reverse (onnxamp's backward Loop,
// trainer/autodiff/loop_gradient.h; M required): iteration i draws the random numbers of iteration M - 1 - i.
#include <memory>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/control_flow/subgraph.h"

namespace onnxamp::ops {
namespace {

class LoopCpu : public exec::OpKernel {
 public:
  LoopCpu(const exec::KernelInfo& info, Status* st) {
    const size_t node_inputs = info.node.inputs().size();
    if (node_inputs < 2) {
      *st = InvalidArgument("takes inputs M and cond (each may be empty), given ", node_inputs, " inputs");
      return;
    }
    carried_ = node_inputs - 2;
    StatusOr<std::unique_ptr<SubgraphSession>> body = SubgraphSession::Create(info, "body");
    if (!body.ok()) {
      *st = body.status();
      return;
    }
    body_ = std::move(body).value();
    if (body_->num_inputs() != carried_ + 2) {
      *st =
          InvalidArgument("'body' takes ", body_->num_inputs(), " inputs; with ", carried_,
                          " loop-carried values it must take ", carried_ + 2, " (iteration_num, cond and the values)");
      return;
    }
    if (body_->num_outputs() < carried_ + 1) {
      *st = InvalidArgument("'body' has ", body_->num_outputs(), " outputs; with ", carried_,
                            " loop-carried values it must have at least ", carried_ + 1, " (cond and the values)");
      return;
    }
    scans_ = body_->num_outputs() - 1 - carried_;
    if (info.node.outputs().size() != carried_ + scans_) {
      *st = InvalidArgument("has ", info.node.outputs().size(), " outputs; 'body' gives ", carried_,
                            " loop-carried values and ", scans_, " scan outputs");
    }
    seed_reverse_ = info.node.GetInt("seed_reverse", 0) != 0;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    int64_t trip_count = -1;  // -1: no limit
    if (const ir::Tensor* m = ctx.input(0)) {
      if (m->dtype() != DType::kInt64 || m->num_elements() != 1) {
        return InvalidArgument(InputLabel(ctx, 0, "M"), " must be an int64 tensor of one element, got ",
                               DTypeName(m->dtype()), " ", ShapeToString(m->dims()));
      }
      trip_count = std::max<int64_t>(m->values<int64_t>()[0], 0);
    }
    if (seed_reverse_ && trip_count < 0) return InvalidArgument("seed_reverse needs the trip count M");
    bool cond = true;
    if (const ir::Tensor* c = ctx.input(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(cond, ReadCondition(*c, InputLabel(ctx, 1, "cond")));
    }
    std::vector<ir::Tensor> values;
    for (size_t k = 0; k < carried_; ++k) {
      const ir::Tensor* v = ctx.input(2 + k);
      if (!v) return InvalidArgument(InputLabel(ctx, 2 + k, "v_initial"), " is missing");
      values.push_back(*v);
    }
    std::vector<std::vector<ir::Tensor>> scans(scans_);
    uint64_t held = 0;  // bytes of the scan outputs' slices
    for (int64_t it = 0; (trip_count < 0 || it < trip_count) && cond; ++it) {
      std::vector<ir::Tensor> formal;
      ir::Tensor iteration = ir::Tensor::Uninitialized(DType::kInt64, {});
      iteration.mutable_values<int64_t>()[0] = it;
      ir::Tensor cond_in = ir::Tensor::Uninitialized(DType::kBool, {});
      cond_in.mutable_values<uint8_t>()[0] = 1;
      formal.push_back(std::move(iteration));
      formal.push_back(std::move(cond_in));
      for (ir::Tensor& v : values) formal.push_back(std::move(v));
      StatusOr<std::vector<ir::Tensor>> out =
          body_->Run(ctx, std::move(formal), IterationSeed(ctx, seed_reverse_ ? trip_count - 1 - it : it));
      if (!out.ok()) return out.status().WithContext(StrCat("iteration ", it));
      ONNXAMP_ASSIGN_OR_RETURN(cond, ReadCondition((*out)[0], StrCat("iteration ", it, ": the body's cond output")));
      values.assign(std::make_move_iterator(out->begin() + 1), std::make_move_iterator(out->begin() + 1 + carried_));
      for (size_t k = 0; k < scans_; ++k) {
        held += (*out)[1 + carried_ + k].nbytes();
        scans[k].push_back(std::move((*out)[1 + carried_ + k]));
      }
      ONNXAMP_RETURN_IF_ERROR(CheckHeldBytes(held, *body_, it));
    }
    for (size_t k = 0; k < carried_; ++k) {
      if (!ctx.output_requested(k)) continue;
      ONNXAMP_RETURN_IF_ERROR(CheckOutputType(ctx, k, values[k], StrCat("loop-carried value ", k)));
      ONNXAMP_RETURN_IF_ERROR(ctx.SetOutput(k, std::move(values[k])));
    }
    for (size_t k = 0; k < scans_; ++k) {
      const size_t body_output = 1 + carried_ + k;
      ONNXAMP_RETURN_IF_ERROR(SetStackedOutput(ctx, carried_ + k, scans[k], 0, false, body_->output_type(body_output),
                                               body_->output_dims(body_output), StrCat("scan output ", k)));
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<SubgraphSession> body_;
  size_t carried_ = 0, scans_ = 0;
  bool seed_reverse_ = false;
};

}  // namespace

void RegisterLoopKernels(exec::KernelRegistry& r) {
  r.Register({"Loop", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<LoopCpu>});
}

}  // namespace onnxamp::ops
