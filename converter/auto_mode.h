// Auto mode: the fewest FP32 nodes such that every output of the converted model stays within tolerance of the
// FP32 model on the sample inputs. Searches by per-node sensitivity and bisection, never one run per node.
#pragma once

#include <string>
#include <vector>

#include "converter/convert.h"
#include "runtime/executor/session.h"
#include "runtime/ir/model.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::converter {

struct AutoOptions {
  double rtol = 1e-2;
  double atol = 1e-3;
  int num_threads = 0;  // CPU runtime threads (0: all)
  int max_runs = 200;   // upper bound on candidate evaluations
  // The options of the CPU sessions that run the model and each candidate (graph optimization, linalg
  // implementation); their num_threads is the field above.
  exec::SessionOptions session = {};
};

// How one graph output of a candidate compares with the FP32 model, over every sample. An element is within
// tolerance when |candidate - fp32| <= atol_used + rtol * |fp32|. atol_used is atol, except for a floating output
// whose every |fp32| value (over all samples) lies below atol: there atol alone would accept anything, all zeros
// included, so the output is judged at its own scale, atol_used = atol * max|fp32| (below_atol is set and the
// result carries a warning): the verdict is the one the same output scaled to max|fp32| = 1 would get.
struct OutputError {
  std::string name;
  double max_abs = 0;       // max |candidate - fp32|
  double max_rel = 0;       // max |candidate - fp32| / |fp32| over elements with |fp32| > atol_used
  double worst_excess = 0;  // max over elements of |diff| - (atol_used + rtol*|fp32|); <= 0 means within tolerance
  bool nonfinite = false;   // candidate has NaN/inf where FP32 has none
  bool all_zero = false;    // on some sample the candidate is entirely zero where FP32 is not: fails whatever the
                            // tolerances
  double scale = 0;         // max |fp32| over the finite values of every sample
  double atol_used = 0;     // the absolute tolerance applied (see above)
  bool below_atol = false;  // every |fp32| < atol: judged with atol_used = atol * scale
};

struct AutoResult {
  std::vector<KeptNode> kept;       // nodes forced to FP32 by the search, with the reason
  std::vector<OutputError> errors;  // of the final model
  int candidate_runs = 0;
  double seconds = 0;
  bool within_tolerance = false;  // false only if even the all-FP32-except-policy-low fails
  // One line per output judged at its own scale (OutputError::below_atol), saying so; for the summary and report.
  std::vector<std::string> warnings;
};

// Gives every unnamed top-level node a name ("<OpType>_<i>", unique among node names), so that a policy can keep it
// by name.
void NameUnnamedNodes(ir::Graph& graph);

// A copy of `model` whose every top-level node output is a graph output too (after the model's own outputs), so that
// one run shows every FP32 intermediate value.
ir::Model WithIntermediateOutputs(const ir::Model& model);

// `samples`: one or more input sets (each matched to graph inputs by name). On success `model` holds the
// converted model and `options.policy` has gained the kept node names.
Status AutoConvert(ir::Model& model, const std::vector<std::vector<ir::Tensor>>& samples, ConvertOptions& options,
                   const AutoOptions& auto_options, AutoResult* result, ConvertReport* report = nullptr);

}  // namespace onnxamp::converter
