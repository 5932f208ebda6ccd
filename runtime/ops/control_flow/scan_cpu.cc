// Scan (CPU, opsets 9-25): N state variables and M scan inputs (num_scan_inputs) in; the body takes the N states and
// one slice of each scan input (along scan_input_axes, forward or reversed by scan_input_directions) and returns the
// N next states and K scan-output slices. The outputs are the N final states and each scan output's slices stacked
// along scan_output_axes (in order, or reversed by scan_output_directions). Every scan input must have the same
// length along its axis.
//
// Attribute seed_reverse (onnxamp's backward Scan, trainer/autodiff/loop_gradient.h): iteration t draws the random
// numbers of iteration length - 1 - t, those of the forward iteration it differentiates.
//
// Scan-8 (opset 8) is batched: an optional int64 sequence_lens [B] first, then the states [B, ...] and the scan inputs
// [B, L, ...] (`directions` per scan input); each batch item scans its own first sequence_lens[b] steps (in reverse
// within them for direction 1), and its scan outputs [B, L, ...] are zero past its length, as ONNX Runtime's.
#include <memory>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/control_flow/subgraph.h"

namespace onnxamp::ops {
namespace {

class ScanCpu : public exec::OpKernel {
 public:
  ScanCpu(const exec::KernelInfo& info, Status* st) {
    const ir::Node& node = info.node;
    const int64_t m = node.GetInt("num_scan_inputs", -1);
    const size_t node_inputs = node.inputs().size();
    if (m < 1 || static_cast<size_t>(m) > node_inputs) {
      *st = InvalidArgument("attribute 'num_scan_inputs' (", m, ") must be in [1, ", node_inputs,
                            "], the number of inputs");
      return;
    }
    scan_inputs_ = static_cast<size_t>(m);
    states_ = node_inputs - scan_inputs_;
    StatusOr<std::unique_ptr<SubgraphSession>> body = SubgraphSession::Create(info, "body");
    if (!body.ok()) {
      *st = body.status();
      return;
    }
    body_ = std::move(body).value();
    if (body_->num_inputs() != node_inputs) {
      *st = InvalidArgument("'body' takes ", body_->num_inputs(), " inputs, the node has ", node_inputs, " (", states_,
                            " states and ", scan_inputs_, " scan inputs)");
      return;
    }
    if (body_->num_outputs() < states_ || node.outputs().size() != body_->num_outputs()) {
      *st = InvalidArgument("'body' has ", body_->num_outputs(), " outputs and the node ", node.outputs().size(),
                            "; both must be the ", states_, " states followed by the scan outputs");
      return;
    }
    scan_outputs_ = body_->num_outputs() - states_;
    input_axes_ = node.GetInts("scan_input_axes", std::vector<int64_t>(scan_inputs_, 0));
    input_reverse_ = node.GetInts("scan_input_directions", std::vector<int64_t>(scan_inputs_, 0));
    output_axes_ = node.GetInts("scan_output_axes", std::vector<int64_t>(scan_outputs_, 0));
    output_reverse_ = node.GetInts("scan_output_directions", std::vector<int64_t>(scan_outputs_, 0));
    seed_reverse_ = node.GetInt("seed_reverse", 0) != 0;
    for (auto [name, list, want] : {std::tuple{"scan_input_axes", &input_axes_, scan_inputs_},
                                    std::tuple{"scan_input_directions", &input_reverse_, scan_inputs_},
                                    std::tuple{"scan_output_axes", &output_axes_, scan_outputs_},
                                    std::tuple{"scan_output_directions", &output_reverse_, scan_outputs_}}) {
      if (list->size() != want) {
        *st = InvalidArgument("attribute '", name, "' has ", list->size(), " entries, expected ", want);
        return;
      }
    }
    for (auto [name, list] :
         {std::pair{"scan_input_directions", &input_reverse_}, std::pair{"scan_output_directions", &output_reverse_}}) {
      for (int64_t d : *list) {
        if (d != 0 && d != 1) {
          *st = InvalidArgument("attribute '", name, "' has ", d, "; directions are 0 (forward) or 1 (reverse)");
          return;
        }
      }
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    std::vector<ir::Tensor> states;
    for (size_t k = 0; k < states_; ++k) {
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* s, RequireInput(ctx, k, "initial_state"));
      states.push_back(*s);
    }
    std::vector<const ir::Tensor*> inputs;
    std::vector<int64_t> axes;
    int64_t length = -1;
    for (size_t k = 0; k < scan_inputs_; ++k) {
      const size_t i = states_ + k;
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, i, "scan_input"));
      const std::string label = InputLabel(ctx, i, "scan_input");
      if (x->rank() < 1) return InvalidArgument(label, " must have rank >= 1, got a scalar");
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(input_axes_[k], x->rank(), "scan_input_axes"));
      const int64_t len = x->dims()[static_cast<size_t>(axis)];
      if (length >= 0 && len != length) {
        return InvalidArgument(label, " has length ", len, " along axis ", axis, ", the scan inputs before it ",
                               length);
      }
      length = len;
      inputs.push_back(x);
      axes.push_back(axis);
    }
    std::vector<std::vector<ir::Tensor>> outputs(scan_outputs_);
    uint64_t held = 0;  // bytes of the scan outputs' slices
    for (int64_t t = 0; t < length; ++t) {
      std::vector<ir::Tensor> formal = std::move(states);
      for (size_t k = 0; k < scan_inputs_; ++k) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor slice,
                                 SliceAlong(*inputs[k], axes[k], input_reverse_[k] ? length - 1 - t : t));
        formal.push_back(std::move(slice));
      }
      StatusOr<std::vector<ir::Tensor>> out =
          body_->Run(ctx, std::move(formal), IterationSeed(ctx, seed_reverse_ ? length - 1 - t : t));
      if (!out.ok()) return out.status().WithContext(StrCat("iteration ", t));
      states.assign(std::make_move_iterator(out->begin()), std::make_move_iterator(out->begin() + states_));
      for (size_t k = 0; k < scan_outputs_; ++k) {
        held += (*out)[states_ + k].nbytes();
        outputs[k].push_back(std::move((*out)[states_ + k]));
      }
      ONNXAMP_RETURN_IF_ERROR(CheckHeldBytes(held, *body_, t));
    }
    for (size_t k = 0; k < states_; ++k) {
      if (!ctx.output_requested(k)) continue;
      ONNXAMP_RETURN_IF_ERROR(CheckOutputType(ctx, k, states[k], StrCat("state ", k)));
      ONNXAMP_RETURN_IF_ERROR(ctx.SetOutput(k, std::move(states[k])));
    }
    for (size_t k = 0; k < scan_outputs_; ++k) {
      const size_t body_output = states_ + k;
      const std::vector<int64_t>* dims = outputs[k].empty() ? body_->output_dims(body_output) : &outputs[k][0].dims();
      // No iteration and no body dims: the slices' rank from the node output's declared rank, so that a negative axis
      // puts the empty dim where an iteration would have.
      int64_t rank = dims ? static_cast<int64_t>(dims->size()) : 0;
      if (!dims) {
        const ir::Value* v = ctx.node().output(body_output);
        if (v && v->type().is_tensor() && v->type().shape() && !v->type().shape()->empty()) {
          rank = static_cast<int64_t>(v->type().shape()->size()) - 1;
        }
      }
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(output_axes_[k], rank + 1, "scan_output_axes"));
      ONNXAMP_RETURN_IF_ERROR(SetStackedOutput(ctx, body_output, outputs[k], axis, output_reverse_[k] != 0,
                                               body_->output_type(body_output), body_->output_dims(body_output),
                                               StrCat("scan output ", k)));
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<SubgraphSession> body_;
  size_t states_ = 0, scan_inputs_ = 0, scan_outputs_ = 0;
  std::vector<int64_t> input_axes_, input_reverse_, output_axes_, output_reverse_;
  bool seed_reverse_ = false;
};

