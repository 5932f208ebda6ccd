// Checkpoints: a run interrupted, saved, and resumed in a new trainer gives bit-identical losses and weights to an
// uninterrupted one (FP32 Adam with a cosine schedule across an epoch boundary, FP16 AMP with skipped steps after
// the save, a BatchNormalization model); corrupt, truncated and foreign checkpoints are refused; a failed write
// (injected, and a real full disk: a tmpfs in a mount namespace of the test's own) leaves the last good checkpoint
// intact and resumable; --keep-checkpoints prunes.
#include "trainer/checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "importer/model_io.h"
#include "importer/tensor_map.h"
#include "runtime/common/file_util.h"
#include "tests/tmpfs_child.h"
#include "tests/trainer/train_test_util.h"
#include "trainer/export.h"

namespace onnxamp::trainer {
namespace {

namespace fs = std::filesystem;

std::string ModelPath(const std::string& name) { return std::string(ONNXAMP_SOURCE_DIR) + "/models/" + name; }

using test_util::LoadReference;

CheckpointModel ModelFile(const std::string& name) {
  StatusOr<CheckpointModel> m = DescribeCheckpointModel(ModelPath(name), LoadReference(name));
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : CheckpointModel{};
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "onnxamp_ckpt_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (fs::path(path_) / name).string(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteText(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

Dataset Data(const ir::Model& model, std::vector<int64_t> sample_dims, int64_t n, int64_t classes, uint32_t seed) {
  return test_util::RandomClassData(model, std::move(sample_dims), n, classes, seed);
}

struct RunResult {
  std::vector<double> losses;
  std::vector<bool> skipped;
  std::vector<float> scales;
  std::vector<uint64_t> epochs;
  std::vector<ir::Tensor> values;
  TrainerState state;
};

std::unique_ptr<Trainer> MakeTrainer(const ir::Model& model, const TrainerOptions& o, const Dataset& data) {
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t).value() : nullptr;
}

// Steps `t` until it is done or has run `until` steps in all.
void StepUntil(Trainer& t, int64_t until, RunResult* r) {
  while (!t.Done() && t.State().steps_done < until) {
    StatusOr<StepRecord> s = t.Step();
    ASSERT_TRUE(s.ok()) << s.status().message();
    r->losses.push_back(s->loss);
    r->skipped.push_back(s->skipped);
    r->scales.push_back(s->loss_scale);
    r->epochs.push_back(s->epoch);
  }
}

void Finish(const Trainer& t, RunResult* r) {
  r->values = t.TrainedValues();
  r->state = t.State();
}

RunResult Uninterrupted(const ir::Model& model, const TrainerOptions& o, const Dataset& data) {
  RunResult r;
  std::unique_ptr<Trainer> t = MakeTrainer(model, o, data);
  if (!t) return r;
  StepUntil(*t, INT64_MAX, &r);
  Finish(*t, &r);
  return r;
}

// Runs `stop` steps, saves, drops the trainer, and finishes in a new one resumed from the checkpoint.
RunResult Interrupted(const std::string& model_name, const TrainerOptions& o, const Dataset& data, int64_t stop,
                      const std::string& dir) {
  const ir::Model model = LoadReference(model_name);
  const CheckpointModel file = ModelFile(model_name);
  RunResult r;
  {
    std::unique_ptr<Trainer> t = MakeTrainer(model, o, data);
    if (!t) return r;
    StepUntil(*t, stop, &r);
    StatusOr<std::string> saved = SaveCheckpoint(dir, *t, file);
    EXPECT_TRUE(saved.ok()) << saved.status().message();
  }
  const ir::Model reloaded = LoadReference(model_name);
  std::unique_ptr<Trainer> t = MakeTrainer(reloaded, o, data);
  if (!t) return r;
  StatusOr<Checkpoint> c = LoadCheckpoint(dir);
  EXPECT_TRUE(c.ok()) << c.status().message();
  if (!c.ok()) return r;
  EXPECT_EQ(c->step, stop);
  std::vector<std::string> warnings;
  Status st = ResumeTrainer(*c, file, *t, &warnings);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(warnings.empty());
  // The restored trainer keeps nothing of the mapped state file.
  for (const ir::Tensor& b : t->StateView().buffers) EXPECT_FALSE(importer::IsMapped(b)) << b.name();
  StepUntil(*t, INT64_MAX, &r);
  Finish(*t, &r);
  return r;
}

void ExpectIdentical(const RunResult& a, const RunResult& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) {
    EXPECT_EQ(a.losses[i], b.losses[i]) << "step " << i + 1;  // bit for bit
    EXPECT_EQ(a.skipped[i], b.skipped[i]) << "step " << i + 1;
    EXPECT_EQ(a.scales[i], b.scales[i]) << "step " << i + 1;
    EXPECT_EQ(a.epochs[i], b.epochs[i]) << "step " << i + 1;
  }
  ASSERT_EQ(a.values.size(), b.values.size());
  for (size_t i = 0; i < a.values.size(); ++i) {
    EXPECT_TRUE(a.values[i].SameContents(b.values[i])) << a.values[i].name();
  }
  EXPECT_EQ(a.state.steps_done, b.state.steps_done);
  EXPECT_EQ(a.state.steps_taken, b.state.steps_taken);
  EXPECT_EQ(a.state.rng_step, b.state.rng_step);
  EXPECT_EQ(a.state.cursor, b.state.cursor);
  EXPECT_EQ(a.state.step_counts, b.state.step_counts);
  ASSERT_EQ(a.state.optimizer_state.size(), b.state.optimizer_state.size());
  for (size_t s = 0; s < a.state.optimizer_state.size(); ++s) {
    for (size_t i = 0; i < a.state.optimizer_state[s].second.size(); ++i) {
      EXPECT_TRUE(a.state.optimizer_state[s].second[i].SameContents(b.state.optimizer_state[s].second[i]))
          << a.state.optimizer_state[s].first << " " << i;
    }
  }
  ASSERT_EQ(a.state.scaler.has_value(), b.state.scaler.has_value());
  if (a.state.scaler) {
    EXPECT_EQ(a.state.scaler->scale, b.state.scaler->scale);
    EXPECT_EQ(a.state.scaler->growth_tracker, b.state.scaler->growth_tracker);
  }
}

TrainerOptions MlpOptions(int64_t steps) {
  TrainerOptions o;
  o.steps = steps;
  o.batch_size = 16;
  o.threads = 1;
  o.seed = 7;
  o.optimizer = OptimizerKind::kAdam;
  o.adam = AdamOptions();
  o.adam.weight_decay = 1e-4;
  o.schedule.kind = LrScheduleKind::kCosine;
  o.schedule.base_lr = 0.01;
  o.schedule.warmup_steps = 2;
  return o;
}

// FP32 Adam, cosine schedule after a warm-up, shuffled batches: 50 samples in batches of 16 (4 batches an epoch, the
// last of 2), interrupted mid-epoch at step 6 and finished across the next epoch boundary.
TEST(Checkpoint, ResumeIsBitIdenticalFp32AdamCosine) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 50, 10, 1);
  const TrainerOptions o = MlpOptions(11);
  const RunResult full = Uninterrupted(model, o, data);
  ASSERT_EQ(full.losses.size(), 11u);
  EXPECT_EQ(full.epochs[5], 1u);
  EXPECT_EQ(full.epochs[10], 2u);  // the resumed part crosses into epoch 2
  TempDir dir;
  const RunResult resumed = Interrupted("digits_mlp.onnx", o, data, 6, dir.path());
  ExpectIdentical(full, resumed);
  EXPECT_FALSE(full.state.optimizer_state.empty());
}

