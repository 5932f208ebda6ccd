// StringNormalizer (CPU, opsets 10-25): X, a string tensor [C] or [1, C] -> Y, X without the `stopwords` (compared
// case-sensitively or not: is_case_sensitive), then lowercased, uppercased or left as it is (case_change_action
// LOWER, UPPER, NONE). When every element is dropped, Y is one empty string of shape [1] ([1, 1] for a [1, C] X).
//
// Case mapping and the case-insensitive comparison go through the `locale` attribute's wide-character ctype (the
// strings are decoded from UTF-8 to code points first, as ONNX Runtime does): the named locale, else its ".UTF-8"
// form, else C.UTF-8 (Unicode case mapping), else the classic "C" locale (ASCII letters only). An element that is not
// valid UTF-8 is an error naming it.
#include <cstdint>
#include <locale>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

enum class CaseChange { kNone, kLower, kUpper };

// Decodes UTF-8 into code points; nullopt for a malformed sequence (overlong forms, surrogates and values past
// U+10FFFF included).
std::optional<std::u32string> DecodeUtf8(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int extra = 0;
    char32_t cp = 0, min = 0;
    if (b0 < 0x80) {
      cp = b0;
    } else if ((b0 & 0xe0) == 0xc0) {
      extra = 1, cp = b0 & 0x1f, min = 0x80;
    } else if ((b0 & 0xf0) == 0xe0) {
      extra = 2, cp = b0 & 0x0f, min = 0x800;
    } else if ((b0 & 0xf8) == 0xf0) {
      extra = 3, cp = b0 & 0x07, min = 0x10000;
    } else {
      return std::nullopt;
    }
    if (i + static_cast<size_t>(extra) >= s.size()) return std::nullopt;  // truncated
    for (int k = 1; k <= extra; ++k) {
      const auto b = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((b & 0xc0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (b & 0x3f);
    }
    if (extra > 0 && (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))) return std::nullopt;
    out.push_back(cp);
    i += static_cast<size_t>(extra) + 1;
  }
  return out;
}

std::string EncodeUtf8(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }
  return out;
}

// The first locale of `name`, `name`.UTF-8, C.UTF-8 that exists, else the classic locale.
std::locale FindLocale(const std::string& name) {
  for (const std::string& candidate : {name, name + ".UTF-8", std::string("C.UTF-8")}) {
    if (candidate.empty()) continue;
    try {
      return std::locale(candidate);
    } catch (const std::runtime_error&) {
    }
  }
  return std::locale::classic();
}

class StringNormalizerCpu : public exec::OpKernel {
 public:
  StringNormalizerCpu(const exec::KernelInfo& info, Status* st) : locale_(std::locale::classic()) {
    *st = Init(info.node);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "X"));
    const std::string label = InputLabel(ctx, 0, "X");
    if (x->dtype() != DType::kString) return InvalidArgument(label, " is ", DTypeName(x->dtype()), ", expected string");
    const bool two_d = x->rank() == 2;
    if (!(x->rank() == 1 || (two_d && x->dims()[0] == 1))) {
      return InvalidArgument(label, " must be [C] or [1, C], got ", ShapeToString(x->dims()));
    }
    std::vector<std::string> kept;
    const std::vector<std::string>& in = x->strings();
    for (size_t k = 0; k < in.size(); ++k) {
      std::optional<std::u32string> text = DecodeUtf8(in[k]);
      if (!text) return InvalidArgument(label, " element ", k, " is not valid UTF-8");
      if (!stopwords_.empty()) {
        const std::u32string key = case_sensitive_ ? *text : Map(*text, CaseChange::kLower);
        if (stopwords_.count(key)) continue;
      }
      kept.push_back(action_ == CaseChange::kNone ? in[k] : EncodeUtf8(Map(*text, action_)));
    }
    if (kept.empty()) kept.emplace_back();
    const int64_t n = static_cast<int64_t>(kept.size());
    ir::Tensor y(DType::kString, two_d ? std::vector<int64_t>{1, n} : std::vector<int64_t>{n});
    y.mutable_strings() = std::move(kept);
    return ctx.SetOutput(0, std::move(y));
  }

 private:
  Status Init(const ir::Node& node) {
    const std::string action = node.GetString("case_change_action", "NONE");
    if (action == "LOWER") {
      action_ = CaseChange::kLower;
    } else if (action == "UPPER") {
      action_ = CaseChange::kUpper;
    } else if (action != "NONE") {
      return InvalidArgument("attribute 'case_change_action' is '", action, "', expected LOWER, UPPER or NONE");
    }
    case_sensitive_ = node.GetInt("is_case_sensitive", 0) != 0;
    locale_ = FindLocale(node.GetString("locale", "en_US"));
    if (const ir::Attribute* a = node.FindAttribute("stopwords")) {
      if (a->type() != ir::AttrType::kStrings) return InvalidArgument("attribute 'stopwords' must be strings");
      for (size_t k = 0; k < a->strings.size(); ++k) {
        std::optional<std::u32string> word = DecodeUtf8(a->strings[k]);
        if (!word) return InvalidArgument("attribute 'stopwords' element ", k, " is not valid UTF-8");
        stopwords_.insert(case_sensitive_ ? *word : Map(*word, CaseChange::kLower));
      }
    }
    return Status::Ok();
  }

  // `s` lowercased or uppercased code point by code point in the kernel's locale (wchar_t holds UTF-32 here).
  std::u32string Map(std::u32string s, CaseChange to) const {
    const auto& ctype = std::use_facet<std::ctype<wchar_t>>(locale_);
    for (char32_t& c : s) {
      const auto w = static_cast<wchar_t>(c);
      c = static_cast<char32_t>(to == CaseChange::kLower ? ctype.tolower(w) : ctype.toupper(w));
    }
    return s;
  }

  CaseChange action_ = CaseChange::kNone;
  bool case_sensitive_ = false;
  std::locale locale_;
  std::set<std::u32string> stopwords_;
};

}  // namespace

void RegisterStringNormalizerKernels(exec::KernelRegistry& r) {
  r.Register({"StringNormalizer",
              "",
              10,
              25,
              exec::Device::kCpu,
              {DType::kString},
              0,
              &exec::MakeKernel<StringNormalizerCpu>});
}

}  // namespace onnxamp::ops
