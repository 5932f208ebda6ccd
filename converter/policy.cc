// Precision policy: the default op table (DESIGN.md; each op's class is in its OpInfo, runtime/ops/op_info.h),
// per-op and per-node overrides, and its JSON form.
#include "converter/policy.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/ir/model.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::converter {

namespace {

StatusOr<std::regex> CompilePattern(const std::string& pattern) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return InvalidArgument("invalid node pattern '", pattern, "': ", e.what());
  }
}

}  // namespace

std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kLow:
      return "low";
    case Precision::kKeep:
      return "fp32";
    case Precision::kFollow:
      return "follow";
  }
  return "follow";
}

std::optional<Precision> PrecisionFromName(std::string_view name) {
  if (name == "low" || name == "fp16" || name == "bf16") return Precision::kLow;
  if (name == "fp32" || name == "keep") return Precision::kKeep;
  if (name == "follow") return Precision::kFollow;
  return std::nullopt;
}

PrecisionPolicy PrecisionPolicy::Default() {
  PrecisionPolicy p;
  for (const ops::OpInfo& info : ops::OpInfoRegistry::Global().ops()) {
    if (!info.domain.empty() || info.precision == ops::DefaultPrecision::kFollow) continue;
    p.op_table_[info.op_type] = info.precision == ops::DefaultPrecision::kLow ? Precision::kLow : Precision::kKeep;
  }
  return p;
}

void PrecisionPolicy::SetOp(const std::string& op_type, Precision p) { op_table_[op_type] = p; }

Status PrecisionPolicy::AddKeepNodePattern(const std::string& pattern) {
  ONNXAMP_ASSIGN_OR_RETURN(std::regex re, CompilePattern(pattern));
  keep_node_patterns_.emplace_back(pattern, std::move(re));
  return Status::Ok();
}

Status PrecisionPolicy::AddLowNodePattern(const std::string& pattern) {
  ONNXAMP_ASSIGN_OR_RETURN(std::regex re, CompilePattern(pattern));
  low_node_patterns_.emplace_back(pattern, std::move(re));
  return Status::Ok();
}

void PrecisionPolicy::AddKeepNodeName(const std::string& name) {
  auto it = std::lower_bound(keep_node_names_.begin(), keep_node_names_.end(), name);
  if (it == keep_node_names_.end() || *it != name) keep_node_names_.insert(it, name);
}

Decision PrecisionPolicy::Decide(const ir::Node& node) const {
  const std::string& name = node.name();
  if (!name.empty() && std::binary_search(keep_node_names_.begin(), keep_node_names_.end(), name)) {
    return {Precision::kKeep, "node name '" + name + "'"};
  }
  if (!name.empty()) {
    for (const auto& [pattern, re] : keep_node_patterns_) {
      if (std::regex_match(name, re)) return {Precision::kKeep, "--keep-node '" + pattern + "'"};
    }
    for (const auto& [pattern, re] : low_node_patterns_) {
      if (std::regex_match(name, re)) return {Precision::kLow, "--force-low-node '" + pattern + "'"};
    }
  }
  if (!ir::IsDefaultDomain(node.domain())) return {Precision::kFollow, "domain '" + node.domain() + "'"};
  auto it = op_table_.find(node.op_type());
  if (it != op_table_.end()) return {it->second, "op table: " + node.op_type()};
  // An attribute that keeps the op in FP32 when set (ScatterND / ScatterElements with a reduction accumulate into
  // their data: ONNX Runtime's CPU provider has no fp16/bf16 kernels for them either).
  const ops::OpInfo* info = ops::OpInfoRegistry::Global().Find("", node.op_type());
  if (info && !info->keep_unless_none.empty()) {
    const std::string value = node.GetString(info->keep_unless_none, "none");
    if (value != "none")
      return {Precision::kKeep, node.op_type() + " with " + info->keep_unless_none + "='" + value + "'"};
  }
  return {default_precision_, "default"};
}

StatusOr<PrecisionPolicy> PrecisionPolicy::FromJson(std::string_view json, const std::string& where) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument(where, ": not valid JSON");
  if (!doc.is_object()) return InvalidArgument(where, ": expected a JSON object, got ", doc.type_name());
  PrecisionPolicy policy = Default();
  auto string_list = [&](const std::string& key, std::vector<std::string>* out) -> Status {
    const nlohmann::json& v = doc[key];
    if (!v.is_array()) return InvalidArgument(where, ": key '", key, "': expected an array of strings");
    for (const auto& e : v) {
      if (!e.is_string()) return InvalidArgument(where, ": key '", key, "': expected strings, got ", e.type_name());
      out->push_back(e.get<std::string>());
    }
    return Status::Ok();
  };
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& key = it.key();
    std::vector<std::string> items;
    if (key == "low" || key == "keep" || key == "follow") {
      ONNXAMP_RETURN_IF_ERROR(string_list(key, &items));
      const Precision p = *PrecisionFromName(key);
      for (const auto& op : items) policy.SetOp(op, p);
    } else if (key == "keep_nodes" || key == "low_nodes") {
      ONNXAMP_RETURN_IF_ERROR(string_list(key, &items));
      for (const auto& pattern : items) {
        Status s = key == "keep_nodes" ? policy.AddKeepNodePattern(pattern) : policy.AddLowNodePattern(pattern);
        if (!s.ok()) return s.WithContext(where + ": key '" + key + "'");
      }
    } else if (key == "keep_node_names") {
      ONNXAMP_RETURN_IF_ERROR(string_list(key, &items));
      for (const auto& n : items) policy.AddKeepNodeName(n);
    } else if (key == "default") {
      if (!it.value().is_string()) return InvalidArgument(where, ": key 'default': expected a string");
      auto p = PrecisionFromName(it.value().get<std::string>());
      if (!p) {
        return InvalidArgument(where, ": key 'default': expected \"low\", \"fp32\" or \"follow\", got \"",
                               it.value().get<std::string>(), "\"");
      }
      policy.default_precision_ = *p;
    } else {
      return InvalidArgument(where, ": unknown key '", key,
                             "' (expected low, keep, follow, keep_nodes, low_nodes, keep_node_names, default)");
    }
  }
  return policy;
}

StatusOr<PrecisionPolicy> PrecisionPolicy::FromJsonFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    return InvalidArgument(path, ": the policy file is not a regular file");  // an open would wait on a FIFO
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path, ": cannot open the policy file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return FromJson(ss.str(), path);
}

std::string PrecisionPolicy::ToJson() const {
  nlohmann::json doc;
  nlohmann::json low = nlohmann::json::array(), keep = nlohmann::json::array(), follow = nlohmann::json::array();
  for (const auto& [op, p] : op_table_) {
    (p == Precision::kLow ? low : p == Precision::kKeep ? keep : follow).push_back(op);
  }
  doc["low"] = low;
  doc["keep"] = keep;
  doc["follow"] = follow;
  nlohmann::json keep_nodes = nlohmann::json::array(), low_nodes = nlohmann::json::array();
  for (const auto& [pattern, re] : keep_node_patterns_) keep_nodes.push_back(pattern);
  for (const auto& [pattern, re] : low_node_patterns_) low_nodes.push_back(pattern);
  doc["keep_nodes"] = keep_nodes;
  doc["low_nodes"] = low_nodes;
  doc["keep_node_names"] = keep_node_names_;
  doc["default"] = std::string(PrecisionName(default_precision_));
  return doc.dump(2);
}

}  // namespace onnxamp::converter
