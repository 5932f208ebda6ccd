// Einsum equations: parsing ("ij,jk->ik", implicit outputs, "..." ellipsis, repeated labels) and resolving them
// against input shapes into labels and sizes, shared by the reference loop and the GEMM fast path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

// A parsed term: letters as label ids 0..51 (a-z, A-Z), with the ellipsis position (-1 when absent).
struct EinsumTerm {
  std::vector<int> letters;
  int ellipsis_at = -1;  // index in `letters` before which "..." stands
};

struct EinsumEquation {
  std::vector<EinsumTerm> inputs;
  bool explicit_output = false;
  EinsumTerm output;  // meaningful when explicit_output
};

// Parses `equation` (spaces ignored). Errors name the offending character or term.
StatusOr<EinsumEquation> ParseEinsum(const std::string& equation);

// The equation resolved for concrete input shapes. Labels are ids: letters 0..51, ellipsis dims 52.. (one per
// broadcast ellipsis dim, right-aligned across inputs).
struct EinsumPlan {
  int num_labels = 0;                       // ids in [0, num_labels)
  std::vector<int64_t> size;                // per label id: its (broadcast) size
  std::vector<std::vector<int>> in_labels;  // per input: the label of each of its dims
  std::vector<int> out_labels;              // the label of each output dim
  std::vector<int64_t> out_dims;
  bool broadcasts = false;  // some label has size 1 in one input and more elsewhere
};

// Resolves `eq` for inputs of shapes `shapes`: checks ranks against the terms, that a label has one size (or 1,
// broadcast) across inputs and the same size wherever it repeats in one input, and builds the implicit output
// (ellipsis dims, then the letters used exactly once, in ASCII order).
StatusOr<EinsumPlan> PlanEinsum(const EinsumEquation& eq, const std::vector<std::vector<int64_t>>& shapes);

// "a", "B", or "..." for an ellipsis label id: how messages name a label.
std::string EinsumLabelName(int label);

// The equation of an Einsum node: its attribute 'equation' (required, a string), parsed.
StatusOr<EinsumEquation> EinsumEquationOf(const ir::Node& node);

// Checks the inputs of one Einsum run (at least one, none missing, one element type) and returns their element type
// and shapes.
Status EinsumInputs(const exec::KernelContext& ctx, DType* dtype, std::vector<std::vector<int64_t>>* shapes);

}  // namespace onnxamp::ops
