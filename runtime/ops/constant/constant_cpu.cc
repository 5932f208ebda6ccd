// Constant and ConstantOfShape (CPU).
//
// Constant (opsets 1-25): exactly one of `value` (a tensor), `sparse_value` (a COO sparse tensor, made dense
// here; 11+), `value_float`, `value_floats`, `value_int`, `value_ints`, `value_string`, `value_strings` (12+).
// The tensor is built once when the session is created; each run hands out a copy that shares its bytes.
// ConstantOfShape (opsets 9-25): a tensor of the shape given by the int64 input, filled with the one element of
// the `value` attribute (default float 0). An absurd shape is refused by the output allocation.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/constant/constant.h"

namespace onnxamp::ops {
namespace {

// The dense form of a sparse tensor: indices are [NNZ, rank] coordinates or [NNZ] linear positions.
StatusOr<ir::Tensor> Densify(const ir::SparseTensor& sp) {
  const ir::Tensor& values = sp.values;
  const ir::Tensor& indices = sp.indices;
  ONNXAMP_RETURN_IF_ERROR(CheckFitsInMemory(values.dtype(), sp.dims, "sparse_value"));
  const int64_t nnz = values.num_elements();
  if (values.rank() != 1) {
    return InvalidArgument("sparse_value: values must be 1-D, got shape ", ShapeToString(values.dims()));
  }
  if (indices.dtype() != DType::kInt64 && indices.dtype() != DType::kInt32) {
    return InvalidArgument("sparse_value: indices must be int64, got ", DTypeName(indices.dtype()));
  }
  const int64_t rank = static_cast<int64_t>(sp.dims.size());
  const bool linear = indices.rank() == 1;
  if (!(linear && indices.dims()[0] == nnz) &&
      !(indices.rank() == 2 && indices.dims()[0] == nnz && indices.dims()[1] == rank)) {
    return InvalidArgument("sparse_value: indices shape ", ShapeToString(indices.dims()), " does not fit ", nnz,
                           " values of a rank-", rank, " tensor (expected [", nnz, "] or [", nnz, ",", rank, "])");
  }
  auto index_at = [&](int64_t i) -> int64_t {
    return indices.dtype() == DType::kInt64 ? indices.values<int64_t>()[i] : indices.values<int32_t>()[i];
  };
  const int64_t count = DimProduct(sp.dims, 0, sp.dims.size());
  const std::vector<int64_t> strides = ContiguousStrides(sp.dims);
  std::vector<int64_t> positions(static_cast<size_t>(nnz));
  for (int64_t i = 0; i < nnz; ++i) {
    int64_t pos = 0;
    if (linear) {
      pos = index_at(i);
    } else {
      for (int64_t k = 0; k < rank; ++k) {
        const int64_t c = index_at(i * rank + k);
        if (c < 0 || c >= sp.dims[k]) {
          return OutOfRange("sparse_value: index ", c, " of value ", i, " is out of range for dim ", k, " of ",
                            ShapeToString(sp.dims));
        }
        pos += c * strides[k];
      }
    }
    if (pos < 0 || pos >= count) {
      return OutOfRange("sparse_value: position ", pos, " of value ", i, " is out of range for ",
                        ShapeToString(sp.dims));
    }
    positions[i] = pos;
  }
  ir::Tensor dense(values.dtype(), sp.dims);  // zero-filled (empty strings)
  ONNXAMP_RETURN_IF_ERROR(DispatchByElementSize(values.dtype(), "Constant", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* src = ElementsOf<T>(values);
    T* dst = MutableElementsOf<T>(dense);
    for (int64_t i = 0; i < nnz; ++i) dst[positions[i]] = src[i];
    return Status::Ok();
  }));
  return dense;
}

StatusOr<ir::Tensor> ConstantFromAttribute(const ir::Attribute& a) {
  const std::string& n = a.name();
  if (n == "value") {
    if (a.type() != ir::AttrType::kTensor) return InvalidArgument("attribute 'value' must be a tensor");
    if (!a.t.has_data()) return InvalidArgument("attribute 'value' has no data (external data not loaded)");
    ir::Tensor t = a.t;
    t.set_name("");
    return t;
  }
  if (n == "sparse_value") {
    if (a.type() != ir::AttrType::kSparseTensor) return InvalidArgument("attribute 'sparse_value' must be sparse");
    return Densify(a.sparse_tensor);
  }
  if (n == "value_float") {
    ir::Tensor t(DType::kFloat32, {});
    t.mutable_values<float>()[0] = a.f;
    return t;
  }
  if (n == "value_floats") {
    ir::Tensor t(DType::kFloat32, {static_cast<int64_t>(a.floats.size())});
    std::copy(a.floats.begin(), a.floats.end(), t.mutable_values<float>().begin());
    return t;
  }
  if (n == "value_int") {
    ir::Tensor t(DType::kInt64, {});
    t.mutable_values<int64_t>()[0] = a.i;
    return t;
  }
  if (n == "value_ints") {
    ir::Tensor t(DType::kInt64, {static_cast<int64_t>(a.ints.size())});
    std::copy(a.ints.begin(), a.ints.end(), t.mutable_values<int64_t>().begin());
    return t;
  }
  if (n == "value_string") {
    ir::Tensor t(DType::kString, {});
    t.mutable_strings()[0] = a.s;
    return t;
  }
  if (n == "value_strings") {
    ir::Tensor t(DType::kString, {static_cast<int64_t>(a.strings.size())});
    t.mutable_strings() = a.strings;
    return t;
  }
  return InvalidArgument("unknown attribute '", n, "'");
}

class ConstantCpu : public exec::OpKernel {
 public:
  ConstantCpu(const exec::KernelInfo& info, Status* status) {
    const ir::Attribute* chosen = nullptr;
    for (const ir::Attribute& a : info.node.attributes()) {
      if (chosen) {
        *status = InvalidArgument("Constant has both attribute '", chosen->name(), "' and '", a.name(),
                                  "'; expected exactly one value attribute");
        return;
      }
      chosen = &a;
    }
    if (!chosen) {
      *status = InvalidArgument(
          "Constant has no value attribute (expected one of value, sparse_value, value_float, value_floats, "
          "value_int, value_ints, value_string, value_strings)");
      return;
    }
    StatusOr<ir::Tensor> t = ConstantFromAttribute(*chosen);
    if (!t.ok()) {
      *status = t.status();
      return;
    }
    value_ = std::move(t).value();
  }

