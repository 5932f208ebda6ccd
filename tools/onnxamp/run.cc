// `onnxamp run MODEL --input NAME=FILE ... [--output-dir DIR] [--device cpu|cuda] [--device-index N] [--threads N]`:
// runs a model on tensors read from .pb/.npy/.npz files, on the CPU runtime or the CUDA backend, and writes its
// outputs as output_<i>.pb TensorProtos.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "importer/model_io.h"
#include "importer/tensor_file.h"
#include "runtime/executor/device_context.h"
#include "runtime/executor/session.h"
#include "tools/onnxamp/cli_error.h"
#include "tools/onnxamp/commands.h"
#include "tools/onnxamp/inspect.h"
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

std::string Milliseconds(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f ms", seconds * 1000);
  return buf;
}

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
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--threads", args.threads, "Threads of the CPU runtime (0: one per hardware thread)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  return cmd;
}

int RunRun(const RunArgs& args) {
  std::error_code ec;
  if (!fs::is_directory(args.output_dir, ec)) {
    return PrintError(StrCat("--output-dir ", args.output_dir, ": ",
                             fs::exists(args.output_dir, ec) ? "not a folder" : "no such folder"));
  }
  exec::SessionOptions options;
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
  std::set<std::string> seen;
  for (const BoundInput& b : bound) {
    if (!seen.insert(b.tensor.name()).second) {
      return PrintError(StrCat("input '", b.tensor.name(), "' is given more than once (last from ", b.file, ")"));
    }
  }

  StatusOr<ir::Model> model = importer::LoadModel(args.model);
  if (!model.ok()) return PrintError(model.status());
  StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(std::move(model).value(), options);
  if (!session.ok()) return PrintError(session.status().WithContext(args.model));

  std::vector<ir::Tensor> inputs;
  for (const BoundInput& b : bound) inputs.push_back(b.tensor);
  exec::RunStats stats;
  const auto start = std::chrono::steady_clock::now();
  StatusOr<std::vector<ir::Tensor>> outputs = (*session)->Run(inputs, &stats);
  const double wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!outputs.ok()) return PrintError(outputs.status().WithContext(args.model));

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
  std::fputs(summary.c_str(), stderr);
  return kExitOk;
}

}  // namespace onnxamp::cli
