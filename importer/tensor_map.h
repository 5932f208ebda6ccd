// Memory-mapped tensor files: .npy arrays and stored .npz entries whose bytes stay in the file and are paged in as they
// are read.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "importer/npz.h"
#include "runtime/common/status.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::importer {

// Reads the .npy file at `path` by mapping it (private: the file is never written): the tensor's buffer is a view of
// the mapping, which is unmapped when the last tensor sharing the buffer goes away. Arrays that need conversion
// (Fortran order, big-endian, bool, data not 16-byte aligned in the file) and empty arrays are copied into memory
// instead, as ReadTensorFile would. Errors (unreadable file, bad or truncated header) are one line naming the file. The
// tensor is named after the file stem.
StatusOr<ir::Tensor> MapNpyFile(const std::string& path);

// Reads the .npz archive at `path` by mapping it (as MapNpyFile does): every entry stored uncompressed (what
// numpy.savez writes) becomes a view of its bytes in the mapping, so the archive may be larger than memory; entries
// that need conversion (as for MapNpyFile) or are empty are copied, and deflated entries (numpy.savez_compressed) are
// decompressed into memory within `limits`. The archive passes the checks of ReadNpz (names, declared sizes, methods,
// the zip-bomb guards) and every stored entry is located through the central directory and its local header, its
// bytes checked to lie inside the file; the CRC of a mapped entry is not checked (that would read the whole file at
// load), as .npy files carry none. An entry's bytes sit wherever the zip put them: a view's data are generally NOT
// aligned to the element size (nor to the 16 bytes ir::Buffer promises), so read them with memcpy, never through
// values<T>(). Tensors are named after their entries, in archive order.
StatusOr<std::vector<ir::Tensor>> MapNpzFile(const std::string& path, const NpzLimits& limits = NpzLimits());

// A whole file mapped (privately: the file is never written): its bytes are paged in as they are read. The mapping
// lives as long as `keep_alive` and the copies of it that views of the bytes hold (ir::Buffer's keep-alive).
struct MappedBytes {
  std::shared_ptr<void> keep_alive;
  const std::byte* data = nullptr;
  size_t size = 0;
  std::string_view bytes() const { return {reinterpret_cast<const char*>(data), size}; }
};

// Maps the regular, non-empty file at `path`. Errors are one line naming it.
StatusOr<MappedBytes> MapFileBytes(const std::string& path);

// True when `tensor`'s bytes are a view of a mapping made by MapNpyFile or MapNpzFile.
bool IsMapped(const ir::Tensor& tensor);

// Tells the kernel that bytes [offset, offset + length) of a mapped tensor are not needed for now: their pages
// leave this process's resident set (the file keeps them; a later read pages them in again). Only whole pages inside
// the range are released. No effect on tensors that are not mapped. Bytes written through the tensor in that range
// revert to the file's, so call it only on data nothing wrote.
void ReleaseMappedPages(const ir::Tensor& tensor, size_t offset, size_t length);

}  // namespace onnxamp::importer
