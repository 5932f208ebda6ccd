// CUDA Gather, GatherElements, Pad and ConstantOfShape: host-side checks with the helpers the CPU kernels use
// (runtime/ops/<op>/<op>.h: same checks, same messages), then one launch by element size.
//
// Gather and GatherElements read their indices on the device (they are usually produced there), so an index
// outside [-dim, dim) cannot be reported as the CPU kernel reports it without a host synchronisation: on CUDA such
// an index yields zero bytes (0, false, +0.0) in the output positions it selects, and the run succeeds.
#include <algorithm>
#include <cstring>

#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/cuda/ops/tensor/tensor_launch.h"
#include "runtime/cuda/ops/tensor/tensor_util.h"
#include "runtime/ops/constant/constant.h"
#include "runtime/ops/gather/gather.h"
#include "runtime/ops/pad/pad.h"

namespace onnxamp::cuda::tensor_ops {
namespace {

using ops::ContiguousStrides;
using ops::IndicesAreInt64;
using ops::RequireInput;

class GatherCuda : public exec::OpKernel {
 public:
  GatherCuda(const exec::KernelInfo& info, Status*) : axis_(info.node.GetInt("axis", 0)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* data, RequireInput(ctx, 0, "data"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 1, "indices"));
    ONNXAMP_ASSIGN_OR_RETURN(const ops::GatherShape shape, ops::ResolveGather(*data, *indices, axis_));
    ONNXAMP_ASSIGN_OR_RETURN(const bool idx64, IndicesAreInt64(ctx, *indices));
    const int64_t dim = data->dims()[shape.axis];
    const int64_t outer = shape.outer, inner = shape.inner;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, data->dtype(), shape.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    const size_t e = ElementSize(data->dtype());
    // Move each inner block in the widest unit its byte size and both addresses allow.
    const void* src = DeviceData(*data);
    void* dst = MutableDeviceData(*y);
    const size_t unit = WidestUnit(e, static_cast<size_t>(inner) * e, src, dst);
    const int64_t inner_units = static_cast<int64_t>(static_cast<size_t>(inner) * e / unit);
    return LaunchGather(dst, src, DeviceData(*indices), idx64, outer, dim, indices->num_elements(), inner_units, unit,
                        GetCudaContext(ctx).stream(), "Gather");
  }

 private:
  int64_t axis_;
};

class GatherElementsCuda : public exec::OpKernel {
 public:
  GatherElementsCuda(const exec::KernelInfo& info, Status*) : axis_(info.node.GetInt("axis", 0)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* data, RequireInput(ctx, 0, "data"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 1, "indices"));
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, ops::ResolveGatherElements(ctx, *data, *indices, axis_));
    const std::vector<int64_t>& dd = data->dims();
    const std::vector<int64_t>& id = indices->dims();
    ONNXAMP_ASSIGN_OR_RETURN(const bool idx64, IndicesAreInt64(ctx, *indices));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, data->dtype(), id));
    if (y->num_elements() == 0) return Status::Ok();
    if (dd.size() > static_cast<size_t>(kMaxMoveRank)) {
      return Unimplemented("GatherElements: rank ", dd.size(), " is above the ", kMaxMoveRank,
                           " dims the cuda kernel takes");
    }
    GatherElementsArgs args;
    args.rank = static_cast<int>(dd.size());
    args.axis = static_cast<int>(axis);
    args.dim = dd[axis];
    const std::vector<int64_t> ds = ContiguousStrides(dd);
    for (size_t k = 0; k < dd.size(); ++k) {
      args.idx_dims[k] = id[k];
      args.data_strides[k] = ds[k];
    }
    return LaunchGatherElements(MutableDeviceData(*y), DeviceData(*data), DeviceData(*indices), idx64, args,
                                ElementSize(data->dtype()), GetCudaContext(ctx).stream(), "GatherElements");
  }

 private:
  int64_t axis_;
};

