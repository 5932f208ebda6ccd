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
  // Layer-wise learning-rate decay (timm's param_groups_layer_decay, the LLRD of BERT/BEiT/ViT fine-tuning recipes),
  // in (0, 1]; 0: none. The blocks are the distinct integers that layer_pattern's first capture group finds in the
  // parameters' names (numbered 1..B in increasing order); a parameter outside every block is layer 0 (the
  // embeddings) when the graph uses it before the first block's, else layer B + 1 (the head). Layer k trains at
  // layer_decay ** (B + 1 - k) times the learning rate, times its --lr-scale factor.
  double layer_decay = 0;
  std::string layer_pattern = kDefaultLayerPattern;

  // The default: "layer3.", "layers.3.", "blocks.3.", "block_3/", "stages.3.", "h.3." (ResNet stages, BERT, LLaMA,
  // timm ViT blocks, GPT-2).
  static constexpr const char* kDefaultLayerPattern = "(?:^|[._/])(?:layers?|blocks?|stages?|h)[._/]?(\\d+)(?:[._/]|$)";

  bool empty() const { return no_decay.empty() && !no_decay_1d && lr_scale.empty() && layer_decay == 0; }
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

// Assigns the parameters named `names`, of ranks `ranks`, to groups; `first_use` (one per parameter, or empty when
// options.layer_decay is 0) orders them as the graph first reads them (layer decay's embeddings and head). Fails on an
// invalid regex or factor (naming the option), on a rule that matches no parameter (a misspelt name would otherwise
// change nothing silently), and on a layer decay whose pattern finds no block.
StatusOr<ParamGroups> AssignParamGroups(const ParamGroupOptions& options, const std::vector<std::string>& names,
                                        const std::vector<size_t>& ranks, const std::vector<int64_t>& first_use = {});

// The layer of each parameter under options.layer_decay (see ParamGroupOptions), and the number of blocks B: layers
// are 0..B+1. Fails as AssignParamGroups does.
struct LayerAssignment {
  std::vector<int64_t> layer;
  int64_t blocks = 0;
};
StatusOr<LayerAssignment> AssignLayers(const ParamGroupOptions& options, const std::vector<std::string>& names,
                                       const std::vector<int64_t>& first_use);

// For a log line, the groups that have parameters, e.g. "2 parameter groups: 2 parameters (8320 values) with the
// optimizer's settings; 2 parameters (138 values) without weight decay"; "" when every parameter is in group 0.
std::string DescribeParamGroups(const ParamGroups& groups, const std::vector<int64_t>& numels);

}  // namespace onnxamp::trainer
