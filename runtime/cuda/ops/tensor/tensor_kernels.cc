// Registration of the CUDA shape and data-movement kernels, and the ops that need no kernel of their own:
//
// - Identity, Reshape, Flatten, Squeeze, Unsqueeze, Shape and Size read only dims (and shape/axes inputs, which
//   the executor hands over on the host) and either alias their input's bytes with new dims or produce host
//   tensors. Their CPU kernels do exactly that with device tensors too, so the CUDA registrations reuse the CPU
//   factories: same checks, same messages, no copy.
// - Constant and Range produce small results the CPU kernel computes on the host (from attributes, or from host
//   scalars); the CUDA kernel runs the CPU kernel and uploads its outputs to device memory.
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/cuda/ops/tensor/tensor_util.h"

namespace onnxamp::cuda {
namespace tensor_ops {

void RegisterMovementKernels(exec::KernelRegistry& r);  // movement_kernels.cc
void RegisterIndexKernels(exec::KernelRegistry& r);     // index_kernels.cc
void RegisterResizeKernels(exec::KernelRegistry& r);    // resize_cuda.cc
void RegisterLayoutKernels(exec::KernelRegistry& r);    // layout_ops_cuda.cc: CumSum, Trilu, EyeLike, OneHot, ...
void RegisterScatterKernels(exec::KernelRegistry& r);   // scatter_cuda.cc: GatherND, ScatterND, ScatterElements, ...
void RegisterReverseSequenceKernels(exec::KernelRegistry& r);  // reverse_sequence_cuda.cc

namespace {

// Runs the node's CPU kernel on host inputs and uploads every output it produced.
class HostComputedCuda : public exec::OpKernel {
 public:
  HostComputedCuda(const exec::KernelInfo& info, Status* status) {
    StatusOr<std::unique_ptr<exec::OpKernel>> cpu = MakeCpuKernel(info);
    if (!cpu.ok()) {
      *status = cpu.status();
      return;
    }
    cpu_ = std::move(cpu).value();
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> outputs, RunCpuKernel(*cpu_, ctx));
    CudaContext& cc = GetCudaContext(ctx);
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!ctx.output_requested(i) || outputs[i].dtype() == DType::kUndefined) continue;
      if (outputs[i].dtype() == DType::kString) {
        return Unimplemented(ctx.node().op_type(), " of strings is not supported on cuda");
      }
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(i, outputs[i].dtype(), outputs[i].dims()));
      const size_t bytes = outputs[i].nbytes();
      if (bytes == 0) continue;
      const void* src = outputs[i].data();
      ONNXAMP_RETURN_IF_ERROR(
          UploadAsync(cc, std::make_shared<ir::Tensor>(std::move(outputs[i])), src, y->mutable_data(), bytes));
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<exec::OpKernel> cpu_;
};

// Registers every CPU registration of `op` for CUDA as well, with the CPU factory (see the file comment).
void RegisterCpuFactoryOnCuda(exec::KernelRegistry& r, std::string_view op, std::vector<int> host_inputs,
                              bool outputs_on_host) {
  for (const exec::KernelDef& cpu : exec::KernelRegistry::Global().defs()) {
    if (cpu.op_type != op || !cpu.domain.empty() || cpu.device != exec::Device::kCpu) continue;
    exec::KernelDef d = cpu;
    d.device = exec::Device::kCuda;
    d.dtypes = FixedSizeDTypes();
    d.host_inputs = host_inputs;
    d.outputs_on_host = outputs_on_host;
    r.Register(std::move(d));
  }
}

}  // namespace
}  // namespace tensor_ops

void RegisterCudaTensorKernels(exec::KernelRegistry& r) {
  using tensor_ops::RegisterCpuFactoryOnCuda;
  RegisterCpuFactoryOnCuda(r, "Identity", {}, false);
  RegisterCpuFactoryOnCuda(r, "Reshape", {1}, false);
  RegisterCpuFactoryOnCuda(r, "Flatten", {}, false);
  RegisterCpuFactoryOnCuda(r, "Squeeze", {1}, false);
  RegisterCpuFactoryOnCuda(r, "Unsqueeze", {1}, false);
  RegisterCpuFactoryOnCuda(r, "Shape", {}, true);
  RegisterCpuFactoryOnCuda(r, "Size", {}, true);
  RegisterLikeCpu(r, "Constant", &exec::MakeKernel<tensor_ops::HostComputedCuda>, {});
  RegisterLikeCpu(r, "Range", &exec::MakeKernel<tensor_ops::HostComputedCuda>, {0, 1, 2});
  tensor_ops::RegisterMovementKernels(r);
  tensor_ops::RegisterIndexKernels(r);
  tensor_ops::RegisterResizeKernels(r);
  tensor_ops::RegisterLayoutKernels(r);
  tensor_ops::RegisterScatterKernels(r);
  tensor_ops::RegisterReverseSequenceKernels(r);
}

}  // namespace onnxamp::cuda
