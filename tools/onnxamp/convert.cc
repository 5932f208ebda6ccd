// `onnxamp convert MODEL -o OUT`: converts a model to mixed precision (FP16 or BF16 compute, FP32 where the policy
// or the auto mode keeps it) and writes it with SaveModel, printing a summary and optionally a JSON report.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "converter/auto_mode.h"
#include "converter/convert.h"
#include "converter/policy.h"
#include "converter/range_rules.h"
#include "importer/model_io.h"
#include "importer/tensor_file.h"
#include "runtime/common/file_util.h"
#include "runtime/executor/session_env.h"
#include "tools/onnxamp/cli_error.h"
#include "tools/onnxamp/commands.h"
#include "tools/onnxamp/inspect.h"

namespace onnxamp::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Sci(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// The model's inputs a caller must feed (graph inputs without an initializer), in order.
std::vector<const ir::Value*> FedInputs(const ir::Model& model) {
  std::vector<const ir::Value*> out;
  for (const ir::Value* v : model.graph->inputs()) {
    if (!v->initializer()) out.push_back(v);
  }
  return out;
}

std::string InputList(const ir::Model& model) {
  std::string names;
  for (const ir::Value* v : model.graph->inputs()) {
    if (!names.empty()) names += ", ";
    names += v->name();
  }
  return names;
}

// input_<i>.pb files of a folder, sorted by i.
std::vector<std::pair<int, fs::path>> InputFiles(const fs::path& dir) {
  static const std::regex kInputFile(R"(input_(\d+)\.pb)");
  std::vector<std::pair<int, fs::path>> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (e.is_regular_file(ec) && std::regex_match(name, m, kInputFile)) files.push_back({std::stoi(m[1]), e.path()});
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Binds the tensors read from `where` to the model's inputs: by name, or (for unnamed input_<i>.pb tensors, and a
// single unnamed tensor for a single-input model) by position. Floating tensors are cast to the input's floating
// type (NumPy writes float64 by default). Every fed input must be given exactly once.
StatusOr<std::vector<ir::Tensor>> BindSample(const ir::Model& model, std::vector<std::pair<int, ir::Tensor>> tensors,
                                             const std::string& where) {
  const std::vector<const ir::Value*> fed = FedInputs(model);
  std::map<std::string, ir::Tensor> bound;
  for (auto& [position, t] : tensors) {
    // Positional binding: an unnamed tensor, or the one tensor of a .pb/.npy for a model with one input.
    const bool unnamed = t.name().empty();
    const bool lone = position >= 0 && fed.size() == 1 && tensors.size() == 1 && !model.graph->FindValue(t.name());
    if (unnamed || lone) {
      if (position < 0 || static_cast<size_t>(position) >= fed.size()) {
        return InvalidArgument(where, ": an unnamed tensor cannot be bound to one of the model's ", fed.size(),
                               " inputs (", InputList(model), ")");
      }
      t.set_name(fed[position]->name());
    }
    const ir::Value* v = model.graph->FindValue(t.name());
    if (!v || !v->is_graph_input()) {
      return InvalidArgument(where, ": array '", t.name(), "' is not an input of the model (inputs: ", InputList(model),
                             ")");
    }
    const DType want = v->type().elem_type();
    if (t.dtype() != want && IsFloatingPoint(t.dtype()) && IsFloatingPoint(want) && want != DType::kUndefined) {
      StatusOr<ir::Tensor> cast = [&]() -> StatusOr<ir::Tensor> {
        if (t.dtype() == DType::kFloat64 && want == DType::kFloat32) {
          ir::Tensor out = ir::Tensor::Uninitialized(want, t.dims());
          auto src = t.values<double>();
          auto dst = out.mutable_values<float>();
          for (size_t i = 0; i < src.size(); ++i) dst[i] = static_cast<float>(src[i]);
          return out;
        }
        return InvalidArgument(where, ": array '", t.name(), "' is ", DTypeName(t.dtype()), ", the input is ",
                               DTypeName(want));
      }();
      if (!cast.ok()) return cast.status();
      cast->set_name(t.name());
      t = std::move(cast).value();
    }
    const std::string name = t.name();
    if (!bound.emplace(name, std::move(t)).second) return InvalidArgument(where, ": input '", name, "' given twice");
  }
  std::vector<ir::Tensor> out;
  for (const ir::Value* v : model.graph->inputs()) {
    auto it = bound.find(v->name());
    if (it == bound.end()) {
      if (v->initializer()) continue;
      return InvalidArgument(where, ": no tensor for input '", v->name(), "' (", v->type().ToString(), ")");
    }
    out.push_back(std::move(it->second));
  }
  return out;
}

// The sample sets of one --data argument: an .npz (one set), a .pb/.npy (one tensor), a folder of input_<i>.pb
// (one set) or a folder of test_data_set_* folders (one set each).
Status ReadSamples(const ir::Model& model, const std::string& path, std::vector<std::vector<ir::Tensor>>& samples) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFound(path, ": no such file or folder");
  auto read_dir = [&](const fs::path& dir) -> Status {
    const auto files = InputFiles(dir);
    if (files.empty()) return InvalidArgument(dir.string(), ": no input_<i>.pb files");
    std::vector<std::pair<int, ir::Tensor>> tensors;
    for (const auto& [index, file] : files) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor t, importer::ReadTensorFile(file.string()));
      tensors.push_back({index, std::move(t)});
    }
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> set, BindSample(model, std::move(tensors), dir.string()));
    samples.push_back(std::move(set));
    return Status::Ok();
  };
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(path, ec)) {
      if (e.is_directory(ec) && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    }
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) {
      if (InputFiles(path).empty())
        return InvalidArgument(path, ": no input_<i>.pb files and no test_data_set_* folders");
      return read_dir(path);
    }
    for (const fs::path& dir : sets) ONNXAMP_RETURN_IF_ERROR(read_dir(dir));
    return Status::Ok();
  }
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> read, importer::ReadTensors(path));
  std::vector<std::pair<int, ir::Tensor>> tensors;
  const bool single = read.size() == 1 && fs::path(path).extension() != ".npz";
  for (ir::Tensor& t : read) tensors.push_back({single ? 0 : -1, std::move(t)});
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> set, BindSample(model, std::move(tensors), path));
  samples.push_back(std::move(set));
  return Status::Ok();
}

