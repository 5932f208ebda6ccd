// Conv, com.onnxamp FusedConv, ChannelsLastConv and ConvTranspose on CUDA, with cuDNN's legacy convolution API.
//
// ChannelsLastConv is FusedConv on channels-last tensors (X [N, spatial..., C], W [M, kernel..., C/group], Z and Y
// [N, out spatial..., M]; see graph_optimizer.h): the same kernel class with a layout flag. Its shapes are checked
// and resolved on the logical (NCHW-order) dims, so messages and geometry are the CPU's; cuDNN gets NHWC / NDHWC
// tensor descriptors and the NHWC filter format, and every kernel of its own (direct convolution, epilogue, padded
// copy) takes the layout as a flag.
//
// Attributes and input checks are those of the CPU kernels (runtime/ops/conv, runtime/ops/conv_transpose, through
// runtime/ops/common/conv_geometry.h), so a bad model fails the same way on both devices. Per input shape a kernel
// builds one plan (descriptors, algorithm from cuDNN's heuristics, workspace size) and keeps it: a steady-state run
// creates no descriptor. 1-D problems run as 2-D with a unit height; 2-D and 3-D go to cuDNN as they are.
//
// What cuDNN cannot express is rewritten around it:
// - asymmetric pads (Conv): X is copied into a zero-padded temporary first and convolved without padding;
// - ConvTranspose pads that are asymmetric, negative (an output_shape larger than the natural output) or an
//   output_padding the backward-data geometry does not reproduce: the full (unpadded) transposed convolution goes
//   into a temporary that is then cropped, with the bias added in the same pass.
// - bias, residual Z and ReLU: cudnnConvolutionBiasActivationForward where it applies (FusedConv with ReLU, bias and
//   a Z of Y's shape, fp32/fp16), otherwise the convolution followed by one epilogue kernel.
// Problems cuDNN does not take at all (more than 3 spatial dims, sizes over INT_MAX, empty channel dims, or a
// configuration it reports as not supported) run the direct kernels of conv_kernels.cu: one thread per output
// element, FP32 accumulation, one rounding. The session option KernelOptions::cuda_conv_direct forces them (a
// reference path for tests).
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/dnn/cudnn_util.h"
#include "runtime/cuda/ops/dnn/dnn_launch.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/device_context.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/layout/channels_last.h"

