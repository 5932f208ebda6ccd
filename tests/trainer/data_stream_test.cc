// Streaming data: .npy files and the stored entries of .npz archives are memory-mapped, checked in one pass that does
// not keep the pages, and gathered into batches without reading the whole file (an .npz entry wherever the zip put it,
// aligned or not); training from a mapped archive gives the losses of the same data in memory; truncated and empty
// files fail with one line naming the file.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "importer/npy.h"
#include "importer/npz.h"
#include "importer/tensor_file.h"
#include "importer/tensor_map.h"
#include "runtime/common/file_util.h"
#include "tests/trainer/train_test_util.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/data/dataset.h"
#include "trainer/trainer.h"

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

// Bytes resident in this process's mappings of `path` (the Rss lines of /proc/self/smaps): what the process holds
// of a mapped file, whatever its heap does (an ASan build's quarantine keeps freed heap resident).
int64_t MappedResidentBytes(const std::string& path) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_file = false;
  int64_t total = 0;
  while (std::getline(smaps, line)) {
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0) continue;
    if (line[space - 1] != ':') {  // a mapping's header: "start-end perms offset dev inode [path]"
      in_file = line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0;
    } else if (in_file && line.starts_with("Rss:")) {
      total += std::stoll(line.substr(4)) * 1024;  // "Rss:   123 kB"
    }
  }
  return total;
}

ModelInput FloatInput(const std::string& name, int64_t cols) {
  return ModelInput{name,
                    ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("batch"), ir::Dim::Value(cols)})};
}

// A tensor named `name` of `dims` whose elements are values(i), i the flat index.
template <typename T, typename F>
ir::Tensor Filled(const std::string& name, DType dtype, std::vector<int64_t> dims, F values) {
  ir::Tensor t(dtype, std::move(dims));
  std::span<T> v = t.mutable_values<T>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = values(i);
  t.set_name(name);
  return t;
}

// Appends `v` as `bytes` little-endian bytes.
void PutLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Raw deflate (as zip stores it) of `data`.
std::string Deflate(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// One entry of a hand-made .npz: its array, deflated or stored, and where a stored entry's array data must start in
// the file, modulo 8.
struct CraftedEntry {
  ir::Tensor tensor;
  bool deflate = false;
  size_t data_mod8 = 1;
};

// The bytes of an .npz archive written by hand as zipfile writes one (without zip64 records), except that a padding
// extra field in each stored entry's local header puts its array data at a file offset of data_mod8 modulo 8: never
// aligned to the element size when that is odd.
std::string CraftNpz(const std::vector<CraftedEntry>& entries) {
  std::string out, directory;
  for (const CraftedEntry& e : entries) {
    StatusOr<std::string> npy = importer::SerializeNpy(e.tensor, e.tensor.name());
    EXPECT_TRUE(npy.ok()) << npy.status().ToString();
    const std::string name = e.tensor.name() + ".npy";
    const std::string data = e.deflate ? Deflate(*npy) : *npy;
    const auto crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(npy->data()), npy->size()));
    size_t extra = 0;
    if (!e.deflate) {
      const size_t unpadded = out.size() + 30 + name.size() + 4 + (npy->size() - e.tensor.nbytes());
      extra = 4 + (e.data_mod8 + 8 - unpadded % 8) % 8;
    }
    const size_t offset = out.size();
    const int method = e.deflate ? 8 : 0;
    PutLe(out, 0x04034b50, 4);
    for (uint64_t v : {20, 0, method, 0, 0x21}) PutLe(out, v, 2);  // version, flags, method, time, date
    PutLe(out, crc, 4);
    PutLe(out, data.size(), 4);
    PutLe(out, npy->size(), 4);
    PutLe(out, name.size(), 2);
    PutLe(out, extra, 2);
    out += name;
    if (extra > 0) {
      PutLe(out, 0xcafe, 2);  // an extra field nobody knows: skipped by readers
      PutLe(out, extra - 4, 2);
      out.append(extra - 4, '\0');
    }
    out += data;
    PutLe(directory, 0x02014b50, 4);
    for (uint64_t v : {20, 20, 0, method, 0, 0x21})
      PutLe(directory, v, 2);  // made by, needed, flags, method, time, date
    PutLe(directory, crc, 4);
    PutLe(directory, data.size(), 4);
    PutLe(directory, npy->size(), 4);
    for (uint64_t v : {name.size(), size_t{0}, size_t{0}, size_t{0}, size_t{0}}) PutLe(directory, v, 2);
    PutLe(directory, 0, 4);  // external attributes
    PutLe(directory, offset, 4);
    directory += name;
  }
  const size_t directory_offset = out.size();
  out += directory;
  PutLe(out, 0x06054b50, 4);
  for (uint64_t v : {size_t{0}, size_t{0}, entries.size(), entries.size()}) PutLe(out, v, 2);
  PutLe(out, directory.size(), 4);
  PutLe(out, directory_offset, 4);
  PutLe(out, 0, 2);
  return out;
}

