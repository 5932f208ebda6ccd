// ConvGrad and ConvTransposeGrad (com.onnxamp) on CUDA: dX, dW and dB of Conv and ConvTranspose, each an optional
// output computed only when requested (contracts in runtime/ops/gradient_ops.h; CPU reference in
// runtime/ops/conv/conv_grad_cpu.cc, whose input checks and messages these kernels share).
//
// Both ops are one Conv problem, as on the CPU: ConvGrad's own Conv (its input X, its output gradient dY), or for
// ConvTransposeGrad the Conv whose adjoint the ConvTranspose is (its input dY, its output X). With cuDNN's legacy API:
// - ConvGrad's dX is the backward-data convolution of dY with W;
// - ConvTransposeGrad's dX is the forward convolution of dY with W;
// - dW is the backward-filter convolution of the Conv's input and output gradient (ConvGrad: X and dY;
//   ConvTransposeGrad: dY and X);
// - dB is dY summed per channel by a kernel of our own (dnn_grad_kernels.cu), in a fixed order.
// Only algorithms cuDNN reports as CUDNN_DETERMINISTIC are taken, so every output is the same bits run to run.
// fp16/bf16 run with FP32 compute type (tensor cores), fp32 on FMA unless the session allows TF32, double in double:
// the forward Conv's policy (cudnn_util.h). Pads that are asymmetric or negative (ConvTranspose's adjoint) go through
// a copy of the Conv's input padded (or cropped) to in + pad_begin + pad_end, convolved without padding; its data
// gradient is cropped back. 1-D problems run as 2-D with a unit height. Problems cuDNN does not take (more than 3
// spatial dims, sizes over INT_MAX, empty dims, no deterministic algorithm, "not supported" at run time) and sessions
// with KernelOptions::cuda_conv_direct run the direct kernels: the forward Conv's and ConvTranspose's for dX
// (conv_kernels.cu) and one thread per dW element (dnn_grad_kernels.cu), all in a fixed order.
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/dnn/cudnn_util.h"
#include "runtime/cuda/ops/dnn/dnn_grad_launch.h"
#include "runtime/cuda/ops/dnn/dnn_launch.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/conv/conv_kernels.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::cuda::dnn {
namespace {

// [n, c, spatial...] with a unit height inserted for 1-D problems (cuDNN takes 2-D and 3-D convolutions).
std::vector<int64_t> Lift(std::vector<int64_t> dims, size_t nsp) {
  if (nsp == 1) dims.insert(dims.begin() + 2, 1);
  return dims;
}
std::vector<int64_t> LiftSpatial(std::vector<int64_t> v, size_t nsp, int64_t unit) {
  if (nsp == 1) v.insert(v.begin(), unit);
  return v;
}

bool HasEmptyDim(const std::vector<int64_t>& dims) {
  for (int64_t d : dims)
    if (d == 0) return true;
  return false;
}

// fp32 without TF32 stays off tensor cores, as the forward Conv does.
bool UsesTensorCores(cudnnMathType_t math) {
  return math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}
cudnnMathType_t MathFor(DType dtype, bool tf32, cudnnMathType_t reported) {
  return dtype == DType::kFloat32 && !tf32 ? CUDNN_FMA_MATH : reported;
}

// The first algorithm in cuDNN's heuristic ranking `perf` that succeeded, is deterministic, keeps fp32 off tensor
// cores (without TF32) and needs a workspace within kMaxConvWorkspaceBytes (`workspace(algo, &bytes)`); sets the
// convolution's math type to it. Unimplemented when none qualifies.
template <typename Perf, typename WorkspaceFn>
StatusOr<decltype(Perf::algo)> PickDeterministic(const std::vector<Perf>& perf, int returned, const ConvDesc& conv,
                                                 DType dtype, WorkspaceFn workspace, size_t* workspace_bytes,
                                                 const char* what) {
  for (int i = 0; i < returned; ++i) {
    const Perf& p = perf[static_cast<size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC) continue;
    if (dtype == DType::kFloat32 && !conv.tf32() && UsesTensorCores(p.mathType)) continue;
    ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(conv.get(), MathFor(dtype, conv.tf32(), p.mathType)));
    size_t bytes = 0;
    if (workspace(p.algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > kMaxConvWorkspaceBytes) continue;
    *workspace_bytes = bytes;
    return p.algo;
  }
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(conv.get(), ConvMathType(dtype, conv.tf32())));
  return Unimplemented("cuDNN offers no deterministic ", what, " algorithm for this problem");
}

