// Metrics records: the JSON lines (keys, numbers that round-trip, null for non-finite values, escaping of the model
// path), a TensorBoard event file written and parsed back with our own record reader and Event message, write
// failures, and TrainLog's console and --log-dir output.
#include "trainer/log/metrics_log.h"
#include "trainer/log/record_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tmpfs_child.h"
#include "trainer/log/events.pb.h"
#include "trainer/log/tensorboard_writer.h"
#include "trainer/log/tfrecord.h"
#include "trainer/log/train_log.h"

namespace onnxamp::trainer {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::ordered_json;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "onnxamp_log_test_XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ReadAll(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s.push_back(static_cast<char>(c));
  return s;
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

StepRecord ExampleStep() {
  StepRecord r;
  r.step = 7;
  r.loss = 0.1;
  r.loss_scale = 32768;
  r.skipped = false;
  r.skipped_total = 2;
  r.lr = 3e-4;
  r.grad_norm = 1.25;
  r.samples = 64;
  r.epoch = 1;
  r.seconds = 0.5;
  return r;
}

TEST(MetricsLogTest, StepJsonKeysAndValues) {
  const std::string line = StepJson(ExampleStep(), 100, 128, 1.7e9 + 0.25);
  EXPECT_EQ(line,
            "{\"type\":\"step\",\"step\":7,\"total_steps\":100,\"epoch\":2,\"loss\":0.1,\"loss_scale\":32768.0,"
            "\"lr\":0.0003,\"grad_norm\":1.25,\"skipped\":false,\"skipped_steps\":2,\"samples\":64,"
            "\"samples_per_second\":128.0,\"wall_time\":1700000000.25}");
  // Doubles round-trip exactly.
  StepRecord r = ExampleStep();
  r.loss = 0.1 + 1e-16 * 3;
  r.lr = 1.0 / 3;
  const Json j = Json::parse(StepJson(r, 100, 1, 0));
  EXPECT_EQ(j["loss"].get<double>(), r.loss);
  EXPECT_EQ(j["lr"].get<double>(), r.lr);
}

TEST(MetricsLogTest, NonFiniteIsNullAndUnknownGradNormIsLeftOut) {
  StepRecord r = ExampleStep();
  r.loss = INFINITY;
  r.skipped = true;
  r.grad_norm = -1;
  const Json j = Json::parse(StepJson(r, 100, std::nan(""), 0));
  EXPECT_TRUE(j["loss"].is_null());
  EXPECT_TRUE(j["samples_per_second"].is_null());
  EXPECT_FALSE(j.contains("grad_norm"));
  EXPECT_TRUE(j["skipped"].get<bool>());
  std::vector<Scalar> scalars = StepScalars(r, 5);
  ASSERT_EQ(scalars.size(), 5u);
  EXPECT_EQ(scalars[0].tag, "train/loss");
  EXPECT_TRUE(std::isinf(scalars[0].value));
  EXPECT_EQ(scalars[3].tag, "train/skipped_steps");
  EXPECT_EQ(scalars[4].tag, "train/samples_per_second");
}

TEST(MetricsLogTest, EvalAndDoneJson) {
  EvalRecord e;
  e.loss = 0.5;
  e.accuracy = 0.875;
  e.samples = 40;
  EXPECT_EQ(EvalJson(10, e, 2),
            "{\"type\":\"eval\",\"step\":10,\"val_loss\":0.5,\"val_accuracy\":0.875,\"val_samples\":40,"
            "\"wall_time\":2.0}");
  e.accuracy = -1;  // a regression loss
  EXPECT_EQ(EvalJson(10, e, 2),
            "{\"type\":\"eval\",\"step\":10,\"val_loss\":0.5,\"val_samples\":40,\"wall_time\":2.0}");
  EXPECT_EQ(EvalScalars(e).size(), 1u);
  RunSummary s;
  s.steps = 10;
  s.skipped_steps = 1;
  s.seconds = 2.5;
  s.loss = 0.25;
  s.model = "out.onnx";
  EXPECT_EQ(
      DoneJson(s),
      "{\"type\":\"done\",\"steps\":10,\"skipped_steps\":1,\"seconds\":2.5,\"loss\":0.25,\"model\":\"out.onnx\"}");
  s.peak_rss_bytes = 123456789;
  EXPECT_EQ(Json::parse(DoneJson(s))["peak_rss_bytes"], 123456789);
}

TEST(MetricsLogTest, EscapesTheModelPath) {
  RunSummary s;
  s.model = std::string("a\"b\\c\nd\te\x01/\xc3\xa9/\xff.onnx");
  const std::string line = DoneJson(s);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_THAT(line, HasSubstr(R"("model":"a\"b\\c\nd\te\u0001/)"
                              "\xc3\xa9/\xef\xbf\xbd.onnx\"}"));
  // Valid UTF-8 comes back as it was; the invalid byte became U+FFFD.
  EXPECT_EQ(Json::parse(line)["model"].get<std::string>(), "a\"b\\c\nd\te\x01/\xc3\xa9/\xef\xbf\xbd.onnx");
}

TEST(TensorBoardWriterTest, FileNameAsTensorBoardExpects) {
  EXPECT_EQ(EventFileName(1700000000, "host", 42), "events.out.tfevents.1700000000.host.42");
  EXPECT_EQ(EventFileName(5, "h", 1), "events.out.tfevents.0000000005.h.1");
}

TEST(TensorBoardWriterTest, EventFileParsesBack) {
  TempDir dir;
  const std::string logdir = dir / "logs/run1";
  StatusOr<std::unique_ptr<TensorBoardWriter>> w = TensorBoardWriter::Create(logdir, 1700000000.5);
  ASSERT_TRUE(w.ok()) << w.status().message();
  const std::string path = (*w)->path();
  EXPECT_EQ(std::filesystem::path(path).parent_path(), std::filesystem::path(logdir));
  EXPECT_THAT(std::filesystem::path(path).filename().string(), StartsWith("events.out.tfevents.1700000000."));
  ASSERT_TRUE((*w)->WriteScalars(1, 1700000001.0, {{"train/loss", 2.5}, {"train/lr", 1e-3}}).ok());
  // Flushed per write: the file holds both records before the writer is closed.
  StatusOr<std::vector<std::string>> early = ParseRecords(ReadFile(path), path);
  ASSERT_TRUE(early.ok()) << early.status().message();
  EXPECT_EQ(early->size(), 2u);
  ASSERT_TRUE((*w)->WriteScalars(2, 1700000002.0, {{"val/accuracy", 0.75}}).ok());
  w->reset();

  StatusOr<std::vector<std::string>> records = ParseRecords(ReadFile(path), path);
  ASSERT_TRUE(records.ok()) << records.status().message();
  ASSERT_EQ(records->size(), 3u);
  tensorboard::Event first;
  ASSERT_TRUE(first.ParseFromString((*records)[0]));
  EXPECT_EQ(first.file_version(), "brain.Event:2");
  EXPECT_EQ(first.wall_time(), 1700000000.5);
  tensorboard::Event step1;
  ASSERT_TRUE(step1.ParseFromString((*records)[1]));
  EXPECT_EQ(step1.step(), 1);
  EXPECT_EQ(step1.wall_time(), 1700000001.0);
  ASSERT_TRUE(step1.has_summary());
  ASSERT_EQ(step1.summary().value_size(), 2);
  EXPECT_EQ(step1.summary().value(0).tag(), "train/loss");
  EXPECT_EQ(step1.summary().value(0).simple_value(), 2.5f);
  EXPECT_EQ(step1.summary().value(1).tag(), "train/lr");
  EXPECT_EQ(step1.summary().value(1).simple_value(), 1e-3f);
  tensorboard::Event step2;
  ASSERT_TRUE(step2.ParseFromString((*records)[2]));
  EXPECT_EQ(step2.step(), 2);
  ASSERT_EQ(step2.summary().value_size(), 1);
  EXPECT_EQ(step2.summary().value(0).tag(), "val/accuracy");
  EXPECT_EQ(step2.summary().value(0).simple_value(), 0.75f);
}

TEST(TensorBoardWriterTest, UncreatableFolderIsAnError) {
  TempDir dir;
  std::ofstream(dir / "file") << "x";
  StatusOr<std::unique_ptr<TensorBoardWriter>> w = TensorBoardWriter::Create(dir / "file/sub", 0);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("--log-dir " + (dir / "file/sub") + ": cannot create the folder"));
}

