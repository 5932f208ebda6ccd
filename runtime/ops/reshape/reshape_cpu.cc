// Reshape and Flatten (CPU): new dims over the same bytes, any element type; the output shares the input's buffer.
//
// Reshape: opsets 1-4 take the target shape from the `shape` attribute, 5+ from input 1. In the target a 0 copies
// the input's dim at that position and a -1 (at most one) is inferred from the element count; from opset 14
// `allowzero=1` makes a 0 a real zero-sized dim instead (and then 0 and -1 may not appear together).
// Flatten: [d0..dn) -> [d0*..*d(axis-1), d(axis)*..*d(n-1)], axis in [-rank, rank] (default 1).
#include <limits>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

// The output dims of Reshape for `input` dims and a requested `shape`.
StatusOr<std::vector<int64_t>> ReshapeOutputDims(std::span<const int64_t> input, std::span<const int64_t> shape,
                                                 bool allow_zero) {
  std::vector<int64_t> out(shape.begin(), shape.end());
  int infer = -1;
  bool has_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t v = shape[i];
    if (v == -1) {
      if (infer >= 0) {
        return InvalidArgument("shape ", ShapeToString(shape), " has more than one -1 (dims ", infer, " and ", i, ")");
      }
      infer = static_cast<int>(i);
    } else if (v < -1) {
      return InvalidArgument("shape ", ShapeToString(shape), " has an invalid dim ", v, " at position ", i);
    } else if (v == 0) {
      has_zero = true;
      if (!allow_zero) {
        if (i >= input.size()) {
          return InvalidArgument("shape ", ShapeToString(shape), " copies dim ", i, " (a 0) but the input ",
                                 ShapeToString(input), " has rank ", input.size());
        }
        out[i] = input[i];
      }
    }
  }
  if (allow_zero && has_zero && infer >= 0) {
    return InvalidArgument("shape ", ShapeToString(shape), " has both 0 and -1, which allowzero=1 forbids");
  }
  const int64_t count = DimProduct(input, 0, input.size());
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (static_cast<int>(i) == infer) continue;
    if (out[i] != 0 && known > std::numeric_limits<int64_t>::max() / out[i]) {
      return InvalidArgument("cannot reshape input ", ShapeToString(input), " (", count, " elements) to ",
                             ShapeToString(shape), ": the element count overflows");
    }
    known *= out[i];
  }
  if (infer >= 0) {
    if (known == 0 || count % known != 0) {
      return InvalidArgument("cannot reshape input ", ShapeToString(input), " (", count, " elements) to ",
                             ShapeToString(shape), ": the -1 dim cannot be inferred");
    }
    out[infer] = count / known;
  } else if (known != count) {
    return InvalidArgument("cannot reshape input ", ShapeToString(input), " (", count, " elements) to ",
                           ShapeToString(shape), " (", known, " elements)");
  }
  return out;
}

class ReshapeCpu : public exec::OpKernel {
 public:
  ReshapeCpu(const exec::KernelInfo& info, Status* status) : opset_(info.opset) {
    allow_zero_ = info.opset >= 14 && info.node.GetInt("allowzero", 0) != 0;
    if (opset_ < 5) {
      const ir::Attribute* a = info.node.FindAttribute("shape");
      if (!a || a->type() != ir::AttrType::kInts) {
        *status = InvalidArgument("Reshape-", opset_, " needs the ints attribute 'shape'");
        return;
      }
      shape_attr_ = a->ints;
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "data"));
    std::vector<int64_t> shape = shape_attr_;
    if (opset_ >= 5) {
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* s, RequireInput(ctx, 1, "shape"));
      ONNXAMP_ASSIGN_OR_RETURN(shape, ReadInt64s(*s, InputLabel(ctx, 1, "shape")));
    }
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReshapeOutputDims(x->dims(), shape, allow_zero_));
    return SetReshapedOutput(ctx, *x, std::move(dims));
  }

 private:
  int64_t opset_;
  bool allow_zero_ = false;
  std::vector<int64_t> shape_attr_;
};

class FlattenCpu : public exec::OpKernel {
 public:
  FlattenCpu(const exec::KernelInfo& info, Status*) : axis_(info.node.GetInt("axis", 1)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    const int64_t rank = x->rank();
    if (axis_ < -rank || axis_ > rank) {
      return InvalidArgument("axis ", axis_, " is out of range for rank ", rank, " (expected ", -rank, " to ", rank,
                             ")");
    }
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    return SetReshapedOutput(ctx, *x, {DimProduct(x->dims(), 0, axis), DimProduct(x->dims(), axis, x->dims().size())});
  }

 private:
  int64_t axis_;
};

}  // namespace

void RegisterReshapeKernels(exec::KernelRegistry& r) {
  r.Register({"Reshape", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ReshapeCpu>});
  r.Register({"Flatten", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<FlattenCpu>});
}

}  // namespace onnxamp::ops
