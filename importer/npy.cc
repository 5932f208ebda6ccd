// NumPy .npy reading (strict header parser, byteswap, Fortran-order transpose) and writing (as numpy.save does).
#include "importer/npy.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

namespace onnxamp::importer {
namespace {

// Tensor bytes are little-endian; so is every host onnxamp runs on, which lets '=' (native) mean '<'.
static_assert(std::endian::native == std::endian::little, "onnxamp assumes a little-endian host");

// NumPy's ARRAY_ALIGN and GROWTH_AXIS_MAX_DIGITS: the header is padded so that the data start at a multiple of
// 64 bytes, after room for the growth axis to reach 21 digits.
constexpr size_t kArrayAlign = 64;
constexpr size_t kGrowthAxisMaxDigits = 21;
// NumPy 2 allows 64 dimensions (NPY_MAXDIMS).
constexpr size_t kMaxNpyDims = 64;

// The NumPy type of each dtype that .npy can hold, as numpy.save writes it (dtype.str).
struct NpyType {
  DType dtype;
  std::string_view descr;
};
constexpr std::array<NpyType, 14> kNpyTypes = {{
    {DType::kFloat16, "<f2"},
    {DType::kFloat32, "<f4"},
    {DType::kFloat64, "<f8"},
    {DType::kInt8, "|i1"},
    {DType::kInt16, "<i2"},
    {DType::kInt32, "<i4"},
    {DType::kInt64, "<i8"},
    {DType::kUint8, "|u1"},
    {DType::kUint16, "<u2"},
    {DType::kUint32, "<u4"},
    {DType::kUint64, "<u8"},
    {DType::kBool, "|b1"},
    {DType::kComplex64, "<c8"},
    {DType::kComplex128, "<c16"},
}};

constexpr std::string_view kSupportedDescrs =
    "<f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1 <c8 <c16 (byte order '<', '>' or '='; '|' for one-byte "
    "types) and 'bfloat16'";

// How the elements of an .npy file are stored.
struct ElementFormat {
  DType dtype = DType::kUndefined;
  size_t itemsize = 0;
  bool byteswap = false;  // big-endian data
  size_t swap_unit = 0;   // bytes per swapped scalar: the itemsize, or half of it for complex
};

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Printable rendering of (the start of) a header for error messages.
std::string Printable(std::string_view text) {
  constexpr size_t kMax = 160;
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMax; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c >= 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kMax) out += "...";
  return out;
}

std::string DimsToString(const std::vector<int64_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + (dims.size() == 1 ? ",)" : ")");
}

// A strict parser for the one Python literal an .npy header holds:
//   {'descr': <str>, 'fortran_order': True|False, 'shape': (<int>, ...), }
// Keys in any order, each exactly once; strings in single or double quotes without escapes; the shape a tuple
// of non-negative integers (an 'L' suffix, as Python 2 wrote long integers, is accepted).
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& where) : text_(text), where_(where) {}

  StatusOr<NpyHeader> Parse() {
    NpyHeader header;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      ONNXAMP_ASSIGN_OR_RETURN(std::string key, ParseString());
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after key '" + key + "'");
      SkipSpace();
      bool* seen = nullptr;
      if (key == "descr") {
        seen = &seen_descr;
        if (Peek() == '[') return Error("structured (record) dtypes are not supported");
        ONNXAMP_ASSIGN_OR_RETURN(header.descr, ParseString());
      } else if (key == "fortran_order") {
        seen = &seen_fortran;
        ONNXAMP_ASSIGN_OR_RETURN(header.fortran_order, ParseBool());
      } else if (key == "shape") {
        seen = &seen_shape;
        ONNXAMP_ASSIGN_OR_RETURN(header.shape, ParseShape());
      } else {
        return Error("unexpected key '" + key + "' (expected 'descr', 'fortran_order' and 'shape')");
      }
      if (*seen) return Error("key '" + key + "' appears twice");
      *seen = true;
      SkipSpace();
      if (Consume('}')) break;
      if (!Consume(',')) return Error("expected ',' or '}'");
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the closing '}'");
    if (!seen_descr) return Error("key 'descr' is missing");
    if (!seen_fortran) return Error("key 'fortran_order' is missing");
    if (!seen_shape) return Error("key 'shape' is missing");
    return header;
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool Consume(char c) {
    if (Peek() != c || pos_ >= text_.size()) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  Status Error(std::string_view what) const {
    return InvalidArgument(where_, ": malformed .npy header: ", what, " at offset ", pos_, " in \"", Printable(text_),
                           "\"");
  }

  StatusOr<std::string> ParseString() {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Error("expected a quoted string");
    ++pos_;
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' || text_[pos_] == '\n')
        return Error("escapes and line breaks in strings are not allowed");
      ++pos_;
    }
    if (pos_ >= text_.size()) return Error("unterminated string");
    std::string s(text_.substr(start, pos_ - start));
    ++pos_;
    return s;
  }

  StatusOr<bool> ParseBool() {
    for (auto [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        const size_t end = pos_ + word.size();
        if (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_')) break;
        pos_ = end;
        return value;
      }
    }
    return Error("expected True or False");
  }

  StatusOr<int64_t> ParseInt() {
    if (Peek() == '-') return Error("a dimension is negative");
    if (!std::isdigit(static_cast<unsigned char>(Peek()))) return Error("expected an integer");
    if (Peek() == '0' && pos_ + 1 < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_ + 1]))) {
      return Error("integers with leading zeros are not Python literals");
    }
    int64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(Peek()))) {
      const int digit = Peek() - '0';
      if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) return Error("a dimension does not fit in int64");
      v = v * 10 + digit;
      ++pos_;
    }
    if (Peek() == 'L' || Peek() == 'l') ++pos_;
    return v;
  }

  StatusOr<std::vector<int64_t>> ParseShape() {
    if (!Consume('(')) return Error("'shape' must be a tuple, as in (2, 3) or (4,) or ()");
    std::vector<int64_t> dims;
    bool trailing_comma = false;
    while (true) {
      SkipSpace();
      if (Consume(')')) break;
      if (dims.size() == kMaxNpyDims) return Error("more than 64 dimensions");
      ONNXAMP_ASSIGN_OR_RETURN(int64_t d, ParseInt());
      dims.push_back(d);
      SkipSpace();
      trailing_comma = Consume(',');
      if (!trailing_comma) {
        SkipSpace();
        if (!Consume(')')) return Error("expected ',' or ')' in 'shape'");
        break;
      }
    }
    if (dims.size() == 1 && !trailing_comma) return Error("'shape' (n) is an integer, not a tuple: write (n,)");
    return dims;
  }

  std::string_view text_;
  const std::string& where_;
  size_t pos_ = 0;
};

