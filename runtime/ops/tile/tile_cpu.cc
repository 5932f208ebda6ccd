// Tile (CPU): repeats the input along each dim, any element type, opsets 1-25.
//
// Opsets 1-5 take a scalar count `tiles` and a scalar `axis` as inputs 1 and 2; from opset 6 input 1 `repeats`
// holds one non-negative count per dim. Output dim k is dim_k * repeats_k. The copy views the output as
// [r0, d0, r1, d1, ...] and reads the input with stride 0 along every repeat dim, so it is one strided copy.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/tile/tile.h"

namespace onnxamp::ops {
namespace {

class TileCpu : public exec::OpKernel {
 public:
  TileCpu(const exec::KernelInfo& info, Status*) : opset_(info.opset) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const TileShape shape, ResolveTile(ctx, *x, opset_));
    return DispatchByElementSize(x->dtype(), "Tile", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      // Allocation first: it refuses sizes that do not fit, so the stride arithmetic of the plan cannot overflow.
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), shape.out_dims));
      StridedCopy(MutableElementsOf<T>(*y), ElementsOf<T>(*x), TileCopyPlan(x->dims(), shape),
                  std::is_same_v<T, std::string> ? nullptr : &ctx.threads());
      return Status::Ok();
    });
  }

 private:
  int64_t opset_;
};

}  // namespace

void RegisterTileKernels(exec::KernelRegistry& r) {
  r.Register({"Tile", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<TileCpu>});
}

}  // namespace onnxamp::ops
