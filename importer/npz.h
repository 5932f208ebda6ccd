// NumPy .npz archives (a zip of .npy entries): reading with zip-bomb guards, and writing. Private to importer.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
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

// One entry of an .npz archive, as VisitNpzArchive lists it after its checks.
struct NpzEntry {
  std::string name;     // the tensor's name: the entry's name without ".npy"
  std::string where;    // "<path>: entry '<entry name>'", for messages
  bool stored = false;  // stored uncompressed (what numpy.savez writes); else deflated (numpy.savez_compressed)
  uint64_t size = 0;    // the entry's (uncompressed) bytes
  // Stored entries: where the entry's bytes start in the archive, found through the central directory and the local
  // header and checked to lie, all `size` of them, inside the archive before its central directory.
  uint64_t data_offset = 0;
};

// Lists the .npz archive whose bytes are `archive` (all of them, e.g. a memory mapping of the file at `path`, which
// errors name) with every check ReadNpz makes of names, sizes, methods and encryption, and calls visit(entry, bytes)
// for each entry in archive order. Stored entries are located (NpzEntry::data_offset) but not read: `bytes` is null,
// their CRC is not checked (reading them would cost a pass over the whole archive), and `limits` do not apply to them
// since they make nothing be allocated. Deflated entries are decompressed into memory within `limits`, their CRC
// checked, and visited with their bytes. An error from `visit` stops the walk and is returned.
Status VisitNpzArchive(std::string_view archive, const std::string& path, const NpzLimits& limits,
                       const std::function<Status(const NpzEntry& entry, const std::string* bytes)>& visit);

// Builds an .npz archive in memory, one stored entry "<tensor name>.npy" per tensor, as numpy.savez does. Names
// must be non-empty and distinct. `where` names the destination in error messages.
StatusOr<std::string> SerializeNpz(const std::vector<ir::Tensor>& tensors, const std::string& where);

}  // namespace onnxamp::importer
