// Memory-mapped tensor files: an .npy array whose bytes stay in the file and are paged in as they are read.
#pragma once

#include <cstddef>
#include <string>

#include "runtime/common/status.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::importer {

// Reads the .npy file at `path` by mapping it (private: the file is never written): the tensor's buffer is a view of
// the mapping, which is unmapped when the last tensor sharing the buffer goes away. Arrays that need conversion
// (Fortran order, big-endian, bool, data not 16-byte aligned in the file) and empty arrays are copied into memory
// instead, as ReadTensorFile would. Errors (unreadable file, bad or truncated header) are one line naming the file. The
// tensor is named after the file stem.
StatusOr<ir::Tensor> MapNpyFile(const std::string& path);

// True when `tensor`'s bytes are a view of a mapping made by MapNpyFile.
bool IsMapped(const ir::Tensor& tensor);

// Tells the kernel that bytes [offset, offset + length) of a mapped tensor are not needed for now: their pages
// leave this process's resident set (the file keeps them; a later read pages them in again). Only whole pages inside
// the range are released. No effect on tensors that are not mapped. Bytes written through the tensor in that range
// revert to the file's, so call it only on data nothing wrote.
void ReleaseMappedPages(const ir::Tensor& tensor, size_t offset, size_t length);

}  // namespace onnxamp::importer
