// CUDA kernels (host side) of Cast, CastLike, Clip, Where and Dropout. Attributes, checks and messages are the CPU
// kernels' (runtime/ops/cast/, clip/, where/, dropout/); the device work is in cast.cu and select.cu.
//
// On the device: Cast and CastLike convert between numeric types and bool (strings stay on the CPU: the kernel declines
// a Cast to string at Create, so a CUDA session places that node on the CPU); Dropout reads its ratio and training_mode
// inputs on the host.
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/elementwise/elementwise_kernels.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/ops/cast/cast.h"
#include "runtime/ops/clip/clip.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/dropout/dropout.h"
#include "runtime/ops/where/where.h"

namespace onnxamp::cuda {
namespace {

// ---- Cast, CastLike ---------------------------------------------------------------------------------------------

// The types Cast converts on the device: the CPU's but string.
bool IsDeviceCastable(DType t) { return t != DType::kString && ops::IsCastable(t); }

// Casts x to `to` into output 0 (the input itself when the types are equal).
Status CastTo(exec::KernelContext& ctx, const ir::Tensor& x, DType to) {
  if (!IsDeviceCastable(x.dtype())) {
    return Unimplemented("input 0 has element type ", DTypeName(x.dtype()),
                         ", which Cast does not support on cuda (numeric types and bool)");
  }
  if (!IsDeviceCastable(to)) {
    return Unimplemented("casting to ", DTypeName(to), " is not supported on cuda (numeric types and bool)");
  }
  if (x.dtype() == to) return ctx.SetOutput(0, x);
  ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, to, x.dims()));
  return ew::LaunchCast(x.dtype(), to, x.data(), out->mutable_data(), x.num_elements(), GetCudaContext(ctx).stream(),
                        ctx.node().op_type());
}

class CudaCast : public exec::OpKernel {
 public:
  CudaCast(const exec::KernelInfo& info, Status* st) { *st = Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (input) is missing");
    return CastTo(ctx, *x, to_);
  }

 private:
  Status Init(const exec::KernelInfo& info) {
    ONNXAMP_ASSIGN_OR_RETURN(to_, ops::ParseCastTo(info));
    if (to_ == DType::kString) {
      return Unimplemented("attribute 'to' is string, which Cast supports on the cpu only");
    }
    return ops::CheckCastSaturate(info);
  }

  DType to_ = DType::kUndefined;
};

class CudaCastLike : public exec::OpKernel {
 public:
  CudaCastLike(const exec::KernelInfo& info, Status* st) { *st = ops::CheckCastSaturate(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    const ir::Tensor* like = ctx.input(1);
    if (!x || !like) return InvalidArgument("input ", x ? 1 : 0, " is missing");
    if (!IsDeviceCastable(like->dtype())) {
      return Unimplemented("input 1 (target_type) has element type ", DTypeName(like->dtype()),
                           ", which CastLike does not support on cuda (numeric types and bool)");
    }
    return CastTo(ctx, *x, like->dtype());
  }
};

// ---- Clip -------------------------------------------------------------------------------------------------------

// Bounds are attributes before opset 11 and optional scalar inputs from 11 (read on the device, so that a bound
// computed by an earlier device kernel costs no copy).
class CudaClip : public exec::OpKernel {
 public:
  CudaClip(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor *x = nullptr, *lo = nullptr, *hi = nullptr;
    ONNXAMP_RETURN_IF_ERROR(spec_.Inputs(ctx, &x, &lo, &hi));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return ew::LaunchClip(x->dtype(), x->data(), y->mutable_data(), x->num_elements(), lo ? lo->data() : nullptr,
                          hi ? hi->data() : nullptr, spec_.attr_min(), spec_.attr_max(), GetCudaContext(ctx).stream(),
                          ctx.node().op_type());
  }

 private:
  ops::ClipSpec spec_;
};

// ---- Where ------------------------------------------------------------------------------------------------------

class CudaWhere : public exec::OpKernel {
 public:
  CudaWhere(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* c = ctx.input(0);
    const ir::Tensor* x = ctx.input(1);
    const ir::Tensor* y = ctx.input(2);
    ONNXAMP_ASSIGN_OR_RETURN(ops::BroadcastPlan plan, ops::PlanWhere(c, x, y));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, x->dtype(), plan.output_dims()));
    if (plan.num_elements() == 0) return Status::Ok();
    const int bits = DTypeBits(x->dtype());
    if (x->dtype() == DType::kString || IsSubByte(x->dtype()) || bits % 8 != 0) {
      return Unimplemented("element type ", DTypeName(x->dtype()), " is not supported on cuda");
    }
    ONNXAMP_ASSIGN_OR_RETURN(ew::Geometry g, ew::GeometryFromPlan(plan));
    return ew::LaunchWhere(bits / 8, reinterpret_cast<const bool*>(c->data()), x->data(), y->data(),
                           out->mutable_data(), g, GetCudaContext(ctx).stream(), ctx.node().op_type());
  }
};