// FP16 AMP with dynamic loss scaling that grows after every clean step: the scale overflows FP16 again and again,
// so steps after the save are skipped (no update, no schedule step) and the GradScaler's state must resume exactly.
TEST(Checkpoint, ResumeIsBitIdenticalFp16AmpWithSkippedSteps) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 50, 10, 2);
  TrainerOptions o = MlpOptions(14);
  o.optimizer = OptimizerKind::kAdamW;
  o.adam = AdamWDefaults();
  o.graph.amp = DType::kFloat16;
  o.scaler.init_scale = 65536.0 * 64;
  o.scaler.growth_interval = 1;
  const RunResult full = Uninterrupted(model, o, data);
  ASSERT_EQ(full.losses.size(), 14u);
  constexpr int64_t kStop = 5;
  int skipped_after = 0, taken_after = 0;
  for (size_t i = kStop; i < full.skipped.size(); ++i) (full.skipped[i] ? skipped_after : taken_after)++;
  EXPECT_GT(skipped_after, 0) << "no skipped step after the save: the test checks nothing about the scaler";
  EXPECT_GT(taken_after, 0);
  TempDir dir;
  const RunResult resumed = Interrupted("digits_mlp.onnx", o, data, kStop, dir.path());
  ExpectIdentical(full, resumed);
  ASSERT_TRUE(resumed.state.scaler.has_value());
  // trainer.json holds GradScaler.state_dict()'s five keys.
  const std::string json = ReadText(dir / "step-00000005/trainer.json");
  for (const char* key :
       {"\"scale\"", "\"growth_factor\"", "\"backoff_factor\"", "\"growth_interval\"", "\"_growth_tracker\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key;
  }
}

// BatchNormalization's running statistics (buffers) and SGD's momentum buffers resume exactly.
TEST(Checkpoint, ResumeIsBitIdenticalWithBatchNorm) {
  const ir::Model model = LoadReference("cnn.onnx");
  const Dataset data = Data(model, {3, 32, 32}, 10, 10, 3);
  TrainerOptions o;
  o.steps = 4;
  o.batch_size = 4;
  o.threads = 1;
  o.optimizer = OptimizerKind::kSgd;
  o.sgd.momentum = 0.9;
  o.schedule.kind = LrScheduleKind::kStep;
  o.schedule.base_lr = 0.05;
  o.schedule.step_size = 2;
  const RunResult full = Uninterrupted(model, o, data);
  ASSERT_FALSE(full.state.buffers.empty());
  TempDir dir;
  const RunResult resumed = Interrupted("cnn.onnx", o, data, 2, dir.path());
  ExpectIdentical(full, resumed);
  StatusOr<Checkpoint> c = LoadCheckpoint(dir.path());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->state.buffers.size(), full.state.buffers.size());
  std::unique_ptr<Trainer> fresh = MakeTrainer(model, o, data);
  ASSERT_TRUE(fresh);
  const std::vector<ir::Tensor> initial = fresh->State().buffers;
  // The saved statistics are the ones after step 2, not the initial ones.
  EXPECT_FALSE(c->state.buffers[0].SameContents(initial[0]));
}

// A trained run's checkpoint: the helper for the error tests.
struct Saved {
  TempDir dir;
  std::string step_dir;
};

void SaveAfter(int64_t steps, const TrainerOptions& o, const Dataset& data, Saved* s) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  std::unique_ptr<Trainer> t = MakeTrainer(model, o, data);
  ASSERT_TRUE(t);
  RunResult r;
  StepUntil(*t, steps, &r);
  StatusOr<std::string> saved = SaveCheckpoint(s->dir.path(), *t, ModelFile("digits_mlp.onnx"));
  ASSERT_TRUE(saved.ok()) << saved.status().message();
  s->step_dir = *saved;
}

std::string LoadError(const std::string& path) {
  StatusOr<Checkpoint> c = LoadCheckpoint(path);
  EXPECT_FALSE(c.ok());
  if (c.ok()) return "";
  EXPECT_EQ(c.status().message().find('\n'), std::string::npos) << c.status().message();
  return c.status().message();
}

