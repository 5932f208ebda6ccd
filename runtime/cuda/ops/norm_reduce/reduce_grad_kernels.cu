// CUDA launcher for ReduceProdGrad: a thread per reduction group (dY element) walks its members twice, as the CPU
// kernel (runtime/ops/reduce/reduce_prod_grad_cpu.cc): prefix products forwards, kept in a double scratch buffer of
// X's size, then suffix products backwards, so dX[i] = dY * prefix[i] * suffix[i] needs no division and zeros in X
// give exact results. Products are in double in the CPU's order, so results are the CPU's bits.
#include <cstdint>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/norm_reduce/grad_launch.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_device.cuh"
#include "runtime/cuda/ops/norm_reduce/reduce_engine.cuh"

namespace onnxamp::cuda::norm_reduce {
namespace {

template <typename T>
__global__ void ReduceProdGradKernel(const T* __restrict__ dy, const T* __restrict__ x, T* __restrict__ dx,
                                     double* __restrict__ prefix, ReduceProdGradArgs a) {
  using C = ComputeType<T>;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < a.groups;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = MergedOffset(a.kept_dims, a.kept_strides, a.kept_rank, o);
    double p = 1;
    for (int64_t k = 0; k < a.group_size; ++k) {
      const int64_t i = base + MergedOffset(a.red_dims, a.red_strides, a.red_rank, k);
      prefix[i] = p;
      p *= static_cast<double>(LoadValue<T>(x[i]));
    }
    const double gy = static_cast<double>(LoadValue<T>(dy[o]));
    double s = 1;
    for (int64_t k = a.group_size; k-- > 0;) {
      const int64_t i = base + MergedOffset(a.red_dims, a.red_strides, a.red_rank, k);
      dx[i] = StoreValue<T>(static_cast<C>(gy * prefix[i] * s));
      s *= static_cast<double>(LoadValue<T>(x[i]));
    }
  }
}

}  // namespace

Status LaunchReduceProdGrad(const ReduceProdGradArgs& args, const ScratchFn& scratch, cudaStream_t stream) {
  if (args.groups == 0 || args.group_size == 0) return Status::Ok();
  return DispatchFloat(args.dtype, "ReduceProdGrad", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const size_t bytes = static_cast<size_t>(args.groups) * static_cast<size_t>(args.group_size) * sizeof(double);
    ONNXAMP_ASSIGN_OR_RETURN(void* prefix, scratch(bytes));
    ReduceProdGradKernel<T><<<GridFor(args.groups), kThreadsPerBlock, 0, stream>>>(
        static_cast<const T*>(args.dy), static_cast<const T*>(args.x), static_cast<T*>(args.dx),
        static_cast<double*>(prefix), args);
    return CheckLaunch("ReduceProdGrad");
  });
}

}  // namespace onnxamp::cuda::norm_reduce
