// Launcher of the CUDA Det kernel and of its com.onnxamp gradient DetGrad (det_kernels.cu): det_cuda.cc checks the
// inputs with the CPU kernel's helper (runtime/ops/det/det.h) and calls this, which queues the work on `stream`
// without synchronising. One thread per matrix runs the CPU's own LU factorisation and cofactor computations
// (runtime/ops/det/det_math.h) in double, in a file built without FMA contraction: the CPU's bits. The parallelism is
// the number of matrices: fast for many small ones, slow for one large one.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/cuda/ops/tensor/index_grad_launch.h"

namespace onnxamp::cuda {

// x: `batch` n x n matrices of `dtype` (a float type). Det: y [batch] the determinants. DetGrad: y [batch, n, n] =
// dy[i] times the cofactor matrix of matrix i; *failed (device memory) is lowered to the index of a singular matrix
// larger than ops::det::kMaxMinorsOrder, whose cofactors are not computed (left as they were before the call): the
// smallest such index, the one the CPU kernel reports.
struct DetArgs {
  DType dtype = DType::kFloat32;
  int64_t n = 0, batch = 0;
  const void* x = nullptr;
  const void* dy = nullptr;  // DetGrad
  void* y = nullptr;
  unsigned long long* failed = nullptr;  // DetGrad
};

// The doubles of storage one matrix takes (Det: n^2; DetGrad: 4 n^2, plus (n - 1)^2 when n <= kMaxMinorsOrder).
int64_t DetStoragePerMatrix(int64_t n, bool grad);

// Takes batch * DetStoragePerMatrix doubles from `scratch`, once.
Status LaunchDet(const DetArgs& args, bool grad, const GradScratchFn& scratch, cudaStream_t stream);

}  // namespace onnxamp::cuda
