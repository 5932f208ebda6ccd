// TensorProto <-> ir::Tensor: typed fields and raw_data for every ONNX dtype, sparse tensors, external data reads.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "importer/onnx_proto.h"
#include "importer/proto_internal.h"

namespace onnxamp::importer {
namespace {

static_assert(std::endian::native == std::endian::little, "packed tensor bytes are little-endian");

using internal::Join;

// The TensorProto field that holds a dtype's values when raw_data is not used.
enum class TypedField { kFloat, kDouble, kInt32, kInt64, kUint64, kString };

TypedField FieldFor(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kComplex64:
      return TypedField::kFloat;
    case DType::kFloat64:
    case DType::kComplex128:
      return TypedField::kDouble;
    case DType::kInt64:
      return TypedField::kInt64;
    case DType::kUint32:
    case DType::kUint64:
      return TypedField::kUint64;
    case DType::kString:
      return TypedField::kString;
    default:
      return TypedField::kInt32;
  }
}

const char* FieldName(TypedField f) {
  switch (f) {
    case TypedField::kFloat:
      return "float_data";
    case TypedField::kDouble:
      return "double_data";
    case TypedField::kInt32:
      return "int32_data";
    case TypedField::kInt64:
      return "int64_data";
    case TypedField::kUint64:
      return "uint64_data";
    case TypedField::kString:
      return "string_data";
  }
  return "?";
}

int FieldSize(const onnx::TensorProto& p, TypedField f) {
  switch (f) {
    case TypedField::kFloat:
      return p.float_data_size();
    case TypedField::kDouble:
      return p.double_data_size();
    case TypedField::kInt32:
      return p.int32_data_size();
    case TypedField::kInt64:
      return p.int64_data_size();
    case TypedField::kUint64:
      return p.uint64_data_size();
    case TypedField::kString:
      return p.string_data_size();
  }
  return 0;
}

// Range an int32_data entry must lie in for `t`. Sub-byte types hold one packed byte per entry; 16-bit floats
// hold their bit pattern as an unsigned number.
void Int32Range(DType t, int64_t* lo, int64_t* hi) {
  switch (t) {
    case DType::kInt32:
      *lo = INT32_MIN;
      *hi = INT32_MAX;
      return;
    case DType::kInt16:
      *lo = INT16_MIN;
      *hi = INT16_MAX;
      return;
    case DType::kInt8:
      *lo = INT8_MIN;
      *hi = INT8_MAX;
      return;
    case DType::kUint16:
    case DType::kFloat16:
    case DType::kBFloat16:
      *lo = 0;
      *hi = UINT16_MAX;
      return;
    case DType::kBool:
      *lo = 0;
      *hi = 1;
      return;
    default:  // uint8, float8 variants, 4-bit and 2-bit types (packed bytes)
      *lo = 0;
      *hi = UINT8_MAX;
      return;
  }
}

// Bytes each int32_data entry stands for.
size_t Int32EntryBytes(DType t) { return IsSubByte(t) ? 1 : static_cast<size_t>(DTypeBits(t) / 8); }

bool IsSignedInt32Type(DType t) { return t == DType::kInt32 || t == DType::kInt16 || t == DType::kInt8; }

std::string DimsToString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(dims[i]);
  }
  s += ']';
  return s;
}

