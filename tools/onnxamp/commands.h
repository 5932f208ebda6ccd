// The onnxamp subcommands: each adds itself to the CLI11 app and runs once the command line is parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "converter/policy.h"
#include "converter/range_rules.h"
#include "runtime/common/status.h"
#include "runtime/ir/model.h"

namespace onnxamp::cli {

// The most threads --threads takes: more start so many OS threads that the machine runs out of processes.
inline constexpr int kMaxThreads = 1024;

// CLI11 checks that read an option's text before CLI11 converts it (validators.cc). WholeNumber: an integer in
// [min, max] (CLI11 itself would saturate one past int64, or take "1.5" apart); Unsigned64: 0 to 2^64 - 1;
// FiniteNumber: a finite number above `min` (at least `min` when `inclusive`): NaN and infinities are refused (an
// option that uses an out-of-range value to mean "not given" would otherwise take a NaN as the default).
CLI::Validator WholeNumber(int64_t min, int64_t max = std::numeric_limits<int64_t>::max());
CLI::Validator Unsigned64();
CLI::Validator FiniteNumber(double min, bool inclusive);
// Adds WholeNumber(min, max) to each named option of `cmd` (which must exist).
struct WholeNumberOption {
  const char* name;
  int64_t min;
  int64_t max = std::numeric_limits<int64_t>::max();
};
void CheckWholeNumbers(CLI::App* cmd, std::initializer_list<WholeNumberOption> options);
// Fills `given` with the names of the options of `cmd` that the command line set ("--gamma"), once it is parsed: for
// checks of options whose default is an ordinary value.
void RecordGivenOptions(CLI::App* cmd, std::set<std::string>& given);

// The precision policy options that `convert` and `train --amp` share: --policy FILE.json, then --keep-op,
// --force-low-op, --keep-node REGEX and --force-low-node REGEX on top of it.
struct PolicyArgs {
  std::vector<std::string> keep_ops;
  std::vector<std::string> low_ops;
  std::vector<std::string> keep_nodes;
  std::vector<std::string> low_nodes;
  std::string file;
  bool empty() const {
    return keep_ops.empty() && low_ops.empty() && keep_nodes.empty() && low_nodes.empty() && file.empty();
  }
};
void AddPolicyOptions(CLI::App* cmd, PolicyArgs& args, const std::string& low_name);
// The range rules' options (--init-max, --data-max, --max-reduction-depth) into `rules`, whose samples `samples`
// names in the help, `prefix` starting each line.
void AddRangeRuleOptions(CLI::App* cmd, converter::RangeRuleOptions& rules, const std::string& prefix,
                         const std::string& samples);
// The overrides' own mistakes (usage errors): an op type or node pattern both kept and forced low, a pattern that
// is no ECMAScript regex.
Status CheckPolicyArgs(const PolicyArgs& args);
// The default policy with the file and the overrides applied (CheckPolicyArgs passed); errors name the file.
StatusOr<converter::PrecisionPolicy> PolicyFromArgs(const PolicyArgs& args);
// Prints "COMMAND: warning: ..." for each --keep-op/--force-low-op op type that no node of `model` (subgraphs
// included) has: a misspelt op type would otherwise change nothing without a word.
void WarnAboutUnusedPolicyOps(const PolicyArgs& args, const ir::Model& model, const char* command);

// `onnxamp inspect MODEL [--json]`.
struct InspectArgs {
  std::string model;
  bool json = false;
};
CLI::App* AddInspectCommand(CLI::App& app, InspectArgs& args);
int RunInspect(const InspectArgs& args);

// `onnxamp repack MODEL -o OUT [--external-data auto|always|never] [--external-data-file NAME] [--sort]`.
struct RepackArgs {
  std::string model;
  std::string output;
  std::string external_data = "auto";
  std::string external_data_file;
  bool sort = false;
};
CLI::App* AddRepackCommand(CLI::App& app, RepackArgs& args);
int RunRepack(const RepackArgs& args);

// `onnxamp run MODEL --input NAME=FILE ... [--output-dir DIR] [--device cpu|cuda] [--device-index N] [--threads N]
// [--profile] [--labels [ARRAY=]FILE [--ignore-index N]]`.
struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir = ".";
  std::string device = "cpu";
  int device_index = 0;
  int threads = 0;
  bool profile = false;
  std::string labels;                   // [ARRAY=]FILE: class labels to score output 0 against
  std::optional<int64_t> ignore_index;  // --ignore-index: labels that count for nothing
};
CLI::App* AddRunCommand(CLI::App& app, RunArgs& args);
int RunRun(const RunArgs& args);

