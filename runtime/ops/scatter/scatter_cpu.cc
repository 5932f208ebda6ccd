// ScatterElements (opsets 11-25), Scatter (9-10, the same op before its rename) and ScatterND (11-25) on the CPU:
// a copy of data with elements (ScatterElements: one per index, along `axis`) or slices (ScatterND: one per index
// tuple of indices' last dim) replaced by, or combined with, updates. `reduction` (ScatterND and ScatterElements
// from opset 16: none, add, mul; 18: max, min) combines them in index order, so repeated indices accumulate
// deterministically; with none, the last write wins (as in ONNX Runtime). Any element type without a reduction;
// numeric types and bool with one (fp16/bf16 combine in float and round each time, as the op's definition computes;
// integers wrap).
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/common/wrap_arith.h"
#include "runtime/ops/gather/gather.h"
#include "runtime/ops/scatter/scatter.h"

namespace onnxamp::ops {
namespace {

using Reduction = ScatterReduction;

// dst = combine(dst, src) for `count` elements of type T. max and min keep dst only when it wins the comparison
// (dst > src, dst < src), so a NaN already in data is replaced and one in updates is kept, as ONNX Runtime does; for
// bool, add and max are OR, mul and min AND.
template <typename T>
void Combine(Reduction r, T* dst, const T* src, int64_t count) {
  using C = ComputeType<T>;
  for (int64_t i = 0; i < count; ++i) {
    const C a = Load<T>(dst[i]), b = Load<T>(src[i]);
    C v = b;
    if constexpr (std::is_same_v<T, bool>) {
      if (r == Reduction::kAdd || r == Reduction::kMax) v = a || b;
      if (r == Reduction::kMul || r == Reduction::kMin) v = a && b;
    } else {
      switch (r) {
        case Reduction::kNone:
          break;
        case Reduction::kAdd:
          v = WrapAdd(a, b);
          break;
        case Reduction::kMul:
          v = WrapMul(a, b);
          break;
        case Reduction::kMax:
          v = a > b ? a : b;
          break;
        case Reduction::kMin:
          v = a < b ? a : b;
          break;
      }
    }
    dst[i] = Store<T>(v);
  }
}

// Copies data into output 0 and applies `updates` at the element offsets (each a run of `run` elements): updates'
// run i goes to offsets[i].
Status ScatterInto(exec::KernelContext& ctx, Reduction reduction, const ir::Tensor& data, const ir::Tensor& updates,
                   const std::vector<int64_t>& offsets, int64_t run, const char* op) {
  ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, AllocateAnyOutput(ctx, 0, data.dtype(), data.dims()));
  if (reduction == Reduction::kNone) {
    return DispatchByElementSize(data.dtype(), op, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* from = ElementsOf<T>(data);
      const T* src = ElementsOf<T>(updates);
      T* dst = MutableElementsOf<T>(*out);
      std::copy(from, from + data.num_elements(), dst);
      for (size_t i = 0; i < offsets.size(); ++i) {
        std::copy(src + static_cast<int64_t>(i) * run, src + (static_cast<int64_t>(i) + 1) * run, dst + offsets[i]);
      }
      return Status::Ok();
    });
  }
  if (data.dtype() == DType::kString) {
    return InvalidArgument(op, " with a reduction takes numeric or bool data, got string");
  }
  return DispatchNumericOrBool(data.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* src = updates.values<T>().data();
    T* dst = out->mutable_values<T>().data();
    std::copy(data.values<T>().begin(), data.values<T>().end(), dst);
    for (size_t i = 0; i < offsets.size(); ++i) Combine(reduction, dst + offsets[i], src + i * run, run);
    return Status::Ok();
  });
}

// ScatterElements and Scatter (one element per index, along `axis`), or ScatterND (one slice per index tuple).
class ScatterCpu : public exec::OpKernel {
 public:
  ScatterCpu(const exec::KernelInfo& info, Status* st)
      : nd_(info.node.op_type() == "ScatterND"), axis_(info.node.GetInt("axis", 0)) {
    StatusOr<Reduction> r = ParseScatterReduction(info);
    if (!r.ok()) {
      *st = r.status();
      return;
    }
    reduction_ = *r;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* data, RequireInput(ctx, 0, "data"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 1, "indices"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* updates, RequireInput(ctx, 2, "updates"));
    const std::vector<int64_t>& dd = data->dims();
    if (nd_) {
      ONNXAMP_ASSIGN_OR_RETURN(const NdShape s, ResolveNd(ctx, dd, *indices, 0));
      ONNXAMP_RETURN_IF_ERROR(CheckScatterUpdates(ctx, *data, *updates, s.out_dims));
      return ScatterInto(ctx, reduction_, *data, *updates, s.offsets, s.slice, "ScatterND");
    }
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, ResolveGatherElements(ctx, *data, *indices, axis_));
    ONNXAMP_RETURN_IF_ERROR(CheckScatterUpdates(ctx, *data, *updates, indices->dims()));
    ONNXAMP_ASSIGN_OR_RETURN(
        const std::vector<int64_t> idx,
        ReadGatherIndices(ctx, *indices, dd[static_cast<size_t>(axis)], axis, dd, InputLabel(ctx, 1, "indices")));
    return ScatterInto(ctx, reduction_, *data, *updates,
                       ElementOffsets(indices->dims(), ContiguousStrides(dd), axis, idx), 1, "ScatterElements");
  }

 private:
  bool nd_;
  int64_t axis_;
  Reduction reduction_ = Reduction::kNone;
};

}  // namespace

void RegisterScatterKernels(exec::KernelRegistry& r) {
  r.Register({"Scatter", "", 9, 10, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ScatterCpu>});
  r.Register({"ScatterElements", "", 11, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ScatterCpu>});
  r.Register({"ScatterND", "", 11, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ScatterCpu>});
}

}  // namespace onnxamp::ops
