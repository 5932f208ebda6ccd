// MaxPoolGrad and AveragePoolGrad (CPU, com.onnxamp): the data gradients of MaxPool and AveragePool
// (runtime/ops/gradient_ops.h). MaxPoolGrad adds each dY element at the flat position of X its Indices element names;
// AveragePoolGrad spreads each dY element evenly over the input positions its window averaged, dividing by the same
// count as the forward kernel (pool_cpu.cc): positions inside the input, or with count_include_pad those inside the
// explicitly padded input. Sums are formed in float (double for double) in a fixed order and rounded once on store.
// MaxPoolGrad runs plane by plane on the session's threads when MaxPool's Indices keep to their planes (the same
// sums in the same order; ResNet-50's stem pool at batch 8: 12.8 ms on one thread).
#include <algorithm>
#include <atomic>
#include <type_traits>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/elementwise_half.h"
#include "runtime/ops/common/gemm_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/pool/pool.h"

namespace onnxamp::ops {
namespace {

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Calls f(i, g[i] in its compute type) for i = 0, 1, ... < count until f returns false; fp16/bf16 values are
// converted in blocks with the vector conversions (ForEachComputeBlock: one at a time they cost more than the scatter).
template <typename T, typename F>
void ForEachLoaded(const T* g, int64_t count, F&& f) {
  ForEachComputeBlock(g, count, [&](const ComputeType<T>* v, int64_t offset, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      if (!f(offset + j, v[j])) return false;
    }
    return true;
  });
}

// MaxPoolGrad's sums, element by element of dY, in dX (T == A) or in an A buffer rounded once: every dY element in
// order, as the contract says. Fails on the first index outside X.
template <typename T>
Status ScatterAll(const T* g, const int64_t* at, int64_t count, T* out, int64_t x_count,
                  const std::vector<int64_t>& x_dims) {
  using A = AccumType<T>;
  auto outside = [&](int64_t i) {
    return InvalidArgument("input 1 (Indices) element ", i, " is ", at[i], ", outside X of shape ",
                           ShapeToString(x_dims));
  };
  if constexpr (std::is_same_v<A, T>) {
    std::fill(out, out + x_count, T(0));
    for (int64_t i = 0; i < count; ++i) {
      if (at[i] < 0) continue;  // a window entirely in the padding: no input element took part
      if (at[i] >= x_count) return outside(i);
      out[at[i]] += g[i];
    }
    return Status::Ok();
  } else {
    // A float buffer of the calling thread (kept between calls), rounded once into dX with the vector conversions
    // (StoreBlock: Store<T>'s rounding).
    thread_local std::vector<A> acc;
    acc.assign(static_cast<size_t>(x_count), A(0));
    int64_t bad = -1;
    ForEachLoaded(g, count, [&](int64_t i, A v) {
      if (at[i] < 0) return true;
      if (at[i] >= x_count) {
        bad = i;
        return false;
      }
      acc[static_cast<size_t>(at[i])] += v;
      return true;
    });
    if (bad >= 0) return outside(bad);
    if constexpr (kIsHalfLike<T>) {
      StoreBlock(acc.data(), out, x_count);
    } else {
      for (int64_t i = 0; i < x_count; ++i) out[i] = StoreAccum<T>(acc[static_cast<size_t>(i)]);
    }
    return Status::Ok();
  }
}

// The same sums, plane by plane (an image's channel: dY's and X's first two dims agree) on the session's threads,
// when every index of a dY plane lies in the same plane of X, as MaxPool's Indices do: then each dX element's sum
// takes the same dY elements in the same order as ScatterAll. Returns false (having written dX partly) when an
// index lies elsewhere or outside X; the caller then runs ScatterAll, which also names a bad index.
template <typename T>
bool ScatterByPlanes(const T* g, const int64_t* at, int64_t planes, int64_t y_plane, T* out, int64_t x_plane,
                     exec::ThreadPool& threads) {
  using A = AccumType<T>;
  std::atomic<bool> elsewhere{false};
  threads.ParallelFor(planes, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<A> acc;
    if constexpr (!std::is_same_v<A, T>) acc.resize(static_cast<size_t>(x_plane));
    for (int64_t p = begin; p < end && !elsewhere.load(std::memory_order_relaxed); ++p) {
      const int64_t lo = p * x_plane;
      const T* gp = g + p * y_plane;
      const int64_t* ap = at + p * y_plane;
      // Summed in dX itself, or (fp16/bf16) in a float buffer rounded once.
      A* sums = nullptr;
      if constexpr (std::is_same_v<A, T>) {
        sums = out + lo;
      } else {
        sums = acc.data();
      }
      std::fill(sums, sums + x_plane, A(0));
      ForEachLoaded(gp, y_plane, [&](int64_t i, A v) {
        if (ap[i] < 0) return true;
        const int64_t k = ap[i] - lo;
        if (k >= x_plane || k < 0) {
          elsewhere.store(true, std::memory_order_relaxed);
          return false;
        }
        sums[k] += v;
        return true;
      });
      if constexpr (kIsHalfLike<T>) {
        StoreBlock(sums, out + lo, x_plane);
      } else if constexpr (!std::is_same_v<A, T>) {
        for (int64_t k = 0; k < x_plane; ++k) out[lo + k] = StoreAccum<T>(sums[k]);
      }
    }
  });
  return !elsewhere.load();
}