// One cuDNN direction of a plan: its convolution descriptor (math type per algorithm), algorithm and workspace.
template <typename Algo>
struct Direction {
  bool ok = false;
  ConvDesc conv;
  Algo algo{};
  size_t workspace_bytes = 0;
  mutable std::atomic<bool> refused{false};  // cuDNN reported "not supported" when running

  bool usable() const { return ok && !refused.load(std::memory_order_relaxed); }
};

struct ConvGradPlan {
  // What the plan was built for.
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dy_dims, x_dims, w_dims;

  ConvSizes sizes;                         // the Conv: n, c (its input channels), m (its output channels), group
  ops::WindowGeometry geo;                 // the Conv's geometry (in: its input, out: its output)
  WindowParams params;                     // of geo (direct Conv and dW)
  WindowParams adjoint;                    // of ops::SwapInOut(geo) (direct ConvTranspose: ConvGrad's dX)
  std::vector<int64_t> in_dims, out_dims;  // the Conv's input and output [n, c, in...], [n, m, out...]

  std::vector<int64_t> padded_dims;  // non-empty: the Conv's input goes through a copy padded to this
  std::vector<int64_t> pad_offset;   // -pad_begin per spatial dim, for that copy
  TensorDesc in_desc, out_desc;      // in_desc: the Conv's input (padded when padded_dims is set)
  FilterDesc w_desc;
  Direction<cudnnConvolutionFwdAlgo_t> fwd;         // ConvTransposeGrad's dX
  Direction<cudnnConvolutionBwdDataAlgo_t> data;    // ConvGrad's dX
  Direction<cudnnConvolutionBwdFilterAlgo_t> filt;  // dW

  bool Matches(const ir::Tensor& dy, const ir::Tensor& x, const ir::Tensor& w) const {
    return x.dtype() == dtype && dy.dtype() == dtype && w.dtype() == dtype && dy.dims() == dy_dims &&
           x.dims() == x_dims && w.dims() == w_dims;
  }
};

// Sets `conv` to the plan's geometry (zero pads when the input is padded first).
Status SetConvDesc(const ConvGradPlan& p, bool tf32, ConvDesc& conv) {
  const size_t nsp = p.geo.rank();
  const std::vector<int64_t> pads = p.padded_dims.empty() ? p.geo.pad_begin : std::vector<int64_t>(nsp, 0);
  return conv.Set(LiftSpatial(pads, nsp, 0), LiftSpatial(p.geo.stride, nsp, 1), LiftSpatial(p.geo.dilation, nsp, 1),
                  p.sizes.group, p.dtype, tf32);
}

