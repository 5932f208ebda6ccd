// Streaming data: .npy files are memory-mapped, checked in one pass that does not keep the pages, and gathered into
// batches without reading the whole file; truncated and empty files fail with one line naming the file.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "importer/tensor_file.h"
#include "importer/tensor_map.h"
#include "runtime/common/file_util.h"
#include "trainer/data/dataset.h"

namespace onnxamp::trainer {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kCols = 1024;  // 4 KiB per float32 row

// The value of element (row, col) in the test files: exact in float32.
float Value(int64_t row, int64_t col) { return static_cast<float>((row * 7 + col) % 65536); }

// Bytes of this process resident in memory (/proc/self/statm).
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// Whether /proc/self/maps lists a mapping of `path`.
bool IsMappedInProcess(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(path) != std::string::npos) return true;
  }
  return false;
}

ModelInput FloatInput(const std::string& name, int64_t cols) {
  return ModelInput{name,
                    ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("batch"), ir::Dim::Value(cols)})};
}

class DataStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "onnxamp_data_stream_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `rows` x kCols float32 values Value(row, col) to DIR/name.npy, with `poison` (if set) at row poison_row.
  std::string WriteFeatures(const std::string& name, int64_t rows, int64_t poison_row = -1,
                            float poison = std::numeric_limits<float>::quiet_NaN()) {
    ir::Tensor t(DType::kFloat32, {rows, kCols});
    std::span<float> v = t.mutable_values<float>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < kCols; ++c) v[static_cast<size_t>(r * kCols + c)] = Value(r, c);
    }
    if (poison_row >= 0) v[static_cast<size_t>(poison_row * kCols + 3)] = poison;
    const std::string path = (dir_ / (name + ".npy")).string();
    EXPECT_TRUE(importer::WriteTensorFile(t, path).ok());
    return path;
  }

  fs::path dir_;
};

TEST_F(DataStreamTest, LargeNpyIsMappedCheckedAndGatheredWithoutBeingKeptInMemory) {
  constexpr int64_t kRows = 16384;  // 64 MiB
  const std::string path = WriteFeatures("x", kRows);
  ASSERT_EQ(fs::file_size(path), 128 + static_cast<uintmax_t>(kRows * kCols * 4));
  {
    const int64_t before = ResidentBytes();
    StatusOr<Dataset> data = Dataset::Load(path);
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    ASSERT_TRUE(importer::IsMapped(data->arrays()[0]));
    EXPECT_TRUE(IsMappedInProcess(path));
    const int64_t after_load = ResidentBytes() - before;
    RecordProperty("resident_growth_after_load_kib", static_cast<int>(after_load >> 10));
    EXPECT_LT(after_load, int64_t{4} << 20) << "loading read the file";

    // Bind checks every value for NaN/inf in one pass, releasing the pages behind it.
    StatusOr<Dataset> bound = data->Bind({FloatInput("x", kCols)}, BindOptions{});
    ASSERT_TRUE(bound.ok()) << bound.status().ToString();
    EXPECT_TRUE(importer::IsMapped(bound->arrays()[0]));
    const int64_t after_bind = ResidentBytes() - before;
    RecordProperty("resident_growth_after_bind_kib", static_cast<int>(after_bind >> 10));
    EXPECT_LT(after_bind, int64_t{24} << 20) << "the finite check kept the file resident";

    // Batches of a few rows, from anywhere in the file.
    int64_t checked = 0;
    for (int64_t start : {int64_t{0}, int64_t{5000}, kRows - 3}) {
      const std::vector<int64_t> rows = {start, start + 2, start + 1};
      StatusOr<std::vector<ir::Tensor>> batch = MakeBatch(*bound, rows);
      ASSERT_TRUE(batch.ok()) << batch.status().ToString();
      ASSERT_EQ(batch->size(), 1u);
      const ir::Tensor& b = (*batch)[0];
      ASSERT_EQ(b.dims(), (std::vector<int64_t>{3, kCols}));
      EXPECT_FALSE(importer::IsMapped(b));
      std::span<const float> v = b.values<float>();
      for (size_t k = 0; k < rows.size(); ++k) {
        for (int64_t c = 0; c < kCols; ++c) {
          ASSERT_EQ(v[k * kCols + static_cast<size_t>(c)], Value(rows[k], c)) << "row " << rows[k] << " col " << c;
          ++checked;
        }
      }
    }
    EXPECT_EQ(checked, 9 * kCols);
    const int64_t after_batches = ResidentBytes() - before;
    RecordProperty("resident_growth_after_batches_kib", static_cast<int>(after_batches >> 10));
    EXPECT_LT(after_batches, int64_t{24} << 20) << "gathering read the file";
  }
  EXPECT_FALSE(IsMappedInProcess(path)) << "the mapping outlived the last tensor using it";
}

