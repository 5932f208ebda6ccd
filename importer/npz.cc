// NumPy .npz archives through libzip: guarded reading of .npy entries (into memory, or located in the archive's bytes
// for a memory map), and in-memory writing of stored entries.
#include "importer/npz.h"

#include <zip.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string_view>
#include <utility>

#include "importer/npy.h"
#include "runtime/common/text.h"

namespace onnxamp::importer {
namespace {

constexpr std::string_view kNpySuffix = ".npy";

// Deflate cannot expand data by more than 1032:1 (a 258-byte match per two bits at best). A declared size beyond
// that (plus some slack for tiny entries) is a lie, whatever the limits say.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr uint64_t kDeflateSlack = 4096;

// Entries written by SerializeNpz carry this fixed modification time (noon, 1 January 1980 UTC: the zip epoch)
// so that the same tensors always give the same bytes.
constexpr time_t kFixedMtime = 315576000;

// An empty zip archive: just the end-of-central-directory record. numpy.savez with no arrays writes this.
constexpr std::string_view kEmptyZip{"PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 22};

std::string ZipErrorText(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

struct ZipCloser {
  void operator()(zip_t* za) const { zip_discard(za); }  // read-only: nothing to write back
};
struct ZipFileCloser {
  void operator()(zip_file_t* zf) const { zip_fclose(zf); }
};

// Reads exactly `size` bytes of entry `index`, failing if the entry holds fewer or more.
StatusOr<std::string> ReadEntry(zip_t* za, zip_uint64_t index, uint64_t size, const std::string& where) {
  std::unique_ptr<zip_file_t, ZipFileCloser> file(zip_fopen_index(za, index, 0));
  if (!file) return InvalidArgument(where, ": cannot open the entry: ", zip_strerror(za));
  std::string data(static_cast<size_t>(size), '\0');
  uint64_t done = 0;
  while (done < size) {
    const zip_int64_t n = zip_fread(file.get(), data.data() + done, size - done);
    if (n < 0) return InvalidArgument(where, ": corrupt entry: ", zip_file_strerror(file.get()));
    if (n == 0) break;
    done += static_cast<uint64_t>(n);
  }
  if (done != size) {
    return InvalidArgument(where, ": the entry declares ", size, " bytes uncompressed but holds only ", done);
  }
  // Reading past the declared end both detects extra data and makes libzip check the CRC.
  char extra;
  const zip_int64_t n = zip_fread(file.get(), &extra, 1);
  if (n < 0) return InvalidArgument(where, ": corrupt entry: ", zip_file_strerror(file.get()));
  if (n > 0) return InvalidArgument(where, ": the entry holds more than the ", size, " bytes it declares");
  return data;
}

// The checks of entry `index` that need no reading of its data: a name "<name>.npy" not seen before (added to
// `names`), no encryption, stored or deflated, and declared sizes that the method can produce.
StatusOr<NpzEntry> CheckEntry(zip_t* za, zip_uint64_t index, const std::string& path, std::set<std::string>* names) {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(za, index, 0, &st) != 0) {
    return InvalidArgument(path, ": cannot read entry ", index, ": ", zip_strerror(za));
  }
  constexpr zip_uint64_t kNeeded =
      ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
  if ((st.valid & kNeeded) != kNeeded) return InvalidArgument(path, ": entry ", index, " lacks its size or name");
  NpzEntry entry;
  const std::string name = st.name;
  entry.where = StrCat(path, ": entry '", EscapeControlBytes(name), "'");
  if (name.size() <= kNpySuffix.size() || !name.ends_with(kNpySuffix)) {
    return InvalidArgument(entry.where, " is not an .npy array (every .npz entry must be named <name>.npy)");
  }
  entry.name = name.substr(0, name.size() - kNpySuffix.size());
  if (!names->insert(entry.name).second) return InvalidArgument(entry.where, " appears twice in the archive");
  if (st.encryption_method != ZIP_EM_NONE) return Unimplemented(entry.where, " is encrypted");
  if (st.comp_method == ZIP_CM_STORE) {
    if (st.size != st.comp_size) {
      return InvalidArgument(entry.where, " is stored uncompressed but declares ", st.size, " bytes in ", st.comp_size);
    }
    entry.stored = true;
  } else if (st.comp_method == ZIP_CM_DEFLATE) {
    if (st.comp_size > (UINT64_MAX - kDeflateSlack) / kMaxDeflateRatio ||
        st.size > st.comp_size * kMaxDeflateRatio + kDeflateSlack) {
      return InvalidArgument(entry.where, " declares ", st.size, " bytes uncompressed from ", st.comp_size,
                             " compressed bytes, more than deflate can produce (a corrupt archive or a zip bomb)");
    }
  } else {
    return Unimplemented(entry.where, " uses zip compression method ", st.comp_method,
                         "; only stored and deflated entries are supported (as numpy writes them)");
  }
  entry.size = st.size;
  return entry;
}

// Checks that reading `entry` into memory stays within `limits`, `total` counting the bytes read so far.
Status CheckLimits(const NpzEntry& entry, const NpzLimits& limits, uint64_t* total) {
  if (entry.size > limits.max_entry_bytes) {
    return OutOfRange(entry.where, " declares ", entry.size, " bytes uncompressed, more than the limit of ",
                      limits.max_entry_bytes, " per array");
  }
  *total += entry.size;
  if (*total > limits.max_total_bytes) {
    return OutOfRange(entry.where, ": the archive's arrays add up to more than the limit of ", limits.max_total_bytes,
                      " bytes");
  }
  return Status::Ok();
}

// --- Locating stored entries in the archive's bytes (libzip does not say where an entry's data lie) ---------------

constexpr uint32_t kLocalHeaderSignature = 0x04034b50;  // "PK\3\4"
constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr size_t kLocalHeaderBytes = 30;
constexpr size_t kCentralHeaderBytes = 46;
constexpr size_t kEndBytes = 22;
constexpr size_t kZip64EndBytes = 56;
constexpr size_t kZip64LocatorBytes = 20;
constexpr uint16_t kZip64ExtraId = 0x0001;

uint64_t Le(std::string_view bytes, size_t at, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[at + i])) << (8 * i);
  return v;
}

struct DirectoryEntry {
  std::string name;  // raw bytes, as in the archive
  uint64_t size = 0;
  uint64_t comp_size = 0;
  uint64_t local_offset = 0;
};

struct CentralDirectory {
  uint64_t offset = 0;  // where it starts: every entry's data lies before it
  std::vector<DirectoryEntry> entries;
};

// Reads the central directory of `file` (zip64 records included), bounds-checking every record against the file.
StatusOr<CentralDirectory> ReadCentralDirectory(std::string_view file, const std::string& path) {
  auto corrupt = [&](std::string_view what) {
    return InvalidArgument(path, ": ", what, " (a corrupt or truncated archive)");
  };
  if (file.size() < kEndBytes) return corrupt("too short for a zip archive");
  // The end record: the last signature whose comment reaches exactly the end of the file.
  size_t end = std::string_view::npos;
  const size_t lowest = file.size() - kEndBytes > 0xffff ? file.size() - kEndBytes - 0xffff : 0;
  for (size_t at = file.size() - kEndBytes + 1; at-- > lowest;) {
    if (Le(file, at, 4) == kEndSignature && at + kEndBytes + Le(file, at + 20, 2) == file.size()) {
      end = at;
      break;
    }
  }
  if (end == std::string_view::npos) return corrupt("no end of central directory record");
  uint64_t count = Le(file, end + 10, 2);
  uint64_t size = Le(file, end + 12, 4);
  uint64_t offset = Le(file, end + 16, 4);
  if (count == 0xffff || size == 0xffffffff || offset == 0xffffffff) {
    if (end < kZip64LocatorBytes || Le(file, end - kZip64LocatorBytes, 4) != kZip64LocatorSignature) {
      return corrupt("no zip64 end of central directory locator");
    }
    const uint64_t at = Le(file, end - kZip64LocatorBytes + 8, 8);
    if (at > end || end - at < kZip64EndBytes || Le(file, at, 4) != kZip64EndSignature) {
      return corrupt("no zip64 end of central directory record");
    }
    count = Le(file, at + 32, 8);
    size = Le(file, at + 40, 8);
    offset = Le(file, at + 48, 8);
  }
  if (offset > end || size > end - offset) return corrupt("the central directory lies outside the file");
  if (count > size / kCentralHeaderBytes) return corrupt("the central directory is too short for its entries");
  CentralDirectory directory;
  directory.offset = offset;
  directory.entries.reserve(static_cast<size_t>(count));
  uint64_t at = offset;
  const uint64_t stop = offset + size;
  for (uint64_t i = 0; i < count; ++i) {
    if (stop - at < kCentralHeaderBytes || Le(file, at, 4) != kCentralHeaderSignature) {
      return corrupt(StrCat("bad central directory record ", i));
    }
    const uint64_t name_len = Le(file, at + 28, 2);
    const uint64_t extra_len = Le(file, at + 30, 2);
    const uint64_t comment_len = Le(file, at + 32, 2);
    const uint64_t record = kCentralHeaderBytes + name_len + extra_len + comment_len;
    if (stop - at < record) return corrupt(StrCat("central directory record ", i, " overruns the directory"));
    DirectoryEntry e;
    e.comp_size = Le(file, at + 20, 4);
    e.size = Le(file, at + 24, 4);
    e.local_offset = Le(file, at + 42, 4);
    e.name = std::string(file.substr(at + kCentralHeaderBytes, name_len));
    // Zip64 sizes and offset: in the zip64 extra field, each present only when its 32-bit field is all ones.
    const uint64_t extra_begin = at + kCentralHeaderBytes + name_len;
    for (uint64_t x = extra_begin; x + 4 <= extra_begin + extra_len;) {
      const uint64_t id = Le(file, x, 2);
      const uint64_t len = Le(file, x + 2, 2);
      if (x + 4 + len > extra_begin + extra_len)
        return corrupt(StrCat("central directory record ", i, ": bad extra field"));
      if (id == kZip64ExtraId) {
        uint64_t field = x + 4;
        for (uint64_t* v : {&e.size, &e.comp_size, &e.local_offset}) {
          if (*v != 0xffffffff) continue;
          if (field + 8 > x + 4 + len) return corrupt(StrCat("central directory record ", i, ": short zip64 field"));
          *v = Le(file, field, 8);
          field += 8;
        }
      }
      x += 4 + len;
    }
    directory.entries.push_back(std::move(e));
    at += record;
  }
  return directory;
}

// Where stored `entry`'s bytes start in `file`: after the local header that `listed` (its central directory record)
// points at. Checks that libzip and the directory agree on the entry (`raw_name`: libzip's name for it, unconverted),
// that the local header is one and names the same entry, and that all the entry's bytes lie before the central
// directory.
StatusOr<uint64_t> LocateStoredData(std::string_view file, const CentralDirectory& directory,
                                    const DirectoryEntry& listed, const NpzEntry& entry, std::string_view raw_name) {
  auto corrupt = [&](std::string_view what) {
    return InvalidArgument(entry.where, ": ", what, " (a corrupt or truncated archive)");
  };
  if (listed.name != raw_name || listed.size != entry.size || listed.comp_size != entry.size) {
    return corrupt("the central directory disagrees with libzip about the entry");
  }
  const uint64_t at = listed.local_offset;
  if (at > directory.offset || directory.offset - at < kLocalHeaderBytes || Le(file, at, 4) != kLocalHeaderSignature) {
    return corrupt("no local header where the central directory points");
  }
  const uint64_t name_len = Le(file, at + 26, 2);
  const uint64_t extra_len = Le(file, at + 28, 2);
  if (directory.offset - at - kLocalHeaderBytes < name_len + extra_len ||
      file.substr(at + kLocalHeaderBytes, name_len) != listed.name) {
    return corrupt("the local header names another entry");
  }
  const uint64_t data = at + kLocalHeaderBytes + name_len + extra_len;
  if (directory.offset - data < entry.size) {
    return corrupt(
        StrCat("its ", entry.size, " bytes at offset ", data, " run past the entries' end at ", directory.offset));
  }
  return data;
}

}  // namespace