TEST(RecordFileTest, WriteFailureIsAnError) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  StatusOr<std::unique_ptr<RecordFile>> f = RecordFile::Open("/dev/full", RecordFile::Mode::kAppend);
  ASSERT_TRUE(f.ok()) << f.status().message();
  Status st = (*f)->Append("{}\n");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("/dev/full: cannot write: No space left on device"));
}

// A disk that fills in the middle of a line (a real tmpfs of 8 KiB in a mount namespace of the test's own): the
// write fails naming the file, and the file keeps whole lines only (what reached it of the last one is cut off).
TEST(RecordFileTest, ALineCutByAFullDiskIsRemoved) {
  const std::string dir = ::testing::TempDir() + "jsonl_full_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(std::filesystem::create_directories(dir));
  const std::string line = "{\"x\":\"" + std::string(3000, 'a') + "\"}";
  const tmpfs_child::TmpfsChildReport child =
      tmpfs_child::RunWithTmpfs(dir, 8 << 10, [&](std::map<std::string, std::string>& report) {
        StatusOr<std::unique_ptr<RecordFile>> f = RecordFile::Open(dir + "/metrics.jsonl", RecordFile::Mode::kAppend);
        if (!f.ok()) {
          report["error"] = f.status().message();
          return;
        }
        int written = 0;
        Status st;
        for (; written < 10; ++written) {
          st = (*f)->Append(line + "\n");
          if (!st.ok()) break;
        }
        report["written"] = std::to_string(written);
        report["error"] = st.message();
        std::ifstream in(dir + "/metrics.jsonl", std::ios::binary);
        report["contents"] = std::string(std::istreambuf_iterator<char>(in), {});
      });
  std::filesystem::remove_all(dir);
  if (!child.skip.empty()) GTEST_SKIP() << "cannot set up a tmpfs: " << child.skip;
  ASSERT_TRUE(child.failure.empty()) << child.failure;
  const int written = std::stoi(child.values.at("written"));
  EXPECT_GE(written, 1);
  EXPECT_LT(written, 10);
  EXPECT_THAT(child.values.at("error"), HasSubstr("metrics.jsonl: cannot write: No space left on device"));
  std::string whole;
  for (int i = 0; i < written; ++i) whole += line + "\n";
  EXPECT_EQ(child.values.at("contents"), whole);
}

