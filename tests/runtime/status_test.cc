// Status / StatusOr behaviour and the atomic file helpers.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "runtime/common/file_util.h"
#include "runtime/common/status.h"

namespace onnxamp {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd value ", x);
  return x / 2;
}

Status Quarter(int x, int* out) {
  ONNXAMP_ASSIGN_OR_RETURN(int h, Half(x));
  ONNXAMP_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(StatusTest, PropagatesAndFormats) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status st = Quarter(6, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "odd value 3");
  EXPECT_EQ(st.WithContext("model.onnx").message(), "model.onnx: odd value 3");
  EXPECT_EQ(st.ToString(), "InvalidArgument: odd value 3");
  StatusOr<int> bad = Status::Ok();  // a value-less OK is a bug, reported as Internal
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
}

class FileUtilTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("onnxamp_fileutil_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(FileUtilTest, AtomicWriteReplacesAndLeavesNoTemporaries) {
  const std::string path = (dir_ / "out.bin").string();
  ASSERT_TRUE(WriteFileAtomic(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "second").ok());
  EXPECT_EQ(*ReadFile(path), "second");
  int count = 0;
  for (auto& e : std::filesystem::directory_iterator(dir_)) count += e.is_regular_file();
  EXPECT_EQ(count, 1);
}

TEST_F(FileUtilTest, FailedWriteLeavesNothing) {
  const std::string path = (dir_ / "missing_folder" / "out.bin").string();
  Status st = WriteFileAtomic(path, "x");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("missing_folder/out.bin"), std::string::npos) << st.message();
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

// The checks before a long run: each refusal names the path and why; what passes leaves nothing behind (the probe
// file is removed, no folder is created).
TEST_F(FileUtilTest, WritableChecksRefuseWhatCouldNeverBeWrittenAndCreateNothing) {
  const std::string file = (dir_ / "a_file").string();
  ASSERT_TRUE(WriteFileAtomic(file, "x").ok());
  EXPECT_TRUE(CheckWritableFile((dir_ / "out.onnx").string()).ok());
  EXPECT_TRUE(CheckWritableFile(file).ok());  // replaced when written
  EXPECT_EQ(CheckWritableFile(dir_.string()).message(), dir_.string() + ": is a folder, not a file");
  EXPECT_EQ(CheckWritableFile((dir_ / "no" / "out.onnx").string()).message(),
            (dir_ / "no" / "out.onnx").string() + ": the folder " + (dir_ / "no").string() + " does not exist");
  EXPECT_EQ(CheckWritableFile(file + "/out.onnx").message(), file + "/out.onnx: " + file + " is not a folder");
  EXPECT_TRUE(CheckWritableFolder(dir_.string()).ok());
  EXPECT_TRUE(CheckWritableFolder((dir_ / "new" / "deeper").string()).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "new"));
  EXPECT_EQ(CheckWritableFolder(file).message(), file + ": is not a folder");
  EXPECT_EQ(CheckWritableFolder(file + "/sub").message(), file + "/sub: " + file + " is not a folder");
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir_)) entries += e.exists();
  EXPECT_EQ(entries, 1);  // a_file alone: no probe left
}

TEST_F(FileUtilTest, WriteFailureMidwayLeavesTheOldFile) {
  // A file-size limit makes write() fail part way with EFBIG, as a full disk fails with ENOSPC.
  const std::string path = (dir_ / "keep.bin").string();
  ASSERT_TRUE(WriteFileAtomic(path, "old").ok());
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  Status st = WriteFileAtomic(path, std::string(1 << 20, 'x'));
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find("keep.bin"), std::string::npos) << st.message();
  EXPECT_EQ(*ReadFile(path), "old");
  int count = 0;
  for (auto& e : std::filesystem::directory_iterator(dir_)) count += e.is_regular_file();
  EXPECT_EQ(count, 1);  // no temporary left behind
}

TEST_F(FileUtilTest, ReadFileLimitsAndErrors) {
  const std::string path = (dir_ / "data.bin").string();
  ASSERT_TRUE(WriteFileAtomic(path, "0123456789").ok());
  auto limited = ReadFile(path, 4);
  ASSERT_FALSE(limited.ok());
  EXPECT_EQ(limited.status().code(), StatusCode::kOutOfRange);
  EXPECT_FALSE(ReadFile((dir_ / "nope").string()).ok());
  auto dir = ReadFile(dir_.string());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("not a regular file"), std::string::npos);
}

TEST_F(FileUtilTest, SeveralFilesAppearTogetherOrNotAtAll) {
  const std::string a = (dir_ / "a").string();
  const std::string b = (dir_ / "sub" / "b").string();  // folder missing: the second write fails
  Status st = WriteFilesAtomic({{a, "A"}, {b, "B"}});
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
  ASSERT_TRUE(WriteFilesAtomic({{a, "A"}, {(dir_ / "c").string(), "C"}}).ok());
  EXPECT_EQ(*ReadFile(a), "A");
}

TEST_F(FileUtilTest, StreamedFilesAreWrittenByTheirCallbacksOrNotAtAll) {
  const std::string a = (dir_ / "a").string();
  const std::string b = (dir_ / "b").string();
  auto write_parts = [](const std::string& path) {
    return [path](int fd) -> Status {
      ONNXAMP_RETURN_IF_ERROR(WriteAll(fd, "part1,", path));
      return WriteAll(fd, "part2", path);
    };
  };
  Status failed = WriteStreamedFilesAtomic(
      {{a, write_parts(a)},
       {b, [&](int fd) { return WriteAll(fd, "half", b).ok() ? IoError(b, ": gave up") : Status::Ok(); }}});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.message(), b + ": gave up");
  EXPECT_TRUE(std::filesystem::is_empty(dir_));  // neither file, no temporaries
  ASSERT_TRUE(WriteStreamedFilesAtomic({{a, write_parts(a)}, {b, write_parts(b)}}).ok());
  EXPECT_EQ(*ReadFile(a), "part1,part2");
  EXPECT_EQ(*ReadFile(b), "part1,part2");
}

TEST(PeakResidentBytesTest, GrowsWithTouchedMemoryAndNeverFalls) {
  const uint64_t before = PeakResidentBytes();
  ASSERT_GT(before, 0u) << "/proc/self/status has no VmHWM line";
  constexpr size_t kBytes = size_t{256} << 20;  // above anything the test binary held before
  {
    std::vector<char> block(kBytes);
    for (size_t i = 0; i < kBytes; i += 4096) block[i] = static_cast<char>(i >> 12);
    EXPECT_GE(PeakResidentBytes(), kBytes);
    EXPECT_NE(block[4096], block[8192]);  // the writes are read, so none is optimised away
  }
  EXPECT_GE(PeakResidentBytes(), kBytes) << "a peak, not the current resident set";
}

}  // namespace
}  // namespace onnxamp
