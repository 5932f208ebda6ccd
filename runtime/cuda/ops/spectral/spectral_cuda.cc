// DFT and STFT and their com.onnxamp gradients DFTGrad and STFTGrad on CUDA: the CPU kernels' attributes, checks,
// messages and plans (runtime/ops/spectral/spectral.h; dft_length, axis, frame_step and frame_length are host inputs,
// the window stays on the device), the CPU's table of roots of unity uploaded once per length, the work in
// spectral_kernels.cu (spectral_launch.h).
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/elementwise/elementwise_launch.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/cuda/ops/spectral/spectral_launch.h"
#include "runtime/cuda/ops/tensor/tensor_util.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/spectral/spectral.h"

namespace onnxamp::cuda {
namespace {

namespace sp = ops::spectral;

// The device copy of the CPU's table of cos and sin of 2 pi m / l (c then s), kept by the kernel for its last length:
// a steady-state run (and a captured training step) uploads nothing. Keyed by the length, so that the table is not
// rebuilt on the host to be compared.
class TwiddleTable {
 public:
  StatusOr<std::shared_ptr<ir::Buffer>> Get(exec::KernelContext& ctx, int64_t l) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (device_ && l == l_) return device_;
    const sp::Twiddles w(l);
    auto host = std::make_shared<std::vector<double>>(w.c);
    host->insert(host->end(), w.s.begin(), w.s.end());
    const size_t bytes = host->size() * sizeof(double);
    CudaContext& cuda = GetCudaContext(ctx);
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<ir::Buffer> buffer, cuda.Allocate(bytes));
    ONNXAMP_RETURN_IF_ERROR(tensor_ops::UploadAsync(cuda, host, host->data(), buffer->data(), bytes));
    device_ = buffer;
    l_ = l;
    return buffer;
  }

 private:
  mutable std::mutex mu_;
  mutable int64_t l_ = 0;
  mutable std::shared_ptr<ir::Buffer> device_;
};

// The gradient kernels' dY: the CPU's checks (sp::CheckIncomingGradient), and of the input's type, which the device
// kernels read it as (the CPU widens any float type; the autodiff always gives dY the forward output's type).
Status CheckGradient(const exec::KernelContext& ctx, const std::vector<int64_t>& dims, const ir::Tensor& x) {
  ONNXAMP_RETURN_IF_ERROR(sp::CheckIncomingGradient(ctx, dims));
  const DType t = ctx.input(0)->dtype();
  if (t != x.dtype()) {
    return Unimplemented("dY of element type ", DTypeName(t), " for an input of ", DTypeName(x.dtype()),
                         ": on cuda the gradient takes the input's type");
  }
  return Status::Ok();
}

const double* Cos(const ir::Buffer& table) { return reinterpret_cast<const double*>(table.data()); }
const double* Sin(const ir::Buffer& table, int64_t l) { return Cos(table) + l; }

class DftCuda : public exec::OpKernel {
 public:
  DftCuda(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const sp::DftPlan p, sp::PlanDft(ctx, spec_));
    const ir::Tensor* x = ctx.input(spec_.grad ? 1 : 0);
    if (spec_.grad) ONNXAMP_RETURN_IF_ERROR(CheckGradient(ctx, p.out_dims, *x));
    ONNXAMP_ASSIGN_OR_RETURN(const std::shared_ptr<ir::Buffer> table, twiddles_.Get(ctx, p.t.l));
    DftArgs a;
    a.dtype = x->dtype();
    a.t = p.t;
    a.outer = p.outer;
    a.inner = p.inner;
    a.channels = p.channels;
    a.wc = Cos(*table);
    a.ws = Sin(*table, p.t.l);
    cudaStream_t stream = GetCudaContext(ctx).stream();
    if (!spec_.grad) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), p.out_dims));
      a.x = x->data();
      a.y = y->mutable_data();
      return LaunchDft(a, stream);
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    a.dy = ctx.input(0)->data();
    a.dx = dx->mutable_data();
    return LaunchDftGrad(a, stream);
  }

 private:
  sp::DftSpec spec_;
  TwiddleTable twiddles_;
};