Json OutputErrorsJson(const std::vector<converter::OutputError>& errors) {
  Json out = Json::array();
  for (const converter::OutputError& e : errors) {
    out.push_back({{"name", e.name},
                   {"max_abs", e.max_abs},
                   {"max_rel", e.max_rel},
                   {"worst_excess", e.worst_excess},
                   {"nonfinite", e.nonfinite},
                   {"all_zero", e.all_zero},
                   {"max_fp32", e.scale},
                   {"atol_used", e.atol_used},
                   {"below_atol", e.below_atol}});
  }
  return out;
}

std::string AutoSummary(const converter::AutoResult& result, const ConvertArgs& args, size_t num_samples) {
  std::string s = StrCat("auto: rtol ", Sci(args.rtol), ", atol ", Sci(args.atol), ", ", num_samples, " sample set",
                         num_samples == 1 ? "" : "s", ", ", result.candidate_runs, " runs, ", Fixed(result.seconds, 2),
                         " s; ", result.kept.size(), " node", result.kept.size() == 1 ? "" : "s", " kept FP32\n");
  for (const converter::OutputError& e : result.errors) {
    s += StrCat("  output '", e.name, "': max abs error ", Sci(e.max_abs), ", max rel ", Sci(e.max_rel),
                e.below_atol ? StrCat(" (atol scaled to ", Sci(e.atol_used), ")") : std::string(),
                e.nonfinite ? ", NaN/inf where FP32 is finite" : "", e.all_zero ? ", all zero where FP32 is not" : "",
                "\n");
  }
  for (const std::string& w : result.warnings) s += StrCat("warning: ", w, "\n");
  return s;
}

}  // namespace