TEST(Checkpoint, CorruptTruncatedAndForeignCheckpointsAreRefused) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 40, 10, 4);
  const TrainerOptions o = MlpOptions(4);
  Saved s;
  SaveAfter(2, o, data, &s);
  ASSERT_EQ(s.step_dir, s.dir / "step-00000002");
  ASSERT_TRUE(LoadCheckpoint(s.dir.path()).ok());
  ASSERT_TRUE(LoadCheckpoint(s.step_dir).ok());

  // Another model.
  StatusOr<Checkpoint> c = LoadCheckpoint(s.dir.path());
  ASSERT_TRUE(c.ok());
  EXPECT_NE(CheckCheckpointModel(*c, ModelFile("mlp.onnx")).message().find("is of another model"), std::string::npos);
  std::unique_ptr<Trainer> t = MakeTrainer(model, o, data);
  ASSERT_TRUE(t);
  EXPECT_NE(ResumeTrainer(*c, ModelFile("mlp.onnx"), *t, nullptr).message().find("another model"), std::string::npos);
  // Other data, other options; the allowed changes.
  {
    std::unique_ptr<Trainer> other = MakeTrainer(model, o, Data(model, {64}, 40, 10, 5));
    ASSERT_TRUE(other);
    EXPECT_NE(ResumeTrainer(*c, c->model, *other, nullptr).message().find("the training data differs"),
              std::string::npos);
    TrainerOptions lr = o;
    lr.schedule.base_lr = 0.02;
    other = MakeTrainer(model, lr, data);
    const std::string msg = ResumeTrainer(*c, c->model, *other, nullptr).message();
    EXPECT_NE(msg.find("option lr is 0.02, the checkpoint's 0.01"), std::string::npos) << msg;
    TrainerOptions longer = o;
    longer.steps = 9;
    longer.threads = 2;
    other = MakeTrainer(model, longer, data);
    std::vector<std::string> warnings;
    EXPECT_TRUE(ResumeTrainer(*c, c->model, *other, &warnings).ok());
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("resuming with 2 threads, the checkpoint was written with 1"), std::string::npos);
    EXPECT_EQ(other->State().steps_done, 2);
  }

  const std::string state = s.step_dir + "/state.safetensors";
  const std::string good = ReadText(state);
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x40;
  WriteText(state, flipped);
  EXPECT_NE(LoadError(s.dir.path()).find("state.safetensors: contents do not match the recorded hash (corrupt)"),
            std::string::npos);
  WriteText(state, good.substr(0, good.size() - 10));
  EXPECT_NE(LoadError(s.dir.path()).find("(truncated)"), std::string::npos);
  std::remove(state.c_str());
  EXPECT_NE(LoadError(s.dir.path()).find("state.safetensors: cannot open"), std::string::npos);
  WriteText(state, good);
  ASSERT_TRUE(LoadCheckpoint(s.dir.path()).ok());

  const std::string json = s.step_dir + "/trainer.json";
  const std::string good_json = ReadText(json);
  WriteText(json, good_json.substr(0, good_json.size() / 2));
  EXPECT_NE(LoadError(s.dir.path()).find("trainer.json: not valid JSON"), std::string::npos);
  WriteText(json, good_json);
  const std::string model_file = s.step_dir + "/model.onnx";
  const std::string good_model = ReadText(model_file);
  WriteText(model_file, good_model + "x");
  EXPECT_NE(LoadError(s.dir.path()).find("model.onnx"), std::string::npos);
  WriteText(model_file, good_model);
  WriteText(s.dir / "latest", "../../etc\n");
  EXPECT_NE(LoadError(s.dir.path()).find("is not a step folder name"), std::string::npos);
  EXPECT_NE(LoadError(s.dir / "nothing").find("not a checkpoint"), std::string::npos);
}

// The plateau schedule's state in trainer.json: saved under ReduceLROnPlateau's names ("best" null before any
// evaluation), restored on resume, and a malformed or impossible entry refused with a one-line error.
TEST(Checkpoint, PlateauStateIsSavedCheckedAndRestored) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 40, 10, 4);
  TrainerOptions o = MlpOptions(4);
  o.schedule = LrScheduleOptions();
  o.schedule.kind = LrScheduleKind::kPlateau;
  o.schedule.base_lr = 0.01;
  Saved s;
  SaveAfter(2, o, data, &s);
  const std::string json = s.step_dir + "/trainer.json";
  const std::string good = ReadText(json);
  EXPECT_NE(good.find("\"plateau\": {"), std::string::npos) << good;
  EXPECT_NE(good.find("\"best\": null"), std::string::npos) << good;
  StatusOr<Checkpoint> c = LoadCheckpoint(s.dir.path());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->state.plateau.has_value());
  EXPECT_EQ(c->state.plateau->lr, 0.01);
  EXPECT_FALSE(c->state.plateau->best.has_value());
  std::unique_ptr<Trainer> t = MakeTrainer(model, o, data);
  ASSERT_TRUE(t);
  ASSERT_TRUE(ResumeTrainer(*c, c->model, *t, nullptr).ok());

  auto replace = [&](const std::string& from, const std::string& to) {
    std::string edited = good;
    const size_t at = edited.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) edited.replace(at, from.size(), to);
    WriteText(json, edited);
  };
  replace("\"best\": null", "\"best\": \"low\"");
  EXPECT_NE(LoadError(s.dir.path()).find("lr_schedule.plateau"), std::string::npos);
  replace("\"num_bad_epochs\": 0", "\"num_bad_epochs\": -3");
  c = LoadCheckpoint(s.dir.path());
  ASSERT_TRUE(c.ok()) << c.status().message();
  t = MakeTrainer(model, o, data);
  ASSERT_TRUE(t);
  EXPECT_NE(ResumeTrainer(*c, c->model, *t, nullptr).message().find("negative plateau counters"), std::string::npos);
  WriteText(json, good);
}

// A write that fails (as on a full disk) at any file of a save: a one-line error, no temporary folder left, `latest`
// still naming the previous checkpoint, which resumes to the uninterrupted run's result.
TEST(Checkpoint, FailedWriteKeepsTheLastGoodCheckpoint) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 40, 10, 6);
  const TrainerOptions o = MlpOptions(6);
  const RunResult full = Uninterrupted(model, o, data);
  const CheckpointModel file = ModelFile("digits_mlp.onnx");
  for (const char* failing : {"model.onnx", "state.safetensors", "trainer.json", "latest"}) {
    SCOPED_TRACE(failing);
    TempDir dir;
    RunResult first;
    {
      std::unique_ptr<Trainer> t = MakeTrainer(model, o, data);
      ASSERT_TRUE(t);
      StepUntil(*t, 2, &first);
      ASSERT_TRUE(SaveCheckpoint(dir.path(), *t, file).ok());
      StepUntil(*t, 4, &first);
      SetCheckpointWriteHookForTesting([&](const std::string& path) -> Status {
        if (fs::path(path).filename() == failing) return IoError(path, ": write failed: No space left on device");
        return Status::Ok();
      });
      StatusOr<std::string> saved = SaveCheckpoint(dir.path(), *t, file);
      SetCheckpointWriteHookForTesting(nullptr);
      ASSERT_FALSE(saved.ok());
      EXPECT_NE(saved.status().message().find("No space left on device"), std::string::npos);
      EXPECT_EQ(saved.status().message().find('\n'), std::string::npos);
    }
    EXPECT_EQ(ReadText(dir / "latest"), "step-00000002\n");
    for (const fs::directory_entry& e : fs::directory_iterator(dir.path())) {
      const std::string name = e.path().filename().string();
      EXPECT_TRUE(name == "latest" || name.rfind("step-", 0) == 0) << name;
    }
    // Resumed from what `latest` names (step 2), the run ends as the uninterrupted one did.
    std::unique_ptr<Trainer> t = MakeTrainer(model, o, data);
    StatusOr<Checkpoint> c = LoadCheckpoint(dir.path());
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->step, 2);
    ASSERT_TRUE(ResumeTrainer(*c, file, *t, nullptr).ok());
    RunResult rest;
    rest.losses = {full.losses[0], full.losses[1]};
    rest.skipped = {full.skipped[0], full.skipped[1]};
    rest.scales = {full.scales[0], full.scales[1]};
    rest.epochs = {full.epochs[0], full.epochs[1]};
    StepUntil(*t, INT64_MAX, &rest);
    Finish(*t, &rest);
    ExpectIdentical(full, rest);
  }
}