class MaxPoolGradCpu : public exec::OpKernel {
 public:
  MaxPoolGradCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* indices = ctx.input(1);
    ONNXAMP_RETURN_IF_ERROR(CheckPoolGradInput(dy));
    ONNXAMP_RETURN_IF_ERROR(CheckMaxPoolGradIndices(dy, indices));
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> x_dims, ReadPoolShapeInput(ctx.input(2), 2, "X_shape"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), x_dims));
    const int64_t x_count = Product(x_dims);
    return DispatchFloat(dy->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* g = dy->values<T>().data();
      const int64_t* at = indices->values<int64_t>().data();
      T* out = dx->mutable_values<T>().data();
      const std::vector<int64_t>& y_dims = dy->dims();
      const bool by_planes = ctx.threads().num_threads() > 1 && y_dims.size() >= 3 && x_dims.size() == y_dims.size() &&
                             y_dims[0] == x_dims[0] && y_dims[1] == x_dims[1] && y_dims[0] * y_dims[1] > 1 &&
                             x_count > 0;
      if (by_planes) {
        const int64_t planes = y_dims[0] * y_dims[1];
        if (ScatterByPlanes(g, at, planes, dy->num_elements() / planes, out, x_count / planes, ctx.threads())) {
          return Status::Ok();
        }
      }
      return ScatterAll(g, at, dy->num_elements(), out, x_count, x_dims);
    });
  }
};

class AveragePoolGradCpu : public exec::OpKernel {
 public:
  AveragePoolGradCpu(const exec::KernelInfo& info, Status* st) {
    *st = ParsePoolAttrs(info.node, /*max=*/false, &pool_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    ONNXAMP_RETURN_IF_ERROR(CheckPoolGradInput(dy));
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> x_dims, ReadPoolShapeInput(ctx.input(1), 1, "X_shape"));
    WindowGeometry g;
    ONNXAMP_RETURN_IF_ERROR(ResolveAveragePoolGrad(pool_, dy, x_dims, &g));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), x_dims));
    const int64_t planes = x_dims[0] * x_dims[1];
    return DispatchFloat(dy->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* gy = dy->values<T>().data();
      T* gx = dx->mutable_values<T>().data();
      ctx.threads().ParallelFor(planes, 1, [&](int64_t begin, int64_t end) { Planes(g, gy, gx, begin, end); });
      return Status::Ok();
    });
  }

 private:
  // dX for planes [begin, end): each window's share dY / count added at every input position it covers.
  template <typename T>
  void Planes(const WindowGeometry& g, const T* dy, T* dx, int64_t begin, int64_t end) const {
    using A = AccumType<T>;
    const size_t nsp = g.rank();
    const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.kernel_size();
    std::vector<int64_t> o(nsp), kk(nsp), offsets(static_cast<size_t>(k_size));
    std::vector<A> acc(static_cast<size_t>(in_size));
    for (int64_t plane = begin; plane < end; ++plane) {
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t oi = 0; oi < out_size; ++oi) {
        UnravelIndex(oi, g.out, o);
        int64_t taps = 0, count = 0;
        for (int64_t ki = 0; ki < k_size; ++ki) {
          UnravelIndex(ki, g.kernel, kk);
          bool inside = true, in_padded = true;
          int64_t offset = 0;
          for (size_t d = 0; d < nsp; ++d) {
            const int64_t pos = o[d] * g.stride[d] - g.pad_begin[d] + kk[d] * g.dilation[d];
            inside = inside && pos >= 0 && pos < g.in[d];
            in_padded = in_padded && pos < g.in[d] + g.pad_end[d];
            offset = offset * g.in[d] + pos;
          }
          if (pool_.count_include_pad ? in_padded : inside) ++count;
          if (inside) offsets[static_cast<size_t>(taps++)] = offset;
        }
        if (count == 0) continue;
        const A share = LoadAccum(dy[plane * out_size + oi]) / static_cast<A>(count);
        for (int64_t t = 0; t < taps; ++t) acc[static_cast<size_t>(offsets[static_cast<size_t>(t)])] += share;
      }
      T* out = dx + plane * in_size;
      for (int64_t i = 0; i < in_size; ++i) out[i] = StoreAccum<T>(acc[static_cast<size_t>(i)]);
    }
  }

  PoolAttrs pool_;
};

}  // namespace

void RegisterPoolGradKernels(exec::KernelRegistry& r) {
  const std::vector<DType> floats = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register(
      {kMaxPoolGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, floats, 0, &exec::MakeKernel<MaxPoolGradCpu>});
  r.Register({kAveragePoolGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, floats, 0,
              &exec::MakeKernel<AveragePoolGradCpu>});
}

}  // namespace onnxamp::ops
