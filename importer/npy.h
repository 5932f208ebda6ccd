// NumPy .npy format (versions 1.0, 2.0, 3.0): parsing into and serialising from ir::Tensor. Private to importer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::importer {

// The six bytes every .npy file starts with.
inline constexpr std::string_view kNpyMagic{"\x93NUMPY", 6};

// Largest header (the Python dict literal) accepted on read. NumPy itself refuses headers over 10000 bytes
// unless told otherwise; the 1 MiB bound is generous while keeping a hostile length harmless.
inline constexpr size_t kMaxNpyHeaderBytes = size_t{1} << 20;

// Where and how an .npy file stores its array, from its header.
struct NpyLayout {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;
  size_t data_offset = 0;  // bytes before the data
  size_t data_bytes = 0;   // shape * itemsize
  size_t itemsize = 0;
  bool fortran_order = false;  // column-major data of rank > 1
  bool byteswap = false;       // big-endian data
  size_t swap_unit = 0;        // bytes per swapped scalar
};

// Parses the header at the start of `data` (at least the whole header) of an .npy file of `file_size` bytes and
// checks that the data after it are exactly shape * itemsize bytes; errors name `where`.
StatusOr<NpyLayout> ParseNpyLayout(std::string_view data, uint64_t file_size, const std::string& where);

// Parses a whole .npy file held in `data`. The header must be a dict with exactly the keys 'descr',
// 'fortran_order' and 'shape'; the data must be exactly shape * itemsize bytes. Big-endian data are byteswapped
// and fortran_order data transposed, so the tensor is little-endian C order. `where` names the file (or archive
// entry) in error messages. The tensor is unnamed.
StatusOr<ir::Tensor> ParseNpy(std::string_view data, const std::string& where);

// Serialises a tensor exactly as numpy.save would: version 1.0 (2.0 when the header needs it), C order,
// little-endian. Fails for dtypes NumPy has no type for (bfloat16, float8, int4, ...) and for strings.
StatusOr<std::string> SerializeNpy(const ir::Tensor& tensor, const std::string& where);

}  // namespace onnxamp::importer
