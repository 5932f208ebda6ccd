// ArgMax and ArgMin (CPU): the int64 index of the largest (smallest) value along `axis` (default 0), with keepdims
// (default 1) and select_last_index (opset 12+, default 0: the first of equal values wins). NaN counts as the
// extreme value, as in NumPy. Any numeric element type; fp16/bf16 compare in float.
#include <algorithm>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/argmax/argmax.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/nan_compare.h"
#include "runtime/ops/common/reduce.h"

namespace onnxamp::ops {
namespace {

using nan_compare::Replaces;

inline constexpr int64_t kInnerBlock = 256;

template <bool kMax>
class ArgExtremeCpu : public exec::OpKernel {
 public:
  ArgExtremeCpu(const exec::KernelInfo& info, Status* st) { *st = ParseArgExtremeSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const ArgExtremeShape shape, ResolveArgExtremeShape(spec_, x, kMax));
    const reduce::AxisView& v = shape.view;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kInt64, shape.out_dims));
    int64_t* out = y->mutable_values<int64_t>().data();
    return DispatchNumeric(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      Run(x->values<T>().data(), v, out, ctx.threads());
      return Status::Ok();
    });
  }

 private:
  template <typename T>
  void Run(const T* x, const reduce::AxisView& v, int64_t* out, exec::ThreadPool& pool) const {
    using A = ComputeType<T>;
    const bool last = spec_.select_last;
    if (v.inner == 1) {
      reduce::ParallelOver(pool, v.outer, v.n, [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
          const T* row = x + o * v.n;
          A best = reduce::LoadFast<T>(row[0]);
          int64_t index = 0;
          for (int64_t j = 1; j < v.n; ++j) {
            const A c = reduce::LoadFast<T>(row[j]);
            if (Replaces<kMax>(c, best, last)) {
              best = c;
              index = j;
            }
          }
          out[o] = index;
        }
      });
      return;
    }
    const int64_t blocks = (v.inner + kInnerBlock - 1) / kInnerBlock;
    reduce::ParallelOver(pool, v.outer * blocks, v.n * std::min(v.inner, kInnerBlock), [&](int64_t u0, int64_t u1) {
      A best[kInnerBlock];
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t o = u / blocks, i0 = (u % blocks) * kInnerBlock;
        const int64_t w = std::min(kInnerBlock, v.inner - i0);
        const T* base = x + o * v.n * v.inner + i0;
        int64_t* index = out + o * v.inner + i0;
        for (int64_t i = 0; i < w; ++i) {
          best[i] = reduce::LoadFast<T>(base[i]);
          index[i] = 0;
        }
        for (int64_t j = 1; j < v.n; ++j) {
          const T* row = base + j * v.inner;
          for (int64_t i = 0; i < w; ++i) {
            const A c = reduce::LoadFast<T>(row[i]);
            if (Replaces<kMax>(c, best[i], last)) {
              best[i] = c;
              index[i] = j;
            }
          }
        }
      }
    });
  }

  ArgExtremeSpec spec_;
};

}  // namespace

void RegisterArgMaxKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                    DType::kInt8,    DType::kUint8,   DType::kInt16,    DType::kUint16,
                                    DType::kInt32,   DType::kUint32,  DType::kInt64,    DType::kUint64};
  // Opsets 1-23: negative axes (11) and select_last_index (12) only add options; the defaults keep old behaviour.
  r.Register({"ArgMax", "", 1, 23, Device::kCpu, types, 0, &exec::MakeKernel<ArgExtremeCpu<true>>});
  r.Register({"ArgMin", "", 1, 23, Device::kCpu, types, 0, &exec::MakeKernel<ArgExtremeCpu<false>>});
}

}  // namespace onnxamp::ops
