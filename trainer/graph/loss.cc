// AttachLoss: the prediction (cast to FP32 when the model computes it in another type), the labels input and the
// loss expression for each LossKind.
#include "trainer/graph/loss.h"

#include <algorithm>
#include <cmath>

#include "runtime/executor/graph_optimizer.h"
#include "trainer/autodiff/element_types.h"

namespace onnxamp::trainer {
namespace {

ir::Value* Add1(ir::Graph& g, const std::string& op, std::vector<ir::Value*> inputs, const std::string& base,
                std::vector<ir::Attribute> attrs = {}, const std::string& domain = "") {
  ir::Value* out = g.CreateValue(g.UniqueName(base));
  ir::Node* n = g.AddNode(op, std::move(inputs), {out}, out->name(), domain);
  for (ir::Attribute& a : attrs) n->SetAttribute(std::move(a));
  return out;
}

// `v`, or the value a chain of Casts (as mixed precision puts them) made it from.
const ir::Value* BeforeCasts(const ir::Value* v) {
  for (const ir::Node* n = v->producer();
       n && n->op_type() == "Cast" && ir::IsDefaultDomain(n->domain()) && n->inputs().size() == 1 && n->input(0);
       n = v->producer()) {
    v = n->input(0);
  }
  return v;
}

// The scores behind a classifier's probabilities: where `pred` is a Softmax's output (through Casts) over the class
// axis and the loss is cross-entropy, or a Sigmoid's and the loss is BCE with logits, the Softmax's or Sigmoid's
// input; else null. The cross-entropy of probabilities p is -log p[label], which these losses compute stably from the
// scores; read from p they would apply the softmax (or sigmoid) a second time and train another loss.
ir::Value* ScoresBehindProbabilities(const ir::Model& model, ir::Value* pred, const LossOptions& options) {
  const bool ce = options.kind == LossKind::kCrossEntropy, bce = options.kind == LossKind::kBceWithLogits;
  if (!ce && !bce) return nullptr;
  const ir::Node* n = BeforeCasts(pred)->producer();
  if (!n || !ir::IsDefaultDomain(n->domain()) || n->inputs().empty() || !n->input(0)) return nullptr;
  if (bce) return n->op_type() == "Sigmoid" ? n->input(0) : nullptr;
  if (n->op_type() != "Softmax") return nullptr;
  // Over the class axis only: the declared rank decides; before opset 13 Softmax flattens the dims from its axis on,
  // which is one axis only when it is the last.
  const std::optional<ir::Shape>& shape = pred->type().is_tensor() ? pred->type().shape() : std::nullopt;
  if (!shape) return nullptr;
  const int64_t rank = static_cast<int64_t>(shape->size());
  const bool old_form = model.OpsetVersion("") < 13;
  int64_t axis = n->GetInt("axis", old_form ? 1 : -1);
  int64_t class_axis = options.class_axis;
  if (axis < 0) axis += rank;
  if (class_axis < 0) class_axis += rank;
  if (rank < 2 || axis != class_axis || (old_form && axis != rank - 1)) return nullptr;
  return n->input(0);
}

ir::Value* MeanOfAll(ir::Graph& g, ir::Value* x) {
  ir::Value* mean = Add1(g, "ReduceMean", {x}, "loss_mean", {ir::Attribute::Int("keepdims", 0)});
  return mean;
}

ir::Value* Scalar(ir::Graph& g, const std::string& base, ir::Tensor value) {
  ir::Value* v = g.CreateValue(g.UniqueName(base));
  g.AddNode("Constant", {}, {v}, v->name())->SetAttribute(ir::Attribute::TensorValue("value", std::move(value)));
  return v;
}

ir::Value* FloatScalar(ir::Graph& g, const std::string& base, float value) {
  ir::Tensor t(DType::kFloat32, {});
  t.mutable_values<float>()[0] = value;
  return Scalar(g, base, std::move(t));
}

// Cross-entropy with label smoothing ε from the mean NLL `nll` and SoftmaxCrossEntropyLoss's log_prob ([P, C, ...]
// of rank `rank` against labels [P, ...]): (1 - ε) * nll - ε * sum(mean_c(w_c * log_prob) * kept) / sum(w_label *
// kept), kept = labels != ignore_index, w the class weights (`weights`, [C], or all 1 when null). PyTorch computes the
// same (CrossEntropyLoss(weight=w, label_smoothing=ε, reduction="mean")).
ir::Value* SmoothedCrossEntropy(ir::Model& model, ir::Value* nll, ir::Value* log_prob, ir::Value* labels,
                                ir::Value* weights, int64_t rank, const LossOptions& options) {
  ir::Graph& g = *model.graph;
  ir::Value* weighted = log_prob;
  if (weights) {
    // w as [C, 1, ...] against log_prob's dims 1.. (rank 2: [C] already lines up with the last dim).
    ir::Value* w = weights;
    if (rank > 2) {
      ir::Tensor dims(DType::kInt64, {rank - 1});
      auto d = dims.mutable_values<int64_t>();
      std::fill(d.begin(), d.end(), 1);
      d[0] = -1;
      w = Add1(g, "Reshape", {weights, Scalar(g, "loss_weight_dims", std::move(dims))}, "loss_class_weights_col");
    }
    weighted = Add1(g, "Mul", {log_prob, w}, "loss_weighted_log_prob");
  }
  // ReduceMean takes its axes as an attribute before opset 18 and as an input from 18 on.
  std::vector<ir::Value*> mean_inputs = {weighted};
  std::vector<ir::Attribute> mean_attrs = {ir::Attribute::Int("keepdims", 0)};
  if (model.OpsetVersion("") >= 18) {
    ir::Tensor axes(DType::kInt64, {1});
    axes.mutable_values<int64_t>()[0] = 1;
    mean_inputs.push_back(Scalar(g, "loss_class_axis", std::move(axes)));
  } else {
    mean_attrs.push_back(ir::Attribute::Ints("axes", {1}));
  }
  ir::Value* class_mean = Add1(g, "ReduceMean", mean_inputs, "loss_class_mean", std::move(mean_attrs));
  ir::Tensor ignore(DType::kInt64, {});
  ignore.mutable_values<int64_t>()[0] = options.ignore_index;
  ir::Value* ignored = Add1(g, "Equal", {labels, Scalar(g, "loss_ignore_index", std::move(ignore))}, "loss_ignored");
  ir::Value* kept = Add1(g, "Cast", {Add1(g, "Not", {ignored}, "loss_kept_bool")}, "loss_kept",
                         {ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat32))});
  ir::Value* sum = Add1(g, "ReduceSum", {Add1(g, "Mul", {class_mean, kept}, "loss_kept_mean")}, "loss_smooth_sum",
                        {ir::Attribute::Int("keepdims", 0)});
  ir::Value* per_position = kept;
  if (weights) {
    // The label's weight at each kept position (label 0 stands in for ignore_index, then multiplied by 0).
    ir::Tensor zero(DType::kInt64, {});
    ir::Value* safe = Add1(g, "Where", {ignored, Scalar(g, "loss_zero_label", std::move(zero)), labels}, "loss_safe");
    ir::Value* label_weight = Add1(g, "Gather", {weights, safe}, "loss_label_weight");
    per_position = Add1(g, "Mul", {label_weight, kept}, "loss_kept_weight");
  }
  ir::Value* count = Add1(g, "ReduceSum", {per_position}, "loss_kept_count", {ir::Attribute::Int("keepdims", 0)});
  ir::Value* smooth = Add1(g, "Div", {sum, count}, "loss_smooth");
  const auto eps = static_cast<float>(options.label_smoothing);
  ir::Value* hard = Add1(g, "Mul", {nll, FloatScalar(g, "loss_hard_weight", 1.0f - eps)}, "loss_hard");
  ir::Value* soft = Add1(g, "Mul", {smooth, FloatScalar(g, "loss_smoothing", eps)}, "loss_soft");
  return Add1(g, "Sub", {hard, soft}, "loss");
}

}  // namespace

