// EyeLike's attributes and per-run check, shared by the CPU kernel (compress_cpu.cc) and the CUDA kernel
// (runtime/cuda/ops/tensor/layout_ops_cuda.cc): same checks, same messages. See compress_cpu.cc for the semantics.
#pragma once

#include <cstdint>
#include <optional>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

// The attributes of one EyeLike node: the diagonal k and the output type (kUndefined: the input's).
struct EyeLikeSpec {
  int64_t k = 0;
  DType dtype = DType::kUndefined;

  // InvalidArgument when `dtype` is given and is not a numeric or bool element type.
  Status Parse(const ir::Node& node) {
    k = node.GetInt("k", 0);
    const int64_t code = node.GetInt("dtype", 0);
    if (code == 0) return Status::Ok();
    const std::optional<DType> t = DTypeFromCode(code);
    const bool numeric = t && (IsInteger(*t) || *t == DType::kBool || *t == DType::kFloat32 || *t == DType::kFloat64 ||
                               *t == DType::kFloat16 || *t == DType::kBFloat16);
    if (!numeric) return InvalidArgument("attribute 'dtype' ", code, " is not a numeric or bool element type");
    dtype = *t;
    return Status::Ok();
  }

  // The output type for input `x` after checking that x is 2-D (InvalidArgument).
  StatusOr<DType> Resolve(const exec::KernelContext& ctx, const ir::Tensor& x) const {
    if (x.rank() != 2) {
      return InvalidArgument(InputLabel(ctx, 0, "input"), " must be 2-D, got ", ShapeToString(x.dims()));
    }
    return dtype == DType::kUndefined ? x.dtype() : dtype;
  }
};

}  // namespace onnxamp::ops
