// Auto mode: the fewest FP32 nodes such that every output of the converted model stays within tolerance of the
// FP32 model on the sample inputs. Searches by per-node sensitivity and bisection, never one run per node.
#pragma once

#include <string>
#include <vector>

#include "converter/convert.h"
#include "runtime/ir/model.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::converter {

struct AutoOptions {
  double rtol = 1e-2;
  double atol = 1e-3;
  int num_threads = 0;  // CPU runtime threads (0: all)
  int max_runs = 200;   // upper bound on candidate evaluations
};

struct OutputError {
  std::string name;
  double max_abs = 0;       // max |candidate - fp32|
  double max_rel = 0;       // max |candidate - fp32| / |fp32| over elements with |fp32| > atol
  double worst_excess = 0;  // max over elements of |diff| - (atol + rtol*|fp32|); <= 0 means within tolerance
  bool nonfinite = false;   // candidate has NaN/inf where FP32 has none
};

struct AutoResult {
  std::vector<KeptNode> kept;       // nodes forced to FP32 by the search, with the reason
  std::vector<OutputError> errors;  // of the final model
  int candidate_runs = 0;
  double seconds = 0;
  bool within_tolerance = false;  // false only if even the all-FP32-except-policy-low fails
};

// `samples`: one or more input sets (each matched to graph inputs by name). On success `model` holds the
// converted model and `options.policy` has gained the kept node names.
Status AutoConvert(ir::Model& model, const std::vector<std::vector<ir::Tensor>>& samples, ConvertOptions& options,
                   const AutoOptions& auto_options, AutoResult* result, ConvertReport* report = nullptr);

}  // namespace onnxamp::converter
