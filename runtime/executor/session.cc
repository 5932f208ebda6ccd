// Session and executor: kernel creation, input binding checks, the run loop, and the static memory plan.
#include "runtime/executor/session.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <unordered_map>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/memory_plan.h"
#include "runtime/ir/verify.h"

namespace onnxamp::exec {

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

constexpr int kNever = std::numeric_limits<int>::max();

uint64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : UINT64_MAX;
}

std::string DimsString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

struct Step {
  ir::Node* node;
  const KernelDef* def;
  std::unique_ptr<OpKernel> kernel;
  int64_t opset;
  std::vector<int> inputs;   // slot per input, -1 for omitted
  std::vector<int> outputs;  // slot per output, -1 for omitted
  std::vector<int> release;  // slots whose last reader is this step
};

// Per-run record of what each slot needed, to build the plan for the next run with the same input shapes.
struct Recorded {
  uint64_t bytes = 0;
  int first_step = 0;
  bool recorded = false;  // the slot was allocated through the sink in this run
  bool from_heap = false;
};

// Where the plan puts one value: its region of the arena, and a view of that region made with the plan. The view
// (the Buffer object a tensor needs) is lent to the value's tensor while the value is alive and taken back when it
// is released, so that a planned run allocates nothing for its intermediate values.
struct PlannedValue {
  bool planned = false;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  std::shared_ptr<ir::Buffer> view;  // null while lent out
};

struct Plan {
  std::vector<PlannedValue> values;  // per slot
  uint64_t arena_bytes = 0;
  std::shared_ptr<ir::Buffer> arena;
};

}  // namespace

class Session::Impl {
 public:
  ir::Model model;
  SessionOptions options;
  std::unique_ptr<ThreadPool> threads;
  std::vector<IoInfo> inputs, outputs;
  std::unordered_map<const ir::Value*, int> slot_of;
  std::vector<ir::Value*> slot_value;
  std::vector<Step> steps;
  std::vector<int> last_read;         // per slot: last step that reads it (kNever for graph outputs)
  std::vector<bool> is_output;        // per slot
  std::vector<int> input_slots;       // per graph input
  std::vector<int> output_slots;      // per graph output
  std::vector<ir::Tensor> constants;  // per slot: initializer value (empty tensor when none)
  std::vector<bool> has_constant;
  std::map<std::string, Plan> plans;  // by input-shape signature
  uint64_t memory_limit = 0;

  Status Build();
  Status BindInputs(const std::vector<ir::Tensor>& given, std::vector<ir::Tensor>& slots, std::vector<bool>& present,
                    std::string* signature);
  StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>& given, RunStats* stats);
};

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
  for (ir::Value* v : g.inputs()) {
    input_slots.push_back(slot_of[v]);
    inputs.push_back({v->name(), v->type(), v->initializer() != nullptr});
  }
  for (ir::Value* v : g.outputs()) {
    output_slots.push_back(slot_of[v]);
    is_output[slot_of[v]] = true;
    outputs.push_back({v->name(), v->type(), false});
  }
  const KernelRegistry& registry = KernelRegistry::Global();
  for (ir::Node* node : g.nodes()) {
    if (!node->subgraphs().empty()) {
      return Unimplemented("node ", node->Describe(), ": ops with subgraphs (", node->op_type(),
                           ") are not supported by the runtime");
    }
    const int64_t opset = model.OpsetVersion(node->domain());
    if (opset == 0) {
      return InvalidArgument("node ", node->Describe(), ": the model imports no opset for domain '",
                             node->domain().empty() ? "ai.onnx" : node->domain(), "'");
    }
    StatusOr<const KernelDef*> def = registry.Find(node->op_type(), node->domain(), opset, options.device);
    if (!def.ok()) return def.status().WithContext(StrCat("node ", node->Describe()));
    KernelInfo info{*node, opset, options.device};
    StatusOr<std::unique_ptr<OpKernel>> kernel = (*def)->factory(info);
    if (!kernel.ok()) return kernel.status().WithContext(StrCat("node ", node->Describe()));
    Step step{node, *def, std::move(kernel).value(), opset, {}, {}, {}};
    const int index = static_cast<int>(steps.size());
    for (ir::Value* v : node->inputs()) {
      const int s = v ? slot_of.at(v) : -1;
      step.inputs.push_back(s);
      if (s >= 0) last_read[s] = index;
    }
    for (ir::Value* v : node->outputs()) step.outputs.push_back(v ? slot_of.at(v) : -1);
    steps.push_back(std::move(step));
  }
  for (size_t s = 0; s < n; ++s) {
    if (is_output[s] || has_constant[s] || slot_value[s]->is_graph_input()) continue;
    ir::Value* v = slot_value[s];
    if (!v->producer()) continue;
    // Released after its last reader, or right after its producer when nothing reads it.
    const int producer_step = [&] {
      for (size_t i = 0; i < steps.size(); ++i)
        if (steps[i].node == v->producer()) return static_cast<int>(i);
      return -1;
    }();
    const int release_at = std::max(last_read[s], producer_step);
    if (release_at >= 0) steps[release_at].release.push_back(static_cast<int>(s));
  }
  for (int s : output_slots) last_read[s] = kNever;
  memory_limit = options.memory_limit_bytes ? options.memory_limit_bytes : PhysicalMemoryBytes();
  threads = std::make_unique<ThreadPool>(options.num_threads);
  return Status::Ok();
}

