// Memory-mapped .npy files and .npz archives (mmap, MAP_PRIVATE: a write through mutable_data() stays in this process,
// the file is never written); the mapping lives as long as a tensor shares its buffer.
#include "importer/tensor_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>
#include <utility>

#include "importer/npy.h"

namespace onnxamp::importer {
namespace {

// The deleter of a mapping's keep-alive pointer: unmaps it. Also how IsMapped recognises a mapped buffer.
struct Unmapper {
  size_t length = 0;
  void operator()(void* base) const {
    if (base != nullptr) munmap(base, length);
  }
};

// A private mapping of the whole regular, non-empty file at `path`; the file is closed (the mapping keeps it open).
struct FileMapping {
  std::shared_ptr<void> keep_alive;  // unmaps on release (deleter Unmapper)
  std::byte* data = nullptr;
  size_t size = 0;
};

StatusOr<FileMapping> MapFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the check below
  if (fd < 0) return NotFound(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return InvalidArgument(path, ": cannot stat: ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return InvalidArgument(path, ": not a regular file");
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    close(fd);
    return InvalidArgument(path, ": empty file");
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  close(fd);  // the mapping keeps the file open
  if (base == MAP_FAILED) return InvalidArgument(path, ": cannot map ", size, " bytes: ", std::strerror(map_errno));
  return FileMapping{std::shared_ptr<void>(base, Unmapper{size}), static_cast<std::byte*>(base), size};
}

// The .npy array in `npy` (bytes of `mapping`): a view of its data in the mapping, or a copy when it needs conversion,
// is empty, or (with `copy_unaligned`) its data do not start 16-byte aligned.
StatusOr<ir::Tensor> NpyView(const FileMapping& mapping, std::string_view npy, const std::string& where,
                             bool copy_unaligned) {
  ONNXAMP_ASSIGN_OR_RETURN(NpyLayout layout, ParseNpyLayout(npy, npy.size(), where));
  const bool convert = layout.fortran_order || layout.byteswap || layout.dtype == DType::kBool;
  std::byte* data = mapping.data + (npy.data() - reinterpret_cast<const char*>(mapping.data)) + layout.data_offset;
  const bool unaligned = reinterpret_cast<uintptr_t>(data) % 16 != 0;
  if (convert || layout.data_bytes == 0 || (copy_unaligned && unaligned)) return ParseNpy(npy, where);
  auto buffer = std::make_shared<ir::Buffer>(data, layout.data_bytes, mapping.keep_alive);
  return ir::Tensor::FromBuffer(layout.dtype, std::move(layout.shape), std::move(buffer));
}

}  // namespace

StatusOr<MappedBytes> MapFileBytes(const std::string& path) {
  ONNXAMP_ASSIGN_OR_RETURN(FileMapping mapping, MapFile(path));
  return MappedBytes{std::move(mapping.keep_alive), mapping.data, mapping.size};
}

StatusOr<ir::Tensor> MapNpyFile(const std::string& path) {
  ONNXAMP_ASSIGN_OR_RETURN(FileMapping mapping, MapFile(path));
  const std::string_view view(reinterpret_cast<const char*>(mapping.data), mapping.size);
  // A copy unless 16-byte aligned, so that these tensors keep ir::Buffer's promise; the mapping goes away on return.
  ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor tensor, NpyView(mapping, view, path, /*copy_unaligned=*/true));
  tensor.set_name(std::filesystem::path(path).stem().string());
  return tensor;
}

StatusOr<std::vector<ir::Tensor>> MapNpzFile(const std::string& path, const NpzLimits& limits) {
  ONNXAMP_ASSIGN_OR_RETURN(FileMapping mapping, MapFile(path));
  const std::string_view archive(reinterpret_cast<const char*>(mapping.data), mapping.size);
  std::vector<ir::Tensor> tensors;
  ONNXAMP_RETURN_IF_ERROR(
      VisitNpzArchive(archive, path, limits, [&](const NpzEntry& entry, const std::string* bytes) -> Status {
        ir::Tensor tensor;
        if (bytes != nullptr) {
          ONNXAMP_ASSIGN_OR_RETURN(tensor, ParseNpy(*bytes, entry.where));
        } else {
          // Mapped wherever the entry lies, aligned or not.
          ONNXAMP_ASSIGN_OR_RETURN(tensor, NpyView(mapping, archive.substr(entry.data_offset, entry.size), entry.where,
                                                   /*copy_unaligned=*/false));
        }
        tensor.set_name(entry.name);
        tensors.push_back(std::move(tensor));
        return Status::Ok();
      }));
  return tensors;
}

bool IsMapped(const ir::Tensor& tensor) {
  return tensor.buffer() != nullptr && std::get_deleter<Unmapper>(tensor.buffer()->keep_alive()) != nullptr;
}

void ReleaseMappedPages(const ir::Tensor& tensor, size_t offset, size_t length) {
  if (!IsMapped(tensor) || offset >= tensor.nbytes()) return;
  length = std::min(length, tensor.nbytes() - offset);
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(tensor.data() + offset);
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + length) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace onnxamp::importer
