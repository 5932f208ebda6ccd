// Inference graph optimizations applied at session creation (see graph_optimizer.h).
#include "runtime/executor/graph_optimizer.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "runtime/executor/graph_match.h"
#include "runtime/executor/session.h"
#include "runtime/ir/verify.h"
#include "runtime/ops/common/conv_onednn.h"
#include "runtime/ops/common/dtype_dispatch.h"

namespace onnxamp::exec {
namespace {

bool IsDefaultOp(const ir::Node* n, const char* op) {
  return n && n->op_type() == op && ir::IsDefaultDomain(n->domain());
}

// A value whose data the model fixes as an initializer that no graph input can override (the folds below replace
// initializers, never Constant nodes).
const ir::Tensor* InitializerOf(const ir::Value* v) {
  if (!v || v->is_graph_input() || !v->initializer() || !v->initializer()->has_data()) return nullptr;
  return v->initializer();
}

// The output values of `n` other than output 0 that exist (optional outputs that were requested).
bool HasExtraOutputs(const ir::Node* n) {
  for (size_t i = 1; i < n->outputs().size(); ++i) {
    if (n->output(i)) return true;
  }
  return false;
}

std::vector<double> ToDoubles(const ir::Tensor& t) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(t.num_elements()));
  Status st = ops::DispatchFloat(t.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    for (T v : t.values<T>()) out.push_back(static_cast<double>(ops::Load<T>(v)));
    return Status::Ok();
  });
  ONNXAMP_CHECK(st.ok(), st.message());
  return out;
}

ir::Tensor FromDoubles(DType dtype, std::vector<int64_t> dims, const std::vector<double>& values) {
  ir::Tensor t(dtype, std::move(dims));
  Status st = ops::DispatchFloat(dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    auto out = t.mutable_values<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = ops::Store<T>(static_cast<ops::ComputeType<T>>(values[i]));
    return Status::Ok();
  });
  ONNXAMP_CHECK(st.ok(), st.message());
  return t;
}

// True when `bn` is a BatchNormalization that normalises with its given statistics, one parameter per channel:
// not training mode (training_mode = 1 from opset 14; before 14, requesting any output beyond Y) and not
// per-position parameters (spatial = 0 before opset 9). Attributes an opset lacks are absent, so no opset is needed.
bool IsInferenceBatchNorm(const ir::Node* bn) {
  if (!IsDefaultOp(bn, "BatchNormalization") || bn->inputs().size() != 5 || HasExtraOutputs(bn)) return false;
  return bn->GetInt("training_mode", 0) == 0 && bn->GetInt("spatial", 1) == 1;
}

// Folds one Conv -> BatchNormalization pair, or returns false leaving the graph as it was.
bool FoldOne(ir::Graph& g, ir::Node* conv) {
  if (!IsDefaultOp(conv, "Conv") || conv->outputs().size() != 1) return false;
  ir::Node* bn = SoleConsumer(conv->output(0));
  if (!bn || !IsInferenceBatchNorm(bn) || bn->input(0) != conv->output(0)) return false;
  const ir::Tensor* w = InitializerOf(conv->input(1));
  if (!w || !IsFloatType(w->dtype()) || w->rank() < 3) return false;
  const ir::Tensor* b = nullptr;
  if (conv->inputs().size() > 2 && conv->input(2)) {
    b = InitializerOf(conv->input(2));
    if (!b || b->dtype() != w->dtype()) return false;
  }
  const int64_t m = w->dims()[0];
  if (b && (b->rank() != 1 || b->dims()[0] != m)) return false;
  const ir::Tensor* params[4];
  for (int i = 0; i < 4; ++i) {
    params[i] = InitializerOf(bn->input(1 + i));
    if (!params[i] || !IsFloatType(params[i]->dtype()) || params[i]->rank() != 1 || params[i]->dims()[0] != m) {
      return false;
    }
  }
  const double eps = bn->GetFloat("epsilon", 1e-5f);
  const std::vector<double> scale = ToDoubles(*params[0]), beta = ToDoubles(*params[1]), mean = ToDoubles(*params[2]),
                            var = ToDoubles(*params[3]);
  std::vector<double> wv = ToDoubles(*w), bv = b ? ToDoubles(*b) : std::vector<double>(static_cast<size_t>(m), 0.0);
  // Y = (conv(X, W) + B - mean) * a + beta with a = scale / sqrt(var + eps): W' = W * a, B' = (B - mean) * a + beta.
  const size_t per_channel = wv.size() / static_cast<size_t>(m);
  for (size_t oc = 0; oc < static_cast<size_t>(m); ++oc) {
    const double a = scale[oc] / std::sqrt(var[oc] + eps);
    for (size_t i = 0; i < per_channel; ++i) wv[oc * per_channel + i] *= a;
    bv[oc] = (bv[oc] - mean[oc]) * a + beta[oc];
  }
  ir::Value* old_w = conv->input(1);
  ir::Value* old_b = conv->inputs().size() > 2 ? conv->input(2) : nullptr;
  ir::Value* new_w = g.CreateValue(g.UniqueName(old_w->name() + "_bn_folded"));
  new_w->set_type(old_w->type());
  g.SetInitializer(new_w, FromDoubles(w->dtype(), w->dims(), wv));
  ir::Value* new_b = g.CreateValue(g.UniqueName(bn->output(0)->name() + "_bias_bn_folded"));
  new_b->set_type(ir::ValueType::Tensor(w->dtype(), ir::Shape{ir::Dim::Value(m)}));
  g.SetInitializer(new_b, FromDoubles(w->dtype(), {m}, bv));
  std::vector<ir::Value*> bn_params(bn->inputs().begin() + 1, bn->inputs().end());

  conv->SetInput(1, new_w);
  if (conv->inputs().size() > 2) {
    conv->SetInput(2, new_b);
  } else {
    conv->AddInput(new_b);
  }
  ir::Value* conv_out = conv->output(0);
  ir::Value* bn_out = bn->output(0);
  g.RemoveNode(bn);
  conv->SetOutput(0, bn_out);
  g.RemoveValue(conv_out);
  RemoveIfUnused(g, old_w);
  RemoveIfUnused(g, old_b);
  for (ir::Value* v : bn_params) RemoveIfUnused(g, v);
  return true;
}

