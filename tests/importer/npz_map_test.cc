// Memory-mapped .npz archives (MapNpzFile): stored entries become views of the mapping wherever the zip put them
// (numpy's zip64 local headers, zip64 central directories), deflated ones are read; every guard of ReadNpz holds, plus
// the checks that locate an entry's bytes in the file; the CRC of a mapped entry is not checked.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "importer/npy.h"
#include "importer/npz.h"
#include "importer/tensor_map.h"
#include "runtime/common/file_util.h"

namespace onnxamp::importer {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(ONNXAMP_SOURCE_DIR) + "/tests/data/tensor_files/";

// CRC-32 (IEEE, reflected), as zip records it.
uint32_t Crc32(const std::string& data) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void PutLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// An archive of stored entries as zipfile writes one; with `zip64`, the central directory records carry their
// offsets in zip64 extra fields and the end record points to zip64 end records, as for archives over 4 GiB.
std::string StoredZip(const std::vector<ir::Tensor>& tensors, bool zip64) {
  std::string out, directory;
  for (const ir::Tensor& t : tensors) {
    const std::string npy = SerializeNpy(t, t.name()).value();
    const std::string name = t.name() + ".npy";
    const uint32_t crc = Crc32(npy);
    const size_t offset = out.size();
    PutLe(out, 0x04034b50, 4);
    for (uint64_t v : {45, 0, 0, 0, 0x21}) PutLe(out, v, 2);
    PutLe(out, crc, 4);
    PutLe(out, npy.size(), 4);
    PutLe(out, npy.size(), 4);
    PutLe(out, name.size(), 2);
    PutLe(out, 0, 2);
    out += name + npy;
    PutLe(directory, 0x02014b50, 4);
    for (uint64_t v : {45, 45, 0, 0, 0, 0x21}) PutLe(directory, v, 2);
    PutLe(directory, crc, 4);
    PutLe(directory, npy.size(), 4);
    PutLe(directory, npy.size(), 4);
    for (uint64_t v : {name.size(), size_t{zip64 ? 12u : 0u}, size_t{0}, size_t{0}, size_t{0}}) PutLe(directory, v, 2);
    PutLe(directory, 0, 4);
    PutLe(directory, zip64 ? 0xffffffff : offset, 4);
    directory += name;
    if (zip64) {
      PutLe(directory, 0x0001, 2);
      PutLe(directory, 8, 2);
      PutLe(directory, offset, 8);
    }
  }
  const size_t directory_offset = out.size();
  out += directory;
  if (zip64) {
    const size_t end64 = out.size();
    PutLe(out, 0x06064b50, 4);
    PutLe(out, 44, 8);
    PutLe(out, 45, 2);
    PutLe(out, 45, 2);
    PutLe(out, 0, 4);
    PutLe(out, 0, 4);
    PutLe(out, tensors.size(), 8);
    PutLe(out, tensors.size(), 8);
    PutLe(out, directory.size(), 8);
    PutLe(out, directory_offset, 8);
    PutLe(out, 0x07064b50, 4);
    PutLe(out, 0, 4);
    PutLe(out, end64, 8);
    PutLe(out, 1, 4);
  }
  PutLe(out, 0x06054b50, 4);
  for (uint64_t v : {size_t{0}, size_t{0}, tensors.size(), tensors.size()}) PutLe(out, v, 2);
  PutLe(out, directory.size(), 4);
  PutLe(out, zip64 ? 0xffffffff : directory_offset, 4);
  PutLe(out, 0, 2);
  return out;
}

ir::Tensor Floats(const std::string& name, int64_t n) {
  ir::Tensor t(DType::kFloat32, {n, 3});
  for (size_t i = 0; i < t.mutable_values<float>().size(); ++i) t.mutable_values<float>()[i] = 0.25f * i;
  t.set_name(name);
  return t;
}

class NpzMapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "onnxamp_npz_map_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) const {
    const std::string path = (dir_ / name).string();
    EXPECT_TRUE(WriteFileAtomic(path, bytes).ok());
    return path;
  }
  // MapNpzFile fails with one line naming `path` and containing `needle`.
  static void ExpectMapError(const std::string& path, const std::string& needle = "",
                             const NpzLimits& limits = NpzLimits()) {
    StatusOr<std::vector<ir::Tensor>> t = MapNpzFile(path, limits);
    ASSERT_FALSE(t.ok()) << path;
    const std::string& message = t.status().message();
    EXPECT_EQ(message.rfind(path, 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }

  fs::path dir_;
};

// numpy.savez's own archive: zip64 extra fields in the local headers, the first array at an odd offset.
TEST_F(NpzMapTest, NumpyArchiveMapsItsStoredEntries) {
  StatusOr<std::vector<ir::Tensor>> mapped = MapNpzFile(kFixtures + "stored.npz");
  StatusOr<std::vector<ir::Tensor>> read = ReadNpz(kFixtures + "stored.npz");
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(mapped->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*mapped)[i].name(), (*read)[i].name());
    EXPECT_TRUE((*mapped)[i].SameContents((*read)[i])) << (*read)[i].name();
  }
  EXPECT_TRUE(IsMapped((*mapped)[0]));  // float32 data at an odd offset
  EXPECT_NE(reinterpret_cast<uintptr_t>((*mapped)[0].data()) % 4, 0u);
  EXPECT_TRUE(IsMapped((*mapped)[1]));
  EXPECT_FALSE(IsMapped((*mapped)[2]));  // bool: converted, so copied

  StatusOr<std::vector<ir::Tensor>> deflated = MapNpzFile(kFixtures + "deflated.npz");
  ASSERT_TRUE(deflated.ok()) << deflated.status().ToString();
  StatusOr<std::vector<ir::Tensor>> deflated_read = ReadNpz(kFixtures + "deflated.npz");
  ASSERT_EQ(deflated->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(IsMapped((*deflated)[i]));
    EXPECT_TRUE((*deflated)[i].SameContents((*deflated_read)[i]));
  }
}