StatusOr<ElementFormat> ParseDescr(std::string_view descr, const std::string& where) {
  if (descr == "bfloat16") return ElementFormat{DType::kBFloat16, 2, false, 2};
  auto unsupported = [&](std::string_view why) {
    return Unimplemented(where, ": unsupported .npy dtype '", descr, "'", why, "; supported: ", kSupportedDescrs);
  };
  if (descr.size() < 3) return unsupported("");
  const char order = descr[0];
  const char kind = descr[1];
  const std::string_view digits = descr.substr(2);
  if (order != '<' && order != '>' && order != '=' && order != '|') return unsupported(" (no byte order prefix)");
  if (kind == 'V' && digits == "2") {
    return Unimplemented(where, ": .npy dtype '", descr,
                         "' is an opaque 2-byte type: ml_dtypes saves bfloat16 this way, but it cannot be told apart "
                         "from any other 2-byte type. Save the array as float32, or as an ONNX TensorProto (.pb)");
  }
  if (digits.size() > 2 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      digits[0] == '0') {
    return unsupported("");
  }
  const size_t size = static_cast<size_t>(std::stoi(std::string(digits)));
  DType dtype = DType::kUndefined;
  switch (kind) {
    case 'f':
      dtype = size == 2 ? DType::kFloat16 : size == 4 ? DType::kFloat32 : size == 8 ? DType::kFloat64 : dtype;
      break;
    case 'i':
      dtype = size == 1   ? DType::kInt8
              : size == 2 ? DType::kInt16
              : size == 4 ? DType::kInt32
              : size == 8 ? DType::kInt64
                          : dtype;
      break;
    case 'u':
      dtype = size == 1   ? DType::kUint8
              : size == 2 ? DType::kUint16
              : size == 4 ? DType::kUint32
              : size == 8 ? DType::kUint64
                          : dtype;
      break;
    case 'b':
      dtype = size == 1 ? DType::kBool : dtype;
      break;
    case 'c':
      dtype = size == 8 ? DType::kComplex64 : size == 16 ? DType::kComplex128 : dtype;
      break;
    default:
      break;
  }
  if (dtype == DType::kUndefined) return unsupported("");
  if (order == '|' && size > 1) return unsupported(" ('|' gives no byte order for a multi-byte type)");
  ElementFormat format;
  format.dtype = dtype;
  format.itemsize = size;
  format.byteswap = order == '>' && size > 1;
  format.swap_unit = kind == 'c' ? size / 2 : size;
  return format;
}

