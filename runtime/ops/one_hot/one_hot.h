// OneHot's per-run checks (depth, values, axis) and the reading of numeric indices as int64, shared by the CPU kernel
// (one_hot_cpu.cc) and the CUDA kernel (runtime/cuda/ops/tensor/layout_ops_cuda.cc, whose device code converts
// indices as ReadAsInt64 does): same checks, same messages. See one_hot_cpu.cc for the semantics.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

// InvalidArgument naming `label` unless `t` is a numeric type (integers, float, float16, bfloat16, double).
inline Status CheckOneHotNumeric(DType t, const std::string& label) {
  Status st = DispatchNumeric(t, [](auto) { return Status::Ok(); });
  if (!st.ok()) return InvalidArgument(label, ": ", st.message());
  return Status::Ok();
}

// The elements of a numeric tensor as int64 (floats truncated; NaN and out-of-range floats to INT64_MIN, which no
// depth reaches; unsigned values above INT64_MAX to INT64_MIN too).
inline StatusOr<std::vector<int64_t>> ReadAsInt64(const ir::Tensor& t, const std::string& label) {
  ONNXAMP_RETURN_IF_ERROR(CheckOneHotNumeric(t.dtype(), label));
  std::vector<int64_t> out(static_cast<size_t>(t.num_elements()));
  Status st = DispatchNumeric(t.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const auto v = t.values<T>();
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (kIsFloatLike<T>) {
        const double d = static_cast<double>(Load(v[i]));
        out[i] = std::isfinite(d) && std::fabs(d) < 9.2e18 ? static_cast<int64_t>(d) : INT64_MIN;
      } else if constexpr (std::is_unsigned_v<T>) {
        out[i] = v[i] > static_cast<T>(INT64_MAX) ? INT64_MIN : static_cast<int64_t>(v[i]);
      } else {
        out[i] = static_cast<int64_t>(v[i]);
      }
    }
    return Status::Ok();
  });
  if (!st.ok()) return InvalidArgument(label, ": ", st.message());
  return out;
}

// One OneHot run: the depth, the normalised axis, the output dims (indices' with depth inserted at axis) and the
// indices viewed as [outer, inner] around it.
struct OneHotShape {
  int64_t depth = 1;
  int64_t axis = 0;
  int64_t outer = 1;
  int64_t inner = 1;
  std::vector<int64_t> dims;
};

// Checks depth (input 1, one numeric value, at least 1 after truncation), values (input 2, two elements) and the
// axis attribute against the output's rank.
inline StatusOr<OneHotShape> ResolveOneHot(const exec::KernelContext& ctx, int64_t axis_attr) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 0, "indices"));
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* depth_t, RequireInput(ctx, 1, "depth"));
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* values, RequireInput(ctx, 2, "values"));
  const std::string depth_label = InputLabel(ctx, 1, "depth");
  if (depth_t->num_elements() != 1) {
    return InvalidArgument(depth_label, " must hold one value, got ", depth_t->num_elements());
  }
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> depths, ReadAsInt64(*depth_t, depth_label));
  OneHotShape s;
  s.depth = depths[0];
  if (s.depth < 1) return InvalidArgument(depth_label, " is ", s.depth, ", expected at least 1");
  if (values->num_elements() != 2) {
    return InvalidArgument(InputLabel(ctx, 2, "values"), " must hold two values (off, on), got ",
                           values->num_elements());
  }
  const int64_t rank = indices->rank() + 1;
  if (axis_attr < -rank || axis_attr >= rank) {
    return InvalidArgument("attribute 'axis' is ", axis_attr, ", outside [", -rank, ", ", rank - 1, "]");
  }
  s.axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
  s.dims = indices->dims();
  s.dims.insert(s.dims.begin() + s.axis, s.depth);
  for (int64_t d = 0; d < indices->rank(); ++d) (d < s.axis ? s.outer : s.inner) *= indices->dims()[d];
  return s;
}

}  // namespace onnxamp::ops