// Fuses one Conv with the Add and/or Relu after it, or returns false leaving the graph as it was.
bool FuseOne(ir::Graph& g, ir::Node* conv) {
  if (!IsDefaultOp(conv, "Conv") || conv->outputs().size() != 1 || !conv->output(0)) return false;
  ir::Value* y = conv->output(0);
  ir::Node* next = SoleConsumer(y);
  ir::Node* add = nullptr;
  ir::Value* z = nullptr;
  if (IsDefaultOp(next, "Add") && next->inputs().size() == 2 && next->outputs().size() == 1 &&
      !BroadcastsFromAxis(next)) {
    add = next;
    z = add->input(0) == y ? add->input(1) : add->input(0);
    if (!z || z == y) return false;
    next = SoleConsumer(add->output(0));
  }
  ir::Node* relu = IsDefaultOp(next, "Relu") && next->outputs().size() == 1 ? next : nullptr;
  if (!add && !relu) return false;
  ir::Value* out = relu ? relu->output(0) : add->output(0);
  if (!out) return false;

  std::vector<ir::Value*> inputs = {conv->input(0), conv->input(1),
                                    conv->inputs().size() > 2 ? conv->input(2) : nullptr};
  if (z) inputs.push_back(z);
  std::vector<ir::Attribute> attrs = conv->attributes();
  const std::string name = conv->name();
  ir::Value* add_out = add ? add->output(0) : nullptr;
  // Detach the old nodes (last first), then put the fused node where the Conv was.
  ir::Node* after = conv;
  if (relu) g.RemoveNode(relu);
  if (add) g.RemoveNode(add);
  ir::Node* fused =
      g.InsertNode(after, kFusedConvOp, inputs, {out}, name.empty() ? "" : name + "_fused", kInternalDomain);
  for (ir::Attribute& a : attrs) fused->SetAttribute(std::move(a));
  if (relu) fused->SetAttribute(ir::Attribute::String("activation", "Relu"));
  g.RemoveNode(conv);
  g.RemoveValue(y);
  if (relu && add_out) g.RemoveValue(add_out);
  return true;
}

}  // namespace

Status FoldConvBatchNorm(ir::Graph& graph, bool* changed) {
  *changed = false;
  std::vector<ir::Node*> convs;
  for (ir::Node* n : graph.nodes()) {
    if (IsDefaultOp(n, "Conv")) convs.push_back(n);
  }
  for (ir::Node* conv : convs) *changed |= FoldOne(graph, conv);
  return Status::Ok();
}

Status FuseConvActivation(ir::Graph& graph, bool* changed, bool keep_input_weights) {
  *changed = false;
  std::vector<ir::Node*> convs;
  for (ir::Node* n : graph.nodes()) {
    if (!IsDefaultOp(n, "Conv")) continue;
    bool input_weights = false;
    for (size_t i = 1; i < n->inputs().size(); ++i) input_weights |= n->input(i) && n->input(i)->is_graph_input();
    if (!(keep_input_weights && input_weights)) convs.push_back(n);
  }
  for (ir::Node* conv : convs) *changed |= FuseOne(graph, conv);
  if (*changed) ONNXAMP_RETURN_IF_ERROR(graph.SortTopologically());
  return Status::Ok();
}

