// Slice (CPU): takes starts:ends:steps along chosen axes, any element type (strings included), opsets 1-25.
//
// Opsets 1-9 read `starts`, `ends` and `axes` attributes (step 1); from opset 10 they are inputs (int32 or int64)
// with optional `axes` and `steps`. Per axis, as in numpy: negative starts/ends count from the end; then for a
// positive step start and end are clamped to [0, dim], for a negative step to [0, dim-1] and [-1, dim-1], so
// ends like INT64_MAX or INT64_MIN mean "to the end"/"to the beginning". A zero step or a repeated axis is an
// error. The copy is a strided view of the input (negative strides for negative steps).
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/slice/slice.h"

namespace onnxamp::ops {

namespace {

class SliceCpu : public exec::OpKernel {
 public:
  SliceCpu(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node, info.opset); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "data"));
    ONNXAMP_ASSIGN_OR_RETURN(const SliceView v, spec_.Resolve(ctx, *x));
    return DispatchByElementSize(x->dtype(), "Slice", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), v.out_dims));
      StridedCopy(MutableElementsOf<T>(*y), ElementsOf<T>(*x) + v.offset,
                  MakeCopyPlan(v.out_dims, ContiguousStrides(v.out_dims), v.src_strides),
                  std::is_same_v<T, std::string> ? nullptr : &ctx.threads());
      return Status::Ok();
    });
  }

 private:
  SliceSpec spec_;
};

}  // namespace

void RegisterSliceKernels(exec::KernelRegistry& r) {
  r.Register({"Slice", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<SliceCpu>});
}

}  // namespace onnxamp::ops
