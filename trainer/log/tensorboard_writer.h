// TensorBoard event files: TFRecord-framed Event messages (trainer/log/events.proto), the first one holding the
// file version "brain.Event:2", then one Event per step with that step's scalars, each written whole as it comes (a
// killed run keeps its curves; a full disk leaves no cut record, at which TensorBoard would stop reading).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "trainer/log/record_file.h"

namespace onnxamp::trainer {

struct Scalar {
  std::string tag;   // e.g. "train/loss"
  double value = 0;  // stored as float32 (Summary.Value.simple_value)
};

// "events.out.tfevents.<unix seconds, 10 digits>.<hostname>.<pid>": TensorBoard reads every file of a folder whose
// name contains "tfevents", in name order; the pid keeps two runs started in the same second apart.
std::string EventFileName(int64_t unix_seconds, const std::string& hostname, int64_t pid);

class TensorBoardWriter {
 public:
  // Creates `dir` (and its parents) and a new event file in it named by EventFileName (this host and process),
  // and writes the file-version event. Errors name the folder or file and the system's reason.
  static StatusOr<std::unique_ptr<TensorBoardWriter>> Create(const std::string& dir, double wall_time);
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One Event (`step`, `wall_time` in seconds since the Unix epoch) with a Summary of `scalars`, written and flushed.
  // Errors name the file and the system's reason.
  Status WriteScalars(int64_t step, double wall_time, const std::vector<Scalar>& scalars);

  const std::string& path() const { return file_->path(); }

 private:
  explicit TensorBoardWriter(std::unique_ptr<RecordFile> file) : file_(std::move(file)) {}
  Status WriteRecord(const std::string& data);

  std::unique_ptr<RecordFile> file_;
};

}  // namespace onnxamp::trainer
