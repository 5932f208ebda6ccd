// SaveCheckpoint / LoadCheckpoint / ResumeTrainer: the trainer's state in safetensors and JSON, written through a
// temporary folder and renames.
#include "trainer/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "runtime/common/file_util.h"
#include "trainer/checkpoint/safetensors.h"

namespace onnxamp::trainer {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr char kFormat[] = "onnxamp.checkpoint";
constexpr int kVersion = 1;
constexpr char kLatest[] = "latest";
constexpr char kModelFile[] = "model.onnx";
constexpr char kStateFile[] = "state.safetensors";
constexpr char kTrainerFile[] = "trainer.json";
constexpr char kOptimPrefix[] = "optim.";
constexpr uint64_t kMaxJsonBytes = 64u << 20;

std::function<Status(const std::string&)>& WriteHook() {
  static std::function<Status(const std::string&)> hook;
  return hook;
}

std::string StepName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

// The step of a folder named "step-<digits>", or -1.
int64_t StepOf(const std::string& name) {
  if (name.size() < 6 || name.compare(0, 5, "step-") != 0 || name.size() > 5 + 18) return -1;
  int64_t v = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

std::string ErrnoText(int err) { return std::strerror(err); }

// Writes a new file `path` and flushes it to the disk. The test hook sees `final_path`, the name it will have.
Status WriteFlushed(const std::string& path, std::string_view data, const std::string& final_path) {
  if (WriteHook()) ONNXAMP_RETURN_IF_ERROR(WriteHook()(final_path));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(final_path, ": cannot create: ", ErrnoText(errno));
  Status st = WriteAll(fd, data, final_path);
  if (st.ok() && ::fsync(fd) != 0) st = IoError(final_path, ": flush failed: ", ErrnoText(errno));
  if (::close(fd) != 0 && st.ok()) st = IoError(final_path, ": close failed: ", ErrnoText(errno));
  return st;
}

void FlushFolder(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

const char* ScaleModeName(LossScaleMode m) {
  switch (m) {
    case LossScaleMode::kDynamic:
      return "dynamic";
    case LossScaleMode::kStatic:
      return "static";
    case LossScaleMode::kDisabled:
      return "disabled";
  }
  return "?";
}

// The options as given (before the trainer fills in derived values), by their CLI names where there is one.
ordered_json OptionsJson(const TrainerOptions& o) {
  ordered_json j;
  j["loss"] = LossKindName(o.graph.loss.kind);
  j["output"] = o.graph.loss.output;
  j["class_axis"] = o.graph.loss.class_axis;
  j["ignore_index"] = o.graph.loss.ignore_index;
  j["amp"] = o.graph.amp == DType::kUndefined ? "off" : std::string(DTypeName(o.graph.amp));
  j["freeze"] = o.graph.freeze;
  j["optimizer"] = OptimizerKindName(o.optimizer);
  j["momentum"] = o.sgd.momentum;
  j["dampening"] = o.sgd.dampening;
  j["sgd_weight_decay"] = o.sgd.weight_decay;
  j["nesterov"] = o.sgd.nesterov;
  j["beta1"] = o.adam.beta1;
  j["beta2"] = o.adam.beta2;
  j["eps"] = o.adam.eps;
  j["adam_weight_decay"] = o.adam.weight_decay;
  j["amsgrad"] = o.adam.amsgrad;
  j["schedule"] = LrScheduleKindName(o.schedule.kind);
  j["lr"] = o.schedule.base_lr;
  j["step_size"] = o.schedule.step_size;
  j["gamma"] = o.schedule.gamma;
  j["schedule_total_steps"] = o.schedule.total_steps;
  j["min_lr"] = o.schedule.min_lr;
  j["warmup"] = o.schedule.warmup_steps;
  j["warmup_start_factor"] = o.schedule.warmup_start_factor;
  j["loss_scale_mode"] = ScaleModeName(o.scaler.mode);
  j["init_scale"] = o.scaler.init_scale;
  j["growth_factor"] = o.scaler.growth_factor;
  j["backoff_factor"] = o.scaler.backoff_factor;
  j["growth_interval"] = o.scaler.growth_interval;
  j["min_loss_scale"] = o.scaler.min_scale;
  j["batch_size"] = o.batch_size;
  j["last_batch"] = std::string(LastBatchName(o.last_batch));
  j["epochs"] = o.epochs;
  j["steps"] = o.steps;
  j["accumulate"] = o.accumulate;
  j["clip_norm"] = o.clip_norm;
  j["seed"] = o.seed;
  j["shuffle"] = o.shuffle;
  j["threads"] = o.threads;
  return j;
}

// Options a resumed run may change: the run's length, and the thread count (a warning, see ResumeTrainer).
bool MayChangeOnResume(const std::string& key) { return key == "steps" || key == "epochs" || key == "threads"; }

int ResolvedThreads(int threads) {
  if (threads > 0) return threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

uint64_t Fnv1a64Update(uint64_t h, std::string_view s) {
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string Hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

}  // namespace

std::string CheckpointDataHash(const Dataset& data) {
  uint64_t h = 0xcbf29ce484222325ull;
  // The samples' bytes in order (through a view's rows), read in runs: a mapped file is not kept in memory.
  for (size_t k = 0; k < data.arrays().size(); ++k) {
    const ir::Tensor& t = data.arrays()[k];
    std::string head = StrCat(t.name(), "|", DTypeName(t.dtype()), "|");
    for (size_t i = 0; i < t.dims().size(); ++i) head += StrCat(i == 0 ? data.num_samples() : t.dims()[i], ",");
    h = Fnv1a64Update(h, head);
    data.ForEachRun(k, [&](std::span<const std::byte> bytes) {
      h = Fnv1a64Update(h, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    });
  }
  return Hex(h);
}

namespace {

// Reads `key` of JSON object `j` as type T; errors name the file and the key.
template <typename T>
StatusOr<T> Get(const nlohmann::json& j, const char* key, const std::string& what) {
  if (!j.is_object() || !j.contains(key)) return InvalidArgument(what, ": missing \"", key, "\"");
  const nlohmann::json& v = j[key];
  bool ok = false;
  if constexpr (std::is_same_v<T, bool>) {
    ok = v.is_boolean();
  } else if constexpr (std::is_same_v<T, std::string>) {
    ok = v.is_string();
  } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
    ok = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
  } else if constexpr (std::is_integral_v<T>) {
    ok = v.is_number_integer() &&
         (v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX) : true);
  } else if constexpr (std::is_floating_point_v<T>) {
    ok = v.is_number();
  } else {
    ok = true;
  }
  if (!ok) return InvalidArgument(what, ": \"", key, "\" has the wrong type");
  return v.get<T>();
}

// Best effort: what cannot be removed is left behind (the next save's pruning tries again).
void RemoveTree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

// Keeps the newest `keep` step folders of `dir` (never `current`).
void Prune(const std::string& dir, int64_t keep, const std::string& current) {
  std::vector<std::pair<int64_t, std::string>> steps;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const int64_t step = StepOf(name);
    if (step >= 0 && e.is_directory(ec)) steps.emplace_back(step, name);
  }
  std::sort(steps.begin(), steps.end());
  const int64_t excess = static_cast<int64_t>(steps.size()) - keep;
  for (int64_t i = 0; i < excess; ++i) {
    if (steps[static_cast<size_t>(i)].second == current) continue;
    RemoveTree((fs::path(dir) / steps[static_cast<size_t>(i)].second).string());
  }
}

}  // namespace

std::string Fnv1a64Hex(std::string_view bytes) { return Hex(Fnv1a64Update(0xcbf29ce484222325ull, bytes)); }

void SetCheckpointWriteHookForTesting(std::function<Status(const std::string& path)> hook) {
  WriteHook() = std::move(hook);
}

StatusOr<std::string> SaveCheckpoint(const std::string& dir, const Trainer& trainer, const CheckpointModel& model,
                                     int64_t keep) {
  const TrainerState state = trainer.State();
  const TrainingGraphs& graphs = trainer.graphs();
  const TrainerOptions& options = trainer.options();

  // Tensors: parameters, optimizer state, buffers.
  std::vector<ir::Tensor> tensors = state.params;
  for (const auto& [name, per_param] : state.optimizer_state) {
    for (const ir::Tensor& t : per_param) {
      ir::Tensor named = t;
      named.set_name(StrCat(kOptimPrefix, name, ".", t.name()));
      tensors.push_back(std::move(named));
    }
  }
  for (const ir::Tensor& b : state.buffers) tensors.push_back(b);
  std::map<std::string, std::string> metadata = {{"format", kFormat}, {"step", StrCat(state.steps_done)}};
  StatusOr<std::string> st_bytes = SerializeSafetensors(tensors, metadata);
  if (!st_bytes.ok()) return st_bytes.status().WithContext(StrCat("checkpoint ", dir));

  ordered_json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["step"] = state.steps_done;
  j["model"] = {{"file", kModelFile},
                {"bytes", model.bytes.size()},
                {"fnv1a64", Fnv1a64Hex(model.bytes)},
                {"source", model.source}};
  j["state"] = {{"file", kStateFile}, {"bytes", st_bytes->size()}, {"fnv1a64", Fnv1a64Hex(*st_bytes)}};
  j["counters"] = {{"steps_done", state.steps_done},
                   {"steps_taken", state.steps_taken},
                   {"skipped", state.skipped},
                   {"rng_step", state.rng_step}};
  j["sampler"] = {{"epoch", state.cursor.epoch},
                  {"position", state.cursor.position},
                  {"seed", options.seed},
                  {"shuffle", options.shuffle},
                  {"batch_size", options.batch_size},
                  {"last_batch", std::string(LastBatchName(options.last_batch))},
                  {"epoch_seed", options.shuffle ? Hex(EpochSeed(options.seed, state.cursor.epoch)) : ""}};
  if (state.scaler) {
    j["grad_scaler"] = {{"scale", state.scaler->scale},
                        {"growth_factor", state.scaler->growth_factor},
                        {"backoff_factor", state.scaler->backoff_factor},
                        {"growth_interval", state.scaler->growth_interval},
                        {"_growth_tracker", state.scaler->growth_tracker}};
  } else {
    j["grad_scaler"] = nullptr;
  }
  ordered_json state_names = ordered_json::array();
  for (const auto& entry : state.optimizer_state) state_names.push_back(entry.first);
  j["optimizer"] = {{"name", OptimizerKindName(options.optimizer)},
                    {"step_counts", state.step_counts},
                    {"state", std::move(state_names)}};
  j["lr_schedule"] = {{"kind", LrScheduleKindName(options.schedule.kind)},
                      {"steps_taken", state.steps_taken},
                      {"total_steps", trainer.total_steps()}};
  ordered_json params = ordered_json::array();
  for (const Parameter& p : graphs.params) params.push_back(p.name);
  ordered_json buffers = ordered_json::array();
  for (const Buffer& b : graphs.buffers) buffers.push_back(b.name);
  j["parameters"] = std::move(params);
  j["buffers"] = std::move(buffers);
  j["options"] = OptionsJson(options);
  j["threads"] = ResolvedThreads(options.threads);
  j["data"] = {{"samples", trainer.train_data().num_samples()},
               {"fnv1a64", model.data_hash.empty() ? CheckpointDataHash(trainer.train_data()) : model.data_hash}};
  const std::string json = j.dump(2) + "\n";

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError("checkpoint ", dir, ": cannot create the folder: ", ec.message());
  const std::string name = StepName(state.steps_done);
  const std::string final_dir = (fs::path(dir) / name).string();
  std::string tmpl = (fs::path(dir) / (".tmp-" + name + "-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data()))
    return IoError("checkpoint ", dir, ": cannot create a temporary folder: ", ErrnoText(errno));
  const std::string tmp = tmpl;
  auto fail = [&](const Status& s) {
    RemoveTree(tmp);
    return s;
  };
  for (const auto& [file, data] : std::vector<std::pair<const char*, std::string_view>>{
           {kModelFile, model.bytes}, {kStateFile, *st_bytes}, {kTrainerFile, json}}) {
    Status s = WriteFlushed((fs::path(tmp) / file).string(), data, (fs::path(final_dir) / file).string());
    if (!s.ok()) return fail(s);
  }
  FlushFolder(tmp);
  ::chmod(tmp.c_str(), 0755);
  // A folder of the same step (a run resumed from an earlier checkpoint passes it again) is moved aside first.
  std::string old;
  if (fs::exists(final_dir, ec)) {
    old = (fs::path(dir) / (".old-" + name)).string();
    RemoveTree(old);
    if (::rename(final_dir.c_str(), old.c_str()) != 0) {
      return fail(IoError(final_dir, ": cannot move the previous checkpoint aside: ", ErrnoText(errno)));
    }
  }
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    const int err = errno;
    if (!old.empty()) ::rename(old.c_str(), final_dir.c_str());
    return fail(IoError(final_dir, ": cannot rename the temporary folder into place: ", ErrnoText(err)));
  }
  FlushFolder(dir);
  // A failure from here on undoes the save: the new step folder goes and a folder it replaced comes back, so that the
  // folder is as it was (and the space the save took is free again).
  auto undo = [&](const Status& s) {
    RemoveTree(final_dir);
    if (!old.empty()) ::rename(old.c_str(), final_dir.c_str());
    return s;
  };
  // `latest` is replaced only now: until the rename below it names the previous complete checkpoint.
  const std::string latest = (fs::path(dir) / kLatest).string();
  std::string latest_tmp = latest + ".tmp-XXXXXX";
  const int fd = ::mkstemp(latest_tmp.data());
  if (fd < 0) return undo(IoError(latest, ": cannot create a temporary file: ", ErrnoText(errno)));
  ::close(fd);
  ::unlink(latest_tmp.c_str());
  Status s = WriteFlushed(latest_tmp, name + "\n", latest);
  if (s.ok() && ::rename(latest_tmp.c_str(), latest.c_str()) != 0) {
    s = IoError(latest, ": cannot rename the temporary file into place: ", ErrnoText(errno));
  }
  if (!s.ok()) {
    ::unlink(latest_tmp.c_str());
    return undo(s);
  }
  FlushFolder(dir);
  if (!old.empty()) RemoveTree(old);
  if (keep > 0) Prune(dir, keep, name);
  return final_dir;
}

StatusOr<Checkpoint> LoadCheckpoint(const std::string& path) {
  std::error_code ec;
  std::string step_dir = path;
  if (!fs::exists(fs::path(path) / kTrainerFile, ec)) {
    const std::string latest = (fs::path(path) / kLatest).string();
    if (!fs::exists(latest, ec)) {
      return NotFound("checkpoint ", path, ": not a checkpoint (neither ", kTrainerFile, " nor ", kLatest, " in it)");
    }
    ONNXAMP_ASSIGN_OR_RETURN(std::string name, ReadFile(latest, 4096));
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
    if (StepOf(name) < 0) return InvalidArgument(latest, ": '", name, "' is not a step folder name");
    step_dir = (fs::path(path) / name).string();
  }
  Checkpoint c;
  c.path = step_dir;
  const std::string json_path = (fs::path(step_dir) / kTrainerFile).string();
  ONNXAMP_ASSIGN_OR_RETURN(std::string text, ReadFile(json_path, kMaxJsonBytes));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(json_path, ": not valid JSON (truncated or corrupt)");
  ONNXAMP_ASSIGN_OR_RETURN(std::string format, Get<std::string>(j, "format", json_path));
  ONNXAMP_ASSIGN_OR_RETURN(int64_t version, Get<int64_t>(j, "version", json_path));
  if (format != kFormat || version != kVersion) {
    return InvalidArgument(json_path, ": format '", format, "' version ", version, ", expected '", kFormat,
                           "' version ", kVersion);
  }
  ONNXAMP_ASSIGN_OR_RETURN(c.step, Get<int64_t>(j, "step", json_path));

  // The two data files, checked against their recorded sizes and hashes before they are parsed.
  auto read_checked = [&](const char* key) -> StatusOr<std::string> {
    if (!j.contains(key) || !j[key].is_object()) return InvalidArgument(json_path, ": missing \"", key, "\"");
    ONNXAMP_ASSIGN_OR_RETURN(std::string file, Get<std::string>(j[key], "file", json_path));
    ONNXAMP_ASSIGN_OR_RETURN(uint64_t bytes, Get<uint64_t>(j[key], "bytes", json_path));
    ONNXAMP_ASSIGN_OR_RETURN(std::string hash, Get<std::string>(j[key], "fnv1a64", json_path));
    if (file.empty() || file.find('/') != std::string::npos || file == "..") {
      return InvalidArgument(json_path, ": file name '", file, "' is not a plain name");
    }
    const std::string p = (fs::path(step_dir) / file).string();
    ONNXAMP_ASSIGN_OR_RETURN(std::string data, ReadFile(p, bytes));
    if (data.size() != bytes) {
      return InvalidArgument(p, ": ", data.size(), " bytes, ", bytes, " recorded (truncated)");
    }
    if (Fnv1a64Hex(data) != hash) return InvalidArgument(p, ": contents do not match the recorded hash (corrupt)");
    return data;
  };
  ONNXAMP_ASSIGN_OR_RETURN(c.model_bytes, read_checked("model"));
  ONNXAMP_ASSIGN_OR_RETURN(c.model_source, Get<std::string>(j["model"], "source", json_path));
  ONNXAMP_ASSIGN_OR_RETURN(std::string state_bytes, read_checked("state"));
  const std::string state_path = (fs::path(step_dir) / kStateFile).string();
  ONNXAMP_ASSIGN_OR_RETURN(SafetensorsFile st, ParseSafetensors(state_bytes, state_path));
  std::map<std::string, ir::Tensor> by_name;
  for (ir::Tensor& t : st.tensors) by_name.emplace(t.name(), std::move(t));
  auto take = [&](const std::string& name, const std::string& as) -> StatusOr<ir::Tensor> {
    auto it = by_name.find(name);
    if (it == by_name.end()) return InvalidArgument(state_path, ": no tensor '", name, "'");
    ir::Tensor t = std::move(it->second);
    by_name.erase(it);
    t.set_name(as);
    return t;
  };

  TrainerState& s = c.state;
  if (!j.contains("counters")) return InvalidArgument(json_path, ": missing \"counters\"");
  const nlohmann::json& counters = j["counters"];
  ONNXAMP_ASSIGN_OR_RETURN(s.steps_done, Get<int64_t>(counters, "steps_done", json_path));
  ONNXAMP_ASSIGN_OR_RETURN(s.steps_taken, Get<int64_t>(counters, "steps_taken", json_path));
  ONNXAMP_ASSIGN_OR_RETURN(s.skipped, Get<int64_t>(counters, "skipped", json_path));
  ONNXAMP_ASSIGN_OR_RETURN(s.rng_step, Get<uint64_t>(counters, "rng_step", json_path));
  if (!j.contains("sampler")) return InvalidArgument(json_path, ": missing \"sampler\"");
  ONNXAMP_ASSIGN_OR_RETURN(s.cursor.epoch, Get<uint64_t>(j["sampler"], "epoch", json_path));
  ONNXAMP_ASSIGN_OR_RETURN(s.cursor.position, Get<int64_t>(j["sampler"], "position", json_path));
  if (j.contains("grad_scaler") && !j["grad_scaler"].is_null()) {
    const nlohmann::json& g = j["grad_scaler"];
    GradScalerState gs;
    ONNXAMP_ASSIGN_OR_RETURN(double scale, Get<double>(g, "scale", json_path));
    gs.scale = static_cast<float>(scale);
    ONNXAMP_ASSIGN_OR_RETURN(gs.growth_factor, Get<double>(g, "growth_factor", json_path));
    ONNXAMP_ASSIGN_OR_RETURN(gs.backoff_factor, Get<double>(g, "backoff_factor", json_path));
    ONNXAMP_ASSIGN_OR_RETURN(gs.growth_interval, Get<int64_t>(g, "growth_interval", json_path));
    ONNXAMP_ASSIGN_OR_RETURN(int64_t tracker, Get<int64_t>(g, "_growth_tracker", json_path));
    if (tracker < 0 || tracker > INT32_MAX) return InvalidArgument(json_path, ": _growth_tracker ", tracker);
    gs.growth_tracker = static_cast<int32_t>(tracker);
    s.scaler = gs;
  }
  if (!j.contains("optimizer") || !j["optimizer"].is_object())
    return InvalidArgument(json_path, ": missing \"optimizer\"");
  const nlohmann::json& opt = j["optimizer"];
  if (!opt.contains("step_counts") || !opt["step_counts"].is_array() || !opt.contains("state") ||
      !opt["state"].is_array()) {
    return InvalidArgument(json_path, ": \"optimizer\" needs the arrays step_counts and state");
  }
  for (const nlohmann::json& v : opt["step_counts"]) {
    if (!v.is_number_integer()) return InvalidArgument(json_path, ": a step count is not an integer");
    s.step_counts.push_back(v.get<int64_t>());
  }
  auto names = [&](const char* key, std::vector<std::string>* out) -> Status {
    if (!j.contains(key) || !j[key].is_array()) return InvalidArgument(json_path, ": missing \"", key, "\"");
    for (const nlohmann::json& v : j[key]) {
      if (!v.is_string()) return InvalidArgument(json_path, ": \"", key, "\" holds a value that is not a name");
      out->push_back(v.get<std::string>());
    }
    return Status::Ok();
  };
  ONNXAMP_RETURN_IF_ERROR(names("parameters", &c.param_names));
  ONNXAMP_RETURN_IF_ERROR(names("buffers", &c.buffer_names));
  for (const std::string& p : c.param_names) {
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor t, take(p, p));
    s.params.push_back(std::move(t));
  }
  for (const nlohmann::json& v : opt["state"]) {
    if (!v.is_string()) return InvalidArgument(json_path, ": an optimizer state name is not a string");
    const std::string state_name = v.get<std::string>();
    std::vector<ir::Tensor> per_param;
    for (const std::string& p : c.param_names) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor t, take(StrCat(kOptimPrefix, state_name, ".", p), p));
      per_param.push_back(std::move(t));
    }
    s.optimizer_state.emplace_back(state_name, std::move(per_param));
  }
  for (const std::string& b : c.buffer_names) {
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor t, take(b, b));
    s.buffers.push_back(std::move(t));
  }
  if (!by_name.empty()) {
    return InvalidArgument(state_path, ": tensor '", by_name.begin()->first, "' is not listed in ", kTrainerFile);
  }
  if (!j.contains("options") || !j["options"].is_object()) return InvalidArgument(json_path, ": missing \"options\"");
  c.options_json = j["options"].dump();
  ONNXAMP_ASSIGN_OR_RETURN(int64_t threads, Get<int64_t>(j, "threads", json_path));
  c.threads = static_cast<int>(std::clamp<int64_t>(threads, 0, INT32_MAX));
  if (!j.contains("data")) return InvalidArgument(json_path, ": missing \"data\"");
  ONNXAMP_ASSIGN_OR_RETURN(c.data_samples, Get<int64_t>(j["data"], "samples", json_path));
  ONNXAMP_ASSIGN_OR_RETURN(c.data_hash, Get<std::string>(j["data"], "fnv1a64", json_path));
  return c;
}

