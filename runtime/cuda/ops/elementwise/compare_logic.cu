// CUDA broadcasting comparisons (Equal Less Greater LessOrEqual GreaterOrEqual: numeric types, Equal also bool) and
// logic (And Or Xor on bool), giving bool. Floats compare as IEEE does (NaN is unequal to everything); fp16/bf16
// compare their float values, as the CPU kernels (runtime/ops/elementwise/compare_logic_cpu.cc).
#include <cstdint>
#include <type_traits>

#include "runtime/cuda/ops/elementwise/elementwise_engine.cuh"

namespace onnxamp::cuda::ew {
namespace {

struct EqualF {
  template <typename C>
  __device__ bool operator()(C a, C b) const {
    return a == b;
  }
};
struct LessF {
  template <typename C>
  __device__ bool operator()(C a, C b) const {
    return a < b;
  }
};
struct GreaterF {
  template <typename C>
  __device__ bool operator()(C a, C b) const {
    return a > b;
  }
};
struct LessOrEqualF {
  template <typename C>
  __device__ bool operator()(C a, C b) const {
    return a <= b;
  }
};
struct GreaterOrEqualF {
  template <typename C>
  __device__ bool operator()(C a, C b) const {
    return a >= b;
  }
};
struct AndF {
  __device__ bool operator()(bool a, bool b) const { return a && b; }
};
struct OrF {
  __device__ bool operator()(bool a, bool b) const { return a || b; }
};
struct XorF {
  __device__ bool operator()(bool a, bool b) const { return a != b; }
};

// Numeric types, and bool when kWithBool (Equal).
template <bool kWithBool, typename Op>
Status RunCompare(const Op& op, DType dtype, const void* a, const void* b, bool* out, const Geometry& g,
                  cudaStream_t stream, std::string_view what) {
  return DispatchNumericOrBool(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool> && !kWithBool) {
      return Unimplemented(what, ": element type bool is not supported");
    } else {
      return RunBinary(MathBinary<Op, T, T, bool>{op}, static_cast<const T*>(a), static_cast<const T*>(b), out, g,
                       stream, what);
    }
  });
}

template <typename Op>
Status RunLogic(const Op& op, DType dtype, const void* a, const void* b, bool* out, const Geometry& g,
                cudaStream_t stream, std::string_view what) {
  if (dtype != DType::kBool) return Unimplemented(what, ": element type ", DTypeName(dtype), " is not supported");
  return RunBinary(op, static_cast<const bool*>(a), static_cast<const bool*>(b), out, g, stream, what);
}

}  // namespace

Status LaunchCompareLogic(BinaryOp op, DType dtype, const void* a, const void* b, bool* out, const Geometry& g,
                          cudaStream_t stream, std::string_view what) {
  switch (op) {
    case BinaryOp::kEqual:
      return RunCompare<true>(EqualF{}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kLess:
      return RunCompare<false>(LessF{}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kGreater:
      return RunCompare<false>(GreaterF{}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kLessOrEqual:
      return RunCompare<false>(LessOrEqualF{}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kGreaterOrEqual:
      return RunCompare<false>(GreaterOrEqualF{}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kAnd:
      return RunLogic(AndF{}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kOr:
      return RunLogic(OrF{}, dtype, a, b, out, g, stream, what);
    case BinaryOp::kXor:
      return RunLogic(XorF{}, dtype, a, b, out, g, stream, what);
    default:
      return Internal(what, ": op ", static_cast<int>(op), " is no comparison");
  }
}

}  // namespace onnxamp::cuda::ew
