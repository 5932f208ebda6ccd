// CUDA kernels (host side) of Cast, CastLike, Clip, Where and Dropout. Attributes, checks and messages are the CPU
// kernels' (runtime/ops/cast/, clip/, where/, dropout/); the device work is in cast.cu and select.cu.
//
// On the device: Cast and CastLike convert between numeric types and bool (strings stay on the CPU: a CUDA session
// refuses a Cast to string when it is created); Dropout reads its ratio and training_mode inputs on the host.
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/elementwise/elementwise_kernels.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/elementwise.h"

namespace onnxamp::cuda {
namespace {

// ---- Cast, CastLike ---------------------------------------------------------------------------------------------

// The types Cast converts on the device.
bool IsDeviceCastable(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat64:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUint8:
    case DType::kUint16:
    case DType::kUint32:
    case DType::kUint64:
    case DType::kBool:
      return true;
    default:
      return false;
  }
}

// Cast-1 names the target type with a string ("FLOAT", "INT64", ...): TensorProto.DataType's enum names.
std::optional<DType> DTypeFromProtoName(std::string_view s) {
  static constexpr std::pair<std::string_view, DType> kNames[] = {
      {"FLOAT", DType::kFloat32},   {"UINT8", DType::kUint8},       {"INT8", DType::kInt8},
      {"UINT16", DType::kUint16},   {"INT16", DType::kInt16},       {"INT32", DType::kInt32},
      {"INT64", DType::kInt64},     {"STRING", DType::kString},     {"BOOL", DType::kBool},
      {"FLOAT16", DType::kFloat16}, {"DOUBLE", DType::kFloat64},    {"UINT32", DType::kUint32},
      {"UINT64", DType::kUint64},   {"BFLOAT16", DType::kBFloat16},
  };
  for (const auto& [name, t] : kNames) {
    if (s == name) return t;
  }
  return std::nullopt;
}

// `saturate` (opset 19+) only changes float8 results, which are refused anyway; it is still checked.
Status CheckSaturate(const exec::KernelInfo& info) {
  ONNXAMP_ASSIGN_OR_RETURN(std::optional<int64_t> sat, ops::OptionalIntAttribute(info.node, "saturate"));
  if (sat && info.opset < 19) return InvalidArgument("attribute 'saturate' exists from opset 19, this is ", info.opset);
  if (sat && *sat != 0 && *sat != 1) return InvalidArgument("attribute 'saturate' must be 0 or 1, got ", *sat);
  return Status::Ok();
}

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
    const ir::Attribute* to = info.node.FindAttribute("to");
    if (!to) return InvalidArgument("attribute 'to' is required");
    if (to->type() == ir::AttrType::kString) {  // Cast-1
      auto t = DTypeFromProtoName(to->s);
      if (!t) return InvalidArgument("attribute 'to' names no element type: \"", to->s, "\"");
      to_ = *t;
    } else if (to->type() == ir::AttrType::kInt) {
      auto t = DTypeFromCode(to->i);
      if (!t) return InvalidArgument("attribute 'to' is ", to->i, ", which is no ONNX element type");
      to_ = *t;
    } else {
      return InvalidArgument("attribute 'to' must be an int, got ", ir::AttrTypeName(to->type()));
    }
    if (to_ == DType::kString) {
      return Unimplemented("attribute 'to' is string, which Cast supports on the cpu only");
    }
    if (!IsDeviceCastable(to_)) {
      return Unimplemented("attribute 'to' is ", DTypeName(to_),
                           ", which Cast does not support (numeric types, bool and string)");
    }
    return CheckSaturate(info);
  }

  DType to_ = DType::kUndefined;
};

