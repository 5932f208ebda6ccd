// Split (CPU): cuts the input along `axis` (default 0) into the node's outputs, any element type, opsets 1-25.
//
// Where the sizes come from: opset 1 the optional input 1 or the `split` attribute, opsets 2-12 the `split`
// attribute, 13+ the optional input 1. Without sizes the dim is split evenly over the outputs (it must divide);
// from opset 18 `num_outputs` may be given instead: then every part has ceil(dim / num_outputs) elements except
// the last, which takes what is left.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

class SplitCpu : public exec::OpKernel {
 public:
  SplitCpu(const exec::KernelInfo& info, Status* status) : opset_(info.opset) {
    axis_ = info.node.GetInt("axis", 0);
    const size_t outputs = info.node.outputs().size();
    if (outputs == 0) {
      *status = InvalidArgument("Split needs at least one output");
      return;
    }
    if (opset_ < 13) {
      const ir::Attribute* a = info.node.FindAttribute("split");
      if (a) {
        has_split_attr_ = true;
        split_attr_ = a->ints;
        if (split_attr_.size() != outputs) {
          *status = InvalidArgument("attribute 'split' ", ShapeToString(split_attr_), " has ", split_attr_.size(),
                                    " entries but the node has ", outputs, " outputs");
          return;
        }
      }
    }
    if (opset_ >= 18) {
      const ir::Attribute* n = info.node.FindAttribute("num_outputs");
      if (n) {
        num_outputs_ = n->i;
        if (num_outputs_ < 1 || static_cast<size_t>(num_outputs_) != outputs) {
          *status =
              InvalidArgument("attribute 'num_outputs' is ", num_outputs_, " but the node has ", outputs, " outputs");
          return;
        }
      }
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(axis_, x->rank()));
    const int64_t dim = x->dims()[axis];
    const int64_t n = static_cast<int64_t>(ctx.num_outputs());
    std::vector<int64_t> split;
    const ir::Tensor* split_input = (opset_ >= 13 || opset_ == 1) ? ctx.input(1) : nullptr;
    if (split_input && split_input->num_elements() == 0) split_input = nullptr;  // empty: not given
    if (split_input) {
      if (num_outputs_ > 0) return InvalidArgument("input 'split' and attribute 'num_outputs' are both given");
      ONNXAMP_ASSIGN_OR_RETURN(split, ReadInt64s(*split_input, InputLabel(ctx, 1, "split")));
    } else if (has_split_attr_) {
      split = split_attr_;
    } else if (num_outputs_ > 0) {
      const int64_t part = (dim + n - 1) / n;
      split.assign(static_cast<size_t>(n), part);
      split.back() = dim - part * (n - 1);
      if (split.back() < 0) {
        return InvalidArgument("cannot split a dim of ", dim, " into ", n, " outputs of ", part,
                               " (num_outputs leaves the last output a negative size)");
      }
    } else {
      if (dim % n != 0) {
        return InvalidArgument("cannot split axis ", axis, " of size ", dim, " (input ", ShapeToString(x->dims()),
                               ") evenly into ", n, " outputs");
      }
      split.assign(static_cast<size_t>(n), dim / n);
    }
    if (static_cast<int64_t>(split.size()) != n) {
      return InvalidArgument("split ", ShapeToString(split), " has ", split.size(), " entries but the node has ", n,
                             " outputs");
    }
    int64_t total = 0;
    for (int64_t s : split) {
      if (s < 0) return InvalidArgument("split ", ShapeToString(split), " has a negative size");
      total += s;
    }
    if (total != dim) {
      return InvalidArgument("split ", ShapeToString(split), " sums to ", total, " but axis ", axis, " of input ",
                             ShapeToString(x->dims()), " has size ", dim);
    }
    const int64_t outer = DimProduct(x->dims(), 0, axis);
    const int64_t inner = DimProduct(x->dims(), axis + 1, x->dims().size());
    return DispatchByElementSize(x->dtype(), "Split", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* src = ElementsOf<T>(*x);
      const int64_t in_row = dim * inner;
      int64_t col = 0;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t block = split[i] * inner;
        if (ctx.output_requested(i)) {
          std::vector<int64_t> dims = x->dims();
          dims[axis] = split[i];
          ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, i, x->dtype(), dims));
          const std::vector<int64_t> copy_dims = {outer, block};
          StridedCopy(MutableElementsOf<T>(*y), src + col,
                      MakeCopyPlan(copy_dims, std::vector<int64_t>{block, 1}, std::vector<int64_t>{in_row, 1}),
                      std::is_same_v<T, std::string> ? nullptr : &ctx.threads());
        }
        col += block;
      }
      return Status::Ok();
    });
  }

 private:
  int64_t opset_;
  int64_t axis_ = 0;
  bool has_split_attr_ = false;
  std::vector<int64_t> split_attr_;
  int64_t num_outputs_ = 0;
};

}  // namespace

void RegisterSplitKernels(exec::KernelRegistry& r) {
  r.Register({"Split", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<SplitCpu>});
}

}  // namespace onnxamp::ops