passes::PassPipeline InferencePasses(const SessionOptions& options) {
  passes::PassPipeline pipeline;
  if (options.graph_optimization == GraphOptimization::kNone) return pipeline;
  const bool training = options.mode == SessionMode::kTraining;
  // Whether a pass made a node of the internal domain (FusedConv, Blocked*), which the model must then import.
  auto made_internal = std::make_shared<bool>(false);
  pipeline.Add("fold_conv_batch_norm", [](ir::Model& m, const passes::PassContext&, bool* changed) {
    return FoldConvBatchNorm(*m.graph, changed);
  });
  pipeline.Add("fuse_conv_activation", [made_internal](ir::Model& m, const passes::PassContext& ctx, bool* changed) {
    ONNXAMP_RETURN_IF_ERROR(FuseConvActivation(*m.graph, changed, ctx.training));
    *made_internal |= *changed;
    return Status::Ok();
  });
  // In a training graph this fuses the forward pass's products with their bias and ReLU (whose gradient reads the
  // activation's output, which the fused node still writes); a GELU whose gradient reads its input stays separate.
  // The backward GEMMs match nothing here (their results are read by casts, sums and other GEMMs); the next pass
  // (CPU) and the CUDA rewrites fuse them.
  pipeline.Add("fuse_matmul_epilogues", [made_internal](ir::Model& m, const passes::PassContext&, bool* changed) {
    *changed = false;
    if (m.OpsetVersion("") < 7) return Status::Ok();
    ONNXAMP_RETURN_IF_ERROR(FuseMatMulEpilogues(*m.graph, changed));
    *made_internal |= *changed;
    return Status::Ok();
  });
  if (training) {
    // The recurrent nodes' traces go to their RNNGrad nodes instead of being recomputed there (an LSTM's forward
    // was a quarter of its CPU training step), on the CPU and on CUDA alike.
    pipeline.Add("stash_recurrent_traces", [made_internal](ir::Model& m, const passes::PassContext&, bool* changed) {
      ONNXAMP_RETURN_IF_ERROR(StashRecurrentTraces(*m.graph, changed));
      *made_internal |= *changed;
      return Status::Ok();
    });
  }
  // A CPU training session's bf16 weight gradients come out of their GEMM in FP32 (oneDNN's bf16 matmul writes
  // float; the rounding to bf16 and the Cast back were two passes over each gradient). Not fp16: there the rounding
  // to inf is how an overflow reaches the loss scaler, which the CPU trainer checks after the fact (the CUDA optimizer
  // takes a threshold instead). Bias gradients stay SumToShape's, so FP32 training is unchanged.
  if (training && options.device == Device::kCpu) {
    pipeline.Add("fuse_backward_gemms", [made_internal](ir::Model& m, const passes::PassContext&, bool* changed) {
      *changed = false;
      if (m.OpsetVersion("") < 7) return Status::Ok();
      ONNXAMP_RETURN_IF_ERROR(
          FuseBackwardGemms(*m.graph, changed, {.float_output_for = {DType::kBFloat16}, .bias_grad = false}));
      *made_internal |= *changed;
      return Status::Ok();
    });
  }
  const int64_t block = options.graph_optimization == GraphOptimization::kAll && options.device == Device::kCpu &&
                                options.blocked_layout && !training
                            ? ops::PreferredChannelBlock(ops::AvailableLinalgImpl(options.kernels.linalg))
                            : 0;
  if (block != 0) {
    pipeline.Add("compute_half_convs_in_float",
                 [made_internal](ir::Model& m, const passes::PassContext&, bool* changed) {
                   ONNXAMP_RETURN_IF_ERROR(ComputeHalfConvsInFloat(*m.graph, changed));
                   *made_internal |= *changed;
                   return Status::Ok();
                 });
    pipeline.Add("use_blocked_layout", [block, made_internal](ir::Model& m, const passes::PassContext&, bool* changed) {
      ONNXAMP_RETURN_IF_ERROR(UseBlockedLayout(*m.graph, block, changed));
      *made_internal |= *changed;
      return Status::Ok();
    });
  }
  pipeline.Add("import_internal_domain", [made_internal](ir::Model& m, const passes::PassContext&, bool* changed) {
    *changed = *made_internal && m.OpsetVersion(kInternalDomain) == 0;
    if (*changed) m.SetOpsetVersion(kInternalDomain, 1);
    return Status::Ok();
  });
  return pipeline;
}

Status OptimizeForInference(ir::Model& model, const SessionOptions& options) {
  if (options.graph_optimization == GraphOptimization::kNone || !model.graph) return Status::Ok();
  if (!ir::Verify(model).ok()) return Status::Ok();  // Session::Create reports the problem
  if (model.OpsetVersion("") == 0) return Status::Ok();
  passes::PassContext ctx;
  ctx.device = options.device;
  ctx.training = options.mode == SessionMode::kTraining;
  return InferencePasses(options).Run(model, ctx);
}

}  // namespace onnxamp::exec
