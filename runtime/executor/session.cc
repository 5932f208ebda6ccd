// Session and executor: kernel creation and placement, input binding checks, the run loop (with the copies between
// host and device of a device session), and the static memory plan.
#include "runtime/executor/session.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "runtime/common/random.h"
#include "runtime/executor/device_context.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/hoist_loop_invariants.h"
#include "runtime/executor/lower_sequences.h"
#include "runtime/executor/memory_plan.h"
#include "runtime/executor/session_impl.h"
#include "runtime/ir/verify.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::exec {

using internal::DimsString;
using internal::kDeviceAlignment;
using internal::kNever;

void RegisterAllCpuKernels(KernelRegistry& registry);  // runtime/ops/cpu_kernels.cc

const KernelRegistry& KernelRegistry::Global() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    RegisterAllCpuKernels(*r);
    return r;
  }();
  return *registry;
}

namespace {

// A node's own seed: the session's seed and the name of the node's first output (value names are unique in a graph,
// so a node keeps its seed when other nodes are added or reordered, as in a training graph and its eval graph). A
// node may name another node's first output in its string attribute `seed_from` to draw that node's numbers:
// DropoutGrad recomputes the forward Dropout's mask, and a Dropout that a training graph's recompute pass copies
// (trainer/graph/recompute.h) draws the mask of the Dropout it copies.
uint64_t NodeSeed(uint64_t session_seed, const ir::Node& node) {
  return SplitMix64Mix(session_seed ^ Fnv1a64(SeedName(node)));
}

// Appends "<name><dtype>[d0,d1,...];" for a bound input to a run's plan signature, without temporary strings.
void AppendSignature(const std::string& name, const ir::Tensor& t, std::string* signature) {
  signature->append(name);
  signature->append(DTypeName(t.dtype()));
  signature->push_back('[');
  for (size_t d = 0; d < t.dims().size(); ++d) {
    if (d) signature->push_back(',');
    char digits[24];
    const auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), t.dims()[d]);
    signature->append(digits, end);
  }
  signature->append("];");
}

}  // namespace

Status Session::Impl::Build() {
  ONNXAMP_RETURN_IF_ERROR(ir::Verify(model));
  ir::Graph& g = *model.graph;
  ONNXAMP_RETURN_IF_ERROR(g.SortTopologically());
  for (ir::Value* v : g.values()) {
    slot_of[v] = static_cast<int>(slot_value.size());
    slot_value.push_back(v);
  }
  const size_t n = slot_value.size();
  last_read.assign(n, -1);
  is_output.assign(n, false);
  constants.resize(n);
  has_constant.assign(n, false);
  for (ir::Value* v : g.initializers()) {
    constants[slot_of[v]] = *v->initializer();
    has_constant[slot_of[v]] = true;
  }
  // Values between the caller and the graph are tensors. A sequence or optional the graph takes or returns is kept by
  // LowerSequences, and would otherwise be refused later as the op that makes or reads it.
  for (const auto* io : {&g.inputs(), &g.outputs()}) {
    for (const ir::Value* v : *io) {
      const ir::ValueType& type = v->type();
      const ir::ValueType::Kind kind = type.kind();
      if (kind != ir::ValueType::Kind::kSequence && kind != ir::ValueType::Kind::kMap &&
          kind != ir::ValueType::Kind::kOptional) {
        continue;
      }
      return Unimplemented(io == &g.inputs() ? "input '" : "output '", v->name(), "' is ", type.ToString(),
                           ": the runtime takes and returns tensors only (sequences run where the graph itself fixes "
                           "their elements; docs/runtime.md, \"Sequences\")");
    }
  }
  input_index.assign(n, -1);
  for (ir::Value* v : g.inputs()) {
    input_index[slot_of[v]] = static_cast<int>(input_slots.size());
    input_slots.push_back(slot_of[v]);
    inputs.push_back({v->name(), v->type(), v->initializer() != nullptr});
  }
  for (ir::Value* v : g.outputs()) {
    output_slots.push_back(slot_of[v]);
    is_output[slot_of[v]] = true;
    outputs.push_back({v->name(), v->type(), false});
  }
  memory_limit = options.memory_limit_bytes ? options.memory_limit_bytes : ops::PhysicalMemoryBytes();
  threads = std::make_unique<ThreadPool>(options.num_threads);
  std::vector<bool> folded;
  if (device) {
    device_constants.resize(n);
    size_t node_count = 0;
    for ([[maybe_unused]] ir::Node* node : g.nodes()) ++node_count;
    folded.assign(node_count, false);
    ONNXAMP_RETURN_IF_ERROR(FoldConstants(folded));
  }
  const KernelRegistry& registry = KernelRegistry::Global();
  std::unordered_map<const ir::Node*, int> step_of;
  size_t node_index = 0;
  for (ir::Node* node : g.nodes()) {
    const size_t ni = node_index++;
    const int64_t opset = model.OpsetVersion(node->domain());
    if (opset == 0) {
      return InvalidArgument("node ", node->Describe(), ": the model imports no opset for domain '",
                             node->domain().empty() ? "ai.onnx" : node->domain(), "'");
    }
    if (device && folded[ni]) continue;
    Step step;
    step.node = node;
    step.opset = opset;
    step.seed = NodeSeed(options.seed, *node);
    bool on_device = false;
    if (device) {
      StatusOr<bool> placed = TryDeviceKernel(node, opset, step);
      if (!placed.ok()) return placed.status();
      on_device = *placed;
    }
    if (!on_device) {
      StatusOr<const KernelDef*> def = registry.Find(node->op_type(), node->domain(), opset, Device::kCpu);
      if (!def.ok()) {
        if (device) {
          return Unimplemented("node ", node->Describe(), ": op ", node->op_type(), " at opset ", opset,
                               " has neither a ", DeviceName(options.device),
                               " nor a cpu kernel (cpu: ", def.status().message(), ")");
        }
        return def.status().WithContext(StrCat("node ", node->Describe()));
      }
      KernelInfo info{*node, opset, Device::kCpu, options.kernels, &model, &options};
      StatusOr<std::unique_ptr<OpKernel>> kernel = (*def)->factory(info);
      if (!kernel.ok()) return kernel.status().WithContext(StrCat("node ", node->Describe()));
      step.def = *def;
      step.kernel = std::move(kernel).value();
    }
    const int index = static_cast<int>(steps.size());
    step_of[node] = index;
    for (ir::Value* v : node->inputs()) {
      const int s = v ? slot_of.at(v) : -1;
      step.inputs.push_back(s);
      if (s >= 0) last_read[s] = index;
    }
    // If, Loop and Scan also read what their subgraphs read from this graph.
    for (const ir::Value* v : SubgraphReads(*node)) {
      const int s = slot_of.at(v);
      step.inputs.push_back(s);
      last_read[s] = index;
    }
    for (ir::Value* v : node->outputs()) step.outputs.push_back(v ? slot_of.at(v) : -1);
    steps.push_back(std::move(step));
  }
  for (size_t s = 0; s < n; ++s) {
    ir::Value* v = slot_value[s];
    if (device && v->is_graph_input() && !is_output[s] && last_read[s] >= 0) {
      steps[last_read[s]].release_copies.push_back(static_cast<int>(s));  // its copy on the device
    }
    if (is_output[s] || has_constant[s] || v->is_graph_input()) continue;
    if (!v->producer()) continue;
    // Released after its last reader, or right after its producer when nothing reads it.
    auto producer = step_of.find(v->producer());
    const int producer_step = producer == step_of.end() ? -1 : producer->second;
    const int release_at = std::max(last_read[s], producer_step);
    if (release_at >= 0) steps[release_at].release.push_back(static_cast<int>(s));
  }
  for (int s : output_slots) last_read[s] = kNever;
  placement.device = options.device;
  placement.nodes = static_cast<int>(steps.size());
  if (device) {
    device_limit = options.memory_limit_bytes ? options.memory_limit_bytes : device->total_memory_bytes();
    ONNXAMP_RETURN_IF_ERROR(PlaceForDevice());
  }
  return Status::Ok();
}

