// Memory-mapped .npy files (mmap, MAP_PRIVATE: a write through mutable_data() stays in this process, the file is never
// written); the mapping lives as long as a tensor shares its buffer.
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

}  // namespace

StatusOr<ir::Tensor> MapNpyFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
  std::shared_ptr<void> mapping(base, Unmapper{size});
  const std::string_view view(static_cast<const char*>(base), size);
  ONNXAMP_ASSIGN_OR_RETURN(NpyLayout layout, ParseNpyLayout(view, size, path));
  const bool aligned = layout.data_offset % 16 == 0;
  const bool convert = layout.fortran_order || layout.byteswap || layout.dtype == DType::kBool;
  ir::Tensor tensor;
  if (!aligned || convert || layout.data_bytes == 0) {
    ONNXAMP_ASSIGN_OR_RETURN(tensor, ParseNpy(view, path));  // copies; the mapping goes away on return
  } else {
    std::byte* data = static_cast<std::byte*>(base) + layout.data_offset;
    auto buffer = std::make_shared<ir::Buffer>(data, layout.data_bytes, std::move(mapping));
    tensor = ir::Tensor::FromBuffer(layout.dtype, std::move(layout.shape), std::move(buffer));
  }
  tensor.set_name(std::filesystem::path(path).stem().string());
  return tensor;
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