namespace onnxamp::cuda::dnn {
namespace {

// A temporary device buffer for `dims` elements of `dtype` (non-empty), returned to the cache when released.
StatusOr<std::shared_ptr<ir::Buffer>> Temporary(exec::KernelContext& ctx, DType dtype,
                                                const std::vector<int64_t>& dims) {
  ONNXAMP_ASSIGN_OR_RETURN(const size_t bytes, ir::Tensor::ComputeByteSize(dtype, dims));
  return ctx.device_context()->Allocate(bytes);
}

// [n, c, spatial...] with a unit height inserted for 1-D problems (cuDNN takes 2-D and 3-D convolutions).
std::vector<int64_t> Lift(std::vector<int64_t> dims, size_t nsp) {
  if (nsp == 1) dims.insert(dims.begin() + 2, 1);
  return dims;
}
std::vector<int64_t> LiftSpatial(std::vector<int64_t> v, size_t nsp, int64_t unit) {
  if (nsp == 1) v.insert(v.begin(), unit);
  return v;
}

std::vector<int64_t> Concat(std::vector<int64_t> head, const std::vector<int64_t>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// The per-channel bias as cuDNN wants it: [1, m, 1, 1(, 1)].
std::vector<int64_t> BiasDims(int64_t m, size_t cudnn_rank) {
  std::vector<int64_t> d(cudnn_rank, 1);
  d[1] = m;
  return d;
}

bool HasEmptyDim(const std::vector<int64_t>& dims) {
  for (int64_t d : dims)
    if (d == 0) return true;
  return false;
}

// What a Conv and a ConvTranspose plan share: the input shapes it was built for and the resolved geometry.
struct PlanBase {
  // What the plan was built for.
  DType dtype = DType::kUndefined;
  std::vector<int64_t> x_dims, w_dims, b_dims;
  bool has_b = false;

  ConvSizes sizes;
  ops::WindowGeometry geo;
  WindowParams params;
  std::vector<int64_t> out_dims;  // Y's logical dims [N, M, out...]
  std::vector<int64_t> y_dims;    // Y's dims as stored (out_dims, or [N, out..., M] in channels-last)

  bool Matches(const ir::Tensor& x, const ir::Tensor& w, const ir::Tensor* b) const {
    return x.dtype() == dtype && w.dtype() == dtype && (b != nullptr) == has_b && (!b || b->dtype() == dtype) &&
           x.dims() == x_dims && w.dims() == w_dims && (!b || b->dims() == b_dims);
  }
};

// Checks the inputs (ops::CheckConvInputs, the CPU kernels' checks) and fills the shared part of a plan. x and w
// carry logical dims ([N, C, spatial...], [M, C/g, kernel...]) whatever the layout; `channels_last` says how the
// tensors are stored.
Status InitPlan(const ops::WindowAttrs& attrs, int64_t group, bool transpose, bool channels_last, const ir::Tensor* x,
                const ir::Tensor* w, const ir::Tensor* b, PlanBase* p) {
  ONNXAMP_ASSIGN_OR_RETURN(const ops::ConvShape shape, ops::CheckConvInputs(x, w, b, attrs, group, transpose));
  p->dtype = x->dtype();
  p->x_dims = x->dims();
  p->w_dims = w->dims();
  p->has_b = b != nullptr;
  if (b) p->b_dims = b->dims();
  p->sizes = ConvSizes{shape.n, shape.c, shape.m, shape.group, channels_last};
  if (transpose) {
    ONNXAMP_ASSIGN_OR_RETURN(p->geo, ops::TransposeGeometry(attrs, shape.in, shape.kernel));
  } else {
    ONNXAMP_ASSIGN_OR_RETURN(p->geo, ops::ForwardGeometry(attrs, shape.in, shape.kernel));
  }
  ONNXAMP_ASSIGN_OR_RETURN(p->params, MakeWindowParams(p->geo));
  p->out_dims = Concat({shape.n, shape.m}, p->geo.out);
  p->y_dims = ops::StoredDims(p->out_dims, channels_last);
  return Status::Ok();
}

// ---- Conv / FusedConv -------------------------------------------------------------------------------------------

struct ConvPlan : PlanBase {
  bool cudnn = false;                // else the direct kernel
  std::vector<int64_t> padded_dims;  // non-empty: X goes through a zero-padded copy first (asymmetric pads); logical
  std::vector<int64_t> pad_offset;   // -pad_begin per spatial dim, for that copy
  TensorDesc x_desc, y_desc, bias_desc;
  FilterDesc w_desc;
  ConvDesc conv_desc;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace_bytes = 0;
  mutable std::atomic<bool> cudnn_refused{false};  // cuDNN reported "not supported" when running
};

// Sets up the cuDNN side of `p`; leaves p.cudnn false when cuDNN does not take the problem.
Status PlanCudnnConv(cudnnHandle_t handle, bool tf32, ConvPlan& p) {
  const ops::WindowGeometry& g = p.geo;
  const size_t nsp = g.rank();
  if (nsp < 1 || nsp > 3 || HasEmptyDim(p.x_dims) || HasEmptyDim(p.w_dims) || HasEmptyDim(p.out_dims)) {
    return Status::Ok();
  }
  std::vector<int64_t> x_dims = p.x_dims;
  std::vector<int64_t> pads = g.pad_begin;
  bool symmetric = true;
  for (size_t d = 0; d < nsp; ++d) symmetric = symmetric && g.pad_begin[d] == g.pad_end[d];
  if (!symmetric) {
    p.padded_dims = {p.sizes.n, p.sizes.c};
    p.pad_offset.clear();
    for (size_t d = 0; d < nsp; ++d) {
      p.padded_dims.push_back(g.in[d] + g.pad_begin[d] + g.pad_end[d]);
      p.pad_offset.push_back(-g.pad_begin[d]);
    }
    x_dims = p.padded_dims;
    pads.assign(nsp, 0);
  }
  // Logical dims; a 1-D channels-last [N, W, C] lifts to [N, 1, W, C], the same bytes.
  const std::vector<int64_t> xd = Lift(x_dims, nsp), wd = Lift(p.w_dims, nsp), yd = Lift(p.out_dims, nsp);
  if (!FitsCudnn(xd) || !FitsCudnn(wd) || !FitsCudnn(yd)) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(const cudnnDataType_t type, CudnnDataType(p.dtype));
  const Layout layout = p.sizes.channels_last ? Layout::kChannelsLast : Layout::kNchw;
  ONNXAMP_RETURN_IF_ERROR(p.x_desc.Set(type, xd, layout));
  ONNXAMP_RETURN_IF_ERROR(p.w_desc.Set(type, wd, layout));
  ONNXAMP_RETURN_IF_ERROR(p.y_desc.Set(type, yd, layout));
  ONNXAMP_RETURN_IF_ERROR(p.conv_desc.Set(LiftSpatial(pads, nsp, 0), LiftSpatial(g.stride, nsp, 1),
                                          LiftSpatial(g.dilation, nsp, 1), p.sizes.group, p.dtype, tf32));
  // cuDNN's idea of the output must be ours (it is, for valid geometry); anything else stays on the direct path.
  std::vector<int> cudnn_out(yd.size());
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionNdForwardOutputDim(p.conv_desc.get(), p.x_desc.get(), p.w_desc.get(),
                                                                      static_cast<int>(yd.size()), cudnn_out.data()));
  if (std::vector<int64_t>(cudnn_out.begin(), cudnn_out.end()) != yd) return Status::Ok();
  // [1, M, 1, 1(, 1)]: the same strides in either layout.
  if (p.has_b) ONNXAMP_RETURN_IF_ERROR(p.bias_desc.Set(type, BiasDims(p.sizes.m, yd.size())));
  StatusOr<cudnnConvolutionFwdAlgo_t> algo =
      PickForwardAlgorithm(handle, p.x_desc, p.w_desc, p.conv_desc, p.y_desc, p.dtype, &p.workspace_bytes);
  if (!algo.ok()) return algo.status().code() == StatusCode::kUnimplemented ? Status::Ok() : algo.status();
  p.algo = *algo;
  p.cudnn = true;
  return Status::Ok();
}

// Conv, FusedConv and ChannelsLastConv (channels_last_).
class ConvCuda : public exec::OpKernel {
 public:
  ConvCuda(const exec::KernelInfo& info, Status* st)
      : channels_last_(info.node.op_type() == exec::kChannelsLastConvOp),
        direct_(info.options.cuda_conv_direct),
        tf32_(info.options.cuda_tf32) {
    if (channels_last_ && !(*st = ops::CheckChannelsLastNode(info.node, /*single_input=*/false)).ok()) return;
    if (!(*st = ops::ParseConvAttrs(info.node, /*transpose=*/false, &attrs_, &group_, &relu_)).ok()) return;
    if (relu_) *st = relu_desc_.SetRelu();
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    const ir::Tensor* w = ctx.input(1);
    const ir::Tensor* b = ctx.input(2);
    const ir::Tensor* z = ctx.input(3);
    CudaContext& cuda = GetCudaContext(ctx);
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<const ConvPlan> plan, Resolve(cuda, x, w, b));
    if (z && z->dtype() != x->dtype()) {
      return InvalidArgument("input Z has element type ", DTypeName(z->dtype()), ", expected ", DTypeName(x->dtype()),
                             " (the type of X)");
    }
    const ConvPlan& p = *plan;
    if (z && channels_last_) ONNXAMP_RETURN_IF_ERROR(ops::CheckChannelsLastZ(*z, *x));
    if (z && z->dims() != p.y_dims) {
      // Z of another shape: the convolution into a temporary, then Y = act(conv + B + Z) with numpy broadcasting
      // (of the dims as stored, in either layout).
      ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> out_dims, ops::BroadcastShapes(p.y_dims, z->dims()));
      std::shared_ptr<ir::Buffer> conv;
      if (!HasEmptyDim(p.y_dims)) {
        ONNXAMP_ASSIGN_OR_RETURN(conv, Temporary(ctx, x->dtype(), p.y_dims));
        ONNXAMP_RETURN_IF_ERROR(Convolve(cuda, p, *x, *w, nullptr, nullptr, false, conv->data()));
      }
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_dims));
      if (y->num_elements() == 0) return Status::Ok();
      return LaunchConvEpilogue(cuda.stream(), x->dtype(), out_dims, conv ? conv->data() : nullptr, p.y_dims,
                                channels_last_, b ? b->data() : nullptr, z->data(), z->dims(), relu_,
                                y->mutable_data());
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), p.y_dims));
    if (y->num_elements() == 0) return Status::Ok();
    return Convolve(cuda, p, *x, *w, b, z, relu_, y->mutable_data());
  }

 private:
  // The plan for these input shapes: the last one when the shapes repeat, else checked and built anew. Plans hold
  // logical dims: channels-last X and W are viewed in NCHW order first.
  StatusOr<std::shared_ptr<const ConvPlan>> Resolve(CudaContext& cuda, const ir::Tensor* x, const ir::Tensor* w,
                                                    const ir::Tensor* b) const {
    ir::Tensor x_view, w_view;
    if (channels_last_) ONNXAMP_RETURN_IF_ERROR(ops::CheckChannelsLastInput(x));
    if (channels_last_ && w) {
      ONNXAMP_ASSIGN_OR_RETURN(x_view, ops::LogicalView(*x));
      ONNXAMP_ASSIGN_OR_RETURN(w_view, ops::LogicalView(*w));
      x = &x_view;
      w = &w_view;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (plan_ && x && w && plan_->Matches(*x, *w, b)) return plan_;
    }
    auto p = std::make_shared<ConvPlan>();
    ONNXAMP_RETURN_IF_ERROR(InitPlan(attrs_, group_, /*transpose=*/false, channels_last_, x, w, b, p.get()));
    // Element types the CPU takes but no CUDA path does are refused here, naming the type.
    ONNXAMP_RETURN_IF_ERROR(CudnnDataType(p->dtype).status());
    if (!direct_) ONNXAMP_RETURN_IF_ERROR(PlanCudnnConv(cuda.cudnn(), tf32_, *p));
    std::lock_guard<std::mutex> lock(mu_);
    plan_ = p;
    return std::shared_ptr<const ConvPlan>(std::move(p));
  }

  // y = act(conv(x, w) + b + z), y of p.y_dims (non-empty), z of y's shape or null.
  Status Convolve(CudaContext& cuda, const ConvPlan& p, const ir::Tensor& x, const ir::Tensor& w, const ir::Tensor* b,
                  const ir::Tensor* z, bool relu, void* y) const {
    const void* pb = b ? b->data() : nullptr;
    const void* pz = z ? z->data() : nullptr;
    if (!p.cudnn || p.cudnn_refused.load(std::memory_order_relaxed)) {
      return LaunchConvDirect(cuda.stream(), p.dtype, p.params, p.sizes, x.data(), w.data(), pb, pz, relu, y);
    }
    const void* xin = x.data();
    std::shared_ptr<ir::Buffer> padded;
    if (!p.padded_dims.empty()) {
      ONNXAMP_ASSIGN_OR_RETURN(const size_t bytes, ir::Tensor::ComputeByteSize(p.dtype, p.padded_dims));
      ONNXAMP_ASSIGN_OR_RETURN(padded, cuda.Allocate(bytes));
      const std::vector<int64_t> padded_sp(p.padded_dims.begin() + 2, p.padded_dims.end());
      ONNXAMP_RETURN_IF_ERROR(LaunchWindowCopy(cuda.stream(), p.dtype, p.sizes.n * p.sizes.c, p.sizes.c,
                                               p.sizes.channels_last, p.geo.in, padded_sp, p.pad_offset, x.data(),
                                               nullptr, padded->data()));
      xin = padded->data();
    }
    ONNXAMP_ASSIGN_OR_RETURN(void* workspace, cuda.Workspace(p.workspace_bytes));
    const Scale one(p.dtype, 1.0), zero(p.dtype, 0.0);
    const bool fusable = relu && b && z && (p.dtype == DType::kFloat32 || p.dtype == DType::kFloat16);
    if (fusable && fused_ok_.load(std::memory_order_relaxed)) {
      const cudnnStatus_t st = cudnnConvolutionBiasActivationForward(
          cuda.cudnn(), one.get(), p.x_desc.get(), xin, p.w_desc.get(), w.data(), p.conv_desc.get(), p.algo, workspace,
          p.workspace_bytes, one.get(), p.y_desc.get(), pz, p.bias_desc.get(), pb, relu_desc_.get(), p.y_desc.get(), y);
      if (st == CUDNN_STATUS_SUCCESS) return Status::Ok();
      // The fused call has narrower rules than the convolution (data types, algorithms); a configuration it
      // refuses (not supported, or a bad parameter for it) takes the separate convolution and epilogue from now on.
      const bool bad_param = static_cast<int>(st) / 1000 == static_cast<int>(CUDNN_STATUS_BAD_PARAM) / 1000;
      if (!IsNotSupported(st) && !bad_param) {
        return CudnnErrorToStatus(st, "cudnnConvolutionBiasActivationForward", OpName());
      }
      fused_ok_.store(false, std::memory_order_relaxed);
    }
    const cudnnStatus_t st =
        cudnnConvolutionForward(cuda.cudnn(), one.get(), p.x_desc.get(), xin, p.w_desc.get(), w.data(),
                                p.conv_desc.get(), p.algo, workspace, p.workspace_bytes, zero.get(), p.y_desc.get(), y);
    if (IsNotSupported(st)) {
      p.cudnn_refused.store(true, std::memory_order_relaxed);
      return LaunchConvDirect(cuda.stream(), p.dtype, p.params, p.sizes, x.data(), w.data(), pb, pz, relu, y);
    }
    if (st != CUDNN_STATUS_SUCCESS) return CudnnErrorToStatus(st, "cudnnConvolutionForward", OpName());
    return LaunchConvEpilogue(cuda.stream(), p.dtype, p.y_dims, y, p.y_dims, p.sizes.channels_last, pb, pz,
                              z ? z->dims() : std::vector<int64_t>{}, relu, y);
  }

  const char* OpName() const { return channels_last_ ? exec::kChannelsLastConvOp : "Conv"; }

  ops::WindowAttrs attrs_;
  int64_t group_ = 1;
  bool relu_ = false;
  bool channels_last_ = false;
  bool direct_ = false;  // KernelOptions::cuda_conv_direct
  bool tf32_ = false;    // KernelOptions::cuda_tf32
  ActivationDesc relu_desc_;
  mutable std::atomic<bool> fused_ok_{true};
  mutable std::mutex mu_;
  mutable std::shared_ptr<const ConvPlan> plan_;  // guarded by mu_
};

