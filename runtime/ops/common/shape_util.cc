// Helpers for the shape and data-movement kernels: axes, shape tensors, checked allocation, copy plans.
#include "runtime/ops/common/shape_util.h"

#include <unistd.h>

#include <limits>

namespace onnxamp::ops {

int64_t DimProduct(std::span<const int64_t> dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t k = begin; k < end && k < dims.size(); ++k) p *= dims[k];
  return p;
}

std::vector<int64_t> ContiguousStrides(std::span<const int64_t> dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  // Unsigned arithmetic: with a zero dim the product of the others may exceed int64 (and is then never used).
  for (size_t k = dims.size(); k-- > 1;) {
    strides[k - 1] = static_cast<int64_t>(static_cast<uint64_t>(strides[k]) * static_cast<uint64_t>(dims[k]));
  }
  return strides;
}

StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, std::string_view what) {
  if (axis < -rank || axis >= rank) {
    return InvalidArgument(what, " ", axis, " is out of range for rank ", rank, " (expected ", -rank, " to ", rank - 1,
                           ")");
  }
  return axis < 0 ? axis + rank : axis;
}

StatusOr<std::vector<int64_t>> NormalizeAxes(std::span<const int64_t> axes, int64_t rank, std::string_view what) {
  std::vector<int64_t> out;
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  for (int64_t a : axes) {
    ONNXAMP_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(a, rank, what));
    if (seen[static_cast<size_t>(n)]) return InvalidArgument(what, " ", ShapeToString(axes), " repeat axis ", n);
    seen[static_cast<size_t>(n)] = true;
    out.push_back(n);
  }
  return out;
}

std::string InputLabel(const exec::KernelContext& ctx, size_t i, std::string_view role) {
  const ir::Value* v = ctx.node().input(i);
  if (!v) return StrCat("input ", i, " (", role, ")");
  return StrCat("input '", v->name(), "' (", role, ")");
}

StatusOr<std::vector<int64_t>> ReadInt64s(const ir::Tensor& t, std::string_view label, bool allow_scalar) {
  if (t.rank() != 1 && !(allow_scalar && t.rank() == 0)) {
    return InvalidArgument(label, " must be a 1-D tensor", allow_scalar ? " or a scalar" : "", ", got shape ",
                           ShapeToString(t.dims()));
  }
  std::vector<int64_t> out;
  if (t.dtype() == DType::kInt64) {
    for (int64_t v : t.values<int64_t>()) out.push_back(v);
  } else if (t.dtype() == DType::kInt32) {
    for (int32_t v : t.values<int32_t>()) out.push_back(v);
  } else {
    return InvalidArgument(label, " must be int64 or int32, got ", DTypeName(t.dtype()));
  }
  return out;
}

StatusOr<const ir::Tensor*> RequireInput(const exec::KernelContext& ctx, size_t i, std::string_view role) {
  const ir::Tensor* t = ctx.input(i);
  if (!t) return InvalidArgument("input ", i, " (", role, ") is missing");
  return t;
}

uint64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                               : std::numeric_limits<uint64_t>::max();
}

Status CheckFitsInMemory(DType dtype, const std::vector<int64_t>& dims, std::string_view what) {
  StatusOr<int64_t> counted = ir::Tensor::ComputeNumElements(dims);
  StatusOr<size_t> sized = counted.ok() ? ir::Tensor::ComputeByteSize(dtype, dims) : StatusOr<size_t>(counted.status());
  if (!sized.ok())
    return Status(sized.status().code(), StrCat(what, " ", ShapeToString(dims), ": ", sized.status().message()));
  const int64_t count = *counted;
  const size_t packed = *sized;
  const uint64_t limit = PhysicalMemoryBytes();
  if (dtype == DType::kString) {
    const uint64_t per = sizeof(std::string);
    if (static_cast<uint64_t>(count) > limit / per) {
      return ResourceExhausted(what, " string", ShapeToString(dims), " needs at least ",
                               static_cast<unsigned __int128>(count) * per > std::numeric_limits<uint64_t>::max()
                                   ? std::string("2^64")
                                   : std::to_string(static_cast<uint64_t>(count) * per),
                               " bytes, more than the ", limit, " bytes of memory");
    }
  } else if (packed > limit) {
    return ResourceExhausted(what, " ", DTypeName(dtype), ShapeToString(dims), " needs ", packed,
                             " bytes, more than the ", limit, " bytes of memory");
  }
  return Status::Ok();
}

StatusOr<ir::Tensor*> AllocateAnyOutput(exec::KernelContext& ctx, size_t i, DType dtype, std::vector<int64_t> dims) {
  if (dtype == DType::kString) {
    StatusOr<int64_t> count = ir::Tensor::ComputeNumElements(dims);
    if (!count.ok()) return count.status().WithContext(StrCat("output ", i, " ", ShapeToString(dims)));
    ONNXAMP_RETURN_IF_ERROR(CheckFitsInMemory(dtype, dims, StrCat("output ", i)));
  }
  return ctx.AllocateOutput(i, dtype, std::move(dims));
}

Status SetReshapedOutput(exec::KernelContext& ctx, const ir::Tensor& x, std::vector<int64_t> dims) {
  ONNXAMP_CHECK(DimProduct(dims, 0, dims.size()) == x.num_elements(), "reshape to ", ShapeToString(dims),
                " changes the element count of ", ShapeToString(x.dims()));
  if (x.dtype() == DType::kString) {
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, x.dtype(), std::move(dims)));
    std::copy(x.strings().begin(), x.strings().end(), out->mutable_strings().begin());
    return Status::Ok();
  }
  if (!x.buffer()) return InvalidArgument("input has no data");
  return ctx.SetOutput(0, ir::Tensor::FromBuffer(x.dtype(), std::move(dims), x.buffer()));
}

CopyPlan MakeCopyPlan(std::span<const int64_t> dims, std::span<const int64_t> dst_strides,
                      std::span<const int64_t> src_strides) {
  CopyPlan plan;
  for (int64_t d : dims)
    if (d == 0) return plan;  // nothing to copy: rows == 0
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 1) continue;
    if (!plan.dims.empty() && plan.dst_strides.back() == dst_strides[k] * dims[k] &&
        plan.src_strides.back() == src_strides[k] * dims[k]) {
      // Dim k continues the previous one on both sides: merge.
      plan.dims.back() *= dims[k];
      plan.dst_strides.back() = dst_strides[k];
      plan.src_strides.back() = src_strides[k];
      continue;
    }
    plan.dims.push_back(dims[k]);
    plan.dst_strides.push_back(dst_strides[k]);
    plan.src_strides.push_back(src_strides[k]);
  }
  if (plan.dims.empty()) {
    plan.dims = {1};
    plan.dst_strides = {1};
    plan.src_strides = {1};
  }
  plan.inner = plan.dims.back();
  plan.rows = DimProduct(plan.dims, 0, plan.dims.size() - 1);
  return plan;
}

}  // namespace onnxamp::ops