// `onnxamp convert MODEL -o OUT [--target fp16|bf16] [--keep-op OP]... [--force-low-op OP]... [--keep-node REGEX]...
// [--force-low-node REGEX]... [--policy FILE.json] [--keep-io-types] [--auto --data FILE... --rtol R --atol A]
// [--report FILE.json] [--external-data auto|always|never] [--print-policy]`.
struct ConvertArgs {
  std::string model;
  std::string output;
  std::string target = "fp16";
  PolicyArgs policy;
  bool keep_io_types = false;
  bool auto_mode = false;
  std::vector<std::string> data;
  double rtol = 1e-2;
  double atol = 1e-3;
  int threads = 0;
  std::string report;
  std::string external_data = "auto";
  bool print_policy = false;
  converter::RangeRuleOptions ranges;  // --init-max, --data-max (with --data), --max-reduction-depth
  std::set<std::string> given;         // the options on the command line ("--rtol")
};
CLI::App* AddConvertCommand(CLI::App& app, ConvertArgs& args);
int RunConvert(const ConvertArgs& args);

// `onnxamp version`.
CLI::App* AddVersionCommand(CLI::App& app);
int RunVersion();

// `onnxamp train MODEL --data FILE [--label-column COL] [--input-map NAME=ARRAY]... --labels ARRAY
// --loss ce|mse|l1|bce|nll [--amp fp16|bf16|off] [--optimizer sgd|adam|adamw --lr X ...] [--batch-size B]
// [--epochs E | --steps N] [--val-split F [--save-split DIR]] ... -o OUT`.
// Why `--device cuda` cannot run in this process, or "" when it can (run.cc). main() registers the CUDA backend when
// the build has one and a usable device is present.
std::string CudaUnavailableReason();

