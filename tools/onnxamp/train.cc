// `onnxamp train MODEL --data FILE ... -o OUT.onnx`: fine-tunes a model on the CPU runtime (FP32, or mixed precision
// with FP32 master weights and dynamic loss scaling), printing a line every --log-every steps and a summary, and
// writes the trained model, and checkpoints to resume from. `onnxamp export MODEL|CHECKPOINT_DIR -o OUT --precision
// fp32|fp16|bf16`: a trained model (or a checkpoint's) as FP32 or as the converter's mixed-precision model of it (the
// precision training used).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <nlohmann/json.hpp>

#include "converter/auto_mode.h"
#include "converter/model_clone.h"
#include "converter/range_rules.h"
#include "importer/model_io.h"
#include "importer/tensor_file.h"
#include "importer/tensor_map.h"
#include "runtime/common/file_util.h"
#include "runtime/common/half.h"
#include "tools/onnxamp/cli_error.h"
#include "tools/onnxamp/commands.h"
#include "tools/onnxamp/inspect.h"
#include "trainer/bn_update.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/data/csv.h"
#include "trainer/data/test_data_sets.h"
#include "trainer/export.h"
#include "trainer/graph/batch_dim.h"
#include "trainer/log/train_log.h"
#include "trainer/trainer.h"

namespace onnxamp::cli {
namespace {

// SIGINT or SIGTERM during the steps (StopSignals): the signal, after which the run stops at the end of the step in
// progress, writes a checkpoint when it has a --checkpoint-dir, and exits with 128 + the signal's number.
volatile std::sig_atomic_t g_stop_signal = 0;
// The signal that stopped the steps (0: they ran to the end, a signal during the last one included).
int g_interrupted_by = 0;

void OnStopSignal(int sig) {
  g_stop_signal = sig;
  static constexpr char kMessage[] =
      "\ntrain: interrupted: stopping after the step in progress (interrupt again to stop at once)\n";
  const ssize_t written = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);  // async-signal-safe
  (void)written;
}

// Handles SIGINT and SIGTERM while it lives, once: the handler resets itself, so a second signal ends the process as
// it would have. A signal the process was started ignoring (nohup, a background job) stays ignored.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction sa = {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    for (size_t i = 0; i < 2; ++i) {
      struct sigaction old = {};
      if (::sigaction(kSignals[i], nullptr, &old) == 0 && old.sa_handler != SIG_IGN &&
          ::sigaction(kSignals[i], &sa, &old_[i]) == 0) {
        installed_[i] = true;
      }
    }
  }
  ~StopSignals() {
    for (size_t i = 0; i < 2; ++i) {
      if (installed_[i]) ::sigaction(kSignals[i], &old_[i], nullptr);
    }
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  static constexpr int kSignals[2] = {SIGINT, SIGTERM};
  struct sigaction old_[2] = {};
  bool installed_[2] = {false, false};
};

StatusOr<DType> PrecisionFromName(const std::string& name, const std::string& flag) {
  if (name == "fp32" || name == "off") return DType::kUndefined;
  if (name == "fp16") return DType::kFloat16;
  if (name == "bf16") return DType::kBFloat16;
  return InvalidArgument(flag, " ", name, ": expected fp16, bf16 or ", flag == "--amp" ? "off" : "fp32");
}

// The declared shape of the model output the loss reads (`output`, or the first), null when the model declares none.
const ir::Shape* PredictionShape(const ir::Model& model, const std::string& output) {
  for (const ir::Value* v : model.graph->outputs()) {
    if (!output.empty() && v->name() != output) continue;
    return v->type().is_tensor() && v->type().shape() ? &*v->type().shape() : nullptr;
  }
  return nullptr;
}

// The number of classes the labels must lie below: the class dim of the prediction when the model declares it.
int64_t DeclaredClasses(const ir::Shape* s, int64_t class_axis) {
  if (!s) return 0;
  const int64_t rank = static_cast<int64_t>(s->size());
  const int64_t axis = class_axis < 0 ? class_axis + rank : class_axis;
  if (axis < 0 || axis >= rank || !(*s)[axis].is_value()) return 0;
  return (*s)[axis].value;
}

// The labels' dims per sample that the loss on the prediction takes, when the model declares them all: the
// prediction's dims after the batch dim, without the class dim for class indices.
std::optional<std::vector<int64_t>> DeclaredLabelDims(const ir::Shape* s, int64_t class_axis, bool classes) {
  if (!s || s->empty()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(s->size());
  const int64_t axis = class_axis < 0 ? class_axis + rank : class_axis;
  if (classes && (axis < 1 || axis >= rank)) return std::nullopt;  // the loss's own error names it
  std::vector<int64_t> dims;
  for (int64_t d = 1; d < rank; ++d) {
    if (classes && d == axis) continue;
    if (!(*s)[d].is_value()) return std::nullopt;
    dims.push_back((*s)[d].value);
  }
  return dims;
}

// The first NaN or infinity of a floating-point tensor: its index and what it is ("nan", "inf", "-inf"), and how many
// there are; nullopt when all values are finite (or the type has no such values).
struct NonFiniteValues {
  int64_t first = 0;
  std::string what;
  int64_t count = 0;
};
std::optional<NonFiniteValues> FindNonFinite(const ir::Tensor& t) {
  auto scan = [&](auto values, auto to_float) -> std::optional<NonFiniteValues> {
    std::optional<NonFiniteValues> found;
    for (size_t i = 0; i < values.size(); ++i) {
      const double v = to_float(values[i]);
      if (std::isfinite(v)) continue;
      if (!found) found = NonFiniteValues{static_cast<int64_t>(i), std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf", 0};
      ++found->count;
    }
    return found;
  };
  switch (t.dtype()) {
    case DType::kFloat32:
      return scan(t.values<float>(), [](float v) { return static_cast<double>(v); });
    case DType::kFloat64:
      return scan(t.values<double>(), [](double v) { return v; });
    case DType::kFloat16:
      return scan(t.values<uint16_t>(), [](uint16_t b) { return static_cast<double>(HalfBitsToFloat(b)); });
    case DType::kBFloat16:
      return scan(t.values<uint16_t>(), [](uint16_t b) { return static_cast<double>(BFloat16BitsToFloat(b)); });
    default:
      return std::nullopt;
  }
}

// --class-weights: a comma-separated list of numbers, or a .npy file of one float vector.
StatusOr<std::vector<float>> ClassWeights(const std::string& arg) {
  std::vector<float> weights;
  if (arg.size() > 4 && arg.compare(arg.size() - 4, 4, ".npy") == 0) {
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor t, importer::ReadTensorFile(arg));
    if (t.dims().size() != 1 || (t.dtype() != DType::kFloat32 && t.dtype() != DType::kFloat64)) {
      return InvalidArgument("--class-weights ", arg, ": expected a 1-D float32 or float64 array, got ",
                             DTypeName(t.dtype()), " of rank ", t.dims().size());
    }
    if (t.dtype() == DType::kFloat32) {
      weights.assign(t.values<float>().begin(), t.values<float>().end());
    } else {
      for (double v : t.values<double>()) weights.push_back(static_cast<float>(v));
    }
    return weights;
  }
  size_t start = 0;
  while (start <= arg.size()) {
    const size_t end = std::min(arg.find(',', start), arg.size());
    const std::string item = arg.substr(start, end - start);
    char* stop = nullptr;
    const float v = std::strtof(item.c_str(), &stop);
    if (item.empty() || stop != item.c_str() + item.size()) {
      return InvalidArgument("--class-weights: '", item, "' (item ", weights.size() + 1,
                             ") is not a number; expected W0,W1,... or a .npy file");
    }
    weights.push_back(v);
    start = end + 1;
  }
  return weights;
}

// "'a', 'b', 'c'", or with more than `most` names "'a', 'b', ... (9 in all)"; made safe for the terminal.
std::string QuotedList(const std::vector<std::string>& names, size_t most) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < most; ++i) s += StrCat(i ? ", '" : "'", TerminalSafe(names[i]), "'");
  if (names.size() > most) s += StrCat(", ... (", names.size(), " in all)");
  return s;
}

// "--trainable @names.txt lists 2 names that no initializer has" (a ParameterChoiceReport::Unknown).
std::string DescribeUnknown(const trainer::ParameterChoiceReport::Unknown& u, const TrainArgs& args) {
  return StrCat(u.flag, " ", TerminalSafe(u.flag == "--freeze" ? args.freeze : args.trainable), " lists ",
                u.names.size(), u.names.size() == 1 ? " name" : " names", " that no initializer has");
}

// "2 BatchNormalization nodes and 1 Dropout node" (what is not there left out; "no node" when nothing).
std::string DescribeInferenceMode(const trainer::InferenceModeReport& r) {
  auto count = [](int n, const char* op) { return StrCat(n, " ", op, n == 1 ? " node" : " nodes"); };
  if (r.batch_norms && r.dropouts) {
    return StrCat(count(r.batch_norms, "BatchNormalization"), " and ", count(r.dropouts, "Dropout"));
  }
  if (r.batch_norms) return count(r.batch_norms, "BatchNormalization");
  if (r.dropouts) return count(r.dropouts, "Dropout");
  return "no node";
}