class PadCuda : public exec::OpKernel {
 public:
  PadCuda(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node, info.opset); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "data"));
    const size_t rank = x->dims().size();
    ONNXAMP_ASSIGN_OR_RETURN(const ops::PadShape shape, spec_.Resolve(ctx, *x));
    const size_t e = ElementSize(x->dtype());
    // The fill element: constant_value's bytes (a host input), or the float `value` of opsets 1-10 stored as the
    // data's type, or zero bytes.
    unsigned char fill[16] = {};
    if (shape.value) {
      std::memcpy(fill, shape.value->data(), e);
    } else if (spec_.value_attr() != 0.0f && e < 16) {
      ONNXAMP_RETURN_IF_ERROR(ops::StorePadValue(x->dtype(), spec_.value_attr(), fill));
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), shape.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    if (rank > static_cast<size_t>(kMaxMoveRank)) {
      return Unimplemented("Pad: rank ", rank, " is above the ", kMaxMoveRank, " dims the cuda kernel takes");
    }
    PadArgs args;
    args.rank = static_cast<int>(rank);
    static_assert(static_cast<int>(ops::PadMode::kWrap) == static_cast<int>(PadKind::kWrap));
    args.mode = static_cast<PadKind>(static_cast<int>(spec_.mode()));
    const std::vector<int64_t> in_strides = ContiguousStrides(x->dims());
    for (size_t k = 0; k < rank; ++k) {
      args.out_dims[k] = shape.out_dims[k];
      args.in_strides[k] = in_strides[k];
      args.pad_begin[k] = std::max<int64_t>(0, shape.begin[k]);
      args.crop[k] = std::max<int64_t>(0, -shape.begin[k]);
      args.len[k] = x->dims()[k] - args.crop[k] - std::max<int64_t>(0, -shape.end[k]);
    }
    return LaunchPad(MutableDeviceData(*y), DeviceData(*x), args, fill, e, GetCudaContext(ctx).stream(), "Pad");
  }

 private:
  ops::PadSpec spec_;
};

class ConstantOfShapeCuda : public exec::OpKernel {
 public:
  ConstantOfShapeCuda(const exec::KernelInfo& info, Status* status) : value_(DType::kFloat32, {1}) {
    StatusOr<ir::Tensor> value = ops::ConstantOfShapeValue(info.node);
    if (!value.ok()) {
      *status = value.status();
      return;
    }
    const int bits = DTypeBits(value->dtype());
    if (value->dtype() == DType::kString || bits < 8 || bits > 128) {
      *status = Unimplemented("ConstantOfShape of ", DTypeName(value->dtype()), " is not supported on cuda");
      return;
    }
    value_ = std::move(value).value();
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> dims, ops::ConstantOfShapeDims(ctx));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, value_.dtype(), dims));
    const int64_t n = y->num_elements();
    if (n == 0) return Status::Ok();
    return LaunchFill(MutableDeviceData(*y), n, value_.data(), ElementSize(value_.dtype()),
                      GetCudaContext(ctx).stream(), "ConstantOfShape");
  }

 private:
  ir::Tensor value_;  // host
};

}  // namespace

void RegisterIndexKernels(exec::KernelRegistry& r) {
  const std::vector<DType> movable = MovableDTypes();
  r.Register({"Gather", "", 1, 25, exec::Device::kCuda, movable, 0, &exec::MakeKernel<GatherCuda>});
  r.Register({"GatherElements", "", 11, 25, exec::Device::kCuda, movable, 0, &exec::MakeKernel<GatherElementsCuda>});
  exec::KernelDef pad{"Pad", "", 1, 25, exec::Device::kCuda, movable, 0, &exec::MakeKernel<PadCuda>};
  pad.host_inputs = {1, 2, 3};
  r.Register(std::move(pad));
  RegisterLikeCpu(r, "ConstantOfShape", &exec::MakeKernel<ConstantOfShapeCuda>, {0});
}

}  // namespace onnxamp::cuda::tensor_ops
