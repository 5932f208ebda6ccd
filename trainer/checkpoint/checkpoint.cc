// SaveCheckpoint / LoadCheckpoint / ResumeTrainer: the trainer's state in safetensors and JSON, written through a
// temporary folder and renames.
#include "trainer/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <sys/file.h>
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
#include <set>
#include <thread>
#include <utility>

#include "importer/tensor_map.h"
#include "runtime/common/file_util.h"
#include "trainer/checkpoint/safetensors.h"
#include "trainer/log/crc32c.h"

namespace onnxamp::trainer {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr char kFormat[] = "onnxamp.checkpoint";
constexpr int kVersion = 2;  // 1: FNV-1a 64 checksums; 2: CRC32C
constexpr char kLatest[] = "latest";
constexpr char kModelFile[] = "model.onnx";
constexpr char kStateFile[] = "state.safetensors";
constexpr char kTrainerFile[] = "trainer.json";
constexpr char kBestFile[] = "best.safetensors";
constexpr char kOptimPrefix[] = "optim.";
constexpr char kEmaBufferPrefix[] = "ema.";  // the moving averages of the buffers (--ema)
constexpr uint64_t kMaxJsonBytes = 64u << 20;

std::function<Status(const std::string&)>& WriteHook() {
  static std::function<Status(const std::string&)> hook;
  return hook;
}

// The test's stand-in for ::link (SetCheckpointLinkForTesting); empty: ::link.
std::function<int(const char*, const char*)>& LinkHook() {
  static std::function<int(const char*, const char*)> hook;
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

// Writes a new file `path` through `write` (which gets its descriptor) and flushes it to the disk. The test hook sees
// `final_path`, the name it will have.
Status WriteFlushedWith(const std::string& path, const std::string& final_path,
                        const std::function<Status(int fd)>& write) {
  if (WriteHook()) ONNXAMP_RETURN_IF_ERROR(WriteHook()(final_path));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(final_path, ": cannot create: ", ErrnoText(errno));
  Status st = write(fd);
  if (st.ok() && ::fsync(fd) != 0) st = IoError(final_path, ": flush failed: ", ErrnoText(errno));
  if (::close(fd) != 0 && st.ok()) st = IoError(final_path, ": close failed: ", ErrnoText(errno));
  return st;
}

Status WriteFlushed(const std::string& path, std::string_view data, const std::string& final_path) {
  return WriteFlushedWith(path, final_path, [&](int fd) { return WriteAll(fd, data, final_path); });
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
  j["label_smoothing"] = o.graph.loss.label_smoothing;
  j["loss_delta"] = o.graph.loss.delta;
  j["class_weights"] = o.graph.loss.class_weights;
  j["amp"] = o.graph.amp == DType::kUndefined ? "off" : std::string(DTypeName(o.graph.amp));
  j["trainable"] = o.graph.trainable;
  j["freeze"] = o.graph.freeze;
  j["lora_rank"] = o.graph.lora.rank;
  if (o.graph.lora.enabled()) {
    // The initial adapters (--lora-init, the seed) are the checkpoint's state, not an option.
    j["lora_alpha"] = o.graph.lora.alpha;
    j["lora_rslora"] = o.graph.lora.rslora;
    j["lora_targets"] = o.graph.lora.targets;
    j["lora_dropout"] = o.graph.lora.dropout;
    j["lora_train"] = o.graph.lora.train;
  }
  j["amp_policy"] = ordered_json::parse(o.graph.policy.ToJson());
  j["optimizer"] = OptimizerKindName(o.optimizer);
  // The chosen optimizer's options only: a resumed run must match them; the others' play no part.
  auto moments = [&j](double beta1, double beta2, double eps) {  // Adam's, RAdam's and NAdam's (in this order)
    j["beta1"] = beta1;
    j["beta2"] = beta2;
    j["eps"] = eps;
  };
  switch (o.optimizer) {
    case OptimizerKind::kSgd:
      j["momentum"] = o.sgd.momentum;
      j["dampening"] = o.sgd.dampening;
      j["sgd_weight_decay"] = o.sgd.weight_decay;
      j["nesterov"] = o.sgd.nesterov;
      break;
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW:
      moments(o.adam.beta1, o.adam.beta2, o.adam.eps);
      j["adam_weight_decay"] = o.adam.weight_decay;
      j["amsgrad"] = o.adam.amsgrad;
      break;
    case OptimizerKind::kRadam:
      moments(o.radam.beta1, o.radam.beta2, o.radam.eps);
      j["radam_weight_decay"] = o.radam.weight_decay;
      j["decoupled_weight_decay"] = o.radam.decoupled_weight_decay;
      break;
    case OptimizerKind::kNadam:
      moments(o.nadam.beta1, o.nadam.beta2, o.nadam.eps);
      j["nadam_weight_decay"] = o.nadam.weight_decay;
      j["momentum_decay"] = o.nadam.momentum_decay;
      j["decoupled_weight_decay"] = o.nadam.decoupled_weight_decay;
      break;
    case OptimizerKind::kRmsprop:
      j["alpha"] = o.rmsprop.alpha;
      j["eps"] = o.rmsprop.eps;
      j["rmsprop_weight_decay"] = o.rmsprop.weight_decay;
      j["momentum"] = o.rmsprop.momentum;
      j["centered"] = o.rmsprop.centered;
      break;
    case OptimizerKind::kAdagrad:
      j["lr_decay"] = o.adagrad.lr_decay;
      j["adagrad_weight_decay"] = o.adagrad.weight_decay;
      j["initial_accumulator_value"] = o.adagrad.initial_accumulator_value;
      j["eps"] = o.adagrad.eps;
      break;
    case OptimizerKind::kLion:
      j["beta1"] = o.lion.beta1;
      j["beta2"] = o.lion.beta2;
      j["lion_weight_decay"] = o.lion.weight_decay;
      break;
  }
  j["ema"] = o.ema_decay;
  j["ema_warmup"] = o.ema_warmup;
  j["swa_start"] = o.swa_start;
  j["no_decay"] = o.param_groups.no_decay;
  j["no_decay_1d"] = o.param_groups.no_decay_1d;
  j["layer_decay"] = o.param_groups.layer_decay;
  if (o.param_groups.layer_decay > 0) j["layer_pattern"] = o.param_groups.layer_pattern;
  j["lr_scale"] = ordered_json::array();
  for (const LrScaleRule& r : o.param_groups.lr_scale)
    j["lr_scale"].push_back({{"pattern", r.pattern}, {"factor", r.factor}});
  j["schedule"] = LrScheduleKindName(o.schedule.kind);
  j["lr"] = o.schedule.base_lr;
  j["step_size"] = o.schedule.step_size;
  j["gamma"] = o.schedule.gamma;
  j["schedule_total_steps"] = o.schedule.total_steps;
  j["min_lr"] = o.schedule.min_lr;
  j["cycles"] = o.schedule.cycles;
  j["power"] = o.schedule.power;
  j["decay_steps"] = o.schedule.decay_steps;
  j["timescale"] = o.schedule.timescale;
  j["warmup"] = o.schedule.warmup_steps;
  j["warmup_start_factor"] = o.schedule.warmup_start_factor;
  if (o.schedule.kind == LrScheduleKind::kPlateau) {
    j["patience"] = o.schedule.patience;
    j["cooldown"] = o.schedule.cooldown;
    j["plateau_threshold"] = o.schedule.threshold;
    j["plateau_mode"] = o.schedule.maximize ? "max" : "min";
  }
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
  j["clip_value"] = o.clip_value;
  j["seed"] = o.seed;
  j["shuffle"] = o.shuffle;
  j["threads"] = o.threads;
  j["recompute"] = RecomputeName(o.graph.recompute.segments);
  return j;
}

// Options a resumed run may change: the run's length, the thread count (a warning, see ResumeTrainer) and the
// activation recomputation (which computes the same bits).
bool MayChangeOnResume(const std::string& key) {
  return key == "steps" || key == "epochs" || key == "threads" || key == "recompute";
}

int ResolvedThreads(int threads) {
  if (threads > 0) return threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ull;

uint64_t Fnv1a64Update(uint64_t h, std::string_view s) {
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// `h` as `digits` hex digits (16 for a 64-bit value, 8 for a 32-bit one).
std::string Hex(uint64_t h, int digits = 16) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%0*" PRIx64, digits, h);
  return buf;
}

// A checksum of `kind`, computed piece by piece.
class Hasher {
 public:
  explicit Hasher(CheckpointHash kind) : kind_(kind), h_(kind == CheckpointHash::kFnv1a64 ? kFnvOffsetBasis : 0) {}
  void Update(std::string_view bytes) {
    h_ = kind_ == CheckpointHash::kFnv1a64 ? Fnv1a64Update(h_, bytes) : Crc32c(bytes, static_cast<uint32_t>(h_));
  }
  std::string HexDigits() const { return Hex(h_, kind_ == CheckpointHash::kFnv1a64 ? 16 : 8); }

 private:
  CheckpointHash kind_;
  uint64_t h_;
};

// The key of a checksum of `kind` in trainer.json, and its name in messages.
const char* HashKey(CheckpointHash kind) { return kind == CheckpointHash::kFnv1a64 ? "fnv1a64" : "crc32c"; }
const char* HashName(CheckpointHash kind) { return kind == CheckpointHash::kFnv1a64 ? "FNV-1a" : "CRC32C"; }

// The piece size of the streamed reads and copies of model files.
constexpr size_t kCopyChunk = size_t{1} << 20;

// Reads the file `in` (opened from `path`) to its end in pieces, handing each to `piece`.
Status ReadPieces(const InputFile& in, const std::string& path, const std::function<Status(std::string_view)>& piece) {
  std::vector<char> buf(kCopyChunk);
  for (;;) {
    const ssize_t n = ::read(in.fd(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(path, ": read failed: ", ErrnoText(errno));
    }
    if (n == 0) return Status::Ok();
    ONNXAMP_RETURN_IF_ERROR(piece(std::string_view(buf.data(), static_cast<size_t>(n))));
  }
}

// The size and checksum of the file at `path`, read in pieces; the record is named `name`.
StatusOr<CheckpointModelFile> HashFile(const std::string& path, std::string name, CheckpointHash kind) {
  ONNXAMP_ASSIGN_OR_RETURN(InputFile in, InputFile::Open(path));
  CheckpointModelFile f{std::move(name), 0, ""};
  Hasher h(kind);
  ONNXAMP_RETURN_IF_ERROR(ReadPieces(in, path, [&](std::string_view piece) {
    h.Update(piece);
    f.bytes += piece.size();
    return Status::Ok();
  }));
  f.hash = h.HexDigits();
  return f;
}

// The names of a checkpoint's own files, which an external data file of the model must not take.
bool IsCheckpointFileName(const std::string& name) {
  return name == kModelFile || name == kStateFile || name == kTrainerFile || name == kBestFile;
}

// Checks that an external data location can be stored inside a step folder as the model names it: relative, no ".."
// component, not a checkpoint file's name. `where` prefixes the error.
Status CheckStorableLocation(const std::string& location, const std::string& where) {
  const fs::path p(location);
  if (location.empty() || p.is_absolute()) {
    return InvalidArgument(where, ": external data location '", location, "' is not a relative path");
  }
  for (const fs::path& part : p) {
    if (part == "..") {
      return InvalidArgument(where, ": external data location '", location,
                             "' has a '..' component, which a checkpoint cannot store");
    }
  }
  const fs::path first = *p.lexically_normal().begin();
  if (IsCheckpointFileName(first.string())) {
    return InvalidArgument(where, ": external data location '", location,
                           "' has the name of a checkpoint's own file, which a checkpoint cannot store");
  }
  return Status::Ok();
}

// Every external data location `graph` (and its subgraphs) references.
void CollectLocations(const ir::Graph& graph, std::set<std::string>& out) {
  auto add = [&](const ir::Tensor& t) {
    if (t.external()) out.insert(t.external()->location);
  };
  auto add_sparse = [&](const ir::SparseTensor& sp) {
    add(sp.values);
    add(sp.indices);
  };
  for (const ir::Value* v : graph.initializers()) add(*v->initializer());
  for (const ir::Value* v : graph.sparse_initializers()) add_sparse(*v->sparse_initializer());
  for (const ir::Node* node : graph.nodes()) {
    for (const ir::Attribute& a : node->attributes()) {
      add(a.t);
      for (const ir::Tensor& t : a.tensors) add(t);
      add_sparse(a.sparse_tensor);
      for (const ir::SparseTensor& sp : a.sparse_tensors) add_sparse(sp);
    }
    for (const ir::Graph* sub : node->subgraphs()) CollectLocations(*sub, out);
  }
}

// The "model" record of trainer.json.
ordered_json ModelRecord(const CheckpointModel& m) {
  const char* key = HashKey(m.hash);
  ordered_json external = ordered_json::array();
  for (size_t i = 1; i < m.files.size(); ++i) {
    external.push_back({{"file", m.files[i].name}, {"bytes", m.files[i].bytes}, {key, m.files[i].hash}});
  }
  return {{"file", kModelFile},
          {"bytes", m.files.empty() ? 0 : m.files[0].bytes},
          {key, m.files.empty() ? "" : m.files[0].hash},
          {"source", m.source},
          {"external_data", std::move(external)}};
}

}  // namespace

std::string CheckpointDataHash(const Dataset& data, CheckpointHash hash) {
  Hasher h(hash);
  // The samples' bytes in order (through a view's rows), read in runs: a mapped file is not kept in memory.
  for (size_t k = 0; k < data.arrays().size(); ++k) {
    const ir::Tensor& t = data.arrays()[k];
    std::string head = StrCat(t.name(), "|", DTypeName(t.dtype()), "|");
    for (size_t i = 0; i < t.dims().size(); ++i) head += StrCat(i == 0 ? data.num_samples() : t.dims()[i], ",");
    h.Update(head);
    data.ForEachRun(k, [&](std::span<const std::byte> bytes) {
      h.Update(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    });
  }
  return h.HexDigits();
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

// The step folder that `dir`/latest names. Errors name `latest`: unreadable, or not a step folder's name.
StatusOr<std::string> LatestStepDir(const std::string& dir) {
  const std::string latest = (fs::path(dir) / kLatest).string();
  ONNXAMP_ASSIGN_OR_RETURN(std::string name, ReadFile(latest, 4096));
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  if (StepOf(name) < 0) return InvalidArgument(latest, ": '", name, "' is not a step folder name");
  return (fs::path(dir) / name).string();
}

// trainer.json at `json_path`, parsed: a JSON object.
StatusOr<nlohmann::json> ReadTrainerJson(const std::string& json_path) {
  ONNXAMP_ASSIGN_OR_RETURN(std::string text, ReadFile(json_path, kMaxJsonBytes));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(json_path, ": not valid JSON (truncated or corrupt)");
  return j;
}

// The checksum kind of trainer.json `j` (at `json_path`), from its format and version.
StatusOr<CheckpointHash> VersionHash(const nlohmann::json& j, const std::string& json_path) {
  ONNXAMP_ASSIGN_OR_RETURN(std::string format, Get<std::string>(j, "format", json_path));
  ONNXAMP_ASSIGN_OR_RETURN(int64_t version, Get<int64_t>(j, "version", json_path));
  if (format != kFormat || version < 1 || version > kVersion) {
    return InvalidArgument(json_path, ": format '", format, "' version ", version, ", expected '", kFormat,
                           "' version 1 to ", kVersion);
  }
  return version == 1 ? CheckpointHash::kFnv1a64 : CheckpointHash::kCrc32c;
}

// The "model" record of trainer.json at `json_path`: the stored files, checked to be plain names inside the folder.
StatusOr<CheckpointModel> ParseModelRecord(const nlohmann::json& j, const std::string& json_path, CheckpointHash kind) {
  if (!j.contains("model") || !j["model"].is_object()) return InvalidArgument(json_path, ": missing \"model\"");
  const nlohmann::json& m = j["model"];
  CheckpointModel model;
  model.hash = kind;
  ONNXAMP_ASSIGN_OR_RETURN(model.source, Get<std::string>(m, "source", json_path));
  auto file = [&](const nlohmann::json& f) -> StatusOr<CheckpointModelFile> {
    CheckpointModelFile r;
    ONNXAMP_ASSIGN_OR_RETURN(r.name, Get<std::string>(f, "file", json_path));
    ONNXAMP_ASSIGN_OR_RETURN(r.bytes, Get<uint64_t>(f, "bytes", json_path));
    ONNXAMP_ASSIGN_OR_RETURN(r.hash, Get<std::string>(f, HashKey(kind), json_path));
    return r;
  };
  ONNXAMP_ASSIGN_OR_RETURN(CheckpointModelFile main_file, file(m));
  if (main_file.name != kModelFile) {
    return InvalidArgument(json_path, ": the model file is '", main_file.name, "', expected '", kModelFile, "'");
  }
  model.files.push_back(std::move(main_file));
  // Checkpoints of models without external data written before the key existed have none.
  if (m.contains("external_data")) {
    if (!m["external_data"].is_array()) return InvalidArgument(json_path, ": \"external_data\" is not an array");
    std::set<std::string> names;
    for (const nlohmann::json& f : m["external_data"]) {
      ONNXAMP_ASSIGN_OR_RETURN(CheckpointModelFile ext, file(f));
      ONNXAMP_RETURN_IF_ERROR(CheckStorableLocation(ext.name, json_path));
      if (!names.insert(ext.name).second) {
        return InvalidArgument(json_path, ": external data file '", ext.name, "' is listed twice");
      }
      model.files.push_back(std::move(ext));
    }
  }
  return model;
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

// Copies the file `source` into the new file `path` (flushed; `final_path` names it in errors), checking on the way
// that it still is `expected` (the model the run read).
Status CopyChecked(const std::string& source, const std::string& path, const std::string& final_path,
                   const CheckpointModelFile& expected, CheckpointHash kind) {
  ONNXAMP_ASSIGN_OR_RETURN(InputFile in, InputFile::Open(source));
  Hasher h(kind);
  uint64_t bytes = 0;
  ONNXAMP_RETURN_IF_ERROR(WriteFlushedWith(path, final_path, [&](int fd) {
    return ReadPieces(in, source, [&](std::string_view piece) {
      h.Update(piece);
      bytes += piece.size();
      return WriteAll(fd, piece, final_path);
    });
  }));
  if (bytes != expected.bytes || h.HexDigits() != expected.hash) {
    return InvalidArgument(source, ": changed since the run read it (", bytes, " bytes, ", HashName(kind), " ",
                           h.HexDigits(), "; it had ", expected.bytes, " bytes, ", expected.hash,
                           "): a checkpoint stores the model the run trains");
  }
  return Status::Ok();
}

// The step folder that `dir`/latest names when it stores `model`'s files (by its trainer.json, and their sizes on
// the disk): a save hard-links them from there. Empty when there is none.
std::string LinkSource(const std::string& dir, const CheckpointModel& model) {
  StatusOr<std::string> latest = LatestStepDir(dir);
  if (!latest.ok()) return "";
  const std::string step_dir = *latest;
  const std::string json_path = (fs::path(step_dir) / kTrainerFile).string();
  StatusOr<nlohmann::json> parsed = ReadTrainerJson(json_path);
  if (!parsed.ok()) return "";
  const nlohmann::json& j = *parsed;
  StatusOr<CheckpointHash> kind = VersionHash(j, json_path);
  if (!kind.ok() || *kind != model.hash) return "";
  StatusOr<CheckpointModel> stored = ParseModelRecord(j, json_path, *kind);
  if (!stored.ok() || stored->files != model.files) return "";
  for (const CheckpointModelFile& f : model.files) {
    std::error_code ec;
    const uintmax_t size = fs::file_size(fs::path(step_dir) / f.name, ec);
    if (ec || size != f.bytes) return "";
  }
  return step_dir;
}

// A safetensors file of a checkpoint, streamed from `tensors` into the new file `path` (`final_path` names it in
// errors) and checksummed on the way: its record {"file", "bytes", <checksum key>} for trainer.json. `what` prefixes
// errors of the tensors themselves (a write error names the file).
StatusOr<ordered_json> WriteCheckpointTensors(const std::string& path, const std::string& final_path,
                                              const std::vector<ir::Tensor>& tensors,
                                              const std::map<std::string, std::string>& metadata, CheckpointHash kind,
                                              const std::string& what) {
  uint64_t bytes = 0;
  Hasher hash(kind);
  Status write_error;
  Status s = WriteFlushedWith(path, final_path, [&](int fd) {
    return WriteSafetensors(tensors, metadata, [&](std::string_view piece) {
      hash.Update(piece);
      bytes += piece.size();
      write_error = WriteAll(fd, piece, final_path);
      return write_error;
    });
  });
  if (!s.ok()) return write_error.ok() ? s.WithContext(what) : s;
  return ordered_json{
      {"file", fs::path(final_path).filename().string()}, {"bytes", bytes}, {HashKey(kind), hash.HexDigits()}};
}

// The safetensors file that record `key` of trainer.json `j` names in `step_dir` (it must be `file`), checked against
// its size and checksum, mapped: its tensors are views of the file's pages where they are 16-byte aligned.
StatusOr<SafetensorsFile> ReadCheckpointTensors(const nlohmann::json& j, const char* key, const char* file,
                                                const std::string& step_dir, CheckpointHash kind,
                                                const std::string& json_path) {
  if (!j.contains(key) || !j[key].is_object()) return InvalidArgument(json_path, ": missing \"", key, "\"");
  ONNXAMP_ASSIGN_OR_RETURN(std::string name, Get<std::string>(j[key], "file", json_path));
  ONNXAMP_ASSIGN_OR_RETURN(uint64_t size, Get<uint64_t>(j[key], "bytes", json_path));
  ONNXAMP_ASSIGN_OR_RETURN(std::string recorded, Get<std::string>(j[key], HashKey(kind), json_path));
  if (name != file) return InvalidArgument(json_path, ": the ", key, " file is '", name, "', expected '", file, "'");
  const std::string path = (fs::path(step_dir) / file).string();
  ONNXAMP_ASSIGN_OR_RETURN(importer::MappedBytes map, importer::MapFileBytes(path));
  const std::string_view bytes = map.bytes();
  if (bytes.size() != size) return InvalidArgument(path, ": ", bytes.size(), " bytes, ", size, " recorded (truncated)");
  Hasher hash(kind);
  hash.Update(bytes);
  if (hash.HexDigits() != recorded) return InvalidArgument(path, ": contents do not match the recorded hash (corrupt)");
  return ParseSafetensors(bytes, path, map.keep_alive);
}

}  // namespace

StatusOr<CheckpointModel> DescribeCheckpointModel(const std::string& path, const ir::Model& model,
                                                  CheckpointHash hash) {
  CheckpointModel m;
  m.source = path;
  m.hash = hash;
  ONNXAMP_ASSIGN_OR_RETURN(CheckpointModelFile main_file, HashFile(path, kModelFile, hash));
  m.files.push_back(std::move(main_file));
  std::set<std::string> locations;
  if (model.graph) CollectLocations(*model.graph, locations);
  for (const ir::Function& f : model.functions) {
    if (f.body) CollectLocations(*f.body, locations);
  }
  const fs::path folder = fs::path(path).parent_path();
  for (const std::string& location : locations) {
    ONNXAMP_RETURN_IF_ERROR(CheckStorableLocation(location, path));
    ONNXAMP_ASSIGN_OR_RETURN(CheckpointModelFile f, HashFile((folder / location).string(), location, hash));
    m.files.push_back(std::move(f));
  }
  return m;
}

void SetCheckpointWriteHookForTesting(std::function<Status(const std::string& path)> hook) {
  WriteHook() = std::move(hook);
}

void SetCheckpointLinkForTesting(std::function<int(const char* from, const char* to)> link) {
  LinkHook() = std::move(link);
}

StatusOr<std::string> SaveCheckpoint(const std::string& dir, const Trainer& trainer, const CheckpointModel& model,
                                     int64_t keep, const BestEvaluation* best) {
  if (model.files.empty() || model.files[0].name != kModelFile) {
    return InvalidArgument("checkpoint ", dir, ": the model to store is not described (DescribeCheckpointModel)");
  }
  // Views of the trainer's memory, written out from there.
  const TrainerState state = trainer.StateView();
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
  for (const ir::Tensor& b : state.ema_buffers) {
    ir::Tensor named = b;
    named.set_name(StrCat(kEmaBufferPrefix, b.name()));
    tensors.push_back(std::move(named));
  }
  const std::map<std::string, std::string> metadata = {{"format", kFormat}, {"step", StrCat(state.steps_done)}};
  const std::string data_hash =
      model.data_hash.empty() ? CheckpointDataHash(trainer.train_data(), model.hash) : model.data_hash;

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError("checkpoint ", dir, ": cannot create the folder: ", ec.message());
  const std::string name = StepName(state.steps_done);
  const std::string final_dir = (fs::path(dir) / name).string();
  // The model's files are hard-linked from the checkpoint `latest` names when it stores the same ones.
  const std::string link_from = LinkSource(dir, model);
  std::string tmpl = (fs::path(dir) / (".tmp-" + name + "-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data()))
    return IoError("checkpoint ", dir, ": cannot create a temporary folder: ", ErrnoText(errno));
  const std::string tmp = tmpl;
  auto fail = [&](const Status& s) {
    RemoveTree(tmp);
    return s;
  };
  const fs::path source_folder = fs::path(model.source).parent_path();
  for (size_t i = 0; i < model.files.size(); ++i) {
    const CheckpointModelFile& f = model.files[i];
    const std::string path = (fs::path(tmp) / f.name).string();
    const std::string final_path = (fs::path(final_dir) / f.name).string();
    fs::create_directories(fs::path(path).parent_path(), ec);
    if (ec) return fail(IoError(final_path, ": cannot create its folder: ", ec.message()));
    if (!link_from.empty()) {
      if (WriteHook()) {
        Status hooked = WriteHook()(final_path);
        if (!hooked.ok()) return fail(hooked);
      }
      const std::string previous = (fs::path(link_from) / f.name).string();
      if ((LinkHook() ? LinkHook()(previous.c_str(), path.c_str()) : ::link(previous.c_str(), path.c_str())) == 0) {
        continue;
      }
      // Not linkable (no hard links on this file system): a copy of the previous checkpoint's file, else of the
      // source, as the first save does.
      if (CopyChecked(previous, path, final_path, f, model.hash).ok()) continue;
      ::unlink(path.c_str());
    }
    const std::string source = i == 0 ? model.source : (source_folder / f.name).string();
    Status s = CopyChecked(source, path, final_path, f, model.hash);
    if (!s.ok()) return fail(s);
  }
  // The state, streamed from the trainer's memory and hashed on the way.
  StatusOr<ordered_json> state_record =
      WriteCheckpointTensors((fs::path(tmp) / kStateFile).string(), (fs::path(final_dir) / kStateFile).string(),
                             tensors, metadata, model.hash, StrCat("checkpoint ", dir));
  if (!state_record.ok()) return fail(state_record.status());
  ordered_json best_record = nullptr;
  if (best && best->step >= 0) {
    best_record = {{"step", best->step}, {"loss", best->loss}, {"accuracy", best->accuracy}, {"since", best->since}};
    if (!best->values.empty()) {
      StatusOr<ordered_json> values = WriteCheckpointTensors(
          (fs::path(tmp) / kBestFile).string(), (fs::path(final_dir) / kBestFile).string(), best->values,
          {{"format", kFormat}, {"step", StrCat(best->step)}}, model.hash, StrCat("checkpoint ", dir));
      if (!values.ok()) return fail(values.status());
      best_record["values"] = std::move(*values);
    }
  }

  ordered_json j;
  j["format"] = kFormat;
  j["version"] = model.hash == CheckpointHash::kFnv1a64 ? 1 : kVersion;
  j["step"] = state.steps_done;
  j["model"] = ModelRecord(model);
  j["state"] = std::move(*state_record);
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
  if (state.plateau) {
    // ReduceLROnPlateau's state_dict keys, the rate as its param_groups' "lr"; best null before any evaluation.
    const PlateauState& p = *state.plateau;
    j["lr_schedule"]["plateau"] = {{"lr", p.lr},
                                   {"best", p.best ? ordered_json(*p.best) : ordered_json(nullptr)},
                                   {"num_bad_epochs", p.num_bad_epochs},
                                   {"cooldown_counter", p.cooldown_counter},
                                   {"reductions", p.reductions}};
  }
  ordered_json params = ordered_json::array();
  for (const Parameter& p : graphs.params) params.push_back(p.name);
  ordered_json buffers = ordered_json::array();
  for (const Buffer& b : graphs.buffers) buffers.push_back(b.name);
  j["parameters"] = std::move(params);
  j["buffers"] = std::move(buffers);
  // Written only with --ema, so that a checkpoint without averages reads as one of an older version does.
  if (!state.ema_buffers.empty() || options.averaging()) j["ema_buffers"] = state.ema_buffers.size();
  j["options"] = OptionsJson(options);
  j["threads"] = ResolvedThreads(options.threads);
  j["data"] = {{"samples", trainer.train_data().num_samples()}, {HashKey(model.hash), data_hash}};
  j["best"] = std::move(best_record);
  const std::string json = j.dump(2) + "\n";
  Status s = WriteFlushed((fs::path(tmp) / kTrainerFile).string(), json, (fs::path(final_dir) / kTrainerFile).string());
  if (!s.ok()) return fail(s);
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
  s = WriteFlushed(latest_tmp, name + "\n", latest);
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

CheckpointDirLock& CheckpointDirLock::operator=(CheckpointDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

CheckpointDirLock::~CheckpointDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<CheckpointDirLock> LockCheckpointDir(const std::string& dir, std::vector<std::string>* repaired) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError("checkpoint ", dir, ": cannot create the folder: ", ec.message());
  // The folder itself is locked (flock on its descriptor): no lock file to leave behind.
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError("checkpoint ", dir, ": cannot open the folder: ", ErrnoText(errno));
  CheckpointDirLock lock(fd);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      return FailedPrecondition("checkpoint ", dir, ": another run is writing checkpoints into this folder");
    }
    return IoError("checkpoint ", dir, ": cannot lock the folder: ", ErrnoText(err));
  }
  // What a killed save leaves (see SaveCheckpoint): .tmp-step-N-XXXXXX folders, latest.tmp-XXXXXX files, and
  // .old-step-N folders (the step folder it was replacing; back in place unless step-N exists again).
  std::vector<fs::path> entries;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  for (const fs::path& p : entries) {
    const std::string name = p.filename().string();
    if (name.rfind(".tmp-step-", 0) == 0 || name.rfind(std::string(kLatest) + ".tmp-", 0) == 0) {
      RemoveTree(p.string());
      if (repaired) repaired->push_back(StrCat("removed ", p.string(), ", left by an interrupted save"));
    } else if (name.rfind(".old-step-", 0) == 0) {
      const fs::path step = fs::path(dir) / name.substr(5);
      if (!fs::exists(step, ec) && ::rename(p.c_str(), step.c_str()) == 0) {
        if (repaired)
          repaired->push_back(StrCat("moved ", p.string(), " back to ", step.string(),
                                     ": its replacement was "
                                     "interrupted"));
      } else {
        RemoveTree(p.string());
        if (repaired) repaired->push_back(StrCat("removed ", p.string(), ", left by an interrupted save"));
      }
    }
  }
  return lock;
}

StatusOr<Checkpoint> LoadCheckpoint(const std::string& path) {
  std::error_code ec;
  std::string step_dir = path;
  if (!fs::exists(fs::path(path) / kTrainerFile, ec)) {
    if (!fs::exists(fs::path(path) / kLatest, ec)) {
      return NotFound("checkpoint ", path, ": not a checkpoint (neither ", kTrainerFile, " nor ", kLatest, " in it)");
    }
    ONNXAMP_ASSIGN_OR_RETURN(step_dir, LatestStepDir(path));
  }
  Checkpoint c;
  c.path = step_dir;
  const std::string json_path = (fs::path(step_dir) / kTrainerFile).string();
  ONNXAMP_ASSIGN_OR_RETURN(const nlohmann::json j, ReadTrainerJson(json_path));
  ONNXAMP_ASSIGN_OR_RETURN(const CheckpointHash kind, VersionHash(j, json_path));
  ONNXAMP_ASSIGN_OR_RETURN(c.step, Get<int64_t>(j, "step", json_path));

  // The model's files and the state, checked against their recorded sizes and hashes before the state is parsed.
  ONNXAMP_ASSIGN_OR_RETURN(c.model, ParseModelRecord(j, json_path, kind));
  c.model_path = (fs::path(step_dir) / kModelFile).string();
  for (const CheckpointModelFile& f : c.model.files) {
    const std::string p = (fs::path(step_dir) / f.name).string();
    ONNXAMP_ASSIGN_OR_RETURN(CheckpointModelFile stored, HashFile(p, f.name, kind));
    if (stored.bytes != f.bytes) {
      return InvalidArgument(p, ": ", stored.bytes, " bytes, ", f.bytes, " recorded (truncated or changed)");
    }
    if (stored.hash != f.hash) {
      return InvalidArgument(p, ": contents do not match the recorded hash (corrupt)");
    }
  }
  const std::string state_path = (fs::path(step_dir) / kStateFile).string();
  ONNXAMP_ASSIGN_OR_RETURN(SafetensorsFile st,
                           ReadCheckpointTensors(j, "state", kStateFile, step_dir, kind, json_path));
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
  if (j.contains("ema_buffers")) {
    // The count of averaged buffers: every buffer, or none.
    if (!j["ema_buffers"].is_number_unsigned() ||
        (j["ema_buffers"].get<uint64_t>() != 0 && j["ema_buffers"].get<uint64_t>() != c.buffer_names.size())) {
      return InvalidArgument(json_path, ": \"ema_buffers\" must be 0 or the number of buffers (", c.buffer_names.size(),
                             "), got ", j["ema_buffers"].dump());
    }
    if (j["ema_buffers"].get<uint64_t>() > 0) {
      for (const std::string& b : c.buffer_names) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor t, take(StrCat(kEmaBufferPrefix, b), b));
        s.ema_buffers.push_back(std::move(t));
      }
    }
  }
  if (!by_name.empty()) {
    return InvalidArgument(state_path, ": tensor '", by_name.begin()->first, "' is not listed in ", kTrainerFile);
  }
  if (j.contains("lr_schedule") && j["lr_schedule"].is_object() && j["lr_schedule"].contains("plateau")) {
    const nlohmann::json& pj = j["lr_schedule"]["plateau"];
    const std::string where = json_path + " lr_schedule.plateau";
    PlateauState p;
    ONNXAMP_ASSIGN_OR_RETURN(p.lr, Get<double>(pj, "lr", where));
    if (!pj.contains("best")) return InvalidArgument(where, ": missing \"best\"");
    if (!pj["best"].is_null()) {
      ONNXAMP_ASSIGN_OR_RETURN(double best, Get<double>(pj, "best", where));
      p.best = best;
    }
    ONNXAMP_ASSIGN_OR_RETURN(p.num_bad_epochs, Get<int64_t>(pj, "num_bad_epochs", where));
    ONNXAMP_ASSIGN_OR_RETURN(p.cooldown_counter, Get<int64_t>(pj, "cooldown_counter", where));
    ONNXAMP_ASSIGN_OR_RETURN(p.reductions, Get<int64_t>(pj, "reductions", where));
    s.plateau = p;
  }
  if (!j.contains("options") || !j["options"].is_object()) return InvalidArgument(json_path, ": missing \"options\"");
  c.options_json = j["options"].dump();
  ONNXAMP_ASSIGN_OR_RETURN(int64_t threads, Get<int64_t>(j, "threads", json_path));
  c.threads = static_cast<int>(std::clamp<int64_t>(threads, 0, INT32_MAX));
  if (!j.contains("data")) return InvalidArgument(json_path, ": missing \"data\"");
  ONNXAMP_ASSIGN_OR_RETURN(c.data_samples, Get<int64_t>(j["data"], "samples", json_path));
  ONNXAMP_ASSIGN_OR_RETURN(c.data_hash, Get<std::string>(j["data"], HashKey(kind), json_path));
  if (j.contains("best") && !j["best"].is_null()) {
    const nlohmann::json& b = j["best"];
    BestEvaluation best;
    ONNXAMP_ASSIGN_OR_RETURN(best.step, Get<int64_t>(b, "step", json_path));
    ONNXAMP_ASSIGN_OR_RETURN(best.loss, Get<double>(b, "loss", json_path));
    ONNXAMP_ASSIGN_OR_RETURN(best.accuracy, Get<double>(b, "accuracy", json_path));
    ONNXAMP_ASSIGN_OR_RETURN(best.since, Get<int64_t>(b, "since", json_path));
    if (best.step < 0 || best.step > c.step || best.since < 0) {
      return InvalidArgument(json_path, ": \"best\" names step ", best.step, " (", best.since,
                             " evaluations since) in a checkpoint of step ", c.step);
    }
    if (b.contains("values")) {
      ONNXAMP_ASSIGN_OR_RETURN(SafetensorsFile values,
                               ReadCheckpointTensors(b, "values", kBestFile, step_dir, kind, json_path));
      best.values = std::move(values.tensors);
    }
    c.best = std::move(best);
  }
  return c;
}

Status CheckCheckpointModel(const Checkpoint& checkpoint, const CheckpointModel& model) {
  const std::string where = StrCat("resuming from ", checkpoint.path);
  const CheckpointHash kind = checkpoint.model.hash;
  const fs::path folder = fs::path(model.source).parent_path();
  // The model's files in the checkpoint's kind of checksum (hashed again when described in another).
  std::vector<CheckpointModelFile> files = model.files;
  if (model.hash != kind) {
    for (size_t i = 0; i < files.size(); ++i) {
      const std::string path = i == 0 ? model.source : (folder / files[i].name).string();
      ONNXAMP_ASSIGN_OR_RETURN(files[i], HashFile(path, files[i].name, kind));
    }
  }
  const std::vector<CheckpointModelFile>& stored = checkpoint.model.files;
  if (stored.empty() || files.empty() || stored[0] != files[0]) {
    return InvalidArgument(where, ": the checkpoint is of another model (", checkpoint.model.source, ", ",
                           HashName(kind), " ", stored.empty() ? "?" : stored[0].hash, "; this model's is ",
                           files.empty() ? "?" : files[0].hash, ")");
  }
  // The same model file names the same external data files, which can differ only in their contents.
  if (stored.size() != files.size()) {
    return InvalidArgument(where, ": the checkpoint records ", stored.size() - 1,
                           " external data files, the model has ", files.size() - 1);
  }
  for (size_t i = 1; i < stored.size(); ++i) {
    if (stored[i] == files[i]) continue;
    return InvalidArgument(where, ": external data file ", (folder / files[i].name).string(),
                           " differs from the checkpoint's (", files[i].bytes, " bytes, ", HashName(kind), " ",
                           files[i].hash, "; the checkpoint's ", stored[i].bytes, " bytes, ", stored[i].hash, ")");
  }
  return Status::Ok();
}

Status ResumeTrainer(const Checkpoint& checkpoint, const CheckpointModel& model, Trainer& trainer,
                     std::vector<std::string>* warnings) {
  const std::string where = StrCat("resuming from ", checkpoint.path);
  ONNXAMP_RETURN_IF_ERROR(CheckCheckpointModel(checkpoint, model));
  const Dataset& data = trainer.train_data();
  // The caller's hash when it has one of this kind (a run that also writes checkpoints computes it once).
  const std::string data_hash = !model.data_hash.empty() && model.hash == checkpoint.model.hash
                                    ? model.data_hash
                                    : CheckpointDataHash(data, checkpoint.model.hash);
  if (data.num_samples() != checkpoint.data_samples || data_hash != checkpoint.data_hash) {
    return InvalidArgument(where, ": the training data differs from the checkpoint's (", data.num_samples(),
                           " samples, ", HashName(checkpoint.model.hash), " ", data_hash, "; the checkpoint's ",
                           checkpoint.data_samples, " samples, ", checkpoint.data_hash, ")");
  }
  const nlohmann::json saved = nlohmann::json::parse(checkpoint.options_json, nullptr, false);
  const nlohmann::json now = nlohmann::json::parse(OptionsJson(trainer.options()).dump());
  // An option newer than the checkpoint was, for the run that wrote it, at its default.
  TrainerOptions default_options;
  default_options.optimizer = trainer.options().optimizer;
  const nlohmann::json defaults = nlohmann::json::parse(OptionsJson(default_options).dump());
  for (auto it = now.begin(); it != now.end(); ++it) {
    if (MayChangeOnResume(it.key())) continue;
    if (!saved.contains(it.key())) {
      if (defaults.contains(it.key()) && defaults[it.key()] == it.value()) continue;
      return InvalidArgument(where, ": option ", it.key(), " is ", it.value().dump(),
                             "; the checkpoint was written before the option existed, at its default ",
                             defaults.contains(it.key()) ? defaults[it.key()].dump() : "(none)");
    }
    if (saved[it.key()] != it.value()) {
      return InvalidArgument(where, ": option ", it.key(), " is ", it.value().dump(), ", the checkpoint's ",
                             saved[it.key()].dump(),
                             " (only --steps, --epochs, --threads and --recompute may change on resume)");
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

StatusOr<converter::PrecisionPolicy> CheckpointPolicy(const Checkpoint& checkpoint) {
  const nlohmann::json options = nlohmann::json::parse(checkpoint.options_json, nullptr, false);
  if (options.is_discarded() || !options.is_object() || !options.contains("amp_policy")) {
    return converter::PrecisionPolicy::Default();
  }
  return converter::PrecisionPolicy::FromJson(options["amp_policy"].dump(),
                                              StrCat(checkpoint.path, "/", kTrainerFile, ": amp_policy"));
}

StatusOr<LoraOptions> CheckpointLora(const Checkpoint& checkpoint) {
  LoraOptions lora;
  const nlohmann::json options = nlohmann::json::parse(checkpoint.options_json, nullptr, false);
  if (options.is_discarded() || !options.is_object() || !options.contains("lora_rank")) return lora;
  const std::string where = StrCat(checkpoint.path, "/", kTrainerFile);
  ONNXAMP_ASSIGN_OR_RETURN(lora.rank, Get<int64_t>(options, "lora_rank", where));
  if (!lora.enabled()) return lora;
  ONNXAMP_ASSIGN_OR_RETURN(lora.alpha, Get<double>(options, "lora_alpha", where));
  ONNXAMP_ASSIGN_OR_RETURN(lora.rslora, Get<bool>(options, "lora_rslora", where));
  ONNXAMP_ASSIGN_OR_RETURN(lora.targets, Get<std::string>(options, "lora_targets", where));
  ONNXAMP_ASSIGN_OR_RETURN(lora.dropout, Get<double>(options, "lora_dropout", where));
  ONNXAMP_ASSIGN_OR_RETURN(lora.train, Get<std::string>(options, "lora_train", where));
  return lora;
}

std::vector<ir::Tensor> CheckpointValues(const Checkpoint& checkpoint) {
  // A run with --ema exports the moving averages (Trainer::ExportValues): the checkpoint's export does too.
  for (const auto& [name, per_param] : checkpoint.state.optimizer_state) {
    if (name != kEmaState) continue;
    std::vector<ir::Tensor> values = per_param;
    for (const ir::Tensor& b : checkpoint.state.ema_buffers) values.push_back(b);
    return values;
  }
  std::vector<ir::Tensor> values = checkpoint.state.params;
  for (const ir::Tensor& b : checkpoint.state.buffers) values.push_back(b);
  return values;
}

}  // namespace onnxamp::trainer