// The same for an event file: the disk fills in the middle of an event; the write fails naming the file, and the file
// parses to its end, every record whole, both checksums right.
TEST(RecordFileTest, AnEventCutByAFullDiskIsRemoved) {
  const std::string dir = ::testing::TempDir() + "events_full_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(std::filesystem::create_directories(dir));
  std::vector<Scalar> scalars;
  for (int i = 0; i < 40; ++i) scalars.push_back({"train/a_long_tag_name_" + std::to_string(i), 0.5 * i});
  const tmpfs_child::TmpfsChildReport child =
      tmpfs_child::RunWithTmpfs(dir, 8 << 10, [&](std::map<std::string, std::string>& report) {
        StatusOr<std::unique_ptr<TensorBoardWriter>> w = TensorBoardWriter::Create(dir, 1700000000.0);
        if (!w.ok()) {
          report["error"] = w.status().message();
          return;
        }
        int written = 0;
        Status st;
        for (; written < 100; ++written) {
          st = (*w)->WriteScalars(written + 1, 1700000001.0 + written, scalars);
          if (!st.ok()) break;
        }
        report["written"] = std::to_string(written);
        report["error"] = st.message();
        // Parsed here: the report carries text, not bytes.
        std::ifstream in((*w)->path(), std::ios::binary);
        StatusOr<std::vector<std::string>> records =
            ParseRecords(std::string(std::istreambuf_iterator<char>(in), {}), "events");
        report["records"] = records.ok() ? std::to_string(records->size()) : records.status().message();
      });
  std::filesystem::remove_all(dir);
  if (!child.skip.empty()) GTEST_SKIP() << "cannot set up a tmpfs: " << child.skip;
  ASSERT_TRUE(child.failure.empty()) << child.failure;
  const int written = std::stoi(child.values.at("written"));
  EXPECT_GE(written, 1);
  EXPECT_LT(written, 100);
  EXPECT_THAT(child.values.at("error"), HasSubstr(": cannot write: No space left on device"));
  EXPECT_EQ(child.values.at("records"), std::to_string(written + 1));  // the file-version event, then one per step
}

TEST(TrainLogTest, PlainLinesEveryNStepsAndEvalLines) {
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  TrainLogOptions o;
  o.log_every = 2;
  o.out = out;
  o.err = err;
  StatusOr<std::unique_ptr<TrainLog>> log = TrainLog::Create(o);
  ASSERT_TRUE(log.ok()) << log.status().message();
  for (int i = 1; i <= 5; ++i) {
    StepRecord r = ExampleStep();
    r.step = i;
    (*log)->Step(r, 5, i == 5);
  }
  EvalRecord e;
  e.loss = 0.5;
  e.accuracy = 0.25;
  e.samples = 8;
  (*log)->Eval(5, e);
  (*log)->Finish(RunSummary());
  EXPECT_EQ(ReadAll(out), "");
  const std::vector<std::string> lines = Lines(ReadAll(err));
  ASSERT_EQ(lines.size(), 4u);
  // Steps 2, 4 and the last; the rate covers the steps since the previous line (2 x 64 samples in 2 x 0.5 s).
  EXPECT_EQ(lines[0], "step 2/5  epoch 2  loss 0.1  scale 32768  skipped 2  lr 0.0003  128 samples/s");
  EXPECT_THAT(lines[1], StartsWith("step 4/5 "));
  EXPECT_THAT(lines[2], StartsWith("step 5/5 "));
  EXPECT_EQ(lines[3], "eval after step 5: validation loss 0.5, accuracy 25% (8 samples)");
  std::fclose(out);
  std::fclose(err);
}