Status Session::Impl::BindInputs(const std::vector<ir::Tensor>& given, std::vector<ir::Tensor>& slots,
                                 std::vector<bool>& present, std::string* signature) {
  std::vector<const ir::Tensor*> bound(inputs.size(), nullptr);  // per graph input
  for (const ir::Tensor& t : given) {
    const ir::Value* v = model.graph->FindValue(t.name());
    const int index = v && v->is_graph_input() ? input_index[slot_of.at(v)] : -1;
    if (index < 0) {
      std::string names;
      for (const IoInfo& io : inputs) {
        if (!names.empty()) names += ", ";
        names += io.name;
      }
      return InvalidArgument("input '", t.name(), "' is not an input of the model (inputs: ", names, ")");
    }
    if (bound[index]) return InvalidArgument("input '", t.name(), "' is given twice");
    bound[index] = &t;
  }
  std::unordered_map<std::string, std::pair<int64_t, std::string>> symbols;  // param -> (value, input that bound it)
  for (size_t i = 0; i < inputs.size(); ++i) {
    const IoInfo& io = inputs[i];
    const int slot = input_slots[i];
    if (!bound[i]) {
      if (io.has_default) continue;  // the initializer, already in place
      return InvalidArgument("missing input '", io.name, "' (expected ", io.type.ToString(), ")");
    }
    const ir::Tensor& t = *bound[i];
    if (!t.has_data() && t.dtype() != DType::kString) return InvalidArgument("input '", io.name, "' has no data");
    if (io.type.is_tensor()) {
      if (io.type.elem_type() != DType::kUndefined && io.type.elem_type() != t.dtype()) {
        return InvalidArgument("input '", io.name, "': expected dtype ", DTypeName(io.type.elem_type()), ", got ",
                               DTypeName(t.dtype()));
      }
      if (io.type.shape()) {
        const ir::Shape& shape = *io.type.shape();
        if (shape.size() != t.dims().size()) {
          return InvalidArgument("input '", io.name, "': expected rank ", shape.size(), " ", ir::ShapeToString(shape),
                                 ", got rank ", t.dims().size(), " ", DimsString(t.dims()));
        }
        for (size_t d = 0; d < shape.size(); ++d) {
          if (shape[d].is_value() && shape[d].value != t.dims()[d]) {
            return InvalidArgument("input '", io.name, "': dim ", d, " expected ", shape[d].value, ", got ",
                                   t.dims()[d], " (shape ", DimsString(t.dims()), ", model ", ir::ShapeToString(shape),
                                   ")");
          }
          if (shape[d].is_param()) {
            auto [sym, inserted] = symbols.emplace(shape[d].param, std::make_pair(t.dims()[d], io.name));
            if (!inserted && sym->second.first != t.dims()[d]) {
              return InvalidArgument("input '", io.name, "': dim ", d, " ('", shape[d].param, "') is ", t.dims()[d],
                                     " but input '", sym->second.second, "' binds '", shape[d].param, "' to ",
                                     sym->second.first);
            }
          }
        }
      }
    }
    slots[slot] = t;
    present[slot] = true;
    AppendSignature(io.name, t, signature);
  }
  return Status::Ok();
}