StatusOr<std::vector<ir::Tensor>> ReadNpz(const std::string& path, const NpzLimits& limits) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    return IoError(path, ": cannot open: ", ec ? ec.message() : "no such file");
  if (!std::filesystem::is_regular_file(status)) return InvalidArgument(path, ": not a regular file");
  if (std::filesystem::file_size(path, ec) == 0 && !ec) return InvalidArgument(path, ": empty file, not a zip archive");

  int error_code = 0;
  std::unique_ptr<zip_t, ZipCloser> za(zip_open(path.c_str(), ZIP_RDONLY, &error_code));
  if (!za) return InvalidArgument(path, ": not a valid .npz (zip) archive: ", ZipErrorText(error_code));

  const zip_int64_t count = zip_get_num_entries(za.get(), 0);
  if (count < 0) return InvalidArgument(path, ": cannot list the archive: ", zip_strerror(za.get()));
  std::vector<ir::Tensor> tensors;
  std::set<std::string> names;
  uint64_t total = 0;
  for (zip_int64_t i = 0; i < count; ++i) {
    const auto index = static_cast<zip_uint64_t>(i);
    ONNXAMP_ASSIGN_OR_RETURN(NpzEntry entry, CheckEntry(za.get(), index, path, &names));
    ONNXAMP_RETURN_IF_ERROR(CheckLimits(entry, limits, &total));
    ONNXAMP_ASSIGN_OR_RETURN(std::string data, ReadEntry(za.get(), index, entry.size, entry.where));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor tensor, ParseNpy(data, entry.where));
    tensor.set_name(std::move(entry.name));
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

