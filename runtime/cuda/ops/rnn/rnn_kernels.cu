// The CUDA engine of rnn_recurrence.h (its element-wise work as grid-stride launches of the recurrence's functors,
// its products and memory from DeviceOps) and the conversions between the op's tensors and the compute type.
#include <memory>
#include <vector>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/elementwise/elementwise_launch.h"
#include "runtime/cuda/ops/rnn/rnn_launch.h"

namespace onnxamp::cuda::recurrence {
namespace {

template <typename F>
__global__ void ForEachKernel(F f, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    f(i);
  }
}

// The engine of one pass: its scratch is released when the pass returns (before the next direction's pass).
class Engine {
 public:
  explicit Engine(DeviceOps& ops) : ops_(ops) {}

  template <typename T>
  StatusOr<T*> Alloc(int64_t n) {
    if (n == 0) return nullptr;
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<ir::Buffer> block, ops_.Allocate(static_cast<size_t>(n) * sizeof(T)));
    blocks_.push_back(block);
    return reinterpret_cast<T*>(block->data());
  }

  template <typename A>
  Status Gemm(const Product<A>& p) {
    return ops_.Gemm(p);
  }

  template <typename F>
  Status ForEach(int64_t n, const F& f) {
    if (n <= 0) return Status::Ok();
    ForEachKernel<<<GridFor(n), kThreadsPerBlock, 0, ops_.stream()>>>(f, n);
    return CheckLaunch("recurrent op");
  }

 private:
  DeviceOps& ops_;
  std::vector<std::shared_ptr<ir::Buffer>> blocks_;
};

template <typename I>
__global__ void LengthsKernel(const I* __restrict__ in, int64_t batch, int64_t seq, int64_t* __restrict__ out) {
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < batch;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t v = static_cast<int64_t>(in[b]);
    out[b] = v < 0 ? 0 : v > seq ? seq : v;
  }
}

constexpr int kMaxPermuteRank = 4;

// dst (dims dst_dims, row-major) from src: destination dim k walks source elements src_strides[k] apart.
struct PermuteMap {
  int rank = 0;
  int64_t dst_dims[kMaxPermuteRank] = {};
  int64_t src_strides[kMaxPermuteRank] = {};
};

template <typename From, typename To>
__global__ void PermuteConvertKernel(const From* src, To* dst, PermuteMap m, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, offset = 0;
    for (int k = m.rank - 1; k >= 0; --k) {
      offset += (rest % m.dst_dims[k]) * m.src_strides[k];
      rest /= m.dst_dims[k];
    }
    dst[i] = StoreValue<To>(static_cast<ComputeType<To>>(LoadValue(src[offset])));
  }
}

StatusOr<PermuteMap> MakePermuteMap(const std::vector<int64_t>& src_dims, const std::vector<int>& perm,
                                    int64_t* count) {
  const int rank = static_cast<int>(src_dims.size());
  if (rank > kMaxPermuteRank || (!perm.empty() && perm.size() != src_dims.size())) {
    return Internal("recurrent op: bad layout conversion of rank ", rank);
  }
  std::vector<int64_t> strides(src_dims.size(), 1);
  for (int k = rank - 2; k >= 0; --k) strides[k] = strides[k + 1] * src_dims[k + 1];
  PermuteMap m;
  m.rank = rank;
  *count = 1;
  for (int k = 0; k < rank; ++k) {
    const int from = perm.empty() ? k : perm[k];
    m.dst_dims[k] = src_dims[from];
    m.src_strides[k] = strides[from];
    *count *= src_dims[from];
  }
  return m;
}

// Converts between `dtype` and its compute type; `widen` is the direction.
Status PermuteConvert(DType dtype, bool widen, const void* src, const std::vector<int64_t>& src_dims,
                      const std::vector<int>& perm, void* dst, cudaStream_t stream) {
  if (perm.empty()) {  // a plain conversion: the Cast kernel's
    const DType compute = dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    int64_t count = 1;
    for (int64_t d : src_dims) count *= d;
    return widen ? ew::LaunchCast(dtype, compute, src, dst, count, stream, "recurrent op")
                 : ew::LaunchCast(compute, dtype, src, dst, count, stream, "recurrent op");
  }
  int64_t n = 0;
  ONNXAMP_ASSIGN_OR_RETURN(const PermuteMap m, MakePermuteMap(src_dims, perm, &n));
  if (n == 0) return Status::Ok();
  return DispatchFloat(dtype, "recurrent op", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using A = ComputeType<T>;
    if (widen) {
      PermuteConvertKernel<T, A>
          <<<GridFor(n), kThreadsPerBlock, 0, stream>>>(static_cast<const T*>(src), static_cast<A*>(dst), m, n);
    } else {
      PermuteConvertKernel<A, T>
          <<<GridFor(n), kThreadsPerBlock, 0, stream>>>(static_cast<const A*>(src), static_cast<T*>(dst), m, n);
    }
    return CheckLaunch("recurrent op");
  });
}

}  // namespace

template <typename A>
Status ForwardOnDevice(DeviceOps& ops, const Spec& spec, const Sizes& n, const Inputs<A>& in, int d, A* y, A* y_h,
                       A* y_c, const Trace<A>* trace) {
  Engine e(ops);
  return Forward(e, spec, n, in, d, y, y_h, y_c, trace);
}

template <typename A>
Status BackwardOnDevice(DeviceOps& ops, const Spec& spec, const Sizes& n, const Inputs<A>& in, int d,
                        const Trace<A>& trace, const A* dy, const A* dy_h, const A* dy_c, const Grads<A>& grads) {
  Engine e(ops);
  return Backward(e, spec, n, in, d, trace, dy, dy_h, dy_c, grads);
}

Status LengthsOnDevice(const void* lengths, bool int64, int64_t batch, int64_t seq, int64_t* out, cudaStream_t stream) {
  if (batch <= 0) return Status::Ok();
  if (int64) {
    LengthsKernel<<<GridFor(batch), kThreadsPerBlock, 0, stream>>>(static_cast<const int64_t*>(lengths), batch, seq,
                                                                   out);
  } else {
    LengthsKernel<<<GridFor(batch), kThreadsPerBlock, 0, stream>>>(static_cast<const int32_t*>(lengths), batch, seq,
                                                                   out);
  }
  return CheckLaunch("recurrent op");
}

Status ToComputeOnDevice(DType dtype, const void* src, const std::vector<int64_t>& src_dims,
                         const std::vector<int>& perm, void* dst, cudaStream_t stream) {
  return PermuteConvert(dtype, true, src, src_dims, perm, dst, stream);
}

Status FromComputeOnDevice(DType dtype, const void* src, const std::vector<int64_t>& src_dims,
                           const std::vector<int>& perm, void* dst, cudaStream_t stream) {
  return PermuteConvert(dtype, false, src, src_dims, perm, dst, stream);
}

#define ONNXAMP_RECURRENCE_INSTANTIATE(A)                                                                            \
  template Status ForwardOnDevice<A>(DeviceOps&, const Spec&, const Sizes&, const Inputs<A>&, int, A*, A*, A*,       \
                                     const Trace<A>*);                                                               \
  template Status BackwardOnDevice<A>(DeviceOps&, const Spec&, const Sizes&, const Inputs<A>&, int, const Trace<A>&, \
                                      const A*, const A*, const A*, const Grads<A>&);

ONNXAMP_RECURRENCE_INSTANTIATE(float)
ONNXAMP_RECURRENCE_INSTANTIATE(double)
#undef ONNXAMP_RECURRENCE_INSTANTIATE

}  // namespace onnxamp::cuda::recurrence