TEST_F(DataStreamTest, NonFiniteValueBeyondTheFirstChunkNamesItsRow) {
  constexpr int64_t kRows = 4096;  // 16 MiB: two scan chunks
  const std::string path = WriteFeatures("feat", kRows, 3000, -std::numeric_limits<float>::infinity());
  StatusOr<Dataset> data = Dataset::Load(path);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  ASSERT_TRUE(importer::IsMapped(data->arrays()[0]));
  StatusOr<Dataset> bound = data->Bind({FloatInput("feat", kCols)}, BindOptions{});
  ASSERT_FALSE(bound.ok());
  EXPECT_EQ(bound.status().message(), path +
                                          ": array 'feat' for model input 'feat' has -inf at row 3000 (non-finite "
                                          "values are refused unless allowed)");
  // Allowed: binds, and the value reads back.
  BindOptions allow;
  allow.allow_non_finite = true;
  bound = data->Bind({FloatInput("feat", kCols)}, allow);
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  StatusOr<std::vector<ir::Tensor>> batch = MakeBatch(*bound, {3000});
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE(std::isinf((*batch)[0].values<float>()[3]));
  EXPECT_EQ((*batch)[0].values<float>()[4], Value(3000, 4));
}

TEST_F(DataStreamTest, TruncatedNpyIsOneLineNamingTheFile) {
  const std::string path = WriteFeatures("t", 64);
  fs::resize_file(path, fs::file_size(path) - 4096 - 10);
  StatusOr<Dataset> data = Dataset::Load(path);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().message(),
            path +
                ": .npy data size does not match the header: shape (64, 1024) of '<f4' needs 262144 bytes, the file "
                "has 258038 (truncated file)");
  EXPECT_FALSE(IsMappedInProcess(path));
}

TEST_F(DataStreamTest, EmptyAndMissingNpyFilesNameTheFile) {
  const std::string empty = (dir_ / "empty.npy").string();
  ASSERT_TRUE(WriteFileAtomic(empty, "").ok());
  StatusOr<Dataset> data = Dataset::Load(empty);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().message(), empty + ": empty file");
  const std::string missing = (dir_ / "missing.npy").string();
  data = Dataset::Load(missing);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().message(), missing + ": cannot open: No such file or directory");
}

TEST_F(DataStreamTest, EmptyFilesOfEveryFormatSayEmptyFile) {
  for (const char* name : {"e.npz", "e.pb", "e.npy", "e"}) {
    const std::string path = (dir_ / name).string();
    ASSERT_TRUE(WriteFileAtomic(path, "").ok());
    StatusOr<Dataset> data = Dataset::Load(path);
    ASSERT_FALSE(data.ok()) << name;
    EXPECT_EQ(data.status().message(), path + ": empty file");
  }
  const std::string csv = (dir_ / "e.csv").string();
  ASSERT_TRUE(WriteFileAtomic(csv, "").ok());
  EXPECT_EQ(Dataset::Load(csv).status().message(), csv + ": empty file (no rows)");
}

TEST_F(DataStreamTest, ArraysThatNeedConversionAreCopied) {
  // A big-endian array cannot be used in place: it is read and byteswapped.
  const std::string path = WriteFeatures("be", 2);
  std::string bytes = ReadFile(path).value();
  const size_t descr = bytes.find("'<f4'");
  ASSERT_NE(descr, std::string::npos);
  bytes[descr + 1] = '>';
  const size_t data_offset = bytes.size() - 2 * kCols * 4;
  for (size_t i = data_offset; i < bytes.size(); i += 4)
    std::swap(bytes[i], bytes[i + 3]), std::swap(bytes[i + 1], bytes[i + 2]);
  ASSERT_TRUE(WriteFileAtomic(path, bytes).ok());
  StatusOr<Dataset> data = Dataset::Load(path);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_FALSE(importer::IsMapped(data->arrays()[0]));
  EXPECT_EQ(data->arrays()[0].values<float>()[kCols + 5], Value(1, 5));
  EXPECT_FALSE(IsMappedInProcess(path));
}

}  // namespace
}  // namespace onnxamp::trainer