namespace {

// True when `b` lies in the plan's device arena (its region may be reused by a later value of the run).
bool InDeviceArena(const Plan* plan, const ir::Buffer& b) {
  if (!plan || !plan->device_arena || plan->device_arena_bytes == 0) return false;
  const std::byte* begin = plan->device_arena->data();
  return b.data() >= begin && b.data() < begin + plan->device_arena_bytes;
}

// Output allocation for one step: from the plan's arena when the planned size matches, else from the heap (host
// steps) or the device context (device steps).
class StepSink : public KernelContext::Sink {
 public:
  StepSink(const Step& step, std::vector<ir::Tensor>& slots, std::vector<bool>& present, Plan* plan,
           const std::vector<bool>& is_output, std::vector<Recorded>& record, int step_index, uint64_t& live,
           uint64_t& peak, uint64_t limit, std::vector<uint64_t>& heap_bytes, DeviceContext* device_outputs,
           DeviceContext* device, uint64_t device_limit, const std::vector<const ir::Tensor*>* into)
      : step_(step),
        slots_(slots),
        present_(present),
        plan_(plan),
        is_output_(is_output),
        record_(record),
        step_index_(step_index),
        live_(live),
        peak_(peak),
        limit_(limit),
        heap_bytes_(heap_bytes),
        device_outputs_(device_outputs),
        device_(device),
        device_limit_(device_limit),
        into_(into) {}

  bool requested(size_t i) const override { return i < step_.outputs.size() && step_.outputs[i] >= 0; }

  StatusOr<ir::Tensor*> Allocate(size_t i, DType dtype, std::vector<int64_t> dims) override {
    const int slot = step_.outputs[i];
    if (slot < 0) return Internal("output ", i, " was not requested");
    StatusOr<size_t> bytes = ir::Tensor::ComputeByteSize(dtype, dims);
    if (!bytes.ok()) return bytes.status().WithContext(StrCat("output ", i, " ", DimsString(dims)));
    if (device_outputs_) return AllocateOnDevice(slot, i, dtype, std::move(dims), *bytes);
    // A fetched output the caller gave memory for (RunOptions::output_into), of this dtype and dims: a view of it, in
    // a buffer of its own (so that the kernel is its only holder and writes in place). The caller's, not counted.
    if (into_ && (*into_)[slot] && *bytes > 0) {
      const ir::Tensor& target = *(*into_)[slot];
      if (target.dtype() == dtype && target.dims() == dims && target.nbytes() == *bytes) {
        auto view = std::make_shared<ir::Buffer>(const_cast<std::byte*>(target.data()), *bytes, target.buffer());
        slots_[slot] = ir::Tensor::FromBuffer(dtype, std::move(dims), std::move(view));
        present_[slot] = true;
        return &slots_[slot];
      }
    }
    if (*bytes > limit_ || live_ + *bytes > limit_) {
      return ResourceExhausted("output ", i, " ", DTypeName(dtype), DimsString(dims), " needs ", *bytes,
                               " bytes; with ", live_, " bytes in use that exceeds the ", limit_, " bytes available");
    }
    if (plan_ && !is_output_[slot] && dtype != DType::kString) {
      PlannedValue& pv = plan_->values[slot];
      if (pv.planned && !pv.device && pv.bytes == *bytes) {
        std::shared_ptr<ir::Buffer> view = std::move(pv.view);
        if (!view) view = std::make_shared<ir::Buffer>(plan_->arena->data() + pv.offset, *bytes, plan_->arena);
        slots_[slot] = ir::Tensor::FromBuffer(dtype, std::move(dims), std::move(view));
        present_[slot] = true;
        record_[slot] = Recorded{*bytes, step_index_, true, false, false};
        return &slots_[slot];
      }
    }
    slots_[slot] = ir::Tensor::Uninitialized(dtype, std::move(dims));
    present_[slot] = true;
    Account(slot, *bytes, /*plannable=*/true);
    return &slots_[slot];
  }

  Status Set(size_t i, ir::Tensor t) override {
    const int slot = step_.outputs[i];
    if (slot < 0) return Status::Ok();  // not requested: drop it
    if (!t.on_host()) {
      // A device tensor passed through (Reshape, Identity): shared, unless it is a region of the plan's device
      // arena, which a later value may reuse; then it gets its own copy on the device.
      if (InDeviceArena(plan_, *t.buffer())) {
        ONNXAMP_CHECK(device_ != nullptr, "a device tensor outside a device session");
        StatusOr<std::shared_ptr<ir::Buffer>> copy = device_->Allocate(t.nbytes());
        if (!copy.ok()) return copy.status().WithContext(StrCat("output ", i));
        ONNXAMP_RETURN_IF_ERROR(device_->CopyDeviceToDevice(t.data(), (*copy)->data(), t.nbytes()));
        t = ir::Tensor::FromBuffer(t.dtype(), t.dims(), std::move(copy).value());
      }
      t.set_name(std::string());
      slots_[slot] = std::move(t);
      present_[slot] = true;
      return Status::Ok();
    }
    // An input passed through shares its memory; the plan for the next runs keeps that memory for this value too.
    const int owner = is_output_[slot] ? -1 : PassedThroughFrom(t);
    if (owner >= 0) record_[slot].alias_of = owner;
    const bool in_arena = owner >= 0 && InOwnersRegion(slot, owner, *t.buffer());
    if (t.buffer() && !t.buffer()->owns_memory() && !in_arena) {
      // A view into the arena (an input passed through) that the plan does not keep for this value: its region
      // may be reused once that input is released, so the output gets its own copy.
      ir::Tensor copy = ir::Tensor::Uninitialized(t.dtype(), t.dims());
      if (t.nbytes()) std::memcpy(copy.mutable_data(), t.data(), t.nbytes());
      t = std::move(copy);
    }
    const uint64_t bytes = t.nbytes();
    t.set_name(std::string());
    slots_[slot] = std::move(t);
    present_[slot] = true;
    if (!in_arena) Account(slot, bytes, /*plannable=*/false);
    return Status::Ok();
  }