StatusOr<LossKind> LossKindFromName(const std::string& name) {
  if (name == "ce") return LossKind::kCrossEntropy;
  if (name == "mse") return LossKind::kMse;
  if (name == "l1") return LossKind::kL1;
  if (name == "bce") return LossKind::kBceWithLogits;
  if (name == "nll") return LossKind::kNll;
  if (name == "huber") return LossKind::kHuber;
  if (name == "smooth_l1") return LossKind::kSmoothL1;
  return InvalidArgument("--loss ", name, ": expected ce, mse, l1, bce, nll, huber or smooth_l1");
}

const char* LossKindName(LossKind kind) {
  switch (kind) {
    case LossKind::kCrossEntropy:
      return "ce";
    case LossKind::kMse:
      return "mse";
    case LossKind::kL1:
      return "l1";
    case LossKind::kBceWithLogits:
      return "bce";
    case LossKind::kNll:
      return "nll";
    case LossKind::kModelOutput:
      return "model output";
    case LossKind::kHuber:
      return "huber";
    case LossKind::kSmoothL1:
      return "smooth_l1";
  }
  return "?";
}

bool LossTakesClassLabels(LossKind kind) { return kind == LossKind::kCrossEntropy || kind == LossKind::kNll; }

StatusOr<AttachedLoss> AttachLoss(ir::Model& model, const LossOptions& options) {
  ir::Graph& g = *model.graph;
  std::string names;
  for (const ir::Value* v : g.outputs()) names += StrCat(names.empty() ? "" : ", ", v->name());
  ir::Value* pred = nullptr;
  if (options.output.empty()) {
    if (g.outputs().size() != 1) {
      return InvalidArgument("the model has ", g.outputs().size(), " outputs (", names,
                             "): name the one the loss reads with --output");
    }
    pred = g.outputs()[0];
  } else {
    for (ir::Value* v : g.outputs()) {
      if (v->name() == options.output) pred = v;
    }
    if (!pred) return NotFound("output '", options.output, "' is not an output of the model (outputs: ", names, ")");
  }
  if (!(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0)) {
    return InvalidArgument("--label-smoothing ", options.label_smoothing, ": expected a value in [0, 1]");
  }
  if (options.label_smoothing > 0.0 && options.kind != LossKind::kCrossEntropy) {
    return InvalidArgument("--label-smoothing applies to --loss ce, not to --loss ", LossKindName(options.kind));
  }
  const bool huber = options.kind == LossKind::kHuber || options.kind == LossKind::kSmoothL1;
  if (huber && !(std::isfinite(options.delta) && options.delta > 0.0)) {
    return InvalidArgument("--delta ", options.delta,
                           ": expected a finite value > 0 (--loss l1 is smooth_l1's beta 0)");
  }
  if (!huber && options.delta != 1.0) {
    return InvalidArgument("--delta applies to --loss huber and smooth_l1, not to --loss ", LossKindName(options.kind));
  }
  if (!options.class_weights.empty()) {
    if (!LossTakesClassLabels(options.kind)) {
      return InvalidArgument("--class-weights applies to --loss ce and nll, not to --loss ",
                             LossKindName(options.kind));
    }
    bool any = false;
    for (size_t c = 0; c < options.class_weights.size(); ++c) {
      const float w = options.class_weights[c];
      if (!std::isfinite(w) || w < 0) {
        return InvalidArgument("--class-weights: class ", c, "'s weight ", w, " is not finite and >= 0");
      }
      any |= w > 0;
    }
    if (!any) return InvalidArgument("--class-weights: every weight is 0");
  }
  AttachedLoss out;
  out.prediction = pred->name();
  const ElementTypes types = InferElementTypes(g);
  const auto it = types.find(pred);
  const DType pred_type = it == types.end() ? DType::kUndefined : it->second;
  if (!IsDifferentiableType(pred_type)) {
    return InvalidArgument("output '", pred->name(), "' is not a float tensor (",
                           pred_type == DType::kUndefined ? "unknown type" : DTypeName(pred_type), "): no loss on it");
  }
  if (options.kind == LossKind::kModelOutput) {
    if (pred_type != DType::kFloat32) {
      pred = Add1(g, "Cast", {pred}, pred->name() + "_fp32",
                  {ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat32))});
    }
    out.loss = pred->name();
    if (!pred->is_graph_output()) g.AddOutput(pred);
    return out;
  }
  ir::Value* x = pred;
  DType x_type = pred_type;
  if (ir::Value* scores = ScoresBehindProbabilities(model, pred, options)) {
    const auto scores_type = types.find(scores);
    if (scores_type != types.end() && IsDifferentiableType(scores_type->second)) {
      x = scores;
      x_type = scores_type->second;
      out.scores = BeforeCasts(scores)->name();  // as the model names it, before mixed precision's Casts
    }
  }
  if (x_type != DType::kFloat32) {
    x = Add1(g, "Cast", {x}, x->name() + "_fp32", {ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat32))});
  }
  ir::Value* labels = g.CreateValue(g.UniqueName("labels"));
  const bool classes = LossTakesClassLabels(options.kind);
  labels->set_type(ir::ValueType::Tensor(classes ? DType::kInt64 : DType::kFloat32));
  g.AddInput(labels);
  out.labels = labels->name();
  ir::Value* loss = nullptr;
  switch (options.kind) {
    case LossKind::kCrossEntropy:
    case LossKind::kNll: {
      ir::Value* scores = x;
      ir::Value* labels_for_loss = labels;
      int64_t axis = options.class_axis;
      const std::optional<ir::Shape>& shape = pred->type().is_tensor() ? pred->type().shape() : std::nullopt;
      // The rank of the scores the loss reads (-1: not declared).
      int64_t scores_rank = shape ? static_cast<int64_t>(shape->size()) : -1;
      if (axis != 1) {
        if (!shape) {
          return InvalidArgument("output '", pred->name(), "': --class-axis ", axis,
                                 " needs the output's rank, which the model does not declare");
        }
        const int64_t rank = static_cast<int64_t>(shape->size());
        if (axis < 0) axis += rank;
        if (axis < 1 || axis >= rank) {
          return InvalidArgument("output '", pred->name(), "' has rank ", rank, ": --class-axis ", options.class_axis,
                                 " must name a dim after the batch dim");
        }
        if (axis == rank - 1) {
          // Classes last ([N, S, C], a language model's logits): the loss of [N * S, C] scores against [N * S]
          // labels is the same mean over the same positions in the same order, and reads contiguous rows where
          // [N, C, S] would stride across them (and need a Transpose each way).
          scores = Add1(g, "Flatten", {x}, "loss_scores", {ir::Attribute::Int("axis", rank - 1)});
          scores_rank = 2;
          ir::Value* flat = g.CreateValue(g.UniqueName("loss_labels_shape"));
          ir::Tensor dims(DType::kInt64, {1});
          dims.mutable_values<int64_t>()[0] = -1;
          g.AddNode("Constant", {}, {flat}, flat->name())->SetAttribute(ir::Attribute::TensorValue("value", dims));
          labels_for_loss = Add1(g, "Reshape", {labels, flat}, "loss_labels");
        } else if (axis != 1) {  // move the class dim to 1, as SoftmaxCrossEntropyLoss wants [N, C, d1, ...]
          std::vector<int64_t> perm = {0, axis};
          for (int64_t d = 1; d < rank; ++d) {
            if (d != axis) perm.push_back(d);
          }
          scores = Add1(g, "Transpose", {x}, "loss_scores", {ir::Attribute::Ints("perm", perm)});
        }
      }
      const char* op =
          options.kind == LossKind::kCrossEntropy ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss";
      // Models of opsets before 12 have no such op: the internal domain's version 1 is the same op (gradient_ops.h).
      const bool internal = model.OpsetVersion("") < 12;
      if (internal && model.OpsetVersion(exec::kInternalDomain) == 0) model.SetOpsetVersion(exec::kInternalDomain, 1);
      const std::string domain = internal ? exec::kInternalDomain : "";
      std::vector<ir::Attribute> attrs = {ir::Attribute::String("reduction", "mean"),
                                          ir::Attribute::Int("ignore_index", options.ignore_index)};
      std::vector<ir::Value*> inputs = {scores, labels_for_loss};
      ir::Value* weights = nullptr;
      if (!options.class_weights.empty()) {
        const int64_t classes = static_cast<int64_t>(options.class_weights.size());
        if (shape && axis < static_cast<int64_t>(shape->size()) && (*shape)[axis].is_value() &&
            (*shape)[axis].value != classes) {
          return InvalidArgument("--class-weights: ", classes, " weights for output '", pred->name(), "' of ",
                                 (*shape)[axis].value, " classes");
        }
        ir::Tensor w(DType::kFloat32, {classes});
        std::copy(options.class_weights.begin(), options.class_weights.end(), w.mutable_values<float>().begin());
        weights = Scalar(g, "loss_class_weights", std::move(w));
        inputs.push_back(weights);
      }
      if (options.label_smoothing > 0.0) {
        ir::Value* nll = g.CreateValue(g.UniqueName("loss_nll"));
        ir::Value* log_prob = g.CreateValue(g.UniqueName("loss_log_prob"));
        ir::Node* n = g.AddNode(op, inputs, {nll, log_prob}, nll->name(), domain);
        for (ir::Attribute& a : attrs) n->SetAttribute(std::move(a));
        if (weights && scores_rank < 0) {
          return InvalidArgument("output '", pred->name(),
                                 "': --class-weights with --label-smoothing needs the output's rank, which the model "
                                 "does not declare");
        }
        loss = SmoothedCrossEntropy(model, nll, log_prob, labels_for_loss, weights, scores_rank, options);
      } else {
        loss = Add1(g, op, inputs, "loss", std::move(attrs), domain);
      }
      break;
    }
    case LossKind::kMse: {
      ir::Value* d = Add1(g, "Sub", {x, labels}, "loss_diff");
      loss = MeanOfAll(g, Add1(g, "Mul", {d, d}, "loss_sq"));
      break;
    }
    case LossKind::kL1:
      loss = MeanOfAll(g, Add1(g, "Abs", {Add1(g, "Sub", {x, labels}, "loss_diff")}, "loss_abs"));
      break;
    case LossKind::kHuber:
    case LossKind::kSmoothL1: {
      // With a = |d| and q = min(a, delta): q (a - q / 2) is a^2 / 2 below delta and delta (a - delta / 2) from it on,
      // Huber's two branches in one expression (whose gradient is d clamped to [-delta, delta]); smooth L1 divides by
      // delta.
      const auto delta = static_cast<float>(options.delta);
      ir::Value* a = Add1(g, "Abs", {Add1(g, "Sub", {x, labels}, "loss_diff")}, "loss_abs");
      ir::Value* q = Add1(g, "Min", {a, FloatScalar(g, "loss_delta", delta)}, "loss_quadratic");
      ir::Value* half_q = Add1(g, "Mul", {q, FloatScalar(g, "loss_half", 0.5f)}, "loss_half_q");
      ir::Value* terms = Add1(g, "Mul", {q, Add1(g, "Sub", {a, half_q}, "loss_linear")}, "loss_huber");
      if (options.kind == LossKind::kSmoothL1) {
        terms = Add1(g, "Div", {terms, FloatScalar(g, "loss_beta", delta)}, "loss_smooth_l1");
      }
      loss = MeanOfAll(g, terms);
      break;
    }
    case LossKind::kBceWithLogits: {
      // max(x, 0) - x y + log(1 + exp(-|x|)): PyTorch's numerically stable form.
      ir::Value* relu = Add1(g, "Relu", {x}, "loss_relu");
      ir::Value* xy = Add1(g, "Mul", {x, labels}, "loss_xy");
      ir::Value* soft = Add1(g, "Softplus", {Add1(g, "Neg", {Add1(g, "Abs", {x}, "loss_abs")}, "loss_neg")}, "loss_sp");
      loss = MeanOfAll(g, Add1(g, "Add", {Add1(g, "Sub", {relu, xy}, "loss_sub"), soft}, "loss_terms"));
      break;
    }
    case LossKind::kModelOutput:
      break;
  }
  loss->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{}));
  g.AddOutput(loss);
  out.loss = loss->name();
  return out;
}

}  // namespace onnxamp::trainer
