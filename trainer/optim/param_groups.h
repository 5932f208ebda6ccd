// Parameter groups: per-parameter learning-rate factors and weight-decay exclusion, as the param_groups of
// torch.optim that fine-tuning recipes build (no weight decay on biases and normalization scales; a smaller learning
// rate for a pretrained backbone than for a new head). A group's learning rate is its factor times the schedule's at
// every step, as timm's `lr_scale` (so warm-up, decay and --min-lr scale with it); its weight decay is the
// optimizer's, or none.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace onnxamp::trainer {

// `--lr-scale PATTERN=FACTOR`: parameters whose names match PATTERN (ECMAScript regex, searched) train with
// FACTOR (finite, >= 0) times the learning rate.
struct LrScaleRule {
  std::string pattern;
  double factor = 1;
};

struct ParamGroupOptions {
  // Parameters whose names match (ECMAScript regex, searched; "" matches none) get no weight decay.
  std::string no_decay;
  // Parameters of fewer than 2 dims (biases, normalization scales and shifts) get no weight decay (timm's rule).
  bool no_decay_1d = false;
  // The first rule whose pattern matches a parameter's name gives its learning-rate factor; 1 when none matches.
  std::vector<LrScaleRule> lr_scale;

  bool empty() const { return no_decay.empty() && !no_decay_1d && lr_scale.empty(); }
};

// One group's hyperparameters relative to the optimizer's.
struct ParamGroup {
  double lr_scale = 1;
  bool decay = true;  // false: weight decay 0
  bool operator==(const ParamGroup&) const = default;
};

// The groups of a run's parameters: groups[0] is {1, true} (present even when no parameter is in it), the others
// in order of first use; of[i] is parameter i's group.
struct ParamGroups {
  std::vector<ParamGroup> groups{ParamGroup{}};
  std::vector<int32_t> of;

  // One group for `n` parameters: the optimizer's options for all.
  static ParamGroups Single(size_t n);
  // Parameter i's hyperparameters.
  const ParamGroup& at(size_t i) const { return groups[of[i]]; }
};

// Parses "PATTERN=FACTOR" (split at the last '='); the error names the option and the text.
StatusOr<LrScaleRule> ParseLrScaleRule(const std::string& text);

// Assigns the parameters named `names`, of ranks `ranks`, to groups. Fails on an invalid regex or factor (naming the
// option), and on a rule that matches no parameter (a misspelt name would otherwise change nothing silently).
StatusOr<ParamGroups> AssignParamGroups(const ParamGroupOptions& options, const std::vector<std::string>& names,
                                        const std::vector<size_t>& ranks);

// For a log line, the groups that have parameters, e.g. "2 parameter groups: 2 parameters (8320 values) with the
// optimizer's settings; 2 parameters (138 values) without weight decay"; "" when every parameter is in group 0.
std::string DescribeParamGroups(const ParamGroups& groups, const std::vector<int64_t>& numels);

}  // namespace onnxamp::trainer