std::string Format(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// An optimizer option that the chosen optimizer does not take is an error naming the optimizers that do.
Status CheckOptimizerArgs(const TrainArgs& args, trainer::OptimizerKind k) {
  using trainer::OptimizerKind;
  const bool sgd = k == OptimizerKind::kSgd, adam = k == OptimizerKind::kAdam || k == OptimizerKind::kAdamW;
  const bool rmsprop = k == OptimizerKind::kRmsprop, lion = k == OptimizerKind::kLion;
  const bool adagrad = k == OptimizerKind::kAdagrad, radam = k == OptimizerKind::kRadam;
  const bool nadam = k == OptimizerKind::kNadam;
  struct Use {
    const char* flag;
    bool given;
    bool taken;
    const char* by;
  };
  for (const Use& u :
       {Use{"--momentum", args.momentum.has_value(), sgd || rmsprop, "sgd and rmsprop"},
        Use{"--dampening", args.dampening.has_value(), sgd, "sgd"}, Use{"--nesterov", args.nesterov, sgd, "sgd"},
        Use{"--beta1", args.beta1.has_value(), adam || radam || nadam || lion, "adam, adamw, radam, nadam and lion"},
        Use{"--beta2", args.beta2.has_value(), adam || radam || nadam || lion, "adam, adamw, radam, nadam and lion"},
        Use{"--eps", args.eps.has_value(), adam || radam || nadam || rmsprop || adagrad,
            "adam, adamw, radam, nadam, rmsprop and adagrad"},
        Use{"--momentum-decay", args.momentum_decay.has_value(), nadam, "nadam"},
        Use{"--decoupled-weight-decay", args.decoupled_weight_decay, radam || nadam, "radam and nadam"},
        Use{"--lr-decay", args.lr_decay.has_value(), adagrad, "adagrad"},
        Use{"--initial-accumulator", args.initial_accumulator.has_value(), adagrad, "adagrad"},
        Use{"--amsgrad", args.amsgrad, adam, "adam and adamw"},
        Use{"--alpha", args.alpha.has_value(), rmsprop, "rmsprop"},
        Use{"--centered", args.centered, rmsprop, "rmsprop"}}) {
    if (u.given && !u.taken) {
      return InvalidArgument(u.flag, " is an option of --optimizer ", u.by, ", not of ", args.optimizer);
    }
  }
  return Status::Ok();
}

// The optimizer's options from the command line (CheckOptimizerArgs passed): each optimizer's defaults where an
// option is not given.
void ApplyOptimizerArgs(const TrainArgs& args, trainer::TrainerOptions& o) {
  using trainer::OptimizerKind;
  const OptimizerKind k = o.optimizer;
  const bool sgd = k == OptimizerKind::kSgd, rmsprop = k == OptimizerKind::kRmsprop, lion = k == OptimizerKind::kLion;
  const bool adagrad = k == OptimizerKind::kAdagrad, radam = k == OptimizerKind::kRadam;
  const bool nadam = k == OptimizerKind::kNadam;
  if (sgd) o.sgd.momentum = args.momentum.value_or(0.0);
  o.sgd.dampening = args.dampening.value_or(0.0);
  o.sgd.nesterov = args.nesterov;
  o.adam = k == OptimizerKind::kAdamW ? trainer::AdamWDefaults() : trainer::AdamOptions();
  o.adam.beta1 = args.beta1.value_or(o.adam.beta1);
  o.adam.beta2 = args.beta2.value_or(o.adam.beta2);
  o.adam.eps = args.eps.value_or(o.adam.eps);
  o.adam.amsgrad = args.amsgrad;
  if (args.weight_decay >= 0) o.sgd.weight_decay = o.adam.weight_decay = args.weight_decay;
  // RMSprop's and Lion's options only when chosen, so that checkpoints of the other optimizers keep their defaults.
  if (rmsprop) {
    o.rmsprop.alpha = args.alpha.value_or(o.rmsprop.alpha);
    o.rmsprop.eps = args.eps.value_or(o.rmsprop.eps);
    o.rmsprop.momentum = args.momentum.value_or(0.0);
    o.rmsprop.centered = args.centered;
    if (args.weight_decay >= 0) o.rmsprop.weight_decay = args.weight_decay;
  }
  // RAdam's and NAdam's shared options: the betas, eps, weight decay and where it applies.
  auto moments = [&](auto& m) {
    m.beta1 = args.beta1.value_or(m.beta1);
    m.beta2 = args.beta2.value_or(m.beta2);
    m.eps = args.eps.value_or(m.eps);
    if (args.weight_decay >= 0) m.weight_decay = args.weight_decay;
    m.decoupled_weight_decay = args.decoupled_weight_decay;
  };
  if (radam) moments(o.radam);
  if (nadam) {
    moments(o.nadam);
    o.nadam.momentum_decay = args.momentum_decay.value_or(o.nadam.momentum_decay);
  }
  if (adagrad) {
    o.adagrad.lr_decay = args.lr_decay.value_or(o.adagrad.lr_decay);
    o.adagrad.initial_accumulator_value = args.initial_accumulator.value_or(o.adagrad.initial_accumulator_value);
    o.adagrad.eps = args.eps.value_or(o.adagrad.eps);
    if (args.weight_decay >= 0) o.adagrad.weight_decay = args.weight_decay;
  }
  if (lion) {
    o.lion.beta1 = args.beta1.value_or(o.lion.beta1);
    o.lion.beta2 = args.beta2.value_or(o.lion.beta2);
    if (args.weight_decay >= 0) o.lion.weight_decay = args.weight_decay;
  }
}

// --lora-*: the options of the adapters (CheckTrainUsage made sure that all but --lora-rank come with it).
Status ApplyLoraArgs(const TrainArgs& args, trainer::TrainerOptions& o) {
  if (args.lora_rank == 0) return Status::Ok();
  trainer::LoraOptions& l = o.graph.lora;
  l.rank = args.lora_rank;
  l.alpha = args.lora_alpha.value_or(l.alpha);
  l.dropout = args.lora_dropout.value_or(l.dropout);
  l.rslora = args.lora_rslora;
  l.targets = args.lora_targets;
  l.train = args.lora_train;
  l.seed = args.seed;
  if (!args.lora_init.empty()) {
    StatusOr<std::vector<ir::Tensor>> init = importer::ReadTensors(args.lora_init);
    if (!init.ok()) return init.status().WithContext(StrCat("--lora-init ", args.lora_init));
    l.init = std::move(init).value();
  }
  return Status::Ok();
}

// The command line's own mistakes, found before any file is read: a value no run can take, options that need
// another one, options that contradict each other or would be ignored. RunTrain reports them as usage errors (exit
// status 2); what only the model, the data or the trainer can refuse fails later (exit status 1).
Status CheckTrainUsage(const TrainArgs& a) {
  auto given = [&](const char* flag) { return a.given.count(flag) > 0; };
  if (a.list_parameters) {
    // What reads the data or a run's state, or writes anything.
    for (const auto& [flag, value] :
         {std::pair{"--data", &a.data}, std::pair{"-o", &a.out}, std::pair{"--val-data", &a.val_data},
          std::pair{"--resume", &a.resume}, std::pair{"--checkpoint-dir", &a.checkpoint_dir},
          std::pair{"--log-dir", &a.log_dir}, std::pair{"--save-split", &a.save_split},
          std::pair{"--lora-save", &a.lora_save}}) {
      if (!value->empty()) return InvalidArgument(flag, " with --list-parameters, which trains nothing");
    }
  } else {
    if (a.data.empty()) return InvalidArgument("--data is required");
    if (a.out.empty()) return InvalidArgument("-o is required");
  }
  // How long, and the loss.
  if (given("--epochs") && given("--steps")) return InvalidArgument("give --epochs or --steps, not both");
  if (!a.loss_output.empty() && given("--loss")) return InvalidArgument("give --loss or --loss-output, not both");
  const bool model_loss = !a.loss_output.empty();
  trainer::LossKind loss = trainer::LossKind::kModelOutput;
  if (!model_loss) {
    ONNXAMP_ASSIGN_OR_RETURN(loss, trainer::LossKindFromName(a.loss));
  }
  const bool classes = !model_loss && trainer::LossTakesClassLabels(loss);
  if (model_loss && !a.labels.empty()) {
    return InvalidArgument(
        "--labels with --loss-output: the model's loss reads its targets as a model input; map it with --input-map");
  }
  // A CSV's labels are its 'label' array; --list-parameters reads no data.
  if (!model_loss && a.labels.empty() && !a.list_parameters && !trainer::IsCsvPath(a.data)) {
    return InvalidArgument("--labels: name the array of labels (or targets) in ", a.data);
  }
  if (!a.label_column.empty() && !a.list_parameters && !trainer::IsCsvPath(a.data)) {
    return InvalidArgument("--label-column ", a.label_column, ": only .csv and .csv.gz data have columns, and ", a.data,
                           " is not one");
  }
  // Mixed precision and loss scaling.
  ONNXAMP_ASSIGN_OR_RETURN(const DType amp, PrecisionFromName(a.amp, "--amp"));
  ONNXAMP_RETURN_IF_ERROR(PrecisionFromName(a.export_precision, "--export-precision").status());
  if (!a.policy.empty() && amp == DType::kUndefined) {
    return InvalidArgument(
        "--keep-op, --force-low-op, --keep-node, --force-low-node and --policy need --amp fp16 or bf16");
  }
  ONNXAMP_RETURN_IF_ERROR(CheckPolicyArgs(a.policy));
  if (!a.ranges.empty() && amp == DType::kUndefined) {
    return InvalidArgument("--init-max, --data-max and --max-reduction-depth need --amp fp16 or bf16");
  }
  if (given("--loss-scale") && amp == DType::kUndefined) {
    return InvalidArgument("--loss-scale needs --amp fp16 or bf16 (FP32 training has no loss scaling)");
  }
  const bool dynamic = amp == DType::kFloat16 && !given("--loss-scale");
  if ((a.init_scale || a.growth_factor || a.backoff_factor || a.growth_interval) && !dynamic) {
    return InvalidArgument(
        "--init-scale, --growth-factor, --backoff-factor and --growth-interval set dynamic loss scaling: they need "
        "--amp fp16 and no --loss-scale");
  }
  if (given("--min-loss-scale") && !dynamic) {
    return InvalidArgument("--min-loss-scale bounds dynamic loss scaling: it needs --amp fp16 and no --loss-scale");
  }
  // The optimizer and the learning rate.
  ONNXAMP_ASSIGN_OR_RETURN(const trainer::OptimizerKind optimizer, trainer::OptimizerKindFromName(a.optimizer));
  ONNXAMP_RETURN_IF_ERROR(CheckOptimizerArgs(a, optimizer));
  if (!a.layer_pattern.empty() && !given("--layer-decay"))
    return InvalidArgument("--layer-pattern needs --layer-decay");
  ONNXAMP_ASSIGN_OR_RETURN(const trainer::LrScheduleKind schedule, trainer::LrScheduleKindFromName(a.schedule));
  const bool plateau = schedule == trainer::LrScheduleKind::kPlateau;
  if (!plateau && (a.patience || a.cooldown || a.plateau_threshold)) {
    return InvalidArgument("--patience, --cooldown and --plateau-threshold need --schedule plateau");
  }
  if (plateau && a.eval_every <= 0) {
    return InvalidArgument(
        "--schedule plateau needs --eval-every (and --val-data or --val-split): it follows the "
        "validation ",
        a.best_metric);
  }
  if (given("--gamma") && schedule != trainer::LrScheduleKind::kStep && !plateau) {
    return InvalidArgument("--gamma needs --schedule step or plateau, not ", a.schedule);
  }
  if (given("--step-size") && schedule != trainer::LrScheduleKind::kStep) {
    return InvalidArgument("--step-size needs --schedule step, not ", a.schedule);
  }
  if (given("--min-lr") &&
      (schedule == trainer::LrScheduleKind::kConstant || schedule == trainer::LrScheduleKind::kStep ||
       schedule == trainer::LrScheduleKind::kInverseSqrt)) {
    return InvalidArgument("--min-lr needs --schedule cosine, linear, polynomial or plateau, not ", a.schedule);
  }
  if (given("--warmup-start-factor") && a.warmup == 0) return InvalidArgument("--warmup-start-factor needs --warmup");
  // Validation and what it drives.
  const bool validation = !a.val_data.empty() || a.val_split > 0;
  if (!a.val_data.empty() && a.val_split > 0) return InvalidArgument("give --val-data or --val-split, not both");
  if (!a.save_split.empty() && !(a.val_split > 0)) {
    return InvalidArgument("--save-split ", a.save_split, ": there is no split to save without --val-split");
  }
  if (a.eval_every > 0 && !validation) return InvalidArgument("--eval-every needs --val-data or --val-split");
  if ((a.keep_best || a.early_stop > 0) && a.eval_every == 0) {
    return InvalidArgument(a.keep_best ? "--keep-best" : "--early-stop",
                           " needs --eval-every (and --val-data or --val-split)");
  }
  if (a.best_metric != "loss" && a.best_metric != "accuracy") {
    return InvalidArgument("--best-metric ", a.best_metric, ": expected loss or accuracy");
  }
  if (a.best_metric == "accuracy" && !classes) {
    return InvalidArgument("--best-metric accuracy needs class labels (--loss ce or nll)");
  }
  if (given("--top-k") && !classes) return InvalidArgument("--top-k needs class labels (--loss ce or nll)");
  if (given("--top-k") && !validation) {
    return InvalidArgument("--top-k is reported by evaluations: it needs --val-data or --val-split");
  }
  // Averaged weights, checkpoints, LoRA, the device.
  if (a.update_bn && a.ema == 0 && a.swa_start < 0) {
    return InvalidArgument("--update-bn recomputes the statistics of averaged weights: it needs --swa-start or --ema");
  }
  if (a.ema_warmup && a.ema == 0) return InvalidArgument("--ema-warmup needs --ema");
  if ((a.checkpoint_every > 0 || a.keep_checkpoints > 0) && a.checkpoint_dir.empty()) {
    return InvalidArgument("--checkpoint-every and --keep-checkpoints need --checkpoint-dir");
  }
  if (a.lora_rank == 0 && (a.lora_alpha || a.lora_dropout || a.lora_rslora || !a.lora_targets.empty() ||
                           !a.lora_train.empty() || !a.lora_init.empty() || !a.lora_save.empty())) {
    return InvalidArgument(
        "--lora-alpha, --lora-rslora, --lora-targets, --lora-dropout, --lora-train, --lora-init and --lora-save "
        "need --lora-rank");
  }
  if (a.cuda_graph != "off" && a.device != "cuda") {
    return InvalidArgument("--cuda-graph ", a.cuda_graph, " needs --device cuda");
  }
  if (given("--device-index") && a.device != "cuda") return InvalidArgument("--device-index needs --device cuda");
  // The values with a syntax of their own.
  ONNXAMP_RETURN_IF_ERROR(trainer::ParseInputMap(a.input_map).status());
  for (const std::string& rule : a.lr_scale) ONNXAMP_RETURN_IF_ERROR(trainer::ParseLrScaleRule(rule).status());
  ONNXAMP_RETURN_IF_ERROR(trainer::ParseRecompute(a.recompute).status());
  ONNXAMP_RETURN_IF_ERROR(trainer::LogFormatFromName(a.log_format).status());
  if (!trainer::LastBatchFromName(a.last_batch)) {
    return InvalidArgument("--last-batch ", a.last_batch, ": expected partial, drop or pad");
  }
  return Status::Ok();
}

// The run's outputs, checked before the work: a path it could never write fails now, not after training.
Status CheckOutputs(const TrainArgs& args) {
  for (const auto& [flag, path] : {std::pair{"-o", &args.out}, std::pair{"--lora-save", &args.lora_save}}) {
    if (!path->empty()) ONNXAMP_RETURN_IF_ERROR(CheckWritableFile(*path).WithContext(flag));
  }
  for (const auto& [flag, path] :
       {std::pair{"--checkpoint-dir", &args.checkpoint_dir}, std::pair{"--log-dir", &args.log_dir},
        std::pair{"--save-split", &args.save_split}}) {
    if (!path->empty()) ONNXAMP_RETURN_IF_ERROR(CheckWritableFolder(*path).WithContext(flag));
  }
  return Status::Ok();
}

// --list-parameters: the graphs these options make, and every float initializer's role in them, on stdout.
Status ListParameters(const TrainArgs& args, const ir::Model& model, const trainer::TrainerOptions& o) {
  ONNXAMP_ASSIGN_OR_RETURN(const trainer::TrainingGraphs graphs, trainer::BuildTrainingGraphs(model, o.graph));
  ONNXAMP_ASSIGN_OR_RETURN(const std::vector<trainer::InitializerRole> roles,
                           trainer::DescribeInitializers(model, o.graph, graphs));
  using Role = trainer::InitializerRole::Role;
  // By InitializerRole::Role's order.
  static constexpr const char* kRoleNames[] = {"trained", "buffer", "constant", "frozen", "unread"};
  auto role_name = [](Role r) { return kRoleNames[static_cast<int>(r)]; };
  size_t width = 4;
  for (const trainer::InitializerRole& r : roles) width = std::max(width, TerminalSafe(r.name).size());
  // Columns: role, name, type, shape, why; no white space at the ends of lines.
  auto print_row = [&](const std::string& role, const std::string& name, const std::string& type,
                       const std::string& shape, const std::string& why) {
    auto pad = [](std::string text, size_t n) {
      return text.size() < n ? text + std::string(n - text.size(), ' ') : text;
    };
    std::string line =
        pad(role, 8) + "  " + pad(name, width) + "  " + pad(type, 8) + "  " + pad(shape, 18) + "  " + why;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
  };
  const bool jsonl = args.log_format == "jsonl";  // one JSON object per initializer, then a summary
  if (!jsonl) print_row("role", "name", "type", "shape", "why");
  int64_t trained_values = 0;
  size_t trained = 0;
  for (const trainer::InitializerRole& r : roles) {
    std::string shape = "[";
    for (size_t i = 0; i < r.dims.size(); ++i) shape += StrCat(i ? ", " : "", r.dims[i]);
    shape += "]";
    if (jsonl) {
      nlohmann::ordered_json j = {{"type", "initializer"},      {"name", r.name},  {"role", role_name(r.role)},
                                  {"dtype", DTypeName(r.type)}, {"shape", r.dims}, {"why", r.why}};
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      print_row(role_name(r.role), TerminalSafe(r.name), std::string(DTypeName(r.type)), shape, TerminalSafe(r.why));
    }
    if (r.role == Role::kTrained) {
      ++trained;
      int64_t n = 1;
      for (int64_t d : r.dims) n *= d;
      trained_values += n;
    }
  }
  if (jsonl) {
    nlohmann::ordered_json unknown = nlohmann::ordered_json::object();
    for (const trainer::ParameterChoiceReport::Unknown& u : graphs.choice.unknown) unknown[u.flag] = u.names;
    nlohmann::ordered_json j = {{"type", "summary"},
                                {"model", args.model},
                                {"parameters", trained},
                                {"values", trained_values},
                                {"buffers", graphs.buffers.size()},
                                {"unknown_names", unknown}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return Status::Ok();
  }
  for (const trainer::ParameterChoiceReport::Unknown& u : graphs.choice.unknown) {
    std::printf("%s: %s\n", DescribeUnknown(u, args).c_str(), QuotedList(u.names, u.names.size()).c_str());
  }
  std::printf("%s: %zu parameter%s (%lld values) trained, %zu buffer%s\n", TerminalSafe(args.model).c_str(), trained,
              trained == 1 ? "" : "s", static_cast<long long>(trained_values), graphs.buffers.size(),
              graphs.buffers.size() == 1 ? "" : "s");
  return Status::Ok();
}

// --padding-idx NAME=ROW[,ROW...] (repeatable; rows of one name add up) as TrainingGraphOptions::zero_gradient_rows.
StatusOr<std::map<std::string, std::vector<int64_t>>> ParsePaddingIdx(const std::vector<std::string>& given) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const std::string& text : given) {
    const size_t eq = text.rfind('=');
    auto bad = [&](const std::string& why) {
      return InvalidArgument("--padding-idx '", TerminalSafe(text), "': ", why, " (expected NAME=ROW[,ROW...])");
    };
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) return bad("no NAME=ROW");
    std::vector<int64_t>& rows = out[text.substr(0, eq)];
    std::string_view list(text);
    list.remove_prefix(eq + 1);
    while (!list.empty()) {
      const size_t comma = list.find(',');
      const std::string_view item = list.substr(0, comma);
      int64_t row = 0;
      const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), row);
      if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
        return bad(StrCat("'", std::string(item), "' is not an integer row"));
      }
      rows.push_back(row);
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
      if (list.empty()) return bad("a row is missing after ','");
    }
  }
  return out;
}