// Fills a tensor from the typed field of `p`, whose size was already checked against the element count.
Status FillFromTypedField(const onnx::TensorProto& p, TypedField field, ir::Tensor* t, const std::string& where) {
  if (field == TypedField::kString) {
    auto& strings = t->mutable_strings();
    for (int i = 0; i < p.string_data_size(); ++i) strings[static_cast<size_t>(i)] = p.string_data(i);
    return Status::Ok();
  }
  std::byte* out = t->mutable_data();
  switch (field) {
    case TypedField::kFloat:
      if (p.float_data_size()) std::memcpy(out, p.float_data().data(), p.float_data_size() * sizeof(float));
      return Status::Ok();
    case TypedField::kDouble:
      if (p.double_data_size()) std::memcpy(out, p.double_data().data(), p.double_data_size() * sizeof(double));
      return Status::Ok();
    case TypedField::kInt64:
      if (p.int64_data_size()) std::memcpy(out, p.int64_data().data(), p.int64_data_size() * sizeof(int64_t));
      return Status::Ok();
    case TypedField::kUint64:
      if (t->dtype() == DType::kUint64) {
        if (p.uint64_data_size()) std::memcpy(out, p.uint64_data().data(), p.uint64_data_size() * sizeof(uint64_t));
        return Status::Ok();
      }
      for (int i = 0; i < p.uint64_data_size(); ++i) {
        const uint64_t v = p.uint64_data(i);
        if (v > UINT32_MAX) {
          return InvalidArgument(where, ": uint64_data[", i, "] = ", v, " does not fit in ", DTypeName(t->dtype()));
        }
        const uint32_t u = static_cast<uint32_t>(v);
        std::memcpy(out + 4 * static_cast<size_t>(i), &u, 4);
      }
      return Status::Ok();
    case TypedField::kInt32: {
      int64_t lo = 0, hi = 0;
      Int32Range(t->dtype(), &lo, &hi);
      const size_t width = Int32EntryBytes(t->dtype());
      for (int i = 0; i < p.int32_data_size(); ++i) {
        const int32_t v = p.int32_data(i);
        if (v < lo || v > hi) {
          return InvalidArgument(where, ": int32_data[", i, "] = ", v, " is out of range [", lo, ", ", hi, "] for ",
                                 DTypeName(t->dtype()), IsSubByte(t->dtype()) ? " (packed bytes)" : "");
        }
        const uint32_t u = static_cast<uint32_t>(v);
        std::memcpy(out + width * static_cast<size_t>(i), &u, width);  // little-endian: the low bytes
      }
      return Status::Ok();
    }
    case TypedField::kString:
      break;
  }
  return Status::Ok();
}

void WriteTypedField(const ir::Tensor& t, onnx::TensorProto* p) {
  const TypedField field = FieldFor(t.dtype());
  const std::byte* data = t.data();
  const size_t n = t.nbytes();
  switch (field) {
    case TypedField::kString:
      for (const std::string& s : t.strings()) p->add_string_data(s);
      return;
    case TypedField::kFloat:
      p->mutable_float_data()->Resize(static_cast<int>(n / sizeof(float)), 0.0f);
      if (n) std::memcpy(p->mutable_float_data()->mutable_data(), data, n);
      return;
    case TypedField::kDouble:
      p->mutable_double_data()->Resize(static_cast<int>(n / sizeof(double)), 0.0);
      if (n) std::memcpy(p->mutable_double_data()->mutable_data(), data, n);
      return;
    case TypedField::kInt64:
      p->mutable_int64_data()->Resize(static_cast<int>(n / sizeof(int64_t)), 0);
      if (n) std::memcpy(p->mutable_int64_data()->mutable_data(), data, n);
      return;
    case TypedField::kUint64:
      if (t.dtype() == DType::kUint64) {
        p->mutable_uint64_data()->Resize(static_cast<int>(n / sizeof(uint64_t)), 0);
        if (n) std::memcpy(p->mutable_uint64_data()->mutable_data(), data, n);
      } else {
        for (size_t i = 0; i + 4 <= n; i += 4) {
          uint32_t u;
          std::memcpy(&u, data + i, 4);
          p->add_uint64_data(u);
        }
      }
      return;
    case TypedField::kInt32: {
      const size_t width = Int32EntryBytes(t.dtype());
      const bool is_signed = IsSignedInt32Type(t.dtype());
      p->mutable_int32_data()->Reserve(static_cast<int>(n / width));
      for (size_t i = 0; i + width <= n; i += width) {
        uint32_t u = 0;
        std::memcpy(&u, data + i, width);
        int32_t v = static_cast<int32_t>(u);
        if (is_signed && width < 4) {
          const int shift = 32 - static_cast<int>(width) * 8;
          v = static_cast<int32_t>(u << shift) >> shift;  // sign-extend
        }
        p->add_int32_data(v);
      }
      return;
    }
  }
}

