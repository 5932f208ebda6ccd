// Turning CUDA runtime (and, where their headers exist, cuBLAS and cuDNN) error codes into onnxamp::Status.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "runtime/common/status.h"

#if __has_include(<cublasLt.h>)
#include <cublasLt.h>
#define ONNXAMP_HAVE_CUBLAS_HEADERS 1
#endif
#if __has_include(<cudnn_graph.h>)  // cuDNN 9: status codes and cudnnGetErrorString live here
#include <cudnn_graph.h>
#define ONNXAMP_HAVE_CUDNN_HEADERS 1
#endif

namespace onnxamp::cuda {

// The Status for a failed CUDA runtime call: "<context>: <call> failed: <description> (<cudaErrorName>)", or
// without "<context>: " when it is empty. Out-of-memory maps to kResourceExhausted, a missing driver or device
// to kFailedPrecondition, invalid arguments to kInvalidArgument, anything else to kInternal. Also clears the
// thread's last (non-sticky) CUDA error so that it does not resurface in a later, unrelated check.
// `error` must not be cudaSuccess.
Status CudaErrorToStatus(cudaError_t error, std::string_view call, std::string_view context = {});

// Aborts with the call, the error and the location. For internal invariants only (a failing cudaFree in a
// destructor); anything a user's input can cause returns a Status instead.
[[noreturn]] void CudaCheckFailed(cudaError_t error, const char* call, const char* file, int line);

#if defined(ONNXAMP_HAVE_CUBLAS_HEADERS)
// Like CudaErrorToStatus for cuBLASLt (runtime/cuda/cublaslt_loader.h provides the status strings).
inline Status CublasErrorToStatus(cublasStatus_t status, std::string_view call, std::string_view context = {}) {
  const std::string what =
      StrCat(call, " failed: ", cublasLtGetStatusString(status), " (", cublasLtGetStatusName(status), ")");
  const StatusCode code = status == CUBLAS_STATUS_ALLOC_FAILED      ? StatusCode::kResourceExhausted
                          : status == CUBLAS_STATUS_INVALID_VALUE   ? StatusCode::kInvalidArgument
                          : status == CUBLAS_STATUS_NOT_SUPPORTED   ? StatusCode::kUnimplemented
                          : status == CUBLAS_STATUS_ARCH_MISMATCH   ? StatusCode::kUnimplemented
                          : status == CUBLAS_STATUS_NOT_INITIALIZED ? StatusCode::kFailedPrecondition
                                                                    : StatusCode::kInternal;
  return Status(code, context.empty() ? what : StrCat(context, ": ", what));
}
#endif

#if defined(ONNXAMP_HAVE_CUDNN_HEADERS)
// Like CudaErrorToStatus for cuDNN 9, whose codes are grouped in thousands (2xxx bad parameter, 3xxx not
// supported, 4xxx internal). Only code that links cuDNN uses it.
inline Status CudnnErrorToStatus(cudnnStatus_t status, std::string_view call, std::string_view context = {}) {
  const int value = static_cast<int>(status);
  const std::string what = StrCat(call, " failed: ", cudnnGetErrorString(status), " (", value, ")");
  const StatusCode code = value == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                                  value == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
                              ? StatusCode::kResourceExhausted
                          : value / 1000 == CUDNN_STATUS_BAD_PARAM / 1000     ? StatusCode::kInvalidArgument
                          : value / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000 ? StatusCode::kUnimplemented
                                                                              : StatusCode::kInternal;
  return Status(code, context.empty() ? what : StrCat(context, ": ", what));
}
#endif

}  // namespace onnxamp::cuda

// Returns a Status from the enclosing function when the CUDA runtime call `expr` fails. Optional further
// arguments are StrCat'ed into the context: ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, n), "weights of ", name).
#define ONNXAMP_CUDA_RETURN_IF_ERROR(expr, ...)                                                    \
  do {                                                                                             \
    const cudaError_t onnxamp_cuda_error_ = (expr);                                                \
    if (onnxamp_cuda_error_ != cudaSuccess) {                                                      \
      return ::onnxamp::cuda::CudaErrorToStatus(onnxamp_cuda_error_, #expr,                        \
                                                ::onnxamp::StrCat("" __VA_OPT__(, ) __VA_ARGS__)); \
    }                                                                                              \
  } while (0)

// Aborts when the CUDA runtime call `expr` fails. Internal invariants only.
#define ONNXAMP_CUDA_CHECK(expr)                                                        \
  do {                                                                                  \
    const cudaError_t onnxamp_cuda_error_ = (expr);                                     \
    if (onnxamp_cuda_error_ != cudaSuccess)                                             \
      ::onnxamp::cuda::CudaCheckFailed(onnxamp_cuda_error_, #expr, __FILE__, __LINE__); \
  } while (0)

#if defined(ONNXAMP_HAVE_CUBLAS_HEADERS)
#define ONNXAMP_CUBLAS_RETURN_IF_ERROR(expr, ...)                                                    \
  do {                                                                                               \
    const cublasStatus_t onnxamp_cublas_status_ = (expr);                                            \
    if (onnxamp_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                           \
      return ::onnxamp::cuda::CublasErrorToStatus(onnxamp_cublas_status_, #expr,                     \
                                                  ::onnxamp::StrCat("" __VA_OPT__(, ) __VA_ARGS__)); \
    }                                                                                                \
  } while (0)
#endif

#if defined(ONNXAMP_HAVE_CUDNN_HEADERS)
#define ONNXAMP_CUDNN_RETURN_IF_ERROR(expr, ...)                                                    \
  do {                                                                                              \
    const cudnnStatus_t onnxamp_cudnn_status_ = (expr);                                             \
    if (onnxamp_cudnn_status_ != CUDNN_STATUS_SUCCESS) {                                            \
      return ::onnxamp::cuda::CudnnErrorToStatus(onnxamp_cudnn_status_, #expr,                      \
                                                 ::onnxamp::StrCat("" __VA_OPT__(, ) __VA_ARGS__)); \
    }                                                                                               \
  } while (0)
#endif