// ---- ConvTranspose ----------------------------------------------------------------------------------------------

struct ConvTransposePlan : PlanBase {
  bool cudnn = false;
  std::vector<int64_t> full_dims;  // non-empty: cuDNN writes the unpadded result here, which is then cropped
  TensorDesc dy_desc, dx_desc;     // dy: X; dx: Y or the full result
  FilterDesc w_desc;
  ConvDesc conv_desc;
  cudnnConvolutionBwdDataAlgo_t algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  size_t workspace_bytes = 0;
  mutable std::atomic<bool> cudnn_refused{false};
};

// ConvTranspose(X) is the data gradient of the convolution of Y by the same W: cuDNN's backward-data convolution
// with dy = X and dx = Y, when the forward geometry of that convolution maps Y's size back to X's exactly.
Status PlanCudnnConvTranspose(cudnnHandle_t handle, bool tf32, ConvTransposePlan& p) {
  const ops::WindowGeometry& g = p.geo;
  const size_t nsp = g.rank();
  if (nsp < 1 || nsp > 3 || HasEmptyDim(p.x_dims) || HasEmptyDim(p.w_dims) || HasEmptyDim(p.out_dims)) {
    return Status::Ok();
  }
  bool exact = true;
  for (size_t d = 0; d < nsp && exact; ++d) {
    const int64_t k_eff = (g.kernel[d] - 1) * g.dilation[d] + 1;
    const int64_t span = g.out[d] + 2 * g.pad_begin[d] - k_eff;
    exact = g.pad_begin[d] == g.pad_end[d] && g.pad_begin[d] >= 0 && span >= 0 && span / g.stride[d] + 1 == g.in[d];
  }
  std::vector<int64_t> dx_dims = p.out_dims;
  std::vector<int64_t> pads = g.pad_begin;
  if (!exact) {
    p.full_dims = {p.sizes.n, p.sizes.m};
    for (size_t d = 0; d < nsp; ++d) {
      p.full_dims.push_back(g.stride[d] * (g.in[d] - 1) + (g.kernel[d] - 1) * g.dilation[d] + 1);
    }
    dx_dims = p.full_dims;
    pads.assign(nsp, 0);
  }
  const std::vector<int64_t> dyd = Lift(p.x_dims, nsp), wd = Lift(p.w_dims, nsp), dxd = Lift(dx_dims, nsp);
  if (!FitsCudnn(dyd) || !FitsCudnn(wd) || !FitsCudnn(dxd)) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(const cudnnDataType_t type, CudnnDataType(p.dtype));
  ONNXAMP_RETURN_IF_ERROR(p.dy_desc.Set(type, dyd));
  ONNXAMP_RETURN_IF_ERROR(p.w_desc.Set(type, wd));
  ONNXAMP_RETURN_IF_ERROR(p.dx_desc.Set(type, dxd));
  ONNXAMP_RETURN_IF_ERROR(p.conv_desc.Set(LiftSpatial(pads, nsp, 0), LiftSpatial(g.stride, nsp, 1),
                                          LiftSpatial(g.dilation, nsp, 1), p.sizes.group, p.dtype, tf32));
  StatusOr<cudnnConvolutionBwdDataAlgo_t> algo =
      PickBackwardDataAlgorithm(handle, p.w_desc, p.dy_desc, p.conv_desc, p.dx_desc, p.dtype, &p.workspace_bytes);
  if (!algo.ok()) return algo.status().code() == StatusCode::kUnimplemented ? Status::Ok() : algo.status();
  p.algo = *algo;
  p.cudnn = true;
  return Status::Ok();
}

