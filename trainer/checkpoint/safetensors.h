// The safetensors format (what the PyTorch ecosystem reads): an 8-byte little-endian header length N, N bytes of
// JSON header ({"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__":
// {"key": "value"}}), then the tensors' bytes, little-endian, row-major. A writer, and a strict reader that refuses
// hostile input with a one-line error instead of reading out of bounds.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::trainer {

// The reader's limits: a header beyond this is refused before it is read (the reference implementation's limit).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafetensorsFile {
  std::vector<ir::Tensor> tensors;  // in data order, named
  std::map<std::string, std::string> metadata;
};

// safetensors' dtype names for the element types onnxamp stores ("F32", "F16", "BF16", "F64", "I64", "I32", "I16",
// "I8", "U64", "U32", "U16", "U8", "BOOL"); empty for a type the format has no name for.
std::string_view SafetensorsDTypeName(DType dtype);

// The file's bytes: header (keys in the order of `tensors`, padded with spaces so that the data start at a multiple
// of 16 bytes; its length is a multiple of 8, as the reference writer's) and data (each tensor in turn, no gaps).
// Errors: an unnamed or repeated name, a name
// "__metadata__", a type without a safetensors name, a tensor without host data.
StatusOr<std::string> SerializeSafetensors(const std::vector<ir::Tensor>& tensors,
                                           const std::map<std::string, std::string>& metadata = {});

// The same bytes, handed to `sink` in pieces (the header, then each tensor's data) instead of built in memory: a
// checkpoint streams its state to the file this way. A sink's error stops the write and is returned.
Status WriteSafetensors(const std::vector<ir::Tensor>& tensors, const std::map<std::string, std::string>& metadata,
                        const std::function<Status(std::string_view)>& sink);

// Parses a whole file's bytes. `what` names the file in errors. Checks: the file holds the 8 length bytes and the
// header; the length is at most kSafetensorsMaxHeaderBytes; the header is a JSON object whose entries are
// "__metadata__" (an object of strings) or tensors with exactly the keys dtype (a known name), shape (non-negative
// integers) and data_offsets ([begin, end], begin <= end); each tensor's byte count equals its elements times the
// element size (no overflow); the tensors, sorted by offset, cover the data region exactly, without gaps or overlap.
// The tensors are returned in data order, as copies of their bytes; with `keep_alive` (which must own `bytes`, e.g.
// a file mapping), those whose bytes start 16-byte aligned are views of `bytes` that keep it alive instead.
StatusOr<SafetensorsFile> ParseSafetensors(std::string_view bytes, const std::string& what,
                                           std::shared_ptr<void> keep_alive = nullptr);

}  // namespace onnxamp::trainer