// Sets up cuDNN for the directions `transpose` and the requested outputs need; a direction cuDNN does not take stays
// on the direct kernels.
Status PlanCudnn(cudnnHandle_t handle, bool tf32, bool transpose, ConvGradPlan& p) {
  const ops::WindowGeometry& g = p.geo;
  const size_t nsp = g.rank();
  if (nsp < 1 || nsp > 3 || HasEmptyDim(p.in_dims) || HasEmptyDim(p.w_dims) || HasEmptyDim(p.out_dims)) {
    return Status::Ok();
  }
  std::vector<int64_t> in_dims = p.in_dims;
  bool plain = true;
  for (size_t d = 0; d < nsp; ++d) plain = plain && g.pad_begin[d] == g.pad_end[d] && g.pad_begin[d] >= 0;
  if (!plain) {
    p.padded_dims = {p.sizes.n, p.sizes.c};
    for (size_t d = 0; d < nsp; ++d) {
      const int64_t size = g.in[d] + g.pad_begin[d] + g.pad_end[d];
      if (size <= 0) return Status::Ok();
      p.padded_dims.push_back(size);
      p.pad_offset.push_back(-g.pad_begin[d]);
    }
    in_dims = p.padded_dims;
  }
  const std::vector<int64_t> xd = Lift(in_dims, nsp), wd = Lift(p.w_dims, nsp), yd = Lift(p.out_dims, nsp);
  if (!FitsCudnn(xd) || !FitsCudnn(wd) || !FitsCudnn(yd)) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(const cudnnDataType_t type, CudnnDataType(p.dtype));
  ONNXAMP_RETURN_IF_ERROR(p.in_desc.Set(type, xd));
  ONNXAMP_RETURN_IF_ERROR(p.w_desc.Set(type, wd));
  ONNXAMP_RETURN_IF_ERROR(p.out_desc.Set(type, yd));
  // cuDNN's idea of the output must be ours; anything else stays on the direct kernels.
  ConvDesc check;
  ONNXAMP_RETURN_IF_ERROR(SetConvDesc(p, tf32, check));
  std::vector<int> cudnn_out(yd.size());
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionNdForwardOutputDim(check.get(), p.in_desc.get(), p.w_desc.get(),
                                                                      static_cast<int>(yd.size()), cudnn_out.data()));
  if (std::vector<int64_t>(cudnn_out.begin(), cudnn_out.end()) != yd) return Status::Ok();

  // Each direction: unavailable (Unimplemented) leaves it on the direct kernels; other errors fail.
  auto settle = [](auto result, auto& dir) -> Status {
    if (!result.ok()) return result.status().code() == StatusCode::kUnimplemented ? Status::Ok() : result.status();
    dir.algo = *result;
    dir.ok = true;
    return Status::Ok();
  };
  if (transpose) {
    ONNXAMP_RETURN_IF_ERROR(SetConvDesc(p, tf32, p.fwd.conv));
    int max_count = 0;
    ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(max_count > 0 ? max_count : 1));
    int returned = 0;
    ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithm_v7(
        handle, p.in_desc.get(), p.w_desc.get(), p.fwd.conv.get(), p.out_desc.get(), static_cast<int>(perf.size()),
        &returned, perf.data()));
    auto workspace = [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
      return cudnnGetConvolutionForwardWorkspaceSize(handle, p.in_desc.get(), p.w_desc.get(), p.fwd.conv.get(),
                                                     p.out_desc.get(), algo, bytes);
    };
    ONNXAMP_RETURN_IF_ERROR(settle(
        PickDeterministic(perf, returned, p.fwd.conv, p.dtype, workspace, &p.fwd.workspace_bytes, "forward"), p.fwd));
  } else {
    ONNXAMP_RETURN_IF_ERROR(SetConvDesc(p, tf32, p.data.conv));
    int max_count = 0;
    ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<size_t>(max_count > 0 ? max_count : 1));
    int returned = 0;
    ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        handle, p.w_desc.get(), p.out_desc.get(), p.data.conv.get(), p.in_desc.get(), static_cast<int>(perf.size()),
        &returned, perf.data()));
    auto workspace = [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
      return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, p.w_desc.get(), p.out_desc.get(), p.data.conv.get(),
                                                          p.in_desc.get(), algo, bytes);
    };
    ONNXAMP_RETURN_IF_ERROR(settle(
        PickDeterministic(perf, returned, p.data.conv, p.dtype, workspace, &p.data.workspace_bytes, "backward-data"),
        p.data));
  }
  {
    ONNXAMP_RETURN_IF_ERROR(SetConvDesc(p, tf32, p.filt.conv));
    int max_count = 0;
    ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<size_t>(max_count > 0 ? max_count : 1));
    int returned = 0;
    ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        handle, p.in_desc.get(), p.out_desc.get(), p.filt.conv.get(), p.w_desc.get(), static_cast<int>(perf.size()),
        &returned, perf.data()));
    auto workspace = [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, p.in_desc.get(), p.out_desc.get(),
                                                            p.filt.conv.get(), p.w_desc.get(), algo, bytes);
    };
    ONNXAMP_RETURN_IF_ERROR(settle(
        PickDeterministic(perf, returned, p.filt.conv, p.dtype, workspace, &p.filt.workspace_bytes, "backward-filter"),
        p.filt));
  }
  return Status::Ok();
}