// Names in `dir`, sorted and joined by ",".
std::string Listing(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ",") + n;
  return s;
}

// A real full disk: a tmpfs (in a mount namespace of the test's own) just large enough that the second save runs out
// of space at each of the files it writes in turn. Each time: a one-line error naming the file and the OS's reason,
// nothing of the failed save left (the space is free again), `latest` naming the good checkpoint, which loads and
// resumes to the uninterrupted run's result. A model written to a full disk (as `onnxamp train -o` and `onnxamp export`
// write it): an error naming it, the previous file intact, no temporary file left.
TEST(Checkpoint, FullDiskKeepsTheLastGoodCheckpoint) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 40, 10, 6);
  const TrainerOptions o = MlpOptions(6);
  const RunResult full = Uninterrupted(model, o, data);
  const CheckpointModel file = ModelFile("digits_mlp.onnx");
  RunResult first;
  std::unique_ptr<Trainer> at2 = MakeTrainer(model, o, data);
  std::unique_ptr<Trainer> at4 = MakeTrainer(model, o, data);
  ASSERT_TRUE(at2 && at4);
  StepUntil(*at2, 2, &first);
  RunResult ignored;
  StepUntil(*at4, 4, &ignored);
  // The sizes the step-4 save will write, from a save of it on the ordinary disk. Its model.onnx takes no room: it is
  // hard-linked from step 2's.
  TempDir work;
  ASSERT_TRUE(SaveCheckpoint(work / "sizes", *at4, file).ok());
  const std::vector<std::string> files = {"state.safetensors", "trainer.json"};
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<uint64_t> pages;  // of each file, then of `latest`
  for (const std::string& f : files)
    pages.push_back((fs::file_size(work / "sizes/step-00000004/" + f) + page - 1) / page);
  pages.push_back(1);
  const std::string mount = work / "disk";
  const std::string dir = mount + "/ckpt";
  const std::string copy = work / "copy";
  ASSERT_TRUE(fs::create_directory(mount));

  const tmpfs_child::TmpfsChildReport child =
      tmpfs_child::RunWithTmpfs(mount, 16u << 20, [&](std::map<std::string, std::string>& report) {
        StatusOr<std::string> good = SaveCheckpoint(dir, *at2, file);
        report["good"] = good.ok() ? "ok" : good.status().message();
        const uint64_t used = tmpfs_child::UsedBytes(mount);
        uint64_t room = 0;  // pages the failing save may fill before the file it fails at
        for (size_t i = 0; i < pages.size(); ++i) {
          const std::string target = i < files.size() ? files[i] : "latest";
          report[target + ".resize"] = tmpfs_child::ResizeTmpfs(mount, used + room * page);
          StatusOr<std::string> saved = SaveCheckpoint(dir, *at4, file);
          report[target + ".error"] = saved.ok() ? "saved" : saved.status().message();
          report[target + ".listing"] = Listing(dir);
          report[target + ".latest"] = ReadText(dir + "/latest");
          report[target + ".freed"] = tmpfs_child::UsedBytes(mount) == used ? "yes" : "no";
          StatusOr<Checkpoint> loaded = LoadCheckpoint(dir);
          report[target + ".load"] = loaded.ok() ? std::to_string(loaded->step) : loaded.status().message();
          room += pages[i];
        }
        // A model written to a full disk over an earlier one.
        tmpfs_child::ResizeTmpfs(mount, 16u << 20);
        const std::string out = mount + "/out.onnx";
        const Status first_write = importer::SaveModel(model, out);
        report["model.first"] = first_write.ok() ? "ok" : first_write.message();
        const std::string before = ReadText(out);
        report["model.resize"] = tmpfs_child::ResizeTmpfs(mount, tmpfs_child::UsedBytes(mount) + 2 * page);
        const Status again = importer::SaveModel(model, out);
        report["model.error"] = again.ok() ? "saved" : again.message();
        report["model.intact"] = ReadText(out) == before ? "yes" : "no";
        report["model.listing"] = Listing(mount);
        std::error_code ec;
        fs::copy(dir, copy, fs::copy_options::recursive, ec);
        report["copy"] = ec ? ec.message() : "ok";
      });
  if (!child.skip.empty()) GTEST_SKIP() << "cannot set up a tmpfs: " << child.skip;
  ASSERT_TRUE(child.failure.empty()) << child.failure;
  auto value = [&](const std::string& key) {
    auto it = child.values.find(key);
    return it == child.values.end() ? "<" + key + " not reported>" : it->second;
  };
  EXPECT_EQ(value("good"), "ok");
  for (size_t i = 0; i <= files.size(); ++i) {
    const std::string target = i < files.size() ? files[i] : "latest";
    SCOPED_TRACE(target);
    EXPECT_EQ(value(target + ".resize"), "");
    const std::string path = i < files.size() ? dir + "/step-00000004/" + target : dir + "/latest";
    EXPECT_EQ(value(target + ".error"), path + ": write failed: No space left on device");
    EXPECT_EQ(value(target + ".listing"), "latest,step-00000002");
    EXPECT_EQ(value(target + ".latest"), "step-00000002\n");
    EXPECT_EQ(value(target + ".freed"), "yes");
    EXPECT_EQ(value(target + ".load"), "2");
  }
  EXPECT_EQ(value("model.first"), "ok");
  EXPECT_EQ(value("model.resize"), "");
  EXPECT_NE(value("model.error").find(mount + "/out.onnx"), std::string::npos) << value("model.error");
  EXPECT_NE(value("model.error").find("No space left on device"), std::string::npos) << value("model.error");
  EXPECT_EQ(value("model.error").find('\n'), std::string::npos) << value("model.error");
  EXPECT_EQ(value("model.intact"), "yes");
  EXPECT_EQ(value("model.listing"), "ckpt,out.onnx");
  ASSERT_EQ(value("copy"), "ok");

  // The checkpoint the full disk left, resumed here, ends as the uninterrupted run did.
  std::unique_ptr<Trainer> t = MakeTrainer(model, o, data);
  ASSERT_TRUE(t);
  StatusOr<Checkpoint> c = LoadCheckpoint(copy);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->step, 2);
  ASSERT_TRUE(ResumeTrainer(*c, file, *t, nullptr).ok());
  RunResult rest = first;
  StepUntil(*t, INT64_MAX, &rest);
  Finish(*t, &rest);
  ExpectIdentical(full, rest);
}

