// Comparison of a runtime output with a reference tensor (see compare.h).
#include "tests/conformance/compare.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "runtime/common/half.h"

namespace onnxamp::conformance {
namespace {

// Element i of a tensor as double (float-like and integer types up to 64 bits; ints compared exactly below).
double LoadFloat(const ir::Tensor& t, int64_t i) {
  const std::byte* p = t.data();
  switch (t.dtype()) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, p + i * 4, 4);
      return v;
    }
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, p + i * 8, 8);
      return v;
    }
    case DType::kFloat16: {
      uint16_t v;
      std::memcpy(&v, p + i * 2, 2);
      return HalfBitsToFloat(v);
    }
    case DType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, p + i * 2, 2);
      return BFloat16BitsToFloat(v);
    }
    case DType::kComplex64: {  // i indexes the real/imaginary parts
      float v;
      std::memcpy(&v, p + i * 4, 4);
      return v;
    }
    case DType::kComplex128: {
      double v;
      std::memcpy(&v, p + i * 8, 8);
      return v;
    }
    default:
      return 0;
  }
}

bool IsFloatLike(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 || d == DType::kBFloat16 ||
         d == DType::kComplex64 || d == DType::kComplex128;
}

// Scalars compared one per element: complex types have two parts per element.
int64_t PartsPerElement(DType d) { return d == DType::kComplex64 || d == DType::kComplex128 ? 2 : 1; }

bool Close(double got, double want, const Tolerance& tol) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want);
}

// Multi-index "[i,j,k]" of flat element `flat` in `dims`.
std::string IndexToString(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    if (dims[k] > 0) {
      idx[k] = flat % dims[k];
      flat /= dims[k];
    }
  }
  return DimsToString(idx);
}

std::string Num(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

}  // namespace

std::string DimsToString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

Status CompareTensors(const ir::Tensor& got, const ir::Tensor& want, const Tolerance& tol) {
  if (got.dtype() != want.dtype()) {
    return InvalidArgument("dtype: expected ", DTypeName(want.dtype()), ", got ", DTypeName(got.dtype()));
  }
  if (got.dims() != want.dims()) {
    return InvalidArgument("shape: expected ", DimsToString(want.dims()), ", got ", DimsToString(got.dims()));
  }
  const DType dt = want.dtype();
  if (dt == DType::kString) {
    const auto& g = got.strings();
    const auto& w = want.strings();
    if (g.size() != w.size()) {
      return InvalidArgument("string count: expected ", w.size(), ", got ", g.size());
    }
    int64_t bad = 0;
    int64_t first = -1;
    for (size_t i = 0; i < w.size(); ++i) {
      if (g[i] != w[i]) {
        if (first < 0) first = static_cast<int64_t>(i);
        ++bad;
      }
    }
    if (bad == 0) return Status::Ok();
    return InvalidArgument(bad, " of ", w.size(), " strings differ; first at ", IndexToString(first, want.dims()),
                           ": got \"", g[first], "\", want \"", w[first], "\"");
  }
  if (got.nbytes() != want.nbytes()) {
    return InvalidArgument("byte size: expected ", want.nbytes(), ", got ", got.nbytes());
  }
  if (!IsFloatLike(dt)) {
    // Integers, bool and sub-byte types: exact, compared as bytes; report the first differing element.
    if (std::memcmp(got.data(), want.data(), want.nbytes()) == 0) return Status::Ok();
    const int bits = DTypeBits(dt);
    if (bits < 8) return InvalidArgument("packed ", DTypeName(dt), " values differ");
    const size_t es = static_cast<size_t>(bits / 8);
    int64_t bad = 0;
    int64_t first = -1;
    const int64_t n = want.num_elements();
    for (int64_t i = 0; i < n; ++i) {
      if (std::memcmp(got.data() + i * es, want.data() + i * es, es) != 0) {
        if (first < 0) first = i;
        ++bad;
      }
    }
    auto value = [&](const ir::Tensor& t, int64_t i) -> std::string {
      const std::byte* p = t.data() + i * es;
      switch (dt) {
        case DType::kBool:
          return std::to_integer<uint8_t>(*p) ? "true" : "false";
        case DType::kInt8:
          return std::to_string(static_cast<int8_t>(std::to_integer<uint8_t>(*p)));
        case DType::kUint8:
          return std::to_string(std::to_integer<uint8_t>(*p));
        case DType::kInt16: {
          int16_t v;
          std::memcpy(&v, p, 2);
          return std::to_string(v);
        }
        case DType::kUint16: {
          uint16_t v;
          std::memcpy(&v, p, 2);
          return std::to_string(v);
        }
        case DType::kInt32: {
          int32_t v;
          std::memcpy(&v, p, 4);
          return std::to_string(v);
        }
        case DType::kUint32: {
          uint32_t v;
          std::memcpy(&v, p, 4);
          return std::to_string(v);
        }
        case DType::kInt64: {
          int64_t v;
          std::memcpy(&v, p, 8);
          return std::to_string(v);
        }
        case DType::kUint64: {
          uint64_t v;
          std::memcpy(&v, p, 8);
          return std::to_string(v);
        }
        default: {
          std::string hex;
          for (size_t k = 0; k < es; ++k) hex += StrCat(std::hex, std::to_integer<int>(p[k]));
          return "0x" + hex;
        }
      }
    };
    return InvalidArgument(bad, " of ", n, " elements differ (exact ", DTypeName(dt), "); first at ",
                           IndexToString(first, want.dims()), ": got ", value(got, first), ", want ",
                           value(want, first));
  }
  const int64_t parts = PartsPerElement(dt);
  const int64_t n = want.num_elements() * parts;
  int64_t bad = 0;
  int64_t first = -1;
  double max_abs = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = LoadFloat(got, i);
    const double w = LoadFloat(want, i);
    if (!Close(g, w, tol)) {
      if (first < 0) first = i;
      ++bad;
      const double d = std::fabs(g - w);
      if (!(d <= max_abs)) max_abs = d;  // NaN-propagating max
    }
  }
  if (bad == 0) return Status::Ok();
  return InvalidArgument(bad, " of ", n, " values differ (rtol ", tol.rtol, ", atol ", tol.atol, "); first at ",
                         IndexToString(first / parts, want.dims()), ": got ", Num(LoadFloat(got, first)), ", want ",
                         Num(LoadFloat(want, first)), "; max abs diff ", Num(max_abs));
}

}  // namespace onnxamp::conformance
