// The parts of a session that only device sessions use: folding constants at Create, choosing device kernels,
// keeping shape computations on the host, uploading constants, and copies between host and device.
#include <algorithm>

#include "runtime/executor/placement.h"
#include "runtime/executor/session_impl.h"

namespace onnxamp::exec {

using internal::DimsString;

namespace {

// Output allocation while folding constants at Create: plain host tensors.
class FoldSink : public KernelContext::Sink {
 public:
  explicit FoldSink(const ir::Node& node) : node_(node), outputs_(node.outputs().size()) {}
  bool requested(size_t i) const override { return node_.output(i) != nullptr; }
  StatusOr<ir::Tensor*> Allocate(size_t i, DType dtype, std::vector<int64_t> dims) override {
    StatusOr<size_t> bytes = ir::Tensor::ComputeByteSize(dtype, dims);
    if (!bytes.ok()) return bytes.status().WithContext(StrCat("output ", i, " ", DimsString(dims)));
    outputs_[i] = ir::Tensor::Uninitialized(dtype, std::move(dims));
    return &outputs_[i];
  }
  Status Set(size_t i, ir::Tensor t) override {
    t.set_name(std::string());
    outputs_[i] = std::move(t);
    return Status::Ok();
  }
  std::vector<ir::Tensor>& outputs() { return outputs_; }

 private:
  const ir::Node& node_;
  std::vector<ir::Tensor> outputs_;
};

bool AcceptsDType(const KernelDef& def, DType t) {
  return def.dtypes.empty() || t == DType::kUndefined ||
         std::find(def.dtypes.begin(), def.dtypes.end(), t) != def.dtypes.end();
}

}  // namespace

Status Session::Impl::FoldConstants(std::vector<bool>& folded) {
  ir::Graph& g = *model.graph;
  // Values no caller can change: initializers that are not graph inputs, and what is computed from them.
  std::vector<bool> fixed(slot_value.size(), false);
  for (ir::Value* v : g.initializers()) fixed[slot_of.at(v)] = !v->is_graph_input();
  const KernelRegistry& registry = KernelRegistry::Global();
  size_t index = 0;
  for (ir::Node* node : g.nodes()) {
    const size_t ni = index++;
    if (!node->subgraphs().empty() || !IsDeterministic(*node)) continue;
    bool all_fixed = true;
    for (ir::Value* v : node->inputs()) all_fixed = all_fixed && (v == nullptr || fixed[slot_of.at(v)]);
    if (!all_fixed) continue;
    // Anything that stops the fold (no CPU kernel, a type the kernel refuses, an error) leaves the node to Build,
    // which reports what is wrong with it or runs it.
    const int64_t opset = model.OpsetVersion(node->domain());
    if (opset == 0) continue;
    StatusOr<const KernelDef*> def = registry.Find(node->op_type(), node->domain(), opset, Device::kCpu);
    if (!def.ok()) continue;
    std::vector<const ir::Tensor*> in;
    for (ir::Value* v : node->inputs()) in.push_back(v ? &constants[slot_of.at(v)] : nullptr);
    const ir::Tensor* typed = static_cast<size_t>((*def)->dtype_input) < in.size() ? in[(*def)->dtype_input] : nullptr;
    if (typed && !AcceptsDType(**def, typed->dtype())) continue;
    StatusOr<std::unique_ptr<OpKernel>> kernel =
        (*def)->factory(KernelInfo{*node, opset, Device::kCpu, options.kernels});
    if (!kernel.ok()) continue;
    FoldSink sink(*node);
    KernelContext ctx(*node, opset, in, node->outputs().size(), *threads, options.seed, sink);
    if (!(*kernel)->Compute(ctx).ok()) continue;
    bool complete = true;
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      complete = complete && (node->output(i) == nullptr || sink.outputs()[i].has_data());
    }
    if (!complete) continue;
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      if (!node->output(i)) continue;
      const int s = slot_of.at(node->output(i));
      constants[s] = std::move(sink.outputs()[i]);
      has_constant[s] = true;
      fixed[s] = true;
    }
    folded[ni] = true;
  }
  return Status::Ok();
}

StatusOr<bool> Session::Impl::TryDeviceKernel(ir::Node* node, int64_t opset, Step& step) {
  StatusOr<const KernelDef*> found = backend.kernels->Find(node->op_type(), node->domain(), opset, options.device);
  if (!found.ok()) return false;
  const KernelDef& def = **found;
  // String tensors never go to a device; a type the device kernel does not take leaves the node to the CPU.
  for (const auto* list : {&node->inputs(), &node->outputs()}) {
    for (const ir::Value* v : *list) {
      if (v && v->type().is_tensor() && v->type().elem_type() == DType::kString) return false;
    }
  }
  const ir::Value* typed = node->input(def.dtype_input);
  if (typed && typed->type().is_tensor() && !AcceptsDType(def, typed->type().elem_type())) return false;
  StatusOr<std::unique_ptr<OpKernel>> kernel = def.factory(KernelInfo{*node, opset, options.device, options.kernels});
  if (!kernel.ok()) {
    // Unimplemented: an attribute combination only the CPU kernel supports. Anything else is the model's fault.
    if (kernel.status().code() == StatusCode::kUnimplemented) return false;
    return kernel.status().WithContext(StrCat("node ", node->Describe()));
  }
  step.def = &def;
  step.kernel = std::move(kernel).value();
  step.on_device = true;
  return true;
}

