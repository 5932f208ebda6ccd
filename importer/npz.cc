// NumPy .npz archives through libzip: guarded reading of .npy entries, and in-memory writing of stored entries.
#include "importer/npz.h"

#include <zip.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string_view>

#include "importer/npy.h"

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
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0) {
      return InvalidArgument(path, ": cannot read entry ", i, ": ", zip_strerror(za.get()));
    }
    constexpr zip_uint64_t kNeeded =
        ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
    if ((st.valid & kNeeded) != kNeeded) return InvalidArgument(path, ": entry ", i, " lacks its size or name");
    const std::string entry = st.name;
    const std::string where = StrCat(path, ": entry '", entry, "'");
    if (entry.size() <= kNpySuffix.size() || !entry.ends_with(kNpySuffix)) {
      return InvalidArgument(where, " is not an .npy array (every .npz entry must be named <name>.npy)");
    }
    std::string name = entry.substr(0, entry.size() - kNpySuffix.size());
    if (!names.insert(name).second) return InvalidArgument(where, " appears twice in the archive");
    if (st.encryption_method != ZIP_EM_NONE) return Unimplemented(where, " is encrypted");
    if (st.comp_method == ZIP_CM_STORE) {
      if (st.size != st.comp_size) {
        return InvalidArgument(where, " is stored uncompressed but declares ", st.size, " bytes in ", st.comp_size);
      }
    } else if (st.comp_method == ZIP_CM_DEFLATE) {
      if (st.comp_size > (UINT64_MAX - kDeflateSlack) / kMaxDeflateRatio ||
          st.size > st.comp_size * kMaxDeflateRatio + kDeflateSlack) {
        return InvalidArgument(where, " declares ", st.size, " bytes uncompressed from ", st.comp_size,
                               " compressed bytes, more than deflate can produce (a corrupt archive or a zip bomb)");
      }
    } else {
      return Unimplemented(where, " uses zip compression method ", st.comp_method,
                           "; only stored and deflated entries are supported (as numpy writes them)");
    }
    if (st.size > limits.max_entry_bytes) {
      return OutOfRange(where, " declares ", st.size, " bytes uncompressed, more than the limit of ",
                        limits.max_entry_bytes, " per array");
    }
    total += st.size;
    if (total > limits.max_total_bytes) {
      return OutOfRange(where, ": the archive's arrays add up to more than the limit of ", limits.max_total_bytes,
                        " bytes");
    }
    ONNXAMP_ASSIGN_OR_RETURN(std::string data, ReadEntry(za.get(), static_cast<zip_uint64_t>(i), st.size, where));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor tensor, ParseNpy(data, where));
    tensor.set_name(std::move(name));
    tensors.push_back(std::move(tensor));
  }
  return tensors;
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
