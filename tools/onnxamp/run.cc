// `onnxamp run MODEL --input NAME=FILE ... [--output-dir DIR] [--device cpu|cuda] [--device-index N] [--threads N]
// [--profile] [--labels [ARRAY=]FILE]`:
// runs a model on tensors read from .pb/.npy/.npz files, on the CPU runtime or the CUDA backend, and writes its
// outputs as output_<i>.pb TensorProtos; with --labels, also prints output 0's top-1 accuracy against class labels.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "importer/model_io.h"
#include "importer/tensor_file.h"
#include "runtime/common/file_util.h"
#include "runtime/common/half.h"
#include "runtime/executor/device_context.h"
#include "runtime/executor/profile.h"
#include "runtime/executor/session.h"
#include "runtime/executor/session_env.h"
#include "tools/onnxamp/cli_error.h"
#include "tools/onnxamp/commands.h"
#include "tools/onnxamp/inspect.h"
#include "trainer/autodiff/gradient_op.h"
#ifdef ONNXAMP_WITH_CUDA
#include "runtime/cuda/device.h"
#endif

namespace onnxamp::cli {
namespace {

namespace fs = std::filesystem;

std::string DimsToString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

// One tensor bound to a model input, and the file it came from.
struct BoundInput {
  ir::Tensor tensor;
  std::string file;
};

// Reads the tensors of one --input argument: "NAME=FILE" binds FILE's tensor to NAME (an .npz must hold one
// array, or one named NAME); a bare FILE binds each tensor it holds by its own name (.npz entries, a .pb's
// TensorProto name, an .npy's file stem).
Status ReadInputArg(const std::string& arg, std::vector<BoundInput>& out) {
  std::string name;
  std::string file = arg;
  const size_t eq = arg.find('=');
  std::error_code ec;
  // "NAME=FILE", unless the whole argument is an existing file whose name contains '='.
  if (eq != std::string::npos && !fs::is_regular_file(arg, ec)) {
    name = arg.substr(0, eq);
    file = arg.substr(eq + 1);
    if (name.empty()) return InvalidArgument("--input '", arg, "': the input name before '=' is empty");
    if (file.empty()) return InvalidArgument("--input '", arg, "': the file after '=' is empty");
  }
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> tensors, importer::ReadTensors(file));
  if (name.empty()) {
    for (ir::Tensor& t : tensors) {
      if (t.name().empty()) {
        return InvalidArgument(file, ": holds a tensor without a name; bind it with --input NAME=", file);
      }
      out.push_back({std::move(t), file});
    }
    return Status::Ok();
  }
  if (tensors.size() == 1) {
    tensors[0].set_name(name);
    out.push_back({std::move(tensors[0]), file});
    return Status::Ok();
  }
  for (ir::Tensor& t : tensors) {
    if (t.name() == name) {
      out.push_back({std::move(t), file});
      return Status::Ok();
    }
  }
  std::string names;
  for (const ir::Tensor& t : tensors) {
    if (!names.empty()) names += ", ";
    names += t.name();
  }
  return InvalidArgument(file, ": holds ", tensors.size(), " arrays (", names, "), none named '", name, "'");
}

// output_<i>.pb for each output; written one by one (each atomically). If one fails, those written before it
// by this run are removed, so the folder never holds a partial set of this run's outputs.
Status WriteOutputs(const std::vector<ir::Tensor>& outputs, const fs::path& dir, std::vector<std::string>* paths) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string path = (dir / ("output_" + std::to_string(i) + ".pb")).string();
    Status st = importer::WriteTensorFile(outputs[i], path);
    if (!st.ok()) {
      std::error_code ec;
      for (const std::string& p : *paths) fs::remove(p, ec);
      paths->clear();
      return st;
    }
    paths->push_back(path);
  }
  return Status::Ok();
}

// Element `i` of a floating-point tensor as a double.
double FloatAt(const ir::Tensor& t, size_t i) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return t.values<float>()[i];
    case DType::kFloat64:
      return t.values<double>()[i];
    case DType::kFloat16:
      return HalfBitsToFloat(t.values<uint16_t>()[i]);
    default:  // kBFloat16
      return BFloat16BitsToFloat(t.values<uint16_t>()[i]);
  }
}