Status Session::Impl::BindInputs(const std::vector<ir::Tensor>& given, std::vector<ir::Tensor>& slots,
                                 std::vector<bool>& present, std::string* signature) {
  std::unordered_map<std::string, const ir::Tensor*> by_name;
  for (const ir::Tensor& t : given) {
    const ir::Value* v = model.graph->FindValue(t.name());
    if (!v || !v->is_graph_input()) {
      std::string names;
      for (const IoInfo& io : inputs) {
        if (!names.empty()) names += ", ";
        names += io.name;
      }
      return InvalidArgument("input '", t.name(), "' is not an input of the model (inputs: ", names, ")");
    }
    if (!by_name.emplace(t.name(), &t).second) return InvalidArgument("input '", t.name(), "' is given twice");
  }
  std::unordered_map<std::string, std::pair<int64_t, std::string>> symbols;  // param -> (value, input that bound it)
  for (size_t i = 0; i < inputs.size(); ++i) {
    const IoInfo& io = inputs[i];
    const int slot = input_slots[i];
    auto it = by_name.find(io.name);
    if (it == by_name.end()) {
      if (io.has_default) continue;  // the initializer, already in place
      return InvalidArgument("missing input '", io.name, "' (expected ", io.type.ToString(), ")");
    }
    const ir::Tensor& t = *it->second;
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
    *signature += StrCat(io.name, DTypeName(t.dtype()), DimsString(t.dims()), ";");
  }
  return Status::Ok();
}

namespace {

// Output allocation for one step: from the plan's arena when the planned size matches, else from the heap.
class StepSink : public KernelContext::Sink {
 public:
  StepSink(const Step& step, std::vector<ir::Tensor>& slots, std::vector<bool>& present, Plan* plan,
           const std::vector<bool>& is_output, std::vector<Recorded>& record, int step_index, uint64_t& live,
           uint64_t& peak, uint64_t limit, std::vector<uint64_t>& heap_bytes)
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
        heap_bytes_(heap_bytes) {}

  bool requested(size_t i) const override { return i < step_.outputs.size() && step_.outputs[i] >= 0; }