bool ParseInt64(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

// A file descriptor, closed on destruction. Move-only.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileDescriptor& operator=(FileDescriptor&&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// An external data file opened for one tensor, once every check on the reference passed.
struct CheckedExternalData {
  FileDescriptor fd;
  std::string file;  // the resolved path
};

// Checks the reference `info` of a tensor of `dtype` and `dims` (`expected` bytes) against the file system, without
// reading the data: the file exists, resolves (symlinks included) inside the model folder and is a regular file, the
// byte range lies inside it, and the length (given, or the rest of the file) is `expected`. Returns the open file.
StatusOr<CheckedExternalData> OpenExternalData(const ir::ExternalDataInfo& info, const ExternalDataContext& ext,
                                               const std::string& where, DType dtype, const std::vector<int64_t>& dims,
                                               size_t expected) {
  const std::string& shown = info.location;
  char resolved_base[PATH_MAX];
  if (::realpath(ext.base_dir.c_str(), resolved_base) == nullptr) {
    return IoError(where, ": cannot resolve the model folder '", ext.base_dir, "' for external data '", shown,
                   "': ", std::strerror(errno));
  }
  const std::string base = resolved_base;
  const std::string joined = base + "/" + info.location;
  char resolved_file[PATH_MAX];
  if (::realpath(joined.c_str(), resolved_file) == nullptr) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return NotFound(where, ": external data file '", joined, "' does not exist");
    }
    return IoError(where, ": cannot resolve external data file '", joined, "': ", std::strerror(err));
  }
  std::string file = resolved_file;
  const std::string prefix = base == "/" ? base : base + "/";
  if (file.compare(0, prefix.size(), prefix) != 0) {
    return InvalidArgument(where, ": external data file '", shown, "' resolves to '", file,
                           "', outside the model folder '", base, "'");
  }
  FileDescriptor fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // a FIFO must not block the check
  if (fd.get() < 0) {
    return IoError(where, ": cannot open external data file '", file, "': ", std::strerror(errno));
  }
  struct stat sb;
  if (::fstat(fd.get(), &sb) != 0) return IoError(where, ": cannot stat external data file '", file, "'");
  if (!S_ISREG(sb.st_mode)) return InvalidArgument(where, ": external data file '", file, "' is not a regular file");
  const int64_t file_size = sb.st_size;
  if (info.offset > file_size) {
    return OutOfRange(where, ": external data offset ", info.offset, " is past the end of '", file, "' (", file_size,
                      " bytes)");
  }
  const int64_t available = file_size - info.offset;
  if (info.length && *info.length > available) {
    return OutOfRange(where, ": external data offset ", info.offset, " + length ", *info.length,
                      " is past the end of '", file, "' (", file_size, " bytes)");
  }
  const int64_t length = info.length ? *info.length : available;
  if (static_cast<uint64_t>(length) != expected) {
    return InvalidArgument(where, ": external data in '", file, "' has ", length, " bytes at offset ", info.offset,
                           info.length ? "" : " (to the end of the file)", ", expected ", expected, " for ",
                           DTypeName(dtype), " dims ", DimsToString(dims));
  }
  return CheckedExternalData{std::move(fd), std::move(file)};
}