 private:
  StatusOr<ir::Tensor*> AllocateOnDevice(int slot, size_t i, DType dtype, std::vector<int64_t> dims, size_t bytes) {
    if (dtype == DType::kString) return Internal("output ", i, ": string tensors cannot be allocated on a device");
    if (plan_ && !is_output_[slot]) {
      PlannedValue& pv = plan_->values[slot];
      if (pv.planned && pv.device && pv.bytes == bytes) {
        std::shared_ptr<ir::Buffer> view = std::move(pv.view);
        if (!view) {
          view = std::make_shared<ir::Buffer>(plan_->device_arena->data() + pv.offset, bytes, plan_->device_arena,
                                              plan_->device_arena->kind());
        }
        slots_[slot] = ir::Tensor::FromBuffer(dtype, std::move(dims), std::move(view));
        present_[slot] = true;
        record_[slot] = Recorded{bytes, step_index_, true, false, true};
        return &slots_[slot];
      }
    }
    if (device_limit_) {
      const uint64_t in_use = device_outputs_->memory_stats().in_use_bytes;
      if (bytes > device_limit_ || in_use + bytes > device_limit_) {
        return ResourceExhausted("output ", i, " ", DTypeName(dtype), DimsString(dims), " needs ", bytes,
                                 " bytes of device memory; with ", in_use, " bytes in use that exceeds the ",
                                 device_limit_, " bytes available on ", device_outputs_->Describe());
      }
    }
    StatusOr<std::shared_ptr<ir::Buffer>> buffer = device_outputs_->Allocate(bytes);
    if (!buffer.ok()) return buffer.status().WithContext(StrCat("output ", i, " ", DTypeName(dtype), DimsString(dims)));
    slots_[slot] = ir::Tensor::FromBuffer(dtype, std::move(dims), std::move(buffer).value());
    present_[slot] = true;
    if (!is_output_[slot]) record_[slot] = Recorded{bytes, step_index_, true, true, true};
    return &slots_[slot];
  }

  // The slot of the recorded host value whose memory `t` shares when `t` is an input of the step passed through
  // (following chains of pass-throughs to the owner), else -1.
  int PassedThroughFrom(const ir::Tensor& t) const {
    if (!t.buffer()) return -1;
    for (int s : step_.inputs) {
      if (s < 0 || slots_[s].buffer() != t.buffer()) continue;
      const Recorded& rec = record_[s];
      if (rec.alias_of >= 0) return rec.alias_of;
      if (rec.recorded && !rec.device) return s;
    }
    return -1;
  }

  // True when the plan keeps the region of `owner` for the value of `slot` and `buffer` is that region.
  bool InOwnersRegion(int slot, int owner, const ir::Buffer& buffer) const {
    if (!plan_ || owner < 0 || plan_->values[slot].alias_of != owner) return false;
    const PlannedValue& pv = plan_->values[owner];
    return pv.planned && !pv.device && buffer.data() == plan_->arena->data() + pv.offset && buffer.size() == pv.bytes;
  }

  // Counts heap memory. Values a kernel allocated through the sink are planned for the next run; values it
  // built itself (SetOutput) are not, and do not invalidate the plan.
  void Account(int slot, uint64_t bytes, bool plannable) {
    heap_bytes_[slot] = bytes;
    live_ += bytes;
    peak_ = std::max(peak_, live_);
    if (plannable && !is_output_[slot]) record_[slot] = Recorded{bytes, step_index_, true, true, false};
  }

  const Step& step_;
  std::vector<ir::Tensor>& slots_;
  std::vector<bool>& present_;
  Plan* plan_;
  const std::vector<bool>& is_output_;
  std::vector<Recorded>& record_;
  int step_index_;
  uint64_t& live_;
  uint64_t& peak_;
  uint64_t limit_;
  std::vector<uint64_t>& heap_bytes_;
  DeviceContext* device_outputs_;  // non-null: AllocateOutput gives device memory
  DeviceContext* device_;          // the session's device context (null for CPU sessions)
  uint64_t device_limit_;
  const std::vector<const ir::Tensor*>* into_;  // per slot: RunOptions::output_into's tensor, or null
};

// Takes the view of a planned value back from its tensor when the value is released, for the next run to lend out
// again. A view someone else still holds is left to them (the next run makes a new one).
void ReturnView(Plan& plan, int slot, const ir::Tensor& t) {
  if (plan.values[slot].alias_of >= 0) slot = plan.values[slot].alias_of;  // its view is the owner's
  PlannedValue& pv = plan.values[slot];
  if (!pv.planned || pv.view) return;
  const std::shared_ptr<ir::Buffer>& arena = pv.device ? plan.device_arena : plan.arena;
  const std::shared_ptr<ir::Buffer>& buffer = t.buffer();
  if (buffer && buffer.use_count() == 1 && !buffer->owns_memory() && buffer->size() == pv.bytes &&
      buffer->data() == arena->data() + pv.offset) {
    pv.view = buffer;
  }
}

// Waits for the device when a run leaves early, so that no copy still in flight reads host memory the run frees.
class SyncOnExit {
 public:
  explicit SyncOnExit(DeviceContext* device) : device_(device) {}
  ~SyncOnExit() {
    if (device_) (void)device_->Synchronize();
  }
  void Disarm() { device_ = nullptr; }