  StatusOr<ir::Tensor*> Allocate(size_t i, DType dtype, std::vector<int64_t> dims) override {
    const int slot = step_.outputs[i];
    if (slot < 0) return Internal("output ", i, " was not requested");
    StatusOr<size_t> bytes = ir::Tensor::ComputeByteSize(dtype, dims);
    if (!bytes.ok()) return bytes.status().WithContext(StrCat("output ", i, " ", DimsString(dims)));
    if (*bytes > limit_ || live_ + *bytes > limit_) {
      return ResourceExhausted("output ", i, " ", DTypeName(dtype), DimsString(dims), " needs ", *bytes,
                               " bytes; with ", live_, " bytes in use that exceeds the ", limit_, " bytes available");
    }
    if (plan_ && !is_output_[slot] && dtype != DType::kString) {
      PlannedValue& pv = plan_->values[slot];
      if (pv.planned && pv.bytes == *bytes) {
        std::shared_ptr<ir::Buffer> view = std::move(pv.view);
        if (!view) view = std::make_shared<ir::Buffer>(plan_->arena->data() + pv.offset, *bytes, plan_->arena);
        slots_[slot] = ir::Tensor::FromBuffer(dtype, std::move(dims), std::move(view));
        present_[slot] = true;
        record_[slot] = Recorded{*bytes, step_index_, true, false};
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
    if (t.buffer() && !t.buffer()->owns_memory()) {
      // A view into the arena (an input passed through): its region may be reused once that input is
      // released, so the output gets its own copy.
      ir::Tensor copy = ir::Tensor::Uninitialized(t.dtype(), t.dims());
      if (t.nbytes()) std::memcpy(copy.mutable_data(), t.data(), t.nbytes());
      t = std::move(copy);
    }
    const uint64_t bytes = t.nbytes();
    t.set_name(std::string());
    slots_[slot] = std::move(t);
    present_[slot] = true;
    Account(slot, bytes, /*plannable=*/false);
    return Status::Ok();
  }

 private:
  // Counts heap memory. Values a kernel allocated through the sink are planned for the next run; values it
  // built itself (SetOutput) are not, and do not invalidate the plan.
  void Account(int slot, uint64_t bytes, bool plannable) {
    heap_bytes_[slot] = bytes;
    live_ += bytes;
    peak_ = std::max(peak_, live_);
    if (plannable && !is_output_[slot]) record_[slot] = Recorded{bytes, step_index_, true, true};
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
};

// Takes the view of a planned value back from its tensor when the value is released, for the next run to lend out
// again. A view someone else still holds is left to them (the next run makes a new one).
void ReturnView(Plan& plan, int slot, const ir::Tensor& t) {
  PlannedValue& pv = plan.values[slot];
  if (!pv.planned || pv.view) return;
  const std::shared_ptr<ir::Buffer>& buffer = t.buffer();
  if (buffer && buffer.use_count() == 1 && !buffer->owns_memory() && buffer->size() == pv.bytes &&
      buffer->data() == plan.arena->data() + pv.offset) {
    pv.view = buffer;
  }
}

}  // namespace

StatusOr<std::vector<ir::Tensor>> Session::Impl::Run(const std::vector<ir::Tensor>& given, RunStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  const size_t n = slot_value.size();
  // A run's own values; an initializer's slot stays empty (and is read from `constants` in place) unless the
  // caller binds a tensor to it.
  std::vector<ir::Tensor> slots(n);
  std::vector<bool> present = has_constant;
  auto value_at = [&](int s) -> const ir::Tensor* {
    return has_constant[s] && slots[s].dtype() == DType::kUndefined ? &constants[s] : &slots[s];
  };
  std::string signature;
  ONNXAMP_RETURN_IF_ERROR(BindInputs(given, slots, present, &signature));

  auto plan_it = plans.find(signature);
  Plan* plan = plan_it == plans.end() ? nullptr : &plan_it->second;
  std::vector<Recorded> record(n);
  std::vector<uint64_t> heap_bytes(n, 0);
  uint64_t live = plan ? plan->arena_bytes : 0;
  uint64_t peak = live;

  std::vector<const ir::Tensor*> in_ptrs;
  for (size_t si = 0; si < steps.size(); ++si) {
    const Step& step = steps[si];
    in_ptrs.clear();
    for (int s : step.inputs) in_ptrs.push_back(s >= 0 && present[s] ? value_at(s) : nullptr);
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
    StepSink sink(step, slots, present, plan, is_output, record, static_cast<int>(si), live, peak, memory_limit,
                  heap_bytes);
    KernelContext ctx(*step.node, step.opset, in_ptrs, step.outputs.size(), *threads,
                      options.seed * 0x9e3779b97f4a7c15ull + si, sink);
    Status st = step.kernel->Compute(ctx);
    if (!st.ok()) return st.WithContext(StrCat("node ", step.node->Describe()));
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      if (step.outputs[i] >= 0 && !present[step.outputs[i]]) {
        return Internal("node ", step.node->Describe(), ": the kernel did not produce output ", i);
      }
    }
    for (int s : step.release) {
      if (plan) ReturnView(*plan, s, slots[s]);
      slots[s] = ir::Tensor();
      present[s] = false;
      live -= heap_bytes[s];
      heap_bytes[s] = 0;
    }
  }

  std::vector<ir::Tensor> results;
  for (size_t i = 0; i < output_slots.size(); ++i) {
    const int s = output_slots[i];
    if (!present[s]) return Internal("graph output '", outputs[i].name, "' has no value");
    ir::Tensor t = *value_at(s);
    t.set_name(outputs[i].name);
    results.push_back(std::move(t));
  }

  // When some intermediate value came from the heap (first run with these shapes, or a size the plan did not
  // foresee), plan every intermediate value of this run for the next run with the same shapes.
  int unplanned = 0;
  for (const Recorded& rec : record) unplanned += rec.recorded && rec.from_heap ? 1 : 0;
  if (unplanned > 0) {
    std::vector<PlanRequest> requests;
    std::vector<int> request_slots;
    for (size_t slot = 0; slot < n; ++slot) {
      const Recorded& rec = record[slot];
      if (!rec.recorded) continue;
      requests.push_back({rec.bytes, rec.first_step, std::max(rec.first_step, last_read[slot])});
      request_slots.push_back(static_cast<int>(slot));
    }
    MemoryPlan mp = PlanMemory(requests);
    Plan fresh;
    fresh.arena_bytes = mp.arena_bytes;
    fresh.arena = std::make_shared<ir::Buffer>(mp.arena_bytes, ir::Buffer::Init::kUninitialized);
    fresh.values.resize(n);
    for (size_t i = 0; i < requests.size(); ++i) {
      PlannedValue& pv = fresh.values[request_slots[i]];
      pv.planned = true;
      pv.offset = mp.offsets[i];
      pv.bytes = requests[i].bytes;
      pv.view = std::make_shared<ir::Buffer>(fresh.arena->data() + pv.offset, pv.bytes, fresh.arena);
    }
    plans[signature] = std::move(fresh);
  }

  if (stats) {
    stats->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stats->peak_bytes = peak;
    stats->arena_bytes = plan ? plan->arena_bytes : 0;
    stats->planned = plan != nullptr;
    stats->unplanned_values = unplanned;
  }
  return results;
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

StatusOr<std::unique_ptr<Session>> Session::Create(ir::Model model, const SessionOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->model = std::move(model);
  impl->options = options;
  if (options.device != Device::kCpu) {
    return Unimplemented("device ", DeviceName(options.device), " is not available in this build of the runtime");
  }
  ONNXAMP_RETURN_IF_ERROR(OptimizeForInference(impl->model));
  ONNXAMP_RETURN_IF_ERROR(impl->Build());
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

const ir::Model& Session::model() const { return impl_->model; }
const std::vector<IoInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<IoInfo>& Session::outputs() const { return impl_->outputs; }

StatusOr<std::vector<ir::Tensor>> Session::Run(const std::vector<ir::Tensor>& inputs, RunStats* stats) {
  return impl_->Run(inputs, stats);
}

}  // namespace onnxamp::exec