// A trained table that a Gather looks rows up in (axis 0) with a row of zeros: what nn.Embedding(padding_idx=k) leaves
// at row k, whose gradient PyTorch drops but which the export does not record. Said once per table, unless
// --padding-idx names it: the row trains here otherwise.
void PrintPaddingRowHints(const ir::Model& model, const trainer::TrainingGraphs& graphs,
                          const std::map<std::string, std::vector<int64_t>>& padding) {
  std::set<std::string> trained, said;
  for (const trainer::Parameter& p : graphs.params) trained.insert(p.name);
  for (const ir::Node* n : model.graph->nodes()) {
    if (!ir::IsDefaultDomain(n->domain()) || n->op_type() != "Gather" || n->GetInt("axis", 0) != 0) continue;
    const ir::Value* table = n->input(0);
    const ir::Tensor* values = table ? table->initializer() : nullptr;
    if (!values || !trained.count(table->name()) || padding.count(table->name()) || said.count(table->name()) ||
        values->dtype() != DType::kFloat32 || values->rank() != 2 || !values->has_data() || !values->on_host()) {
      continue;
    }
    const auto v = values->values<float>();
    const int64_t rows = values->dims()[0], width = values->dims()[1];
    std::vector<int64_t> zero;
    for (int64_t r = 0; r < rows && zero.size() < 3 && width > 0; ++r) {
      const auto row = v.subspan(static_cast<size_t>(r * width), static_cast<size_t>(width));
      if (std::all_of(row.begin(), row.end(), [](float x) { return x == 0.0f; })) zero.push_back(r);
    }
    if (zero.empty() || zero.size() > 2 || rows < 3) continue;  // one or two rows: padding; more: something else
    said.insert(table->name());
    std::string list;
    for (int64_t r : zero) list += (list.empty() ? "" : ",") + std::to_string(r);
    std::fprintf(stderr,
                 "train: row%s %s of '%s' (looked up by Gather '%s') %s all zeros, as nn.Embedding(padding_idx=...) "
                 "leaves its padding row; PyTorch gives that row no gradient, and the export does not say so: if it "
                 "is one, give --padding-idx %s=%s (else it trains like any other row)\n",
                 zero.size() > 1 ? "s" : "", list.c_str(), TerminalSafe(table->name()).c_str(),
                 TerminalSafe(n->name()).c_str(), zero.size() > 1 ? "are" : "is", TerminalSafe(table->name()).c_str(),
                 list.c_str());
  }
}

