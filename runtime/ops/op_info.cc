// OpInfo setters, the OpInfoRegistry lookup and its consistency check.
#include "runtime/ops/op_info.h"

#include <algorithm>

namespace onnxamp::ops {

namespace {

std::string Key(std::string_view domain, std::string_view op_type) {
  if (domain == "ai.onnx") domain = "";
  return domain.empty() ? std::string(op_type) : StrCat(domain, ":", op_type);
}

}  // namespace

OpInfo& OpInfo::Low(std::string reason) {
  precision = DefaultPrecision::kLow;
  precision_reason = std::move(reason);
  return *this;
}

OpInfo& OpInfo::Keep(std::string reason) {
  precision = DefaultPrecision::kKeep;
  precision_reason = std::move(reason);
  return *this;
}

OpInfo& OpInfo::KeepUnlessNone(std::string attribute) {
  keep_unless_none = std::move(attribute);
  return *this;
}

OpInfo& OpInfo::Random() {
  deterministic = false;
  return *this;
}

OpInfo& OpInfo::Decompose(Decomposition d) {
  decompose = d;
  return *this;
}

OpInfo& OpInfo::NoCpuKernel() {
  cpu_kernel = false;
  return *this;
}

OpInfo& OpInfo::NotDifferentiable(std::string reason) {
  not_differentiable = std::move(reason);
  return *this;
}

OpInfo& OpInfo::Gradient(int64_t since, int64_t until, GradientBuilder build) {
  gradients.push_back({since, until, build});
  return *this;
}

OpInfo& OpInfo::GradientFloor(std::string reason) {
  gradient_floor_reason = std::move(reason);
  return *this;
}

OpInfo& OpInfo::NoGradientInputs(std::vector<int> inputs, std::string what) {
  no_gradient_inputs = std::move(inputs);
  no_gradient_inputs_reason = std::move(what);
  return *this;
}

bool OpInfo::NoGradientInput(size_t i) const {
  return std::find(no_gradient_inputs.begin(), no_gradient_inputs.end(), static_cast<int>(i)) !=
         no_gradient_inputs.end();
}

std::string OpInfo::Name() const { return Key(domain, op_type); }

OpInfo& OpInfoRegistry::Add(std::string op_type, std::string domain) {
  OpInfo& info = ops_.emplace_back();
  info.domain = domain == "ai.onnx" ? "" : std::move(domain);
  info.op_type = std::move(op_type);
  index_.emplace(info.Name(), ops_.size() - 1);
  return info;
}

const OpInfo* OpInfoRegistry::Find(std::string_view domain, std::string_view op_type) const {
  auto it = index_.find(Key(domain, op_type));
  return it == index_.end() ? nullptr : &ops_[it->second];
}

bool OpInfoRegistry::TakesGradient(std::string_view domain, std::string_view op_type, size_t input) const {
  const OpInfo* info = Find(domain, op_type);
  return !info || !info->NoGradientInput(input);
}

Status OpInfoRegistry::Check() const {
  std::map<std::string, int> seen;
  for (const OpInfo& info : ops_) {
    const std::string name = info.Name();
    if (info.op_type.empty()) return Internal("OpInfo with an empty op type in domain '", info.domain, "'");
    if (++seen[name] > 1) return Internal("OpInfo ", name, ": registered twice");
    for (size_t i = 0; i < info.gradients.size(); ++i) {
      const GradientDef& a = info.gradients[i];
      if (a.build == nullptr) return Internal("OpInfo ", name, ": a gradient builder is null");
      if (a.since < 1 || a.since > a.until) {
        return Internal("OpInfo ", name, ": empty gradient builder range ", a.since, "-", a.until);
      }
      for (size_t j = 0; j < i; ++j) {
        const GradientDef& b = info.gradients[j];
        if (a.since <= b.until && b.since <= a.until) {
          return Internal("OpInfo ", name, ": gradient builder ranges ", b.since, "-", b.until, " and ", a.since, "-",
                          a.until, " overlap");
        }
      }
    }
    if (!info.gradients.empty() && !info.not_differentiable.empty()) {
      return Internal("OpInfo ", name, ": has gradient builders but is marked not differentiable (",
                      info.not_differentiable, ")");
    }
    if (info.decompose && (!info.gradients.empty() || !info.not_differentiable.empty())) {
      return Internal("OpInfo ", name, ": a decomposition beside gradient builders or a not-differentiable reason");
    }
    if (!info.gradient_floor_reason.empty()) {
      int64_t floor = INT64_MAX;
      for (const GradientDef& def : info.gradients) floor = std::min(floor, def.since);
      if (floor <= kOldestTrainedOpset) {
        return Internal("OpInfo ", name, ": a gradient floor reason, but its builders start at opset ",
                        floor == INT64_MAX ? std::string("none") : StrCat(floor));
      }
    }
    const bool table = info.precision != DefaultPrecision::kFollow;
    if (table == info.precision_reason.empty()) {
      return Internal("OpInfo ", name,
                      table ? ": a default precision without a reason"
                            : ": a precision reason, "
                              "but the op follows");
    }
    if (!info.no_gradient_inputs.empty()) {
      if (info.gradients.empty()) return Internal("OpInfo ", name, ": inputs without gradient, but no builders");
      if (info.no_gradient_inputs_reason.empty()) return Internal("OpInfo ", name, ": inputs without gradient unnamed");
      for (int i : info.no_gradient_inputs) {
        if (i < 0) return Internal("OpInfo ", name, ": input without gradient ", i);
      }
    }
    if (!info.domain.empty() && (table || !info.keep_unless_none.empty())) {
      return Internal("OpInfo ", name, ": a default precision outside the ONNX domain (the policy lets it follow)");
    }
    if (table && !info.keep_unless_none.empty()) {
      return Internal("OpInfo ", name, ": keep_unless_none on an op the table already classifies");
    }
  }
  return Status::Ok();
}

}  // namespace onnxamp::ops