class CudaCastLike : public exec::OpKernel {
 public:
  CudaCastLike(const exec::KernelInfo& info, Status* st) { *st = CheckSaturate(info); }

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
  CudaClip(const exec::KernelInfo& info, Status* st) : bounds_as_inputs_(info.opset >= 11) {
    if (bounds_as_inputs_) return;
    auto lo = ops::OptionalFloatAttribute(info.node, "min");
    auto hi = ops::OptionalFloatAttribute(info.node, "max");
    if (!lo.ok())
      *st = lo.status();
    else if (!hi.ok())
      *st = hi.status();
    else {
      attr_min_ = *lo;
      attr_max_ = *hi;
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (input) is missing");
    const ir::Tensor* lo = bounds_as_inputs_ ? ctx.input(1) : nullptr;
    const ir::Tensor* hi = bounds_as_inputs_ ? ctx.input(2) : nullptr;
    const char* names[] = {"", "min", "max"};
    for (int i : {1, 2}) {
      const ir::Tensor* b = i == 1 ? lo : hi;
      if (!b) continue;
      if (b->dtype() != x->dtype()) {
        return InvalidArgument("input ", i, " (", names[i], ") has element type ", DTypeName(b->dtype()), ", expected ",
                               DTypeName(x->dtype()), " like input 0");
      }
      if (b->num_elements() != 1) {
        return InvalidArgument("input ", i, " (", names[i], ") must be a scalar, got shape ",
                               ops::ShapeToString(b->dims()));
      }
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return ew::LaunchClip(x->dtype(), x->data(), y->mutable_data(), x->num_elements(), lo ? lo->data() : nullptr,
                          hi ? hi->data() : nullptr, attr_min_, attr_max_, GetCudaContext(ctx).stream(),
                          ctx.node().op_type());
  }

 private:
  bool bounds_as_inputs_;
  std::optional<float> attr_min_, attr_max_;
};

// ---- Where ------------------------------------------------------------------------------------------------------

class CudaWhere : public exec::OpKernel {
 public:
  CudaWhere(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* c = ctx.input(0);
    const ir::Tensor* x = ctx.input(1);
    const ir::Tensor* y = ctx.input(2);
    if (!c || !x || !y) return InvalidArgument("input ", !c ? 0 : !x ? 1 : 2, " is missing");
    if (c->dtype() != DType::kBool) {
      return InvalidArgument("input 0 (condition) has element type ", DTypeName(c->dtype()), ", expected bool");
    }
    if (x->dtype() != y->dtype()) {
      return InvalidArgument("input 2 (Y) has element type ", DTypeName(y->dtype()), ", expected ",
                             DTypeName(x->dtype()), " like input 1 (X)");
    }
    ONNXAMP_ASSIGN_OR_RETURN(ops::BroadcastPlan plan, ops::BroadcastPlan::Make({c->dims(), x->dims(), y->dims()}));
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
  CudaDropout(const exec::KernelInfo& info, Status* st) : opset_(info.opset) { *st = Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (data) is missing");
    double ratio = attr_ratio_;
    bool training = attr_training_;
    if (opset_ >= 12) {
      ratio = 0.5;
      training = false;
      if (const ir::Tensor* r = ctx.input(1)) {
        if (r->num_elements() != 1) {
          return InvalidArgument("input 1 (ratio) must be a scalar, got shape ", ops::ShapeToString(r->dims()));
        }
        ONNXAMP_RETURN_IF_ERROR(ops::DispatchFloat(r->dtype(), [&](auto tag) -> Status {
          using T = typename decltype(tag)::type;
          ratio = static_cast<double>(ops::Load(r->values<T>()[0]));
          return Status::Ok();
        }));
      }
      if (const ir::Tensor* t = ctx.input(2)) {
        if (t->dtype() != DType::kBool || t->num_elements() != 1) {
          return InvalidArgument("input 2 (training_mode) must be a bool scalar, got ", DTypeName(t->dtype()), " ",
                                 ops::ShapeToString(t->dims()));
        }
        training = t->values<bool>()[0];
      }
      if (!(ratio >= 0.0 && ratio <= 1.0)) {
        return InvalidArgument("input 1 (ratio) must be in [0, 1], got ", ratio);
      }
    }
    const std::string& what = ctx.node().op_type();
    cudaStream_t stream = GetCudaContext(ctx).stream();
    const bool want_mask = ctx.num_outputs() >= 2 && ctx.output_requested(1);
    const DType mask_type = opset_ < 10 ? x->dtype() : DType::kBool;
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
    const uint64_t seed = seed_ ? static_cast<uint64_t>(*seed_) : ctx.seed();
    return ew::LaunchDropout(x->dtype(), x->data(), y->mutable_data(), x->num_elements(), seed, ratio, mask_bool,
                             mask_typed, stream, what);
  }

 private:
  Status Init(const exec::KernelInfo& info) {
    if (opset_ >= 12) {
      ONNXAMP_ASSIGN_OR_RETURN(seed_, ops::OptionalIntAttribute(info.node, "seed"));
      return Status::Ok();
    }
    ONNXAMP_ASSIGN_OR_RETURN(float ratio, ops::FloatAttribute(info.node, "ratio", 0.5f));
    if (!(ratio >= 0.0f && ratio <= 1.0f)) return InvalidArgument("attribute 'ratio' must be in [0, 1], got ", ratio);
    attr_ratio_ = ratio;
    if (opset_ < 7) {
      ONNXAMP_ASSIGN_OR_RETURN(int64_t is_test, ops::IntAttribute(info.node, "is_test", 0));
      attr_training_ = is_test == 0;
    }
    return Status::Ok();
  }

  int64_t opset_;
  double attr_ratio_ = 0.5;
  bool attr_training_ = false;
  std::optional<int64_t> seed_;
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
  // Clip 1-23 (1-10: attribute bounds; 11-23: optional scalar inputs), numeric types.
  std::vector<DType> numeric = NumericAndBoolTypes();
  numeric.pop_back();
  r.Register({"Clip", "", 1, 23, exec::Device::kCuda, numeric, 0, &exec::MakeKernel<CudaClip>});
  // Where 9-23: X and Y of any fixed-size type (strings stay on the CPU).
  r.Register({"Where", "", 9, 23, exec::Device::kCuda, NumericAndBoolTypes(), 1, &exec::MakeKernel<CudaWhere>});
  // Dropout 1-23, float types; ratio (1) and training_mode (2) are read on the host.
  exec::KernelDef dropout{"Dropout",
                          "",
                          1,
                          23,
                          exec::Device::kCuda,
                          {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
                          0,
                          &exec::MakeKernel<CudaDropout>};
  dropout.host_inputs = {1, 2};
  r.Register(std::move(dropout));
}

}  // namespace onnxamp::cuda
