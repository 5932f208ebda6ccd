// TopK (CPU): the k largest (or smallest) values along `axis` (default -1) and their int64 indices. k is an
// attribute before opset 10 and a one-element int64 input from opset 10; `largest` and `sorted` exist from 11.
// Equal values keep index order (the smaller index first), and NaN ranks above every number. The result is always
// sorted: with sorted = 0 ONNX leaves the order unspecified, so sorted order is a valid choice.
#include <algorithm>
#include <numeric>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/nan_compare.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/topk/topk.h"

namespace onnxamp::ops {
namespace {

using nan_compare::Above;

// Up to this k, selection is one insertion scan; above it, std::partial_sort.
inline constexpr int64_t kSmallK = 16;

class TopKCpu : public exec::OpKernel {
 public:
  TopKCpu(const exec::KernelInfo& info, Status* st) { *st = ParseTopKSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const TopKShape shape,
                             ResolveTopKShape(spec_, x, spec_.k_from_input ? ctx.input(1) : nullptr));
    const reduce::AxisView& v = shape.view;
    const int64_t k = shape.k;
    const std::vector<int64_t>& out_dims = shape.out_dims;
    ir::Tensor* values = nullptr;
    ir::Tensor* indices = nullptr;
    if (ctx.output_requested(0)) {
      ONNXAMP_ASSIGN_OR_RETURN(values, ctx.AllocateOutput(0, x->dtype(), out_dims));
    }
    if (ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(indices, ctx.AllocateOutput(1, DType::kInt64, out_dims));
    }
    return DispatchNumeric(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      Run(x->values<T>().data(), v, k, values ? values->mutable_values<T>().data() : nullptr,
          indices ? indices->mutable_values<int64_t>().data() : nullptr, ctx.threads());
      return Status::Ok();
    });
  }

 private:
  template <typename T>
  void Run(const T* x, const reduce::AxisView& v, int64_t k, T* values, int64_t* indices,
           exec::ThreadPool& pool) const {
    using A = ComputeType<T>;
    const bool largest = spec_.largest;
    const int64_t slices = v.outer * v.inner;
    if (k == 0 || slices == 0) return;
    reduce::ParallelOver(pool, slices, v.n, [&](int64_t s0, int64_t s1) {
      std::vector<A> key(static_cast<size_t>(v.n));
      std::vector<int64_t> order(static_cast<size_t>(v.n));
      auto before = [&](int64_t a, int64_t b) {
        const A ka = key[a], kb = key[b];
        if (largest ? Above(ka, kb) : Above(kb, ka)) return true;
        if (largest ? Above(kb, ka) : Above(ka, kb)) return false;
        return a < b;
      };
      for (int64_t s = s0; s < s1; ++s) {
        const int64_t o = s / v.inner, i = s % v.inner;
        const T* src = x + o * v.n * v.inner + i;
        for (int64_t j = 0; j < v.n; ++j) key[j] = reduce::LoadFast<T>(src[j * v.inner]);
        if (k <= kSmallK) {
          // Small k: one scan keeping the k best so far in order; equal keys never displace an earlier index.
          int64_t count = 0;
          for (int64_t j = 0; j < v.n; ++j) {
            if (count == k && !before(j, order[k - 1])) continue;
            int64_t p = count < k ? count++ : k - 1;
            for (; p > 0 && before(j, order[p - 1]); --p) order[p] = order[p - 1];
            order[p] = j;
          }
        } else {
          std::iota(order.begin(), order.end(), int64_t{0});
          if (k < v.n) {
            std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
          } else {
            std::sort(order.begin(), order.end(), before);
          }
        }
        const int64_t out_base = o * k * v.inner + i;
        for (int64_t j = 0; j < k; ++j) {
          if (values) values[out_base + j * v.inner] = src[order[j] * v.inner];
          if (indices) indices[out_base + j * v.inner] = order[j];
        }
      }
    });
  }

  TopKSpec spec_;
};

}  // namespace

void RegisterTopKKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                    DType::kInt8,    DType::kUint8,   DType::kInt16,    DType::kUint16,
                                    DType::kInt32,   DType::kUint32,  DType::kInt64,    DType::kUint64};
  // One kernel for opsets 1-23: k moves from attribute to input at 10; largest/sorted appear at 11.
  r.Register({"TopK", "", 1, 23, Device::kCpu, types, 0, &exec::MakeKernel<TopKCpu>});
}

}  // namespace onnxamp::ops
