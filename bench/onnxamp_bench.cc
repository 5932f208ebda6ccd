// onnxamp_bench: times Session::Run of one model on the CPU runtime or the CUDA backend after warm-up runs, and
// prints the figures as one JSON object (the benchmark drivers bench_inference.py and bench_cuda.py read it).
//
//   onnxamp_bench MODEL [--input NAME=FILE]... [--batch N] [--threads N] [--warmup N] [--iters N]
//                 [--max-seconds S] [--output-dir DIR] [--device cpu|cuda] [--device-index N] [--profile]
//
// With --device cuda there are two timed phases. End to end: wall time around Session::Run from host inputs to host
// outputs (the copies are included and the run has finished when Run returns), and the device time the session
// measures with events on its stream (RunStats::device_seconds, copies included). Resident: the inputs are uploaded
// once (Session::ToDevice) and runs leave their outputs on the device (RunOptions::outputs_on_device), so
// `resident_median_ms` (wall, Run waits for the device) and `resident_device_median_ms` (events) are the model's
// compute alone, as a framework's forward pass on device tensors is timed. The JSON also gives the device's peak
// memory during a run. --profile adds one more run timing every node (events per device node) to the JSON
// ("profile"; the nodes of If, Loop and Scan bodies, every call, with "within" naming the enclosing nodes) and prints
// the table of time by op type on stderr.
// Inputs not given with --input are generated (seeded): floats uniform in [-1, 1), integers in [0, --int-high),
// symbolic dims bound to --batch. With --output-dir, the outputs of the last run are written there as
// output_<i>.npy. Exit status: 0 success, 1 failure (one "error: " line on stderr), 2 usage error.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "importer/model_io.h"
#include "importer/tensor_file.h"
#include "runtime/common/file_util.h"
#include "runtime/common/half.h"
#include "runtime/executor/profile.h"
#include "runtime/executor/session.h"
#include "runtime/executor/session_env.h"
#ifdef ONNXAMP_WITH_CUDA
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/device.h"
#endif

namespace onnxamp::bench {
namespace {

struct Args {
  std::string model;
  std::vector<std::string> inputs;
  int64_t batch = 1;
  int threads = 0;
  int warmup = 2;
  int iters = 20;
  double max_seconds = 10;
  int64_t int_high = 100;
  std::string output_dir;
  std::string device = "cpu";
  int device_index = 0;
  bool profile = false;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

// A tensor for graph input `io`: symbolic and unknown dims take `batch`.
StatusOr<ir::Tensor> Generate(const exec::IoInfo& io, int64_t batch, int64_t int_high, uint64_t seed) {
  if (!io.type.is_tensor() || !io.type.shape()) {
    return InvalidArgument("input '", io.name, "' has no tensor shape to generate data for; give it with --input");
  }
  std::vector<int64_t> dims;
  for (const ir::Dim& d : *io.type.shape()) dims.push_back(d.is_value() ? d.value : batch);
  const DType dt = io.type.elem_type();
  ir::Tensor t(dt, dims);
  t.set_name(io.name);
  uint64_t state = seed;
  auto next = [&state] {  // splitmix64
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = next();
    const float f = static_cast<float>(static_cast<double>(r >> 11) / static_cast<double>(1ull << 53) * 2 - 1);
    switch (dt) {
      case DType::kFloat32:
        t.mutable_values<float>()[i] = f;
        break;
      case DType::kFloat64:
        t.mutable_values<double>()[i] = f;
        break;
      case DType::kFloat16:
        t.mutable_values<uint16_t>()[i] = FloatToHalfBits(f);
        break;
      case DType::kBFloat16:
        t.mutable_values<uint16_t>()[i] = FloatToBFloat16Bits(f);
        break;
      case DType::kInt64:
        t.mutable_values<int64_t>()[i] = static_cast<int64_t>(r % static_cast<uint64_t>(int_high));
        break;
      case DType::kInt32:
        t.mutable_values<int32_t>()[i] = static_cast<int32_t>(r % static_cast<uint64_t>(int_high));
        break;
      default:
        return Unimplemented("input '", io.name, "': cannot generate ", DTypeName(dt), " data; give it with --input");
    }
  }
  return t;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Registers the CUDA backend; "" when it is usable, else why not.
std::string PrepareCuda() {
#ifdef ONNXAMP_WITH_CUDA
  return cuda::RegisterCudaBackend() ? "" : cuda::DescribeCudaDevices();
#else
  return "this build has no CUDA backend";
#endif
}

int Run(const Args& args) {
  using Clock = std::chrono::steady_clock;
  const bool on_device = args.device == "cuda";
  if (on_device) {
    if (const std::string why = PrepareCuda(); !why.empty()) return Fail("--device cuda: " + why);
  }
  const auto t0 = Clock::now();
  StatusOr<ir::Model> model = importer::LoadModel(args.model);
  if (!model.ok()) return Fail(model.status().message());
  StatusOr<exec::SessionOptions> from_env = exec::CliSessionOptionsFromEnvironment();
  if (!from_env.ok()) return Fail(from_env.status().message());
  exec::SessionOptions options = *from_env;
  options.num_threads = args.threads;
  if (on_device) {
    options.device = exec::Device::kCuda;
    options.device_index = args.device_index;
    options.time_device = true;
  }
  StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(std::move(model).value(), options);
  if (!session.ok()) return Fail(StrCat(args.model, ": ", session.status().message()));
  const double create_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  std::vector<ir::Tensor> inputs;
  for (const std::string& arg : args.inputs) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) return Fail(StrCat("--input '", arg, "': expected NAME=FILE"));
    StatusOr<ir::Tensor> t = importer::ReadTensorFile(arg.substr(eq + 1));
    if (!t.ok()) return Fail(t.status().message());
    t->set_name(arg.substr(0, eq));
    inputs.push_back(std::move(t).value());
  }
  uint64_t seed = 1;
  for (const exec::IoInfo& io : (*session)->inputs()) {
    const bool given =
        std::any_of(inputs.begin(), inputs.end(), [&](const ir::Tensor& t) { return t.name() == io.name; });
    if (given || io.has_default) continue;
    StatusOr<ir::Tensor> t = Generate(io, args.batch, args.int_high, seed++);
    if (!t.ok()) return Fail(t.status().message());
    inputs.push_back(std::move(t).value());
  }

