// Training checkpoints: everything a run needs to continue bit for bit, in a folder per step.
//
//   DIR/latest                      the name of the newest complete checkpoint ("step-00000120"), replaced atomically
//   DIR/step-00000120/model.onnx    the inference model the run started from, byte for byte (export reads it), and
//                                   its external data files, if any, at their locations relative to it; the first
//                                   save copies them, later ones hard-link them from the previous checkpoint
//   DIR/step-00000120/state.safetensors
//                                   FP32 master weights (the parameters' names), optimizer state
//                                   ("optim.<state>.<parameter>"), BatchNormalization buffers (their names)
//   DIR/step-00000120/best.safetensors
//                                   with --keep-best: the trained values of the best evaluation so far
//   DIR/step-00000120/trainer.json  step counters, GradScaler state (PyTorch's five keys), optimizer step counts, the
//                                   sampler's cursor and shuffle seed, the LR schedule's position, the training
//                                   options, the thread count, and CRC32C checksums (CheckpointHash) of the model's
//                                   files, the training data and state.safetensors
//
// A save streams the state from the trainer's memory to the file (no copy of it is built in memory) and writes a
// hidden DIR/.tmp-* folder (every file flushed), renames it to step-N, then replaces `latest`; a
// failure at any point (a full disk: the error names the file and the OS's reason) removes what the save wrote (the
// temporary folder; the new step-N too when `latest` cannot be replaced) and leaves the previous checkpoint and
// `latest` as they were. With keep > 0, the oldest step folders beyond the newest `keep` are removed after a
// successful save.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/tensor.h"
#include "trainer/trainer.h"

