// CPU kernels of the channels-last ops (see graph_optimizer.h): each one transposes its channels-last inputs to the
// plain layout, runs the CPU kernel of the plain op (FusedConv, MaxPool, AveragePool, GlobalAveragePool) on them,
// and transposes the result back. CPU sessions never make these ops (the layout pass runs for devices whose kernels
// want it); these kernels are the reference the device kernels are tested against, and let a rewritten graph run
// on the CPU with the same checks and messages as the plain ops.
#include <memory>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/layout/channels_last.h"
#include "runtime/ops/transpose/transpose.h"

namespace onnxamp::ops {
namespace {

// The opset the plain pooling ops run at. The node keeps its model's attributes; later opsets only added
// attributes (dilations, ceil_mode), whose defaults are the earlier behaviour.
constexpr int64_t kPlainPoolOpset = 22;

enum class Op { kConv, kMaxPool, kAveragePool, kGlobalAveragePool };

// `t` with its channels moved from last to second (to_last false) or from second to last.
ir::Tensor MoveChannels(const ir::Tensor& t, bool to_last, exec::ThreadPool& pool) {
  const std::vector<int64_t> perm = ChannelsPerm(static_cast<int64_t>(t.rank()), to_last);
  std::vector<int64_t> dims;
  for (int64_t d : perm) dims.push_back(t.dims()[static_cast<size_t>(d)]);
  ir::Tensor out = ir::Tensor::Uninitialized(t.dtype(), dims);
  if (out.num_elements() > 0) {
    TransposeFast(t.data(), out.mutable_data(), t.dims(), perm, static_cast<size_t>(DTypeBits(t.dtype()) / 8), &pool);
  }
  return out;
}

class ChannelsLastCpu : public exec::OpKernel {
 public:
  ChannelsLastCpu(const exec::KernelInfo& info, Status* st) {
    const std::string& op = info.node.op_type();
    std::string plain_op = op;
    std::string domain;
    if (op == exec::kChannelsLastConvOp) {
      op_ = Op::kConv;
      plain_op = exec::kFusedConvOp;
      domain = exec::kInternalDomain;
      opset_ = 1;
    } else if (op == exec::kChannelsLastMaxPoolOp) {
      op_ = Op::kMaxPool;
      plain_op = "MaxPool";
    } else if (op == exec::kChannelsLastAveragePoolOp) {
      op_ = Op::kAveragePool;
      plain_op = "AveragePool";
    } else {
      op_ = Op::kGlobalAveragePool;
      plain_op = "GlobalAveragePool";
    }
    if (op_ != Op::kConv) opset_ = kPlainPoolOpset;
    if (!(*st = CheckChannelsLastNode(info.node, /*single_input=*/op_ != Op::kConv)).ok()) return;
    // The plain node: same attributes and as many inputs, in a graph of its own.
    graph_ = std::make_unique<ir::Graph>();
    std::vector<ir::Value*> inputs;
    for (size_t i = 0; i < info.node.inputs().size(); ++i) {
      inputs.push_back(info.node.input(i) ? graph_->CreateValue("input" + std::to_string(i)) : nullptr);
    }
    plain_ = graph_->AddNode(plain_op, inputs, {graph_->CreateValue("output")}, info.node.name(), domain);
    for (const ir::Attribute& a : info.node.attributes()) plain_->SetAttribute(a);
    StatusOr<const exec::KernelDef*> def =
        exec::KernelRegistry::Global().Find(plain_op, domain, opset_, exec::Device::kCpu);
    if (!def.ok()) {
      *st = def.status();
      return;
    }
    StatusOr<std::unique_ptr<exec::OpKernel>> kernel =
        (*def)->factory(exec::KernelInfo{*plain_, opset_, info.device, info.options});
    if (!kernel.ok()) {
      *st = kernel.status();
      return;
    }
    kernel_ = std::move(kernel).value();
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_RETURN_IF_ERROR(CheckChannelsLastInput(x));
    // The plain inputs: X, W and Z with their channels moved back; B as it is.
    std::vector<ir::Tensor> moved(ctx.num_inputs());
    std::vector<const ir::Tensor*> inputs(ctx.num_inputs(), nullptr);
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const ir::Tensor* t = ctx.input(i);
      if (!t || i == 2) {
        inputs[i] = t;
        continue;
      }
      if (i == 3) ONNXAMP_RETURN_IF_ERROR(CheckChannelsLastZ(*t, *x));
      if (t->rank() < 2) {
        return InvalidArgument("input ", i == 1 ? "W" : "Z", " has shape ", ShapeToString(t->dims()),
                               ", expected at least 3 dims");
      }
      moved[i] = MoveChannels(*t, /*to_last=*/false, ctx.threads());
      inputs[i] = &moved[i];
    }
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> out,
                             exec::RunOnHost(*kernel_, *plain_, opset_, std::move(inputs), ctx));
    ir::Tensor& y = out.at(0);
    // GlobalAveragePool's output [N, C, 1, ...] is already laid out as [N, 1, ..., C].
    if (op_ == Op::kGlobalAveragePool) return ctx.SetOutput(0, std::move(y));
    return ctx.SetOutput(0, MoveChannels(y, /*to_last=*/true, ctx.threads()));
  }

 private:
  Op op_ = Op::kConv;
  int64_t opset_ = 1;
  std::unique_ptr<ir::Graph> graph_;
  ir::Node* plain_ = nullptr;
  std::unique_ptr<exec::OpKernel> kernel_;
};

}  // namespace

void RegisterChannelsLastKernels(exec::KernelRegistry& r) {
  // Each op takes the element types of the plain op it runs (registered before this family).
  const struct {
    const char* op;
    const char* plain;
    const char* domain;
    int64_t opset;
  } ops[] = {{exec::kChannelsLastConvOp, exec::kFusedConvOp, exec::kInternalDomain, 1},
             {exec::kChannelsLastMaxPoolOp, "MaxPool", "", kPlainPoolOpset},
             {exec::kChannelsLastAveragePoolOp, "AveragePool", "", kPlainPoolOpset},
             {exec::kChannelsLastGlobalAveragePoolOp, "GlobalAveragePool", "", kPlainPoolOpset}};
  for (const auto& o : ops) {
    StatusOr<const exec::KernelDef*> plain = r.Find(o.plain, o.domain, o.opset, exec::Device::kCpu);
    ONNXAMP_CHECK(plain.ok(), "the CPU kernel of ", o.plain, " must be registered before ", o.op);
    r.Register({o.op, exec::kInternalDomain, 1, 1, exec::Device::kCpu, (*plain)->dtypes, 0,
                &exec::MakeKernel<ChannelsLastCpu>});
  }
}

}  // namespace onnxamp::ops
