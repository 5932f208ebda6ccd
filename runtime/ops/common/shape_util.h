// Helpers for the shape and data-movement kernels (Reshape, Transpose, Concat, Slice, Gather, Pad, ...): axis
// checks, reading shape/index tensors, a dispatch that moves elements of any type by size, strided copies, and
// output allocation that refuses absurd sizes (string tensors included) with a Status instead of crashing.
//
// Data movement never looks at values, so elements are moved as unsigned integers of their size (1, 2, 4, 8 or
// 16 bytes; 16 for complex128) or as std::string. Sub-byte types (int4, uint4, float4, int2, uint2) are packed
// several to a byte and cannot be moved element by element: ops that only reinterpret the shape (Reshape,
// Flatten, Squeeze, Unsqueeze) accept them, the others refuse them with Unimplemented.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/dtype_dispatch.h"

namespace onnxamp::ops {

// Dims, strides or an index of a shape: up to kInline values kept in the object itself, more on the heap. The shape
// arithmetic a kernel does on every run then allocates nothing for the ranks models use.
class DimVector {
 public:
  static constexpr size_t kInline = 8;

  DimVector() = default;
  explicit DimVector(size_t n, int64_t value = 0) { resize(n, value); }
  DimVector(std::initializer_list<int64_t> values) { assign(values); }
  explicit DimVector(std::span<const int64_t> values) { assign(values); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return size_ <= kInline ? inline_ : heap_.data(); }
  const int64_t* data() const { return size_ <= kInline ? inline_ : heap_.data(); }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t& back() { return data()[size_ - 1]; }
  int64_t back() const { return data()[size_ - 1]; }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + size_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  operator std::span<const int64_t>() const { return {data(), size_}; }

  // New values (when growing) are `value`.
  void resize(size_t n, int64_t value = 0) {
    if (n > kInline) {
      if (size_ <= kInline) heap_.assign(inline_, inline_ + size_);
      heap_.resize(n, value);
    } else {
      if (size_ > kInline) std::copy_n(heap_.data(), n, inline_);
      std::fill(inline_ + std::min(size_, n), inline_ + n, value);
    }
    size_ = n;
  }
  void push_back(int64_t v) {
    resize(size_ + 1);
    back() = v;
  }
  void assign(std::span<const int64_t> values) {
    resize(values.size());
    std::copy(values.begin(), values.end(), data());
  }

 private:
  size_t size_ = 0;
  int64_t inline_[kInline] = {};
  std::vector<int64_t> heap_;  // the values when size_ > kInline
};

// Product of dims[begin, end) (1 for an empty range). Dims come from validated tensors, so this cannot overflow.
int64_t DimProduct(std::span<const int64_t> dims, size_t begin, size_t end);

// Row-major element strides of a contiguous tensor of shape `dims`.
std::vector<int64_t> ContiguousStrides(std::span<const int64_t> dims);

// `axis` in [-rank, rank) mapped to [0, rank); otherwise InvalidArgument "<what> 3 is out of range for rank 2".
StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, std::string_view what = "axis");

// Each axis normalised as NormalizeAxis does; a repeated axis is an InvalidArgument naming it.
StatusOr<std::vector<int64_t>> NormalizeAxes(std::span<const int64_t> axes, int64_t rank,
                                             std::string_view what = "axes");

// How messages name input i of the node: "input 'shape' (the shape)", from the value's name and the role the op
// gives the input.
std::string InputLabel(const exec::KernelContext& ctx, size_t i, std::string_view role);

// The values of an int32 or int64 tensor of rank 1 (or rank 0 when `allow_scalar`) as int64. `label` names the
// input in errors (see InputLabel): wrong element type or rank is an InvalidArgument saying what was expected.
StatusOr<std::vector<int64_t>> ReadInt64s(const ir::Tensor& t, std::string_view label, bool allow_scalar = false);

// Input i of the node, or InvalidArgument "input i (<role>) is missing" when it is omitted.
StatusOr<const ir::Tensor*> RequireInput(const exec::KernelContext& ctx, size_t i, std::string_view role);

// AllocateOutput for any element type. Numeric outputs are checked by the executor against the memory limit;
// string outputs (whose bytes the executor cannot count) are refused with ResourceExhausted when their element
// count cannot fit in the machine's memory.
StatusOr<ir::Tensor*> AllocateAnyOutput(exec::KernelContext& ctx, size_t i, DType dtype, std::vector<int64_t> dims);

// The machine's physical memory in bytes (UINT64_MAX when the system does not say).
uint64_t PhysicalMemoryBytes();

// OK when a tensor of (dtype, dims) fits in the machine's memory (strings counted as sizeof(std::string) each);
// otherwise ResourceExhausted (or OutOfRange on overflow) naming `what`, the shape and the byte size. For tensors
// a kernel builds itself, outside AllocateOutput (Constant's sparse_value).
Status CheckFitsInMemory(DType dtype, const std::vector<int64_t>& dims, std::string_view what);

// Sets output 0 to `x` with new dims of the same element count (Reshape, Flatten, Squeeze, Unsqueeze): the
// output shares x's bytes (no copy; any element type, sub-byte types included). ONNXAMP_CHECKs the count.
Status SetReshapedOutput(exec::KernelContext& ctx, const ir::Tensor& x, std::vector<int64_t> dims);

