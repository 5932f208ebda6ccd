// Dropout's attributes and per-run ratio/training mode, shared by the CPU kernel and device kernels (which give the
// same messages and, through dropout_mask.h, the same mask).
#pragma once

#include <cstdint>
#include <optional>

#include "runtime/common/random.h"
#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

// What a Dropout node says, by opset: 1-6 attributes is_test and ratio (mask of type T); 7-9 ratio, inference only
// (mask T); 10-11 mask bool; 12-23 optional inputs ratio and training_mode, attribute seed. The train graphs of
// models before opset 12 set is_test = 0 on opsets 7-11 too (Dropout-6's attribute, which the ONNX files of those
// opsets cannot carry): training mode there (trainer/graph/training_graph.cc).
class DropoutSpec {
 public:
  // Reads the attributes of `info.node` at `info.opset`; an error names the attribute, expected and got.
  Status Init(const exec::KernelInfo& info);

  // The data input (required), ratio and training mode of one run: the attributes before opset 12, inputs 1 (ratio)
  // and 2 (training_mode) from 12 (defaults 0.5 and false), with the input checks.
  Status Resolve(const exec::KernelContext& ctx, const ir::Tensor** x, double* ratio, bool* training) const;

  // The mask's element type: the data type before opset 10, bool after.
  DType MaskType(DType data) const { return opset_ < 10 ? data : DType::kBool; }

  // The mask's seed: attribute `seed` when the node has one (mixed with the run's RunOptions::rng_step, so that a
  // training loop still draws a new mask every step), otherwise the session's per-node, per-run seed.
  uint64_t Seed(const exec::KernelContext& ctx) const {
    return seed_ ? SeedForStep(static_cast<uint64_t>(*seed_), ctx.rng_step()) : ctx.seed();
  }

 private:
  int64_t opset_ = 0;
  double attr_ratio_ = 0.5;
  bool attr_training_ = false;
  std::optional<int64_t> seed_;
};

}  // namespace onnxamp::ops