Status Train(const TrainArgs& args) {
  ONNXAMP_RETURN_IF_ERROR(CheckOutputs(args));
  ONNXAMP_ASSIGN_OR_RETURN(ir::Model model, importer::LoadModel(args.model));
  WarnAboutUnusedPolicyOps(args.policy, model, "train");
  // Checkpoints store the model's files themselves (export reads them back; resume checks them by their hashes).
  trainer::CheckpointModel checkpoint_model;
  if (!args.checkpoint_dir.empty() || !args.resume.empty()) {
    ONNXAMP_ASSIGN_OR_RETURN(checkpoint_model, trainer::DescribeCheckpointModel(args.model, model));
  }
  // The checkpoint folder is this run's until it ends (a second run writing into it fails here), cleaned of what a
  // killed save left.
  trainer::CheckpointDirLock checkpoint_lock;
  if (!args.checkpoint_dir.empty()) {
    std::vector<std::string> repaired;
    ONNXAMP_ASSIGN_OR_RETURN(checkpoint_lock, trainer::LockCheckpointDir(args.checkpoint_dir, &repaired));
    for (const std::string& r : repaired)
      std::fprintf(stderr, "train: checkpoint folder: %s\n", TerminalSafe(r).c_str());
  }
  std::optional<trainer::Checkpoint> checkpoint;
  if (!args.resume.empty()) {
    // Read and verified before anything else, so that a wrong checkpoint is the error the user sees.
    ONNXAMP_ASSIGN_OR_RETURN(checkpoint, trainer::LoadCheckpoint(args.resume));
    ONNXAMP_RETURN_IF_ERROR(trainer::CheckCheckpointModel(*checkpoint, checkpoint_model));
  }
  trainer::TrainerOptions o;
  if (!args.loss_output.empty()) {
    o.graph.loss.kind = trainer::LossKind::kModelOutput;
    o.graph.loss.output = args.loss_output;
  } else {
    ONNXAMP_ASSIGN_OR_RETURN(o.graph.loss.kind, trainer::LossKindFromName(args.loss));
    o.graph.loss.output = args.output;
  }
  o.graph.loss.class_axis = args.class_axis;
  o.graph.loss.ignore_index = args.ignore_index;
  o.graph.loss.label_smoothing = args.label_smoothing;
  o.graph.loss.delta = args.delta;
  if (!args.class_weights.empty()) {
    ONNXAMP_ASSIGN_OR_RETURN(o.graph.loss.class_weights, ClassWeights(args.class_weights));
  }
  ONNXAMP_ASSIGN_OR_RETURN(o.graph.amp, PrecisionFromName(args.amp, "--amp"));
  o.graph.trainable = args.trainable;
  o.graph.freeze = args.freeze;
  ONNXAMP_ASSIGN_OR_RETURN(o.graph.zero_gradient_rows, ParsePaddingIdx(args.padding_idx));
  if (o.graph.amp == DType::kUndefined && args.lora_rank == 0) {
    // A model stored in FP16/BF16 (converted by onnxamp convert or onnxconverter-common) computes in that type: it
    // trains as --amp of it, with FP32 master weights and loss scaling, and -o keeps its weights in that type.
    std::string example;
    int count = 0;
    ONNXAMP_ASSIGN_OR_RETURN(const DType low,
                             trainer::StoredLowPrecision(model, o.graph.freeze, o.graph.trainable, &example, &count));
    if (low != DType::kUndefined) {
      o.graph.amp = low;
      const char* flag = low == DType::kFloat16 ? "fp16" : "bf16";
      const std::string type(DTypeName(low));
      std::fprintf(stderr,
                   "train: the model stores %d parameters in %s ('%s'%s): trained as with --amp %s (FP32 master "
                   "weights, dynamic loss scaling); -o keeps them in %s\n",
                   count, type.c_str(), TerminalSafe(example).c_str(), count > 1 ? ", ..." : "", flag, type.c_str());
    }
  }
  ONNXAMP_RETURN_IF_ERROR(ApplyLoraArgs(args, o));
  ONNXAMP_ASSIGN_OR_RETURN(o.graph.policy, PolicyFromArgs(args.policy));
  ONNXAMP_ASSIGN_OR_RETURN(o.optimizer, trainer::OptimizerKindFromName(args.optimizer));
  ApplyOptimizerArgs(args, o);
  o.param_groups.no_decay = args.no_decay;
  o.param_groups.no_decay_1d = args.no_decay_1d;
  o.param_groups.layer_decay = args.layer_decay;
  if (!args.layer_pattern.empty()) o.param_groups.layer_pattern = args.layer_pattern;
  for (const std::string& rule : args.lr_scale) {
    ONNXAMP_ASSIGN_OR_RETURN(trainer::LrScaleRule r, trainer::ParseLrScaleRule(rule));
    o.param_groups.lr_scale.push_back(std::move(r));
  }
  o.schedule.base_lr = args.lr;
  ONNXAMP_ASSIGN_OR_RETURN(o.schedule.kind, trainer::LrScheduleKindFromName(args.schedule));
  o.schedule.step_size = args.step_size;
  o.schedule.gamma = args.gamma;
  o.schedule.min_lr = args.min_lr;
  o.schedule.cycles = args.cycles;
  o.schedule.power = args.power;
  o.schedule.decay_steps = args.decay_steps;
  o.schedule.timescale = args.timescale;
  o.schedule.warmup_steps = args.warmup;
  o.schedule.warmup_start_factor = args.warmup_start_factor;
  const bool plateau = o.schedule.kind == trainer::LrScheduleKind::kPlateau;
  if (plateau) {
    o.schedule.patience = args.patience.value_or(o.schedule.patience);
    o.schedule.cooldown = args.cooldown.value_or(o.schedule.cooldown);
    o.schedule.threshold = args.plateau_threshold.value_or(o.schedule.threshold);
    o.schedule.maximize = args.best_metric == "accuracy";
  }
  if (args.loss_scale > 0) {
    o.scaler.mode = trainer::LossScaleMode::kStatic;
    o.scaler.init_scale = args.loss_scale;
  }
  {
    if (args.init_scale) o.scaler.init_scale = *args.init_scale;
    if (args.growth_factor) o.scaler.growth_factor = *args.growth_factor;
    if (args.backoff_factor) o.scaler.backoff_factor = *args.backoff_factor;
    if (args.growth_interval) o.scaler.growth_interval = *args.growth_interval;
  }
  o.scaler.min_scale = args.min_loss_scale;
  o.batch_size = args.batch_size;
  ONNXAMP_ASSIGN_OR_RETURN(o.graph.recompute.segments, trainer::ParseRecompute(args.recompute));
  o.graph.recompute.batch = args.batch_size;
  o.epochs = args.epochs;
  o.steps = args.steps;
  o.accumulate = args.accumulate;
  o.clip_norm = args.clip_norm;
  o.clip_value = args.clip_value;
  o.ema_decay = args.ema;
  o.ema_warmup = args.ema_warmup;
  o.swa_start = args.swa_start;
  o.seed = args.seed;
  o.shuffle = !args.no_shuffle;
  o.threads = args.threads;
  o.profile = args.profile;
  if (args.device == "cuda") {
    if (const std::string why = CudaUnavailableReason(); !why.empty()) {
      return FailedPrecondition("--device cuda: ", why);
    }
    o.device = exec::Device::kCuda;
    o.device_index = args.device_index;
  }
  ONNXAMP_ASSIGN_OR_RETURN(o.cuda_graph, trainer::CudaGraphModeFromName(args.cuda_graph));
  o.top_k = args.top_k;
  if (std::optional<trainer::LastBatch> lb = trainer::LastBatchFromName(args.last_batch); lb) {
    o.last_batch = *lb;
  } else {
    return InvalidArgument("--last-batch ", args.last_batch, ": expected partial, drop or pad");
  }

  if (args.list_parameters) return ListParameters(args, model, o);

  // Data: bound to the model's inputs and the labels, split or with a separate validation file.
  trainer::BindOptions bind;
  ONNXAMP_ASSIGN_OR_RETURN(bind.input_map, trainer::ParseInputMap(args.input_map));
  bind.allow_non_finite = args.allow_nonfinite;
  const bool model_loss = o.graph.loss.kind == trainer::LossKind::kModelOutput;
  if (!model_loss) {
    bind.labels.array = args.labels.empty() ? std::string(trainer::kCsvLabel) : args.labels;  // CSV: its label column
    bind.labels.kind = trainer::LossTakesClassLabels(o.graph.loss.kind) ? trainer::LabelKind::kClassIndices
                                                                        : trainer::LabelKind::kFloatTargets;
    const bool classes = bind.labels.kind == trainer::LabelKind::kClassIndices;
    const ir::Shape* prediction = PredictionShape(model, o.graph.loss.output);
    if (classes) {
      bind.labels.num_classes = DeclaredClasses(prediction, o.graph.loss.class_axis);
      bind.labels.ignore_index = o.graph.loss.ignore_index;
      if (bind.labels.num_classes > 0 && args.top_k >= bind.labels.num_classes) {
        return InvalidArgument("--top-k ", args.top_k, ": the model's output has ", bind.labels.num_classes,
                               " classes (top-", bind.labels.num_classes, " accuracy is always 100%)");
      }
    }
    bind.labels.sample_dims = DeclaredLabelDims(prediction, o.graph.loss.class_axis, classes);
  }
  const std::vector<trainer::ModelInput> inputs = trainer::DataInputs(*model.graph);
  trainer::CsvOptions csv;
  csv.label_column = args.label_column;
  // A folder of ONNX test-data sets (test_data_set_*/input_N.pb, output_N.pb), else a data file.
  auto load = [&](const std::string& path) -> StatusOr<trainer::Dataset> {
    if (!trainer::IsTestDataFolder(path)) {
      ONNXAMP_ASSIGN_OR_RETURN(trainer::Dataset d, trainer::Dataset::Load(path, csv));
      size_t in_memory = 0;  // bytes read rather than mapped
      for (const ir::Tensor& a : d.arrays()) in_memory += importer::IsMapped(a) ? 0 : a.nbytes();
      if (in_memory >= (size_t{1} << 30)) {
        std::fprintf(
            stderr,
            "train: %s: %.1f GiB read into memory (only .npy files and stored .npz entries are memory-mapped)\n",
            TerminalSafe(path).c_str(), static_cast<double>(in_memory) / (1 << 30));
      }
      return d;
    }
    std::vector<std::string> input_names, output_names;
    for (const trainer::ModelInput& in : inputs) input_names.push_back(in.name);
    for (const ir::Value* v : model.graph->outputs()) output_names.push_back(v->name());
    return trainer::LoadTestDataSets(path, input_names, output_names);
  };
  ONNXAMP_ASSIGN_OR_RETURN(trainer::Dataset all, load(args.data));
  ONNXAMP_ASSIGN_OR_RETURN(trainer::Dataset bound, all.Bind(inputs, bind));
  trainer::Dataset train = bound;
  std::optional<trainer::Dataset> val;
  if (!args.val_data.empty()) {
    ONNXAMP_ASSIGN_OR_RETURN(trainer::Dataset v, load(args.val_data));
    ONNXAMP_ASSIGN_OR_RETURN(trainer::Dataset vb, v.Bind(inputs, bind));
    ONNXAMP_RETURN_IF_ERROR(bound.CheckCompatible(vb));
    val = std::move(vb);
  } else if (args.val_split > 0) {
    ONNXAMP_ASSIGN_OR_RETURN(auto parts, bound.Split(args.val_split, args.seed));
    train = std::move(parts.first);
    val = std::move(parts.second);
    if (!args.save_split.empty()) {
      // The held-out rows as the model reads them (arrays named after its inputs, then the labels), for checking the
      // exported model on exactly these samples (`onnxamp run --labels`, ONNX Runtime).
      std::error_code ec;
      std::filesystem::create_directories(args.save_split, ec);
      if (ec) return IoError("--save-split ", args.save_split, ": cannot create the folder: ", ec.message());
      const std::string path = (std::filesystem::path(args.save_split) / "val.npz").string();
      std::vector<int64_t> held_out(static_cast<size_t>(val->num_samples()));
      std::iota(held_out.begin(), held_out.end(), int64_t{0});
      ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> rows, trainer::MakeBatch(*val, held_out));  // a view: gathered
      ONNXAMP_RETURN_IF_ERROR(importer::WriteNpz(rows, path));
      std::fprintf(stderr, "train: wrote the %lld validation samples (%s) to %s\n",
                   static_cast<long long>(val->num_samples()), TerminalSafe(val->NamesList()).c_str(),
                   TerminalSafe(path).c_str());
    }
  }

  trainer::TrainLogOptions log_options;
  ONNXAMP_ASSIGN_OR_RETURN(log_options.format, trainer::LogFormatFromName(args.log_format));
  log_options.log_every = args.log_every;
  log_options.log_dir = args.log_dir;
  log_options.progress_bar = trainer::IsInteractiveTerminal(stderr);
  log_options.width = trainer::TerminalWidth(stderr);
  ONNXAMP_ASSIGN_OR_RETURN(std::unique_ptr<trainer::TrainLog> log, trainer::TrainLog::Create(log_options));

  // AutoCast's range rules on the first batch of the training data: the nodes they keep join the policy's FP32 nodes.
  std::vector<converter::KeptNode> ranged;
  {
    converter::RangeRuleOptions rules = args.ranges;
    rules.num_threads = args.threads;
    if (!rules.empty()) {
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < std::min<int64_t>(train.num_samples(), o.batch_size); ++i) rows.push_back(i);
      ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> batch, trainer::MakeBatch(train, rows));
      batch.resize(train.num_features());  // the model's inputs, without the labels
      // Named first, so that the names the rules keep are the training model's; run on a copy whose batch dim a
      // fixed export may not fix, as the training graphs do.
      converter::NameUnnamedNodes(*model.graph);
      ir::Model probe = converter::CloneModel(model);
      ONNXAMP_RETURN_IF_ERROR(trainer::MakeBatchDimSymbolic(probe, trainer::GraphDataInputs(*probe.graph)));
      StatusOr<std::vector<converter::KeptNode>> kept =
          converter::ApplyRangeRules(probe, o.graph.policy, {batch}, rules);
      if (!kept.ok()) return kept.status().WithContext("the range rules on the first batch");
      ranged = std::move(kept).value();
      for (const converter::KeptNode& k : ranged) o.graph.policy.AddKeepNodeName(k.name);
    }
  }

  const auto start = std::chrono::steady_clock::now();
  // --recompute's estimates size each data input as the batches will be (a sequence length the model leaves
  // symbolic too).
  for (size_t i = 0; i < train.num_features(); ++i) {
    std::vector<int64_t> dims = train.arrays()[i].dims();
    if (!dims.empty()) dims[0] = o.batch_size;
    o.graph.recompute.input_dims[train.arrays()[i].name()] = std::move(dims);
  }
  ONNXAMP_ASSIGN_OR_RETURN(std::unique_ptr<trainer::Trainer> t, trainer::Trainer::Create(model, o, train));
  // A NaN or infinity in a weight the run trains would reach every weight through the first update (and in a
  // running statistic every evaluation): refused, named, before any step.
  {
    // The model's values (the graphs' copies have moved into the parameter store).
    auto check = [&](const std::string& name, const char* kind) -> Status {
      const ir::Value* v = model.graph->FindValue(name);
      const ir::Tensor* value = v ? v->initializer() : nullptr;
      if (!value || !value->has_data() || !value->on_host()) return Status::Ok();
      if (std::optional<NonFiniteValues> bad = FindNonFinite(*value)) {
        return InvalidArgument(args.model, ": ", kind, " '", name, "' has ", bad->what, " at element ", bad->first,
                               bad->count > 1 ? StrCat(" (", bad->count, " values are not finite)") : std::string(),
                               ": training would spread it to every weight");
      }
      return Status::Ok();
    };
    for (const trainer::Parameter& p : t->graphs().params)
      ONNXAMP_RETURN_IF_ERROR(check(p.name, "trained initializer"));
    for (const trainer::Buffer& b : t->graphs().buffers) ONNXAMP_RETURN_IF_ERROR(check(b.name, "running statistic"));
  }
  PrintPaddingRowHints(model, t->graphs(), o.graph.zero_gradient_rows);
  if (args.update_bn && t->graphs().buffers.empty()) {
    return InvalidArgument("--update-bn: ", args.model, " has no BatchNormalization statistics");
  }
  const bool on_device_run = o.device != exec::Device::kCpu;
  const trainer::TrainingGraphs& graphs = t->graphs();
  {
    // The model stays for the export, which writes the trained values over its parameters and buffers: their data
    // are not kept (the store holds the weights).
    std::vector<std::string> trained;
    for (const trainer::Parameter& p : graphs.params) trained.push_back(p.name);
    for (const trainer::Buffer& b : graphs.buffers) trained.push_back(b.name);
    ONNXAMP_RETURN_IF_ERROR(trainer::DropInitializerData(model, trained));
  }
  std::fprintf(stderr, "train: %s, %zu parameter%s (%lld values), %zu buffer%s, %s, loss %s, %s, %lld samples%s\n",
               TerminalSafe(args.model).c_str(), graphs.params.size(), graphs.params.size() == 1 ? "" : "s",
               static_cast<long long>([&] {
                 int64_t n = 0;
                 for (const trainer::Parameter& p : graphs.params) n += p.initial.num_elements();
                 return n;
               }()),
               graphs.buffers.size(), graphs.buffers.size() == 1 ? "" : "s",
               o.graph.amp == DType::kUndefined
                   ? "FP32"
                   : StrCat(o.graph.amp == DType::kFloat16 ? "FP16" : "BF16", " AMP (", graphs.converted_nodes,
                            graphs.converted_nodes == 1 ? " node" : " nodes", " in low precision)")
                         .c_str(),
               trainer::LossKindName(o.graph.loss.kind), args.optimizer.c_str(),
               static_cast<long long>(train.num_samples()),
               val ? StrCat(", ", val->num_samples(), " for validation").c_str() : "");
  if (on_device_run) std::fprintf(stderr, "train: on %s\n", t->DeviceDescription().c_str());
  if (const trainer::InferenceModeReport& r = graphs.eval_inference_mode; r.batch_norms + r.dropouts > 0) {
    std::fprintf(stderr,
                 "train: evaluation runs %s in inference mode (the model has them in training mode, as "
                 "torch.onnx.export(training=TrainingMode.TRAINING) writes them%s)\n",
                 DescribeInferenceMode(r).c_str(),
                 args.export_inference_mode ? "" : "; --export-inference-mode writes -o so");
  }
  for (const trainer::TrainingGraphs::SharedNormWeight& w : graphs.shared_norm_weights) {
    std::fprintf(stderr,
                 "train: '%s' is read by %d %s nodes, which train it as one weight (torch.onnx.export in eval mode "
                 "merges initializers of equal value; export with training=TrainingMode.TRAINING to keep them "
                 "apart)\n",
                 TerminalSafe(w.name).c_str(), w.nodes, w.op_type.c_str());
  }
  for (const trainer::TrainingGraphs::KeptFloat& k : graphs.kept_float) {
    std::fprintf(stderr, "train: kept in float: %d %s node%s: %s\n", k.nodes, TerminalSafe(k.op_type).c_str(),
                 k.nodes == 1 ? "" : "s", TerminalSafe(k.reason).c_str());
  }
  if (const auto& r = graphs.raised_opset; r.from > 0) {
    std::fprintf(stderr,
                 "train: the graphs are built at opset %lld, raised from the model's %lld by ONNX's version converter "
                 "(at %lld: %s); -o keeps opset %lld\n",
                 static_cast<long long>(r.to), static_cast<long long>(r.from), static_cast<long long>(r.from),
                 TerminalSafe(r.why).c_str(), static_cast<long long>(r.from));
  }
  for (const trainer::ParameterChoiceReport::Unknown& u : graphs.choice.unknown) {
    std::fprintf(stderr,
                 "train: %s (%s): a tied weight the exporter wrote under another name, or one the exported graph "
                 "does not read\n",
                 DescribeUnknown(u, args).c_str(), QuotedList(u.names, 6).c_str());
  }
  if (const std::vector<std::string>& one = graphs.choice.one_element; !one.empty()) {
    std::fprintf(stderr,
                 "train: %zu one-element initializer%s the loss reads %s constant%s, not trained (%s): --trainable "
                 "trains what it names (a PyTorch parameter of one element, such as a logit scale)\n",
                 one.size(), one.size() == 1 ? "" : "s", one.size() == 1 ? "stays a" : "stay",
                 one.size() == 1 ? "" : "s", QuotedList(one, 6).c_str());
  }
  if (const std::vector<std::string>& left = graphs.choice.unlisted; !left.empty()) {
    std::fprintf(stderr,
                 "train: --trainable %s leaves %zu initializer%s the loss reads constant that onnxamp would train by "
                 "default (%s): buffers, or weights the exporter renamed (with constant folding torch.onnx.export "
                 "writes a folded weight as onnx::Op_N)\n",
                 TerminalSafe(args.trainable).c_str(), left.size(), left.size() == 1 ? "" : "s",
                 QuotedList(left, 6).c_str());
  }
  for (const trainer::TrainingGraphs::Untrained& u : graphs.untrained) {
    std::fprintf(stderr, "train: '%s' is not trained: the loss depends on it, but %s\n", TerminalSafe(u.name).c_str(),
                 TerminalSafe(u.why).c_str());
  }
  if (!graphs.scores.empty()) {
    const bool ce = o.graph.loss.kind == trainer::LossKind::kCrossEntropy;
    std::fprintf(stderr, "train: output '%s' is %s: the loss reads its input '%s' (the cross-entropy of the %s)\n",
                 TerminalSafe(graphs.prediction).c_str(), ce ? "a Softmax's" : "a Sigmoid's",
                 TerminalSafe(graphs.scores).c_str(), ce ? "probabilities" : "probability");
  }
  std::vector<int64_t> numels;
  for (const trainer::Parameter& p : graphs.params) numels.push_back(p.initial.num_elements());
  if (const std::string groups = trainer::DescribeParamGroups(t->param_groups(), numels); !groups.empty()) {
    std::fprintf(stderr, "train: %s\n", TerminalSafe(groups).c_str());
  }
  if (o.graph.lora.enabled()) {
    int64_t adapted = 0;
    for (const trainer::LoraAdapter& a : graphs.lora) adapted += a.weight_elements();
    std::fprintf(stderr, "train: LoRA rank %lld, scale %g, on %zu weights (%lld values frozen beside them)\n",
                 static_cast<long long>(o.graph.lora.rank), o.graph.lora.scale(), graphs.lora.size(),
                 static_cast<long long>(adapted));
    for (const std::string& s : graphs.lora_skipped)
      std::fprintf(stderr, "train: LoRA: no adapter for %s\n", TerminalSafe(s).c_str());
  }
  if (o.graph.recompute.segments != 0) {
    const trainer::RecomputeReport& r = t->recompute_report();
    if (r.segments > 0) {
      std::fprintf(stderr,
                   "train: recompute: %d segments, %d forward nodes run again in the backward pass; activations held "
                   "at once (estimated at batch %lld) %s -> %s\n",
                   r.segments, r.nodes, static_cast<long long>(o.batch_size),
                   tools::FormatBytes(r.bytes_before).c_str(), tools::FormatBytes(r.bytes_after).c_str());
    } else if (r.nodes > 0) {
      std::fprintf(stderr,
                   "train: recompute cheap: %d activations made again by %d cheap nodes in the backward pass; "
                   "activations kept from the forward pass (estimated at batch %lld) %s -> %s\n",
                   r.values, r.nodes, static_cast<long long>(o.batch_size), tools::FormatBytes(r.bytes_before).c_str(),
                   tools::FormatBytes(r.bytes_after).c_str());
    } else {
      std::fprintf(stderr, "train: recompute: nothing recomputed: %s\n", r.why_not.c_str());
    }
  }
  for (const converter::KeptNode& k : ranged) {
    std::fprintf(stderr, "train: kept in FP32 by the range rules: %s (%s): %s\n", TerminalSafe(k.name).c_str(),
                 TerminalSafe(k.op_type).c_str(), TerminalSafe(k.reason).c_str());
  }
  if (o.ema_decay > 0) {
    std::fprintf(stderr, "train: a moving average of the weights, decay %s%s: evaluations and -o use it\n",
                 Format(o.ema_decay).c_str(), o.ema_warmup ? " with warm-up" : "");
  }
  if (o.swa_start >= 0) {
    std::fprintf(stderr,
                 "train: stochastic weight averaging, the equal average of the weights after each step from step "
                 "%lld on: evaluations and -o use it\n",
                 static_cast<long long>(o.swa_start + 1));
  }
  if (const trainer::BatchDimReport& b = graphs.batch_dim; b.exported > 0) {
    std::fprintf(stderr,
                 "train: the model fixes the batch size to %lld; trained with it symbolic ('%s': %d inputs, %d "
                 "other shapes, %d Reshape constants); the written model keeps the fixed input shapes (onnxamp "
                 "export --dynamic-batch writes them symbolic)\n",
                 static_cast<long long>(b.exported), b.symbol.c_str(), b.inputs, b.annotations, b.constants);
  }
  trainer::StepRecord last;
  // --keep-best and --early-stop: the best evaluation so far (by --best-metric), with --keep-best its trained values
  // (FP32 host copies), and the evaluations since it; saved with checkpoints and restored on --resume.
  trainer::BestEvaluation best;
  bool stopped_early = false;
  const bool track = args.keep_best || args.early_stop > 0;
  // Whether `e` is better than the best so far; a NaN metric (a diverged model) is worse than any number.
  auto better = [&](const trainer::EvalRecord& e) {
    if (best.step < 0) return true;
    const bool accuracy = args.best_metric == "accuracy";
    const double now = accuracy ? e.accuracy : e.loss;
    const double was = accuracy ? best.accuracy : best.loss;
    if (std::isnan(now)) return false;
    if (std::isnan(was)) return true;
    return accuracy ? now > was : now < was;
  };
  // Records an evaluation for --keep-best and --early-stop.
  auto track_best = [&](const trainer::EvalRecord& e) -> Status {
    if (!track) return Status::Ok();
    if (better(e)) {
      best.step = last.step;
      best.loss = e.loss;
      best.accuracy = e.accuracy;
      best.since = 0;
      if (args.keep_best) {
        ONNXAMP_RETURN_IF_ERROR(t->SyncFromDevice());
        best.values = t->ExportValues();
      }
    } else {
      ++best.since;
    }
    return Status::Ok();
  };
  // Read once: saves record it, and a resume compares it with the checkpoint's.
  if (!args.checkpoint_dir.empty()) checkpoint_model.data_hash = trainer::CheckpointDataHash(t->train_data());
  if (checkpoint) {
    std::vector<std::string> warnings;
    ONNXAMP_RETURN_IF_ERROR(trainer::ResumeTrainer(*checkpoint, checkpoint_model, *t, &warnings));
    for (const std::string& w : warnings) std::fprintf(stderr, "train: warning: %s\n", TerminalSafe(w).c_str());
    last.step = checkpoint->state.steps_done;
    last.skipped_total = checkpoint->state.skipped;
    if (last.step >= t->total_steps()) {
      return InvalidArgument("--resume ", checkpoint->path, ": the checkpoint is at step ", last.step,
                             " and this run ends at step ", t->total_steps(),
                             ": nothing to train (give --steps or --epochs past it; onnxamp export writes the "
                             "checkpoint's model)");
    }
    std::fprintf(stderr, "train: resumed from %s at step %lld\n", TerminalSafe(checkpoint->path).c_str(),
                 static_cast<long long>(last.step));
    if (track && checkpoint->best) {
      if (args.keep_best && checkpoint->best->values.empty()) {
        std::fprintf(stderr,
                     "train: warning: the checkpoint's best evaluation (step %lld) has no saved model (its run had no "
                     "--keep-best): the best is tracked from here on\n",
                     static_cast<long long>(checkpoint->best->step));
      } else {
        best = std::move(*checkpoint->best);
        if (!args.keep_best) best.values.clear();
      }
    }
    checkpoint.reset();
  }
  int64_t checkpointed = -1;  // the step of the last checkpoint written
  auto save_checkpoint = [&]() -> Status {
    ONNXAMP_ASSIGN_OR_RETURN(std::string dir, trainer::SaveCheckpoint(args.checkpoint_dir, *t, checkpoint_model,
                                                                      args.keep_checkpoints, track ? &best : nullptr));
    checkpointed = last.step;
    log->Message(StrCat("train: checkpoint ", TerminalSafe(dir)));
    return Status::Ok();
  };
  std::optional<trainer::EvalRecord> eval;  // the latest evaluation, after step eval_step
  int64_t eval_step = -1;
  // On a device the steps are queued and their records come back when drained: every --log-every steps, at least
  // twice a second (the progress bar), before an evaluation or a checkpoint, and at the end. On the CPU every step.
  auto last_drain = std::chrono::steady_clock::now();
  std::optional<StopSignals> stop_signals(std::in_place);
  bool interrupted = false;
  while (!t->Done()) {
    ONNXAMP_RETURN_IF_ERROR(t->StepAsync());
    const int64_t s = t->steps_done();
    const bool eval_now = args.eval_every > 0 && s % args.eval_every == 0;
    const bool checkpoint_now = args.checkpoint_every > 0 && s % args.checkpoint_every == 0;
    const auto now = std::chrono::steady_clock::now();
    if (on_device_run && !t->Done() && !eval_now && !checkpoint_now && !g_stop_signal &&
        s % std::max<int64_t>(args.log_every, 1) != 0 && now - last_drain < std::chrono::milliseconds(500)) {
      continue;
    }
    last_drain = now;
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<trainer::StepRecord> records, t->Drain());
    for (size_t i = 0; i < records.size(); ++i) {
      last = records[i];
      log->Step(last, t->total_steps(), t->Done() && i + 1 == records.size());
    }
    if (eval_now) {
      ONNXAMP_ASSIGN_OR_RETURN(eval, t->Evaluate(*val));
      eval_step = last.step;
      log->Eval(last.step, *eval);
      ONNXAMP_RETURN_IF_ERROR(track_best(*eval));
      // Every scheduled evaluation counts, the last step's too: a run resumed from this run's checkpoint continues
      // as the uninterrupted run would.
      if (plateau) {
        const double metric = args.best_metric == "accuracy" ? eval->accuracy : eval->loss;
        ONNXAMP_ASSIGN_OR_RETURN(const bool lowered, t->ReportMetric(metric));
        if (lowered) {
          log->Message(StrCat("train: no better validation ", args.best_metric, " in ", o.schedule.patience + 1,
                              " evaluations: the learning rate falls to ", Format(t->schedule().plateau().lr)));
        }
      }
    }
    if (checkpoint_now) {
      ONNXAMP_RETURN_IF_ERROR(t->SyncFromDevice());
      ONNXAMP_RETURN_IF_ERROR(save_checkpoint());
    }
    if (args.early_stop > 0 && best.since >= args.early_stop && !t->Done()) {
      // Steps queued after the evaluation (none: the loop drains before it) would be lost; stop here.
      stopped_early = true;
      log->Message(StrCat("train: stopping early after step ", last.step, ": ", best.since,
                          " evaluations without a better validation ", args.best_metric, " than step ", best.step,
                          "'s"));
      break;
    }
    if (g_stop_signal && !t->Done()) {
      interrupted = true;
      break;
    }
  }
  stop_signals.reset();  // from here a signal ends the process at once (every file is written atomically)
  ONNXAMP_RETURN_IF_ERROR(t->SyncFromDevice());
  if (!args.checkpoint_dir.empty() && checkpointed != last.step) ONNXAMP_RETURN_IF_ERROR(save_checkpoint());
  if (interrupted) {
    // Nothing is exported: -o holds finished models only. The checkpoint keeps the run.
    g_interrupted_by = static_cast<int>(g_stop_signal);
    const char* sig = g_interrupted_by == SIGTERM ? "SIGTERM" : "SIGINT";
    log->Message(args.checkpoint_dir.empty()
                     ? StrCat("train: interrupted by ", sig, " after step ", last.step, " of ", t->total_steps(),
                              "; nothing written (a run with --checkpoint-dir keeps its state when interrupted)")
                     : StrCat("train: interrupted by ", sig, " after step ", last.step, " of ", t->total_steps(),
                              "; the checkpoint in ", args.checkpoint_dir, " resumes it (--resume ",
                              args.checkpoint_dir, "), and onnxamp export ", args.checkpoint_dir,
                              " -o OUT.onnx writes its model"));
    return Status::Ok();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string summary = StrCat("done: ", last.step, " steps (", last.skipped_total, " skipped) in ", Format(seconds),
                               " s; last loss ", Format(last.loss));
  if (val) {
    if (eval_step != last.step) {
      ONNXAMP_ASSIGN_OR_RETURN(eval, t->Evaluate(*val));
      eval_step = last.step;
      log->Eval(last.step, *eval);
      ONNXAMP_RETURN_IF_ERROR(track_best(*eval));
    }
    const trainer::EvalRecord& e = *eval;
    summary += StrCat("; validation loss ", Format(e.loss));
    if (e.accuracy >= 0) summary += StrCat(", accuracy ", Format(100 * e.accuracy), "%");
    if (e.top_k_accuracy >= 0) summary += StrCat(", top-", e.top_k, " accuracy ", Format(100 * e.top_k_accuracy), "%");
    summary += StrCat(" (", e.samples, " samples)");
  }
  trainer::ExportOptions export_options;
  ONNXAMP_ASSIGN_OR_RETURN(DType precision, PrecisionFromName(args.export_precision, "--export-precision"));
  export_options.precision = precision == DType::kUndefined ? DType::kFloat32 : precision;
  export_options.policy = o.graph.policy;
  export_options.inference_mode = args.export_inference_mode;
  // What the report needs from the trainer, then the trainer itself is released (its sessions and their memory,
  // the store, the optimizer state) before the export, which would otherwise add the trained model and its
  // serialization on top of them (ResNet-50 at batch 8: the run's peak memory was the export's).
  std::vector<ir::Tensor> trained_values = t->ExportValues();
  const std::vector<trainer::LoraAdapter> lora = graphs.lora;
  const bool export_best = args.keep_best && best.step >= 0 && best.step != last.step;
  const int64_t best_step = best.step;
  if (export_best) {
    // The best evaluated model is what -o gets.
    trained_values = std::move(best.values);
    summary += StrCat("; exported the best, after step ", best.step, " (validation ", args.best_metric, " ",
                      args.best_metric == "accuracy" ? Format(100 * best.accuracy) + "%" : Format(best.loss), ")");
  }
  best.values.clear();
  if (stopped_early) summary += "; stopped early";
  const std::string profile_text = t->profile() ? t->profile()->Format() : std::string();
  const trainer::DeviceGraphStats graph_stats = t->device_graph_stats();
  const uint64_t peak_device = t->peak_device_bytes(), peak_reserved = t->peak_reserved_device_bytes();
  t.reset();
  if (!args.lora_save.empty()) {
    // The adapters as trained (before the merge), in peft's orientation: what --lora-init reads.
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> adapters, trainer::LoraAdapterTensors(lora, trained_values));
    ONNXAMP_RETURN_IF_ERROR(importer::WriteNpz(adapters, args.lora_save));
    summary += StrCat("; wrote the adapters to ", args.lora_save);
  }
  // LoRA: the adapters merged into their weights, so that -o has the original model's structure.
  ONNXAMP_ASSIGN_OR_RETURN(trained_values, trainer::MergeLora(model, lora, std::move(trained_values)));
  if (args.update_bn) {
    // torch.optim.swa_utils.update_bn: the exported weights' BatchNormalization statistics recomputed with one pass
    // over the training data, on the training's device.
    trainer::ExportOptions fp32;
    fp32.policy = o.graph.policy;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Model averaged, trainer::ExportTrainedModel(model, trained_values, fp32));
    trainer::BnUpdateOptions bn;
    bn.batch_size = o.batch_size;
    bn.drop_last = o.last_batch == trainer::LastBatch::kDrop;
    bn.session.device = o.device;
    bn.session.device_index = o.device_index;
    bn.session.num_threads = o.threads;
    const auto bn_start = std::chrono::steady_clock::now();
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> stats, trainer::RecomputeBatchNormStatistics(averaged, train, bn));
    for (ir::Tensor& s : stats) {
      for (ir::Tensor& v : trained_values) {
        if (v.name() == s.name()) v = std::move(s);
      }
    }
    const int64_t passes = bn.drop_last && train.num_samples() >= o.batch_size
                               ? train.num_samples() / o.batch_size
                               : (train.num_samples() + o.batch_size - 1) / o.batch_size;
    summary +=
        StrCat("; BatchNormalization statistics recomputed over the training data (", passes, " batches, ",
               Format(std::chrono::duration<double>(std::chrono::steady_clock::now() - bn_start).count()), " s)");
  }
  {
    trainer::InferenceModeReport inference;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Model trained,
                             trainer::ExportTrainedModel(model, trained_values, export_options, &inference));
    trained_values.clear();  // a converted export holds its own copies
    if (args.export_inference_mode)
      summary += StrCat("; ", DescribeInferenceMode(inference), " written in inference mode");
    ONNXAMP_RETURN_IF_ERROR(importer::SaveModel(trained, args.out));
  }
  trainer::RunSummary run_summary;
  run_summary.steps = last.step;
  run_summary.skipped_steps = last.skipped_total;
  run_summary.seconds = seconds;
  run_summary.loss = last.loss;
  run_summary.eval = eval;
  run_summary.model = args.out;
  run_summary.best_step = export_best ? best_step : -1;
  run_summary.stopped_early = stopped_early;
  run_summary.peak_rss_bytes = PeakResidentBytes();
  log->Finish(run_summary);
  if (run_summary.peak_rss_bytes > 0)
    summary += StrCat("; peak resident memory ", tools::FormatBytes(run_summary.peak_rss_bytes));
  std::fprintf(stderr, "%s", TerminalSafe(profile_text).c_str());
  if (o.cuda_graph != trainer::CudaGraphMode::kOff) {
    const trainer::DeviceGraphStats& g = graph_stats;
    std::fprintf(stderr, "train: cuda graph: %lld captured, %lld steps replayed, %lld eager, %lld failed captures\n",
                 static_cast<long long>(g.captures), static_cast<long long>(g.replays),
                 static_cast<long long>(g.eager_steps), static_cast<long long>(g.failed_captures));
  }
  if (on_device_run) {
    // Allocated compares to torch.cuda.max_memory_allocated(), reserved to max_memory_reserved().
    std::fprintf(stderr, "train: peak device memory %.1f MiB allocated, %.1f MiB reserved\n",
                 static_cast<double>(peak_device) / (1 << 20), static_cast<double>(peak_reserved) / (1 << 20));
  }
  std::fprintf(stderr, "%s; wrote %s\n", summary.c_str(), TerminalSafe(args.out).c_str());
  return Status::Ok();
}

