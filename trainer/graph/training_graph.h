// From an inference model to the graphs training runs: the trainable parameters and buffers chosen, the precision
// of `onnxamp convert` with FP32 master weights, BatchNormalization and Dropout in training mode, a loss in FP32,
// and the backward pass. Parameters and buffers become graph inputs without defaults, so that no session ever folds
// or fuses them and every step binds the trainer's own buffers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "converter/policy.h"
#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/ir/model.h"
#include "runtime/ir/tensor.h"
#include "trainer/graph/batch_dim.h"
#include "trainer/graph/lora.h"
#include "trainer/graph/recompute.h"

namespace onnxamp::trainer {

enum class LossKind {
  kCrossEntropy,   // SoftmaxCrossEntropyLoss over logits (class axis `class_axis`), integer labels
  kMse,            // mean((y - t)^2)
  kL1,             // mean(|y - t|)
  kBceWithLogits,  // mean(max(y, 0) - y t + log(1 + exp(-|y|))), float targets in [0, 1]
  kNll,            // NegativeLogLikelihoodLoss over log-probabilities, integer labels
  kModelOutput,    // the model computes its loss itself: a scalar output
  // mean of 0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere (d = y - t): HuberLoss(delta)
  kHuber,
  // the same divided by delta (beta): SmoothL1Loss(beta)
  kSmoothL1,
};

// "ce", "mse", "l1", "bce", "nll", "huber", "smooth_l1": the CLI's names.
StatusOr<LossKind> LossKindFromName(const std::string& name);
const char* LossKindName(LossKind kind);
// Whether the loss takes integer class labels (ce, nll) rather than float targets.
bool LossTakesClassLabels(LossKind kind);

struct LossOptions {
  LossKind kind = LossKind::kCrossEntropy;
  std::string output;           // the model output the loss reads; "" for the model's only output
  int64_t class_axis = 1;       // cross-entropy / NLL: the class dim of the output (1 as in PyTorch, -1 for [b, s, V])
  int64_t ignore_index = -100;  // cross-entropy / NLL: labels with this value count for nothing (PyTorch's default)
  // Cross-entropy: CrossEntropyLoss(label_smoothing=ε), in [0, 1]: the target is (1 - ε) on the label and ε / C on
  // every class, i.e. loss = (1 - ε) * NLL + ε * mean over the kept positions of the mean over classes of -log p.
  double label_smoothing = 0.0;
  // Cross-entropy / NLL: CrossEntropyLoss(weight=w) / NLLLoss(weight=w), one finite weight >= 0 per class (empty:
  // all 1). The mean divides the weighted sum by the sum of the kept positions' label weights.
  std::vector<float> class_weights;
  // Huber / smooth L1: where the loss turns from quadratic to linear (HuberLoss's delta, SmoothL1Loss's beta), finite
  // and > 0.
  double delta = 1.0;
};

struct TrainingGraphOptions {
  // The first batch of the training data (the data inputs by name), on which a model raised to a newer opset by ONNX's
  // version converter (for its gradients, or by the bf16 conversion) is checked against the model
  // (CheckRaisedForward, converter::CompareForward) on `raise_check_threads` threads; empty: not checked.
  // Trainer::Create fills it for models before kTrainingOpsetFloor.
  std::vector<ir::Tensor> raise_check_batch;
  int raise_check_threads = 1;
  LossOptions loss;
  // Mixed precision: kFloat16 or kBFloat16 compute (the converter's policy), kUndefined for FP32.
  DType amp = DType::kUndefined;
  // With BF16: bfloat16 also where ONNX allows it only from a later opset than the model's, up to this one
  // (converter::ConvertOptions::bfloat16_types_opset; 0: the model's opset decides). The graphs are never written as
  // ONNX (the export converts the model as given, at its own opset). Trainer::Create sets kBFloat16TypesOpset for
  // CUDA, where cuDNN runs bfloat16 convolutions on tensor cores (PyTorch's autocast runs them in bfloat16 too), and
  // leaves it 0 on the CPU, whose bfloat16 convolution gradients, pools and normalizations run through float and were
  // 2.5x slower than FP32 on cnn (docs/benchmarks.md).
  int64_t bfloat16_types_opset = 0;
  // Which nodes compute in low precision under `amp` (`onnxamp train --keep-op/--keep-node/--policy ...`, as
  // `onnxamp convert` takes them).
  converter::PrecisionPolicy policy = converter::PrecisionPolicy::Default();
  // Which initializers train (SelectParameters). Each is an ECMAScript regex searched in the names, or @FILE: a file of
  // whole names, one per line. `trainable` ("": the default choice) names the parameters, as ONNX Runtime Training's
  // requires_grad does; `freeze` removes what it names ("": nothing).
  std::string trainable;
  std::string freeze;
  // LoRA (lora.h; lora.rank > 0): low-rank adapters beside the chosen MatMul/Gemm weights; the adapters (and what
  // lora.train matches, less `freeze`) are then the only parameters.
  LoraOptions lora;
  // Activation recomputation (recompute.h): off unless recompute.segments is set. Not a graph rewrite here: the
  // trainers' training sessions run it on their optimized graph (RecomputeHook).
  RecomputeOptions recompute;
  // Rows of a parameter's first dim that get no gradient, by parameter name (`onnxamp train --padding-idx
  // NAME=ROW,...`): PyTorch's nn.Embedding(padding_idx=...), which torch.onnx.export does not record (it writes the
  // lookup as a Gather). Negative rows count from the end. The train graph multiplies the gradient by a constant mask.
  std::map<std::string, std::vector<int64_t>> zero_gradient_rows;
};

// What SelectParameters reports beside its choice.
struct ParameterChoiceReport {
  // Names a --trainable or --freeze file lists that are no initializer of the model (PyTorch writes a tied weight
  // under one of its names, and leaves out a parameter the exported forward does not read).
  struct Unknown {
    std::string flag;  // "--trainable" or "--freeze"
    std::vector<std::string> names;
  };
  std::vector<Unknown> unknown;
  // Without `trainable`: the one-element float initializers that some node reads, not matching `freeze`, which the
  // default choice leaves constant (BuildTrainingGraphs keeps those a gradient from the loss would reach).
  std::vector<std::string> one_element;
  // With a --trainable file: what the default choice would train that the file leaves out (buffers, and weights the
  // exporter wrote under names of its own: with constant folding, torch.onnx.export writes a transposed Linear weight
  // as onnx::MatMul_N), likewise only those a gradient would reach.
  std::vector<std::string> unlisted;
  // Every floating initializer of one element or more that SelectParameters left out, and why, in initializer order
  // (BatchNormalization's running statistics, which are buffers, not among them). Unfiltered: what
  // DescribeInitializers reads instead of choosing again.
  enum class LeftOut { kUnread, kFrozen, kNotNamed, kOneElement };
  std::vector<std::pair<std::string, LeftOut>> left_out;
};

// A trainable parameter: its name (a graph input of both graphs), its FP32 initial value, and the train graph output
// that holds its gradient (FP32).
struct Parameter {
  std::string name;
  ir::Tensor initial;
  std::string gradient;
};

// State a forward pass updates: BatchNormalization's running statistics. The train graph reads `name` and writes
// `updated`; the trainer commits the update only when the optimizer step is taken.
struct Buffer {
  std::string name;
  ir::Tensor initial;
  std::string updated;
};

// What UseInferenceMode changed.
struct InferenceModeReport {
  int batch_norms = 0;  // BatchNormalizations with training_mode = 1
  int dropouts = 0;     // Dropouts with a constant true training_mode (is_test = 0 before opset 12)
};

// `g` (a graph of a model of default-domain opset `opset`, and its subgraphs) in inference mode, as PyTorch runs a
// module after model.eval(): a BatchNormalization in training mode (training_mode = 1, as
// torch.onnx.export(training=TrainingMode.TRAINING) writes it) normalises with its running statistics and loses its
// running-statistics outputs, and a Dropout whose training mode is a constant true (or is_test = 0 before opset 12)
// passes its input through. A node whose training outputs something reads, or whose training_mode a graph input sets,
// stays as it is. The eval graph runs this, and `onnxamp export --inference-mode`.
InferenceModeReport UseInferenceMode(ir::Graph& g, int64_t opset);

struct TrainingGraphs {
  // Train graph: inputs = the model's data inputs, `labels`, `loss_scale` (FP32 scalar), every parameter and buffer;
  // outputs = `loss`, the prediction the loss reads, every gradient and updated buffer.
  ir::Model train;
  // Evaluation graph: the model in inference mode (the same precision) with the same loss: inputs = data inputs,
  // labels, parameters, buffers; outputs = `loss` and the prediction.
  ir::Model eval;
  // The nodes the model has in training mode that the eval graph runs in inference mode.
  InferenceModeReport eval_inference_mode;
  std::vector<Parameter> params;
  std::vector<Buffer> buffers;
  std::vector<std::string> data_inputs;  // the model's own inputs, in model order
  std::string labels;                    // "" for LossKind::kModelOutput
  std::string loss_scale;
  std::string loss;
  std::string prediction;   // the model output the loss reads
  std::string scores;       // the Softmax's (Sigmoid's) input the loss reads instead, or "" (AttachedLoss::scores)
  int converted_nodes = 0;  // nodes computing in low precision (AMP)
  // AMP: the train graph's nodes that stay in float where the op table alone would convert them
  // (converter::ConvertReport::kept_fp32), grouped by reason in the order first met: "Conv-11 has no bfloat16 (opset
  // 17; ONNX added it at opset 22): computes in float" for 4 Conv nodes.
  struct KeptFloat {
    std::string op_type;
    std::string reason;
    int nodes = 0;
  };
  std::vector<KeptFloat> kept_float;
  // A batch dim fixed at export made symbolic (MakeBatchDimSymbolic, before everything else; both graphs).
  BatchDimReport batch_dim;
  // The passes (runtime/passes/pass.h) each graph went through, in order: the shared ones (batch dim, AMP
  // conversion), then the graph's own (training mode, loss, parameters as inputs, gradients, outputs).
  std::vector<std::string> train_passes;
  std::vector<std::string> eval_passes;
  // With LoRA: the adapted weights (their adapters are parameters; the export merges them, MergeLora) and the
  // weights left alone ("NAME: why").
  std::vector<LoraAdapter> lora;
  std::vector<std::string> lora_skipped;
  // Weights SelectParameters chose that the loss depends on only where no gradient flows (a causal mask read by a
  // comparison, Resize's scales, a loss's class weights): constants in both graphs, not in `params`, and why.
  struct Untrained {
    std::string name;
    std::string why;
  };
  std::vector<Untrained> untrained;
  // What SelectParameters reported: names a --trainable or --freeze file lists that are no initializer of the model,
  // and the one-element float initializers the default choice leaves constant (only those a gradient would reach).
  ParameterChoiceReport choice;
  // Parameters that several normalisation nodes of one op read as their scale or bias: they train as one weight.
  // Deliberate sharing is rare; torch.onnx.export in eval mode (its default) merges initializers of equal value, so
  // every freshly initialised LayerNorm of one width ends up reading one weight.
  struct SharedNormWeight {
    std::string name;
    std::string op_type;
    int nodes = 0;
  };
  std::vector<SharedNormWeight> shared_norm_weights;
  // Set when the graphs were built from the model raised to a newer opset (its own opset has no gradient for one of
  // its nodes, or BF16 AMP needs a newer opset): the opsets and why.
  struct RaisedOpset {
    int64_t from = 0;
    int64_t to = 0;
    std::string why;  // the error at the model's own opset, or what BF16 needs
  } raised_opset;
};

// The opset a model is raised to for training when its own opset lacks what a gradient needs (BuildTrainingGraphs).
inline constexpr int64_t kTrainingOpsetFloor = 13;

// ONNX added bfloat16 to Conv, ConvTranspose, the pools and more at opset 22 (TrainingGraphOptions::
// bfloat16_types_opset).
inline constexpr int64_t kBFloat16TypesOpset = 22;

// Builds both graphs. Errors (one line, naming the value, node or op): no such output, an output the loss cannot
// read (rank, type), an op between the parameters and the loss without a gradient, no trainable parameter.
// A model before kTrainingOpsetFloor whose gradients cannot be built at its own opset is raised to it
// (converter::UpgradeOpset) and built from there (TrainingGraphs::raised_opset); parameters keep their names, so the
// export writes the trained values into the model as given. With BF16 AMP a model before opset 13 whose ops changed
// since is raised before anything else (BF16 needs opset 13; converter::ConvertModel would raise it later, after the
// batch dim is made symbolic, where ONNX's adapters may lack the dims they need).
StatusOr<TrainingGraphs> BuildTrainingGraphs(const ir::Model& model, const TrainingGraphOptions& options);

// `raised` (`model` raised to a newer opset by converter::UpgradeOpset) computes what `model` computes on `batch` (the
// data inputs by name), with the batch dim symbolic: converter::CompareForward "on the first batch".
Status CheckRaisedForward(const ir::Model& model, const ir::Model& raised, const std::vector<ir::Tensor>& batch,
                          int threads);

// Every GELU `model` spells out, in its erf form (0.5 * x * (1 + erf(x / sqrt 2)), exec::MatchErfGelu) or its tanh
// form (exec::MatchTanhGelu), becomes one com.onnxamp Gelu node (ops::kGeluOp; approximate "tanh" for the latter)
// writing the pattern's output: the backward pass is then one GeluGrad instead of the gradients of five (or nine) ops,
// and an fp16/bf16 graph rounds once instead of after each op (as the inference sessions' FusedMatMul does). The train
// graph runs it before its gradients are built. Returns how many it replaced (and imports com.onnxamp version 1 when
// that is more than none).
int UseFusedGelu(ir::Model& model);

// The parameters to train, in initializer order. The default choice: floating initializers that some node reads, with
// more than one element or read as a PRelu's slope, not BatchNormalization's running statistics, not matching
// `freeze`. One-element initializers are left out because exporters other than PyTorch's (tf2onnx, hand-built
// graphs) store constants such as a LayerNorm's epsilon or Pow's exponent 2 as initializers; PyTorch writes its
// Python numbers as Constant nodes, so there a one-element initializer is a parameter or buffer (a CLIP logit scale,
// a ReZero gate), which `trainable` names.
//
// `trainable` (TrainingGraphOptions::trainable) replaces the size rule: every float initializer it names trains, one
// element or more (BatchNormalization's statistics and initializers no node reads excepted; a file that lists one of
// the statistics or a non-float initializer is an error). Errors name the flag: a bad regex, an unreadable or empty
// file. `report` (optional) gets the listed names that are no initializer, and the one-element float initializers
// the default choice left out.
StatusOr<std::vector<std::string>> SelectParameters(const ir::Model& model, const std::string& freeze,
                                                    const std::string& trainable = "",
                                                    ParameterChoiceReport* report = nullptr);

// The low-precision type the parameters SelectParameters chooses are stored in (a model converted to FP16 or BF16,
// by `onnxamp convert` or onnxconverter-common), or kUndefined when every one is float32 or float64; *example names
// one such parameter and *count how many there are. Such a model computes in that type: it trains with
// TrainingGraphOptions::amp set to it (BuildTrainingGraphs refuses it otherwise). Parameters stored in both float16
// and bfloat16 are an error naming one of each.
StatusOr<DType> StoredLowPrecision(const ir::Model& model, const std::string& freeze, const std::string& trainable,
                                   std::string* example = nullptr, int* count = nullptr);

// One floating initializer of a model and what training with given options does with it (`onnxamp train
// --list-parameters`).
struct InitializerRole {
  enum class Role { kTrained, kBuffer, kConstant, kFrozen, kUnread };
  std::string name;
  DType type = DType::kUndefined;
  std::vector<int64_t> dims;
  Role role = Role::kConstant;
  std::string why;  // "" for a parameter of the model; else the reason ("LoRA adapter of 'W'" for an adapter)
};

// Every floating initializer of `model` (in its order), then the LoRA adapters, with their roles in `graphs`, which
// BuildTrainingGraphs(model, options) made.
StatusOr<std::vector<InitializerRole>> DescribeInitializers(const ir::Model& model, const TrainingGraphOptions& options,
                                                            const TrainingGraphs& graphs);

// torch.optim.swa_utils.update_bn's forward pass for `model` (inference; its weights and running statistics as
// initializers): every BatchNormalization in training mode (normalising with the batch's statistics) with momentum 0,
// so that its running-statistic outputs are the batch's mean and unbiased variance; the graph's outputs are those, in
// the order of `buffers` (the running statistics' names). The batch dim is made symbolic (MakeBatchDimSymbolic).
struct BatchStatisticsModel {
  ir::Model model;
  std::vector<std::string> buffers;
};
StatusOr<BatchStatisticsModel> MakeBatchStatisticsModel(const ir::Model& model);

}  // namespace onnxamp::trainer
