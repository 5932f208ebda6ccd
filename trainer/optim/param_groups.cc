// Parameter groups (param_groups.h).
#include "trainer/optim/param_groups.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <regex>

namespace onnxamp::trainer {
namespace {

StatusOr<std::regex> CompilePattern(const std::string& pattern, const std::string& option) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return InvalidArgument(option, " '", pattern, "': not a valid regular expression: ", e.what());
  }
}

}  // namespace

ParamGroups ParamGroups::Single(size_t n) {
  ParamGroups g;
  g.of.assign(n, 0);
  return g;
}

StatusOr<LrScaleRule> ParseLrScaleRule(const std::string& text) {
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument("--lr-scale '", text, "': expected PATTERN=FACTOR");
  }
  LrScaleRule rule;
  rule.pattern = text.substr(0, eq);
  const std::string number = text.substr(eq + 1);
  char* end = nullptr;
  rule.factor = number.empty() ? NAN : std::strtod(number.c_str(), &end);
  if (number.empty() || *end != '\0' || !std::isfinite(rule.factor) || rule.factor < 0) {
    return InvalidArgument("--lr-scale '", text, "': the factor '", number, "' is not a finite number >= 0");
  }
  return rule;
}

StatusOr<LayerAssignment> AssignLayers(const ParamGroupOptions& options, const std::vector<std::string>& names,
                                       const std::vector<int64_t>& first_use) {
  if (first_use.size() != names.size()) {
    return Internal("layer decay: ", names.size(), " names, ", first_use.size(), " first uses");
  }
  ONNXAMP_ASSIGN_OR_RETURN(std::regex re, CompilePattern(options.layer_pattern, "--layer-pattern"));
  if (re.mark_count() < 1) {
    return InvalidArgument("--layer-pattern '", options.layer_pattern, "': needs a capture group for the block index");
  }
  std::vector<std::optional<int64_t>> index(names.size());
  std::vector<int64_t> blocks;
  for (size_t i = 0; i < names.size(); ++i) {
    std::smatch m;
    if (!std::regex_search(names[i], m, re) || !m[1].matched) continue;
    const std::string digits = m[1].str();
    char* end = nullptr;
    const long long v = std::strtoll(digits.c_str(), &end, 10);
    if (digits.empty() || *end != '\0' || v < 0) {
      return InvalidArgument("--layer-pattern '", options.layer_pattern, "': captured '", digits, "' in '", names[i],
                             "', not a block index");
    }
    index[i] = v;
    blocks.push_back(v);
  }
  if (blocks.empty()) {
    return InvalidArgument("--layer-decay: no trained parameter's name matches the layer pattern '",
                           options.layer_pattern, "' (give the blocks' naming with --layer-pattern)");
  }
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  int64_t first_block_use = INT64_MAX;
  for (size_t i = 0; i < names.size(); ++i) {
    if (index[i]) first_block_use = std::min(first_block_use, first_use[i]);
  }
  LayerAssignment out;
  out.blocks = static_cast<int64_t>(blocks.size());
  out.layer.resize(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    if (index[i]) {
      out.layer[i] = (std::lower_bound(blocks.begin(), blocks.end(), *index[i]) - blocks.begin()) + 1;
    } else {
      out.layer[i] = first_use[i] < first_block_use ? 0 : out.blocks + 1;
    }
  }
  return out;
}