TEST(TrainLogTest, JsonLinesOnStdoutAndLogDir) {
  TempDir dir;
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  TrainLogOptions o;
  ASSERT_TRUE(LogFormatFromName("jsonl").ok());
  o.format = *LogFormatFromName("jsonl");
  o.log_every = 3;
  o.log_dir = dir / "logs";
  o.progress_bar = true;  // ignored with jsonl
  o.out = out;
  o.err = err;
  StatusOr<std::unique_ptr<TrainLog>> log = TrainLog::Create(o);
  ASSERT_TRUE(log.ok()) << log.status().message();
  for (int i = 1; i <= 4; ++i) {
    StepRecord r = ExampleStep();
    r.step = i;
    (*log)->Step(r, 4, i == 4);
  }
  EvalRecord e;
  e.loss = 0.5;
  e.samples = 8;
  (*log)->Eval(4, e);
  RunSummary s;
  s.steps = 4;
  (*log)->Finish(s);
  EXPECT_EQ(ReadAll(err), "");
  std::vector<std::string> lines = Lines(ReadAll(out));
  ASSERT_EQ(lines.size(), 4u);  // steps 3 and 4, eval, done
  EXPECT_EQ(Json::parse(lines[0])["step"], 3);
  EXPECT_EQ(Json::parse(lines[0])["samples_per_second"], 128.0);
  EXPECT_EQ(Json::parse(lines[1])["step"], 4);
  EXPECT_EQ(Json::parse(lines[2])["type"], "eval");
  EXPECT_EQ(Json::parse(lines[3])["type"], "done");
  // DIR: every step.
  lines = Lines(ReadFile(dir / "logs/metrics.jsonl"));
  ASSERT_EQ(lines.size(), 6u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Json::parse(lines[i])["step"], i + 1);
  EXPECT_EQ(Json::parse(lines[4])["type"], "eval");
  EXPECT_EQ(Json::parse(lines[5])["type"], "done");
  int event_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "logs")) {
    if (entry.path().filename().string().find("tfevents") == std::string::npos) continue;
    ++event_files;
    StatusOr<std::vector<std::string>> records = ParseRecords(ReadFile(entry.path().string()), "events");
    ASSERT_TRUE(records.ok()) << records.status().message();
    EXPECT_EQ(records->size(), 1u + 4u + 1u);  // version, 4 steps, 1 eval
  }
  EXPECT_EQ(event_files, 1);
  std::fclose(out);
  std::fclose(err);
}

TEST(TrainLogTest, BarOnATerminal) {
  std::FILE* err = std::tmpfile();
  TrainLogOptions o;
  o.progress_bar = true;
  o.width = 200;
  o.err = err;
  StatusOr<std::unique_ptr<TrainLog>> log = TrainLog::Create(o);
  ASSERT_TRUE(log.ok()) << log.status().message();
  for (int i = 1; i <= 3; ++i) {
    StepRecord r = ExampleStep();
    r.step = i;
    (*log)->Step(r, 3, i == 3);
  }
  (*log)->Message("train: checkpoint x");
  (*log)->Finish(RunSummary());
  const std::string text = ReadAll(err);
  EXPECT_THAT(text, StartsWith("\rstep 1/3 ["));
  EXPECT_THAT(text, HasSubstr("\rstep 3/3 [##############################] 100% | epoch 2 |"));
  EXPECT_THAT(text, HasSubstr("ETA 0s\x1b[K\r\x1b[Ktrain: checkpoint x\n"));
  EXPECT_EQ(text.find("step 3/3  epoch"), std::string::npos);  // no plain lines
  std::fclose(err);
}

TEST(TrainLogTest, BadLogFormat) {
  EXPECT_THAT(LogFormatFromName("xml").status().message(), HasSubstr("--log-format xml: expected text or jsonl"));
}

}  // namespace
}  // namespace onnxamp::trainer
