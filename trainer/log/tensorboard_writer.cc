// TensorBoard event file writer: Event messages from trainer/log/events.proto, TFRecord-framed, appended whole.
#include "trainer/log/tensorboard_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "trainer/log/events.pb.h"
#include "trainer/log/tfrecord.h"

namespace onnxamp::trainer {

std::string EventFileName(int64_t unix_seconds, const std::string& hostname, int64_t pid) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(unix_seconds));
  return StrCat("events.out.tfevents.", seconds, ".", hostname, ".", pid);
}

StatusOr<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::Create(const std::string& dir, double wall_time) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("--log-dir ", dir, ": cannot create the folder: ", ec.message());
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "localhost");
  for (char* c = host; *c; ++c) {
    if (*c == '/') *c = '_';
  }
  const std::string path =
      (std::filesystem::path(dir) / EventFileName(static_cast<int64_t>(std::floor(wall_time)), host, getpid()))
          .string();
  StatusOr<std::unique_ptr<RecordFile>> file = RecordFile::Open(path, RecordFile::Mode::kCreateNew);
  if (!file.ok()) return file.status();
  std::unique_ptr<TensorBoardWriter> writer(new TensorBoardWriter(std::move(file).value()));
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_file_version("brain.Event:2");
  ONNXAMP_RETURN_IF_ERROR(writer->WriteRecord(event.SerializeAsString()));
  return writer;
}

Status TensorBoardWriter::WriteScalars(int64_t step, double wall_time, const std::vector<Scalar>& scalars) {
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  tensorboard::Summary* summary = event.mutable_summary();
  for (const Scalar& s : scalars) {
    tensorboard::Summary::Value* v = summary->add_value();
    v->set_tag(s.tag);
    v->set_simple_value(static_cast<float>(s.value));
  }
  return WriteRecord(event.SerializeAsString());
}

Status TensorBoardWriter::WriteRecord(const std::string& data) { return file_->Append(FrameRecord(data)); }

}  // namespace onnxamp::trainer