// Element `i` of an integer tensor.
int64_t IntAt(const ir::Tensor& t, size_t i) {
  switch (t.dtype()) {
    case DType::kInt8:
      return t.values<int8_t>()[i];
    case DType::kUint8:
      return t.values<uint8_t>()[i];
    case DType::kInt16:
      return t.values<int16_t>()[i];
    case DType::kUint16:
      return t.values<uint16_t>()[i];
    case DType::kInt32:
      return t.values<int32_t>()[i];
    case DType::kUint32:
      return t.values<uint32_t>()[i];
    case DType::kUint64:
      return static_cast<int64_t>(t.values<uint64_t>()[i]);
    default:  // kInt64
      return t.values<int64_t>()[i];
  }
}

// "accuracy X% (C of N)": the argmax of `pred` over dim 1 ([N, classes, d...]) against `labels` ([N, d...], or as
// many values per sample in another shape such as [N, 1]; class indices in [0, classes); ties go to the lower class,
// as numpy's argmax). Positions labelled `ignore` count for nothing.
StatusOr<std::string> Accuracy(const ir::Tensor& pred, const ir::Tensor& labels, const std::string& labels_file,
                               std::optional<int64_t> ignore) {
  const DType p = pred.dtype();
  if (p != DType::kFloat32 && p != DType::kFloat64 && p != DType::kFloat16 && p != DType::kBFloat16) {
    return InvalidArgument("--labels: output 0 '", pred.name(), "' has dtype ", DTypeName(p),
                           "; accuracy needs floating-point scores");
  }
  if (!IsInteger(labels.dtype()) || IsSubByte(labels.dtype())) {
    return InvalidArgument("--labels ", labels_file, ": '", labels.name(), "' has dtype ", DTypeName(labels.dtype()),
                           ", expected integer class indices");
  }
  const std::vector<int64_t>& d = pred.dims();
  std::vector<int64_t> expected;
  if (d.size() >= 2) {
    expected.push_back(d[0]);
    expected.insert(expected.end(), d.begin() + 2, d.end());
  }
  int64_t expected_count = 1;
  for (int64_t v : expected) expected_count *= v;
  const bool same_count = !labels.dims().empty() && !expected.empty() && labels.dims()[0] == expected[0] &&
                          labels.num_elements() == expected_count;
  if (d.size() < 2 || (labels.dims() != expected && !same_count)) {
    return InvalidArgument("--labels ", labels_file, ": '", labels.name(), "' has shape ", DimsToString(labels.dims()),
                           ", but output 0 '", pred.name(), "' of shape ", DimsToString(d), " needs ",
                           d.size() < 2 ? "a class dim 1" : DimsToString(expected));
  }
  const int64_t classes = d[1];
  const int64_t inner = labels.num_elements() / std::max<int64_t>(d[0], 1);
  int64_t correct = 0, ignored = 0;
  for (int64_t o = 0; o < d[0]; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t label = IntAt(labels, static_cast<size_t>(o * inner + i));
      if (ignore && label == *ignore) {
        ++ignored;
        continue;
      }
      if (label < 0 || label >= classes) {
        return OutOfRange("--labels ", labels_file, ": '", labels.name(), "' has ", label, " at row ", o,
                          ", outside the ", classes, " classes [0, ", classes, ") of output 0 '", pred.name(), "'",
                          ignore ? StrCat(" and not the --ignore-index ", *ignore) : std::string());
      }
      // numpy's argmax: the first NaN wins (a diverged model's NaN scores predict class 0 for all-NaN rows).
      int64_t best = 0;
      double best_value = FloatAt(pred, static_cast<size_t>(o * classes * inner + i));
      for (int64_t c = 1; c < classes && !std::isnan(best_value); ++c) {
        const double v = FloatAt(pred, static_cast<size_t>((o * classes + c) * inner + i));
        if (v > best_value || std::isnan(v)) {
          best = c;
          best_value = v;
        }
      }
      correct += best == label;
    }
  }
  const int64_t n = labels.num_elements() - ignored;
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.6g", n ? 100.0 * static_cast<double>(correct) / static_cast<double>(n) : 0.0);
  return StrCat("accuracy ", pct, "% (", correct, " of ", n, ignored ? StrCat(", ", ignored, " ignored") : "", ")");
}

std::string Milliseconds(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f ms", seconds * 1000);
  return buf;
}

