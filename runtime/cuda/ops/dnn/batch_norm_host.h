// Host-side helper of the batch-normalisation kernels (batch_norm_cuda.cc, pool_bn_grad_cuda.cc): the per-channel
// double arrays they work in, taken from the CUDA workspace, with the parameter inputs converted into the first ones.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/common/status.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/dnn/dnn_launch.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::cuda::dnn {

// `arrays` arrays of `params` doubles in the workspace; (*this)(i) is array i.
class ChannelArrays {
 public:
  // Takes the workspace and converts inputs [first, first + count) of `ctx` (checked: `params` values of a float
  // type each) to double into arrays 0 .. count - 1, on the context's stream.
  Status Init(exec::KernelContext& ctx, CudaContext& cuda, int arrays, int64_t params, int first, int count) {
    stride_ = static_cast<size_t>(params);
    ONNXAMP_ASSIGN_OR_RETURN(void* ws, cuda.Workspace(static_cast<size_t>(arrays) * stride_ * sizeof(double)));
    data_ = static_cast<double*>(ws);
    for (int i = 0; i < count; ++i) {
      const ir::Tensor* t = ctx.input(first + i);
      ONNXAMP_RETURN_IF_ERROR(LaunchToDouble(cuda.stream(), t->dtype(), params, t->data(), (*this)(i)));
    }
    return Status::Ok();
  }

  double* operator()(int i) const { return data_ + static_cast<size_t>(i) * stride_; }

 private:
  double* data_ = nullptr;
  size_t stride_ = 0;
};

}  // namespace onnxamp::cuda::dnn