TEST(Checkpoint, KeepPrunesTheOldestAndSavingAStepAgainReplacesIt) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 40, 10, 7);
  const TrainerOptions o = MlpOptions(5);
  const CheckpointModel file = ModelFile("digits_mlp.onnx");
  TempDir dir;
  std::unique_ptr<Trainer> t = MakeTrainer(model, o, data);
  ASSERT_TRUE(t);
  RunResult r;
  for (int64_t s = 1; s <= 5; ++s) {
    StepUntil(*t, s, &r);
    ASSERT_TRUE(SaveCheckpoint(dir.path(), *t, file, 2).ok());
  }
  ASSERT_TRUE(SaveCheckpoint(dir.path(), *t, file, 2).ok());  // step 5 again
  // Every save after the first hard-links the model file from the previous checkpoint: one file on the disk.
  struct stat a {};
  struct stat b {};
  ASSERT_EQ(::stat((dir / "step-00000004/model.onnx").c_str(), &a), 0);
  ASSERT_EQ(::stat((dir / "step-00000005/model.onnx").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(a.st_nlink, 2u);
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"latest", "step-00000004", "step-00000005"}));
  EXPECT_EQ(ReadText(dir / "latest"), "step-00000005\n");
  StatusOr<Checkpoint> c = LoadCheckpoint(dir.path());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->step, 5);
}

// LockCheckpointDir: a second holder is refused while the first lives; what killed saves left is repaired: temporary
// step folders and `latest` files removed, a step folder moved aside to be replaced moved back when its replacement
// never arrived (and removed when it did), and the checkpoint loads as before.
TEST(Checkpoint, LockingAFolderRefusesASecondRunAndRepairsKilledSaves) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 40, 10, 7);
  const CheckpointModel file = ModelFile("digits_mlp.onnx");
  TempDir dir;
  std::unique_ptr<Trainer> t = MakeTrainer(model, MlpOptions(5), data);
  ASSERT_TRUE(t);
  RunResult r;
  for (int64_t s = 1; s <= 2; ++s) {
    StepUntil(*t, s, &r);
    ASSERT_TRUE(SaveCheckpoint(dir.path(), *t, file).ok());
  }
  {
    std::vector<std::string> repaired;
    StatusOr<CheckpointDirLock> lock = LockCheckpointDir(dir.path(), &repaired);
    ASSERT_TRUE(lock.ok()) << lock.status().message();
    EXPECT_TRUE(repaired.empty());
    StatusOr<CheckpointDirLock> second = LockCheckpointDir(dir.path(), &repaired);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().message(),
              "checkpoint " + dir.path() + ": another run is writing checkpoints into this folder");
  }
  // The first lock is gone with its holder. A save of step 2 killed after moving step 2 aside, one of step 3 killed
  // while writing, and a `latest` replacement killed before its rename:
  fs::rename(dir / "step-00000002", dir / ".old-step-00000002");
  fs::create_directories(dir / ".tmp-step-00000003-AbC123");
  WriteText(dir / ".tmp-step-00000003-AbC123/model.onnx", "half");
  WriteText(dir / "latest.tmp-Xy9876", "step-0000");
  fs::create_directories(dir / ".old-step-00000001");  // replaced after all: step-00000001 exists
  std::vector<std::string> repaired;
  StatusOr<CheckpointDirLock> lock = LockCheckpointDir(dir.path(), &repaired);
  ASSERT_TRUE(lock.ok()) << lock.status().message();
  EXPECT_EQ(repaired, (std::vector<std::string>{
                          "removed " + (dir / ".old-step-00000001") + ", left by an interrupted save",
                          "moved " + (dir / ".old-step-00000002") + " back to " + (dir / "step-00000002") +
                              ": its replacement was interrupted",
                          "removed " + (dir / ".tmp-step-00000003-AbC123") + ", left by an interrupted save",
                          "removed " + (dir / "latest.tmp-Xy9876") + ", left by an interrupted save"}));
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"latest", "step-00000001", "step-00000002"}));
  StatusOr<Checkpoint> c = LoadCheckpoint(dir.path());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->step, 2);
}

// Where the file system has no hard links, a save copies the model file from the previous checkpoint instead (checked
// against its hash), and from the run's own model file when that copy is damaged.
TEST(Checkpoint, WithoutHardLinksTheModelFileIsCopied) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 40, 10, 7);
  const CheckpointModel file = ModelFile("digits_mlp.onnx");
  TempDir dir;
  std::unique_ptr<Trainer> t = MakeTrainer(model, MlpOptions(3), data);
  ASSERT_TRUE(t);
  int links = 0;
  SetCheckpointLinkForTesting([&](const char*, const char*) {
    ++links;
    errno = EPERM;
    return -1;
  });
  RunResult r;
  StepUntil(*t, 1, &r);
  Status first = SaveCheckpoint(dir.path(), *t, file, 0).status();
  StepUntil(*t, 2, &r);
  Status second = SaveCheckpoint(dir.path(), *t, file, 0).status();
  // The previous checkpoint's copy damaged: the third save copies the source model instead, and says nothing.
  {
    const std::string damaged = dir / "step-00000002/model.onnx";
    std::string bytes = ReadText(damaged);
    bytes[bytes.size() / 2] ^= 0x5a;
    ::chmod(damaged.c_str(), 0644);
    WriteText(damaged, bytes);
  }
  StepUntil(*t, 3, &r);
  Status third = SaveCheckpoint(dir.path(), *t, file, 0).status();
  SetCheckpointLinkForTesting(nullptr);
  ASSERT_TRUE(first.ok()) << first.message();
  ASSERT_TRUE(second.ok()) << second.message();
  ASSERT_TRUE(third.ok()) << third.message();
  EXPECT_EQ(links, 2);  // tried by the second and third saves
  struct stat a {};
  struct stat b {};
  ASSERT_EQ(::stat((dir / "step-00000001/model.onnx").c_str(), &a), 0);
  ASSERT_EQ(::stat((dir / "step-00000002/model.onnx").c_str(), &b), 0);
  EXPECT_NE(a.st_ino, b.st_ino);
  EXPECT_EQ(b.st_nlink, 1u);
  const std::string source = ReadText(file.source);
  EXPECT_EQ(ReadText(dir / "step-00000001/model.onnx"), source);
  EXPECT_EQ(ReadText(dir / "step-00000003/model.onnx"), source);
  StatusOr<Checkpoint> c = LoadCheckpoint(dir.path());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->step, 3);
  EXPECT_TRUE(CheckCheckpointModel(*c, file).ok());
}

