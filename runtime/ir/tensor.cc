// Tensor storage, size arithmetic with overflow checks, comparison.
#include "runtime/ir/tensor.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

namespace onnxamp::ir {

Buffer::Buffer(size_t size, Init init) : size_(size) {
  if (size == 0) return;
  const size_t rounded = (size + 63) / 64 * 64;
  data_ = static_cast<std::byte*>(std::aligned_alloc(64, rounded));
  if (data_ == nullptr) throw std::bad_alloc();
  if (init == Init::kZero) std::memset(data_, 0, rounded);
}

Buffer::Buffer(std::byte* data, size_t size, std::shared_ptr<void> keep_alive, MemoryKind kind)
    : data_(data), size_(size), keep_alive_(std::move(keep_alive)), kind_(kind) {
  ONNXAMP_CHECK(keep_alive_ != nullptr, "a buffer view needs an owner");
}

Buffer::~Buffer() {
  if (!keep_alive_) std::free(data_);
}

Tensor Tensor::Uninitialized(DType dtype, std::vector<int64_t> dims) {
  StatusOr<size_t> size = ComputeByteSize(dtype, dims);
  ONNXAMP_CHECK(size.ok(), size.status().message());
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  if (dtype == DType::kString) {
    t.strings_.resize(static_cast<size_t>(t.num_elements()));
  } else {
    t.buffer_ = std::make_shared<Buffer>(*size, Buffer::Init::kUninitialized);
  }
  return t;
}

Tensor Tensor::FromBuffer(DType dtype, std::vector<int64_t> dims, std::shared_ptr<Buffer> buffer) {
  StatusOr<size_t> size = ComputeByteSize(dtype, dims);
  ONNXAMP_CHECK(size.ok() && buffer && buffer->size() == *size, "buffer size does not match the tensor");
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.buffer_ = std::move(buffer);
  return t;
}

StatusOr<int64_t> Tensor::ComputeNumElements(const std::vector<int64_t>& dims) {
  int64_t count = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = dims[i];
    if (d < 0) return InvalidArgument("dimension ", i, " is negative (", d, ")");
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / d) {
      return OutOfRange("element count overflows at dimension ", i, " (", d, ")");
    }
    count *= d;
  }
  return count;
}

StatusOr<size_t> Tensor::ComputeByteSize(DType dtype, const std::vector<int64_t>& dims) {
  ONNXAMP_ASSIGN_OR_RETURN(int64_t count, ComputeNumElements(dims));
  if (dtype == DType::kString) return size_t{0};
  if (dtype == DType::kUndefined) return InvalidArgument("tensor has no data type");
  std::optional<uint64_t> bytes = PackedByteSize(dtype, static_cast<uint64_t>(count));
  if (!bytes || *bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return OutOfRange("byte size of ", count, " elements of ", DTypeName(dtype), " overflows");
  }
  return static_cast<size_t>(*bytes);
}

Tensor::Tensor(DType dtype, std::vector<int64_t> dims) : dtype_(dtype), dims_(std::move(dims)) {
  StatusOr<size_t> size = ComputeByteSize(dtype_, dims_);
  ONNXAMP_CHECK(size.ok(), size.status().message());
  if (dtype_ == DType::kString) {
    strings_.resize(static_cast<size_t>(num_elements()));
  } else {
    buffer_ = std::make_shared<Buffer>(*size);
  }
}

StatusOr<Tensor> Tensor::FromBytes(DType dtype, std::vector<int64_t> dims, std::span<const std::byte> bytes) {
  if (dtype == DType::kString) return InvalidArgument("string tensors have no packed bytes");
  ONNXAMP_ASSIGN_OR_RETURN(size_t expected, ComputeByteSize(dtype, dims));
  if (expected != bytes.size()) {
    return InvalidArgument("data size ", bytes.size(), " bytes does not match ", expected, " bytes for ",
                           DTypeName(dtype), " dims ", [&] {
                             std::string s = "[";
                             for (size_t i = 0; i < dims.size(); ++i) {
                               if (i) s += ",";
                               s += std::to_string(dims[i]);
                             }
                             return s + "]";
                           }());
  }
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.buffer_ = std::make_shared<Buffer>(bytes.size());
  if (!bytes.empty()) std::memcpy(t.buffer_->data(), bytes.data(), bytes.size());
  return t;
}

StatusOr<Tensor> Tensor::WithoutData(DType dtype, std::vector<int64_t> dims) {
  ONNXAMP_RETURN_IF_ERROR(ComputeByteSize(dtype, dims).status());
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  return t;
}

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;  // dims were validated when the tensor was made
  return n;
}

std::byte* Tensor::mutable_data() {
  if (!buffer_) return nullptr;
  if (buffer_.use_count() > 1) {
    ONNXAMP_CHECK(buffer_->kind() == MemoryKind::kHost, "a shared device buffer cannot be unshared on the host");
    auto copy = std::make_shared<Buffer>(buffer_->size(), Buffer::Init::kUninitialized);
    if (buffer_->size()) std::memcpy(copy->data(), buffer_->data(), buffer_->size());
    buffer_ = std::move(copy);
  }
  return buffer_->data();
}

bool Tensor::SameContents(const Tensor& other) const {
  if (dtype_ != other.dtype_ || dims_ != other.dims_) return false;
  if (dtype_ == DType::kString) return strings_ == other.strings_;
  if (nbytes() != other.nbytes()) return false;
  ONNXAMP_CHECK(on_host() && other.on_host(), "device tensors cannot be compared on the host");
  return nbytes() == 0 || std::memcmp(data(), other.data(), nbytes()) == 0;
}

}  // namespace onnxamp::ir
