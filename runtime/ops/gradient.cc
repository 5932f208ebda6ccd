// GradientRegistry lookup (over the OpInfos) and the GradContext helpers shared by every builder.
#include "runtime/ops/gradient.h"

#include <algorithm>

#include "runtime/common/half.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

StatusOr<const GradientDef*> GradientRegistry::Find(const std::string& op_type, const std::string& domain,
                                                    int64_t opset) const {
  const OpInfo* info = ops_->Find(domain, op_type);
  std::string ranges;
  if (info != nullptr) {
    for (const GradientDef& def : info->gradients) {
      if (opset >= def.since && opset <= def.until) return &def;
      ranges += StrCat(ranges.empty() ? "" : ", ", def.since,
                       def.until == INT64_MAX ? std::string("+") : StrCat("-", def.until));
    }
  }
  const std::string d = domain == "ai.onnx" ? "" : domain;
  const std::string shown = d.empty() ? op_type : StrCat(d, ":", op_type);
  if (ranges.empty()) return NotFound("op ", shown, " has no gradient");
  return NotFound("op ", shown, " at opset ", opset, " has no gradient (opsets with one: ", ranges, ")");
}

std::vector<std::string> GradientRegistry::Ops() const {
  std::vector<std::string> ops;
  for (const OpInfo& info : ops_->ops()) {
    if (!info.gradients.empty()) ops.push_back(info.Name());
  }
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  return ops;
}

const GradientRegistry& GradientRegistry::Global() {
  static const GradientRegistry* registry = new GradientRegistry(OpInfoRegistry::Global());
  return *registry;
}

ir::Tensor ScalarTensor(DType t, double value, std::vector<int64_t> dims) {
  ir::Tensor s(t, std::move(dims));
  ONNXAMP_CHECK(s.num_elements() == 1, "ScalarTensor: ", s.num_elements(), " elements");
  switch (t) {
    case DType::kFloat32:
      s.mutable_values<float>()[0] = static_cast<float>(value);
      break;
    case DType::kFloat64:
      s.mutable_values<double>()[0] = value;
      break;
    case DType::kFloat16:
      s.mutable_values<Float16>()[0] = Float16(static_cast<float>(value));
      break;
    case DType::kBFloat16:
      s.mutable_values<BFloat16>()[0] = BFloat16(static_cast<float>(value));
      break;
    case DType::kInt64:
      s.mutable_values<int64_t>()[0] = static_cast<int64_t>(value);
      break;
    default:
      ONNXAMP_CHECK(false, "ScalarTensor: unsupported type ", DTypeName(t));
  }
  return s;
}

ir::Value* NodeEmitter::Scalar(DType t, double value) { return Constant(ScalarTensor(t, value)); }

ir::Value* GradContext::Zeros(DType t, ir::Value* like) { return Emit1("Expand", {Scalar(t, 0), ShapeOf(like)}); }

Status ZeroGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0)) return Status::Ok();
  const DType t = ctx.TypeOf(ctx.X(0));
  if (t == DType::kUndefined) return InvalidArgument("the element type of input 0 is unknown");
  return ctx.SetDX(0, ctx.Zeros(t, ctx.X(0)));
}

ir::Value* NodeEmitter::Ints(const std::vector<int64_t>& values) {
  ir::Tensor t(DType::kInt64, {static_cast<int64_t>(values.size())});
  auto out = t.mutable_values<int64_t>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return Constant(std::move(t));
}

ir::Value* NodeEmitter::EmitUnsqueeze(ir::Value* x, const std::vector<int64_t>& axes, DType output_type) {
  if (onnx_opset() < 13) return Emit1("Unsqueeze", {x}, {ir::Attribute::Ints("axes", axes)}, "", output_type);
  return Emit1("Unsqueeze", {x, Ints(axes)}, {}, "", output_type);
}

// A reduction at the model's opset: `axes` an attribute before `axes_input_since`, an input from it; empty axes (all
// of them) left out.
ir::Value* NodeEmitter::EmitReduce(const std::string& op, int64_t axes_input_since, ir::Value* x,
                                   const std::vector<int64_t>& axes, bool keepdims, DType output_type) {
  std::vector<ir::Attribute> attrs = {ir::Attribute::Int("keepdims", keepdims ? 1 : 0)};
  std::vector<ir::Value*> inputs = {x};
  if (!axes.empty() && onnx_opset() < axes_input_since) attrs.push_back(ir::Attribute::Ints("axes", axes));
  if (!axes.empty() && onnx_opset() >= axes_input_since) inputs.push_back(Ints(axes));
  return Emit1(op, inputs, std::move(attrs), "", output_type);
}

ir::Value* NodeEmitter::EmitReduceSum(ir::Value* x, const std::vector<int64_t>& axes, bool keepdims,
                                      DType output_type) {
  return EmitReduce("ReduceSum", 13, x, axes, keepdims, output_type);
}

ir::Value* NodeEmitter::EmitReduceMean(ir::Value* x, const std::vector<int64_t>& axes, bool keepdims,
                                       DType output_type) {
  return EmitReduce("ReduceMean", 18, x, axes, keepdims, output_type);
}

ir::Value* NodeEmitter::CastTo(ir::Value* x, DType to) {
  if (TypeOf(x) == to) return x;
  return Emit1("Cast", {x}, {ir::Attribute::Int("to", static_cast<int64_t>(to))}, "", to);
}

Status GradContext::EmitInputGradients(const std::string& op_type, const std::vector<ir::Value*>& inputs,
                                       const std::vector<bool>& wanted, std::vector<ir::Attribute> attributes,
                                       DType output_type) {
  size_t count = 0;
  for (size_t i = 0; i < wanted.size(); ++i) count = wanted[i] ? i + 1 : count;
  if (count == 0) return Status::Ok();
  std::vector<ir::Value*> grads =
      Emit(op_type, inputs, count, std::move(attributes), exec::kInternalDomain, output_type);
  for (size_t i = 0; i < count; ++i) {
    if (wanted[i]) {
      ONNXAMP_RETURN_IF_ERROR(SetDX(i, grads[i]));
    } else {
      // An output no input needs (dX of the first convolution, dW of a frozen layer): left unrequested.
      grads[i]->producer()->SetOutput(static_cast<size_t>(grads[i]->producer_index()), nullptr);
    }
  }
  return Status::Ok();
}

}  // namespace onnxamp::ops
