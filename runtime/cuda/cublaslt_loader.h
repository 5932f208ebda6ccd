// cuBLASLt is loaded on first use rather than linked: mapping and relocating libcublasLt costs every process that
// links it about 200 MiB of resident memory and 0.2 s at start, which a CPU-only run of the CLI should not pay. This
// file's .cc defines the cuBLASLt functions the backend calls, each forwarding to the library opened with dlopen.
#pragma once

#include "runtime/common/status.h"

namespace onnxamp::cuda {

// Opens libcublasLt (libcublasLt.so.13, else libcublasLt.so, from the loader's search path) once. FailedPrecondition
// with dlopen's reason when it cannot be loaded; the forwarding functions then return CUBLAS_STATUS_NOT_INITIALIZED.
Status LoadCublasLt();

}  // namespace onnxamp::cuda