// The checkpoint's values exported are the trainer's trained values exported.
TEST(Checkpoint, ExportFromCheckpointEqualsExportFromTrainer) {
  const ir::Model model = LoadReference("cnn.onnx");
  const Dataset data = Data(model, {3, 32, 32}, 8, 10, 8);
  TrainerOptions o;
  o.steps = 2;
  o.batch_size = 4;
  o.threads = 1;
  o.graph.amp = DType::kFloat16;
  std::unique_ptr<Trainer> t = MakeTrainer(model, o, data);
  ASSERT_TRUE(t);
  while (!t->Done()) ASSERT_TRUE(t->Step().ok());
  TempDir dir;
  ASSERT_TRUE(SaveCheckpoint(dir.path(), *t, ModelFile("cnn.onnx")).ok());
  StatusOr<Checkpoint> c = LoadCheckpoint(dir.path());
  ASSERT_TRUE(c.ok()) << c.status().message();
  StatusOr<ir::Model> stored = importer::LoadModel(c->model_path);
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  for (DType precision : {DType::kFloat32, DType::kFloat16}) {
    StatusOr<ir::Model> a = ExportTrainedModel(model, t->TrainedValues(), {precision, true});
    StatusOr<ir::Model> b = ExportTrainedModel(*stored, CheckpointValues(*c), {precision, true});
    ASSERT_TRUE(a.ok() && b.ok());
    for (const ir::Tensor& v : t->TrainedValues()) {
      const ir::Value* va = a->graph->FindValue(v.name());
      const ir::Value* vb = b->graph->FindValue(v.name());
      ASSERT_TRUE(va && vb && va->initializer() && vb->initializer()) << v.name();
      EXPECT_TRUE(va->initializer()->SameContents(*vb->initializer())) << v.name();
    }
  }
}

// A trainer of digits_mlp on 40 random samples (`seed`) for `total` steps, after its first `steps` (their records in
// `r`); null when it cannot be made.
std::unique_ptr<Trainer> DigitsTrainedFor(int64_t steps, int64_t total, uint32_t seed, RunResult* r) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  std::unique_ptr<Trainer> t = MakeTrainer(model, MlpOptions(total), Data(model, {64}, 40, 10, seed));
  if (t) StepUntil(*t, steps, r);
  return t;
}

// SaveCheckpoint writes the trainer's state from views of its memory (StateView), which hold what State copies;
// LoadCheckpoint maps the state file, so the loaded tensors are views of the mapping where they are 16-byte aligned.
TEST(Checkpoint, StateViewsAndTheMappedStateHoldTheState) {
  RunResult r;
  std::unique_ptr<Trainer> t = DigitsTrainedFor(2, 3, 10, &r);
  ASSERT_TRUE(t);
  const TrainerState copy = t->State();
  const TrainerState view = t->StateView();
  auto same = [](const std::vector<ir::Tensor>& a, const std::vector<ir::Tensor>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name(), b[i].name());
      EXPECT_TRUE(a[i].SameContents(b[i])) << a[i].name();
    }
  };
  same(copy.params, view.params);
  ASSERT_EQ(copy.optimizer_state.size(), 2u);  // AdamW's two moments
  ASSERT_EQ(view.optimizer_state.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(copy.optimizer_state[k].first, view.optimizer_state[k].first);
    same(copy.optimizer_state[k].second, view.optimizer_state[k].second);
  }
  // The views are the trainer's memory: a step changes them, not the copy.
  const ir::Tensor before = copy.params[0];
  StepUntil(*t, 3, &r);
  EXPECT_FALSE(view.params[0].SameContents(before));
  EXPECT_TRUE(view.params[0].SameContents(t->State().params[0]));

  TempDir dir;
  ASSERT_TRUE(SaveCheckpoint(dir.path(), *t, ModelFile("digits_mlp.onnx")).ok());
  StatusOr<Checkpoint> c = LoadCheckpoint(dir.path());
  ASSERT_TRUE(c.ok()) << c.status().message();
  const TrainerState now = t->State();
  same(c->state.params, now.params);
  int mapped = 0;
  for (const ir::Tensor& p : c->state.params) mapped += importer::IsMapped(p) ? 1 : 0;
  EXPECT_GT(mapped, 0);
}

