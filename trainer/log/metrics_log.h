// Training metrics as records: one JSON object per line (stdout with --log-format jsonl, DIR/metrics.jsonl with
// --log-dir) and the TensorBoard scalars of the same values. The keys and tags are listed in docs/training.md.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "trainer/log/tensorboard_writer.h"
#include "trainer/trainer.h"

namespace onnxamp::trainer {

// What the run did, for the final record.
struct RunSummary {
  int64_t steps = 0;
  int64_t skipped_steps = 0;
  double seconds = 0;              // wall time of the whole run (graph building and evaluation included)
  double loss = 0;                 // the last step's
  std::optional<EvalRecord> eval;  // the final evaluation, if there was validation data
  std::string model;               // the written model
  int64_t best_step = -1;          // --keep-best: the step whose model was written, when not the last
  bool stopped_early = false;      // --early-stop ended the run
  uint64_t peak_rss_bytes = 0;     // the process's peak resident set (PeakResidentBytes); 0: unknown
};

// {"type":"step","step":..,"total_steps":..,"epoch":..,"loss":..,"loss_scale":..,"lr":..,["grad_norm":..,]
//  "skipped":..,"skipped_steps":..,"samples":..,"samples_per_second":..,"wall_time":..}: one line, no newline.
// `epoch` is 1-based; `samples_per_second` covers the steps since the previous step record of the same sink;
// grad_norm only where it was computed (--clip-norm, step not skipped). Non-finite numbers are written as null.
std::string StepJson(const StepRecord& r, int64_t total_steps, double samples_per_second, double wall_time);
// {"type":"eval","step":..,"val_loss":..,["val_accuracy":..,]["val_top_k":..,"val_top_k_accuracy":..,]"val_samples":..,
//  "wall_time":..}
std::string EvalJson(int64_t step, const EvalRecord& e, double wall_time);
// {"type":"done","steps":..,"skipped_steps":..,"seconds":..,"loss":..,["val_loss":..,"val_accuracy":..,]"model":..,
//  ["best_step":..,]["stopped_early":true,]["peak_rss_bytes":..]}
std::string DoneJson(const RunSummary& s);

// The TensorBoard scalars of a step: train/loss, train/loss_scale, train/lr, train/grad_norm (where computed),
// train/skipped_steps, train/samples_per_second.
std::vector<Scalar> StepScalars(const StepRecord& r, double samples_per_second);
// val/loss, val/accuracy (classification losses) and val/top_k_accuracy (with --top-k).
std::vector<Scalar> EvalScalars(const EvalRecord& e);

}  // namespace onnxamp::trainer
