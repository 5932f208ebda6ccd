// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss: attribute parsing and the checks of the scores and labels,
// shared by the CPU kernel (loss_cpu.cc) and device kernels, so that every backend checks the same things with the
// same messages.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

enum class LossReduction { kNone, kSum, kMean };

// The attributes of SoftmaxCrossEntropyLoss (`softmax`) or NegativeLogLikelihoodLoss, and their inputs' names.
struct LossSpec {
  bool softmax = false;
  LossReduction reduction = LossReduction::kMean;
  std::optional<int64_t> ignore_index;

  const char* input_name() const { return softmax ? "input 0 (scores)" : "input 0 (input)"; }
  const char* label_name() const { return softmax ? "input 1 (labels)" : "input 1 (target)"; }
  const char* weight_name() const { return softmax ? "input 2 (weights)" : "input 2 (weight)"; }
};

// Parses `reduction` ('none', 'sum' or 'mean') and `ignore_index`.
Status ParseLossSpec(const exec::KernelInfo& info, bool softmax, LossSpec* spec);

// The scores / log-probabilities as [batch, classes, inner], the labels' shape and the loss output's shape.
struct LossShape {
  int64_t batch = 0;
  int64_t classes = 0;
  int64_t inner = 0;
  std::vector<int64_t> label_dims;  // input 0's dims without dimension 1
  std::vector<int64_t> loss_dims;   // label_dims with reduction 'none', else a scalar
};

// Checks input 0 (rank >= 2) and the labels (present, input 0's shape without dimension 1, int32 or int64).
StatusOr<LossShape> ResolveLossShape(const LossSpec& spec, const ir::Tensor* x, const ir::Tensor* labels);

}  // namespace onnxamp::ops
