// Tensor: a constant in the IR (initializers, tensor attributes, tensor files). Dense, little-endian bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"

namespace onnxamp::ir {

// Where a tensor's bytes live when they are kept outside the model file (ONNX external data).
struct ExternalDataInfo {
  std::string location;  // path relative to the model's folder
  int64_t offset = 0;
  std::optional<int64_t> length;  // absent: to the end of the file
  std::string checksum;           // SHA1 as ONNX writes it, informative only
  // Keys we do not interpret, kept in their original order so that export writes them back.
  std::vector<std::pair<std::string, std::string>> extra;
};

// How the data were encoded in the file. Export writes the same encoding so that a round trip is exact.
enum class TensorEncoding {
  kRaw,    // TensorProto.raw_data (or external data)
  kTyped,  // float_data / int32_data / int64_data / double_data / uint64_data / string_data
};

// Where a buffer's bytes are: host memory, or the memory of a CUDA device (which host code must not read or write;
// only the device backend's kernels and copies touch it).
enum class MemoryKind { kHost, kCuda };

// Byte storage shared between copies of a Tensor until one of them writes. A Buffer either owns its memory
// (64-byte aligned host memory) or is a view into memory kept alive by another object: an executor's arena
// (64-byte aligned regions), a large raw_data string the importer took over from a parsed model (malloc's 16-byte
// alignment), or device memory from a device backend's allocator (256-byte aligned). Code may rely on 16-byte
// alignment only.
class Buffer {
 public:
  enum class Init { kZero, kUninitialized };
  explicit Buffer(size_t size, Init init = Init::kZero);
  // A view of `size` bytes at `data`; `keep_alive` owns the memory and lives as long as the view.
  Buffer(std::byte* data, size_t size, std::shared_ptr<void> keep_alive, MemoryKind kind = MemoryKind::kHost);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  bool owns_memory() const { return keep_alive_ == nullptr; }
  MemoryKind kind() const { return kind_; }
  // The object that keeps a view's memory alive (null for a buffer that owns its memory).
  const std::shared_ptr<void>& keep_alive() const { return keep_alive_; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<void> keep_alive_;
  MemoryKind kind_ = MemoryKind::kHost;
};

class Tensor {
 public:
  Tensor() = default;
  // A zero-filled tensor. `dims` must be valid (see ComputeByteSize); ONNXAMP_CHECKs otherwise.
  Tensor(DType dtype, std::vector<int64_t> dims);

  // Element count and packed byte size of (dtype, dims), rejecting negative dims and overflow. For kString
  // the byte size is 0.
  static StatusOr<int64_t> ComputeNumElements(const std::vector<int64_t>& dims);
  static StatusOr<size_t> ComputeByteSize(DType dtype, const std::vector<int64_t>& dims);

  // A tensor whose bytes are not initialised (for outputs a kernel overwrites entirely). Dims must be valid.
  static Tensor Uninitialized(DType dtype, std::vector<int64_t> dims);
  // A tensor over an existing buffer of exactly the right size (ONNXAMP_CHECK).
  static Tensor FromBuffer(DType dtype, std::vector<int64_t> dims, std::shared_ptr<Buffer> buffer);

  // Builds a tensor from packed little-endian bytes; fails when their size disagrees with dtype and dims.
  static StatusOr<Tensor> FromBytes(DType dtype, std::vector<int64_t> dims, std::span<const std::byte> bytes);

  // A tensor whose data were not read (external data left on disk when loading for inspection): dtype and dims
  // are set, has_data() is false, nbytes() is 0. Fails on invalid dims.
  static StatusOr<Tensor> WithoutData(DType dtype, std::vector<int64_t> dims);
  // False only for tensors made by WithoutData (and default-constructed ones).
  bool has_data() const { return buffer_ != nullptr || dtype_ == DType::kString; }

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  const std::string& doc_string() const { return doc_string_; }
  void set_doc_string(std::string d) { doc_string_ = std::move(d); }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t num_elements() const;

  // False when the bytes are in device memory (see MemoryKind): data() is then a device pointer.
  bool on_host() const { return !buffer_ || buffer_->kind() == MemoryKind::kHost; }

  // Packed bytes (empty for strings). mutable_data() unshares the buffer first (host buffers only: a shared device
  // buffer is an internal error, since device tensors are written only by the kernel that allocated them).
  size_t nbytes() const { return buffer_ ? buffer_->size() : 0; }
  const std::byte* data() const { return buffer_ ? buffer_->data() : nullptr; }
  std::byte* mutable_data();
  std::span<const std::byte> bytes() const { return {data(), nbytes()}; }
  // The storage itself, shared (null for strings and tensors without data).
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }

  template <typename T>
  std::span<const T> values() const {
    return {reinterpret_cast<const T*>(data()), nbytes() / sizeof(T)};
  }
  template <typename T>
  std::span<T> mutable_values() {
    std::byte* d = mutable_data();
    return {reinterpret_cast<T*>(d), nbytes() / sizeof(T)};
  }

  // kString elements.
  const std::vector<std::string>& strings() const { return strings_; }
  std::vector<std::string>& mutable_strings() { return strings_; }

  TensorEncoding encoding() const { return encoding_; }
  void set_encoding(TensorEncoding e) { encoding_ = e; }

  // Set when the data came from, or should be written to, an external file.
  const std::optional<ExternalDataInfo>& external() const { return external_; }
  void set_external(std::optional<ExternalDataInfo> e) { external_ = std::move(e); }

  // TensorProto.segment, kept for round trips (ONNX marks it for very large tensors split in chunks).
  const std::optional<std::pair<int64_t, int64_t>>& segment() const { return segment_; }
  void set_segment(std::optional<std::pair<int64_t, int64_t>> s) { segment_ = s; }

  // True when dtype, dims and data are equal (names, encoding and external info are not compared).
  bool SameContents(const Tensor& other) const;

 private:
  std::string name_;
  std::string doc_string_;
  DType dtype_ = DType::kUndefined;
  std::vector<int64_t> dims_;
  std::shared_ptr<Buffer> buffer_;
  std::vector<std::string> strings_;
  TensorEncoding encoding_ = TensorEncoding::kRaw;
  std::optional<ExternalDataInfo> external_;
  std::optional<std::pair<int64_t, int64_t>> segment_;
};

// A sparse constant: COO indices (shape [NNZ, rank] or linearised [NNZ]) and their values.
struct SparseTensor {
  Tensor values;
  Tensor indices;
  std::vector<int64_t> dims;
};

}  // namespace onnxamp::ir
