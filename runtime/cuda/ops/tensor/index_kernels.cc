// CUDA Gather, GatherElements, Pad and ConstantOfShape: host-side checks as the CPU kernels make them (same
// messages), then one launch by element size.
//
// Gather and GatherElements read their indices on the device (they are usually produced there), so an index
// outside [-dim, dim) cannot be reported as the CPU kernel reports it without a host synchronisation: on CUDA such
// an index yields zero bytes (0, false, +0.0) in the output positions it selects, and the run succeeds.
#include <algorithm>
#include <cstring>
#include <limits>

#include "runtime/cuda/ops/tensor/tensor_launch.h"
#include "runtime/cuda/ops/tensor/tensor_util.h"

namespace onnxamp::cuda::tensor_ops {
namespace {

using ops::ContiguousStrides;
using ops::DimProduct;
using ops::InputLabel;
using ops::NormalizeAxis;
using ops::ReadInt64s;
using ops::RequireInput;
using ops::ShapeToString;

// The indices' element type, or InvalidArgument as the CPU kernel reports it.
StatusOr<bool> IndicesAreInt64(const exec::KernelContext& ctx, const ir::Tensor& indices) {
  if (indices.dtype() == DType::kInt64) return true;
  if (indices.dtype() == DType::kInt32) return false;
  return InvalidArgument(InputLabel(ctx, 1, "indices"), " must be int32 or int64, got ", DTypeName(indices.dtype()));
}

class GatherCuda : public exec::OpKernel {
 public:
  GatherCuda(const exec::KernelInfo& info, Status*) : axis_(info.node.GetInt("axis", 0)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* data, RequireInput(ctx, 0, "data"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 1, "indices"));
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(axis_, data->rank()));
    ONNXAMP_ASSIGN_OR_RETURN(const bool idx64, IndicesAreInt64(ctx, *indices));
    const std::vector<int64_t>& dd = data->dims();
    const int64_t dim = dd[axis];
    std::vector<int64_t> out_dims(dd.begin(), dd.begin() + axis);
    out_dims.insert(out_dims.end(), indices->dims().begin(), indices->dims().end());
    out_dims.insert(out_dims.end(), dd.begin() + axis + 1, dd.end());
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, data->dtype(), out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    const int64_t outer = DimProduct(dd, 0, axis);
    const int64_t inner = DimProduct(dd, axis + 1, dd.size());
    const size_t e = ElementSize(data->dtype());
    // Move each inner block in the widest unit its byte size and both addresses allow (embedding rows of fp16
    // move as 16-byte vectors).
    const void* src = DeviceData(*data);
    void* dst = MutableDeviceData(*y);
    size_t unit = e;
    for (size_t u = 16; u > e; u /= 2) {
      if ((static_cast<size_t>(inner) * e) % u == 0 && reinterpret_cast<uintptr_t>(src) % u == 0 &&
          reinterpret_cast<uintptr_t>(dst) % u == 0) {
        unit = u;
        break;
      }
    }
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
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(axis_, data->rank()));
    const std::vector<int64_t>& dd = data->dims();
    const std::vector<int64_t>& id = indices->dims();
    bool ok = id.size() == dd.size();
    for (size_t k = 0; ok && k < dd.size(); ++k) ok = static_cast<int64_t>(k) == axis || id[k] <= dd[k];
    if (!ok) {
      return InvalidArgument(InputLabel(ctx, 1, "indices"), " has shape ", ShapeToString(id),
                             "; expected the rank of data ", ShapeToString(dd), " and dims no larger off axis ", axis);
    }
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

// The arithmetic of runtime/ops/pad/pad_cpu.cc: the padded size of one axis after checking the pads (128-bit).
StatusOr<int64_t> PaddedSize(int64_t dim, int64_t begin, int64_t end, PadKind mode, size_t axis) {
  const __int128 b = begin, e = end;
  const __int128 len = dim - std::max<__int128>(0, -b) - std::max<__int128>(0, -e);
  const __int128 out = len + std::max<__int128>(0, b) + std::max<__int128>(0, e);
  if (len < 0) {
    return InvalidArgument("pads ", begin, " and ", end, " on axis ", axis, " of size ", dim,
                           " give a negative output size ",
                           static_cast<int64_t>(std::max<__int128>(dim + b + e, std::numeric_limits<int64_t>::min())));
  }
  if (out > std::numeric_limits<int64_t>::max()) {
    return OutOfRange("pads ", begin, " and ", end, " on axis ", axis, " make it too large");
  }
  if (len == 0 && out > 0 && mode != PadKind::kConstant) {
    const char* name = mode == PadKind::kEdge ? "edge" : mode == PadKind::kReflect ? "reflect" : "wrap";
    return InvalidArgument("cannot pad axis ", axis, " in ", name, " mode: it is empty after cropping (size ", dim,
                           ", pads ", begin, " and ", end, ")");
  }
  return static_cast<int64_t>(out);
}

class PadCuda : public exec::OpKernel {
 public:
  PadCuda(const exec::KernelInfo& info, Status* status) : opset_(info.opset) {
    const std::string mode = info.node.GetString("mode", "constant");
    if (mode == "constant") {
      mode_ = PadKind::kConstant;
    } else if (mode == "edge") {
      mode_ = PadKind::kEdge;
    } else if (mode == "reflect") {
      mode_ = PadKind::kReflect;
    } else if (mode == "wrap" && opset_ >= 19) {
      mode_ = PadKind::kWrap;
    } else {
      *status = InvalidArgument("attribute 'mode' is '", mode, "'; expected constant, edge, reflect",
                                opset_ >= 19 ? " or wrap" : " (wrap from opset 19)");
      return;
    }
    if (opset_ < 11) {
      const char* name = opset_ < 2 ? "paddings" : "pads";
      const ir::Attribute* a = info.node.FindAttribute(name);
      if (!a) {
        *status = InvalidArgument("Pad-", opset_, " needs the ints attribute '", name, "'");
        return;
      }
      pads_attr_ = a->ints;
      value_attr_ = info.node.GetFloat("value", 0.0f);
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "data"));
    const size_t rank = x->dims().size();
    std::vector<int64_t> pads = pads_attr_;
    std::vector<int64_t> axes;
    const ir::Tensor* value = nullptr;
    if (opset_ >= 11) {
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* p, RequireInput(ctx, 1, "pads"));
      ONNXAMP_ASSIGN_OR_RETURN(pads, ReadInt64s(*p, InputLabel(ctx, 1, "pads")));
      value = ctx.input(2);
      if (value && value->num_elements() == 0) value = nullptr;  // an empty constant_value means 0
      if (value && value->dtype() != x->dtype()) {
        return InvalidArgument(InputLabel(ctx, 2, "constant_value"), " has type ", DTypeName(value->dtype()),
                               ", expected the data's type ", DTypeName(x->dtype()));
      }
      if (value && value->num_elements() != 1) {
        return InvalidArgument(InputLabel(ctx, 2, "constant_value"), " must hold one value, got shape ",
                               ShapeToString(value->dims()));
      }
      if (const ir::Tensor* a = opset_ >= 18 ? ctx.input(3) : nullptr) {
        ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> raw, ReadInt64s(*a, InputLabel(ctx, 3, "axes")));
        ONNXAMP_ASSIGN_OR_RETURN(axes, ops::NormalizeAxes(raw, x->rank()));
      }
    }
    if (axes.empty() && !(opset_ >= 18 && ctx.input(3))) {
      for (size_t k = 0; k < rank; ++k) axes.push_back(static_cast<int64_t>(k));
    }
    if (pads.size() != 2 * axes.size()) {
      return InvalidArgument("pads ", ShapeToString(pads), " has ", pads.size(), " entries; expected ", 2 * axes.size(),
                             " (begin and end for each of ", axes.size(), " axes of input ", ShapeToString(x->dims()),
                             ")");
    }
    std::vector<int64_t> begin(rank, 0), end(rank, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      begin[axes[i]] = pads[i];
      end[axes[i]] = pads[axes.size() + i];
    }
    std::vector<int64_t> out_dims(rank);
    for (size_t k = 0; k < rank; ++k) {
      ONNXAMP_ASSIGN_OR_RETURN(out_dims[k], PaddedSize(x->dims()[k], begin[k], end[k], mode_, k));
    }
    const size_t e = ElementSize(x->dtype());
    // The fill element: constant_value's bytes (a host input), or the float `value` of opsets 1-10 stored as the
    // data's type, or zero bytes.
    unsigned char fill[16] = {};
    if (value) {
      std::memcpy(fill, value->data(), e);
    } else if (value_attr_ != 0.0f && e < 16) {
      ONNXAMP_RETURN_IF_ERROR(ops::DispatchNumericOrBool(x->dtype(), [&](auto vt) {
        using V = typename decltype(vt)::type;
        const V v = ops::Store<V>(static_cast<ops::ComputeType<V>>(value_attr_));
        std::memcpy(fill, &v, sizeof(V));
        return Status::Ok();
      }));
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    if (rank > static_cast<size_t>(kMaxMoveRank)) {
      return Unimplemented("Pad: rank ", rank, " is above the ", kMaxMoveRank, " dims the cuda kernel takes");
    }
    PadArgs args;
    args.rank = static_cast<int>(rank);
    args.mode = mode_;
    const std::vector<int64_t> in_strides = ContiguousStrides(x->dims());
    for (size_t k = 0; k < rank; ++k) {
      args.out_dims[k] = out_dims[k];
      args.in_strides[k] = in_strides[k];
      args.pad_begin[k] = std::max<int64_t>(0, begin[k]);
      args.crop[k] = std::max<int64_t>(0, -begin[k]);
      args.len[k] = x->dims()[k] - args.crop[k] - std::max<int64_t>(0, -end[k]);
    }
    return LaunchPad(MutableDeviceData(*y), DeviceData(*x), args, fill, e, GetCudaContext(ctx).stream(), "Pad");
  }

 private:
  int64_t opset_;
  PadKind mode_ = PadKind::kConstant;
  std::vector<int64_t> pads_attr_;
  float value_attr_ = 0.0f;
};

