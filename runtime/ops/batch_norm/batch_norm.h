// BatchNormalization: attribute parsing (modes by opset) and the [batch, params, run] view of X, shared by the CPU
// kernel (batch_norm_cpu.cc) and device kernels, so that every backend takes the same modes with the same messages.
#pragma once

#include <cstdint>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

// BatchNormalization's attributes as they apply at the node's opset.
struct BatchNormSpec {
  int64_t opset = 0;
  float epsilon = 1e-5f;
  float momentum = 0.9f;
  bool spatial = true;    // per channel (false: per channel and position, `spatial` = 0 before opset 9)
  bool training = false;  // training_mode = 1 (opset 14+), or outputs beyond Y requested (before 14)
};

// Parses and checks the attributes and the outputs requested (see batch_norm_cpu.cc for the modes).
Status ParseBatchNormSpec(const exec::KernelInfo& info, BatchNormSpec* spec);

// X viewed as [batch, params, run]: each of `params` channels (or channel positions) owns runs of `run` values.
struct BatchNormShape {
  int64_t batch = 0;
  int64_t params = 0;
  int64_t run = 0;
};

// The view of input 0 (X, rank >= 2 [N, C, ...]); refused when X is missing or of rank < 2.
StatusOr<BatchNormShape> ResolveBatchNormShape(const ir::Tensor* x, const BatchNormSpec& spec);

}  // namespace onnxamp::ops
