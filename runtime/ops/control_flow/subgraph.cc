#include "runtime/ops/control_flow/subgraph.h"

#include <algorithm>
#include <map>
#include <utility>

#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

StatusOr<std::unique_ptr<SubgraphSession>> SubgraphSession::Create(const exec::KernelInfo& info,
                                                                   std::string_view attribute) {
  const ir::Node& node = info.node;
  if (!info.model || !info.session) {
    return FailedPrecondition(node.op_type(), " runs its subgraphs in sessions of their own and needs the enclosing ",
                              "session's model and options");
  }
  const ir::Attribute* attr = node.FindAttribute(attribute);
  if (!attr || attr->type() != ir::AttrType::kGraph || !attr->g) {
    return InvalidArgument("attribute '", attribute, "' (a graph) is missing");
  }
  const ir::Graph& body = *attr->g;
  auto out = std::unique_ptr<SubgraphSession>(new SubgraphSession());
  out->attribute_ = std::string(attribute);

  ir::Model model;
  model.ir_version = info.model->ir_version;
  model.opset_imports = info.model->opset_imports;
  model.graph = body.Clone();
  ir::Graph& g = *model.graph;
  g.set_name(StrCat(node.name().empty() ? node.op_type() : node.name(), "/", attribute));
  for (ir::Value* v : g.inputs()) {
    out->formal_names_.push_back(v->name());
    if (v->type().is_tensor()) v->set_type(ir::ValueType::Tensor(v->type().elem_type()));
  }
  // What the body reads from the enclosing graphs (its own subgraphs' reads included) becomes inputs of the copy.
  std::map<std::string, size_t> reads;  // name -> index among the kernel's inputs
  {
    const std::vector<const ir::Value*> node_reads = exec::SubgraphReads(node);
    for (size_t k = 0; k < node_reads.size(); ++k) reads.emplace(node_reads[k]->name(), node.inputs().size() + k);
  }
  for (const std::string& name : g.OuterScopeNames()) {
    auto it = reads.find(name);
    if (it == reads.end()) {
      return InvalidArgument("subgraph '", attribute, "' reads '", name, "', which no enclosing graph defines");
    }
    ir::Value* v = g.FindValue(name);
    if (v) {
      g.PromoteOuterScopeToInput(v);
    } else {
      v = g.CreateValue(name);  // read only by a subgraph of the body
      g.AddInput(v);
    }
    const ir::Value* outer = node.graph()->FindValue(name);
    if (outer && outer->type().is_tensor()) v->set_type(ir::ValueType::Tensor(outer->type().elem_type()));
    out->outer_.emplace_back(name, it->second);
  }
  for (const ir::Value* v : g.outputs()) {
    const ir::ValueType& t = v->type();
    out->output_types_.push_back(t.is_tensor() ? t.elem_type() : DType::kUndefined);
    // For an empty scan output: the declared rank, unknown dims 0 (the output has no elements either way).
    std::optional<std::vector<int64_t>> dims;
    if (t.is_tensor() && t.shape()) {
      dims.emplace();
      for (const ir::Dim& d : *t.shape()) dims->push_back(d.is_value() ? d.value : 0);
    }
    out->output_dims_.push_back(std::move(dims));
  }

  exec::SessionOptions options = *info.session;
  out->memory_limit_ = options.memory_limit_bytes ? options.memory_limit_bytes : PhysicalMemoryBytes();
  options.device = exec::Device::kCpu;
  options.num_threads = 1;  // runs on the caller's pool (RunOptions::threads)
  options.finalize_graph = nullptr;
  options.time_device = false;
  options.max_memory_plans = 4;
  StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(std::move(model), options);
  if (!session.ok()) return session.status().WithContext(StrCat("subgraph '", attribute, "'"));
  out->session_ = std::move(session).value();
  return out;
}

const std::vector<int64_t>* SubgraphSession::output_dims(size_t i) const {
  return output_dims_[i] ? &*output_dims_[i] : nullptr;
}

StatusOr<std::vector<ir::Tensor>> SubgraphSession::Run(const exec::KernelContext& ctx, std::vector<ir::Tensor> formal,
                                                       uint64_t rng_step) const {
  ONNXAMP_CHECK(formal.size() == formal_names_.size(), "subgraph '", attribute_, "' takes ", formal_names_.size(),
                " inputs, given ", formal.size());
  std::vector<ir::Tensor> inputs = std::move(formal);
  for (size_t i = 0; i < inputs.size(); ++i) inputs[i].set_name(formal_names_[i]);
  for (const auto& [name, index] : outer_) {
    const ir::Tensor* t = ctx.input(index);
    if (!t) return Internal("subgraph '", attribute_, "': the enclosing value '", name, "' has no value");
    ir::Tensor bound = *t;
    bound.set_name(name);
    inputs.push_back(std::move(bound));
  }
  exec::RunOptions run;
  run.threads = &ctx.threads();
  run.rng_step = rng_step;
  std::vector<exec::NodeTime>* profile = ctx.subgraph_profile();
  run.profile = profile != nullptr;
  exec::RunStats stats;
  std::lock_guard<std::mutex> lock(mu_);
  StatusOr<std::vector<ir::Tensor>> outputs = session_->Run(inputs, run, profile ? &stats : nullptr);
  if (!outputs.ok()) return outputs.status().WithContext(StrCat("subgraph '", attribute_, "'"));
  if (profile) {
    for (exec::NodeTime& t : stats.nodes) profile->push_back(std::move(t));
  }
  return outputs;
}