class StftCuda : public exec::OpKernel {
 public:
  StftCuda(const exec::KernelInfo& info, Status*)
      : grad_(info.node.domain() == exec::kInternalDomain), onesided_(info.node.GetInt("onesided", 1) != 0) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const size_t base = grad_ ? 1 : 0;  // STFTGrad(dY, signal, frame_step, window?, frame_length?)
    ONNXAMP_ASSIGN_OR_RETURN(const sp::StftPlan p, sp::PlanStft(ctx, onesided_, grad_, /*read_window=*/false));
    const ir::Tensor* signal = ctx.input(base);
    if (grad_) {
      ONNXAMP_RETURN_IF_ERROR(CheckGradient(ctx, p.out_dims, *signal));
      ONNXAMP_RETURN_IF_ERROR(
          ops::CheckFitsInMemory(DType::kFloat64, {p.batch, p.frames, p.frame, 2}, "STFT's frame gradients"));
    }
    const ir::Tensor* window = ctx.input(base + 2);
    ONNXAMP_ASSIGN_OR_RETURN(const std::shared_ptr<ir::Buffer> table, twiddles_.Get(ctx, p.t.l));
    CudaContext& cuda = GetCudaContext(ctx);
    cudaStream_t stream = cuda.stream();
    StftArgs a;
    a.dtype = signal->dtype();
    a.t = p.t;
    a.batch = p.batch;
    a.length = p.length;
    a.channels = p.channels;
    a.step = p.step;
    a.frame = p.frame;
    a.frames = p.frames;
    a.wc = Cos(*table);
    a.ws = Sin(*table, p.t.l);
    a.signal = signal->data();
    // The window's values and (gradient) dwindow in double; both held until the call ends.
    std::shared_ptr<ir::Buffer> doubles;
    const bool window_grad = grad_ && window && ctx.num_outputs() > 2 && ctx.output_requested(2);
    if (window) {
      ONNXAMP_ASSIGN_OR_RETURN(doubles,
                               cuda.Allocate(static_cast<size_t>(p.frame) * (window_grad ? 2 : 1) * sizeof(double)));
      double* w = reinterpret_cast<double*>(doubles->data());
      ONNXAMP_RETURN_IF_ERROR(
          ew::LaunchCast(window->dtype(), DType::kFloat64, window->data(), w, p.frame, stream, "STFT"));
      a.window = w;
      if (window_grad) a.dwindow = w + p.frame;
    }
    if (!grad_) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, signal->dtype(), p.out_dims));
      a.y = y->mutable_data();
      return LaunchStft(a, stream);
    }
    a.dy = ctx.input(0)->data();
    ir::Tensor* dsignal = nullptr;
    if (ctx.output_requested(0)) {
      ONNXAMP_ASSIGN_OR_RETURN(dsignal, ctx.AllocateOutput(0, signal->dtype(), signal->dims()));
      a.dsignal = dsignal->mutable_data();
    }
    ONNXAMP_RETURN_IF_ERROR(LaunchStftGrad(a, WorkspaceOf(ctx), stream));
    if (window_grad) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dw, ctx.AllocateOutput(2, window->dtype(), {p.frame}));
      ONNXAMP_RETURN_IF_ERROR(
          ew::LaunchCast(DType::kFloat64, window->dtype(), a.dwindow, dw->mutable_data(), p.frame, stream, "STFTGrad"));
    }
    return Status::Ok();
  }

 private:
  bool grad_;
  bool onesided_;
  TwiddleTable twiddles_;
};

}  // namespace

void RegisterCudaSpectralKernels(exec::KernelRegistry& r) {
  // The lengths, the axis and the frame step are read on the host, as the CPU kernels read them.
  RegisterLikeCpu(r, "DFT", &exec::MakeKernel<DftCuda>, {1, 2});
  RegisterLikeCpu(r, ops::kDftGradOp, &exec::MakeKernel<DftCuda>, {2, 3}, exec::kInternalDomain);
  RegisterLikeCpu(r, "STFT", &exec::MakeKernel<StftCuda>, {1, 3});
  RegisterLikeCpu(r, ops::kStftGradOp, &exec::MakeKernel<StftCuda>, {2, 4}, exec::kInternalDomain);
}

}  // namespace onnxamp::cuda