Status Session::Impl::PlaceForDevice() {
  const KernelRegistry& cpu = KernelRegistry::Global();
  std::vector<NodePlacement> places(steps.size());
  std::vector<const KernelDef*> cpu_defs(steps.size(), nullptr);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    NodePlacement& p = places[i];
    p.node = step.node;
    p.on_device = step.on_device;
    if (!step.on_device) continue;
    StatusOr<const KernelDef*> def = cpu.Find(step.node->op_type(), step.node->domain(), step.opset, Device::kCpu);
    if (def.ok()) cpu_defs[i] = *def;
    p.has_cpu_kernel = def.ok();
    p.host_inputs = &step.def->host_inputs;
    p.outputs_on_host = step.def->outputs_on_host;
  }
  auto host_constant = [&](const ir::Value* v) {
    const int s = slot_of.at(v);
    const DType t = constants[s].dtype();
    return has_constant[s] && (IsInteger(t) || t == DType::kBool);
  };
  const std::vector<bool> host = FindHostShapeNodes(places, host_constant);
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!host[i]) continue;
    Step& step = steps[i];
    StatusOr<std::unique_ptr<OpKernel>> kernel =
        cpu_defs[i]->factory(KernelInfo{*step.node, step.opset, Device::kCpu, options.kernels});
    if (!kernel.ok()) continue;  // stays on the device; the run copies what it needs
    step.def = cpu_defs[i];
    step.kernel = std::move(kernel).value();
    step.on_device = false;
  }
  ONNXAMP_RETURN_IF_ERROR(device->Activate());
  DeviceRunCounters counters;
  std::vector<std::shared_ptr<ir::Buffer>> pinned;
  for (Step& step : steps) {
    step.input_on_device.assign(step.inputs.size(), 0);
    if (!step.on_device) {
      placement.on_cpu.push_back(step.node->Describe());
      continue;
    }
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      const std::vector<int>& host_inputs = step.def->host_inputs;
      step.input_on_device[i] =
          std::find(host_inputs.begin(), host_inputs.end(), static_cast<int>(i)) == host_inputs.end();
      // Constants a device kernel reads on the device are uploaded once, here.
      const int s = step.inputs[i];
      if (s < 0 || !step.input_on_device[i] || !has_constant[s] || device_constants[s].has_data()) continue;
      const ir::Tensor& c = constants[s];
      if (c.dtype() == DType::kString || !c.has_data()) continue;
      Status st = CopyAcross(c, /*to_device=*/true, &device_constants[s], counters, pinned);
      if (!st.ok()) return st.WithContext(StrCat("uploading constant '", slot_value[s]->name(), "'"));
    }
  }
  Status st = device->Synchronize();
  if (!st.ok()) return st.WithContext(StrCat("uploading constants to ", device->Describe()));
  return Status::Ok();
}

Status Session::Impl::CopyAcross(const ir::Tensor& src, bool to_device, ir::Tensor* dst, DeviceRunCounters& counters,
                                 std::vector<std::shared_ptr<ir::Buffer>>& pinned) {
  const size_t bytes = src.nbytes();
  if (to_device) {
    StatusOr<std::shared_ptr<ir::Buffer>> buffer = device->Allocate(bytes);
    if (!buffer.ok()) return buffer.status();
    ONNXAMP_RETURN_IF_ERROR(device->CopyHostToDevice(src.data(), (*buffer)->data(), bytes));
    if (bytes) pinned.push_back(src.buffer());  // the copy may still read it until the next Synchronize
    *dst = ir::Tensor::FromBuffer(src.dtype(), src.dims(), std::move(buffer).value());
    counters.host_to_device_bytes += bytes;
  } else {
    // Into memory the device copies to fastest (page-locked on CUDA), which the output then keeps.
    StatusOr<std::shared_ptr<ir::Buffer>> buffer = device->AllocateHost(bytes);
    if (!buffer.ok()) return buffer.status();
    ONNXAMP_RETURN_IF_ERROR(device->CopyDeviceToHost(src.data(), (*buffer)->data(), bytes));
    *dst = ir::Tensor::FromBuffer(src.dtype(), src.dims(), std::move(buffer).value());
    counters.device_to_host_bytes += bytes;
  }
  return Status::Ok();
}

Status Session::Impl::AllocateDeviceArena(Plan& plan) {
  if (device_limit && plan.device_arena_bytes > device_limit) {
    return ResourceExhausted("the memory plan for these input shapes needs ", plan.device_arena_bytes,
                             " bytes of device memory; ", device->Describe(), " has ", device_limit);
  }
  StatusOr<std::shared_ptr<ir::Buffer>> arena = device->Allocate(plan.device_arena_bytes);
  if (!arena.ok()) {
    return arena.status().WithContext(StrCat("the memory plan's device arena of ", plan.device_arena_bytes, " bytes"));
  }
  plan.device_arena = std::move(arena).value();
  return Status::Ok();
}

std::string Session::DescribePlacement() const {
  const Impl& impl = *impl_;
  if (!impl.device) return "cpu";
  const std::vector<std::string>& on_cpu = impl.placement.on_cpu;
  std::string s =
      StrCat(impl.device->Describe(), "; ", on_cpu.size(), " of ", impl.placement.nodes, " nodes on the CPU");
  constexpr size_t kShown = 8;
  for (size_t i = 0; i < on_cpu.size() && i < kShown; ++i) s += StrCat(i ? ", " : " (", on_cpu[i]);
  if (on_cpu.size() > kShown) s += StrCat(", and ", on_cpu.size() - kShown, " more");
  if (!on_cpu.empty()) s += ")";
  return s;
}

}  // namespace onnxamp::exec