 private:
  DeviceContext* device_;
};

}  // namespace

StatusOr<const FetchPlan*> Session::Impl::PlanFetch(const std::vector<std::string>& fetch) {
  auto cached = fetch_plans.find(fetch);
  if (cached != fetch_plans.end()) return &cached->second;
  FetchPlan fp;
  fp.needed.assign(steps.size(), true);
  if (fetch.empty()) {
    fp.output_slots = output_slots;
    for (size_t i = 0; i < outputs.size(); ++i) fp.output_index.push_back(static_cast<int>(i));
    return &fetch_plans.emplace(fetch, std::move(fp)).first->second;
  }
  std::set<std::string> seen;
  for (const std::string& name : fetch) {
    size_t i = 0;
    while (i < outputs.size() && outputs[i].name != name) ++i;
    if (i == outputs.size()) {
      std::string names;
      for (const IoInfo& io : outputs) names += StrCat(names.empty() ? "" : ", ", io.name);
      return InvalidArgument("fetch '", name, "' is not an output of the model (outputs: ", names, ")");
    }
    if (!seen.insert(name).second) return InvalidArgument("fetch '", name, "' is given twice");
    fp.output_slots.push_back(output_slots[i]);
    fp.output_index.push_back(static_cast<int>(i));
    fp.key += StrCat("|", name);
  }
  // The steps the fetched outputs depend on: a walk back from them (steps are in topological order).
  std::vector<bool> wanted(slot_value.size(), false);
  for (int s : fp.output_slots) wanted[s] = true;
  for (size_t si = steps.size(); si-- > 0;) {
    const Step& step = steps[si];
    bool needed = false;
    for (int s : step.outputs) needed = needed || (s >= 0 && wanted[s]);
    fp.needed[si] = needed;
    if (!needed) continue;
    for (int s : step.inputs) {
      if (s >= 0) wanted[s] = true;
    }
  }
  return &fetch_plans.emplace(fetch, std::move(fp)).first->second;
}

Status Session::Impl::SynchronizeDevice() {
  if (!device) return Status::Ok();
  ONNXAMP_RETURN_IF_ERROR(device->Activate());
  Status st = device->Synchronize();
  in_flight.clear();
  if (!st.ok()) return st.WithContext(StrCat("running on ", device->Describe()));
  return Status::Ok();
}