TEST_F(NpzMapTest, Zip64CentralDirectoryIsFollowed) {
  const std::vector<ir::Tensor> tensors = {Floats("a", 5), Floats("b", 2)};
  for (bool zip64 : {false, true}) {
    SCOPED_TRACE(zip64 ? "zip64" : "zip");
    const std::string path = Write("z.npz", StoredZip(tensors, zip64));
    ASSERT_TRUE(ReadNpz(path).ok()) << ReadNpz(path).status().ToString();  // libzip agrees it is a valid archive
    StatusOr<std::vector<ir::Tensor>> mapped = MapNpzFile(path);
    ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
    ASSERT_EQ(mapped->size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_TRUE(IsMapped((*mapped)[i]));
      EXPECT_TRUE((*mapped)[i].SameContents(tensors[i]));
      EXPECT_EQ((*mapped)[i].name(), tensors[i].name());
    }
  }
}

// The guards of ReadNpz hold for mapping; the limits bound what is read into memory, not what is mapped.
TEST_F(NpzMapTest, GuardsAndLimits) {
  ExpectMapError(kFixtures + "bomb.npz", "zip bomb");
  ExpectMapError(kFixtures + "size_too_large.npz");
  ExpectMapError(kFixtures + "size_too_small.npz");
  ExpectMapError(kFixtures + "non_npy_entry.npz", "'readme.txt'");
  ExpectMapError(Write("empty.npz", ""), "empty file");
  ExpectMapError(Write("garbage.npz", std::string("PK\x03\x04", 4) + std::string(200, 'x')), "not a valid .npz");
  const std::string good = ReadFile(kFixtures + "stored.npz").value();
  ExpectMapError(Write("truncated.npz", good.substr(0, good.size() / 2)));
  ExpectMapError(Write("no_directory.npz", good.substr(0, good.size() - 22)));
  NpzLimits small;
  small.max_entry_bytes = 200;
  ExpectMapError(kFixtures + "deflated.npz", "limit of 200", small);
  NpzLimits tiny;
  tiny.max_entry_bytes = 1;
  tiny.max_total_bytes = 1;
  EXPECT_TRUE(MapNpzFile(kFixtures + "stored.npz", tiny).ok()) << "mapping allocates nothing";
}