class ConstantOfShapeCuda : public exec::OpKernel {
 public:
  ConstantOfShapeCuda(const exec::KernelInfo& info, Status* status) : value_(DType::kFloat32, {1}) {
    const ir::Attribute* a = info.node.FindAttribute("value");
    if (!a) return;
    if (a->type() != ir::AttrType::kTensor || !a->t.has_data() || a->t.num_elements() != 1) {
      *status = InvalidArgument("attribute 'value' must be a tensor of one element");
      return;
    }
    const int bits = DTypeBits(a->t.dtype());
    if (a->t.dtype() == DType::kString || bits < 8 || bits > 128) {
      *status = Unimplemented("ConstantOfShape of ", DTypeName(a->t.dtype()), " is not supported on cuda");
      return;
    }
    value_ = a->t;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* s, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadInt64s(*s, InputLabel(ctx, 0, "input")));
    for (int64_t d : dims) {
      if (d < 0) return InvalidArgument(InputLabel(ctx, 0, "input"), " ", ShapeToString(dims), " has a negative dim");
    }
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
  exec::KernelDef cos{"ConstantOfShape", "", 9, 25, exec::Device::kCuda, {}, 0, &exec::MakeKernel<ConstantOfShapeCuda>};
  cos.host_inputs = {0};
  r.Register(std::move(cos));
}

}  // namespace onnxamp::cuda::tensor_ops
