// Det and DetGrad on CUDA (det_launch.h). Built with --fmad=false (runtime/cuda/CMakeLists.txt) so that the
// factorisations round as the CPU's do.
#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/linalg/det_launch.h"
#include "runtime/ops/det/det_math.h"

namespace onnxamp::cuda {
namespace {

namespace det = ops::det;

template <typename T>
__global__ void DetKernel(DetArgs a, bool grad, int64_t per, double* __restrict__ storage) {
  const int64_t nn = a.n * a.n;
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.batch;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double* m = storage + i * per;
    for (int64_t k = 0; k < nn; ++k) m[k] = static_cast<double>(LoadValue(x[i * nn + k]));
    if (!grad) {
      y[i] = StoreValue<T>(static_cast<ComputeType<T>>(det::LuDeterminant(m, a.n)));
      continue;
    }
    double* work = m + nn;
    double* inv = work + nn;
    double* c = inv + nn;
    double* minor = c + nn;
    const double g = static_cast<double>(LoadValue(static_cast<const T*>(a.dy)[i]));
    if (!det::Cofactors(m, a.n, work, inv, minor, c)) {
      atomicMin(a.failed, static_cast<unsigned long long>(i));
      continue;
    }
    for (int64_t k = 0; k < nn; ++k) y[i * nn + k] = StoreValue<T>(static_cast<ComputeType<T>>(g * c[k]));
  }
}

}  // namespace

int64_t DetStoragePerMatrix(int64_t n, bool grad) {
  if (!grad) return n * n;
  return 4 * n * n + (n > 0 && n <= det::kMaxMinorsOrder ? (n - 1) * (n - 1) : 0);
}

Status LaunchDet(const DetArgs& a, bool grad, const GradScratchFn& scratch, cudaStream_t stream) {
  if (a.batch == 0) return Status::Ok();
  const int64_t per = DetStoragePerMatrix(a.n, grad);
  double* storage = nullptr;
  if (per > 0) {
    ONNXAMP_ASSIGN_OR_RETURN(void* p, scratch(static_cast<size_t>(a.batch * per) * sizeof(double)));
    storage = static_cast<double*>(p);
  }
  return DispatchFloat(a.dtype, grad ? "DetGrad" : "Det", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    DetKernel<T><<<GridFor(a.batch, 64), 64, 0, stream>>>(a, grad, per, storage);
    return CheckLaunch(grad ? "DetGrad" : "Det");
  });
}

}  // namespace onnxamp::cuda
