// GroupNormalization and InstanceNormalization (a group per channel): attribute parsing and the grouping of X's
// channels, shared by the CPU kernels (group_norm_cpu.cc, instance_norm_cpu.cc) and device kernels, so that every
// backend checks the same things with the same messages.
#pragma once

#include <cstdint>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

// The attributes of GroupNormalization, or of InstanceNormalization (`instance`).
struct GroupNormSpec {
  bool instance = false;    // InstanceNormalization: one group per channel, inputs named as it names them
  bool per_channel = true;  // scale and bias per channel ([C]); false: per group (GroupNormalization 18-20)
  float epsilon = 1e-5f;
  int64_t groups = 0;  // `num_groups` (GroupNormalization)

  const char* x_name() const { return instance ? "input 0 (input)" : "input 0 (X)"; }
  const char* scale_name() const { return "input 1 (scale)"; }
  const char* bias_name() const { return instance ? "input 2 (B)" : "input 2 (bias)"; }
};

// Parses `epsilon`, and for GroupNormalization `num_groups` (positive) and `stash_type` (opset 21+: 1 only).
Status ParseGroupNormSpec(const exec::KernelInfo& info, bool instance, GroupNormSpec* spec);

// X ([N, C, D1..Dk]) as `batch` samples of `groups` groups of `channels_per_group` channels of `run` values.
struct GroupNormShape {
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t groups = 0;
  int64_t channels_per_group = 0;
  int64_t run = 0;
  int64_t param_count = 0;  // elements of scale and bias: channels, or groups
};

// The grouping of input 0; refused when it is missing, of rank < 2, or its channels do not divide into the groups.
StatusOr<GroupNormShape> ResolveGroupNormShape(const GroupNormSpec& spec, const ir::Tensor* x);

// GroupNormalizationGrad (com.onnxamp, runtime/ops/gradient_ops.h): `num_groups` (0: a group per channel, which
// needs per_channel = 1), `per_channel` and `epsilon`. `spec` is filled in even when an error is returned.
Status ParseGroupNormGradSpec(const exec::KernelInfo& info, GroupNormSpec* spec);

// GroupNormalizationGrad's dY (input 0, present, X's type and shape) and the grouping of X (input 1).
StatusOr<GroupNormShape> ResolveGroupNormGradShape(const GroupNormSpec& spec, const ir::Tensor* dy,
                                                   const ir::Tensor* x);

}  // namespace onnxamp::ops
