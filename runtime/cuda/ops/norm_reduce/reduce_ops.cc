// Reduce* and ArgMax/ArgMin on CUDA: attributes, axes and shapes checked by the helpers the CPU kernels use
// (runtime/ops/reduce/reduce_spec.h, runtime/ops/argmax/argmax.h), then the launchers of reduce_kernels.cu.
// From opset 18 (13 for ReduceSum) the axes are input 1, read on the host.
#include <vector>

#include "runtime/cuda/ops/norm_reduce/norm_reduce_host.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"
#include "runtime/cuda/ops/norm_reduce/reduce_layout.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/argmax/argmax.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/reduce/reduce_spec.h"

namespace onnxamp::cuda::norm_reduce {

Status MakeReduceLayout(const std::vector<int64_t>& dims, const std::vector<bool>& reduced, ReduceLayout* layout) {
  const ops::reduce::MergedReduceDims merged = ops::reduce::MergeReduceDims(dims, reduced);
  const std::vector<bool>& flags = merged.reduced;
  const size_t m = merged.dims.size();
  ReduceLayout L;
  L.out_count = merged.out_count;
  L.reduce_count = merged.reduce_count;
  L.inner_reduced = flags[m - 1];
  L.inner = merged.dims[m - 1];
  for (size_t d = 0; d + 1 < m; ++d) {
    int& rank = flags[d] ? L.red_rank : L.kept_rank;
    if (rank == kMaxMergedDims) {
      return Unimplemented("a reduction over more than ", kMaxMergedDims, " separate dimension groups (input shape ",
                           ops::reduce::DimsToString(dims), ")");
    }
    (flags[d] ? L.red_dims : L.kept_dims)[rank] = merged.dims[d];
    (flags[d] ? L.red_strides : L.kept_strides)[rank] = merged.strides[d];
    ++rank;
  }
  *layout = L;
  return Status::Ok();
}

namespace {

template <ReduceKind K>
class ReduceCuda : public exec::OpKernel {
 public:
  ReduceCuda(const exec::KernelInfo& info, Status* st) {
    *st = ops::ParseReduceSpec(info, K == ReduceKind::kSum ? 13 : 18, &spec_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<bool> mask,
                             ops::ResolveReduceMask(spec_, x, spec_.axes_input ? ctx.input(1) : nullptr));
    ReduceLayout layout;
    ONNXAMP_RETURN_IF_ERROR(MakeReduceLayout(x->dims(), mask, &layout));
    ONNXAMP_ASSIGN_OR_RETURN(
        ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), ops::reduce::ReducedDims(x->dims(), mask, spec_.keepdims)));
    if (layout.out_count == 0) return Status::Ok();
    return LaunchReduce(K, x->dtype(), x->data(), y->mutable_data(), layout, WorkspaceOf(ctx), StreamOf(ctx));
  }

 private:
  ops::ReduceSpec spec_;
};

template <bool kMax>
class ArgExtremeCuda : public exec::OpKernel {
 public:
  ArgExtremeCuda(const exec::KernelInfo& info, Status* st) { *st = ops::ParseArgExtremeSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const ops::ArgExtremeShape shape, ops::ResolveArgExtremeShape(spec_, x, kMax));
    const ops::reduce::AxisView& v = shape.view;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kInt64, shape.out_dims));
    if (v.outer * v.inner == 0) return Status::Ok();
    return LaunchArgExtreme(kMax, x->dtype(), x->data(), reinterpret_cast<int64_t*>(y->mutable_data()), v.outer, v.n,
                            v.inner, spec_.select_last, StreamOf(ctx));
  }

 private:
  ops::ArgExtremeSpec spec_;
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

  RegisterLikeCpu(r, "ArgMax", &exec::MakeKernel<ArgExtremeCuda<true>>);
  RegisterLikeCpu(r, "ArgMin", &exec::MakeKernel<ArgExtremeCuda<false>>);
}

}  // namespace onnxamp::cuda::norm_reduce
