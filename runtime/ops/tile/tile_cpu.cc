// Tile (CPU): repeats the input along each dim, any element type, opsets 1-25.
//
// Opsets 1-5 take a scalar count `tiles` and a scalar `axis` as inputs 1 and 2; from opset 6 input 1 `repeats`
// holds one non-negative count per dim. Output dim k is dim_k * repeats_k. The copy views the output as
// [r0, d0, r1, d1, ...] and reads the input with stride 0 along every repeat dim, so it is one strided copy.
#include <limits>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

// A scalar (or one-element) int tensor's value.
StatusOr<int64_t> ReadScalar(const exec::KernelContext& ctx, size_t i, std::string_view role) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* t, RequireInput(ctx, i, role));
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInt64s(*t, InputLabel(ctx, i, role), /*allow_scalar=*/true));
  if (v.size() != 1) return InvalidArgument(InputLabel(ctx, i, role), " must hold one value, got ", v.size());
  return v[0];
}

class TileCpu : public exec::OpKernel {
 public:
  TileCpu(const exec::KernelInfo& info, Status*) : opset_(info.opset) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    const size_t rank = x->dims().size();
    std::vector<int64_t> repeats;
    if (opset_ < 6) {
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t tiles, ReadScalar(ctx, 1, "tiles"));
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis_in, ReadScalar(ctx, 2, "axis"));
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(axis_in, x->rank()));
      repeats.assign(rank, 1);
      repeats[axis] = tiles;
    } else {
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* r, RequireInput(ctx, 1, "repeats"));
      ONNXAMP_ASSIGN_OR_RETURN(repeats, ReadInt64s(*r, InputLabel(ctx, 1, "repeats")));
    }
    if (repeats.size() != rank) {
      return InvalidArgument("repeats ", ShapeToString(repeats), " has ", repeats.size(), " entries but the input ",
                             ShapeToString(x->dims()), " has rank ", rank);
    }
    std::vector<int64_t> out_dims(rank);
    for (size_t k = 0; k < rank; ++k) {
      if (repeats[k] < 0) return InvalidArgument("repeats ", ShapeToString(repeats), " has a negative count");
      if (repeats[k] != 0 && x->dims()[k] > std::numeric_limits<int64_t>::max() / repeats[k]) {
        return OutOfRange("tiling ", ShapeToString(x->dims()), " by ", ShapeToString(repeats),
                          " overflows the size of dim ", k);
      }
      out_dims[k] = x->dims()[k] * repeats[k];
    }
    return DispatchByElementSize(x->dtype(), "Tile", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      // Allocation first: it refuses sizes that do not fit, so the stride arithmetic below cannot overflow.
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), out_dims));
      const std::vector<int64_t> in_strides = ContiguousStrides(x->dims());
      const std::vector<int64_t> out_strides = ContiguousStrides(out_dims);
      std::vector<int64_t> dims, dst_strides, src_strides;
      for (size_t k = 0; k < rank; ++k) {
        dims.insert(dims.end(), {repeats[k], x->dims()[k]});
        dst_strides.insert(dst_strides.end(), {x->dims()[k] * out_strides[k], out_strides[k]});
        src_strides.insert(src_strides.end(), {0, in_strides[k]});
      }
      StridedCopy(MutableElementsOf<T>(*y), ElementsOf<T>(*x), MakeCopyPlan(dims, dst_strides, src_strides),
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