class ConvGradCuda : public exec::OpKernel {
 public:
  ConvGradCuda(const exec::KernelInfo& info, Status* st)
      : transpose_(info.node.op_type() == ops::kConvTransposeGradOp),
        direct_(info.options.cuda_conv_direct),
        tf32_(info.options.cuda_tf32) {
    *st = ops::ParseConvAttrs(info.node, transpose_, &attrs_, &group_, /*relu=*/nullptr);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* x = ctx.input(1);
    const ir::Tensor* w = ctx.input(2);
    if (!dy) return InvalidArgument("input 0 (dY) is required");
    CudaContext& cuda = GetCudaContext(ctx);
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<const ConvGradPlan> plan, Resolve(cuda, dy, x, w));
    const ConvGradPlan& p = *plan;
    const int64_t channels = dy->dims()[1];  // the forward's output channels
    ONNXAMP_ASSIGN_OR_RETURN(const ops::ConvGradOutputs outputs, ops::AllocateConvGradOutputs(ctx, *x, *w, channels));
    ir::Tensor* dx = outputs.dx;
    ir::Tensor* dw = outputs.dw;
    ir::Tensor* db = outputs.db;
    const cudaStream_t stream = cuda.stream();
    if (db) {
      const int64_t n = dy->dims()[0];
      const int64_t plane = dy->num_elements() / std::max<int64_t>(1, n * channels);
      ONNXAMP_RETURN_IF_ERROR(LaunchChannelSums(stream, p.dtype, n, channels, plane, dy->data(), db->mutable_data()));
    }
    // The Conv's input and output: ConvGrad's X and dY, ConvTransposeGrad's dY and X.
    const ir::Tensor& conv_in = transpose_ ? *dy : *x;
    const ir::Tensor& conv_out = transpose_ ? *x : *dy;
    std::shared_ptr<ir::Buffer> padded;  // the Conv's input padded, when dW or ConvTransposeGrad's dX use it
    auto padded_input = [&]() -> StatusOr<const void*> {
      if (p.padded_dims.empty()) return conv_in.data();
      if (!padded) {
        ONNXAMP_ASSIGN_OR_RETURN(const size_t bytes, ir::Tensor::ComputeByteSize(p.dtype, p.padded_dims));
        ONNXAMP_ASSIGN_OR_RETURN(padded, cuda.Allocate(bytes));
        const std::vector<int64_t> padded_sp(p.padded_dims.begin() + 2, p.padded_dims.end());
        ONNXAMP_RETURN_IF_ERROR(LaunchWindowCopy(stream, p.dtype, p.sizes.n * p.sizes.c, p.sizes.c,
                                                 /*channels_last=*/false, p.geo.in, padded_sp, p.pad_offset,
                                                 conv_in.data(), nullptr, padded->data()));
      }
      return static_cast<const void*>(padded->data());
    };
    if (dx && dx->num_elements() > 0) {
      if (transpose_) {
        ONNXAMP_RETURN_IF_ERROR(ForwardInto(cuda, p, padded_input, w->data(), dx->mutable_data(), conv_in.data()));
      } else {
        ONNXAMP_RETURN_IF_ERROR(BackwardDataInto(cuda, p, dy->data(), w->data(), dx->mutable_data()));
      }
    }
    if (dw && dw->num_elements() > 0) {
      ONNXAMP_RETURN_IF_ERROR(
          BackwardFilterInto(cuda, p, padded_input, conv_in.data(), conv_out.data(), dw->mutable_data()));
    }
    return Status::Ok();
  }

 private:
  const char* OpName() const { return transpose_ ? ops::kConvTransposeGradOp : ops::kConvGradOp; }

  // ConvTransposeGrad's dX = Conv(dY, W).
  template <typename PaddedFn>
  Status ForwardInto(CudaContext& cuda, const ConvGradPlan& p, PaddedFn& padded_input, const void* w, void* dx,
                     const void* conv_in) const {
    if (p.fwd.usable()) {
      ONNXAMP_ASSIGN_OR_RETURN(const void* in, padded_input());
      ONNXAMP_ASSIGN_OR_RETURN(void* workspace, cuda.Workspace(p.fwd.workspace_bytes));
      const Scale one(p.dtype, 1.0), zero(p.dtype, 0.0);
      const cudnnStatus_t st =
          cudnnConvolutionForward(cuda.cudnn(), one.get(), p.in_desc.get(), in, p.w_desc.get(), w, p.fwd.conv.get(),
                                  p.fwd.algo, workspace, p.fwd.workspace_bytes, zero.get(), p.out_desc.get(), dx);
      if (st == CUDNN_STATUS_SUCCESS) return Status::Ok();
      if (!IsNotSupported(st)) return CudnnErrorToStatus(st, "cudnnConvolutionForward", OpName());
      p.fwd.refused.store(true, std::memory_order_relaxed);
    }
    return LaunchConvDirect(cuda.stream(), p.dtype, p.params, p.sizes, conv_in, w, nullptr, nullptr, false, dx);
  }

  // ConvGrad's dX = the backward-data convolution of dY with W (into a padded temporary that is then cropped, when
  // the input is padded first).
  Status BackwardDataInto(CudaContext& cuda, const ConvGradPlan& p, const void* dy, const void* w, void* dx) const {
    if (p.data.usable()) {
      std::shared_ptr<ir::Buffer> full;
      void* target = dx;
      if (!p.padded_dims.empty()) {
        ONNXAMP_ASSIGN_OR_RETURN(const size_t bytes, ir::Tensor::ComputeByteSize(p.dtype, p.padded_dims));
        ONNXAMP_ASSIGN_OR_RETURN(full, cuda.Allocate(bytes));
        target = full->data();
      }
      ONNXAMP_ASSIGN_OR_RETURN(void* workspace, cuda.Workspace(p.data.workspace_bytes));
      const Scale one(p.dtype, 1.0), zero(p.dtype, 0.0);
      const cudnnStatus_t st = cudnnConvolutionBackwardData(
          cuda.cudnn(), one.get(), p.w_desc.get(), w, p.out_desc.get(), dy, p.data.conv.get(), p.data.algo, workspace,
          p.data.workspace_bytes, zero.get(), p.in_desc.get(), target);
      if (st == CUDNN_STATUS_SUCCESS) {
        if (!full) return Status::Ok();
        const std::vector<int64_t> padded_sp(p.padded_dims.begin() + 2, p.padded_dims.end());
        return LaunchWindowCopy(cuda.stream(), p.dtype, p.sizes.n * p.sizes.c, p.sizes.c, /*channels_last=*/false,
                                padded_sp, p.geo.in, p.geo.pad_begin, full->data(), nullptr, dx);
      }
      if (!IsNotSupported(st)) return CudnnErrorToStatus(st, "cudnnConvolutionBackwardData", OpName());
      p.data.refused.store(true, std::memory_order_relaxed);
    }
    // The ConvTranspose of dY with W in the adjoint geometry: its input has the Conv's m channels, its output c.
    const ConvSizes adjoint{p.sizes.n, p.sizes.m, p.sizes.c, p.sizes.group, false};
    return LaunchConvTransposeDirect(cuda.stream(), p.dtype, p.adjoint, adjoint, dy, w, nullptr, dx);
  }

  // dW: the backward-filter convolution of the Conv's input and output gradient.
  template <typename PaddedFn>
  Status BackwardFilterInto(CudaContext& cuda, const ConvGradPlan& p, PaddedFn& padded_input, const void* conv_in,
                            const void* conv_out, void* dw) const {
    if (p.filt.usable()) {
      ONNXAMP_ASSIGN_OR_RETURN(const void* in, padded_input());
      ONNXAMP_ASSIGN_OR_RETURN(void* workspace, cuda.Workspace(p.filt.workspace_bytes));
      const Scale one(p.dtype, 1.0), zero(p.dtype, 0.0);
      const cudnnStatus_t st = cudnnConvolutionBackwardFilter(
          cuda.cudnn(), one.get(), p.in_desc.get(), in, p.out_desc.get(), conv_out, p.filt.conv.get(), p.filt.algo,
          workspace, p.filt.workspace_bytes, zero.get(), p.w_desc.get(), dw);
      if (st == CUDNN_STATUS_SUCCESS) return Status::Ok();
      if (!IsNotSupported(st)) return CudnnErrorToStatus(st, "cudnnConvolutionBackwardFilter", OpName());
      p.filt.refused.store(true, std::memory_order_relaxed);
    }
    return LaunchConvGradFilterDirect(cuda.stream(), p.dtype, p.params, p.sizes, conv_out, conv_in, dw);
  }

  // The plan for these inputs: the last one when the shapes repeat, else checked (the CPU kernel's checks and
  // messages) and built anew.
  StatusOr<std::shared_ptr<const ConvGradPlan>> Resolve(CudaContext& cuda, const ir::Tensor* dy, const ir::Tensor* x,
                                                        const ir::Tensor* w) const {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (plan_ && x && w && plan_->Matches(*dy, *x, *w)) return plan_;
    }
    ONNXAMP_ASSIGN_OR_RETURN(const ops::ConvGradShape resolved,
                             ops::ResolveConvGrad(dy, x, w, attrs_, group_, transpose_));
    const ops::ConvProblem& problem = resolved.problem;
    auto p = std::make_shared<ConvGradPlan>();
    p->sizes = ConvSizes{problem.n, problem.c, problem.m, problem.group, false};
    p->geo = problem.geo;
    ONNXAMP_RETURN_IF_ERROR(CudnnDataType(x->dtype()).status());
    p->dtype = x->dtype();
    p->dy_dims = dy->dims();
    p->x_dims = x->dims();
    p->w_dims = w->dims();
    ONNXAMP_ASSIGN_OR_RETURN(p->params, MakeWindowParams(p->geo));
    ONNXAMP_ASSIGN_OR_RETURN(p->adjoint, MakeWindowParams(ops::SwapInOut(p->geo)));
    p->in_dims = {p->sizes.n, p->sizes.c};
    p->in_dims.insert(p->in_dims.end(), p->geo.in.begin(), p->geo.in.end());
    p->out_dims = {p->sizes.n, p->sizes.m};
    p->out_dims.insert(p->out_dims.end(), p->geo.out.begin(), p->geo.out.end());
    if (!direct_) ONNXAMP_RETURN_IF_ERROR(PlanCudnn(cuda.cudnn(), tf32_, transpose_, *p));
    std::lock_guard<std::mutex> lock(mu_);
    plan_ = p;
    return std::shared_ptr<const ConvGradPlan>(std::move(p));
  }

  bool transpose_ = false;
  bool direct_ = false;  // KernelOptions::cuda_conv_direct
  bool tf32_ = false;    // KernelOptions::cuda_tf32
  ops::WindowAttrs attrs_;
  int64_t group_ = 1;
  mutable std::mutex mu_;
  mutable std::shared_ptr<const ConvGradPlan> plan_;  // guarded by mu_
};

}  // namespace

void RegisterCudaConvGradKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, ops::kConvGradOp, &exec::MakeKernel<ConvGradCuda>, {}, exec::kInternalDomain);
  RegisterLikeCpu(r, ops::kConvTransposeGradOp, &exec::MakeKernel<ConvGradCuda>, {}, exec::kInternalDomain);
}

}  // namespace onnxamp::cuda::dnn