// Reads the external data named by `info` into a new tensor of `dtype` and `dims` (`expected` bytes), after the
// checks of OpenExternalData: the tensor is allocated only once the file was shown to hold its bytes.
StatusOr<ir::Tensor> ReadExternalData(const ir::ExternalDataInfo& info, const ExternalDataContext& ext,
                                      const std::string& where, DType dtype, const std::vector<int64_t>& dims,
                                      size_t expected) {
  ONNXAMP_ASSIGN_OR_RETURN(CheckedExternalData checked, OpenExternalData(info, ext, where, dtype, dims, expected));
  ir::Tensor t(dtype, dims);
  std::byte* out = t.mutable_data();
  size_t done = 0;
  while (done < expected) {
    const ssize_t n = ::pread(checked.fd.get(), out + done, expected - done, static_cast<off_t>(info.offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(where, ": reading external data file '", checked.file, "' failed: ", std::strerror(errno));
    }
    if (n == 0) return IoError(where, ": external data file '", checked.file, "' shrank while being read");
    done += static_cast<size_t>(n);
  }
  return t;
}

StatusOr<ir::ExternalDataInfo> ParseExternalInfo(const onnx::TensorProto& p, const std::string& where) {
  ir::ExternalDataInfo info;
  bool has_location = false;
  for (const onnx::StringStringEntryProto& kv : p.external_data()) {
    const std::string& key = kv.key();
    if (key == "location") {
      info.location = kv.value();
      has_location = true;
    } else if (key == "offset") {
      if (!ParseInt64(kv.value(), &info.offset) || info.offset < 0) {
        return InvalidArgument(where, ": external data offset '", kv.value(), "' is not a non-negative integer");
      }
    } else if (key == "length") {
      int64_t length = 0;
      if (!ParseInt64(kv.value(), &length) || length < 0) {
        return InvalidArgument(where, ": external data length '", kv.value(), "' is not a non-negative integer");
      }
      info.length = length;
    } else if (key == "checksum") {
      info.checksum = kv.value();
    } else {
      info.extra.emplace_back(key, kv.value());
    }
  }
  if (!has_location) return InvalidArgument(where, ": external data without a 'location' entry");
  ONNXAMP_RETURN_IF_ERROR(internal::CheckExternalLocation(info.location, where));
  return info;
}

bool HasTypedData(const onnx::TensorProto& p) {
  return p.float_data_size() || p.double_data_size() || p.int32_data_size() || p.int64_data_size() ||
         p.uint64_data_size() || p.string_data_size();
}

// Frees the typed data fields of `p` (clear_*() would keep their capacity).
void FreeTypedData(onnx::TensorProto* p) {
  google::protobuf::RepeatedField<float>().Swap(p->mutable_float_data());
  google::protobuf::RepeatedField<double>().Swap(p->mutable_double_data());
  google::protobuf::RepeatedField<int32_t>().Swap(p->mutable_int32_data());
  google::protobuf::RepeatedField<int64_t>().Swap(p->mutable_int64_data());
  google::protobuf::RepeatedField<uint64_t>().Swap(p->mutable_uint64_data());
  google::protobuf::RepeatedPtrField<std::string>().Swap(p->mutable_string_data());
}

// raw_data at least this large becomes the tensor's storage when the proto is consumed; smaller data are copied
// into an owned (64-byte aligned) buffer, which costs little and frees the small string.
constexpr size_t kAdoptRawDataBytes = 64 * 1024;

// A tensor over `p`'s raw_data string, which it takes from `p` (no copy). The string's size was checked.
ir::Tensor AdoptRawData(onnx::TensorProto* p, DType dtype, std::vector<int64_t> dims) {
  std::shared_ptr<std::string> owner(p->release_raw_data());
  auto buffer = std::make_shared<ir::Buffer>(reinterpret_cast<std::byte*>(owner->data()), owner->size(), owner);
  return ir::Tensor::FromBuffer(dtype, std::move(dims), std::move(buffer));
}

// TensorProto -> Tensor. With `consumable` (which is `p`), the data are moved out of the proto instead of copied.
StatusOr<ir::Tensor> ConvertTensor(const onnx::TensorProto& p, onnx::TensorProto* consumable,
                                   const ExternalDataContext& ext, const std::string& where) {
  if (!p.has_data_type() || p.data_type() == 0) return InvalidArgument(where, ": tensor has no data_type");
  std::optional<DType> maybe_dtype = DTypeFromCode(p.data_type());
  if (!maybe_dtype) return InvalidArgument(where, ": unknown data_type code ", p.data_type());
  const DType dtype = *maybe_dtype;
  std::vector<int64_t> dims(p.dims().begin(), p.dims().end());
  StatusOr<size_t> byte_size = ir::Tensor::ComputeByteSize(dtype, dims);
  if (!byte_size.ok()) {
    return Status(byte_size.status().code(),
                  StrCat(where, ": dims ", DimsToString(dims), ": ", byte_size.status().message()));
  }
  const int64_t count = *ir::Tensor::ComputeNumElements(dims);

  const bool external = p.has_data_location() && p.data_location() == onnx::TensorProto::EXTERNAL;
  if (!external && p.external_data_size() > 0) {
    return InvalidArgument(where, ": external_data entries without data_location EXTERNAL");
  }
  ir::Tensor t;
  if (external) {
    if (p.has_raw_data() || HasTypedData(p)) {
      return InvalidArgument(where, ": tensor has both external data and inline data");
    }
    if (dtype == DType::kString) return InvalidArgument(where, ": string tensors cannot use external data");
    ONNXAMP_ASSIGN_OR_RETURN(ir::ExternalDataInfo info, ParseExternalInfo(p, where));
    if (ext.base_dir.empty()) {
      return InvalidArgument(where, ": external data '", info.location,
                             "' refused: the model was not loaded from a folder");
    }
    if (info.length && *info.length != static_cast<int64_t>(*byte_size)) {
      return InvalidArgument(where, ": external data length ", *info.length, " for '", info.location,
                             "' disagrees with ", *byte_size, " bytes for ", DTypeName(dtype), " dims ",
                             DimsToString(dims));
    }
    if (ext.load) {
      ONNXAMP_ASSIGN_OR_RETURN(t, ReadExternalData(info, ext, where, dtype, dims, *byte_size));
    } else {
      // Not read, but checked as the read would check it: a model whose data cannot load does not pass.
      ONNXAMP_RETURN_IF_ERROR(OpenExternalData(info, ext, where, dtype, dims, *byte_size).status());
      ONNXAMP_ASSIGN_OR_RETURN(t, ir::Tensor::WithoutData(dtype, dims));
    }
    t.set_external(std::move(info));
    t.set_encoding(ir::TensorEncoding::kRaw);
  } else if (p.has_raw_data()) {
    if (HasTypedData(p)) return InvalidArgument(where, ": tensor has both raw_data and typed data fields");
    if (dtype == DType::kString) return InvalidArgument(where, ": string tensors cannot use raw_data");
    if (p.raw_data().size() != *byte_size) {
      return InvalidArgument(where, ": raw_data has ", p.raw_data().size(), " bytes, expected ", *byte_size, " for ",
                             DTypeName(dtype), " dims ", DimsToString(dims));
    }
    if (consumable && *byte_size >= kAdoptRawDataBytes) {
      t = AdoptRawData(consumable, dtype, std::move(dims));
    } else {
      std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(p.raw_data().data()), p.raw_data().size());
      StatusOr<ir::Tensor> made = ir::Tensor::FromBytes(dtype, dims, bytes);
      if (!made.ok()) return internal::AddContext(made.status(), where);
      t = std::move(made).value();
      if (consumable) consumable->clear_raw_data();
    }
    t.set_encoding(ir::TensorEncoding::kRaw);
  } else {
    const TypedField field = FieldFor(dtype);
    for (TypedField other : {TypedField::kFloat, TypedField::kDouble, TypedField::kInt32, TypedField::kInt64,
                             TypedField::kUint64, TypedField::kString}) {
      if (other != field && FieldSize(p, other) > 0) {
        return InvalidArgument(where, ": ", DTypeName(dtype), " tensor has values in ", FieldName(other), "; expected ",
                               FieldName(field), " or raw_data");
      }
    }
    int64_t expected = count;
    if (dtype == DType::kComplex64 || dtype == DType::kComplex128) expected = count * 2;
    if (IsSubByte(dtype)) expected = static_cast<int64_t>(*byte_size);
    const int64_t got = FieldSize(p, field);
    if (got != expected) {
      return InvalidArgument(where, ": ", FieldName(field), " has ", got, " values, expected ", expected, " for ",
                             DTypeName(dtype), " dims ", DimsToString(dims));
    }
    t = ir::Tensor(dtype, dims);  // bounded: the proto holds `expected` values
    ONNXAMP_RETURN_IF_ERROR(FillFromTypedField(p, field, &t, where));
    if (consumable) FreeTypedData(consumable);
    t.set_encoding(ir::TensorEncoding::kTyped);
  }
  t.set_name(p.name());
  t.set_doc_string(p.doc_string());
  if (p.has_segment()) t.set_segment(std::make_pair(p.segment().begin(), p.segment().end()));
  return t;
}