// A 16-byte element (complex128) moved as a whole.
struct Bytes16 {
  uint64_t w[2];
};

// Calls f(TypeTag<T>{}) with T an element type of the same size as `t` (uint8_t, uint16_t, uint32_t, uint64_t,
// Bytes16) or std::string for strings. Sub-byte and undefined types are Unimplemented, naming the type and `op`.
template <typename F>
Status DispatchByElementSize(DType t, std::string_view op, F&& f) {
  if (t == DType::kString) return f(TypeTag<std::string>{});
  switch (DTypeBits(t)) {
    case 8:
      return f(TypeTag<uint8_t>{});
    case 16:
      return f(TypeTag<uint16_t>{});
    case 32:
      return f(TypeTag<uint32_t>{});
    case 64:
      return f(TypeTag<uint64_t>{});
    case 128:
      return f(TypeTag<Bytes16>{});
    default:
      return Unimplemented(op, " does not support element type ", DTypeName(t),
                           IsSubByte(t) ? " (sub-byte types are packed and cannot be moved element by element)" : "");
  }
}

// Element pointers of a tensor as the type DispatchByElementSize picked (strings: the tensor's string vector).
template <typename T>
const T* ElementsOf(const ir::Tensor& t) {
  if constexpr (std::is_same_v<T, std::string>) {
    return t.strings().data();
  } else {
    return reinterpret_cast<const T*>(t.data());
  }
}
template <typename T>
T* MutableElementsOf(ir::Tensor& t) {
  if constexpr (std::is_same_v<T, std::string>) {
    return t.mutable_strings().data();
  } else {
    return reinterpret_cast<T*>(t.mutable_data());
  }
}

// Copies n elements (memcpy for plain types).
template <typename T>
inline void CopyElements(T* dst, const T* src, int64_t n) {
  if (n <= 0) return;
  if constexpr (std::is_trivially_copyable_v<T>) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  } else {
    std::copy_n(src, n, dst);
  }
}

// A copy between two strided views of the same shape, simplified: size-1 dims dropped and adjacent dims merged
// wherever both sides allow it, so that contiguous regions become one long inner row.
struct CopyPlan {
  DimVector dims;         // at least one dim; the last is the inner row
  DimVector dst_strides;  // element strides, same length as dims
  DimVector src_strides;  // may be 0 (broadcast) or negative (reversed)
  int64_t rows = 0;       // product of all dims but the last (0 when the copy is empty)
  int64_t inner = 0;      // the last dim
};

// Builds the plan for dst[sum i_k * dst_strides_k] = src[sum i_k * src_strides_k] over every index i of `dims`.
CopyPlan MakeCopyPlan(std::span<const int64_t> dims, std::span<const int64_t> dst_strides,
                      std::span<const int64_t> src_strides);

// Runs a CopyPlan; dst and src point at the element of index 0. Rows are split over `pool` when the copy is
// large (pool may be null: then it runs on the calling thread).
template <typename T>
void StridedCopy(T* dst, const T* src, const CopyPlan& plan, exec::ThreadPool* pool) {
  if (plan.rows == 0 || plan.inner == 0) return;
  const size_t outer_rank = plan.dims.size() - 1;
  const int64_t inner = plan.inner;
  const int64_t dsi = plan.dst_strides.back();
  const int64_t ssi = plan.src_strides.back();
  const int64_t* dims = plan.dims.data();
  const int64_t* dst_strides = plan.dst_strides.data();
  const int64_t* src_strides = plan.src_strides.data();
  auto run_rows = [&](int64_t begin, int64_t end) {
    // Odometer over the outer dims, starting at row `begin`.
    DimVector index_storage(outer_rank);
    int64_t* index = index_storage.data();
    int64_t dst_off = 0, src_off = 0;
    int64_t r = begin;
    for (size_t k = outer_rank; k-- > 0;) {
      index[k] = r % dims[k];
      r /= dims[k];
      dst_off += index[k] * dst_strides[k];
      src_off += index[k] * src_strides[k];
    }
    for (int64_t row = begin; row < end; ++row) {
      T* d = dst + dst_off;
      const T* s = src + src_off;
      if (dsi == 1 && ssi == 1) {
        CopyElements(d, s, inner);
      } else if (dsi == 1 && ssi == 0) {
        std::fill_n(d, inner, *s);
      } else {
        for (int64_t j = 0; j < inner; ++j) d[j * dsi] = s[j * ssi];
      }
      for (size_t k = outer_rank; k-- > 0;) {
        if (++index[k] < dims[k]) {
          dst_off += dst_strides[k];
          src_off += src_strides[k];
          break;
        }
        dst_off -= (dims[k] - 1) * dst_strides[k];
        src_off -= (dims[k] - 1) * src_strides[k];
        index[k] = 0;
      }
    }
  };
  constexpr int64_t kElementsPerTask = 1 << 15;
  const int64_t grain = std::max<int64_t>(1, kElementsPerTask / inner);
  if (pool && plan.rows >= 2 * grain) {
    pool->ParallelFor(plan.rows, grain, run_rows);
  } else {
    run_rows(0, plan.rows);
  }
}

}  // namespace onnxamp::ops
