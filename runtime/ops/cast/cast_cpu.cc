// Cast and CastLike (CPU): between every numeric type, bool and string. Conversion rules are Cast's
// (runtime/ops/common/elementwise_convert.h): fp16/bf16 round to nearest even, float to integer truncates and
// saturates, NaN -> 0. Strings parse decimal numbers, "NaN", "INF", "+INF", "-INF" (any case); numbers format as
// the shortest decimal that reads back to the same value, NaN as "NaN", infinities as "INF" and "-INF".
// The float8, int4/uint4 and float4 types are refused when the kernel is created.
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "runtime/executor/kernel.h"
#include "runtime/ops/cast/cast.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/elementwise_convert.h"

namespace onnxamp::ops {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

// Parses one string as a number of type F (float or double); false when it is not one.
template <typename F>
bool ParseFloat(std::string_view s, F* out) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || s.front() == '+' || s.front() == '-') return false;
  if (EqualsIgnoreCase(s, "inf") || EqualsIgnoreCase(s, "infinity")) {
    *out = negative ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
    return true;
  }
  if (EqualsIgnoreCase(s, "nan")) {
    *out = std::numeric_limits<F>::quiet_NaN();
    return true;
  }
  F v{};
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) {
    // Overflow gives infinity, underflow zero, like strtod.
    double d = std::strtod(std::string(s).c_str(), nullptr);
    v = static_cast<F>(d);
  } else if (ec != std::errc() || ptr != s.data() + s.size()) {
    return false;
  }
  *out = negative ? -v : v;
  return true;
}

// One string -> storage type To. Integers take integer text exactly, other numbers through double.
template <typename To>
Status ParseValue(const std::string& s, To* out) {
  if constexpr (std::is_same_v<To, bool>) {
    if (EqualsIgnoreCase(s, "true")) {
      *out = true;
      return Status::Ok();
    }
    if (EqualsIgnoreCase(s, "false")) {
      *out = false;
      return Status::Ok();
    }
  }
  if constexpr (std::is_integral_v<To> && !std::is_same_v<To, bool>) {
    std::string_view v = s;
    if (!v.empty() && v.front() == '+') v.remove_prefix(1);
    To i{};
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), i);
    if (ec == std::errc() && ptr == v.data() + v.size()) {
      *out = i;
      return Status::Ok();
    }
  }
  if constexpr (std::is_same_v<To, float>) {
    if (ParseFloat(s, out)) return Status::Ok();
  } else {
    double d;
    if (ParseFloat(s, &d)) {
      *out = ConvertValue<To>(d);
      return Status::Ok();
    }
  }
  return InvalidArgument("\"", s, "\" is not a number");
}

// The shortest decimal that reads back to `v` when rounded to storage type T (for fp16/bf16: to 16 bits).
template <typename T>
std::string FormatValue(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "1" : "0";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else {
    const auto c = Load(v);
    if (std::isnan(c)) return "NaN";
    if (std::isinf(c)) return c > 0 ? "INF" : "-INF";
    char buf[64];
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      for (int precision = 1; precision <= 9; ++precision) {
        auto r = std::to_chars(buf, buf + sizeof(buf), c, std::chars_format::general, precision);
        float back = 0;
        std::from_chars(buf, r.ptr, back);
        if (T(back).bits == v.bits) {
          // Print the short value the way floats print (65500 rather than 6.55e+04).
          r = std::to_chars(buf, buf + sizeof(buf), back);
          return std::string(buf, r.ptr);
        }
      }
    }
    auto r = std::to_chars(buf, buf + sizeof(buf), c);
    return std::string(buf, r.ptr);
  }
}

// Converts n values on the calling thread. fp16/bf16 go through float blocks converted in bulk (the same results
// as converting one element at a time through float, only faster).
template <typename To, typename From>
void ConvertRange(const From* in, To* out, int64_t n) {
  if constexpr (kIsHalfLike<From> && std::is_same_v<To, float>) {
    LoadBlock(in, out, n);  // straight into the output
  } else if constexpr (std::is_same_v<From, float> && kIsHalfLike<To>) {
    StoreBlock(in, out, n);
  } else if constexpr (kIsHalfLike<From> && kIsHalfLike<To>) {
    float buf[kBlock];
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = std::min(kBlock, n - i);
      LoadBlock(in + i, buf, m);
      StoreBlock(buf, out + i, m);
    }
  } else if constexpr (kIsHalfLike<From>) {
    float buf[kBlock];
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = std::min(kBlock, n - i);
      LoadBlock(in + i, buf, m);
      for (int64_t j = 0; j < m; ++j) out[i + j] = ConvertValue<To, float>(buf[j]);
    }
  } else if constexpr (kIsHalfLike<To>) {
    float buf[kBlock];
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = std::min(kBlock, n - i);
      for (int64_t j = 0; j < m; ++j) buf[j] = ConvertValue<float, From>(in[i + j]);
      StoreBlock(buf, out + i, m);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = ConvertValue<To, From>(in[i]);
  }
}