StatusOr<std::vector<ir::Tensor>> Session::Impl::Run(const std::vector<ir::Tensor>& given, const RunOptions& run,
                                                     RunStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  const size_t n = slot_value.size();
  DeviceContext* dev = device.get();
  if (dev && !run.synchronize && !run.outputs_on_device) {
    return InvalidArgument("RunOptions: synchronize = false needs outputs_on_device (host outputs need the device)");
  }
  ONNXAMP_ASSIGN_OR_RETURN(const FetchPlan* fetch, PlanFetch(run.fetch));
  // A run's own values; an initializer's slot stays empty (and is read from `constants` in place) unless the
  // caller binds a tensor to it.
  std::vector<ir::Tensor> slots(n);
  std::vector<bool> present = has_constant;
  auto value_at = [&](int s) -> const ir::Tensor* {
    return has_constant[s] && slots[s].dtype() == DType::kUndefined ? &constants[s] : &slots[s];
  };
  std::string signature;
  signature.reserve(128);
  ONNXAMP_RETURN_IF_ERROR(BindInputs(given, slots, present, &signature));
  signature += fetch->key;
  // Caller memory for fetched outputs, by slot (host tensors only).
  std::vector<const ir::Tensor*> into;
  if (!run.output_into.empty()) {
    if (run.output_into.size() != fetch->output_slots.size()) {
      return InvalidArgument("RunOptions::output_into has ", run.output_into.size(), " tensors for ",
                             fetch->output_slots.size(), " fetched outputs");
    }
    into.assign(n, nullptr);
    for (size_t k = 0; k < run.output_into.size(); ++k) {
      const ir::Tensor& t = run.output_into[k];
      if (t.has_data() && t.on_host() && t.dtype() != DType::kString) into[fetch->output_slots[k]] = &t;
    }
  }

  auto plan_it = plans.find(signature);
  Plan* plan = plan_it == plans.end() ? nullptr : &plan_it->second;
  std::vector<Recorded> record(n);
  std::vector<uint64_t> heap_bytes(n, 0);
  uint64_t live = plan ? plan->arena_bytes : 0;
  uint64_t peak = live;

  // Device sessions: each value's copy on the other side (host <-> device), made at most once per run, and the
  // host buffers that copies to the device may still be reading.
  std::vector<ir::Tensor> copies;
  std::vector<std::shared_ptr<ir::Buffer>> pinned;
  DeviceRunCounters counters;
  uint64_t allocations_before = 0;
  double device_seconds = 0;
  SyncOnExit sync_on_exit(dev);
  const bool time_device = dev && options.time_device && run.synchronize;
  if (dev) {
    ONNXAMP_RETURN_IF_ERROR(dev->Activate());
    copies.resize(n);
    dev->ResetPeak();
    allocations_before = dev->memory_stats().device_allocations;
    if (time_device) ONNXAMP_RETURN_IF_ERROR(dev->BeginTiming());
  }
  // Profiling: per executed step its host time, and on a device session mark k + 1 after the k-th executed step.
  std::vector<NodeTime> profile;
  // Profiling: the nodes of the subgraphs that If, Loop and Scan ran (appended to the run's profile at its end, so
  // that the device marks keep indexing `profile`), and those of the step now running.
  std::vector<NodeTime> nested, step_nested;
  if (run.profile && dev) {
    ONNXAMP_RETURN_IF_ERROR(dev->BeginProfile(steps.size() + 1));
    ONNXAMP_RETURN_IF_ERROR(dev->Mark(0));
  }
  // The value of slot s on the device or on the host, copied there when needed.
  auto locate = [&](int s, bool on_device, const ir::Tensor** out) -> Status {
    const ir::Tensor* t = &slots[s];
    if (has_constant[s] && slots[s].dtype() == DType::kUndefined) {
      if (on_device && device_constants[s].has_data()) {
        *out = &device_constants[s];
        return Status::Ok();
      }
      t = &constants[s];
    }
    if (t->dtype() == DType::kString || !t->has_data() || t->on_host() != on_device) {
      *out = t;
      return Status::Ok();
    }
    ir::Tensor& copy = copies[s];
    if (!copy.has_data()) ONNXAMP_RETURN_IF_ERROR(CopyAcross(*t, on_device, &copy, counters, pinned));
    *out = &copy;
    return Status::Ok();
  };

  // Drops the values whose last reader is step `si` (run or skipped: every other reader comes before it).
  auto release = [&](const Step& step) {
    for (int s : step.release) {
      if (plan) ReturnView(*plan, s, slots[s]);
      slots[s] = ir::Tensor();
      present[s] = false;
      live -= heap_bytes[s];
      heap_bytes[s] = 0;
      if (dev) copies[s] = ir::Tensor();
    }
    for (int s : step.release_copies) copies[s] = ir::Tensor();
  };

  std::vector<const ir::Tensor*> in_ptrs;
  for (size_t si = 0; si < steps.size(); ++si) {
    const Step& step = steps[si];
    if (!fetch->needed[si]) {
      release(step);
      continue;
    }
    in_ptrs.clear();
    if (!dev) {
      for (int s : step.inputs) in_ptrs.push_back(s >= 0 && present[s] ? value_at(s) : nullptr);
    } else {
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        const int s = step.inputs[i];
        const ir::Tensor* t = nullptr;
        if (s >= 0 && present[s]) {
          Status st = locate(s, step.input_on_device[i], &t);
          if (!st.ok()) {
            return st.WithContext(StrCat("node ", step.node->Describe(), ": input ", i, " '", slot_value[s]->name(),
                                         "' to ", step.input_on_device[i] ? DeviceName(dev->device()) : "the host"));
          }
        }
        in_ptrs.push_back(t);
      }
    }
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (step.inputs[i] >= 0 && !present[step.inputs[i]]) {
        return Internal("node ", step.node->Describe(), ": input ", i, " '", slot_value[step.inputs[i]]->name(),
                        "' has no value at run time");
      }
    }
    const KernelDef& def = *step.def;
    if (!def.dtypes.empty()) {
      const ir::Tensor* t = static_cast<size_t>(def.dtype_input) < in_ptrs.size() ? in_ptrs[def.dtype_input] : nullptr;
      if (t && std::find(def.dtypes.begin(), def.dtypes.end(), t->dtype()) == def.dtypes.end()) {
        std::string accepted;
        for (DType d : def.dtypes) accepted += StrCat(accepted.empty() ? "" : ", ", DTypeName(d));
        return Unimplemented("node ", step.node->Describe(), ": ", def.op_type, " does not support input ",
                             def.dtype_input, " of type ", DTypeName(t->dtype()), " on ", DeviceName(def.device),
                             " (supported: ", accepted, ")");
      }
    }
    DeviceContext* step_device = step.on_device ? dev : nullptr;
    StepSink sink(step, slots, present, plan, is_output, record, static_cast<int>(si), live, peak, memory_limit,
                  heap_bytes, def.outputs_on_host ? nullptr : step_device, dev, device_limit,
                  into.empty() ? nullptr : &into);
    KernelContext ctx(*step.node, step.opset, in_ptrs, step.outputs.size(), run.threads ? *run.threads : *threads,
                      SeedForStep(step.seed, run.rng_step), sink, step_device);
    ctx.set_rng_step(run.rng_step);
    if (run.profile) {
      step_nested.clear();
      ctx.set_subgraph_profile(&step_nested);
    }
    const auto step_start = run.profile ? std::chrono::steady_clock::now() : start;
    Status st = step.kernel->Compute(ctx);
    if (!st.ok()) return st.WithContext(StrCat("node ", step.node->Describe()));
    if (run.profile) {
      const double host = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
      profile.push_back({step.node->Describe(), step.node->op_type(), step.on_device, host, ""});
      if (dev) ONNXAMP_RETURN_IF_ERROR(dev->Mark(profile.size()));
      for (NodeTime& t : step_nested) {
        t.within = t.within.empty() ? profile.back().node : StrCat(profile.back().node, " > ", t.within);
        nested.push_back(std::move(t));
      }
    }
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      if (step.outputs[i] >= 0 && !present[step.outputs[i]]) {
        return Internal("node ", step.node->Describe(), ": the kernel did not produce output ", i);
      }
    }
    release(step);
  }

  std::vector<ir::Tensor> results;
  results.reserve(fetch->output_slots.size());
  for (size_t k = 0; k < fetch->output_slots.size(); ++k) {
    const int s = fetch->output_slots[k];
    const std::string& name = outputs[fetch->output_index[k]].name;
    if (!present[s]) return Internal("graph output '", name, "' has no value");
    const ir::Tensor* value = nullptr;
    if (!dev || run.outputs_on_device) {
      value = value_at(s);
    } else {
      Status st = locate(s, /*on_device=*/false, &value);
      if (!st.ok()) return st.WithContext(StrCat("graph output '", name, "' to the host"));
    }
    if (!value) return Internal("graph output '", name, "' has no value");
    ir::Tensor t = *value;
    t.set_name(name);
    results.push_back(std::move(t));
  }
  if (dev) {
    // Kernels run asynchronously: an error one raised on the device surfaces here (or, without synchronize, at the
    // next synchronising call).
    if (run.profile) {
      StatusOr<std::vector<double>> marks = dev->EndProfile();
      if (!marks.ok()) return marks.status().WithContext(StrCat("running on ", dev->Describe()));
      for (size_t k = 0; k < profile.size() && k < marks->size(); ++k) {
        if (profile[k].on_device) profile[k].seconds = (*marks)[k];
      }
    }
    if (time_device) {
      StatusOr<double> seconds = dev->EndTiming();
      if (!seconds.ok()) return seconds.status().WithContext(StrCat("running on ", dev->Describe()));
      device_seconds = *seconds;
    }
    if (run.synchronize) {
      Status st = dev->Synchronize();
      if (!st.ok()) return st.WithContext(StrCat("running on ", dev->Describe()));
      in_flight.clear();
    } else {
      for (std::shared_ptr<ir::Buffer>& b : pinned) in_flight.push_back(std::move(b));
    }
    sync_on_exit.Disarm();
    pinned.clear();
  }

  // When some intermediate value came from the heap (first run with these shapes, or a size the plan did not
  // foresee), plan every intermediate value of this run for the next run with the same shapes: host values in one
  // arena, device values in another.
  int unplanned = 0;
  for (const Recorded& rec : record) unplanned += rec.recorded && rec.from_heap ? 1 : 0;
  if (unplanned > 0) {
    // Each value's memory stays in use until its last reader, and until the last reader of every value that
    // shares it (a pass-through).
    std::vector<int> last_use(n, -1);
    for (size_t slot = 0; slot < n; ++slot) {
      if (record[slot].recorded) last_use[slot] = std::max(record[slot].first_step, last_read[slot]);
    }
    for (size_t slot = 0; slot < n; ++slot) {
      const int owner = record[slot].alias_of;
      if (owner >= 0) last_use[owner] = std::max(last_use[owner], last_read[slot]);
    }
    std::vector<PlanRequest> requests[2];
    std::vector<int> request_slots[2];
    for (size_t slot = 0; slot < n; ++slot) {
      const Recorded& rec = record[slot];
      if (!rec.recorded) continue;
      requests[rec.device].push_back({rec.bytes, rec.first_step, last_use[slot]});
      request_slots[rec.device].push_back(static_cast<int>(slot));
    }
    Plan fresh;
    fresh.values.resize(n);
    const MemoryPlan mp = PlanMemory(requests[0]);
    fresh.arena_bytes = mp.arena_bytes;
    fresh.arena = std::make_shared<ir::Buffer>(mp.arena_bytes, ir::Buffer::Init::kUninitialized);
    for (size_t i = 0; i < requests[0].size(); ++i) {
      PlannedValue& pv = fresh.values[request_slots[0][i]];
      pv.planned = true;
      pv.offset = mp.offsets[i];
      pv.bytes = requests[0][i].bytes;
      pv.view = std::make_shared<ir::Buffer>(fresh.arena->data() + pv.offset, pv.bytes, fresh.arena);
    }
    for (size_t slot = 0; slot < n; ++slot) {
      const int owner = record[slot].alias_of;
      if (owner >= 0 && fresh.values[owner].planned && !fresh.values[owner].device) fresh.values[slot].alias_of = owner;
    }
    if (!requests[1].empty()) {
      const MemoryPlan dp = PlanMemory(requests[1], kDeviceAlignment);
      fresh.device_arena_bytes = dp.arena_bytes;
      ONNXAMP_RETURN_IF_ERROR(AllocateDeviceArena(fresh));
      for (size_t i = 0; i < requests[1].size(); ++i) {
        PlannedValue& pv = fresh.values[request_slots[1][i]];
        pv.planned = true;
        pv.device = true;
        pv.offset = dp.offsets[i];
        pv.bytes = requests[1][i].bytes;
        pv.view = std::make_shared<ir::Buffer>(fresh.device_arena->data() + pv.offset, pv.bytes, fresh.device_arena,
                                               fresh.device_arena->kind());
      }
    }
    if (options.max_memory_plans > 0 && !plans.count(signature)) {
      while (plans.size() >= options.max_memory_plans) plans.erase(plans.begin());
    }
    plans[signature] = std::move(fresh);
  }

  if (stats) {
    stats->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stats->peak_bytes = peak;
    stats->arena_bytes = plan ? plan->arena_bytes + plan->device_arena_bytes : 0;
    stats->planned = plan != nullptr;
    stats->unplanned_values = unplanned;
    if (dev) {
      const DeviceMemoryStats memory = dev->memory_stats();
      stats->device_seconds = device_seconds;
      stats->device_peak_bytes = memory.peak_bytes;
      stats->device_allocations = memory.device_allocations - allocations_before;
      stats->host_to_device_bytes = counters.host_to_device_bytes;
      stats->device_to_host_bytes = counters.device_to_host_bytes;
    }
    stats->nodes = std::move(profile);
    for (NodeTime& t : nested) stats->nodes.push_back(std::move(t));
  }
  return results;
}

