// The scale and zero-point layouts of QuantizeLinear and DequantizeLinear (per tensor, per axis, blocked), their
// attributes and type checks, and the attributes and checks of com.onnxamp FakeQuantize and FakeQuantizeGrad: shared by
// the CPU kernels (quantize_cpu.cc) and the CUDA kernels (runtime/cuda/ops/elementwise/quantize_cuda.cc,
// fake_quantize_cuda.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

// The float types of QuantizeLinear's x and scale and DequantizeLinear's output.
inline bool IsFloatValueType(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; }

// DequantizeLinear also takes a double scale (beyond the ONNX type list; the trainer's finite-difference checks of
// its gradient run in double), computing in double.
inline bool IsDequantizeScaleType(DType t) { return IsFloatValueType(t) || t == DType::kFloat64; }

// Checks that `t` (named `label`) is float, float16 or bfloat16, or double when `allow_double`, or int32 when
// `allow_int32`.
inline Status CheckQuantFloatType(const ir::Tensor& t, bool allow_int32, bool allow_double, const std::string& label) {
  if (allow_int32 && t.dtype() == DType::kInt32) return Status::Ok();
  if (!IsFloatValueType(t.dtype()) && !(allow_double && t.dtype() == DType::kFloat64)) {
    return InvalidArgument(label, " is ", DTypeName(t.dtype()), ", expected float, float16 or bfloat16",
                           allow_int32 ? " (or int32)" : "");
  }
  return Status::Ok();
}

// QuantizeLinear's output type: the zero point's, else attribute output_dtype, else uint8; an output_dtype that
// differs from the zero point's type is an error.
inline StatusOr<DType> QuantizeOutputType(const exec::KernelContext& ctx, std::optional<DType> output_dtype,
                                          const ir::Tensor* zero_point) {
  if (zero_point && output_dtype && *output_dtype != zero_point->dtype()) {
    return InvalidArgument("attribute 'output_dtype' is ", DTypeName(*output_dtype), " but ",
                           InputLabel(ctx, 2, "y_zero_point"), " is ", DTypeName(zero_point->dtype()));
  }
  return zero_point ? zero_point->dtype() : output_dtype.value_or(DType::kUint8);
}

// DequantizeLinear's zero point, when given, has x's type.
inline Status CheckDequantizeZeroPoint(const exec::KernelContext& ctx, const ir::Tensor& x,
                                       const ir::Tensor* zero_point) {
  if (zero_point && zero_point->dtype() != x.dtype()) {
    return InvalidArgument(InputLabel(ctx, 2, "x_zero_point"), " is ", DTypeName(zero_point->dtype()),
                           ", expected x's ", DTypeName(x.dtype()));
  }
  return Status::Ok();
}

// DequantizeLinear's output type (attribute output_dtype, else the scale's), one IsDequantizeScaleType takes.
inline StatusOr<DType> DequantizeOutputType(std::optional<DType> output_dtype, const ir::Tensor& scale) {
  const DType out = output_dtype.value_or(scale.dtype());
  if (!IsDequantizeScaleType(out)) {
    return InvalidArgument("the output type ", DTypeName(out), " is not float, float16 or bfloat16");
  }
  return out;
}

// ceil(dim / block) without overflow for any block >= 1.
inline int64_t BlockCount(int64_t dim, int64_t block) { return dim == 0 ? 0 : 1 + (dim - 1) / block; }

// Where each element of x finds its scale and zero point: x viewed as [outer, dim, inner] around `axis`; the scale
// index of element (o, a, i) is 0 (per tensor), a (per axis) or (o * blocks + a / block) * inner + i (blocked).
struct QuantLayout {
  int64_t outer = 1, dim = 1, inner = 1;
  int64_t block = 0;  // 0: per tensor or per axis
  bool per_tensor = true;

  int64_t ScaleIndex(int64_t o, int64_t a, int64_t i) const {
    if (per_tensor) return 0;
    if (block == 0) return a;
    return (o * BlockCount(dim, block) + a / block) * inner + i;
  }
};

// The attributes shared by both ops and the layout check of one run.
class QuantSpec {
 public:
  // `opset`: the ONNX opset whose rules apply (0: the node's own; com.onnxamp FakeQuantize follows opset 13's).
  Status Init(const exec::KernelInfo& info, int64_t opset = 0) {
    opset_ = opset != 0 ? opset : info.opset;
    ONNXAMP_ASSIGN_OR_RETURN(axis_, IntAttribute(info.node, "axis", 1));
    ONNXAMP_ASSIGN_OR_RETURN(block_size_, IntAttribute(info.node, "block_size", 0));
    if (block_size_ < 0) return InvalidArgument("attribute 'block_size' is ", block_size_, ", expected at least 0");
    ONNXAMP_ASSIGN_OR_RETURN(output_dtype_, IntAttribute(info.node, "output_dtype", 0));
    if (output_dtype_ != 0 && !DTypeFromCode(output_dtype_)) {
      return InvalidArgument("attribute 'output_dtype' ", output_dtype_, " is not an element type");
    }
    return Status::Ok();
  }

