// Registration of the CUDA backend with the executor: kernels, the per-session context, and graph rewrites.
#include <mutex>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/graph_rewrite.h"
#include "runtime/executor/session.h"

namespace onnxamp::cuda {
namespace {

StatusOr<std::unique_ptr<exec::DeviceContext>> CreateCudaSessionContext(const exec::SessionOptions& options) {
  ONNXAMP_ASSIGN_OR_RETURN(std::unique_ptr<CudaContext> ctx, CudaContext::Create(options.device_index));
  return std::unique_ptr<exec::DeviceContext>(std::move(ctx));
}

}  // namespace

bool RegisterCudaBackend() {
  static const bool registered = [] {
    if (CudaDeviceCount() <= 0) return false;
    exec::DeviceBackend backend;
    backend.device = exec::Device::kCuda;
    backend.kernels = &CudaKernelRegistry();
    backend.create_context = &CreateCudaSessionContext;
    backend.optimize_graph = &OptimizeGraphForCuda;
    exec::RegisterDeviceBackend(backend);
    return true;
  }();
  return registered;
}

}  // namespace onnxamp::cuda