uint32_t ReadLe32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

void ByteswapInPlace(std::byte* data, size_t nbytes, size_t unit) {
  for (size_t i = 0; i + unit <= nbytes; i += unit) std::reverse(data + i, data + i + unit);
}

// Copies Fortran-order (column-major) elements from `src` into C order (row-major) in `dst`.
void FortranToC(const std::byte* src, std::byte* dst, const std::vector<int64_t>& dims, size_t itemsize) {
  const size_t rank = dims.size();
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  if (count == 0) return;
  std::vector<int64_t> fstride(rank, 1);
  for (size_t k = 1; k < rank; ++k) fstride[k] = fstride[k - 1] * dims[k - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t offset = 0;  // Fortran-order element offset of `index`
  for (int64_t out = 0; out < count; ++out) {
    std::memcpy(dst + out * itemsize, src + offset * itemsize, itemsize);
    for (size_t k = rank; k-- > 0;) {  // advance the C-order index, last dimension fastest
      if (++index[k] < dims[k]) {
        offset += fstride[k];
        break;
      }
      offset -= (dims[k] - 1) * fstride[k];
      index[k] = 0;
    }
  }
}

}  // namespace

StatusOr<NpyLayout> ParseNpyLayout(std::string_view data, uint64_t file_size, const std::string& where) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  if (data.size() < 10 || data.substr(0, kNpyMagic.size()) != kNpyMagic) {
    return InvalidArgument(where, ": not a NumPy .npy file (the magic \"\\x93NUMPY\" is missing)");
  }
  const int major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    return Unimplemented(where, ": unsupported .npy format version ", major, ".", minor, " (supported: 1.0, 2.0, 3.0)");
  }
  size_t prefix = 10;
  uint64_t header_len = static_cast<uint64_t>(bytes[8]) | static_cast<uint64_t>(bytes[9]) << 8;
  if (major >= 2) {
    if (data.size() < 12) return InvalidArgument(where, ": truncated .npy file (", data.size(), " bytes)");
    prefix = 12;
    header_len = ReadLe32(bytes + 8);
  }
  if (header_len > kMaxNpyHeaderBytes) {
    return InvalidArgument(where, ": .npy header length ", header_len, " is over the limit of ", kMaxNpyHeaderBytes);
  }
  if (prefix + header_len > data.size()) {
    return InvalidArgument(where, ": truncated .npy file: the header needs ", prefix + header_len,
                           " bytes, the file has ", data.size());
  }
  const std::string_view header_text = data.substr(prefix, header_len);
  ONNXAMP_ASSIGN_OR_RETURN(NpyHeader header, HeaderParser(header_text, where).Parse());
  ONNXAMP_ASSIGN_OR_RETURN(ElementFormat format, ParseDescr(header.descr, where));

  StatusOr<size_t> expected = ir::Tensor::ComputeByteSize(format.dtype, header.shape);
  if (!expected.ok()) {
    return expected.status().WithContext(StrCat(where, ": .npy shape ", DimsToString(header.shape)));
  }
  const uint64_t payload_size = file_size - (prefix + header_len);
  if (payload_size != *expected) {
    return InvalidArgument(where, ": .npy data size does not match the header: shape ", DimsToString(header.shape),
                           " of '", header.descr, "' needs ", *expected, " bytes, the file has ", payload_size,
                           payload_size < *expected ? " (truncated file)" : " (trailing bytes)");
  }
  NpyLayout layout;
  layout.dtype = format.dtype;
  layout.shape = std::move(header.shape);
  layout.data_offset = prefix + header_len;
  layout.data_bytes = *expected;
  layout.itemsize = format.itemsize;
  layout.fortran_order = header.fortran_order && layout.shape.size() > 1;
  layout.byteswap = format.byteswap;
  layout.swap_unit = format.swap_unit;
  return layout;
}