class ConvTransposeCuda : public exec::OpKernel {
 public:
  ConvTransposeCuda(const exec::KernelInfo& info, Status* st)
      : direct_(info.options.cuda_conv_direct), tf32_(info.options.cuda_tf32) {
    *st = ops::ParseConvAttrs(info.node, /*transpose=*/true, &attrs_, &group_, nullptr);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    const ir::Tensor* w = ctx.input(1);
    const ir::Tensor* b = ctx.input(2);
    CudaContext& cuda = GetCudaContext(ctx);
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<const ConvTransposePlan> plan, Resolve(cuda, x, w, b));
    const ConvTransposePlan& p = *plan;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), p.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    const void* pb = b ? b->data() : nullptr;
    if (!p.cudnn || p.cudnn_refused.load(std::memory_order_relaxed)) {
      return LaunchConvTransposeDirect(cuda.stream(), p.dtype, p.params, p.sizes, x->data(), w->data(), pb,
                                       y->mutable_data());
    }
    std::shared_ptr<ir::Buffer> full;
    void* dx = y->mutable_data();
    if (!p.full_dims.empty()) {
      ONNXAMP_ASSIGN_OR_RETURN(full, Temporary(ctx, p.dtype, p.full_dims));
      dx = full->data();
    }
    ONNXAMP_ASSIGN_OR_RETURN(void* workspace, cuda.Workspace(p.workspace_bytes));
    const Scale one(p.dtype, 1.0), zero(p.dtype, 0.0);
    const cudnnStatus_t st = cudnnConvolutionBackwardData(
        cuda.cudnn(), one.get(), p.w_desc.get(), w->data(), p.dy_desc.get(), x->data(), p.conv_desc.get(), p.algo,
        workspace, p.workspace_bytes, zero.get(), p.dx_desc.get(), dx);
    if (IsNotSupported(st)) {
      p.cudnn_refused.store(true, std::memory_order_relaxed);
      return LaunchConvTransposeDirect(cuda.stream(), p.dtype, p.params, p.sizes, x->data(), w->data(), pb,
                                       y->mutable_data());
    }
    if (st != CUDNN_STATUS_SUCCESS) return CudnnErrorToStatus(st, "cudnnConvolutionBackwardData", "ConvTranspose");
    if (full) {
      const std::vector<int64_t> full_sp(p.full_dims.begin() + 2, p.full_dims.end());
      return LaunchWindowCopy(cuda.stream(), p.dtype, p.sizes.n * p.sizes.m, p.sizes.m, /*channels_last=*/false,
                              full_sp, p.geo.out, p.geo.pad_begin, full->data(), pb, y->mutable_data());
    }
    return LaunchConvEpilogue(cuda.stream(), p.dtype, p.out_dims, y->data(), p.out_dims, /*channels_last=*/false, pb,
                              nullptr, {}, false, y->mutable_data());
  }

 private:
  StatusOr<std::shared_ptr<const ConvTransposePlan>> Resolve(CudaContext& cuda, const ir::Tensor* x,
                                                             const ir::Tensor* w, const ir::Tensor* b) const {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (plan_ && x && w && plan_->Matches(*x, *w, b)) return plan_;
    }
    auto p = std::make_shared<ConvTransposePlan>();
    ONNXAMP_RETURN_IF_ERROR(InitPlan(attrs_, group_, /*transpose=*/true, /*channels_last=*/false, x, w, b, p.get()));
    ONNXAMP_RETURN_IF_ERROR(CudnnDataType(p->dtype).status());
    if (!direct_) ONNXAMP_RETURN_IF_ERROR(PlanCudnnConvTranspose(cuda.cudnn(), tf32_, *p));
    std::lock_guard<std::mutex> lock(mu_);
    plan_ = p;
    return std::shared_ptr<const ConvTransposePlan>(std::move(p));
  }

  ops::WindowAttrs attrs_;
  int64_t group_ = 1;
  bool direct_ = false;  // KernelOptions::cuda_conv_direct
  bool tf32_ = false;    // KernelOptions::cuda_tf32
  mutable std::mutex mu_;
  mutable std::shared_ptr<const ConvTransposePlan> plan_;  // guarded by mu_
};

}  // namespace

void RegisterCudaConvKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "Conv", &exec::MakeKernel<ConvCuda>);
  RegisterLikeCpu(r, exec::kFusedConvOp, &exec::MakeKernel<ConvCuda>, {}, exec::kInternalDomain);
  RegisterLikeCpu(r, exec::kChannelsLastConvOp, &exec::MakeKernel<ConvCuda>, {}, exec::kInternalDomain);
  RegisterLikeCpu(r, "ConvTranspose", &exec::MakeKernel<ConvTransposeCuda>);
}

}  // namespace onnxamp::cuda::dnn
