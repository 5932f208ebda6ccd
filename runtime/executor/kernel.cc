// Kernel registry lookups and the kernel context's output handling.
#include "runtime/executor/kernel.h"

#include <optional>
#include <set>

#include "runtime/ops/common/shape_util.h"

namespace onnxamp::exec {

const char* DeviceName(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

void KernelRegistry::Register(KernelDef def) {
  ONNXAMP_CHECK(def.factory != nullptr, "kernel ", def.op_type, " has no factory");
  for (const KernelDef& d : defs_) {
    const bool same = d.op_type == def.op_type && d.domain == def.domain && d.device == def.device;
    ONNXAMP_CHECK(!same || d.end_version < def.since_version || def.end_version < d.since_version, "kernel ",
                  def.op_type, " registered twice for overlapping opsets");
  }
  defs_.push_back(std::move(def));
}

StatusOr<const KernelDef*> KernelRegistry::Find(std::string_view op, std::string_view domain, int64_t opset,
                                                Device device) const {
  const std::string_view dom = domain == "ai.onnx" ? std::string_view() : domain;
  std::vector<const KernelDef*> same_op;
  for (const KernelDef& d : defs_) {
    if (d.op_type != op || d.domain != dom || d.device != device) continue;
    if (d.since_version <= opset && opset <= d.end_version) return &d;
    same_op.push_back(&d);
  }
  const std::string shown_domain = dom.empty() ? "ai.onnx" : std::string(dom);
  if (same_op.empty()) {
    return Unimplemented("op ", op, " (domain ", shown_domain, ") is not supported on ", DeviceName(device));
  }
  std::string ranges;
  for (const KernelDef* d : same_op) {
    if (!ranges.empty()) ranges += ", ";
    ranges += d->end_version == std::numeric_limits<int64_t>::max() ? StrCat(d->since_version, "+")
                                                                    : StrCat(d->since_version, "-", d->end_version);
  }
  return Unimplemented("op ", op, " at opset ", opset, " (domain ", shown_domain, ") is not supported on ",
                       DeviceName(device), " (supported opsets: ", ranges, ")");
}

bool KernelContext::output_requested(size_t i) const { return i < num_outputs_ && sink_->requested(i); }

StatusOr<ir::Tensor*> KernelContext::AllocateOutput(size_t i, DType dtype, std::vector<int64_t> dims) {
  ONNXAMP_CHECK(i < num_outputs_, "node ", node_->Describe(), ": output ", i, " out of range");
  return sink_->Allocate(i, dtype, std::move(dims));
}

Status KernelContext::SetOutput(size_t i, ir::Tensor t) {
  ONNXAMP_CHECK(i < num_outputs_, "node ", node_->Describe(), ": output ", i, " out of range");
  return sink_->Set(i, std::move(t));
}

namespace {

// Collects the outputs a kernel allocates or sets, in host memory.
class HostSink : public KernelContext::Sink {
 public:
  explicit HostSink(const KernelContext& outer) : outer_(outer), outputs_(outer.num_outputs()) {}

  bool requested(size_t i) const override { return outer_.output_requested(i); }
  StatusOr<ir::Tensor*> Allocate(size_t i, DType dtype, std::vector<int64_t> dims) override {
    ONNXAMP_RETURN_IF_ERROR(ops::CheckFitsInMemory(dtype, dims, StrCat("output ", i)));
    outputs_[i] = ir::Tensor::Uninitialized(dtype, std::move(dims));
    return &*outputs_[i];
  }
  Status Set(size_t i, ir::Tensor t) override {
    outputs_[i] = std::move(t);
    return Status::Ok();
  }

  std::vector<ir::Tensor> Take() {
    std::vector<ir::Tensor> out;
    for (auto& t : outputs_) out.push_back(t ? std::move(*t) : ir::Tensor());
    return out;
  }

 private:
  const KernelContext& outer_;
  std::vector<std::optional<ir::Tensor>> outputs_;
};

}  // namespace

std::vector<const ir::Value*> SubgraphReads(const ir::Node& node) {
  // A session's graph is always the outermost, so every name a subgraph reads resolves in it.
  const std::vector<ir::Value*> reads = node.graph()->SubgraphReads(&node);
  return {reads.begin(), reads.end()};
}

std::string SeedName(const ir::Node& node) {
  if (const ir::Attribute* a = node.FindAttribute("seed_from"); a && a->type() == ir::AttrType::kString) return a->s;
  for (const ir::Value* v : node.outputs()) {
    if (v) return v->name();
  }
  return node.name();
}

StatusOr<std::vector<ir::Tensor>> RunOnHost(const OpKernel& kernel, const ir::Node& node, int64_t opset,
                                            std::vector<const ir::Tensor*> inputs, const KernelContext& outer) {
  HostSink sink(outer);
  KernelContext host(node, opset, inputs, outer.num_outputs(), outer.threads(), outer.seed(), sink);
  host.set_rng_step(outer.rng_step());
  ONNXAMP_RETURN_IF_ERROR(kernel.Compute(host));
  return sink.Take();
}

}  // namespace onnxamp::exec