StatusOr<ParamGroups> AssignParamGroups(const ParamGroupOptions& options, const std::vector<std::string>& names,
                                        const std::vector<size_t>& ranks, const std::vector<int64_t>& first_use) {
  if (ranks.size() != names.size())
    return Internal("parameter groups: ", names.size(), " names, ", ranks.size(), " ranks");
  if (!(options.layer_decay >= 0.0 && options.layer_decay <= 1.0)) {
    return InvalidArgument("--layer-decay ", options.layer_decay, ": expected a factor in (0, 1]");
  }
  std::optional<LayerAssignment> layers;
  if (options.layer_decay > 0) {
    ONNXAMP_ASSIGN_OR_RETURN(layers, AssignLayers(options, names, first_use));
  }
  ParamGroups out = ParamGroups::Single(names.size());
  std::optional<std::regex> no_decay;
  if (!options.no_decay.empty()) {
    ONNXAMP_ASSIGN_OR_RETURN(no_decay, CompilePattern(options.no_decay, "--no-decay"));
  }
  std::vector<std::regex> scales;
  for (const LrScaleRule& rule : options.lr_scale) {
    if (!std::isfinite(rule.factor) || rule.factor < 0) {
      return InvalidArgument("--lr-scale '", rule.pattern, "=", rule.factor, "': the factor must be finite and >= 0");
    }
    ONNXAMP_ASSIGN_OR_RETURN(std::regex re, CompilePattern(rule.pattern, "--lr-scale"));
    scales.push_back(std::move(re));
  }
  bool no_decay_used = false;
  std::vector<bool> rule_used(scales.size(), false);
  for (size_t i = 0; i < names.size(); ++i) {
    ParamGroup g;
    if (no_decay && std::regex_search(names[i], *no_decay)) {
      g.decay = false;
      no_decay_used = true;
    }
    if (options.no_decay_1d && ranks[i] < 2) g.decay = false;
    for (size_t r = 0; r < scales.size(); ++r) {
      if (!std::regex_search(names[i], scales[r])) continue;
      g.lr_scale = options.lr_scale[r].factor;
      rule_used[r] = true;
      break;
    }
    if (layers) {
      // timm's layer_scales[k] = decay ** (num_layers - k) with num_layers = B + 1, in double.
      g.lr_scale *= std::pow(options.layer_decay, static_cast<double>(layers->blocks + 1 - layers->layer[i]));
    }
    size_t k = 0;
    while (k < out.groups.size() && !(out.groups[k] == g)) ++k;
    if (k == out.groups.size()) out.groups.push_back(g);
    out.of[i] = static_cast<int32_t>(k);
  }
  if (no_decay && !no_decay_used) {
    return InvalidArgument("--no-decay '", options.no_decay, "': matches no trained parameter");
  }
  for (size_t r = 0; r < scales.size(); ++r) {
    if (!rule_used[r]) {
      return InvalidArgument("--lr-scale '", options.lr_scale[r].pattern, "': matches no trained parameter",
                             r > 0 ? " that an earlier --lr-scale did not take" : "");
    }
  }
  return out;
}

std::string DescribeParamGroups(const ParamGroups& groups, const std::vector<int64_t>& numels) {
  std::vector<int64_t> params(groups.groups.size(), 0), values(groups.groups.size(), 0);
  for (size_t i = 0; i < groups.of.size(); ++i) {
    ++params[groups.of[i]];
    values[groups.of[i]] += i < numels.size() ? numels[i] : 0;
  }
  const auto used = std::count_if(params.begin(), params.end(), [](int64_t n) { return n > 0; });
  if (used <= 1 && (params.empty() || params[0] == static_cast<int64_t>(groups.of.size()))) return "";
  std::string out = StrCat(used, used == 1 ? " parameter group" : " parameter groups");
  const char* sep = ": ";
  for (size_t k = 0; k < groups.groups.size(); ++k) {
    if (params[k] == 0) continue;
    const ParamGroup& g = groups.groups[k];
    std::string what;
    if (g.lr_scale != 1) what = StrCat("at ", g.lr_scale, "x the learning rate");
    if (!g.decay) what += what.empty() ? "without weight decay" : " without weight decay";
    if (what.empty()) what = "with the optimizer's settings";
    out += StrCat(sep, params[k], params[k] == 1 ? " parameter (" : " parameters (", values[k], " values) ", what);
    sep = "; ";
  }
  return out;
}

}  // namespace onnxamp::trainer
