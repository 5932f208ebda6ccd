// Shape and Size (CPU): the input's dims (int64 [rank], or a slice of them) and element count (int64 scalar),
// for inputs of any element type. Shape's `start`/`end` attributes (opset 15+) select dims as in Python slicing:
// negative values count from the end, both are clamped to [0, rank], and start >= end gives an empty result.
#include <optional>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

class ShapeCpu : public exec::OpKernel {
 public:
  ShapeCpu(const exec::KernelInfo& info, Status*) {
    if (info.opset < 15) return;
    start_ = info.node.GetInt("start", 0);
    if (const ir::Attribute* e = info.node.FindAttribute("end")) end_ = e->i;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "data"));
    const int64_t rank = x->rank();
    auto clamp = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
    const int64_t start = clamp(start_);
    const int64_t end = end_ ? clamp(*end_) : rank;
    const int64_t n = std::max<int64_t>(0, end - start);
    ir::Tensor y(DType::kInt64, {n});
    auto out = y.mutable_values<int64_t>();
    for (int64_t i = 0; i < n; ++i) out[i] = x->dims()[start + i];
    return ctx.SetOutput(0, std::move(y));
  }

 private:
  int64_t start_ = 0;
  std::optional<int64_t> end_;
};

class SizeCpu : public exec::OpKernel {
 public:
  SizeCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "data"));
    ir::Tensor y(DType::kInt64, {});
    y.mutable_values<int64_t>()[0] = x->num_elements();
    return ctx.SetOutput(0, std::move(y));
  }
};

}  // namespace

void RegisterShapeKernels(exec::KernelRegistry& r) {
  r.Register({"Shape", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ShapeCpu>});
  r.Register({"Size", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<SizeCpu>});
}

}  // namespace onnxamp::ops