namespace onnxamp::trainer {

// The checksum a checkpoint records for its files and its training data (a check against corruption and truncation,
// not against forgery): CRC32C (SSE4.2's crc32 instruction where the CPU has it: 4.8 GB/s on one Zen 4 core) in the
// checkpoints written now, format version 2; FNV-1a 64 (a byte at a time: 0.61 GB/s there) in version 1, which is
// still read.
enum class CheckpointHash { kFnv1a64, kCrc32c };

// One file of the model a run trains, as checkpoints store it: the model file (stored as model.onnx) or an external
// data file it references (stored at its location, relative to the step folder, as the model names it).
struct CheckpointModelFile {
  std::string name;  // "model.onnx", or the external data file's location as the model spells it
  uint64_t bytes = 0;
  std::string hash;  // hex digits, of the CheckpointModel's `hash` kind
  bool operator==(const CheckpointModelFile&) const = default;
};

// The model a run trains: its files' sizes and hashes. Every checkpoint holds a copy of the files (read from `source`
// at the first save and checked against these hashes, hard-linked from the previous checkpoint of the folder after
// that), so that export needs nothing else; a resumed run's model must describe the same.
struct CheckpointModel {
  std::string source;                      // the model file's path; external data files lie relative to its folder
  std::vector<CheckpointModelFile> files;  // the model file, then its external data files, sorted by name
  CheckpointHash hash = CheckpointHash::kCrc32c;
  // CheckpointDataHash of the run's training data (of the `hash` kind), which does not change during a run: a caller
  // that saves more than once, or resumes and saves, computes it once (it reads every byte of the data). Empty:
  // SaveCheckpoint and ResumeTrainer compute it.
  std::string data_hash = {};
};

// Describes the model file at `path` and the external data files that `model` (as loaded from `path`) references, in
// initializers, sparse initializers and attributes, subgraphs included: sizes and hashes, read in pieces (nothing is
// kept in memory). Errors, one line naming the file: a file that cannot be read; an external data file a checkpoint
// cannot hold (a location outside the model's folder, or one that names a checkpoint file such as trainer.json).
StatusOr<CheckpointModel> DescribeCheckpointModel(const std::string& path, const ir::Model& model,
                                                  CheckpointHash hash = CheckpointHash::kCrc32c);

// A hash of a bound training dataset (array names, types, dims and the bytes of its samples, through a view's rows:
// a Split part hashes as its rows gathered would), recorded in checkpoints.
std::string CheckpointDataHash(const Dataset& data, CheckpointHash hash = CheckpointHash::kCrc32c);

// `onnxamp train --keep-best` / `--early-stop`: the best evaluation so far, saved with a checkpoint so that a resumed
// run goes on comparing against it (and exports it).
struct BestEvaluation {
  int64_t step = -1;  // the step evaluated; -1: none yet (nothing is saved)
  double loss = 0;
  double accuracy = -1;  // -1 without class labels
  int64_t since = 0;     // evaluations after it that were not better
  // The trained values at that step (FP32, named after their initializers), with --keep-best: saved as
  // best.safetensors; empty otherwise.
  std::vector<ir::Tensor> values;
};

// Writes a checkpoint of `trainer` at its current step into `dir` (created if missing) and returns the step folder.
// `keep` > 0 prunes older step folders. `best`, when given and set, is saved too (trainer.json's "best", and its values
// in best.safetensors). Errors are one line naming the file.
StatusOr<std::string> SaveCheckpoint(const std::string& dir, const Trainer& trainer, const CheckpointModel& model,
                                     int64_t keep = 0, const BestEvaluation* best = nullptr);

// The checkpoint folder of a run, held for its length (LockCheckpointDir): the lock is released when this is destroyed
// or the process ends, however it ends.
class CheckpointDirLock {
 public:
  CheckpointDirLock() = default;
  CheckpointDirLock(CheckpointDirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  CheckpointDirLock& operator=(CheckpointDirLock&& other) noexcept;
  CheckpointDirLock(const CheckpointDirLock&) = delete;
  CheckpointDirLock& operator=(const CheckpointDirLock&) = delete;
  ~CheckpointDirLock();

 private:
  friend StatusOr<CheckpointDirLock> LockCheckpointDir(const std::string& dir, std::vector<std::string>* repaired);
  explicit CheckpointDirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Creates `dir` if missing and locks it (flock on the folder itself) so that a second run writing checkpoints into it
// fails at once instead of interleaving its saves with this run's. Then repairs what a save killed half-way (SIGKILL, a
// power cut) left: temporary step folders and `latest` files are removed, and a step folder moved aside to be replaced
// is moved back when its replacement never arrived. What was repaired is appended to `repaired` (one line each).
StatusOr<CheckpointDirLock> LockCheckpointDir(const std::string& dir, std::vector<std::string>* repaired);

// A checkpoint read back and verified (hashes, the safetensors layout, the JSON fields).
struct Checkpoint {
  std::string path;  // the step folder
  int64_t step = 0;
  std::string model_path;  // the stored model file (its external data files lie next to it); load it from there
  CheckpointModel model;   // the stored model's files; `source` is where the run read it from; `hash` the records
  TrainerState state;
  std::vector<std::string> param_names;
  std::vector<std::string> buffer_names;
  std::string options_json;  // the training options as saved (trainer.json's "options", dumped)
  int threads = 0;           // the thread count the run used
  int64_t data_samples = 0;
  std::string data_hash;
  std::optional<BestEvaluation> best;  // saved by a run with --keep-best or --early-stop (values mapped, as the state)
};

// Reads `path`: a checkpoint folder (DIR, through DIR/latest) or one step folder. Every file is checked against the
// size and hash trainer.json records. The state file is mapped, not read into memory: the state's tensors are views
// of the mapping (or copies where their bytes are not 16-byte aligned), which lives as long as they do. Errors name
// the file: missing files, a truncated or corrupt file (hash mismatch, bad safetensors or JSON), an unknown format
// version.
StatusOr<Checkpoint> LoadCheckpoint(const std::string& path);

// Whether `model` (DescribeCheckpointModel of the model a run loads) is the model the checkpoint was written for: the
// same model file and external data files, byte for byte (hashed again in the checkpoint's kind when `model` was
// described in another). The error names the file that differs and both hashes.
Status CheckCheckpointModel(const Checkpoint& checkpoint, const CheckpointModel& model);

// Restores `trainer` (created from the same model and compatible options) to the checkpoint's state. Checks, each a
// one-line error: CheckCheckpointModel; the training data (samples and hash) is the same; the options are the same
// except --steps, --epochs, --threads and --recompute. A different thread count is a warning (appended to `warnings`):
// the run continues, but bit-identical results are promised only for the same count.
Status ResumeTrainer(const Checkpoint& checkpoint, const CheckpointModel& model, Trainer& trainer,
                     std::vector<std::string>* warnings);

// The trained values of a checkpoint (parameters and buffers, FP32, named after their initializers; their moving
// averages when the run kept them, as Trainer::ExportValues): what ExportTrainedModel writes into the checkpoint's
// model.
std::vector<ir::Tensor> CheckpointValues(const Checkpoint& checkpoint);
// The AMP precision policy the checkpoint's run trained with (its options' "amp_policy"; the default policy for a
// checkpoint written before the option existed): what an export to FP16/BF16 converts with.
StatusOr<converter::PrecisionPolicy> CheckpointPolicy(const Checkpoint& checkpoint);
// The LoRA options the checkpoint's run trained with (disabled for a run without LoRA, or one written before LoRA
// existed): PlanLora on the checkpoint's model gives the adapters that its values hold and an export merges.
StatusOr<LoraOptions> CheckpointLora(const Checkpoint& checkpoint);

// Tests only: called before each file of a checkpoint is written, with the file's final path; an error it returns
// fails the write as a full disk would. Empty to remove.
void SetCheckpointWriteHookForTesting(std::function<Status(const std::string& path)> hook);
// Tests only: the function that hard-links a model file from the previous checkpoint (::link's contract: 0, or -1
// with errno set), to stand for a file system without hard links. Empty to restore ::link.
void SetCheckpointLinkForTesting(std::function<int(const char* from, const char* to)> link);

}  // namespace onnxamp::trainer