  std::optional<DType> output_dtype() const { return output_dtype_ == 0 ? std::nullopt : DTypeFromCode(output_dtype_); }

  // The layout of `scale` (and of `zero_point`, which must have its shape) for x; the scale is input `scale_input`
  // and the zero point the next one (for the error messages).
  StatusOr<QuantLayout> Layout(const exec::KernelContext& ctx, const ir::Tensor& x, const ir::Tensor& scale,
                               const ir::Tensor* zero_point, size_t scale_input = 1) const {
    const std::string scale_label = InputLabel(ctx, scale_input, "scale");
    // A scale and zero point of one element each may differ in shape ([] and [1]), as exported models mix them.
    const bool one_each =
        block_size_ == 0 && scale.num_elements() == 1 && zero_point && zero_point->num_elements() == 1;
    if (zero_point && zero_point->dims() != scale.dims() && !one_each) {
      return InvalidArgument(InputLabel(ctx, scale_input + 1, "zero_point"), " has shape ",
                             ShapeToString(zero_point->dims()), ", expected the scale's ", ShapeToString(scale.dims()));
    }
    QuantLayout l;
    const bool scalar = scale.rank() == 0 || (scale.rank() == 1 && scale.dims()[0] == 1 && block_size_ == 0);
    if (scalar) return l;
    if (opset_ < 13)
      return InvalidArgument(scale_label, " must be a scalar at opset ", opset_, ", got ", ShapeToString(scale.dims()));
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(axis_, x.rank()));
    l.per_tensor = false;
    l.outer = DimProduct(x.dims(), 0, static_cast<size_t>(axis));
    l.dim = x.dims()[axis];
    l.inner = DimProduct(x.dims(), static_cast<size_t>(axis) + 1, x.dims().size());
    if (block_size_ == 0) {
      if (scale.rank() != 1 || scale.dims()[0] != l.dim) {
        return InvalidArgument(scale_label, " has shape ", ShapeToString(scale.dims()), ", expected a scalar or [",
                               l.dim, "] (dim ", axis, " of x ", ShapeToString(x.dims()), ")");
      }
      return l;
    }
    std::vector<int64_t> want = x.dims();
    want[axis] = BlockCount(l.dim, block_size_);
    if (scale.dims() != want) {
      return InvalidArgument(scale_label, " has shape ", ShapeToString(scale.dims()), ", expected ",
                             ShapeToString(want), " for blocks of ", block_size_, " along axis ", axis, " of x ",
                             ShapeToString(x.dims()));
    }
    l.block = block_size_;
    return l;
  }

 private:
  int64_t opset_ = 0;
  int64_t axis_ = 1;
  int64_t block_size_ = 0;
  int64_t output_dtype_ = 0;
};

// What FakeQuantize and FakeQuantizeGrad share: QuantizeLinear's layout rules at opset 13 (per tensor or per axis),
// the range attributes qmin and qmax, and a scale of x's type.
class FakeQuantSpec {
 public:
  Status Init(const exec::KernelInfo& info) {
    ONNXAMP_RETURN_IF_ERROR(spec_.Init(info, 13));
    // Per-tensor or per-axis scales only: the gradient's per-scale sums walk one axis (the training graphs never
    // make a FakeQuantize from a blocked pair, trainer/graph/fake_quantize.cc).
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t block_size, IntAttribute(info.node, "block_size", 0));
    if (block_size != 0) {
      return InvalidArgument("attribute 'block_size' is ", block_size, ": FakeQuantize takes per-tensor or per-axis ",
                             "scales");
    }
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t qmin, IntAttribute(info.node, "qmin", 0));
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t qmax, IntAttribute(info.node, "qmax", 255));
    if (qmin >= qmax || qmin < -65536 || qmax > 65535) {
      return InvalidArgument("attributes qmin ", qmin, " and qmax ", qmax, " do not make an integer range");
    }
    qmin_ = static_cast<float>(qmin);
    qmax_ = static_cast<float>(qmax);
    return Status::Ok();
  }

  // The layout of x (input x_input), its scale (input x_input + 1) and zero point (x_input + 2, optional).
  StatusOr<QuantLayout> Layout(const exec::KernelContext& ctx, size_t x_input, const ir::Tensor& x,
                               const ir::Tensor& scale) const {
    if (scale.dtype() != x.dtype()) {
      return InvalidArgument(InputLabel(ctx, x_input + 1, "scale"), " is ", DTypeName(scale.dtype()), ", expected x's ",
                             DTypeName(x.dtype()));
    }
    return spec_.Layout(ctx, x, scale, ctx.input(x_input + 2), x_input + 1);
  }

  float qmin() const { return qmin_; }
  float qmax() const { return qmax_; }

 private:
  QuantSpec spec_;
  float qmin_ = 0, qmax_ = 255;
};

}  // namespace onnxamp::ops