// TensorToProto; `with_raw_data` false leaves raw_data out.
void TensorToProtoImpl(const ir::Tensor& t, onnx::TensorProto* p, bool with_raw_data) {
  p->Clear();
  for (int64_t d : t.dims()) p->add_dims(d);
  p->set_data_type(static_cast<int32_t>(t.dtype()));
  if (!t.name().empty()) p->set_name(t.name());
  if (!t.doc_string().empty()) p->set_doc_string(t.doc_string());
  if (t.segment()) {
    p->mutable_segment()->set_begin(t.segment()->first);
    p->mutable_segment()->set_end(t.segment()->second);
  }
  if (!t.has_data()) {
    // Loaded without its external data: write the reference back as it was.
    if (const auto& info = t.external()) {
      p->set_data_location(onnx::TensorProto::EXTERNAL);
      auto add = [&](const std::string& k, const std::string& v) {
        auto* kv = p->add_external_data();
        kv->set_key(k);
        kv->set_value(v);
      };
      add("location", info->location);
      if (info->offset != 0) add("offset", std::to_string(info->offset));
      if (info->length) add("length", std::to_string(*info->length));
      if (!info->checksum.empty()) add("checksum", info->checksum);
      for (const auto& [k, v] : info->extra) add(k, v);
    }
    return;
  }
  if (!internal::WritesRawData(t)) {
    WriteTypedField(t, p);
  } else if (with_raw_data) {
    p->set_raw_data(t.data() ? std::string(reinterpret_cast<const char*>(t.data()), t.nbytes()) : std::string());
  }
}

}  // namespace