Status VisitNpzArchive(std::string_view archive, const std::string& path, const NpzLimits& limits,
                       const std::function<Status(const NpzEntry& entry, const std::string* bytes)>& visit) {
  if (archive.empty()) return InvalidArgument(path, ": empty file, not a zip archive");
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source = zip_source_buffer_create(archive.data(), archive.size(), 0, &error);
  if (source == nullptr) {
    Status st = Internal(path, ": cannot read the archive: ", zip_error_strerror(&error));
    zip_error_fini(&error);
    return st;
  }
  std::unique_ptr<zip_t, ZipCloser> za(zip_open_from_source(source, ZIP_RDONLY, &error));
  if (!za) {
    Status st = InvalidArgument(path, ": not a valid .npz (zip) archive: ", zip_error_strerror(&error));
    zip_error_fini(&error);
    zip_source_free(source);
    return st;
  }
  zip_error_fini(&error);

  const zip_int64_t count = zip_get_num_entries(za.get(), 0);
  if (count < 0) return InvalidArgument(path, ": cannot list the archive: ", zip_strerror(za.get()));
  ONNXAMP_ASSIGN_OR_RETURN(CentralDirectory directory, ReadCentralDirectory(archive, path));
  if (directory.entries.size() != static_cast<uint64_t>(count)) {
    return InvalidArgument(path, ": the central directory lists ", directory.entries.size(), " entries, libzip ", count,
                           " (a corrupt archive)");
  }
  std::set<std::string> names;
  uint64_t total = 0;
  for (zip_int64_t i = 0; i < count; ++i) {
    const auto index = static_cast<zip_uint64_t>(i);
    ONNXAMP_ASSIGN_OR_RETURN(NpzEntry entry, CheckEntry(za.get(), index, path, &names));
    if (entry.stored) {
      const char* raw_name = zip_get_name(za.get(), index, ZIP_FL_ENC_RAW);
      if (raw_name == nullptr) return InvalidArgument(entry.where, ": no name: ", zip_strerror(za.get()));
      ONNXAMP_ASSIGN_OR_RETURN(
          entry.data_offset,
          LocateStoredData(archive, directory, directory.entries[static_cast<size_t>(i)], entry, raw_name));
      ONNXAMP_RETURN_IF_ERROR(visit(entry, nullptr));
      continue;
    }
    ONNXAMP_RETURN_IF_ERROR(CheckLimits(entry, limits, &total));
    ONNXAMP_ASSIGN_OR_RETURN(std::string data, ReadEntry(za.get(), index, entry.size, entry.where));
    ONNXAMP_RETURN_IF_ERROR(visit(entry, &data));
  }
  return Status::Ok();
}