StatusOr<ir::Tensor> ParseNpy(std::string_view data, const std::string& where) {
  ONNXAMP_ASSIGN_OR_RETURN(NpyLayout layout, ParseNpyLayout(data, data.size(), where));
  const auto* src = reinterpret_cast<const std::byte*>(data.data() + layout.data_offset);
  ir::Tensor tensor;
  if (layout.fortran_order) {
    tensor = ir::Tensor(layout.dtype, layout.shape);
    FortranToC(src, tensor.mutable_data(), layout.shape, layout.itemsize);
  } else {
    ONNXAMP_ASSIGN_OR_RETURN(tensor, ir::Tensor::FromBytes(layout.dtype, layout.shape, {src, layout.data_bytes}));
  }
  if (layout.byteswap && tensor.nbytes() > 0) ByteswapInPlace(tensor.mutable_data(), tensor.nbytes(), layout.swap_unit);
  if (layout.dtype == DType::kBool) {
    const std::span<const std::byte> values = tensor.bytes();
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] > std::byte{1}) {
        return InvalidArgument(where, ": bool element ", i, " has byte value ", static_cast<int>(values[i]),
                               " (expected 0 or 1)");
      }
    }
  }
  return tensor;
}

StatusOr<std::string> SerializeNpy(const ir::Tensor& tensor, const std::string& where) {
  const auto type =
      std::find_if(kNpyTypes.begin(), kNpyTypes.end(), [&](const NpyType& t) { return t.dtype == tensor.dtype(); });
  if (type == kNpyTypes.end()) {
    return Unimplemented(where, ": tensor '", tensor.name(), "' has dtype ", DTypeName(tensor.dtype()),
                         ", which NumPy's .npy format cannot hold; write an ONNX TensorProto (.pb) file instead");
  }
  const std::vector<int64_t>& dims = tensor.dims();
  // Exactly the header numpy.save writes (keys sorted, repr of the shape, growth-axis spaces, padding).
  std::string header =
      StrCat("{'descr': '", type->descr, "', 'fortran_order': False, 'shape': ", DimsToString(dims), ", }");
  if (!dims.empty())
    header.append(kGrowthAxisMaxDigits - std::min(kGrowthAxisMaxDigits, std::to_string(dims[0]).size()), ' ');
  const size_t hlen = header.size() + 1;  // with the final '\n'
  size_t prefix = 10;
  size_t padlen = kArrayAlign - (prefix + hlen) % kArrayAlign;
  int major = 1;
  if (hlen + padlen > 0xffff) {
    major = 2;
    prefix = 12;
    padlen = kArrayAlign - (prefix + hlen) % kArrayAlign;
  }
  const uint64_t total_header = hlen + padlen;
  if (total_header > std::numeric_limits<uint32_t>::max()) {
    return OutOfRange(where, ": .npy header of ", total_header, " bytes is too large");
  }
  std::string out;
  out.reserve(prefix + total_header + tensor.nbytes());
  out.append(kNpyMagic);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  for (size_t i = 0; i < prefix - 8; ++i) out.push_back(static_cast<char>((total_header >> (8 * i)) & 0xff));
  out.append(header);
  out.append(padlen, ' ');
  out.push_back('\n');
  out.append(reinterpret_cast<const char*>(tensor.data()), tensor.nbytes());
  return out;
}

}  // namespace onnxamp::importer
