// OneHot (CPU, opsets 9 and 11): output[..., j at `axis`, ...] = values[1] where j equals the index at that position,
// values[0] elsewhere. Indices and depth of any numeric type (floats truncated toward zero, as ONNX Runtime does);
// from opset 11 an index in [-depth, -1] counts from the end (opset 9: an index outside [0, depth) sets no element).
// An index outside [-depth, depth) sets no element. Values of any element type.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/one_hot/one_hot.h"

namespace onnxamp::ops {
namespace {

class OneHotCpu : public exec::OpKernel {
 public:
  OneHotCpu(const exec::KernelInfo& info, Status* st) : negative_from_end_(info.opset >= 11) {
    auto a = IntAttribute(info.node, "axis", -1);
    if (!a.ok()) {
      *st = a.status();
    } else {
      axis_ = *a;
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const OneHotShape shape, ResolveOneHot(ctx, axis_));
    const ir::Tensor* indices = ctx.input(0);
    const ir::Tensor* values = ctx.input(2);
    const int64_t depth = shape.depth, outer = shape.outer, inner = shape.inner;
    const std::vector<int64_t>& dims = shape.dims;
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadAsInt64(*indices, InputLabel(ctx, 0, "indices")));
    const bool negative_from_end = negative_from_end_;
    return DispatchByElementSize(values->dtype(), "OneHot", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, values->dtype(), dims));
      const T* v = ElementsOf<T>(*values);
      T* out = MutableElementsOf<T>(*y);
      const int64_t n = outer * depth * inner;
      for (int64_t i = 0; i < n; ++i) out[i] = v[0];
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          int64_t k = idx[o * inner + i];
          if (negative_from_end && k < 0 && k >= -depth) k += depth;
          if (k >= 0 && k < depth) out[(o * depth + k) * inner + i] = v[1];
        }
      }
      return Status::Ok();
    });
  }

 private:
  bool negative_from_end_;
  int64_t axis_ = -1;
};

}  // namespace

void RegisterOneHotKernels(exec::KernelRegistry& r) {
  r.Register({"OneHot", "", 9, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<OneHotCpu>});
}

}  // namespace onnxamp::ops
