// CUDA runtime errors as onnxamp::Status, and the abort used for internal CUDA invariants.
#include "runtime/cuda/cuda_check.h"

namespace onnxamp::cuda {

Status CudaErrorToStatus(cudaError_t error, std::string_view call, std::string_view context) {
  // Reset the thread's last error so the failure is reported once. Sticky errors (a faulted context) stay.
  (void)cudaGetLastError();
  StatusCode code = StatusCode::kInternal;
  switch (error) {
    case cudaErrorMemoryAllocation:
      code = StatusCode::kResourceExhausted;
      break;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      code = StatusCode::kFailedPrecondition;
      break;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
    case cudaErrorMisalignedAddress:
      code = StatusCode::kInvalidArgument;
      break;
    default:
      break;
  }
  const std::string what = StrCat(call, " failed: ", cudaGetErrorString(error), " (", cudaGetErrorName(error), ")");
  return Status(code, context.empty() ? what : StrCat(context, ": ", what));
}

void CudaCheckFailed(cudaError_t error, const char* call, const char* file, int line) {
  CheckFailed(file, line, call, StrCat(cudaGetErrorString(error), " (", cudaGetErrorName(error), ")"));
}

}  // namespace onnxamp::cuda