// The summary lines a device run adds: where the nodes ran, device time and memory, and the copies made.
std::string DeviceSummary(const exec::Session& session, const exec::RunStats& stats, double wall_seconds) {
  std::string s = StrCat("  device ", session.DescribePlacement(), "\n");
  const std::vector<std::string>& on_cpu = session.placement().on_cpu;
  if (!on_cpu.empty()) {
    s += StrCat("  nodes on the CPU (", on_cpu.size(), "):");
    for (size_t i = 0; i < on_cpu.size(); ++i) s += StrCat(i ? ", " : " ", on_cpu[i]);
    s += "\n";
  }
  s += StrCat("  time ", Milliseconds(wall_seconds), " (wall, copies included), device time ",
              Milliseconds(stats.device_seconds), ", peak device memory ", tools::FormatBytes(stats.device_peak_bytes),
              "\n");
  s += StrCat("  copies ", tools::FormatBytes(stats.host_to_device_bytes), " to the device, ",
              tools::FormatBytes(stats.device_to_host_bytes), " back; ", stats.device_allocations, " device allocation",
              stats.device_allocations == 1 ? "" : "s", "\n");
  return s;
}

}  // namespace

// Why `--device cuda` cannot run in this process, or "" when it can. main() registers the CUDA backend when the
// build has one and a usable device is present.
std::string CudaUnavailableReason() {
#ifdef ONNXAMP_WITH_CUDA
  if (exec::FindDeviceBackend(exec::Device::kCuda) != nullptr) return "";
  const std::string devices = cuda::DescribeCudaDevices();  // "no CUDA device (<why>)" when there is none
  if (devices.rfind("no CUDA device", 0) == 0) return devices;
  return StrCat("the CUDA backend could not use the devices found (", devices, ")");
#else
  return "this build has no CUDA backend";
#endif
}

