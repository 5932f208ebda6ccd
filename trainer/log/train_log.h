// Where `onnxamp train` reports a run: a progress bar (stderr is a terminal, --log-format text), plain lines on
// stderr every --log-every steps (text) or JSON lines on stdout (jsonl), and with --log-dir every step and every
// evaluation as DIR/metrics.jsonl and a TensorBoard event file.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "runtime/common/status.h"
#include "trainer/log/metrics_log.h"
#include "trainer/log/progress.h"
#include "trainer/log/record_file.h"
#include "trainer/log/tensorboard_writer.h"
#include "trainer/trainer.h"

namespace onnxamp::trainer {

enum class LogFormat { kText, kJsonl };
StatusOr<LogFormat> LogFormatFromName(const std::string& name);  // "text", "jsonl"

struct TrainLogOptions {
  LogFormat format = LogFormat::kText;
  int64_t log_every = 10;     // text and jsonl console records: every N steps and the last
  std::string log_dir;        // empty: no files
  bool progress_bar = false;  // text only: redraw a bar on `err` instead of the plain lines
  int width = 80;             // the bar's terminal width
  std::FILE* out = stdout;    // JSON lines
  std::FILE* err = stderr;    // text
};

class TrainLog {
 public:
  // Opens DIR/metrics.jsonl and a new event file in DIR (creating DIR) when log_dir is set. Errors name the folder
  // or file.
  static StatusOr<std::unique_ptr<TrainLog>> Create(const TrainLogOptions& options);

  // Reports one step; `last`: the run's last step (always reported on the console).
  void Step(const StepRecord& r, int64_t total_steps, bool last);
  // Reports an evaluation after step `step`.
  void Eval(int64_t step, const EvalRecord& e);
  // A line of text on `err` (the bar is cleared first and comes back at the next step).
  void Message(const std::string& line);
  // Ends the bar (its final state stays on screen) and writes the "done" record (stdout with jsonl, and DIR).
  void Finish(const RunSummary& s);

  // A failed write to DIR prints one warning line and stops the logging to DIR; training goes on.
  bool log_dir_ok() const { return metrics_ != nullptr; }

 private:
  explicit TrainLog(TrainLogOptions options) : options_(std::move(options)) {}
  double Now() const;
  void WriteDir(const std::string& json, int64_t step, const std::vector<Scalar>& scalars);

  TrainLogOptions options_;
  std::optional<ProgressBar> bar_;
  std::unique_ptr<RecordFile> metrics_;
  std::unique_ptr<TensorBoardWriter> events_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double elapsed_ = 0;  // seconds in steps
  int64_t steps_timed_ = 0;
  double window_seconds_ = 0;
  int64_t window_samples_ = 0;
};

}  // namespace onnxamp::trainer