void AddPolicyOptions(CLI::App* cmd, PolicyArgs& args, const std::string& low_name) {
  cmd->add_option("--keep-op", args.keep_ops, "Op type always computed in FP32 (repeatable)")->allow_extra_args(false);
  cmd->add_option("--force-low-op", args.low_ops, "Op type always computed in " + low_name + " (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--keep-node", args.keep_nodes, "Regex over whole node names kept in FP32 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--force-low-node", args.low_nodes, "Regex over whole node names forced to " + low_name)
      ->allow_extra_args(false);
  cmd->add_option("--policy", args.file, "Precision policy JSON file (the command-line overrides apply on top)");
}

void AddRangeRuleOptions(CLI::App* cmd, converter::RangeRuleOptions& rules, const std::string& prefix,
                         const std::string& samples) {
  cmd->add_option(
         "--init-max", rules.init_max,
         prefix + "Keep FP32 the nodes reading a constant of magnitude above this (65504: what FP16 cannot hold)")
      ->check(FiniteNumber(0, false));
  cmd->add_option("--data-max", rules.data_max,
                  prefix + "Keep FP32 the nodes whose inputs or outputs pass this magnitude on " + samples)
      ->check(FiniteNumber(0, false));
  cmd->add_option("--max-reduction-depth", rules.max_reduction_depth,
                  prefix + "Keep FP32 the MatMul/Gemm/Conv nodes that sum more products per output")
      ->check(WholeNumber(1));
}

Status CheckPolicyArgs(const PolicyArgs& args) {
  for (const std::string& op : args.keep_ops) {
    if (std::find(args.low_ops.begin(), args.low_ops.end(), op) != args.low_ops.end()) {
      return InvalidArgument("--keep-op ", op, " and --force-low-op ", op, " contradict each other");
    }
  }
  for (const std::string& p : args.keep_nodes) {
    if (std::find(args.low_nodes.begin(), args.low_nodes.end(), p) != args.low_nodes.end()) {
      return InvalidArgument("--keep-node ", p, " and --force-low-node ", p, " contradict each other");
    }
  }
  // The patterns compile (PolicyFromArgs compiles them again into the policy).
  converter::PrecisionPolicy scratch;
  for (const std::string& p : args.keep_nodes) {
    if (Status s = scratch.AddKeepNodePattern(p); !s.ok()) return InvalidArgument("--keep-node: ", s.message());
  }
  for (const std::string& p : args.low_nodes) {
    if (Status s = scratch.AddLowNodePattern(p); !s.ok()) return InvalidArgument("--force-low-node: ", s.message());
  }
  return Status::Ok();
}

void WarnAboutUnusedPolicyOps(const PolicyArgs& args, const ir::Model& model, const char* command) {
  std::set<std::string> types;
  std::function<void(const ir::Graph&)> collect = [&](const ir::Graph& g) {
    for (const ir::Node* n : g.nodes()) {
      types.insert(n->op_type());
      for (const ir::Graph* sub : n->subgraphs()) collect(*sub);
    }
  };
  collect(*model.graph);
  for (const auto& [flag, ops] : {std::pair{"--keep-op", &args.keep_ops}, std::pair{"--force-low-op", &args.low_ops}}) {
    for (const std::string& op : *ops) {
      if (!types.count(op)) {
        std::fprintf(stderr,
                     "%s: warning: %s %s: no node of the model has this op type (op types are case-sensitive)\n",
                     command, flag, OneLine(op).c_str());
      }
    }
  }
}

StatusOr<converter::PrecisionPolicy> PolicyFromArgs(const PolicyArgs& args) {
  converter::PrecisionPolicy policy = converter::PrecisionPolicy::Default();
  if (!args.file.empty()) {
    ONNXAMP_ASSIGN_OR_RETURN(policy, converter::PrecisionPolicy::FromJsonFile(args.file));
  }
  for (const std::string& op : args.keep_ops) policy.SetOp(op, converter::Precision::kKeep);
  for (const std::string& op : args.low_ops) policy.SetOp(op, converter::Precision::kLow);
  for (const std::string& p : args.keep_nodes) {
    if (Status s = policy.AddKeepNodePattern(p); !s.ok()) return InvalidArgument("--keep-node: ", s.message());
  }
  for (const std::string& p : args.low_nodes) {
    if (Status s = policy.AddLowNodePattern(p); !s.ok()) return InvalidArgument("--force-low-node: ", s.message());
  }
  return policy;
}