class Scan8Cpu : public exec::OpKernel {
 public:
  Scan8Cpu(const exec::KernelInfo& info, Status* st) {
    const ir::Node& node = info.node;
    const int64_t m = node.GetInt("num_scan_inputs", -1);
    const size_t node_inputs = node.inputs().size();
    if (m < 1 || static_cast<size_t>(m) + 1 > node_inputs) {
      *st = InvalidArgument("attribute 'num_scan_inputs' (", m, ") must be in [1, ", node_inputs - 1,
                            "]: the inputs are sequence_lens, the states and the scan inputs");
      return;
    }
    scan_inputs_ = static_cast<size_t>(m);
    states_ = node_inputs - 1 - scan_inputs_;
    StatusOr<std::unique_ptr<SubgraphSession>> body = SubgraphSession::Create(info, "body");
    if (!body.ok()) {
      *st = body.status();
      return;
    }
    body_ = std::move(body).value();
    if (body_->num_inputs() != states_ + scan_inputs_ || node.outputs().size() != body_->num_outputs() ||
        body_->num_outputs() < states_) {
      *st = InvalidArgument("'body' takes ", body_->num_inputs(), " inputs and gives ", body_->num_outputs(),
                            " outputs; with ", states_, " states and ", scan_inputs_, " scan inputs it must take ",
                            states_ + scan_inputs_, " and give the node's ", node.outputs().size());
      return;
    }
    scan_outputs_ = body_->num_outputs() - states_;
    reverse_ = node.GetInts("directions", std::vector<int64_t>(scan_inputs_, 0));
    if (reverse_.size() != scan_inputs_) {
      *st = InvalidArgument("attribute 'directions' has ", reverse_.size(), " entries, expected ", scan_inputs_);
      return;
    }
    for (int64_t d : reverse_) {
      if (d != 0 && d != 1) *st = InvalidArgument("attribute 'directions' has ", d, "; directions are 0 or 1");
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    int64_t batch = -1, length = -1;
    auto check_batch = [&](const ir::Tensor& t, size_t i, int64_t min_rank, const char* role) -> Status {
      if (t.rank() < min_rank) {
        return InvalidArgument(InputLabel(ctx, i, role), " must have rank >= ", min_rank, ", got ",
                               ShapeToString(t.dims()));
      }
      if (batch >= 0 && t.dims()[0] != batch) {
        return InvalidArgument(InputLabel(ctx, i, role), " has batch ", t.dims()[0], ", the inputs before it ", batch);
      }
      batch = t.dims()[0];
      return Status::Ok();
    };
    for (size_t k = 0; k < states_ + scan_inputs_; ++k) {
      const bool scan = k >= states_;
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 1 + k, scan ? "scan_input" : "initial_state"));
      ONNXAMP_RETURN_IF_ERROR(check_batch(*x, 1 + k, scan ? 2 : 1, scan ? "scan_input" : "initial_state"));
      if (!scan) continue;
      if (length >= 0 && x->dims()[1] != length) {
        return InvalidArgument(InputLabel(ctx, 1 + k, "scan_input"), " has length ", x->dims()[1],
                               ", the scan inputs before it ", length);
      }
      length = x->dims()[1];
    }
    std::vector<int64_t> lens(static_cast<size_t>(batch), length);
    if (const ir::Tensor* l = ctx.input(0)) {
      ONNXAMP_ASSIGN_OR_RETURN(lens, ReadInt64s(*l, InputLabel(ctx, 0, "sequence_lens")));
      if (static_cast<int64_t>(lens.size()) != batch) {
        return InvalidArgument(InputLabel(ctx, 0, "sequence_lens"), " has ", lens.size(), " entries, the batch is ",
                               batch);
      }
      for (int64_t n : lens) {
        if (n < 0 || n > length) {
          return InvalidArgument(InputLabel(ctx, 0, "sequence_lens"), ": ", n, " is outside [0, ", length, "]");
        }
      }
    }
    std::vector<std::vector<ir::Tensor>> final_states(states_), outputs(scan_outputs_);
    uint64_t held = 0;
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<ir::Tensor> states, inputs;
      for (size_t k = 0; k < states_; ++k) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor s, SliceAlong(*ctx.input(1 + k), 0, b));
        states.push_back(std::move(s));
      }
      for (size_t k = 0; k < scan_inputs_; ++k) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor x, SliceAlong(*ctx.input(1 + states_ + k), 0, b));
        inputs.push_back(std::move(x));
      }
      const int64_t len = lens[static_cast<size_t>(b)];
      std::vector<std::vector<ir::Tensor>> steps(scan_outputs_);
      for (int64_t t = 0; t < len; ++t) {
        std::vector<ir::Tensor> formal = std::move(states);
        for (size_t k = 0; k < scan_inputs_; ++k) {
          ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor slice, SliceAlong(inputs[k], 0, reverse_[k] ? len - 1 - t : t));
          formal.push_back(std::move(slice));
        }
        StatusOr<std::vector<ir::Tensor>> out = body_->Run(ctx, std::move(formal), IterationSeed(ctx, b * length + t));
        if (!out.ok()) return out.status().WithContext(StrCat("batch item ", b, ", iteration ", t));
        states.assign(std::make_move_iterator(out->begin()), std::make_move_iterator(out->begin() + states_));
        for (size_t k = 0; k < scan_outputs_; ++k) {
          held += (*out)[states_ + k].nbytes();
          steps[k].push_back(std::move((*out)[states_ + k]));
        }
        ONNXAMP_RETURN_IF_ERROR(CheckHeldBytes(held, *body_, t));
      }
      for (size_t k = 0; k < states_; ++k) final_states[k].push_back(std::move(states[k]));
      for (size_t k = 0; k < scan_outputs_; ++k) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor padded, Padded(steps[k], length, states_ + k));
        outputs[k].push_back(std::move(padded));
      }
    }
    for (size_t k = 0; k < states_; ++k) {
      ONNXAMP_RETURN_IF_ERROR(SetStackedOutput(ctx, k, final_states[k], 0, false, body_->output_type(k),
                                               body_->output_dims(k), StrCat("state ", k)));
    }
    for (size_t k = 0; k < scan_outputs_; ++k) {
      ONNXAMP_RETURN_IF_ERROR(SetStackedOutput(ctx, states_ + k, outputs[k], 0, false, DType::kUndefined, nullptr,
                                               StrCat("scan output ", k)));
    }
    return Status::Ok();
  }

 private:
  // One batch item's scan output: its `steps` stacked, then zeros up to `length` steps ([length, ...]). A batch item
  // with no step takes the body's declared type and dims.
  StatusOr<ir::Tensor> Padded(const std::vector<ir::Tensor>& steps, int64_t length, size_t body_output) const {
    DType dtype = steps.empty() ? body_->output_type(body_output) : steps[0].dtype();
    const std::vector<int64_t>* slice = steps.empty() ? body_->output_dims(body_output) : &steps[0].dims();
    if (dtype == DType::kUndefined || !slice) {
      return InvalidArgument("scan output ", body_output - states_,
                             ": a batch item has length 0 and the body declares no type or shape for it");
    }
    std::vector<int64_t> dims = *slice;
    dims.insert(dims.begin(), length);
    ONNXAMP_RETURN_IF_ERROR(CheckFitsInMemory(dtype, dims, StrCat("scan output ", body_output - states_)));
    ir::Tensor y(dtype, dims);  // zeros
    if (steps.empty()) return y;
    for (const ir::Tensor& t : steps) {
      if (t.dtype() != dtype || t.dims() != *slice) {
        return InvalidArgument("scan output ", body_output - states_, ": the steps give different types or shapes (",
                               ShapeToString(t.dims()), " and ", ShapeToString(*slice), ")");
      }
    }
    // Stacked along axis 0, step t lies at t * (elements of a step): the steps fill the front of y in place.
    ONNXAMP_RETURN_IF_ERROR(CopyStacked(steps, 0, false, y, "Scan"));
    return y;
  }

  std::unique_ptr<SubgraphSession> body_;
  size_t states_ = 0, scan_inputs_ = 0, scan_outputs_ = 0;
  std::vector<int64_t> reverse_;
};

}  // namespace

void RegisterScanKernels(exec::KernelRegistry& r) {
  r.Register({"Scan", "", 8, 8, exec::Device::kCpu, {}, 0, &exec::MakeKernel<Scan8Cpu>});
  r.Register({"Scan", "", 9, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ScanCpu>});
}

}  // namespace onnxamp::ops
