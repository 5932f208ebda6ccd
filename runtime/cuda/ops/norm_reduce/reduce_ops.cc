// Reduce* and ArgMax/ArgMin on CUDA: attributes, axes and shapes checked as the CPU kernels do
// (runtime/ops/reduce/reduce_cpu.cc, runtime/ops/argmax/argmax_cpu.cc), then the launchers of reduce_kernels.cu.
// From opset 18 (13 for ReduceSum) the axes are input 1, read on the host.
#include <vector>

#include "runtime/cuda/ops/norm_reduce/norm_reduce_host.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/reduce.h"

namespace onnxamp::cuda::norm_reduce {
namespace {

// The engine's layout of reducing `dims` over the flagged dimensions: size-1 dimensions dropped, neighbours that are
// both reduced or both kept merged (as reduce::MakeReducePlan does). Unimplemented beyond kMaxMergedDims per side.
Status MakeLayout(const std::vector<int64_t>& dims, const std::vector<bool>& reduced, ReduceLayout* layout) {
  ReduceLayout L;
  std::vector<int64_t> merged;
  std::vector<bool> flags;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (reduced[d]) {
      L.reduce_count *= dims[d];
    } else {
      L.out_count *= dims[d];
    }
    if (dims[d] == 1) continue;
    if (!flags.empty() && flags.back() == reduced[d]) {
      merged.back() *= dims[d];
    } else {
      merged.push_back(dims[d]);
      flags.push_back(reduced[d]);
    }
  }
  if (merged.empty()) {  // a scalar, or only dims of size 1: each output is one input value
    merged.push_back(1);
    flags.push_back(true);
  }
  const size_t m = merged.size();
  std::vector<int64_t> stride(m, 1);
  for (size_t d = m - 1; d > 0; --d) stride[d - 1] = stride[d] * merged[d];
  L.inner_reduced = flags[m - 1];
  L.inner = merged[m - 1];
  for (size_t d = 0; d + 1 < m; ++d) {
    int& rank = flags[d] ? L.red_rank : L.kept_rank;
    if (rank == kMaxMergedDims) {
      return Unimplemented("a reduction over more than ", kMaxMergedDims, " separate dimension groups (input shape ",
                           ops::reduce::DimsToString(dims), ")");
    }
    (flags[d] ? L.red_dims : L.kept_dims)[rank] = merged[d];
    (flags[d] ? L.red_strides : L.kept_strides)[rank] = stride[d];
    ++rank;
  }
  *layout = L;
  return Status::Ok();
}

template <ReduceKind K>
class ReduceCuda : public exec::OpKernel {
 public:
  ReduceCuda(const exec::KernelInfo& info, Status* st) {
    const ir::Node& node = info.node;
    keepdims_ = node.GetInt("keepdims", 1) != 0;
    const int64_t axes_input_since = K == ReduceKind::kSum ? 13 : 18;
    axes_input_ = info.opset >= axes_input_since;
    if (axes_input_) {
      if (node.FindAttribute("axes")) {
        *st = InvalidArgument("attribute 'axes' is not allowed at opset ", info.opset, ": from opset ",
                              axes_input_since, " the axes are input 1");
        return;
      }
      const int64_t noop = node.GetInt("noop_with_empty_axes", 0);
      if (noop != 0 && noop != 1) {
        *st = InvalidArgument("attribute 'noop_with_empty_axes' must be 0 or 1, got ", noop);
        return;
      }
      noop_with_empty_axes_ = noop == 1;
    } else {
      axes_ = node.GetInts("axes");
      if (auto rank = ops::reduce::DeclaredRank(node, 0)) {
        StatusOr<std::vector<bool>> mask = ops::reduce::AxesMask(axes_, *rank);
        if (!mask.ok()) {
          *st = mask.status().WithContext("attribute 'axes'");
          return;
        }
      }
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (data) is missing");
    std::vector<int64_t> axes = axes_;
    bool noop = false;
    if (axes_input_) {
      if (const ir::Tensor* a = ctx.input(1)) {  // a host input
        if (a->dtype() != DType::kInt64) {
          return InvalidArgument("input 1 (axes): expected int64, got ", DTypeName(a->dtype()));
        }
        if (a->rank() > 1) return InvalidArgument("input 1 (axes): expected a 1-D tensor, got rank ", a->rank());
        const auto values = a->values<int64_t>();
        axes.assign(values.begin(), values.end());
      }
      noop = axes.empty() && noop_with_empty_axes_;
    }
    std::vector<bool> mask(static_cast<size_t>(x->rank()), !noop);
    if (!axes.empty()) {
      StatusOr<std::vector<bool>> m = ops::reduce::AxesMask(axes, x->rank());
      if (!m.ok()) return m.status().WithContext(axes_input_ ? "input 1 (axes)" : "attribute 'axes'");
      mask = *std::move(m);
    }
    ReduceLayout layout;
    ONNXAMP_RETURN_IF_ERROR(MakeLayout(x->dims(), mask, &layout));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y,
                             ctx.AllocateOutput(0, x->dtype(), ops::reduce::ReducedDims(x->dims(), mask, keepdims_)));
    if (layout.out_count == 0) return Status::Ok();
    return LaunchReduce(K, x->dtype(), x->data(), y->mutable_data(), layout, WorkspaceOf(ctx), StreamOf(ctx));
  }