CLI::App* AddConvertCommand(CLI::App& app, ConvertArgs& args) {
  CLI::App* cmd =
      app.add_subcommand("convert", "Convert a model to mixed precision (FP16/BF16 with FP32 where needed)");
  cmd->add_option("MODEL", args.model, "ONNX model file (FP32)");
  cmd->add_option("-o,--output", args.output, "Output model file");
  cmd->add_option("--target", args.target, "Low-precision type")
      ->check(CLI::IsMember({"fp16", "bf16"}))
      ->capture_default_str();
  AddPolicyOptions(cmd, args.policy, "the target type");
  cmd->add_flag("--keep-io-types", args.keep_io_types, "Keep FP32 graph inputs and outputs (Casts at the boundary)");
  cmd->add_flag("--auto", args.auto_mode,
                "Keep the fewest nodes in FP32 such that every output stays within --rtol/--atol of the FP32 model "
                "on the --data samples");
  cmd->add_option("--data", args.data,
                  "Sample inputs for --auto: .npz (arrays by input name), .pb/.npy, a folder of input_<i>.pb or of "
                  "test_data_set_* folders (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--rtol", args.rtol, "Relative tolerance for --auto")
      ->check(FiniteNumber(0, true))
      ->capture_default_str();
  cmd->add_option("--atol", args.atol, "Absolute tolerance for --auto")
      ->check(FiniteNumber(0, true))
      ->capture_default_str();
  AddRangeRuleOptions(cmd, args.ranges, "", "the --data samples");
  cmd->add_option("--threads", args.threads,
                  "Threads of the CPU runtime for --auto and --data-max (0: one per hardware thread)")
      ->check(WholeNumber(0, kMaxThreads))
      ->capture_default_str();
  cmd->add_option("--report", args.report, "Write a JSON report of the conversion to this file");
  cmd->add_option("--external-data", args.external_data,
                  "auto: keep external tensors external (all external over 2 GB); always: every tensor of 1 KiB "
                  "or more external; never: everything inline")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  cmd->add_flag("--print-policy", args.print_policy, "Print the effective precision policy as JSON and exit");
  RecordGivenOptions(cmd, args.given);
  return cmd;
}