Session::Impl::~Impl() {
  // Kernels and device buffers go before the device context they belong to.
  plans.clear();
  steps.clear();
  device_constants.clear();
  device.reset();
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

StatusOr<std::unique_ptr<Session>> Session::Create(ir::Model model, const SessionOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->model = std::move(model);
  impl->options = options;
  if (options.device != Device::kCpu) {
    const DeviceBackend* backend = FindDeviceBackend(options.device);
    if (!backend) {
      return FailedPrecondition("device ", DeviceName(options.device),
                                ": no backend is registered for it (this program was built without it, or found no "
                                "usable device)");
    }
    impl->backend = *backend;
    StatusOr<std::unique_ptr<DeviceContext>> context = impl->backend.create_context(options);
    if (!context.ok()) return context.status();
    impl->device = std::move(context).value();
  }
  if (impl->model.graph) {
    // Sequences whose elements the graph fixes become tensors first (lower_sequences.h); this is what lets such graphs
    // run at all, so it runs whatever the optimization level.
    bool lowered = false;
    Status st = LowerSequences(impl->model, &lowered);
    if (st.ok() && lowered) st = ir::Verify(impl->model);  // as a PassPipeline checks each pass
    if (!st.ok()) return st.WithContext("lowering sequences");
    // Loop-invariant body nodes move in front of their loops (hoist_loop_invariants.h) before the values subgraphs read
    // are pinned below, so that what the bodies now read from outer scope is pinned too.
    // A lowered model was verified just above.
    if (options.graph_optimization != GraphOptimization::kNone && (lowered || ir::Verify(impl->model).ok())) {
      bool hoisted = false;
      st = HoistLoopInvariants(*impl->model.graph, &hoisted);
      if (st.ok() && hoisted) st = ir::Verify(impl->model);
      if (!st.ok()) return st.WithContext("hoisting loop invariants");
    }
    // The passes see a value's readers through its uses, which do not include what subgraphs read from outer scope:
    // those values are graph outputs while the passes run, so that none is fused away, folded or renamed.
    ir::Graph& g = *impl->model.graph;
    std::vector<ir::Value*> pinned;
    std::unordered_set<const ir::Value*> seen;
    for (ir::Node* node : g.nodes()) {
      for (ir::Value* v : g.SubgraphReads(node)) {
        if (seen.insert(v).second) pinned.push_back(v);
      }
    }
    const size_t first_pinned = g.outputs().size();
    for (ir::Value* v : pinned) g.AddOutput(v);
    ONNXAMP_RETURN_IF_ERROR(OptimizeForInference(impl->model, options));
    if (impl->device && impl->backend.optimize_graph) {
      Status st = impl->backend.optimize_graph(impl->model, options);
      if (!st.ok()) return st.WithContext(StrCat("optimizing the graph for ", DeviceName(options.device)));
    }
    while (g.outputs().size() > first_pinned) g.RemoveOutput(g.outputs().size() - 1);
  }
  if (options.finalize_graph) ONNXAMP_RETURN_IF_ERROR(options.finalize_graph(impl->model));
  ONNXAMP_RETURN_IF_ERROR(impl->Build());
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

const ir::Model& Session::model() const { return impl_->model; }
const std::vector<IoInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<IoInfo>& Session::outputs() const { return impl_->outputs; }
const Placement& Session::placement() const { return impl_->placement; }

StatusOr<std::vector<ir::Tensor>> Session::Run(const std::vector<ir::Tensor>& inputs, RunStats* stats) {
  return impl_->Run(inputs, RunOptions(), stats);
}

StatusOr<std::vector<ir::Tensor>> Session::Run(const std::vector<ir::Tensor>& inputs, const RunOptions& run,
                                               RunStats* stats) {
  return impl_->Run(inputs, run, stats);
}

StatusOr<ir::Tensor> Session::ToDevice(const ir::Tensor& t) {
  DeviceContext* dev = impl_->device.get();
  if (!dev || !t.on_host()) return t;
  if (t.dtype() == DType::kString) return InvalidArgument("tensor '", t.name(), "': strings cannot go to a device");
  if (!t.has_data()) return InvalidArgument("tensor '", t.name(), "' has no data");
  ONNXAMP_RETURN_IF_ERROR(dev->Activate());
  StatusOr<std::shared_ptr<ir::Buffer>> buffer = dev->Allocate(t.nbytes());
  if (!buffer.ok()) return buffer.status().WithContext(StrCat("tensor '", t.name(), "' to ", dev->Describe()));
  ONNXAMP_RETURN_IF_ERROR(dev->CopyHostToDevice(t.data(), (*buffer)->data(), t.nbytes()));
  ONNXAMP_RETURN_IF_ERROR(impl_->SynchronizeDevice());
  ir::Tensor out = ir::Tensor::FromBuffer(t.dtype(), t.dims(), std::move(buffer).value());
  out.set_name(t.name());
  return out;
}

StatusOr<ir::Tensor> Session::ToHost(const ir::Tensor& t) {
  if (t.on_host()) return t;
  DeviceContext* dev = impl_->device.get();
  if (!dev) return InvalidArgument("tensor '", t.name(), "' is in device memory but the session runs on the cpu");
  ONNXAMP_RETURN_IF_ERROR(impl_->SynchronizeDevice());
  StatusOr<std::shared_ptr<ir::Buffer>> buffer = dev->AllocateHost(t.nbytes());
  if (!buffer.ok()) return buffer.status().WithContext(StrCat("tensor '", t.name(), "' to the host"));
  ONNXAMP_RETURN_IF_ERROR(dev->CopyDeviceToHost(t.data(), (*buffer)->data(), t.nbytes()));
  ir::Tensor out = ir::Tensor::FromBuffer(t.dtype(), t.dims(), std::move(buffer).value());
  out.set_name(t.name());
  return out;
}

Status Session::Synchronize() { return impl_->SynchronizeDevice(); }

DeviceContext* Session::device_context() const { return impl_->device.get(); }

ThreadPool& Session::threads() const { return *impl_->threads; }

}  // namespace onnxamp::exec