// Checkpoints of format version 1 record FNV-1a 64 checksums (SaveCheckpoint still writes one for a model described
// with them); they load, and a run whose model is described with CRC32C (version 2) resumes from them to the
// uninterrupted run's result, its files and data hashed again in FNV-1a for the comparison.
TEST(Checkpoint, Version1CheckpointsWithFnvChecksumsAreStillRead) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 40, 10, 11);
  const TrainerOptions o = MlpOptions(5);
  const RunResult full = Uninterrupted(model, o, data);
  StatusOr<CheckpointModel> fnv =
      DescribeCheckpointModel(ModelPath("digits_mlp.onnx"), model, CheckpointHash::kFnv1a64);
  ASSERT_TRUE(fnv.ok()) << fnv.status().message();
  const CheckpointModel crc = ModelFile("digits_mlp.onnx");
  EXPECT_EQ(fnv->files[0].hash.size(), 16u);
  EXPECT_EQ(crc.files[0].hash.size(), 8u);
  TempDir dir;
  RunResult first;
  {
    std::unique_ptr<Trainer> t = MakeTrainer(model, o, data);
    ASSERT_TRUE(t);
    StepUntil(*t, 2, &first);
    ASSERT_TRUE(SaveCheckpoint(dir.path(), *t, *fnv).ok());
  }
  const std::string json = ReadText(dir / "step-00000002/trainer.json");
  EXPECT_NE(json.find("\"version\": 1,"), std::string::npos);
  EXPECT_NE(json.find("\"fnv1a64\""), std::string::npos);
  EXPECT_EQ(json.find("\"crc32c\""), std::string::npos);
  StatusOr<Checkpoint> c = LoadCheckpoint(dir.path());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->model.hash, CheckpointHash::kFnv1a64);
  std::unique_ptr<Trainer> t = MakeTrainer(model, o, data);
  ASSERT_TRUE(t);
  const Status resumed = ResumeTrainer(*c, crc, *t, nullptr);
  ASSERT_TRUE(resumed.ok()) << resumed.message();
  EXPECT_NE(CheckCheckpointModel(*c, ModelFile("mlp.onnx")).message().find("is of another model"), std::string::npos);
  // The next save into the folder is a version 2 checkpoint (its model copied, not linked from the version 1 one).
  RunResult rest = first;
  StepUntil(*t, 3, &rest);
  ASSERT_TRUE(SaveCheckpoint(dir.path(), *t, crc).ok());
  EXPECT_NE(ReadText(dir / "step-00000003/trainer.json").find("\"version\": 2,"), std::string::npos);
  struct stat a {};
  struct stat b {};
  ASSERT_EQ(::stat((dir / "step-00000002/model.onnx").c_str(), &a), 0);
  ASSERT_EQ(::stat((dir / "step-00000003/model.onnx").c_str(), &b), 0);
  EXPECT_NE(a.st_ino, b.st_ino);
  StepUntil(*t, INT64_MAX, &rest);
  Finish(*t, &rest);
  ExpectIdentical(full, rest);
  // A version this build does not know.
  std::string future = ReadText(dir / "step-00000003/trainer.json");
  future.replace(future.find("\"version\": 2,"), 13, "\"version\": 3,");
  WriteText(dir / "step-00000003/trainer.json", future);
  EXPECT_NE(LoadError(dir.path()).find("version 3, expected 'onnxamp.checkpoint' version 1 to 2"), std::string::npos);
}

// An option added after a checkpoint was written (its trainer.json has no such key) was at its default for that run:
// a resume at the default goes on, one that sets the option is refused, naming it.
TEST(Checkpoint, OptionsNewerThanTheCheckpointMustBeAtTheirDefault) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Data(model, {64}, 40, 10, 12);
  const TrainerOptions o = MlpOptions(4);
  Saved s;
  SaveAfter(2, o, data, &s);
  const std::string json_path = s.step_dir + "/trainer.json";
  std::string json = ReadText(json_path);
  const std::string key = "\"label_smoothing\": 0.0,";
  const size_t at = json.find(key);
  ASSERT_NE(at, std::string::npos) << json;
  json.erase(at, key.size());
  WriteText(json_path, json);
  StatusOr<Checkpoint> c = LoadCheckpoint(s.dir.path());
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::unique_ptr<Trainer> t = MakeTrainer(model, o, data);
  ASSERT_TRUE(t);
  const Status ok = ResumeTrainer(*c, ModelFile("digits_mlp.onnx"), *t, nullptr);
  EXPECT_TRUE(ok.ok()) << ok.message();
  TrainerOptions smoothing = o;
  smoothing.graph.loss.label_smoothing = 0.1;
  t = MakeTrainer(model, smoothing, data);
  ASSERT_TRUE(t);
  EXPECT_EQ(ResumeTrainer(*c, ModelFile("digits_mlp.onnx"), *t, nullptr).message(),
            "resuming from " + s.step_dir +
                ": option label_smoothing is 0.1; the checkpoint was written before the option existed, at its "
                "default 0.0");
}

// The best evaluation of --keep-best / --early-stop, saved with a checkpoint: its numbers in trainer.json, its values
// in best.safetensors (mapped when loaded); checked like the state.
TEST(Checkpoint, BestEvaluationIsSavedAndChecked) {
  RunResult r;
  std::unique_ptr<Trainer> t = DigitsTrainedFor(2, 4, 13, &r);
  ASSERT_TRUE(t);
  BestEvaluation best;
  best.step = 2;
  best.loss = 1.25;
  best.accuracy = 0.5;
  best.since = 1;
  best.values = t->TrainedValues();
  StepUntil(*t, 3, &r);
  TempDir dir;
  ASSERT_TRUE(SaveCheckpoint(dir.path(), *t, ModelFile("digits_mlp.onnx"), 0, &best).ok());
  StatusOr<Checkpoint> c = LoadCheckpoint(dir.path());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->best.has_value());
  EXPECT_EQ(c->best->step, 2);
  EXPECT_EQ(c->best->loss, 1.25);
  EXPECT_EQ(c->best->accuracy, 0.5);
  EXPECT_EQ(c->best->since, 1);
  ASSERT_EQ(c->best->values.size(), best.values.size());
  for (size_t i = 0; i < best.values.size(); ++i) {
    EXPECT_EQ(c->best->values[i].name(), best.values[i].name());
    EXPECT_TRUE(c->best->values[i].SameContents(best.values[i])) << best.values[i].name();
  }
  // Without values (--early-stop alone) there is no file; without a best, no record.
  best.values.clear();
  ASSERT_TRUE(SaveCheckpoint(dir / "numbers", *t, ModelFile("digits_mlp.onnx"), 0, &best).ok());
  EXPECT_FALSE(fs::exists(dir / "numbers/step-00000003/best.safetensors"));
  c = LoadCheckpoint(dir / "numbers");
  ASSERT_TRUE(c.ok() && c->best && c->best->values.empty()) << c.status().message();
  ASSERT_TRUE(SaveCheckpoint(dir / "none", *t, ModelFile("digits_mlp.onnx")).ok());
  c = LoadCheckpoint(dir / "none");
  ASSERT_TRUE(c.ok() && !c->best) << c.status().message();

  const std::string file = dir / "step-00000003/best.safetensors";
  const std::string good = ReadText(file);
  std::string flipped = good;
  flipped[flipped.size() - 5] ^= 0x01;
  WriteText(file, flipped);
  EXPECT_NE(LoadError(dir.path()).find("best.safetensors: contents do not match the recorded hash (corrupt)"),
            std::string::npos);
  WriteText(file, good);
  const std::string json_path = dir / "step-00000003/trainer.json";
  std::string json = ReadText(json_path);
  json.replace(json.find("\"step\": 2,"), 10, "\"step\": 9,");
  WriteText(json_path, json);
  EXPECT_NE(LoadError(dir.path()).find("\"best\" names step 9 (1 evaluations since) in a checkpoint of step 3"),
            std::string::npos);
}