StatusOr<bool> ReadCondition(const ir::Tensor& t, std::string_view label) {
  if (t.dtype() != DType::kBool || t.num_elements() != 1) {
    return InvalidArgument(label, " must be a bool tensor of one element, got ", DTypeName(t.dtype()), " ",
                           ShapeToString(t.dims()));
  }
  return t.values<uint8_t>()[0] != 0;
}

Status CheckOutputType(const exec::KernelContext& ctx, size_t node_output, const ir::Tensor& t, std::string_view what) {
  const ir::Value* v = ctx.node().output(node_output);
  if (!v || !v->type().is_tensor()) return Status::Ok();
  const DType declared = v->type().elem_type();
  if (declared != DType::kUndefined && declared != t.dtype()) {
    return InvalidArgument(what, " is ", DTypeName(t.dtype()), " but output ", node_output, " '", v->name(),
                           "' is declared ", DTypeName(declared));
  }
  return Status::Ok();
}

Status CheckHeldBytes(uint64_t held, const SubgraphSession& body, int64_t iteration) {
  if (held <= body.memory_limit() / 2) return Status::Ok();
  return ResourceExhausted("iteration ", iteration, ": the scan outputs so far hold ", held,
                           " bytes; stacked, they would not fit in the ", body.memory_limit(), " bytes available");
}

Status SetStackedOutput(exec::KernelContext& ctx, size_t i, const std::vector<ir::Tensor>& slices, int64_t axis,
                        bool reverse, DType empty_dtype, const std::vector<int64_t>* empty_dims,
                        std::string_view what) {
  if (!ctx.output_requested(i)) return Status::Ok();
  if (slices.empty()) {
    DType dtype = empty_dtype;
    const ir::Value* v = ctx.node().output(i);
    if (dtype == DType::kUndefined && v && v->type().is_tensor()) dtype = v->type().elem_type();
    if (dtype == DType::kUndefined) {
      return InvalidArgument(what, ": no iteration ran and neither the body nor the node declares its element type");
    }
    std::vector<int64_t> dims;
    if (empty_dims) {
      dims = *empty_dims;
    } else if (v && v->type().is_tensor() && v->type().shape() && !v->type().shape()->empty()) {
      // The node's declared rank (a lowered list's scan output declares one), its unknown dims 0.
      const ir::Shape& shape = *v->type().shape();
      axis = std::min<int64_t>(axis, static_cast<int64_t>(shape.size()) - 1);
      for (size_t d = 0; d < shape.size(); ++d) {
        if (static_cast<int64_t>(d) != axis) dims.push_back(shape[d].is_value() ? shape[d].value : 0);
      }
    } else {
      axis = 0;
    }
    dims.insert(dims.begin() + axis, 0);
    return AllocateAnyOutput(ctx, i, dtype, std::move(dims)).status();
  }
  for (size_t k = 1; k < slices.size(); ++k) {
    if (slices[k].dtype() != slices[0].dtype() || slices[k].dims() != slices[0].dims()) {
      return InvalidArgument(what, ": iteration ", k, " gives ", DTypeName(slices[k].dtype()), " ",
                             ShapeToString(slices[k].dims()), ", iteration 0 gave ", DTypeName(slices[0].dtype()), " ",
                             ShapeToString(slices[0].dims()));
    }
  }
  std::vector<int64_t> dims = slices[0].dims();
  ONNXAMP_CHECK(axis >= 0 && axis <= static_cast<int64_t>(dims.size()), "stacking axis ", axis, " out of range");
  dims.insert(dims.begin() + axis, static_cast<int64_t>(slices.size()));
  ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, i, slices[0].dtype(), std::move(dims)));
  return CopyStacked(slices, axis, reverse, *y, ctx.node().op_type());
}

Status CopyStacked(const std::vector<ir::Tensor>& slices, int64_t axis, bool reverse, ir::Tensor& y,
                   std::string_view op) {
  const int64_t count = static_cast<int64_t>(slices.size());
  const std::vector<int64_t>& dims = slices[0].dims();
  const int64_t outer = DimProduct(dims, 0, static_cast<size_t>(axis));
  const int64_t inner = DimProduct(dims, static_cast<size_t>(axis), dims.size());
  return DispatchByElementSize(slices[0].dtype(), op, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T* dst = MutableElementsOf<T>(y);
    for (int64_t k = 0; k < count; ++k) {
      const int64_t p = reverse ? count - 1 - k : k;
      const T* src = ElementsOf<T>(slices[static_cast<size_t>(k)]);
      for (int64_t o = 0; o < outer; ++o)
        std::copy(src + o * inner, src + (o + 1) * inner, dst + (o * count + p) * inner);
    }
    return Status::Ok();
  });
}

StatusOr<ir::Tensor> SliceAlong(const ir::Tensor& x, int64_t axis, int64_t index) {
  std::vector<int64_t> dims = x.dims();
  const int64_t count = dims[static_cast<size_t>(axis)];
  const int64_t outer = DimProduct(dims, 0, static_cast<size_t>(axis));
  const int64_t inner = DimProduct(dims, static_cast<size_t>(axis) + 1, dims.size());
  dims.erase(dims.begin() + axis);
  ir::Tensor y = ir::Tensor::Uninitialized(x.dtype(), std::move(dims));
  ONNXAMP_RETURN_IF_ERROR(DispatchByElementSize(x.dtype(), "Scan", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* src = ElementsOf<T>(x);
    T* dst = MutableElementsOf<T>(y);
    for (int64_t o = 0; o < outer; ++o) {
      const T* from = src + (o * count + index) * inner;
      std::copy(from, from + inner, dst + o * inner);
    }
    return Status::Ok();
  }));
  return y;
}

}  // namespace onnxamp::ops