Status Export(const ExportArgs& args) {
  trainer::ExportOptions options;
  ONNXAMP_ASSIGN_OR_RETURN(DType precision, PrecisionFromName(args.precision, "--precision"));
  options.precision = precision == DType::kUndefined ? DType::kFloat32 : precision;
  options.dynamic_batch = args.dynamic_batch;
  ir::Model model;
  std::vector<ir::Tensor> values;
  if (std::filesystem::is_directory(args.model)) {
    // A checkpoint: its stored inference model with the checkpoint's master weights and buffers.
    ONNXAMP_ASSIGN_OR_RETURN(trainer::Checkpoint checkpoint, trainer::LoadCheckpoint(args.model));
    ONNXAMP_ASSIGN_OR_RETURN(model, importer::LoadModel(checkpoint.model_path));
    values = trainer::CheckpointValues(checkpoint);
    ONNXAMP_ASSIGN_OR_RETURN(options.policy, trainer::CheckpointPolicy(checkpoint));
    // A LoRA run's adapters, merged into their weights.
    ONNXAMP_ASSIGN_OR_RETURN(trainer::LoraOptions lora, trainer::CheckpointLora(checkpoint));
    if (lora.enabled()) {
      ONNXAMP_ASSIGN_OR_RETURN(trainer::LoraPlan plan, trainer::PlanLora(model, lora));
      ONNXAMP_ASSIGN_OR_RETURN(values, trainer::MergeLora(model, plan.adapters, std::move(values)));
    }
  } else {
    ONNXAMP_ASSIGN_OR_RETURN(model, importer::LoadModel(args.model));
  }
  options.inference_mode = args.inference_mode;
  trainer::InferenceModeReport inference;
  ONNXAMP_ASSIGN_OR_RETURN(ir::Model out, trainer::ExportTrainedModel(model, values, options, &inference));
  ONNXAMP_RETURN_IF_ERROR(importer::SaveModel(out, args.out));
  std::fprintf(stderr, "export: %s -> %s (%s%s)\n", TerminalSafe(args.model).c_str(), TerminalSafe(args.out).c_str(),
               args.precision.c_str(),
               args.inference_mode ? StrCat("; ", DescribeInferenceMode(inference), " in inference mode").c_str() : "");
  return Status::Ok();
}

}  // namespace

