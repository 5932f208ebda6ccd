// Training checkpoints: everything a run needs to continue bit for bit, in a folder per step.
//
//   DIR/latest                      the name of the newest complete checkpoint ("step-00000120"), replaced atomically
//   DIR/step-00000120/model.onnx    the inference model the run started from, byte for byte (export reads it)
//   DIR/step-00000120/state.safetensors
//                                   FP32 master weights (the parameters' names), optimizer state
//                                   ("optim.<state>.<parameter>"), BatchNormalization buffers (their names)
//   DIR/step-00000120/trainer.json  step counters, GradScaler state (PyTorch's five keys), optimizer step counts, the
//                                   sampler's cursor and shuffle seed, the LR schedule's position, the training
//                                   options, the thread count, and FNV-1a 64 hashes of the model, the training data
//                                   and state.safetensors
//
// A save writes a hidden DIR/.tmp-* folder (every file flushed), renames it to step-N, then replaces `latest`; a
// failure at any point (a full disk: the error names the file and the OS's reason) removes what the save wrote (the
// temporary folder; the new step-N too when `latest` cannot be replaced) and leaves the previous checkpoint and
// `latest` as they were. With keep > 0, the oldest step folders beyond the newest `keep` are removed after a
// successful save.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/tensor.h"
#include "trainer/trainer.h"

namespace onnxamp::trainer {

// The model a run trains: its file's bytes (stored in every checkpoint, hashed to recognise it on resume).
struct CheckpointModel {
  std::string bytes;
  std::string source;  // the path it was read from, recorded for messages
  // CheckpointDataHash of the run's training data, which does not change during a run: a caller that saves more
  // than once computes it once (it reads every byte of the data). Empty: SaveCheckpoint computes it.
  std::string data_hash = {};
};

// A hash of a bound training dataset (array names, types, dims and the bytes of its samples, through a view's rows:
// a Split part hashes as its rows gathered would), recorded in checkpoints.
std::string CheckpointDataHash(const Dataset& data);

// Writes a checkpoint of `trainer` at its current step into `dir` (created if missing) and returns the step folder.
// `keep` > 0 prunes older step folders. Errors are one line naming the file.
StatusOr<std::string> SaveCheckpoint(const std::string& dir, const Trainer& trainer, const CheckpointModel& model,
                                     int64_t keep = 0);

// A checkpoint read back and verified (hashes, the safetensors layout, the JSON fields).
struct Checkpoint {
  std::string path;  // the step folder
  int64_t step = 0;
  std::string model_bytes;
  std::string model_source;
  TrainerState state;
  std::vector<std::string> param_names;
  std::vector<std::string> buffer_names;
  std::string options_json;  // the training options as saved (trainer.json's "options", dumped)
  int threads = 0;           // the thread count the run used
  int64_t data_samples = 0;
  std::string data_hash;
};

// Reads `path`: a checkpoint folder (DIR, through DIR/latest) or one step folder. Errors name the file: missing
// files, a truncated or corrupt file (hash mismatch, bad safetensors or JSON), an unknown format version.
StatusOr<Checkpoint> LoadCheckpoint(const std::string& path);

// Whether `model_bytes` is the model the checkpoint was written for (byte for byte); the error names both hashes.
Status CheckCheckpointModel(const Checkpoint& checkpoint, const std::string& model_bytes);

// Restores `trainer` (created from the same model and compatible options) to the checkpoint's state. Checks, each a
// one-line error: the model's bytes hash as the checkpoint's; the training data (samples and hash) is the same; the
// options are the same except --steps, --epochs and --threads. A different thread count is a warning (appended to
// `warnings`): the run continues, but bit-identical results are promised only for the same count.
Status ResumeTrainer(const Checkpoint& checkpoint, const std::string& model_bytes, Trainer& trainer,
                     std::vector<std::string>* warnings);

// The trained values of a checkpoint (parameters and buffers, FP32, named after their initializers): what
// ExportTrainedModel writes into the checkpoint's model.
std::vector<ir::Tensor> CheckpointValues(const Checkpoint& checkpoint);

// FNV-1a 64 of `bytes` as 16 hex digits (an integrity check, not a defence against a deliberate forgery).
std::string Fnv1a64Hex(std::string_view bytes);

// Tests only: called before each file of a checkpoint is written, with the file's final path; an error it returns
// fails the write as a full disk would. Empty to remove.
void SetCheckpointWriteHookForTesting(std::function<Status(const std::string& path)> hook);

}  // namespace onnxamp::trainer