// ---- Dropout ----------------------------------------------------------------------------------------------------

// Opsets 1-6: attributes is_test and ratio, mask of type T; 7-9: ratio, inference only, mask T; 10-11: mask bool;
// 12-23: optional host inputs ratio and training_mode, attribute seed. The mask in training mode is the CPU's (the
// same hash of seed and index), so a CUDA and a CPU session with the same seed drop the same elements.
class CudaDropout : public exec::OpKernel {
 public:
  CudaDropout(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = nullptr;
    double ratio = 0.5;
    bool training = false;
    ONNXAMP_RETURN_IF_ERROR(spec_.Resolve(ctx, &x, &ratio, &training));
    const std::string& what = ctx.node().op_type();
    cudaStream_t stream = GetCudaContext(ctx).stream();
    const bool want_mask = ctx.num_outputs() >= 2 && ctx.output_requested(1);
    const DType mask_type = spec_.MaskType(x->dtype());
    if (!training || ratio == 0.0) {
      ONNXAMP_RETURN_IF_ERROR(ctx.SetOutput(0, *x));
      if (!want_mask) return Status::Ok();
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * mask, ctx.AllocateOutput(1, mask_type, x->dims()));
      return ew::LaunchFillOne(mask_type, mask->mutable_data(), mask->num_elements(), stream, what);
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    ir::Tensor* mask = nullptr;
    if (want_mask) {
      ONNXAMP_ASSIGN_OR_RETURN(mask, ctx.AllocateOutput(1, mask_type, x->dims()));
    }
    bool* mask_bool = mask && mask_type == DType::kBool ? reinterpret_cast<bool*>(mask->mutable_data()) : nullptr;
    void* mask_typed = mask && mask_type != DType::kBool ? mask->mutable_data() : nullptr;
    // A device-resident RNG step (a captured training step) is mixed in on the device; the host's must then be 0.
    ONNXAMP_ASSIGN_OR_RETURN(const uint64_t* device_step, DeviceRngStep(ctx));
    const uint64_t seed = spec_.Seed(ctx);
    return ew::LaunchDropout(x->dtype(), x->data(), y->mutable_data(), x->num_elements(), seed, ratio, mask_bool,
                             mask_typed, stream, what, device_step);
  }

 private:
  ops::DropoutSpec spec_;
};

std::vector<DType> NumericAndBoolTypes() {
  return {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,
          DType::kInt16,   DType::kInt32,   DType::kInt64,    DType::kUint8,   DType::kUint16,
          DType::kUint32,  DType::kUint64,  DType::kBool};
}

}  // namespace

void RegisterCudaConvertSelectKernels(exec::KernelRegistry& r) {
  // Cast 1-23 (1-5: `to` is a type name), CastLike 15-23: numeric and bool inputs on the device.
  r.Register({"Cast", "", 1, 23, exec::Device::kCuda, NumericAndBoolTypes(), 0, &exec::MakeKernel<CudaCast>});
  r.Register({"CastLike", "", 15, 23, exec::Device::kCuda, NumericAndBoolTypes(), 0, &exec::MakeKernel<CudaCastLike>});
  // Clip 1-23 (1-10: attribute bounds; 11-23: optional scalar inputs), as the CPU.
  RegisterLikeCpu(r, "Clip", &exec::MakeKernel<CudaClip>);
  // Where 9-23: X and Y of any fixed-size type (strings stay on the CPU).
  r.Register({"Where", "", 9, 23, exec::Device::kCuda, NumericAndBoolTypes(), 1, &exec::MakeKernel<CudaWhere>});
  // Dropout 1-23, float types, as the CPU; ratio (1) and training_mode (2) are read on the host.
  RegisterLikeCpu(r, "Dropout", &exec::MakeKernel<CudaDropout>, {1, 2});
}

}  // namespace onnxamp::cuda
