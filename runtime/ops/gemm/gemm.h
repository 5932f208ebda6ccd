// Gemm's attributes and shape checks, shared by the CPU kernel and device kernels (the same checks and messages on
// every backend).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

// One Gemm problem: Y [M, N] = alpha * op(A) [M, K] * op(B) [K, N] + beta * C.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  std::vector<int64_t> out_dims;   // {M, N}
  std::vector<int64_t> c_strides;  // C read as [M, N] (broadcast strides); empty when C is absent
};

class GemmSpec {
 public:
  // Reads alpha, beta, transA, transB and (before opset 7) broadcast of `info.node`.
  Status Init(const exec::KernelInfo& info);

  // Checks inputs A, B and the optional C of one run (presence by opset, element types, ranks, K, C's shape) and
  // fills `s`.
  Status Resolve(const ir::Tensor* a, const ir::Tensor* b, const ir::Tensor* c, GemmShape* s) const;

  // For integer element types: alpha and beta must be whole numbers inside int64_t's range.
  Status CheckWholeScalars(DType dtype) const;

  float alpha() const { return alpha_; }
  float beta() const { return beta_; }
  bool trans_a() const { return trans_a_; }
  bool trans_b() const { return trans_b_; }

 private:
  int64_t opset_ = 0;
  float alpha_ = 1.0f, beta_ = 1.0f;
  bool trans_a_ = false, trans_b_ = false;
  bool c_must_match_ = false;
};

}  // namespace onnxamp::ops