// Whether batches `indices` of `a` and `b` hold the same arrays, byte for byte.
void ExpectSameBatch(const Dataset& a, const Dataset& b, const std::vector<int64_t>& indices) {
  StatusOr<std::vector<ir::Tensor>> x = MakeBatch(a, indices);
  StatusOr<std::vector<ir::Tensor>> y = MakeBatch(b, indices);
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  ASSERT_EQ(x->size(), y->size());
  for (size_t k = 0; k < x->size(); ++k) {
    EXPECT_EQ((*x)[k].name(), (*y)[k].name());
    EXPECT_TRUE((*x)[k].SameContents((*y)[k])) << (*x)[k].name();
  }
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

TEST_F(DataStreamTest, LargeNpzIsMappedCheckedHashedAndGatheredWithoutBeingKeptInMemory) {
  constexpr int64_t kRows = 16384;  // 64 MiB of features
  const std::string path = (dir_ / "big.npz").string();
  {
    std::vector<ir::Tensor> arrays;
    arrays.push_back(Filled<float>("x", DType::kFloat32, {kRows, kCols},
                                   [](size_t i) { return Value(static_cast<int64_t>(i) / kCols, i % kCols); }));
    arrays.push_back(Filled<int64_t>("y", DType::kInt64, {kRows}, [](size_t i) { return int64_t(i % 10); }));
    ASSERT_TRUE(importer::WriteNpz(arrays, path).ok());  // stored entries, as numpy.savez writes them
  }
  ASSERT_GT(fs::file_size(path), static_cast<uintmax_t>(kRows * kCols * 4));
  std::string hash;
  {
    const int64_t before = ResidentBytes();
    StatusOr<Dataset> data = Dataset::Load(path);
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    ASSERT_EQ(data->arrays().size(), 2u);
    EXPECT_TRUE(importer::IsMapped(data->arrays()[0]));
    EXPECT_TRUE(importer::IsMapped(data->arrays()[1]));
    EXPECT_TRUE(IsMappedInProcess(path));
    const int64_t after_load = ResidentBytes() - before;
    RecordProperty("resident_growth_after_load_kib", static_cast<int>(after_load >> 10));
    EXPECT_LT(after_load, int64_t{8} << 20) << "loading read the archive";

    BindOptions bind;
    bind.labels.array = "y";
    bind.labels.num_classes = 10;
    StatusOr<Dataset> bound = data->Bind({FloatInput("x", kCols)}, bind);
    ASSERT_TRUE(bound.ok()) << bound.status().ToString();
    const int64_t after_bind = ResidentBytes() - before;
    RecordProperty("resident_growth_after_bind_kib", static_cast<int>(after_bind >> 10));
    EXPECT_LT(after_bind, int64_t{24} << 20) << "the checks kept the archive resident";

    for (int64_t start : {int64_t{0}, int64_t{7000}, kRows - 3}) {
      const std::vector<int64_t> rows = {start, start + 2, start + 1};
      StatusOr<std::vector<ir::Tensor>> batch = MakeBatch(*bound, rows);
      ASSERT_TRUE(batch.ok()) << batch.status().ToString();
      const ir::Tensor& b = (*batch)[0];
      ASSERT_EQ(b.dims(), (std::vector<int64_t>{3, kCols}));
      for (size_t k = 0; k < rows.size(); ++k) {
        for (int64_t c = 0; c < kCols; ++c) {
          ASSERT_EQ(b.values<float>()[k * kCols + static_cast<size_t>(c)], Value(rows[k], c)) << rows[k] << "," << c;
        }
        EXPECT_EQ((*batch)[1].values<int64_t>()[k], rows[k] % 10);
      }
    }
    hash = CheckpointDataHash(*bound);  // reads every byte
    const int64_t after_hash = ResidentBytes() - before;
    RecordProperty("resident_growth_after_hash_kib", static_cast<int>(after_hash >> 10));
    EXPECT_LT(after_hash, int64_t{24} << 20) << "hashing kept the archive resident";
  }
  EXPECT_FALSE(IsMappedInProcess(path)) << "the mapping outlived the last tensor using it";
  // The same bytes as the archive read into memory.
  StatusOr<std::vector<ir::Tensor>> read = importer::ReadNpz(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  StatusOr<Dataset> in_memory = Dataset::FromTensors(std::move(read).value(), path);
  ASSERT_TRUE(in_memory.ok());
  BindOptions bind;
  bind.labels.array = "y";
  StatusOr<Dataset> bound = in_memory->Bind({FloatInput("x", kCols)}, bind);
  ASSERT_TRUE(bound.ok());
  EXPECT_EQ(CheckpointDataHash(*bound), hash);
}

// Stored entries whose data start at odd offsets (and a deflated one) read as the arrays they hold: batches, the
// NaN/inf and label checks with their rows, the checkpoint hash, and splits all match the same arrays in memory.
TEST_F(DataStreamTest, MisalignedNpzEntriesGiveTheSameBatchesChecksAndHash) {
  constexpr int64_t kN = 37;
  auto arrays = [&](int64_t nan_row, int64_t inf_row, int64_t bad_label_row) {
    std::vector<CraftedEntry> e;
    e.push_back({Filled<float>("x", DType::kFloat32, {kN, 3},
                               [&](size_t i) {
                                 return static_cast<int64_t>(i / 3) == nan_row ? std::numeric_limits<float>::quiet_NaN()
                                                                               : static_cast<float>(i) * 0.5f;
                               }),
                 false, 1});
    e.push_back({Filled<uint16_t>("h", DType::kFloat16, {kN, 2},
                                  [&](size_t i) {
                                    return static_cast<int64_t>(i / 2) == inf_row ? uint16_t{0x7c00}
                                                                                  : static_cast<uint16_t>(0x3c00 + i);
                                  }),
                 false, 3});
    e.push_back({Filled<double>("d", DType::kFloat64, {kN}, [](size_t i) { return 1.0 / (1.0 + i); }), false, 5});
    e.push_back({Filled<int32_t>("z", DType::kInt32, {kN, 2}, [](size_t i) { return int32_t(i) * -3; }), true, 0});
    e.push_back(
        {Filled<int64_t>("y", DType::kInt64, {kN},
                         [&](size_t i) { return static_cast<int64_t>(i) == bad_label_row ? 9 : int64_t(i % 4); }),
         false, 7});
    return e;
  };
  const std::vector<CraftedEntry> good = arrays(-1, -1, -1);
  const std::string path = (dir_ / "odd.npz").string();
  ASSERT_TRUE(WriteFileAtomic(path, CraftNpz(good)).ok());

  // libzip reads the hand-made archive as the same arrays, every CRC right.
  StatusOr<std::vector<ir::Tensor>> read = importer::ReadNpz(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  StatusOr<Dataset> mapped = Dataset::Load(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  ASSERT_EQ(mapped->arrays().size(), good.size());
  for (size_t k = 0; k < good.size(); ++k) {
    const ir::Tensor& a = mapped->arrays()[k];
    SCOPED_TRACE(a.name());
    EXPECT_EQ(a.name(), good[k].tensor.name());
    EXPECT_TRUE(a.SameContents(good[k].tensor));
    EXPECT_TRUE((*read)[k].SameContents(good[k].tensor));
    EXPECT_EQ(importer::IsMapped(a), !good[k].deflate);
    if (!good[k].deflate) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 8, good[k].data_mod8);
    }
  }
  std::vector<ir::Tensor> originals;
  for (const CraftedEntry& e : good) originals.push_back(e.tensor);
  StatusOr<Dataset> memory = Dataset::FromTensors(originals, path);
  ASSERT_TRUE(memory.ok());

  const std::vector<ModelInput> inputs = {
      FloatInput("x", 3),
      {"h", ir::ValueType::Tensor(DType::kFloat16, ir::Shape{ir::Dim::Param("b"), ir::Dim::Value(2)})},
      {"d", ir::ValueType::Tensor(DType::kFloat64, ir::Shape{ir::Dim::Param("b")})},
      {"z", ir::ValueType::Tensor(DType::kInt32, ir::Shape{ir::Dim::Param("b"), ir::Dim::Value(2)})}};
  BindOptions bind;
  bind.labels.array = "y";
  bind.labels.num_classes = 4;
  StatusOr<Dataset> mapped_bound = mapped->Bind(inputs, bind);
  StatusOr<Dataset> memory_bound = memory->Bind(inputs, bind);
  ASSERT_TRUE(mapped_bound.ok()) << mapped_bound.status().ToString();
  ASSERT_TRUE(memory_bound.ok()) << memory_bound.status().ToString();
  for (const std::vector<int64_t>& rows :
       std::vector<std::vector<int64_t>>{{0}, {36, 0, 1, 2}, {5, 6, 7, 8, 9, 10, 11}, {3, 3, 20, 19, 18}}) {
    ExpectSameBatch(*mapped_bound, *memory_bound, rows);
  }
  EXPECT_EQ(CheckpointDataHash(*mapped_bound), CheckpointDataHash(*memory_bound));
  StatusOr<std::pair<Dataset, Dataset>> mapped_split = mapped_bound->Split(0.3, 5);
  StatusOr<std::pair<Dataset, Dataset>> memory_split = memory_bound->Split(0.3, 5);
  ASSERT_TRUE(mapped_split.ok() && memory_split.ok());
  ExpectSameBatch(mapped_split->first, memory_split->first, {0, 4, 2, 25});
  ExpectSameBatch(mapped_split->second, memory_split->second, {10, 0, 3});
  EXPECT_EQ(CheckpointDataHash(mapped_split->second), CheckpointDataHash(memory_split->second));

  // The checks read misaligned values and name the row.
  auto bind_error = [&](int64_t nan_row, int64_t inf_row, int64_t bad_label_row) {
    const std::string bad = (dir_ / "bad.npz").string();
    EXPECT_TRUE(WriteFileAtomic(bad, CraftNpz(arrays(nan_row, inf_row, bad_label_row))).ok());
    StatusOr<Dataset> d = Dataset::Load(bad);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    StatusOr<Dataset> b = d->Bind(inputs, bind);
    EXPECT_FALSE(b.ok());
    return b.status().message();
  };
  const std::string bad = (dir_ / "bad.npz").string();
  EXPECT_EQ(bind_error(21, -1, -1),
            bad + ": array 'x' for model input 'x' has nan at row 21 (non-finite values are refused unless allowed)");
  EXPECT_EQ(bind_error(-1, 30, -1),
            bad + ": array 'h' for model input 'h' has inf at row 30 (non-finite values are refused unless allowed)");
  EXPECT_EQ(bind_error(-1, -1, 12), bad + ": labels array 'y' has 9 at row 12, outside [0, 4)");
}

// Training from a mapped archive (entries at odd offsets) gives the losses, weights and validation results of the same
// data in memory, bit for bit; the archive, larger than the batches by far, is not read into memory.
TEST_F(DataStreamTest, MappedNpzTrainsLikeTheSameDataInMemory) {
  const ir::Model model = test_util::LoadReference("digits_mlp.onnx");
  const std::vector<ModelInput> inputs = DataInputs(*model.graph);
  ASSERT_EQ(inputs.size(), 1u);
  constexpr int64_t kN = 262144;  // 64 MiB of features
  std::mt19937 gen(11);
  std::normal_distribution<float> normal;
  std::vector<CraftedEntry> entries;
  entries.push_back(
      {Filled<float>(inputs[0].name, DType::kFloat32, {kN, 64}, [&](size_t) { return normal(gen); }), false, 3});
  entries.push_back(
      {Filled<int64_t>("labels", DType::kInt64, {kN}, [&](size_t) { return int64_t(gen() % 10); }), false, 5});
  const std::string path = (dir_ / "digits.npz").string();
  ASSERT_TRUE(WriteFileAtomic(path, CraftNpz(entries)).ok());
  std::vector<ir::Tensor> originals;
  for (const CraftedEntry& e : entries) originals.push_back(e.tensor);
  entries.clear();

  TrainerOptions o;
  o.steps = 12;
  o.batch_size = 64;
  o.threads = 1;
  o.seed = 5;
  BindOptions bind;
  bind.labels.array = "labels";
  bind.labels.num_classes = 10;
  struct Run {
    std::vector<double> losses;
    std::vector<ir::Tensor> values;
    EvalRecord eval;
    int64_t resident_growth = 0;
    int64_t file_resident = 0;  // of the archive's mapping, at the end of the run
    bool file_mapped = false;
  };
  auto train = [&](StatusOr<Dataset> data) {
    Run r;
    const int64_t before = ResidentBytes();
    EXPECT_TRUE(data.ok()) << data.status().ToString();
    data->set_mapped_resident_budget(4 << 20);  // below the file's size: batches release the pages they map
    StatusOr<Dataset> bound = data->Bind(inputs, bind);
    EXPECT_TRUE(bound.ok()) << bound.status().ToString();
    StatusOr<std::pair<Dataset, Dataset>> parts = bound->Split(0.002, 9);
    EXPECT_TRUE(parts.ok()) << parts.status().ToString();
    StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, parts->first);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    if (!t.ok()) return r;
    while (!(*t)->Done()) {
      StatusOr<StepRecord> s = (*t)->Step();
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      if (!s.ok()) return r;
      r.losses.push_back(s->loss);
    }
    StatusOr<EvalRecord> eval = (*t)->Evaluate(parts->second);
    EXPECT_TRUE(eval.ok()) << eval.status().ToString();
    r.eval = eval.ok() ? *eval : EvalRecord{};
    r.values = (*t)->TrainedValues();
    r.resident_growth = ResidentBytes() - before;
    r.file_mapped = IsMappedInProcess(path);
    r.file_resident = MappedResidentBytes(path);
    return r;
  };
  // In memory first: what a trainer allocates once per process (thread pools, kernels' caches) is counted there.
  const Run memory = train(Dataset::FromTensors(originals, path));
  const Run mapped = train(Dataset::Load(path));
  RecordProperty("memory_resident_growth_kib", static_cast<int>(memory.resident_growth >> 10));
  RecordProperty("mapped_resident_growth_kib", static_cast<int>(mapped.resident_growth >> 10));
  RecordProperty("mapped_file_resident_kib", static_cast<int>(mapped.file_resident >> 10));
  EXPECT_FALSE(memory.file_mapped);
  EXPECT_TRUE(mapped.file_mapped) << "the archive was read, not mapped";
  EXPECT_LT(mapped.file_resident, int64_t{16} << 20) << "training kept the mapped archive (66 MiB) resident";
#if !defined(__SANITIZE_ADDRESS__)
  // Not under ASan: its allocator keeps freed heap resident (the quarantine), so the process's growth says nothing.
  EXPECT_LT(mapped.resident_growth, int64_t{16} << 20) << "training kept the archive (66 MiB) in memory";
#endif
  ASSERT_EQ(mapped.losses.size(), 12u);
  EXPECT_EQ(mapped.losses, memory.losses);
  EXPECT_EQ(mapped.eval.samples, 524);
  EXPECT_EQ(mapped.eval.samples, memory.eval.samples);
  EXPECT_EQ(mapped.eval.loss, memory.eval.loss);
  EXPECT_EQ(mapped.eval.accuracy, memory.eval.accuracy);
  ASSERT_EQ(mapped.values.size(), memory.values.size());
  for (size_t i = 0; i < mapped.values.size(); ++i) EXPECT_TRUE(mapped.values[i].SameContents(memory.values[i]));
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
