// NumPy .npz archives (a zip of .npy entries): reading with zip-bomb guards, and writing. Private to importer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::importer {

// Bounds on what an archive may make us allocate. Every entry's declared uncompressed size is checked against
// them before anything is read, and the bytes actually read must equal the declared size.
struct NpzLimits {
  uint64_t max_entry_bytes = uint64_t{16} << 30;  // one array
  uint64_t max_total_bytes = uint64_t{32} << 30;  // all arrays together
};

// Reads every entry of the .npz archive at `path`, in archive order. Each entry must be named "<name>.npy" (the
// tensor is named "<name>"), be stored or deflated, unencrypted, and hold a valid .npy array.
StatusOr<std::vector<ir::Tensor>> ReadNpz(const std::string& path, const NpzLimits& limits = NpzLimits());

// Builds an .npz archive in memory, one stored entry "<tensor name>.npy" per tensor, as numpy.savez does. Names
// must be non-empty and distinct. `where` names the destination in error messages.
StatusOr<std::string> SerializeNpz(const std::vector<ir::Tensor>& tensors, const std::string& where);

}  // namespace onnxamp::importer