  // The first run plans memory for these shapes; the runs after it reuse the plan.
  std::vector<double> warmup_ms;
  std::vector<double> times_ms;
  std::vector<double> device_ms;  // device runs: RunStats::device_seconds of each timed run
  exec::RunStats stats;
  std::vector<ir::Tensor> outputs;
  Status run_status;
  auto run_once = [&](std::vector<double>& into) -> bool {
    const auto s = Clock::now();
    StatusOr<std::vector<ir::Tensor>> result = (*session)->Run(inputs, &stats);
    into.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
    if (&into == &times_ms && on_device) device_ms.push_back(stats.device_seconds * 1000);
    if (!result.ok()) {
      run_status = result.status();
      return false;
    }
    outputs = std::move(result).value();
    return true;
  };
  const auto warmup_start = Clock::now();
  for (int i = 0; i < args.warmup; ++i) {
    if (!run_once(warmup_ms)) return Fail(StrCat(args.model, ": ", run_status.message()));
    if (std::chrono::duration<double>(Clock::now() - warmup_start).count() > args.max_seconds / 2) break;
  }
  const auto timed_start = Clock::now();
  for (int i = 0; i < args.iters; ++i) {
    if (!run_once(times_ms)) return Fail(StrCat(args.model, ": ", run_status.message()));
    if (std::chrono::duration<double>(Clock::now() - timed_start).count() > args.max_seconds) break;
  }

  // Device-resident phase: inputs uploaded once, outputs left on the device, Run still waits for the device.
  std::vector<double> resident_ms, resident_device_ms;
  if (on_device) {
    std::vector<ir::Tensor> resident_inputs;
    for (const ir::Tensor& t : inputs) {
      StatusOr<ir::Tensor> d = (*session)->ToDevice(t);
      if (!d.ok()) return Fail(StrCat(args.model, ": ", d.status().message()));
      resident_inputs.push_back(std::move(d).value());
    }
    exec::RunOptions resident;
    resident.outputs_on_device = true;
    auto resident_run = [&](bool timed) -> bool {
      const auto s = Clock::now();
      StatusOr<std::vector<ir::Tensor>> result = (*session)->Run(resident_inputs, resident, &stats);
      if (!result.ok()) {
        run_status = result.status();
        return false;
      }
      if (timed) {
        resident_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
        resident_device_ms.push_back(stats.device_seconds * 1000);
      }
      return true;
    };
    for (int i = 0; i < std::min(args.warmup, 3); ++i) {
      if (!resident_run(false)) return Fail(StrCat(args.model, ": ", run_status.message()));
    }
    const auto resident_start = Clock::now();
    for (int i = 0; i < args.iters; ++i) {
      if (!resident_run(true)) return Fail(StrCat(args.model, ": ", run_status.message()));
      if (std::chrono::duration<double>(Clock::now() - resident_start).count() > args.max_seconds) break;
    }
    if (args.profile) inputs = std::move(resident_inputs);  // profile the compute, not the uploads
  }
  exec::RunStats profiled;
  if (args.profile) {
    exec::RunOptions run;
    run.profile = true;
    run.outputs_on_device = on_device;
    StatusOr<std::vector<ir::Tensor>> result = (*session)->Run(inputs, run, &profiled);
    if (!result.ok()) return Fail(StrCat(args.model, " (profiled run): ", result.status().message()));
    std::fputs(exec::FormatProfile(profiled.nodes, 15).c_str(), stderr);
  }