template <typename To, typename From>
void ConvertLoop(exec::ThreadPool& pool, const From* in, To* out, int64_t n) {
  ParallelRanges(pool, n, kElementwiseGrain, [&](int64_t b, int64_t e) { ConvertRange(in + b, out + b, e - b); });
}

// Casts x to `to` into output 0.
Status CastTo(exec::KernelContext& ctx, const ir::Tensor& x, DType to) {
  if (!IsCastable(x.dtype())) {
    return Unimplemented("input 0 has element type ", DTypeName(x.dtype()),
                         ", which Cast does not support (numeric types, bool and string)");
  }
  if (x.dtype() == to) return ctx.SetOutput(0, x);
  const int64_t n = x.num_elements();
  if (to == DType::kString) {
    ir::Tensor out(DType::kString, x.dims());
    ONNXAMP_RETURN_IF_ERROR(DispatchNumericOrBool(x.dtype(), [&](auto tf) -> Status {
      using From = typename decltype(tf)::type;
      const From* in = x.values<From>().data();
      for (int64_t i = 0; i < n; ++i) out.mutable_strings()[i] = FormatValue(in[i]);
      return Status::Ok();
    }));
    return ctx.SetOutput(0, std::move(out));
  }
  ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, to, x.dims()));
  return DispatchNumericOrBool(to, [&](auto tt) -> Status {
    using To = typename decltype(tt)::type;
    To* po = out->mutable_values<To>().data();
    if (x.dtype() == DType::kString) {
      for (int64_t i = 0; i < n; ++i) {
        Status st = ParseValue(x.strings()[i], &po[i]);
        if (!st.ok()) return InvalidArgument("input 0 element ", i, ": ", st.message());
      }
      return Status::Ok();
    }
    return DispatchNumericOrBool(x.dtype(), [&](auto tf) -> Status {
      using From = typename decltype(tf)::type;
      ConvertLoop(ctx.threads(), x.values<From>().data(), po, n);
      return Status::Ok();
    });
  });
}

class CastCpu : public exec::OpKernel {
 public:
  CastCpu(const exec::KernelInfo& info, Status* st) { *st = Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (input) is missing");
    return CastTo(ctx, *x, to_);
  }

 private:
  Status Init(const exec::KernelInfo& info) {
    ONNXAMP_ASSIGN_OR_RETURN(to_, ParseCastTo(info));
    return CheckCastSaturate(info);
  }

  DType to_ = DType::kUndefined;
};

class CastLikeCpu : public exec::OpKernel {
 public:
  CastLikeCpu(const exec::KernelInfo& info, Status* st) { *st = CheckCastSaturate(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    const ir::Tensor* like = ctx.input(1);
    if (!x || !like) return InvalidArgument("input ", x ? 1 : 0, " is missing");
    if (!IsCastable(like->dtype())) {
      return Unimplemented("input 1 (target_type) has element type ", DTypeName(like->dtype()),
                           ", which CastLike does not support (numeric types, bool and string)");
    }
    return CastTo(ctx, *x, like->dtype());
  }
};

}  // namespace

void RegisterCastKernels(exec::KernelRegistry& r) {
  // 1-5: `to` is a type name string; 6-23: a data_type code (9 adds string, 13 bfloat16, 19 saturate and
  // float8, 21 int4/uint4, 23 float4: the 8-bit and smaller float and int types are refused).
  r.Register({"Cast", "", 1, 23, exec::Device::kCpu, {}, 0, &exec::MakeKernel<CastCpu>});
  r.Register({"CastLike", "", 15, 23, exec::Device::kCpu, {}, 0, &exec::MakeKernel<CastLikeCpu>});
}

}  // namespace onnxamp::ops