// A model whose weights live in an external data file (in a subfolder): every checkpoint holds the file at the same
// location (the first save copies it, the next hard-links it), export loads the checkpoint's own copy, and a resumed
// run ends as the uninterrupted one. A data file that changed after the run read it is refused by the first save
// (which copies it) and by a resume, naming it; a corrupt copy in the checkpoint is refused by LoadCheckpoint.
TEST(Checkpoint, ExternalDataIsStoredLinkedAndChecked) {
  TempDir src;
  {
    importer::SaveOptions so;
    so.external_data = importer::ExternalDataMode::kAlways;
    so.external_data_file = "weights/digits.bin";
    ASSERT_TRUE(fs::create_directory(src / "weights"));
    const Status saved = importer::SaveModel(LoadReference("digits_mlp.onnx"), src / "net.onnx", so);
    ASSERT_TRUE(saved.ok()) << saved.message();
  }
  const std::string path = src / "net.onnx";
  const std::string weights = src / "weights/digits.bin";
  StatusOr<ir::Model> model = importer::LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  StatusOr<CheckpointModel> file = DescribeCheckpointModel(path, *model);
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_EQ(file->files.size(), 2u);
  EXPECT_EQ(file->files[0].name, "model.onnx");
  EXPECT_EQ(file->files[1].name, "weights/digits.bin");
  EXPECT_EQ(file->files[1].bytes, fs::file_size(weights));

  const Dataset data = Data(*model, {64}, 40, 10, 9);
  const TrainerOptions o = MlpOptions(6);
  const RunResult full = Uninterrupted(*model, o, data);
  TempDir dir;
  RunResult first;
  {
    std::unique_ptr<Trainer> t = MakeTrainer(*model, o, data);
    ASSERT_TRUE(t);
    StepUntil(*t, 2, &first);
    ASSERT_TRUE(SaveCheckpoint(dir.path(), *t, *file).ok());
    StepUntil(*t, 3, &first);
    StatusOr<std::string> saved = SaveCheckpoint(dir.path(), *t, *file);
    ASSERT_TRUE(saved.ok()) << saved.status().message();
  }
  EXPECT_EQ(ReadText(dir / "step-00000002/weights/digits.bin"), ReadText(weights));
  struct stat a {};
  struct stat b {};
  ASSERT_EQ(::stat((dir / "step-00000002/weights/digits.bin").c_str(), &a), 0);
  ASSERT_EQ(::stat((dir / "step-00000003/weights/digits.bin").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);

  StatusOr<Checkpoint> c = LoadCheckpoint(dir.path());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->model.files, file->files);
  StatusOr<ir::Model> stored = importer::LoadModel(c->model_path);
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_TRUE(ExportTrainedModel(*stored, CheckpointValues(*c), {DType::kFloat32, true}).ok());
  {
    std::unique_ptr<Trainer> t = MakeTrainer(*model, o, data);
    ASSERT_TRUE(t);
    const Status resumed = ResumeTrainer(*c, *file, *t, nullptr);
    ASSERT_TRUE(resumed.ok()) << resumed.message();
    RunResult rest = first;
    StepUntil(*t, INT64_MAX, &rest);
    Finish(*t, &rest);
    ExpectIdentical(full, rest);
  }

  // The source's data file changed after the run read it.
  const std::string good = ReadText(weights);
  std::string changed = good;
  changed[changed.size() / 2] ^= 0x10;
  WriteText(weights, changed);
  StatusOr<CheckpointModel> now = DescribeCheckpointModel(path, *model);
  ASSERT_TRUE(now.ok()) << now.status().message();
  const std::string resume_error = CheckCheckpointModel(*c, *now).message();
  EXPECT_NE(resume_error.find("external data file " + weights + " differs from the checkpoint's"), std::string::npos)
      << resume_error;
  {
    std::unique_ptr<Trainer> t = MakeTrainer(*model, o, data);
    ASSERT_TRUE(t);
    TempDir other;
    StatusOr<std::string> saved = SaveCheckpoint(other.path(), *t, *file);
    ASSERT_FALSE(saved.ok());
    EXPECT_NE(saved.status().message().find(weights + ": changed since the run read it"), std::string::npos)
        << saved.status().message();
    EXPECT_EQ(Listing(other.path()), "");
  }
  WriteText(weights, good);

  // A corrupt copy in the checkpoint (both step folders share it).
  const std::string copy = dir / "step-00000003/weights/digits.bin";
  WriteText(copy, changed);
  EXPECT_NE(LoadError(dir.path()).find("weights/digits.bin: contents do not match the recorded hash"),
            std::string::npos);
  EXPECT_NE(LoadError(dir / "step-00000002").find("weights/digits.bin: contents do not match the recorded hash"),
            std::string::npos);
  std::remove(copy.c_str());
  EXPECT_NE(LoadError(dir.path()).find("weights/digits.bin: cannot open"), std::string::npos);
}

// External data a checkpoint cannot hold where the model names it: refused when the model is described.
TEST(Checkpoint, ExternalDataOutsideTheFolderOrNamedAsACheckpointFileIsRefused) {
  TempDir src;
  {
    importer::SaveOptions so;
    so.external_data = importer::ExternalDataMode::kAlways;
    const Status saved = importer::SaveModel(LoadReference("digits_mlp.onnx"), src / "net.onnx", so);
    ASSERT_TRUE(saved.ok()) << saved.message();
  }
  StatusOr<ir::Model> model = importer::LoadModel(src / "net.onnx");
  ASSERT_TRUE(model.ok()) << model.status().message();
  ir::Tensor* weight = nullptr;
  for (ir::Value* v : model->graph->initializers()) {
    if (v->initializer()->external()) weight = v->mutable_initializer();
  }
  ASSERT_NE(weight, nullptr);
  for (const std::string& location :
       std::vector<std::string>{"sub/../net.onnx.data", "/tmp/w.bin", "trainer.json", "state.safetensors"}) {
    SCOPED_TRACE(location);
    ir::ExternalDataInfo info = *weight->external();
    info.location = location;
    weight->set_external(info);
    StatusOr<CheckpointModel> m = DescribeCheckpointModel(src / "net.onnx", *model);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("'" + location + "'"), std::string::npos) << m.status().message();
    EXPECT_EQ(m.status().message().find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace onnxamp::trainer
