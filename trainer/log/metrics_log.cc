// JSON lines (nlohmann::ordered_json, so keys keep the documented order) and TensorBoard scalars of step and
// evaluation records.
#include "trainer/log/metrics_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

namespace onnxamp::trainer {
namespace {

using Json = nlohmann::ordered_json;

// JSON has no NaN or infinity: those become null.
Json Number(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

// One line: no indentation, invalid UTF-8 (a path's bytes) replaced by U+FFFD instead of throwing.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

std::string StepJson(const StepRecord& r, int64_t total_steps, double samples_per_second, double wall_time) {
  Json j;
  j["type"] = "step";
  j["step"] = r.step;
  j["total_steps"] = total_steps;
  j["epoch"] = r.epoch + 1;
  j["loss"] = Number(r.loss);
  j["loss_scale"] = Number(r.loss_scale);
  j["lr"] = Number(r.lr);
  if (r.grad_norm >= 0) j["grad_norm"] = Number(r.grad_norm);
  j["skipped"] = r.skipped;
  j["skipped_steps"] = r.skipped_total;
  j["samples"] = r.samples;
  j["samples_per_second"] = Number(samples_per_second);
  j["wall_time"] = Number(wall_time);
  return Dump(j);
}

std::string EvalJson(int64_t step, const EvalRecord& e, double wall_time) {
  Json j;
  j["type"] = "eval";
  j["step"] = step;
  j["val_loss"] = Number(e.loss);
  if (e.accuracy >= 0) j["val_accuracy"] = Number(e.accuracy);
  if (e.top_k_accuracy >= 0) {
    j["val_top_k"] = e.top_k;
    j["val_top_k_accuracy"] = Number(e.top_k_accuracy);
  }
  j["val_samples"] = e.samples;
  j["wall_time"] = Number(wall_time);
  return Dump(j);
}

std::string DoneJson(const RunSummary& s) {
  Json j;
  j["type"] = "done";
  j["steps"] = s.steps;
  j["skipped_steps"] = s.skipped_steps;
  j["seconds"] = Number(s.seconds);
  j["loss"] = Number(s.loss);
  if (s.eval) {
    j["val_loss"] = Number(s.eval->loss);
    if (s.eval->accuracy >= 0) j["val_accuracy"] = Number(s.eval->accuracy);
  }
  j["model"] = s.model;
  if (s.best_step >= 0) j["best_step"] = s.best_step;
  if (s.stopped_early) j["stopped_early"] = true;
  if (s.peak_rss_bytes > 0) j["peak_rss_bytes"] = s.peak_rss_bytes;
  return Dump(j);
}

std::vector<Scalar> StepScalars(const StepRecord& r, double samples_per_second) {
  std::vector<Scalar> s = {{"train/loss", r.loss}, {"train/loss_scale", r.loss_scale}, {"train/lr", r.lr}};
  if (r.grad_norm >= 0) s.push_back({"train/grad_norm", r.grad_norm});
  s.push_back({"train/skipped_steps", static_cast<double>(r.skipped_total)});
  s.push_back({"train/samples_per_second", samples_per_second});
  return s;
}

std::vector<Scalar> EvalScalars(const EvalRecord& e) {
  std::vector<Scalar> s = {{"val/loss", e.loss}};
  if (e.accuracy >= 0) s.push_back({"val/accuracy", e.accuracy});
  if (e.top_k_accuracy >= 0) s.push_back({"val/top_k_accuracy", e.top_k_accuracy});
  return s;
}

}  // namespace onnxamp::trainer