 private:
  bool keepdims_ = true;
  bool axes_input_ = false;
  bool noop_with_empty_axes_ = false;
  std::vector<int64_t> axes_;
};

template <bool kMax>
class ArgExtremeCuda : public exec::OpKernel {
 public:
  ArgExtremeCuda(const exec::KernelInfo& info, Status* st) {
    axis_ = info.node.GetInt("axis", 0);
    keepdims_ = info.node.GetInt("keepdims", 1) != 0;
    select_last_ = info.node.GetInt("select_last_index", 0) != 0;
    if (auto rank = ops::reduce::DeclaredRank(info.node, 0)) {
      Status s = ops::reduce::NormalizeAxis(axis_, *rank).status();
      if (!s.ok()) *st = s.WithContext("attribute 'axis'");
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (data) is missing");
    StatusOr<int64_t> axis = ops::reduce::NormalizeAxis(axis_, x->rank());
    if (!axis.ok()) return axis.status().WithContext("attribute 'axis'");
    const ops::reduce::AxisView v = ops::reduce::ViewAround(x->dims(), *axis);
    if (v.n == 0 && v.outer * v.inner > 0) {
      return InvalidArgument("input 0 (data): dimension ", *axis, " is empty, so it has no ",
                             kMax ? "maximum" : "minimum");
    }
    std::vector<int64_t> out_dims = x->dims();
    if (keepdims_) {
      out_dims[*axis] = 1;
    } else {
      out_dims.erase(out_dims.begin() + *axis);
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kInt64, out_dims));
    if (v.outer * v.inner == 0) return Status::Ok();
    return LaunchArgExtreme(kMax, x->dtype(), x->data(), reinterpret_cast<int64_t*>(y->mutable_data()), v.outer, v.n,
                            v.inner, select_last_, StreamOf(ctx));
  }

 private:
  int64_t axis_ = 0;
  bool keepdims_ = true;
  bool select_last_ = false;
};

template <ReduceKind K>
void RegisterReduce(exec::KernelRegistry& r, const char* op, const std::vector<DType>& types) {
  using exec::Device;
  const int64_t axes_input_since = K == ReduceKind::kSum ? 13 : 18;
  // The same kernel reads the axes attribute before axes_input_since and the host input 1 from then on.
  r.Register({op, "", 1, axes_input_since - 1, Device::kCuda, types, 0, &exec::MakeKernel<ReduceCuda<K>>});
  r.Register({op, "", axes_input_since, 23, Device::kCuda, types, 0, &exec::MakeKernel<ReduceCuda<K>>, {1}});
}

}  // namespace

void RegisterCudaReduceKernels(exec::KernelRegistry& r) {
  // The CPU registration's element types (runtime/ops/reduce/reduce_cpu.cc, runtime/ops/argmax/argmax_cpu.cc).
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                    DType::kInt32,   DType::kInt64,   DType::kUint32,   DType::kUint64};
  std::vector<DType> extreme_types = types;  // ReduceMax/ReduceMin: also 8-bit integers and bool
  extreme_types.insert(extreme_types.end(), {DType::kInt8, DType::kUint8, DType::kBool});
  RegisterReduce<ReduceKind::kSum>(r, "ReduceSum", types);
  RegisterReduce<ReduceKind::kMean>(r, "ReduceMean", types);
  RegisterReduce<ReduceKind::kMax>(r, "ReduceMax", extreme_types);
  RegisterReduce<ReduceKind::kMin>(r, "ReduceMin", extreme_types);
  RegisterReduce<ReduceKind::kProd>(r, "ReduceProd", types);
  RegisterReduce<ReduceKind::kL1>(r, "ReduceL1", types);
  RegisterReduce<ReduceKind::kL2>(r, "ReduceL2", types);
  RegisterReduce<ReduceKind::kSumSquare>(r, "ReduceSumSquare", types);
  RegisterReduce<ReduceKind::kLogSum>(r, "ReduceLogSum", types);
  RegisterReduce<ReduceKind::kLogSumExp>(r, "ReduceLogSumExp", types);

  const std::vector<DType> arg_types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                        DType::kInt8,    DType::kUint8,   DType::kInt16,    DType::kUint16,
                                        DType::kInt32,   DType::kUint32,  DType::kInt64,    DType::kUint64};
  r.Register({"ArgMax", "", 1, 23, exec::Device::kCuda, arg_types, 0, &exec::MakeKernel<ArgExtremeCuda<true>>});
  r.Register({"ArgMin", "", 1, 23, exec::Device::kCuda, arg_types, 0, &exec::MakeKernel<ArgExtremeCuda<false>>});
}

}  // namespace onnxamp::cuda::norm_reduce