CLI::App* AddTrainCommand(CLI::App& app, TrainArgs& a) {
  CLI::App* cmd = app.add_subcommand("train", "Fine-tune a model (CPU or CUDA; FP32 or mixed precision) and write it");
  cmd->add_option("MODEL", a.model, "ONNX model file")->required();
  cmd->add_option("--data", a.data,
                  ".npz (arrays named after the model's inputs), .npy, or .csv/.csv.gz (arrays 'features' and "
                  "'label') with the training data (required unless --list-parameters)");
  cmd->add_option("--label-column", a.label_column,
                  "CSV data: the label column, by header name or index (0-based, negative from the end; default: "
                  "the last)");
  cmd->add_option("--input-map", a.input_map, "NAME=ARRAY: feed model input NAME from ARRAY");
  cmd->add_option("--labels", a.labels,
                  "The array of labels (class indices) or targets (CSV data: 'label', the label column)");
  cmd->add_option("--loss", a.loss, "ce, mse, l1, bce (with logits), nll, huber or smooth_l1")->capture_default_str();
  cmd->add_option("--loss-output", a.loss_output, "Train on this scalar output the model computes as its loss");
  cmd->add_option("--output", a.output, "The model output the loss reads (when the model has several)");
  cmd->add_option("--class-axis", a.class_axis, "ce/nll: the class dim of the output (1; -1 for [batch, seq, vocab])")
      ->capture_default_str();
  cmd->add_option("--delta", a.delta,
                  "huber, smooth_l1: where the loss turns from quadratic to linear (HuberLoss's delta, "
                  "SmoothL1Loss's beta)")
      ->capture_default_str();
  cmd->add_option("--label-smoothing", a.label_smoothing,
                  "ce: the target puts 1 - X on the label and X / classes on every class (PyTorch's label_smoothing)")
      ->capture_default_str();
  cmd->add_option("--class-weights", a.class_weights,
                  "ce/nll: one weight per class, W0,W1,... or a .npy file (PyTorch's weight=; the mean divides by the "
                  "labels' weights)");
  cmd->add_option("--ignore-index", a.ignore_index, "ce/nll: labels with this value count for nothing")
      ->capture_default_str();
  cmd->add_option("--amp", a.amp, "fp16, bf16 (FP32 master weights) or off")->capture_default_str();
  AddPolicyOptions(cmd, a.policy, "FP16/BF16 (with --amp)");
  AddRangeRuleOptions(cmd, a.ranges, "--amp: ", "the first batch");
  cmd->add_option("--loss-scale", a.loss_scale, "A static loss scale instead of dynamic scaling (fp16)")
      ->check(FiniteNumber(0, false));
  cmd->add_option("--min-loss-scale", a.min_loss_scale, "Dynamic scaling never backs off below this");
  cmd->add_option("--init-scale", a.init_scale, "Dynamic scaling: the first loss scale (default 65536)");
  cmd->add_option("--growth-factor", a.growth_factor,
                  "Dynamic scaling: the scale's factor after --growth-interval clean steps (default 2)");
  cmd->add_option("--backoff-factor", a.backoff_factor,
                  "Dynamic scaling: the scale's factor after an overflow (default 0.5)");
  cmd->add_option("--growth-interval", a.growth_interval,
                  "Dynamic scaling: clean steps in a row before the scale grows (default 2000)");
  cmd->add_option("--optimizer", a.optimizer, "sgd, adam, adamw, radam, nadam, rmsprop, adagrad or lion")
      ->capture_default_str();
  cmd->add_option("--lr", a.lr, "Learning rate")->capture_default_str();
  cmd->add_option("--momentum", a.momentum, "SGD, RMSprop: momentum (default 0)");
  cmd->add_flag("--nesterov", a.nesterov, "SGD: Nesterov momentum");
  cmd->add_option("--dampening", a.dampening, "SGD: momentum dampening (default 0)");
  cmd->add_option("--beta1", a.beta1,
                  "Adam/AdamW, RAdam, NAdam: the first moment's decay; Lion: the update's interpolation (default 0.9)");
  cmd->add_option("--beta2", a.beta2,
                  "Adam/AdamW, RAdam, NAdam: the second moment's decay (default 0.999); Lion: the momentum's (0.99)");
  cmd->add_option(
      "--eps", a.eps,
      "Adam/AdamW, RAdam, NAdam, RMSprop, Adagrad: the denominator's epsilon (default 1e-8; Adagrad 1e-10)");
  cmd->add_option("--lr-decay", a.lr_decay, "Adagrad: step t's rate is the rate / (1 + (t - 1) * X) (default 0)");
  cmd->add_option("--initial-accumulator", a.initial_accumulator,
                  "Adagrad: the squared-gradient sum's initial value (default 0)");
  cmd->add_flag("--amsgrad", a.amsgrad, "Adam/AdamW: the AMSGrad variant");
  cmd->add_option("--alpha", a.alpha, "RMSprop: the squared-gradient average's smoothing constant (default 0.99)");
  cmd->add_flag("--centered", a.centered, "RMSprop: divide by the gradient's estimated standard deviation");
  cmd->add_option("--momentum-decay", a.momentum_decay,
                  "NAdam: psi of the momentum schedule beta1 (1 - 0.5 * 0.96^(t psi)) (default 4e-3)");
  cmd->add_flag("--decoupled-weight-decay", a.decoupled_weight_decay,
                "RAdam, NAdam: decoupled weight decay, p *= 1 - lr * wd, instead of L2 (RAdamW, NAdamW)");
  cmd->add_option("--weight-decay", a.weight_decay,
                  "SGD, Adam, RAdam, NAdam, RMSprop, Adagrad: L2 (RAdam, NAdam: decoupled with "
                  "--decoupled-weight-decay); AdamW, Lion: decoupled (default 0, AdamW 0.01)")
      ->check(FiniteNumber(0, true));
  cmd->add_option("--no-decay", a.no_decay, "No weight decay for parameters whose names match this regex");
  cmd->add_flag("--no-decay-1d", a.no_decay_1d,
                "No weight decay for parameters of fewer than 2 dims (biases, normalization scales and shifts)");
  cmd->add_option("--layer-decay", a.layer_decay,
                  "Layer-wise learning-rate decay in (0, 1]: block k of B trains at D^(B + 1 - k) times the rate, the "
                  "embeddings at D^(B + 1), the head at 1 (timm's layer_decay)")
      ->check(FiniteNumber(0, false));
  cmd->add_option("--layer-pattern", a.layer_pattern,
                  "--layer-decay: the regex whose first group captures a parameter's block index (default: "
                  "layers/blocks/stages/h followed by the index)");
  cmd->add_option("--lr-scale", a.lr_scale,
                  "REGEX=FACTOR: parameters whose names match train at FACTOR times the learning rate (repeatable; "
                  "the first match wins)");
  cmd->add_option("--schedule", a.schedule,
                  "constant, step, cosine, linear, polynomial (decay to --min-lr at the last step), inverse_sqrt or "
                  "plateau (decay by --gamma when the validation --best-metric stops improving; needs --eval-every)")
      ->capture_default_str();
  cmd->add_option("--warmup", a.warmup, "Linear warm-up steps")->capture_default_str();
  cmd->add_option("--warmup-start-factor", a.warmup_start_factor,
                  "The warm-up's first learning rate as a fraction of --lr, in (0, 1]")
      ->capture_default_str();
  cmd->add_option("--step-size", a.step_size, "step schedule: steps between decays")->capture_default_str();
  cmd->add_option("--gamma", a.gamma, "step and plateau schedules: the factor of each decay")->capture_default_str();
  cmd->add_option("--patience", a.patience,
                  "plateau schedule: evaluations without a better --best-metric that are tolerated; one more lowers "
                  "the rate (default 10)");
  cmd->add_option("--cooldown", a.cooldown,
                  "plateau schedule: evaluations after a decay that count as neither better nor worse (default 0)");
  cmd->add_option("--plateau-threshold", a.plateau_threshold,
                  "plateau schedule: the relative improvement that counts as better (default 1e-4)");
  cmd->add_option("--decay-steps", a.decay_steps,
                  "cosine, linear, polynomial: hold --lr after the warm-up and decay over the last N steps only "
                  "(warmup-stable-decay)");
  cmd->add_option(
      "--timescale", a.timescale,
      "inverse_sqrt schedule: steps over which the rate falls to --lr / sqrt(2) (0: the warm-up's, or 10000)");
  cmd->add_option("--power", a.power, "polynomial schedule: the exponent of the decay to --min-lr")
      ->capture_default_str();
  cmd->add_option("--cycles", a.cycles, "cosine schedule: cycles with hard restarts to --lr (1: no restart)")
      ->capture_default_str();
  cmd->add_option("--min-lr", a.min_lr,
                  "cosine, linear and polynomial schedules: final learning rate; plateau: the lowest it decays to")
      ->capture_default_str();
  cmd->add_option("--batch-size", a.batch_size, "Samples per micro-batch")->capture_default_str();
  cmd->add_option("--epochs", a.epochs, "Passes over the data");
  cmd->add_option("--steps", a.steps, "Optimizer steps (instead of --epochs)");
  cmd->add_option("--accumulate", a.accumulate, "Micro-batches per optimizer step")->capture_default_str();
  cmd->add_option("--clip-norm", a.clip_norm, "Clip gradients to this global norm (after unscaling)");
  cmd->add_option("--clip-value", a.clip_value,
                  "Clamp every gradient element to [-X, X] (after unscaling; torch.nn.utils.clip_grad_value_; not "
                  "with --clip-norm)");
  cmd->add_option("--ema", a.ema,
                  "Keep a moving average of the weights with this decay (e.g. 0.999); evaluation and -o use it");
  cmd->add_flag("--ema-warmup", a.ema_warmup, "--ema: ramp the decay up as (1 + n) / (10 + n) over the first steps");
  cmd->add_option("--swa-start", a.swa_start,
                  "Stochastic weight averaging: the equal average of the weights after every step once N steps were "
                  "taken (torch.optim.swa_utils.AveragedModel); evaluation and -o use it (not with --ema)");
  cmd->add_flag("--update-bn", a.update_bn,
                "With --swa-start or --ema: recompute the exported model's BatchNormalization statistics with one "
                "pass over the training data (torch.optim.swa_utils.update_bn) instead of averaging them");
  cmd->add_option("--trainable", a.trainable,
                  "Train only the float initializers whose names match this regex, or that @FILE lists (one name "
                  "per line), one-element ones included (ONNX Runtime Training's requires_grad; default: those of "
                  "more than one element)");
  cmd->add_option("--freeze", a.freeze,
                  "Do not train initializers whose names match this regex, or that @FILE lists (one name per line)");
  cmd->add_option("--padding-idx", a.padding_idx,
                  "NAME=ROW[,ROW...]: these rows of parameter NAME get no gradient, as PyTorch's "
                  "nn.Embedding(padding_idx=ROW) (an ONNX export does not record it); repeatable");
  cmd->add_option("--lora-rank", a.lora_rank,
                  "LoRA: train rank-R adapters beside the MatMul/Gemm weights instead of the weights (peft's r); -o "
                  "gets them merged into the weights");
  cmd->add_option("--lora-alpha", a.lora_alpha, "LoRA: the adapters' output is scaled by ALPHA / R (default 8)");
  cmd->add_flag("--lora-rslora", a.lora_rslora, "LoRA: scale by ALPHA / sqrt(R) instead (rank-stabilized LoRA)");
  cmd->add_option("--lora-targets", a.lora_targets,
                  "LoRA: adapt the weights whose names match this regex, Conv weights included (default: every 2-D "
                  "MatMul/Gemm weight)");
  cmd->add_option("--lora-dropout", a.lora_dropout, "LoRA: Dropout on the adapters' input (default 0)");
  cmd->add_option("--lora-train", a.lora_train,
                  "LoRA: also train the initializers whose names match this regex (e.g. the classifier head)");
  cmd->add_option("--lora-init", a.lora_init,
                  "LoRA: start from these adapters (.npz per weight W: W.lora_A [R, in] and W.lora_B [out, R]; a Conv "
                  "weight: [R, in, k...] and [out, R, 1...])");
  cmd->add_option("--lora-save", a.lora_save,
                  "LoRA: also write the trained adapters to this .npz, as --lora-init reads");
  cmd->add_option("--seed", a.seed, "Shuffling and Dropout seed")->capture_default_str();
  cmd->add_flag("--no-shuffle", a.no_shuffle, "Batches in file order every epoch");
  cmd->add_option("--val-data", a.val_data, "A validation file, bound like --data");
  cmd->add_option("--val-split", a.val_split, "Hold out this fraction of --data for validation")
      ->check(FiniteNumber(0, false));
  cmd->add_option("--save-split", a.save_split,
                  "With --val-split: write the held-out samples to DIR/val.npz (arrays named after the model's "
                  "inputs, and the labels)");
  cmd->add_option("--last-batch", a.last_batch, "partial, drop or pad")->capture_default_str();
  cmd->add_flag("--allow-nonfinite", a.allow_nonfinite, "Accept NaN/inf in the data");
  cmd->add_option("--log-every", a.log_every, "Print a line every N steps")->capture_default_str();
  cmd->add_option("--log-format", a.log_format,
                  "text (a progress bar when stderr is a terminal, else a line every --log-every steps) or jsonl "
                  "(a JSON object per line on stdout; with --list-parameters one per initializer, then a summary)")
      ->capture_default_str();
  cmd->add_option("--log-dir", a.log_dir,
                  "Write every step's metrics to DIR/metrics.jsonl and a TensorBoard event file in DIR");
  cmd->add_option("--top-k", a.top_k,
                  "Evaluation also reports top-K accuracy (classification losses; ties go to the lower class index)");
  cmd->add_option("--eval-every", a.eval_every, "Evaluate on the validation data every N steps (and at the end)");
  cmd->add_flag("--keep-best", a.keep_best,
                "With --eval-every: -o gets the model of the best evaluation (by --best-metric), not the last step's");
  cmd->add_option("--best-metric", a.best_metric,
                  "What --keep-best, --early-stop and --schedule plateau follow: loss (lower is better) or accuracy "
                  "(higher)")
      ->capture_default_str();
  cmd->add_option("--early-stop", a.early_stop,
                  "With --eval-every: stop after N evaluations in a row without a better --best-metric");
  cmd->add_option("--threads", a.threads, "CPU threads (0: one per hardware thread)")->capture_default_str();
  cmd->add_option("--device", a.device,
                  "Where the step runs: the CPU runtime, or CUDA (forward, loss, backward and optimizer on the GPU; "
                  "ops without a CUDA kernel run on the CPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--device-index", a.device_index, "With --device cuda: which CUDA device")->capture_default_str();
  cmd->add_option("--cuda-graph", a.cuda_graph,
                  "With --device cuda: capture the whole step as a CUDA Graph after warm-up and replay it (on: a "
                  "notice when steps cannot be captured; auto: silently eager then; not yet run on a GPU)")
      ->check(CLI::IsMember({"on", "off", "auto"}))
      ->capture_default_str();
  cmd->add_option("--recompute", a.recompute,
                  "Activation recomputation (gradient checkpointing): keep only the values at the boundaries of "
                  "segments of the forward pass and run each segment again before its backward (the same results, "
                  "less memory, about one more forward pass); auto: the cut with the smallest estimated peak, N: "
                  "about N segments; cheap: only what elementwise ops and normalisations make from values the backward "
                  "pass keeps anyway (less saved, a few percent of compute)")
      ->capture_default_str();
  cmd->add_flag("--profile", a.profile,
                "Time the steps after the first and print where a step's time goes at the end: per op type and "
                "node (forward or backward), batches, the optimizer step (on a device: device time, each step "
                "synchronised)");
  cmd->add_option("--export-precision", a.export_precision, "The written model: fp32, fp16 or bf16")
      ->capture_default_str();
  cmd->add_flag("--export-inference-mode", a.export_inference_mode,
                "Write -o's BatchNormalization and Dropout nodes that the model has in training mode in inference "
                "mode (as torch's model.eval() runs them), for deployment");
  cmd->add_option("--checkpoint-dir", a.checkpoint_dir,
                  "Write checkpoints here (DIR/step-N/, DIR/latest), at the end and every --checkpoint-every steps");
  cmd->add_option("--checkpoint-every", a.checkpoint_every, "Steps between checkpoints (0: only at the end)");
  cmd->add_option("--keep-checkpoints", a.keep_checkpoints, "Keep only the newest K checkpoints (0: all)");
  cmd->add_option("--resume", a.resume,
                  "Continue from a checkpoint (a --checkpoint-dir folder or one step folder); the model, data and "
                  "options must be the run's, except --steps, --epochs, --threads and --recompute");
  cmd->add_option("-o,--out", a.out, "The trained model (required unless --list-parameters)");
  cmd->add_flag("--list-parameters", a.list_parameters,
                "Print every float initializer and whether these options train it (and why not), then stop: no "
                "data is read and nothing is written");
  CheckWholeNumbers(cmd, {{"--class-axis", std::numeric_limits<int64_t>::min()},
                          {"--ignore-index", std::numeric_limits<int64_t>::min()},
                          {"--growth-interval", 1},
                          {"--warmup", 0},
                          {"--step-size", 1},
                          {"--patience", 0},
                          {"--cooldown", 0},
                          {"--decay-steps", 0},
                          {"--timescale", 0},
                          {"--cycles", 1},
                          {"--batch-size", 1},
                          {"--epochs", 1},
                          {"--steps", 1},
                          {"--accumulate", 1, std::numeric_limits<int>::max()},
                          {"--swa-start", 0},
                          {"--lora-rank", 1, 1 << 20},
                          {"--log-every", 1},
                          {"--top-k", 2},
                          {"--eval-every", 0},
                          {"--early-stop", 1},
                          {"--threads", 0, kMaxThreads},
                          {"--device-index", 0, std::numeric_limits<int>::max()},
                          {"--checkpoint-every", 0},
                          {"--keep-checkpoints", 0}});
  cmd->get_option("--seed")->check(Unsigned64());
  // Which options were given, for the checks of options whose default is an ordinary value (--gamma 0.1).
  RecordGivenOptions(cmd, a.given);
  return cmd;
}

