// Trilu's attribute and per-run checks (rank, the optional k input, the matrix geometry), shared by the CPU kernel
// (trilu_cpu.cc) and the CUDA kernel (runtime/cuda/ops/tensor/layout_ops_cuda.cc): same checks, same messages. See
// trilu_cpu.cc for the semantics.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

// The attribute `upper` (default 1): true for the upper triangle; InvalidArgument unless 0 or 1.
inline StatusOr<bool> ParseTriluUpper(const ir::Node& node) {
  ONNXAMP_ASSIGN_OR_RETURN(const int64_t u, IntAttribute(node, "upper", 1));
  if (u != 0 && u != 1) return InvalidArgument("attribute 'upper' must be 0 or 1, got ", u);
  return u == 1;
}

// One Trilu run: the diagonal offset k and the input as `matrices` matrices of rows x cols.
struct TriluShape {
  int64_t k = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t matrices = 0;
};

// Checks that x has rank >= 2 and reads k (input 1, optional: one int64 value, default 0).
inline StatusOr<TriluShape> ResolveTrilu(const exec::KernelContext& ctx, const ir::Tensor& x) {
  if (x.rank() < 2) return InvalidArgument("input 0 (input) has rank ", x.rank(), ", expected at least 2");
  TriluShape s;
  if (const ir::Tensor* kt = ctx.input(1)) {
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> ks, ReadInt64s(*kt, InputLabel(ctx, 1, "k"), true));
    if (ks.size() != 1) return InvalidArgument(InputLabel(ctx, 1, "k"), " must hold one value, got ", ks.size());
    s.k = ks[0];
  }
  s.rows = x.dims()[x.dims().size() - 2];
  s.cols = x.dims()[x.dims().size() - 1];
  s.matrices = s.rows * s.cols == 0 ? 0 : x.num_elements() / (s.rows * s.cols);
  return s;
}

}  // namespace onnxamp::ops