StatusOr<std::string> SerializeNpz(const std::vector<ir::Tensor>& tensors, const std::string& where) {
  std::vector<std::string> entries;  // .npy bytes; libzip reads them when the archive is closed
  entries.reserve(tensors.size());
  std::set<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string& name = tensors[i].name();
    if (name.empty()) return InvalidArgument(where, ": tensor ", i, " has no name, and .npz entries are named");
    if (!names.insert(name).second) return InvalidArgument(where, ": two tensors are named '", name, "'");
    ONNXAMP_ASSIGN_OR_RETURN(std::string npy, SerializeNpy(tensors[i], StrCat(where, ": tensor '", name, "'")));
    entries.push_back(std::move(npy));
  }
  if (tensors.empty()) return std::string(kEmptyZip);

  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &error);
  if (buffer == nullptr) {
    Status st = Internal(where, ": cannot create a zip buffer: ", zip_error_strerror(&error));
    zip_error_fini(&error);
    return st;
  }
  zip_t* za = zip_open_from_source(buffer, ZIP_TRUNCATE, &error);
  if (za == nullptr) {
    Status st = Internal(where, ": cannot start a zip archive: ", zip_error_strerror(&error));
    zip_error_fini(&error);
    zip_source_free(buffer);
    return st;
  }
  zip_error_fini(&error);
  zip_source_keep(buffer);  // outlive zip_close, which writes the archive into it
  auto fail = [&](std::string_view what) {
    Status st = Internal(where, ": ", what, ": ", zip_strerror(za));
    zip_discard(za);
    zip_source_free(buffer);
    return st;
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    zip_source_t* source = zip_source_buffer(za, entries[i].data(), entries[i].size(), 0);
    if (source == nullptr) return fail("cannot add an entry");
    const std::string entry = tensors[i].name() + std::string(kNpySuffix);
    const zip_int64_t index = zip_file_add(za, entry.c_str(), source, ZIP_FL_ENC_GUESS);
    if (index < 0) {
      zip_source_free(source);
      return fail(StrCat("cannot add entry '", entry, "'"));
    }
    const auto idx = static_cast<zip_uint64_t>(index);
    if (zip_set_file_compression(za, idx, ZIP_CM_STORE, 0) != 0 || zip_file_set_mtime(za, idx, kFixedMtime, 0) != 0) {
      return fail(StrCat("cannot set up entry '", entry, "'"));
    }
  }
  if (zip_close(za) != 0) return fail("cannot write the archive");

  // The archive now lives in `buffer`: copy it out.
  std::string out;
  zip_stat_t st;
  zip_stat_init(&st);
  bool ok = zip_source_stat(buffer, &st) == 0 && (st.valid & ZIP_STAT_SIZE) && zip_source_open(buffer) == 0;
  if (ok) {
    out.resize(static_cast<size_t>(st.size));
    uint64_t done = 0;
    while (done < st.size) {
      const zip_int64_t n = zip_source_read(buffer, out.data() + done, st.size - done);
      if (n <= 0) break;
      done += static_cast<uint64_t>(n);
    }
    ok = done == st.size;
    zip_source_close(buffer);
  }
  zip_source_free(buffer);
  if (!ok) return Internal(where, ": cannot read back the archive built in memory");
  return out;
}

}  // namespace onnxamp::importer