int RunTrain(const TrainArgs& args) {
  if (Status usage = CheckTrainUsage(args); !usage.ok()) return PrintUsageError(usage.message(), "train");
#if defined(__GLIBC__)
  // Blocks of 1 MiB and more in their own mappings, returned to the system when freed. glibc's default threshold
  // follows the largest block freed up to 32 MiB, so the first step's values (allocated one by one, before the
  // session's memory plan exists) would stay resident in the heap beside the plan's arena: ResNet-50 at batch 8 peaked
  // at 2.5 GiB resident instead of 1.4 GiB.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
  Status st = Train(args);
  if (!st.ok()) return PrintError(st);
  return g_interrupted_by ? 128 + g_interrupted_by : kExitOk;  // as a shell reports a process it killed
}

CLI::App* AddExportCommand(CLI::App& app, ExportArgs& a) {
  CLI::App* cmd = app.add_subcommand("export", "Write a trained model as FP32 or mixed precision");
  cmd->add_option("MODEL", a.model, "A trained ONNX model, or a checkpoint folder of `onnxamp train`")->required();
  cmd->add_option("--precision", a.precision, "fp32, fp16 or bf16")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
      ->capture_default_str();
  cmd->add_flag("--dynamic-batch", a.dynamic_batch,
                "Make a batch dimension fixed at export symbolic (the input shapes are kept otherwise)");
  cmd->add_flag("--inference-mode", a.inference_mode,
                "Write BatchNormalization and Dropout nodes that the model has in training mode (as a training-mode "
                "torch.onnx.export writes them) in inference mode, as torch's model.eval() runs them");
  cmd->add_option("-o,--out", a.out, "Output model")->required();
  return cmd;
}

int RunExport(const ExportArgs& args) {
  Status st = Export(args);
  return st.ok() ? kExitOk : PrintError(st);
}

}  // namespace onnxamp::cli