int RunConvert(const ConvertArgs& args) {
  const auto start = Clock::now();
  // Usage checks CLI11 cannot express.
  if (!args.print_policy) {
    if (args.model.empty()) return PrintUsageError("MODEL is required", "convert");
    if (args.output.empty()) return PrintUsageError("-o/--output is required", "convert");
  }
  if (args.auto_mode && args.data.empty()) return PrintUsageError("--auto needs at least one --data FILE", "convert");
  if (args.ranges.data_max > 0 && args.data.empty())
    return PrintUsageError("--data-max needs at least one --data FILE", "convert");
  if (!args.auto_mode && !args.data.empty() && args.ranges.data_max <= 0 && args.ranges.max_reduction_depth <= 0) {
    return PrintUsageError("--data is only used with --auto, --data-max or --max-reduction-depth", "convert");
  }
  if (!args.auto_mode && (args.given.count("--rtol") || args.given.count("--atol"))) {
    return PrintUsageError("--rtol and --atol are the tolerances of --auto", "convert");
  }
  if (Status s = CheckPolicyArgs(args.policy); !s.ok()) return PrintUsageError(s.message(), "convert");

  converter::ConvertOptions options;
  options.target = args.target == "bf16" ? DType::kBFloat16 : DType::kFloat16;
  options.keep_io_types = args.keep_io_types;
  {
    StatusOr<converter::PrecisionPolicy> policy = PolicyFromArgs(args.policy);
    if (!policy.ok()) return PrintError(policy.status());  // the policy file: CheckPolicyArgs passed
    options.policy = std::move(policy).value();
  }
  if (args.print_policy) {
    const std::string json = options.policy.ToJson();
    std::fwrite(json.data(), 1, json.size(), stdout);
    if (json.empty() || json.back() != '\n') std::fputc('\n', stdout);
    return std::fflush(stdout) == 0 ? kExitOk : PrintError("<stdout>: write failed");
  }

  // The outputs first: --auto can run for long.
  if (Status st = CheckWritableFile(args.output); !st.ok()) return PrintError(st.WithContext("-o"));
  if (!args.report.empty()) {
    if (Status st = CheckWritableFile(args.report); !st.ok()) return PrintError(st.WithContext("--report"));
  }
  StatusOr<ir::Model> model = importer::LoadModel(args.model);
  if (!model.ok()) return PrintError(model.status());
  const double load_seconds = SecondsSince(start);
  WarnAboutUnusedPolicyOps(args.policy, *model, "convert");

  std::vector<std::vector<ir::Tensor>> samples;
  for (const std::string& path : args.data) {
    if (Status s = ReadSamples(*model, path, samples); !s.ok()) return PrintError(s);
  }
  // A raise of the opset (bf16) is checked on the first sample set where there is one.
  if (!samples.empty()) options.upgrade_check.inputs = samples.front();

  const auto convert_start = Clock::now();
  // The range rules first: the nodes they keep are kept by name, in the plain conversion and in the auto mode's.
  converter::RangeRuleOptions rules = args.ranges;
  rules.num_threads = args.threads;
  std::vector<converter::KeptNode> ranged;
  if (!rules.empty()) {
    StatusOr<exec::SessionOptions> from_env = exec::CliSessionOptionsFromEnvironment();
    if (!from_env.ok()) return PrintError(from_env.status());
    rules.session = *from_env;
    StatusOr<std::vector<converter::KeptNode>> kept =
        converter::ApplyRangeRules(*model, options.policy, samples, rules);
    if (!kept.ok()) return PrintError(kept.status().WithContext(args.model));
    ranged = std::move(kept).value();
    for (const converter::KeptNode& k : ranged) options.policy.AddKeepNodeName(k.name);
  }
  converter::ConvertReport report;
  converter::AutoResult auto_result;
  if (args.auto_mode) {
    converter::AutoOptions auto_options;
    auto_options.rtol = args.rtol;
    auto_options.atol = args.atol;
    auto_options.num_threads = args.threads;
    StatusOr<exec::SessionOptions> from_env = exec::CliSessionOptionsFromEnvironment();
    if (!from_env.ok()) return PrintError(from_env.status());
    auto_options.session = *from_env;
    if (Status s = converter::AutoConvert(*model, samples, options, auto_options, &auto_result, &report); !s.ok()) {
      return PrintError(s.WithContext(args.model));
    }
    if (!auto_result.within_tolerance) {
      std::string worst;
      // An all-zero output is no matter of tolerance: with low-precision graph outputs, values below the target's
      // range (fp16 flushes |x| < 3e-8 to zero) are lost in the output itself.
      std::string hint = "loosen the tolerance or use --keep-io-types";
      for (const converter::OutputError& e : auto_result.errors) {
        if (e.nonfinite || e.all_zero || e.worst_excess > 0) {
          worst = StrCat("output '", e.name, "' max abs error ", Sci(e.max_abs), ", max rel ", Sci(e.max_rel),
                         e.below_atol ? StrCat(" against atol scaled to ", Sci(e.atol_used)) : std::string(),
                         e.nonfinite ? ", NaN/inf where FP32 is finite" : "",
                         e.all_zero ? StrCat(", all zero where FP32 is not (max |FP32| ", Sci(e.scale), ")") : "");
          if (e.all_zero) {
            hint = args.keep_io_types
                       ? "values flush to zero inside the model; keep more of it FP32 with --keep-node"
                       : StrCat(args.target, " graph outputs cannot hold these values: use --keep-io-types");
          }
          break;
        }
      }
      return PrintError(StrCat(args.model, ": --auto: rtol ", Sci(args.rtol), " / atol ", Sci(args.atol),
                               " not met even with every low-precision node kept FP32 (", worst, "); ", hint));
    }
  } else if (Status s = converter::ConvertModel(*model, options, &report); !s.ok()) {
    return PrintError(s.WithContext(args.model));
  }
  const double convert_seconds = SecondsSince(convert_start);

  importer::SaveOptions save;
  if (args.external_data == "always") {
    save.external_data = importer::ExternalDataMode::kAlways;
  } else if (args.external_data == "never") {
    save.external_data = importer::ExternalDataMode::kNever;
  } else {
    save.external_data = importer::ExternalDataMode::kAuto;
  }

  // The report first (atomically), then the model; the report is removed again if the model cannot be written.
  if (!args.report.empty()) {
    Json doc;
    doc["model"] = args.model;
    doc["output"] = args.output;
    Json conversion = Json::parse(report.ToJson(), nullptr, /*allow_exceptions=*/false);
    if (conversion.is_discarded()) conversion = report.ToJson();
    doc["conversion"] = std::move(conversion);
    if (args.auto_mode) {
      Json kept = Json::array();
      for (const converter::KeptNode& k : auto_result.kept) {
        kept.push_back({{"name", k.name}, {"op_type", k.op_type}, {"reason", k.reason}});
      }
      doc["auto"] = {{"rtol", args.rtol},
                     {"atol", args.atol},
                     {"sample_sets", samples.size()},
                     {"candidate_runs", auto_result.candidate_runs},
                     {"seconds", auto_result.seconds},
                     {"within_tolerance", auto_result.within_tolerance},
                     {"kept", std::move(kept)},
                     {"outputs", OutputErrorsJson(auto_result.errors)},
                     {"warnings", auto_result.warnings}};
    }
    if (!rules.empty()) {
      Json kept = Json::array();
      for (const converter::KeptNode& k : ranged) {
        kept.push_back({{"name", k.name}, {"op_type", k.op_type}, {"reason", k.reason}});
      }
      doc["range_rules"] = {{"init_max", rules.init_max},
                            {"data_max", rules.data_max},
                            {"max_reduction_depth", rules.max_reduction_depth},
                            {"sample_sets", samples.size()},
                            {"kept", std::move(kept)}};
    }
    doc["seconds"] = {{"load", load_seconds}, {"convert", convert_seconds}};
    const std::string text = doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
    if (Status s = WriteFileAtomic(args.report, text); !s.ok()) return PrintError(s);
  }
  const auto save_start = Clock::now();
  if (Status s = importer::SaveModel(*model, args.output, save); !s.ok()) {
    if (!args.report.empty()) {
      std::error_code ec;
      fs::remove(args.report, ec);
    }
    return PrintError(s);
  }
  const double save_seconds = SecondsSince(save_start);

  std::string summary = StrCat("convert: ", args.model, " -> ", args.output, " (", args.target,
                               args.keep_io_types ? ", FP32 inputs/outputs" : "", ")\n");
  std::string lines = report.Summary();
  if (!lines.empty() && lines.back() != '\n') lines += '\n';
  summary += lines;
  if (!rules.empty()) {
    summary += StrCat("range rules: ", ranged.size(), " node", ranged.size() == 1 ? "" : "s", " kept FP32\n");
    for (const converter::KeptNode& k : ranged) summary += StrCat("  ", k.name, " (", k.op_type, "): ", k.reason, "\n");
  }
  if (args.auto_mode) summary += AutoSummary(auto_result, args, samples.size());
  summary += StrCat("time: ", Fixed(SecondsSince(start), 3), " s (load ", Fixed(load_seconds, 3), " s, convert ",
                    Fixed(convert_seconds, 3), " s, save ", Fixed(save_seconds, 3), " s)\n");
  std::fputs(TerminalSafe(summary).c_str(), stderr);
  std::fflush(stderr);
  return kExitOk;
}

}  // namespace onnxamp::cli
