// The console and --log-dir sinks of a training run.
#include "trainer/log/train_log.h"

#include <filesystem>

namespace onnxamp::trainer {
namespace {

double WallTime() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

double Rate(int64_t samples, double seconds) { return seconds > 0 ? static_cast<double>(samples) / seconds : 0.0; }

}  // namespace

StatusOr<LogFormat> LogFormatFromName(const std::string& name) {
  if (name == "text") return LogFormat::kText;
  if (name == "jsonl") return LogFormat::kJsonl;
  return InvalidArgument("--log-format ", name, ": expected text or jsonl");
}

StatusOr<std::unique_ptr<TrainLog>> TrainLog::Create(const TrainLogOptions& options) {
  std::unique_ptr<TrainLog> log(new TrainLog(options));
  if (options.format == LogFormat::kText && options.progress_bar) log->bar_.emplace(options.err, options.width);
  if (!options.log_dir.empty()) {
    ONNXAMP_ASSIGN_OR_RETURN(log->events_, TensorBoardWriter::Create(options.log_dir, WallTime()));
    ONNXAMP_ASSIGN_OR_RETURN(log->metrics_,
                             RecordFile::Open((std::filesystem::path(options.log_dir) / "metrics.jsonl").string(),
                                              RecordFile::Mode::kAppend));
  }
  return log;
}

double TrainLog::Now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void TrainLog::WriteDir(const std::string& json, int64_t step, const std::vector<Scalar>& scalars) {
  if (metrics_ == nullptr) return;
  Status st = metrics_->Append(json + "\n");
  if (st.ok()) st = events_->WriteScalars(step, WallTime(), scalars);
  if (!st.ok()) {
    Message(StrCat("train: warning: ", st.message(), "; metrics are no longer written to ", options_.log_dir));
    metrics_.reset();
    events_.reset();
  }
}

void TrainLog::Step(const StepRecord& r, int64_t total_steps, bool last) {
  elapsed_ += r.seconds;
  ++steps_timed_;
  window_seconds_ += r.seconds;
  window_samples_ += r.samples;
  WriteDir(StepJson(r, total_steps, Rate(r.samples, r.seconds), WallTime()), r.step,
           StepScalars(r, Rate(r.samples, r.seconds)));
  ProgressState s;
  s.step = r.step;
  s.total_steps = total_steps;
  s.epoch = r.epoch + 1;
  s.loss = r.loss;
  s.loss_scale = r.loss_scale;
  s.skipped = r.skipped_total;
  s.lr = r.lr;
  s.elapsed = elapsed_;
  s.steps_timed = steps_timed_;
  if (bar_) {
    // The bar's rate is the run's average so far, which is also what its ETA assumes.
    s.samples_per_second = Rate(window_samples_, window_seconds_);
    bar_->Update(s, Now(), last);
    return;
  }
  if (r.step % options_.log_every != 0 && !last) return;
  const double rate = Rate(window_samples_, window_seconds_);
  s.samples_per_second = rate;
  if (options_.format == LogFormat::kJsonl) {
    std::fprintf(options_.out, "%s\n", StepJson(r, total_steps, rate, WallTime()).c_str());
    std::fflush(options_.out);
  } else {
    std::fprintf(options_.err, "%s\n", FormatStepLine(s).c_str());
  }
  window_seconds_ = 0;
  window_samples_ = 0;
}

void TrainLog::Eval(int64_t step, const EvalRecord& e) {
  WriteDir(EvalJson(step, e, WallTime()), step, EvalScalars(e));
  if (options_.format == LogFormat::kJsonl) {
    std::fprintf(options_.out, "%s\n", EvalJson(step, e, WallTime()).c_str());
    std::fflush(options_.out);
    return;
  }
  std::string line = StrCat("eval after step ", step, ": validation loss ", FormatNumber(e.loss));
  if (e.accuracy >= 0) line += StrCat(", accuracy ", FormatNumber(100 * e.accuracy), "%");
  if (e.top_k_accuracy >= 0) line += StrCat(", top-", e.top_k, " accuracy ", FormatNumber(100 * e.top_k_accuracy), "%");
  Message(StrCat(line, " (", e.samples, " samples)"));
}

void TrainLog::Message(const std::string& line) {
  if (bar_) {
    bar_->PrintLine(line);
  } else {
    std::fprintf(options_.err, "%s\n", line.c_str());
  }
}

void TrainLog::Finish(const RunSummary& s) {
  if (bar_) bar_->Finish();
  const std::string json = DoneJson(s);
  if (metrics_ != nullptr) {
    if (Status st = metrics_->Append(json + "\n"); !st.ok()) {
      Message(StrCat("train: warning: ", st.message(), "; metrics are no longer written to ", options_.log_dir));
      metrics_.reset();
      events_.reset();
    }
  }
  if (options_.format == LogFormat::kJsonl) {
    std::fprintf(options_.out, "%s\n", json.c_str());
    std::fflush(options_.out);
  }
}

}  // namespace onnxamp::trainer
