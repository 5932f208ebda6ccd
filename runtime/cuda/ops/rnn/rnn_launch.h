// Launchers of the CUDA RNN, GRU and LSTM kernels and their com.onnxamp RNNGrad (rnn_kernels.cu), callable from plain
// C++: rnn_cuda.cc checks attributes and inputs with the CPU kernels' helpers (runtime/ops/rnn/rnn.h), supplies memory
// and GEMMs through DeviceOps, and calls these, which queue the work on the stream without synchronising.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/cuda/ops/rnn/rnn_recurrence.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::cuda::recurrence {

// What the device passes take from the session: device memory (a pass holds its blocks until it returns; the caching
// allocator orders their reuse on the one stream), cuBLASLt products (float, or double for float64 tensors) and the
// stream.
class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  virtual StatusOr<std::shared_ptr<ir::Buffer>> Allocate(size_t bytes) = 0;
  virtual Status Gemm(const Product<float>& p) = 0;
  virtual Status Gemm(const Product<double>& p) = 0;
  virtual cudaStream_t stream() const = 0;
};

// recurrence::Forward and recurrence::Backward (rnn_recurrence.h) on the device, A float or double.
template <typename A>
Status ForwardOnDevice(DeviceOps& ops, const Spec& spec, const Sizes& n, const Inputs<A>& in, int d, A* y, A* y_h,
                       A* y_c, const Trace<A>* trace);
template <typename A>
Status BackwardOnDevice(DeviceOps& ops, const Spec& spec, const Sizes& n, const Inputs<A>& in, int d,
                        const Trace<A>& trace, const A* dy, const A* dy_h, const A* dy_c, const Grads<A>& grads);

// sequence_lens (int32 or int64, `batch` values, device memory) as int64 in [0, seq]: a value outside is clamped
// (the device cannot raise the CPU kernel's error without a synchronisation).
Status LengthsOnDevice(const void* lengths, bool int64, int64_t batch, int64_t seq, int64_t* out, cudaStream_t stream);

// Between a tensor of a float type (float32, float16, bfloat16, float64) and the compute type (float; double for
// float64), with a permutation of at most 4 dims: dim k of the destination is dim perm[k] of the source (`src_dims`;
// an empty perm keeps the order). ToCompute widens, FromCompute rounds once to the tensor's type, as rnn_core.cc's
// ToCompute and FromCompute do.
Status ToComputeOnDevice(DType dtype, const void* src, const std::vector<int64_t>& src_dims,
                         const std::vector<int>& perm, void* dst, cudaStream_t stream);
Status FromComputeOnDevice(DType dtype, const void* src, const std::vector<int64_t>& src_dims,
                           const std::vector<int>& perm, void* dst, cudaStream_t stream);

}  // namespace onnxamp::cuda::recurrence