// A central directory whose offsets or sizes do not match the local headers: located, checked, refused.
TEST_F(NpzMapTest, EntriesMustLieWhereTheDirectorySays) {
  const std::vector<ir::Tensor> tensors = {Floats("a", 5), Floats("b", 2)};
  const std::string zip = StoredZip(tensors, false);
  const size_t directory = zip.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(directory, std::string::npos);
  const size_t second = zip.find(std::string("PK\x01\x02", 4), directory + 4);
  ASSERT_NE(second, std::string::npos);
  // The second record's local header offset moved by one byte: no local header there.
  std::string shifted = zip;
  shifted[second + 42] = static_cast<char>(shifted[second + 42] + 1);
  const std::string shifted_path = Write("shifted.npz", shifted);
  StatusOr<std::vector<ir::Tensor>> mapped = MapNpzFile(shifted_path);
  ASSERT_FALSE(mapped.ok());
  EXPECT_NE(mapped.status().message().find(shifted_path + ": entry 'b.npy'"), std::string::npos)
      << mapped.status().message();
  // The second local header names another entry.
  std::string renamed = zip;
  const size_t local_b = renamed.find("b.npy");
  ASSERT_NE(local_b, std::string::npos);
  renamed[local_b] = 'c';
  ExpectMapError(Write("renamed.npz", renamed), "the local header names another entry");
}

// Not checking the CRC of mapped entries: a flipped bit in an array's data reads as it is (ReadNpz, which reads the
// entry, refuses it); a flipped bit in the .npy header still fails its parse.
TEST_F(NpzMapTest, MappedEntriesAreNotCrcChecked) {
  const ir::Tensor a = Floats("a", 4);
  std::string zip = StoredZip({a}, false);
  const size_t data = zip.find(std::string(kNpyMagic)) + (SerializeNpy(a, "a").value().size() - a.nbytes());
  zip[data + 5] = static_cast<char>(zip[data + 5] ^ 0x40);
  const std::string path = Write("flipped.npz", zip);
  EXPECT_FALSE(ReadNpz(path).ok());
  StatusOr<std::vector<ir::Tensor>> mapped = MapNpzFile(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  EXPECT_FALSE((*mapped)[0].SameContents(a));
  std::string header = StoredZip({a}, false);
  header[header.find(std::string(kNpyMagic)) + 1] = 'X';
  ExpectMapError(Write("magic.npz", header), "entry 'a.npy'");
}

// Corrupted archives (random bytes of the headers and records changed, zip and zip64): an error of one line naming the
// file, or arrays whose bytes lie inside the file (read back here in full), never a crash.
TEST_F(NpzMapTest, CorruptedHeadersNeverCrash) {
  const std::vector<ir::Tensor> tensors = {Floats("a", 5), Floats("b", 2)};
  std::mt19937 gen(1);
  int mapped_ok = 0;
  for (bool zip64 : {false, true}) {
    const std::string good = StoredZip(tensors, zip64);
    const size_t directory = good.find(std::string("PK\x01\x02", 4));
    for (int round = 0; round < 1000; ++round) {
      std::string bad = good;
      const int changes = 1 + static_cast<int>(gen() % 3);
      for (int c = 0; c < changes; ++c) {
        // Mostly the central directory and end records, sometimes a local header.
        const size_t at = gen() % 4 == 0 ? gen() % 40 : directory + gen() % (good.size() - directory);
        bad[at] = static_cast<char>(gen() % 3 == 0 ? 0xff : gen());
      }
      // A new file each time: truncating one can wait for its writeback.
      const std::string path =
          (dir_ / ("fuzz" + std::to_string(zip64) + "-" + std::to_string(round) + ".npz")).string();
      std::ofstream(path, std::ios::binary) << bad;
      StatusOr<std::vector<ir::Tensor>> mapped = MapNpzFile(path);
      if (!mapped.ok()) {
        EXPECT_EQ(mapped.status().message().rfind(path, 0), 0u) << mapped.status().message();
        EXPECT_EQ(mapped.status().message().find('\n'), std::string::npos);
        continue;
      }
      ++mapped_ok;
      for (const ir::Tensor& t : *mapped) {
        std::string copy(t.nbytes(), '\0');
        std::memcpy(copy.data(), t.data(), t.nbytes());
        EXPECT_LE(copy.size(), bad.size());
      }
    }
  }
  RecordProperty("archives_that_still_mapped", mapped_ok);
}

}  // namespace
}  // namespace onnxamp::importer