  if (!args.output_dir.empty()) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string path = (std::filesystem::path(args.output_dir) / StrCat("output_", i, ".npy")).string();
      if (Status st = importer::WriteTensorFile(outputs[i], path); !st.ok()) return Fail(st.message());
    }
  }

  nlohmann::ordered_json j;
  j["model"] = args.model;
  j["device"] = args.device;
  j["threads"] = args.threads;
  j["session_create_ms"] = create_ms;
  j["first_ms"] = warmup_ms.empty() ? times_ms.front() : warmup_ms.front();
  j["iters"] = times_ms.size();
  j["median_ms"] = Median(times_ms);
  j["min_ms"] = *std::min_element(times_ms.begin(), times_ms.end());
  j["mean_ms"] = std::accumulate(times_ms.begin(), times_ms.end(), 0.0) / static_cast<double>(times_ms.size());
  j["peak_bytes"] = stats.peak_bytes;
  j["arena_bytes"] = stats.arena_bytes;
  j["planned"] = stats.planned;
  j["peak_rss_bytes"] = PeakResidentBytes();
  if (on_device) {
    j["placement"] = (*session)->DescribePlacement();
    j["cpu_nodes"] = (*session)->placement().on_cpu.size();
    j["device_median_ms"] = Median(device_ms);
    j["device_min_ms"] = *std::min_element(device_ms.begin(), device_ms.end());
    j["device_peak_bytes"] = stats.device_peak_bytes;  // of the last run
    j["device_allocations"] = stats.device_allocations;
    j["host_to_device_bytes"] = stats.host_to_device_bytes;
    j["device_to_host_bytes"] = stats.device_to_host_bytes;
    j["resident_iters"] = resident_ms.size();
    j["resident_median_ms"] = Median(resident_ms);
    j["resident_min_ms"] = *std::min_element(resident_ms.begin(), resident_ms.end());
    j["resident_device_median_ms"] = Median(resident_device_ms);
    j["resident_device_min_ms"] = *std::min_element(resident_device_ms.begin(), resident_device_ms.end());
  }
  if (args.profile) {
    nlohmann::ordered_json prof = nlohmann::ordered_json::array();
    for (const exec::NodeTime& n : profiled.nodes) {
      nlohmann::ordered_json e = {
          {"node", n.node}, {"op", n.op_type}, {"device", n.on_device}, {"ms", n.seconds * 1e3}};
      if (!n.within.empty()) e["within"] = n.within;  // a subgraph's node, its time inside the enclosing node's
      prof.push_back(std::move(e));
    }
    j["profile"] = prof;
  }
  nlohmann::ordered_json outs = nlohmann::ordered_json::array();
  for (const ir::Tensor& t : outputs) {
    outs.push_back({{"name", t.name()}, {"dtype", std::string(DTypeName(t.dtype()))}, {"dims", t.dims()}});
  }
  j["outputs"] = outs;
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int Main(int argc, char** argv) {
  Args args;
  CLI::App app{"Times Session::Run of one model on the onnxamp CPU runtime or CUDA backend", "onnxamp_bench"};
  app.add_option("MODEL", args.model, "ONNX model file")->required();
  app.add_option("-i,--input", args.inputs, "NAME=FILE (.pb or .npy); other inputs are generated");
  app.add_option("--batch", args.batch, "Size of symbolic dims of generated inputs")->check(CLI::PositiveNumber);
  app.add_option("--threads", args.threads, "Runtime threads (0: one per hardware thread)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--warmup", args.warmup, "Untimed runs first (the first one plans memory)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--iters", args.iters, "Timed runs")->check(CLI::PositiveNumber);
  app.add_option("--max-seconds", args.max_seconds, "Stop early after this long (at least one timed run)")
      ->check(CLI::PositiveNumber);
  app.add_option("--int-high", args.int_high, "Generated integers are in [0, this)")->check(CLI::PositiveNumber);
  app.add_option("--output-dir", args.output_dir, "Write the last run's outputs here as output_<i>.npy");
  app.add_option("--device", args.device, "cpu, or cuda (also reports device time and device peak memory)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--device-index", args.device_index, "With --device cuda: which CUDA device")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--profile", args.profile,
               "One more run timing every node (device nodes with events): JSON \"profile\", table on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "error: %s (see 'onnxamp_bench --help')\n", e.what());
    return 2;
  }
  return Run(args);
}

}  // namespace
}  // namespace onnxamp::bench

int main(int argc, char** argv) { return onnxamp::bench::Main(argc, argv); }
