// The centering kernel of the CUDA MatMulInteger and QLinearMatMul (an 8-bit operand minus its zero point, as int32)
// and QLinearMatMul's requantization (linalg_device.h).
#include <cstdint>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/linalg/linalg_device.h"
#include "runtime/cuda/ops/linalg/requantize_device.cuh"

namespace onnxamp::cuda {
namespace {

template <typename Q>
__global__ void CenterKernel(const Q* x, const Q* zp, int64_t count, int64_t run, int64_t n, int32_t* y) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int32_t z = zp ? static_cast<int32_t>(zp[count == 1 ? 0 : (e / run) % count]) : 0;
    y[e] = static_cast<int32_t>(x[e]) - z;
  }
}

__device__ __forceinline__ float ScaleAt(DType t, const void* p, int64_t k) {
  if (t == DType::kFloat16) return LoadValue(static_cast<const __half*>(p)[k]);
  if (t == DType::kBFloat16) return LoadValue(static_cast<const __nv_bfloat16*>(p)[k]);
  return static_cast<const float*>(p)[k];
}

template <typename Q>
__global__ void RequantizeKernel(RequantizeArgs a, double lo, double hi) {
  const double zp = static_cast<double>(*static_cast<const Q*>(a.y_zero_point));
  const float ys = ScaleAt(a.y_scale_type, a.y_scale, 0);
  Q* y = static_cast<Q*>(a.y);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < a.n; e += stride) {
    const int64_t row = (e / a.cols) % a.rows, col = e % a.cols;
    const float as = ScaleAt(a.a_scale_type, a.a_scale, a.a_count > 1 ? row : 0);
    const float bs = ScaleAt(a.b_scale_type, a.b_scale, a.b_count > 1 ? col : 0);
    const float s = __fdiv_rn(__fmul_rn(as, bs), ys);
    y[e] = static_cast<Q>(RequantizeValue(a.acc[e], s, zp, lo, hi));
  }
}

}  // namespace

Status LaunchRequantize(const RequantizeArgs& args, cudaStream_t stream, std::string_view what) {
  if (args.n <= 0) return Status::Ok();
  if (args.a_count > 1 && args.b_count > 1) return Internal(what, ": per-row and per-column scales together");
  if (args.y_type == DType::kInt8) {
    RequantizeKernel<int8_t><<<GridFor(args.n), kThreadsPerBlock, 0, stream>>>(args, -128.0, 127.0);
  } else if (args.y_type == DType::kUint8) {
    RequantizeKernel<uint8_t><<<GridFor(args.n), kThreadsPerBlock, 0, stream>>>(args, 0.0, 255.0);
  } else {
    return Unimplemented(what, ": output type ", DTypeName(args.y_type), " is not int8 or uint8");
  }
  return CheckLaunch(what);
}

Status LaunchCenterEightBit(DType dtype, const void* x, const void* zp, int64_t count, int64_t run, int64_t n,
                            int32_t* y, cudaStream_t stream, std::string_view what) {
  if (n <= 0) return Status::Ok();
  if (count < 1 || run < 1) return Internal(what, ": bad zero-point layout (", count, " values, runs of ", run, ")");
  if (dtype == DType::kInt8) {
    CenterKernel<int8_t><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(static_cast<const int8_t*>(x),
                                                                      static_cast<const int8_t*>(zp), count, run, n, y);
  } else if (dtype == DType::kUint8) {
    CenterKernel<uint8_t><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint8_t*>(x), static_cast<const uint8_t*>(zp), count, run, n, y);
  } else {
    return Unimplemented(what, ": element type ", DTypeName(dtype), " is not int8 or uint8");
  }
  return CheckLaunch(what);
}

}  // namespace onnxamp::cuda