  Status Compute(exec::KernelContext& ctx) const override { return ctx.SetOutput(0, value_); }

 private:
  ir::Tensor value_;
};

class ConstantOfShapeCpu : public exec::OpKernel {
 public:
  ConstantOfShapeCpu(const exec::KernelInfo& info, Status* status) : value_(DType::kFloat32, {1}) {
    StatusOr<ir::Tensor> value = ConstantOfShapeValue(info.node);
    if (!value.ok()) {
      *status = value.status();
      return;
    }
    value_ = std::move(value).value();
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> dims, ConstantOfShapeDims(ctx));
    return DispatchByElementSize(value_.dtype(), "ConstantOfShape", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, value_.dtype(), dims));
      const T v = ElementsOf<T>(value_)[0];
      T* out = MutableElementsOf<T>(*y);
      const int64_t n = y->num_elements();
      constexpr int64_t kGrain = 1 << 16;
      if (!std::is_same_v<T, std::string> && n >= 2 * kGrain) {
        ctx.threads().ParallelFor(n, kGrain, [&](int64_t b, int64_t e) { std::fill(out + b, out + e, v); });
      } else {
        std::fill_n(out, n, v);
      }
      return Status::Ok();
    });
  }

 private:
  ir::Tensor value_;
};

}  // namespace

void RegisterConstantKernels(exec::KernelRegistry& r) {
  r.Register({"Constant", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ConstantCpu>});
  r.Register({"ConstantOfShape", "", 9, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ConstantOfShapeCpu>});
}

}  // namespace onnxamp::ops
