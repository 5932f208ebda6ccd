// Squeeze and Unsqueeze (CPU): remove or insert size-1 dims, any element type; the output shares the input's bytes.
//
// The axes come from the `axes` attribute before opset 13 and from input 1 from opset 13 on. Squeeze without
// axes removes every size-1 dim; squeezing a dim that is not 1 is an error naming it. Unsqueeze's axes refer to
// the output's rank (input rank + number of axes); negative axes count from the end, repeats are errors. An empty
// axes list counts as none (Squeeze then removes every size-1 dim), as ONNX Runtime reads it.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

// Reads the axes: the attribute (opset < 13) or the optional input 1. `present` says whether any were given.
Status ReadAxes(const exec::KernelContext& ctx, int64_t opset, const std::vector<int64_t>& attr, bool attr_present,
                std::vector<int64_t>* axes, bool* present) {
  if (opset < 13) {
    *axes = attr;
    *present = attr_present;
    return Status::Ok();
  }
  const ir::Tensor* t = ctx.input(1);
  *present = t != nullptr;
  if (!t) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(*axes, ReadInt64s(*t, InputLabel(ctx, 1, "axes"), /*allow_scalar=*/true));
  return Status::Ok();
}

class SqueezeCpu : public exec::OpKernel {
 public:
  SqueezeCpu(const exec::KernelInfo& info, Status*) : opset_(info.opset) {
    const ir::Attribute* a = info.node.FindAttribute("axes");
    attr_present_ = a != nullptr && opset_ < 13;
    if (attr_present_) axes_attr_ = a->ints;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "data"));
    std::vector<int64_t> axes;
    bool present = false;
    ONNXAMP_RETURN_IF_ERROR(ReadAxes(ctx, opset_, axes_attr_, attr_present_, &axes, &present));
    const std::vector<int64_t>& in = x->dims();
    std::vector<bool> drop(in.size(), false);
    if (present && !axes.empty()) {
      ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> norm, NormalizeAxes(axes, x->rank()));
      for (int64_t a : norm) {
        if (in[a] != 1) {
          return InvalidArgument("cannot squeeze axis ", a, " of input ", ShapeToString(in), ": its size is ", in[a],
                                 ", not 1");
        }
        drop[a] = true;
      }
    } else {
      for (size_t k = 0; k < in.size(); ++k) drop[k] = in[k] == 1;
    }
    std::vector<int64_t> out;
    for (size_t k = 0; k < in.size(); ++k)
      if (!drop[k]) out.push_back(in[k]);
    return SetReshapedOutput(ctx, *x, std::move(out));
  }

 private:
  int64_t opset_;
  bool attr_present_ = false;
  std::vector<int64_t> axes_attr_;
};

class UnsqueezeCpu : public exec::OpKernel {
 public:
  UnsqueezeCpu(const exec::KernelInfo& info, Status* status) : opset_(info.opset) {
    if (opset_ < 13) {
      const ir::Attribute* a = info.node.FindAttribute("axes");
      if (!a || a->type() != ir::AttrType::kInts) {
        *status = InvalidArgument("Unsqueeze-", opset_, " needs the ints attribute 'axes'");
        return;
      }
      axes_attr_ = a->ints;
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "data"));
    std::vector<int64_t> axes;
    bool present = false;
    ONNXAMP_RETURN_IF_ERROR(ReadAxes(ctx, opset_, axes_attr_, true, &axes, &present));
    if (!present) return InvalidArgument("input 1 (axes) is missing");
    const int64_t out_rank = x->rank() + static_cast<int64_t>(axes.size());
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> norm, NormalizeAxes(axes, out_rank));
    std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
    for (int64_t a : norm) inserted[a] = true;
    std::vector<int64_t> out;
    size_t next = 0;
    for (int64_t k = 0; k < out_rank; ++k) out.push_back(inserted[k] ? 1 : x->dims()[next++]);
    return SetReshapedOutput(ctx, *x, std::move(out));
  }

 private:
  int64_t opset_;
  std::vector<int64_t> axes_attr_;
};

}  // namespace

void RegisterSqueezeKernels(exec::KernelRegistry& r) {
  r.Register({"Squeeze", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<SqueezeCpu>});
  r.Register({"Unsqueeze", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<UnsqueezeCpu>});
}

}  // namespace onnxamp::ops
