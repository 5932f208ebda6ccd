// Concat (CPU): joins inputs along `axis`, any element type (strings included), opsets 1-25.
//
// Every input must have the same rank and the same dims except along the axis (inputs of size 0 along it are
// fine). Opset 1-3 defaults the axis to 1; from opset 4 it is required; negative axes from opset 11 (accepted at
// every opset). Each output row of the dims before the axis is a sequence of one contiguous block per input.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

class ConcatCpu : public exec::OpKernel {
 public:
  ConcatCpu(const exec::KernelInfo& info, Status* status) {
    const ir::Attribute* a = info.node.FindAttribute("axis");
    if (!a && info.opset >= 4) {
      *status = InvalidArgument("attribute 'axis' is required");
      return;
    }
    axis_ = a ? a->i : 1;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    std::vector<const ir::Tensor*> ins;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* t, RequireInput(ctx, i, "inputs"));
      ins.push_back(t);
    }
    if (ins.empty()) return InvalidArgument("Concat needs at least one input");
    const ir::Tensor& first = *ins[0];
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(axis_, first.rank()));
    std::vector<int64_t> out_dims = first.dims();
    out_dims[axis] = 0;
    for (size_t i = 0; i < ins.size(); ++i) {
      const ir::Tensor& t = *ins[i];
      if (t.dtype() != first.dtype()) {
        return InvalidArgument(InputLabel(ctx, i, "inputs"), " has type ", DTypeName(t.dtype()), ", expected ",
                               DTypeName(first.dtype()), " like input 0");
      }
      bool ok = t.rank() == first.rank();
      for (int64_t k = 0; ok && k < first.rank(); ++k) ok = k == axis || t.dims()[k] == first.dims()[k];
      if (!ok) {
        return InvalidArgument(InputLabel(ctx, i, "inputs"), " has shape ", ShapeToString(t.dims()),
                               ", which does not match input 0's shape ", ShapeToString(first.dims()),
                               " except along axis ", axis);
      }
      out_dims[axis] += t.dims()[axis];
    }
    const int64_t outer = DimProduct(first.dims(), 0, axis);
    const int64_t inner = DimProduct(first.dims(), axis + 1, first.dims().size());
    return DispatchByElementSize(first.dtype(), "Concat", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, first.dtype(), out_dims));
      T* dst = MutableElementsOf<T>(*y);
      const int64_t out_row = out_dims[axis] * inner;
      int64_t col = 0;  // where input i's block starts inside an output row
      for (const ir::Tensor* t : ins) {
        const int64_t block = t->dims()[axis] * inner;
        const T* src = ElementsOf<T>(*t);
        // One strided copy per input: rows of `block` elements, from stride `block` to stride `out_row`.
        const std::vector<int64_t> dims = {outer, block};
        StridedCopy(dst + col, src,
                    MakeCopyPlan(dims, std::vector<int64_t>{out_row, 1}, std::vector<int64_t>{block, 1}),
                    std::is_same_v<T, std::string> ? nullptr : &ctx.threads());
        col += block;
      }
      return Status::Ok();
    });
  }

 private:
  int64_t axis_ = 1;
};

}  // namespace

void RegisterConcatKernels(exec::KernelRegistry& r) {
  r.Register({"Concat", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ConcatCpu>});
}

}  // namespace onnxamp::ops