struct TrainArgs {
  std::string model, data, labels, loss = "ce", loss_output, output, amp = "off", optimizer = "adamw";
  std::vector<std::string> input_map;
  std::vector<std::string> padding_idx;  // --padding-idx NAME=ROW[,ROW...], repeatable
  int64_t class_axis = 1, ignore_index = -100;
  // --init-scale, --growth-factor, --backoff-factor, --growth-interval: torch.amp.GradScaler's arguments (dynamic
  // scaling, --amp fp16); unset: its defaults.
  std::optional<double> init_scale, growth_factor, backoff_factor;
  std::optional<int64_t> growth_interval;
  double loss_scale = 0, min_loss_scale = 0, lr = 1e-3, weight_decay = -1, gamma = 0.1, min_lr = 0;
  double warmup_start_factor = 1.0 / 3.0;  // --warmup-start-factor (LinearLR's default)
  double label_smoothing = 0;
  double delta = 1.0;                // --delta (huber, smooth_l1)
  std::string class_weights;         // --class-weights W0,W1,... or FILE.npy
  bool keep_best = false;            // --keep-best: export the best evaluated model instead of the last
  std::string best_metric = "loss";  // --best-metric loss|accuracy
  int64_t early_stop = 0;            // --early-stop N: stop after N evaluations without improvement
  bool nesterov = false, allow_nonfinite = false, no_shuffle = false;
  std::string schedule = "constant", last_batch = "partial", trainable, freeze, val_data, export_precision = "fp32",
              out;
  std::string label_column, save_split;
  int64_t warmup = 0, step_size = 1, batch_size = 32, epochs = 0, steps = 0, log_every = 10;
  int accumulate = 1, threads = 0;
  int64_t top_k = 0;  // --top-k
  std::string device = "cpu";
  int device_index = 0;
  std::string cuda_graph = "off";      // --cuda-graph on|off|auto
  std::string recompute = "off";       // --recompute off|auto|cheap|N (trainer/graph/recompute.h)
  bool profile = false;                // --profile
  bool export_inference_mode = false;  // --export-inference-mode
  bool list_parameters = false;        // --list-parameters: print what would train, and stop
  double clip_norm = 0, clip_value = 0, val_split = 0;
  uint64_t seed = 0;
  std::string checkpoint_dir, resume;  // checkpoints (trainer/checkpoint/)
  int64_t checkpoint_every = 0, keep_checkpoints = 0;
  std::string log_format = "text", log_dir;  // trainer/log/
  int64_t eval_every = 0;
  std::string no_decay;               // --no-decay REGEX
  bool no_decay_1d = false;           // --no-decay-1d
  double layer_decay = 0;             // --layer-decay D
  std::string layer_pattern;          // --layer-pattern REGEX (needs --layer-decay)
  std::vector<std::string> lr_scale;  // --lr-scale REGEX=FACTOR (repeatable)
  PolicyArgs policy;                  // --amp: --keep-op, --force-low-op, --keep-node, --force-low-node, --policy
  int64_t cycles = 1;                 // --cycles N (cosine restarts)
  double power = 1.0;                 // --power P (polynomial schedule)
  int64_t decay_steps = 0;            // --decay-steps N (warmup-stable-decay)
  int64_t timescale = 0;              // --timescale N (inverse_sqrt)
  // --patience N, --cooldown N, --plateau-threshold X (plateau schedule; unset: ReduceLROnPlateau's defaults)
  std::optional<int64_t> patience, cooldown;
  std::optional<double> plateau_threshold;
  // The optimizers' own options, unset when not given (each optimizer's default applies; one that the chosen
  // optimizer does not take is a usage error): --momentum (SGD, RMSprop), --dampening (SGD), --beta1, --beta2
  // (Adam/AdamW, Lion), --eps (Adam/AdamW, RMSprop), --alpha (RMSprop); the flags --nesterov (SGD), --amsgrad
  // (Adam/AdamW), --centered (RMSprop).
  std::optional<double> momentum, dampening, beta1, beta2, eps, alpha, lr_decay, initial_accumulator;
  bool centered = false;
  std::optional<double> momentum_decay;  // --momentum-decay (NAdam)
  bool decoupled_weight_decay = false;   // --decoupled-weight-decay (RAdam, NAdam)
  converter::RangeRuleOptions ranges;    // --init-max, --data-max, --max-reduction-depth (under --amp)
  bool amsgrad = false;                  // --amsgrad
  double ema = 0;                        // --ema DECAY
  bool ema_warmup = false;               // --ema-warmup
  int64_t swa_start = -1;                // --swa-start N
  bool update_bn = false;                // --update-bn (with --swa-start or --ema)
  // LoRA (trainer/graph/lora.h): --lora-rank R (0: off), --lora-alpha, --lora-rslora, --lora-targets REGEX,
  // --lora-dropout P, --lora-train REGEX, --lora-init FILE.npz, --lora-save FILE.npz.
  int64_t lora_rank = 0;
  std::optional<double> lora_alpha, lora_dropout;
  bool lora_rslora = false;
  std::string lora_targets, lora_train, lora_init, lora_save;
  std::set<std::string> given;  // the options on the command line ("--gamma"), for options whose default is a value
};
CLI::App* AddTrainCommand(CLI::App& app, TrainArgs& args);
int RunTrain(const TrainArgs& args);

// `onnxamp export MODEL|CHECKPOINT_DIR -o OUT [--precision fp32|fp16|bf16]`.
struct ExportArgs {
  std::string model, out, precision = "fp32";
  bool dynamic_batch = false;   // a batch dim fixed at export made symbolic in the written model
  bool inference_mode = false;  // training-mode BatchNormalization and Dropout written in inference mode
};
CLI::App* AddExportCommand(CLI::App& app, ExportArgs& args);
int RunExport(const ExportArgs& args);

}  // namespace onnxamp::cli