Status CheckCheckpointModel(const Checkpoint& checkpoint, const std::string& model_bytes) {
  if (model_bytes != checkpoint.model_bytes) {
    return InvalidArgument("resuming from ", checkpoint.path, ": the checkpoint is of another model (",
                           checkpoint.model_source, ", FNV-1a ", Fnv1a64Hex(checkpoint.model_bytes),
                           "; this model's is ", Fnv1a64Hex(model_bytes), ")");
  }
  return Status::Ok();
}

Status ResumeTrainer(const Checkpoint& checkpoint, const std::string& model_bytes, Trainer& trainer,
                     std::vector<std::string>* warnings) {
  const std::string where = StrCat("resuming from ", checkpoint.path);
  ONNXAMP_RETURN_IF_ERROR(CheckCheckpointModel(checkpoint, model_bytes));
  const Dataset& data = trainer.train_data();
  const std::string data_hash = CheckpointDataHash(data);
  if (data.num_samples() != checkpoint.data_samples || data_hash != checkpoint.data_hash) {
    return InvalidArgument(where, ": the training data differs from the checkpoint's (", data.num_samples(),
                           " samples, FNV-1a ", data_hash, "; the checkpoint's ", checkpoint.data_samples, " samples, ",
                           checkpoint.data_hash, ")");
  }
  const nlohmann::json saved = nlohmann::json::parse(checkpoint.options_json, nullptr, false);
  const nlohmann::json now = nlohmann::json::parse(OptionsJson(trainer.options()).dump());
  for (auto it = now.begin(); it != now.end(); ++it) {
    if (MayChangeOnResume(it.key())) continue;
    if (!saved.contains(it.key())) return InvalidArgument(where, ": the checkpoint has no option '", it.key(), "'");
    if (saved[it.key()] != it.value()) {
      return InvalidArgument(where, ": option ", it.key(), " is ", it.value().dump(), ", the checkpoint's ",
                             saved[it.key()].dump(), " (only --steps, --epochs and --threads may change on resume)");
    }
  }
  const int threads = ResolvedThreads(trainer.options().threads);
  if (warnings && threads != checkpoint.threads) {
    warnings->push_back(StrCat("resuming with ", threads, " threads, the checkpoint was written with ",
                               checkpoint.threads,
                               ": the results may differ in the last bits from an "
                               "uninterrupted run"));
  }
  Status s = trainer.Restore(checkpoint.state);
  if (!s.ok()) return s.WithContext(where);
  return Status::Ok();
}

std::vector<ir::Tensor> CheckpointValues(const Checkpoint& checkpoint) {
  std::vector<ir::Tensor> values = checkpoint.state.params;
  for (const ir::Tensor& b : checkpoint.state.buffers) values.push_back(b);
  return values;
}

}  // namespace onnxamp::trainer
