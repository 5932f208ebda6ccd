// Range rules: nodes kept in FP32 because of the magnitudes they meet, the rules NVIDIA's ONNX AutoCast classifies
// nodes by (its initializer-range, I/O-range and depth-of-reduction rules), beside the policy's op table and the auto
// mode's error-driven search. `onnxamp convert --init-max X --data-max X --max-reduction-depth N [--data FILE]`.
#pragma once

#include <cstdint>
#include <vector>

#include "converter/convert.h"
#include "converter/policy.h"
#include "runtime/common/status.h"
#include "runtime/executor/session.h"
#include "runtime/ir/model.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::converter {

struct RangeRuleOptions {
  // > 0: keep FP32 every node that reads a floating initializer (or Constant) holding a magnitude above it; FP16
  // would clamp values above 65504 (AutoCast's --init_max, 65504 by default there).
  double init_max = 0;
  // > 0: keep FP32 every node one of whose floating inputs or outputs reaches a magnitude above it on the sample
  // inputs (AutoCast's --data_max, 512 by default there). Needs samples.
  double data_max = 0;
  // > 0: keep FP32 every MatMul, Gemm and Conv whose outputs each sum more products than this (K; for a convolution
  // input channels per group x kernel size), with the shapes of the first sample set or, without samples, the
  // static ones (AutoCast's --max_depth_of_reduction).
  int64_t max_reduction_depth = 0;
  int num_threads = 0;                // CPU runtime threads for the sample runs (0: all)
  exec::SessionOptions session = {};  // their other options (num_threads is the field above)

  // No rule asked for (a negative or NaN value is asked for, and refused by ApplyRangeRules).
  bool empty() const { return init_max == 0 && data_max == 0 && max_reduction_depth == 0; }
};

// Names the unnamed top-level nodes of `model` ("<OpType>_<i>", as the auto mode does, so that a policy can keep
// them by name) and returns the top-level nodes the rules keep in FP32 that `policy` does not keep already, each
// once, with the first rule that keeps it as the reason. Errors: a negative or NaN option, data_max without samples,
// a sample set the FP32 model does not run on.
StatusOr<std::vector<KeptNode>> ApplyRangeRules(ir::Model& model, const PrecisionPolicy& policy,
                                                const std::vector<std::vector<ir::Tensor>>& samples,
                                                const RangeRuleOptions& options);

}  // namespace onnxamp::converter
