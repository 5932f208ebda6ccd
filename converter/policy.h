// Precision policy: which nodes compute in low precision (fp16/bf16), which stay FP32, which follow their
// inputs. The policy is data: a table of op types with per-node overrides, loadable from and printable as JSON.
#pragma once

#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/graph.h"

namespace onnxamp::converter {

enum class Precision {
  kLow,     // compute in the target type (fp16/bf16): MatMul, Gemm, Conv, ...
  kKeep,    // compute in FP32 whatever the inputs (reductions, Softmax, losses, normalisations, ...)
  kFollow,  // take the widest floating type of the inputs (everything else)
};

std::string_view PrecisionName(Precision p);  // "low", "fp32", "follow"
std::optional<Precision> PrecisionFromName(std::string_view name);

// Why a node got its precision, for reports.
struct Decision {
  Precision precision = Precision::kFollow;
  std::string reason;  // "op table: Softmax", "--keep-node 'head/.*'", "auto: output 'y' error 3e-2", ...
};

class PrecisionPolicy {
 public:
  // DESIGN.md's table: low = MatMul Gemm Conv ConvTranspose Einsum; FP32 keep-list = reductions, Softmax,
  // LogSoftmax, losses, normalisations, Exp Log Pow Reciprocal Softplus CumSum Range TopK, ...; all else follows.
  static PrecisionPolicy Default();

  // JSON: {"low": ["MatMul", ...], "keep": ["Softmax", ...], "follow": [...], "keep_nodes": ["regex", ...],
  // "low_nodes": ["regex", ...], "default": "follow"}. Listed op types replace the defaults for those ops;
  // unknown keys and malformed regexes are errors naming the key or pattern and `where` (the file).
  static StatusOr<PrecisionPolicy> FromJson(std::string_view json, const std::string& where);
  static StatusOr<PrecisionPolicy> FromJsonFile(const std::string& path);
  std::string ToJson() const;

  // Overrides (CLI: --keep-op, --force-low-op, --keep-node REGEX, --force-low-node REGEX). Node patterns match
  // the whole node name (std::regex_match, ECMAScript); an invalid pattern is an error naming it.
  void SetOp(const std::string& op_type, Precision p);
  Status AddKeepNodePattern(const std::string& pattern);
  Status AddLowNodePattern(const std::string& pattern);
  // Exact node names kept in FP32 (the auto mode's result); checked before patterns.
  void AddKeepNodeName(const std::string& name);

  // The decision for `node`: exact names, then node patterns (keep wins over low), then the op table, then
  // ScatterND/ScatterElements with a reduction other than "none" (FP32: they accumulate), then the default.
  // Nodes outside the default ONNX domain follow (kFollow) unless listed by name or pattern.
  Decision Decide(const ir::Node& node) const;

  const std::map<std::string, Precision>& op_table() const { return op_table_; }

 private:
  std::map<std::string, Precision> op_table_;
  Precision default_precision_ = Precision::kFollow;
  std::vector<std::pair<std::string, std::regex>> keep_node_patterns_;
  std::vector<std::pair<std::string, std::regex>> low_node_patterns_;
  std::vector<std::string> keep_node_names_;  // sorted
};

}  // namespace onnxamp::converter
