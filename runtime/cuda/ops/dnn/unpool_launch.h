// Launchers of the CUDA MaxUnpool kernel and of its com.onnxamp gradient MaxUnpoolGrad (unpool_kernels.cu):
// unpool_cuda.cc checks attributes and shapes with the CPU kernel's helpers (runtime/ops/pool/unpool.h) and calls
// these, which queue the work on `stream` without synchronising. The indices stay on the device: an index outside the
// unpooled shape, which the CPU refuses (OutOfRange), addresses nothing there (MaxUnpool drops the element,
// MaxUnpoolGrad gives it 0).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/cuda/ops/tensor/index_grad_launch.h"

namespace onnxamp::cuda {

inline constexpr int kMaxUnpoolRank = 8;

// X, I and dX hold x_count elements, Y and dY out_count; I is int64 (device memory) of flat indices into the
// `inferred` shape (contiguous strides inferred_strides, inferred_size elements), whose element at those
// coordinates is at out_strides in the output. Elements move as bytes of `dtype`'s size.
struct UnpoolArgs {
  DType dtype = DType::kFloat32;
  int rank = 0;
  int64_t x_count = 0, out_count = 0, inferred_size = 0;
  int64_t inferred_strides[kMaxUnpoolRank] = {};
  int64_t out_strides[kMaxUnpoolRank] = {};
  const int64_t* indices = nullptr;
  const void* x = nullptr;   // MaxUnpool
  void* y = nullptr;         // MaxUnpool
  const void* dy = nullptr;  // MaxUnpoolGrad
  void* dx = nullptr;        // MaxUnpoolGrad
};

// Y: zero but where an index names a position; where several do, the last element's value (the CPU writes in element
// order): each position records the largest element index that names it (atomicMax, whose result does not depend on
// the order), then one gather writes every position. Takes out_count 8-byte words from `scratch`, once.
Status LaunchMaxUnpool(const UnpoolArgs& args, const GradScratchFn& scratch, cudaStream_t stream);

// dX[e] = dY at the position I[e] names (0 for an index outside the unpooled shape).
Status LaunchMaxUnpoolGrad(const UnpoolArgs& args, cudaStream_t stream);

}  // namespace onnxamp::cuda
