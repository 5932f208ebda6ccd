// Pad: attribute parsing, the per-run pads and output dims, the per-axis source maps, and the fill value of opsets
// 1-10, shared by the CPU kernel, device kernels and the kernel of com.onnxamp PadGrad (same checks, same messages).
//
// See pad_cpu.cc for the semantics.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::ops {

enum class PadMode { kConstant, kEdge, kReflect, kWrap };

// One run's pads per input dim (negative: crop), the output dims, and the constant_value input (null when absent
// or empty: the fill is then the `value` attribute of opsets 1-10, or zero).
struct PadShape {
  std::vector<int64_t> begin, end;
  std::vector<int64_t> out_dims;
  const ir::Tensor* value = nullptr;
};

// The pads of a tensor of shape `dims` from `pads` ([begin..., end...] for `axes`; null: every axis in order) and the
// output dims. InvalidArgument (or OutOfRange) on wrong lengths, a bad or repeated axis, or pads that cannot apply
// in `mode`.
StatusOr<PadShape> ResolvePadShape(std::span<const int64_t> dims, const std::vector<int64_t>& pads,
                                   const std::vector<int64_t>* axes, PadMode mode);

// The input index each output index of one axis reads (-1: the fill value of constant mode), for an axis of size
// `dim` padded by `begin` and `end` (checked by ResolvePadShape; negative pads crop that side first).
std::vector<int64_t> PadAxisMap(int64_t dim, int64_t begin, int64_t end, PadMode mode);

// The parsed attributes of one Pad node.
class PadSpec {
 public:
  // Reads `mode` and, before opset 11, the `paddings`/`pads` and `value` attributes (InvalidArgument when the
  // mode is unknown or the pads are missing).
  Status Parse(const ir::Node& node, int64_t opset);

  // The pads of `x` (input 0) for this run, from the attributes or the host inputs pads/constant_value/axes, and
  // the output dims. InvalidArgument (or OutOfRange) on wrong lengths or types, or pads that cannot apply.
  StatusOr<PadShape> Resolve(const exec::KernelContext& ctx, const ir::Tensor& x) const;

  PadMode mode() const { return mode_; }
  // The float `value` attribute of opsets 1-10 (0 from opset 11).
  float value_attr() const { return value_attr_; }

 private:
  int64_t opset_ = 0;
  PadMode mode_ = PadMode::kConstant;
  std::vector<int64_t> pads_attr_;
  float value_attr_ = 0.0f;
};

// Writes `value` as one element of `dtype` (a numeric or bool type) to `dst`, which must hold that many bytes.
Status StorePadValue(DType dtype, float value, void* dst);

}  // namespace onnxamp::ops