namespace internal {

Status CheckExternalLocation(const std::string& location, const std::string& where) {
  if (location.empty()) return InvalidArgument(where, ": external data location is empty");
  if (location.find('\0') != std::string::npos) {
    return InvalidArgument(where, ": external data location contains a NUL character");
  }
  if (location.front() == '/') {
    return InvalidArgument(where, ": external data location '", location,
                           "' is an absolute path; only paths relative to the model folder are allowed");
  }
  size_t start = 0;
  while (start <= location.size()) {
    size_t end = location.find('/', start);
    if (end == std::string::npos) end = location.size();
    if (location.compare(start, end - start, "..") == 0 && end - start == 2) {
      return InvalidArgument(where, ": external data location '", location,
                             "' contains '..'; only paths inside the model folder are allowed");
    }
    start = end + 1;
  }
  return Status::Ok();
}

StatusOr<ir::SparseTensor> SparseTensorFromProto(const onnx::SparseTensorProto& proto, const ExternalDataContext& ext,
                                                 const std::string& where) {
  if (!proto.has_values()) return InvalidArgument(where, ": sparse tensor has no values");
  if (!proto.has_indices()) return InvalidArgument(where, ": sparse tensor has no indices");
  ir::SparseTensor out;
  ONNXAMP_ASSIGN_OR_RETURN(out.values, TensorFromProto(proto.values(), ext, where + " values"));
  ONNXAMP_ASSIGN_OR_RETURN(out.indices, TensorFromProto(proto.indices(), ext, where + " indices"));
  out.dims.assign(proto.dims().begin(), proto.dims().end());
  StatusOr<int64_t> count = ir::Tensor::ComputeNumElements(out.dims);
  if (!count.ok())
    return InvalidArgument(where, ": sparse tensor dims ", DimsToString(out.dims), ": ", count.status().message());
  if (out.values.rank() != 1) {
    return InvalidArgument(where, ": sparse tensor values must have rank 1, got dims ",
                           DimsToString(out.values.dims()));
  }
  if (out.indices.dtype() != DType::kInt64) {
    return InvalidArgument(where, ": sparse tensor indices must be int64, got ", DTypeName(out.indices.dtype()));
  }
  const int64_t nnz = out.values.dims()[0];
  const auto& idims = out.indices.dims();
  const bool linear = idims.size() == 1 && idims[0] == nnz;
  const bool coo = idims.size() == 2 && idims[0] == nnz && idims[1] == static_cast<int64_t>(out.dims.size());
  if (!linear && !coo) {
    return InvalidArgument(where, ": sparse tensor indices have dims ", DimsToString(idims), ", expected [", nnz,
                           "] or [", nnz, ",", out.dims.size(), "]");
  }
  return out;
}

bool WritesRawData(const ir::Tensor& t) {
  return t.has_data() && t.dtype() != DType::kString && t.encoding() == ir::TensorEncoding::kRaw;
}

void TensorToProtoWithoutRawData(const ir::Tensor& t, onnx::TensorProto* p) { TensorToProtoImpl(t, p, false); }

StatusOr<ir::Tensor> TensorFromProtoConsuming(onnx::TensorProto* proto, const ExternalDataContext& ext,
                                              const std::string& where) {
  return ConvertTensor(*proto, proto, ext, where);
}

}  // namespace internal

StatusOr<ir::Tensor> TensorFromProto(const onnx::TensorProto& p, const ExternalDataContext& ext,
                                     const std::string& where) {
  return ConvertTensor(p, nullptr, ext, where);
}

void TensorToProto(const ir::Tensor& t, onnx::TensorProto* p) { TensorToProtoImpl(t, p, true); }

}  // namespace onnxamp::importer