CLI::App* AddRunCommand(CLI::App& app, RunArgs& args) {
  CLI::App* cmd = app.add_subcommand("run", "Run a model on input tensors and write its outputs");
  cmd->add_option("MODEL", args.model, "ONNX model file")->required();
  cmd->add_option("-i,--input", args.inputs,
                  "NAME=FILE binds a tensor file (.pb, .npy, .npz) to the model input NAME; a bare FILE binds "
                  "every tensor it holds by its own name (the arrays of an .npz)");
  cmd->add_option("--output-dir", args.output_dir, "Existing folder that receives output_<i>.pb")
      ->capture_default_str();
  cmd->add_option("--device", args.device,
                  "Where to run: the CPU runtime, or the CUDA backend (ops without a CUDA "
                  "kernel run on the CPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--device-index", args.device_index, "With --device cuda: which CUDA device")
      ->check(WholeNumber(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--threads", args.threads, "Threads of the CPU runtime (0: one per hardware thread)")
      ->check(WholeNumber(0, kMaxThreads))
      ->capture_default_str();
  cmd->add_flag("--profile", args.profile,
                "Run the model a second time (the first run plans memory) timing every node (device nodes with "
                "events on the stream) and print time by op type and the slowest nodes");
  cmd->add_option("--labels", args.labels,
                  "[ARRAY=]FILE: integer class labels [N, ...] (an .npz's array ARRAY, or a file's one tensor); "
                  "prints the top-1 accuracy of output 0 (argmax over dim 1)");
  cmd->add_option("--ignore-index", args.ignore_index,
                  "With --labels: positions with this label count for nothing (-100 marks padding in PyTorch)")
      ->check(WholeNumber(std::numeric_limits<int64_t>::min()));
  return cmd;
}

int RunRun(const RunArgs& args) {
  if (args.ignore_index && args.labels.empty()) return PrintUsageError("--ignore-index needs --labels", "run");
  std::error_code ec;
  if (!fs::is_directory(args.output_dir, ec)) {
    return PrintError(StrCat("--output-dir ", args.output_dir, ": ",
                             fs::exists(args.output_dir, ec) ? "not a folder" : "no such folder"));
  }
  if (Status st = CheckWritableFolder(args.output_dir); !st.ok()) return PrintError(st.WithContext("--output-dir"));
  StatusOr<exec::SessionOptions> from_env = exec::CliSessionOptionsFromEnvironment();
  if (!from_env.ok()) return PrintError(from_env.status().message());
  exec::SessionOptions options = *from_env;
  options.device = args.device == "cuda" ? exec::Device::kCuda : exec::Device::kCpu;
  options.num_threads = args.threads;
  if (options.device == exec::Device::kCuda) {
    if (const std::string why = CudaUnavailableReason(); !why.empty()) return PrintError("--device cuda: " + why);
    options.device_index = args.device_index;
    options.time_device = true;
  }

  std::vector<BoundInput> bound;
  for (const std::string& arg : args.inputs) {
    if (Status st = ReadInputArg(arg, bound); !st.ok()) return PrintError(st);
  }
  std::vector<BoundInput> labels;
  if (!args.labels.empty()) {
    if (Status st = ReadInputArg(args.labels, labels); !st.ok()) return PrintError(st.WithContext("--labels"));
    if (labels.size() != 1) {
      return PrintError(StrCat("--labels ", args.labels, ": holds ", labels.size(),
                               " arrays; name the one with the labels: --labels ARRAY=FILE"));
    }
  }
  std::set<std::string> seen;
  for (const BoundInput& b : bound) {
    if (!seen.insert(b.tensor.name()).second) {
      return PrintError(StrCat("input '", b.tensor.name(), "' is given more than once (last from ", b.file, ")"));
    }
  }

  StatusOr<ir::Model> model = importer::LoadModel(args.model);
  if (!model.ok()) return PrintError(model.status());
  // ONNX's Gradient operator (ai.onnx.preview.training) runs as the backward pass the autodiff writes for it.
  if (StatusOr<int> expanded = trainer::ExpandGradientOps(*model); !expanded.ok()) {
    return PrintError(expanded.status().WithContext(args.model));
  }
  StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(std::move(model).value(), options);
  if (!session.ok()) return PrintError(session.status().WithContext(args.model));

  std::vector<ir::Tensor> inputs;
  for (const BoundInput& b : bound) inputs.push_back(b.tensor);
  exec::RunStats stats;
  const auto start = std::chrono::steady_clock::now();
  StatusOr<std::vector<ir::Tensor>> outputs = (*session)->Run(inputs, &stats);
  const double wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!outputs.ok()) return PrintError(outputs.status().WithContext(args.model));

  // Scored before anything is written, so that a labels error leaves no outputs behind.
  std::string accuracy_line;
  if (!labels.empty()) {
    if (outputs->empty()) return PrintError(StrCat("--labels: ", args.model, " has no outputs"));
    StatusOr<std::string> accuracy = Accuracy((*outputs)[0], labels[0].tensor, labels[0].file, args.ignore_index);
    if (!accuracy.ok()) return PrintError(accuracy.status());
    accuracy_line = StrCat("  ", *accuracy, ": argmax of output 0 over dim 1 against '", labels[0].tensor.name(),
                           "' from ", labels[0].file, "\n");
  }

  std::vector<std::string> paths;
  if (Status st = WriteOutputs(*outputs, fs::path(args.output_dir), &paths); !st.ok()) return PrintError(st);

  std::string summary = StrCat("run: ", args.model, " on ", args.device, ", ", outputs->size(), " output",
                               outputs->size() == 1 ? "" : "s", "\n");
  for (const BoundInput& b : bound) {
    summary += StrCat("  input  '", b.tensor.name(), "' ", DTypeName(b.tensor.dtype()), " ",
                      DimsToString(b.tensor.dims()), " from ", b.file, "\n");
  }
  for (size_t i = 0; i < outputs->size(); ++i) {
    const ir::Tensor& t = (*outputs)[i];
    summary +=
        StrCat("  output '", t.name(), "' ", DTypeName(t.dtype()), " ", DimsToString(t.dims()), " -> ", paths[i], "\n");
  }
  if (options.device == exec::Device::kCpu) {
    summary += StrCat("  time ", Milliseconds(stats.seconds), ", peak memory ", tools::FormatBytes(stats.peak_bytes),
                      " (intermediate values and outputs)\n");
  } else {
    summary += DeviceSummary(**session, stats, wall_seconds);
  }
  summary += accuracy_line;
  if (args.profile) {
    exec::RunOptions run;
    run.profile = true;
    exec::RunStats profiled;
    StatusOr<std::vector<ir::Tensor>> again = (*session)->Run(inputs, run, &profiled);
    if (!again.ok()) return PrintError(again.status().WithContext(StrCat(args.model, " (profiled run)")));
    summary += StrCat("  second run ", Milliseconds(profiled.seconds), " (wall), profiled:\n");
    summary += exec::FormatProfile(profiled.nodes);
  }
  std::fputs(TerminalSafe(summary).c_str(), stderr);
  return kExitOk;
}

}  // namespace onnxamp::cli
