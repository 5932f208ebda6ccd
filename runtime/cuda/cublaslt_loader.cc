// Forwarding definitions of the cuBLASLt functions the backend uses, resolved from the library on first call.
#include "runtime/cuda/cublaslt_loader.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

namespace onnxamp::cuda {
namespace {

struct Library {
  void* handle = nullptr;
  std::string error;
};

const Library& Lib() {
  static const Library lib = [] {
    Library l;
    for (const char* name : {"libcublasLt.so.13", "libcublasLt.so"}) {
      l.handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (l.handle) return l;
      const char* e = ::dlerror();
      if (!l.error.empty()) l.error += "; ";
      l.error += e ? e : name;
    }
    return l;
  }();
  return lib;
}

// The library's definition of `name` with the type of our declaration of it, or null.
template <typename F>
F Resolve(F /*declared*/, const char* name) {
  const Library& lib = Lib();
  return lib.handle ? reinterpret_cast<F>(::dlsym(lib.handle, name)) : nullptr;
}

}  // namespace

Status LoadCublasLt() {
  const Library& lib = Lib();
  if (!lib.handle) return FailedPrecondition("cuBLASLt could not be loaded: ", lib.error);
  return Status::Ok();
}

}  // namespace onnxamp::cuda

// Each forwards to the loaded library; without it, cuBLAS's "not initialized" status (or a fixed string).
#define ONNXAMP_CUBLASLT_FORWARD(name, ...)                      \
  static const auto fn = ::onnxamp::cuda::Resolve(&name, #name); \
  if (!fn) return CUBLAS_STATUS_NOT_INITIALIZED;                 \
  return fn(__VA_ARGS__)

using onnxamp::cuda::Resolve;

extern "C" {

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* handle) {
  ONNXAMP_CUBLASLT_FORWARD(cublasLtCreate, handle);
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t handle) {
  ONNXAMP_CUBLASLT_FORWARD(cublasLtDestroy, handle);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                                           const void* a, cublasLtMatrixLayout_t a_desc, const void* b,
                                           cublasLtMatrixLayout_t b_desc, const void* beta, const void* c,
                                           cublasLtMatrixLayout_t c_desc, void* d, cublasLtMatrixLayout_t d_desc,
                                           const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                                           cudaStream_t stream) {
  ONNXAMP_CUBLASLT_FORWARD(cublasLtMatmul, handle, desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d, d_desc, algo,
                           workspace, workspace_bytes, stream);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                                           cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                                                           cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                                                           cublasLtMatmulPreference_t preference, int requested,
                                                           cublasLtMatmulHeuristicResult_t results[], int* returned) {
  ONNXAMP_CUBLASLT_FORWARD(cublasLtMatmulAlgoGetHeuristic, handle, desc, a_desc, b_desc, c_desc, d_desc, preference,
                           requested, results, returned);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                                     cudaDataType_t scale) {
  ONNXAMP_CUBLASLT_FORWARD(cublasLtMatmulDescCreate, desc, compute, scale);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  ONNXAMP_CUBLASLT_FORWARD(cublasLtMatmulDescDestroy, desc);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                           cublasLtMatmulDescAttributes_t attr, const void* buf,
                                                           size_t bytes) {
  ONNXAMP_CUBLASLT_FORWARD(cublasLtMatmulDescSetAttribute, desc, attr, buf, bytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  ONNXAMP_CUBLASLT_FORWARD(cublasLtMatmulPreferenceCreate, pref);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  ONNXAMP_CUBLASLT_FORWARD(cublasLtMatmulPreferenceDestroy, pref);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                                 cublasLtMatmulPreferenceAttributes_t attr,
                                                                 const void* buf, size_t bytes) {
  ONNXAMP_CUBLASLT_FORWARD(cublasLtMatmulPreferenceSetAttribute, pref, attr, buf, bytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                                       uint64_t cols, int64_t ld) {
  ONNXAMP_CUBLASLT_FORWARD(cublasLtMatrixLayoutCreate, layout, type, rows, cols, ld);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  ONNXAMP_CUBLASLT_FORWARD(cublasLtMatrixLayoutDestroy, layout);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                             cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                             size_t bytes) {
  ONNXAMP_CUBLASLT_FORWARD(cublasLtMatrixLayoutSetAttribute, layout, attr, buf, bytes);
}

const char* CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) {
  static const auto fn = Resolve(&cublasLtGetStatusName, "cublasLtGetStatusName");
  return fn ? fn(status) : "CUBLAS_STATUS (cuBLASLt not loaded)";
}

const char* CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
  static const auto fn = Resolve(&cublasLtGetStatusString, "cublasLtGetStatusString");
  return fn ? fn(status) : "cuBLASLt is not loaded";
}

}  // extern "C"
