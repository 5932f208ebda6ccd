// Registration of the CUDA elementwise kernel family, and the broadcast-plan-to-geometry conversion its kernels
// share.
#include "runtime/cuda/ops/elementwise/elementwise_kernels.h"

namespace onnxamp::cuda {

namespace ew {

Geometry FlatGeometry(int64_t n, int num_inputs) {
  Geometry g;
  g.n = n;
  g.rank = 1;
  g.num_inputs = num_inputs;
  g.dims[0] = n;
  for (int i = 0; i < num_inputs && i < kMaxInputs; ++i) g.strides[i][0] = 1;
  return g;
}

StatusOr<Geometry> GeometryFromPlan(const ops::BroadcastPlan& plan) {
  if (plan.num_inputs() > static_cast<size_t>(kMaxInputs)) {
    return Unimplemented(plan.num_inputs(), " inputs are more than the ", kMaxInputs, " CUDA elementwise kernels take");
  }
  if (plan.rank() > kMaxDims) {
    return Unimplemented("broadcasting over ", plan.rank(), " dims (after merging) is more than the ", kMaxDims,
                         " CUDA elementwise kernels take");
  }
  Geometry g;
  g.n = plan.num_elements();
  g.rank = plan.rank();
  g.num_inputs = static_cast<int>(plan.num_inputs());
  for (int k = 0; k < g.rank; ++k) {
    g.dims[k] = plan.dims()[k];
    for (int i = 0; i < g.num_inputs; ++i) g.strides[i][k] = plan.stride(i, k);
  }
  return g;
}

}  // namespace ew

void RegisterCudaElementwiseKernels(exec::KernelRegistry& r) {
  RegisterCudaMathKernels(r);
  RegisterCudaConvertSelectKernels(r);
  RegisterCudaRandomKernels(r);
  RegisterCudaQuantizeKernels(r);
}

}  // namespace onnxamp::cuda
