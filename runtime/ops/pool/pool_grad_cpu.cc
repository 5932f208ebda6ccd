// MaxPoolGrad and AveragePoolGrad (CPU, com.onnxamp): the data gradients of MaxPool and AveragePool
// (runtime/ops/gradient_ops.h). MaxPoolGrad adds each dY element at the flat position of X its Indices element names;
// AveragePoolGrad spreads each dY element evenly over the input positions its window averaged, dividing by the same
// count as the forward kernel (pool_cpu.cc): positions inside the input, or with count_include_pad those inside the
// explicitly padded input. Sums are formed in float (double for double) in a fixed order and rounded once on store.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/dtype_dispatch.h"
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
      using A = AccumType<T>;
      const T* g = dy->values<T>().data();
      const int64_t* at = indices->values<int64_t>().data();
      T* out = dx->mutable_values<T>().data();
      if constexpr (std::is_same_v<A, T>) {
        // Summed in dX itself, in the same order.
        std::fill(out, out + x_count, T(0));
        for (int64_t i = 0; i < dy->num_elements(); ++i) {
          if (at[i] < 0) continue;
          if (at[i] >= x_count) {
            return InvalidArgument("input 1 (Indices) element ", i, " is ", at[i], ", outside X of shape ",
                                   ShapeToString(x_dims));
          }
          out[at[i]] += g[i];
        }
        return Status::Ok();
      }
      std::vector<A> acc(static_cast<size_t>(x_count), A(0));
      for (int64_t i = 0; i < dy->num_elements(); ++i) {
        if (at[i] < 0) continue;  // a window entirely in the padding: no input element took part
        if (at[i] >= x_count) {
          return InvalidArgument("input 1 (Indices) element ", i, " is ", at[i], ", outside X of shape ",
                                 ShapeToString(x_dims));
        }
        acc[static_cast<size_t>(at[i])] += LoadAccum(g[i]);
      }
      for (int64_t i = 0; i < x_count; ++i) out[i] = StoreAccum<T>(acc[static_cast<size_t>(i)]);
      return Status::Ok();
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
