// ONNXAMP_HOST_DEVICE: marks small inline functions that CPU code and CUDA kernels share (__host__ __device__ when
// compiled by nvcc, nothing otherwise), so that both backends run the very same code.
#pragma once

#if defined(__CUDACC__)
#define ONNXAMP_HOST_DEVICE __host__ __device__
#else
#define ONNXAMP_HOST_DEVICE
#endif
