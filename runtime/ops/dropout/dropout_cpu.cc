// Dropout (CPU), opsets 1-23. Inference mode copies the input and gives a mask of all true (ones); training mode
// keeps each element with probability 1 - ratio, scaled by 1 / (1 - ratio), and zeroes the rest.
//
// Versions: 1-6 attributes is_test (0: training) and ratio, mask of type T; 7-9 ratio, always inference, mask T;
// 10-11 mask bool; 12-23 optional inputs ratio (scalar, default 0.5) and training_mode (bool scalar, default false),
// attribute seed, mask bool.
//
// The mask is a pure function of (seed, element index): element i is kept when a 24-bit uniform number hashed from
// both is >= ratio. The seed is the `seed` attribute when the node has one, otherwise the session's per-node seed
// (KernelContext::seed), so a run is reproducible and the result does not depend on the thread count.
#include <cstdint>
#include <optional>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/dropout/dropout.h"
#include "runtime/ops/dropout/dropout_mask.h"

namespace onnxamp::ops {

namespace {

class DropoutCpu : public exec::OpKernel {
 public:
  DropoutCpu(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = nullptr;
    double ratio = 0.5;
    bool training = false;
    ONNXAMP_RETURN_IF_ERROR(spec_.Resolve(ctx, &x, &ratio, &training));
    if (!training || ratio == 0.0) return Inference(ctx, *x);
    return Training(ctx, *x, ratio, spec_.Seed(ctx));
  }

 private:
  DType MaskType(DType data) const { return spec_.MaskType(data); }

  Status Inference(exec::KernelContext& ctx, const ir::Tensor& x) const {
    ONNXAMP_RETURN_IF_ERROR(ctx.SetOutput(0, x));
    if (ctx.num_outputs() < 2 || !ctx.output_requested(1)) return Status::Ok();
    const DType mt = MaskType(x.dtype());
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * mask, ctx.AllocateOutput(1, mt, x.dims()));
    return DispatchNumericOrBool(mt, [&](auto tag) -> Status {
      using M = typename decltype(tag)::type;
      auto m = mask->mutable_values<M>();
      std::fill(m.begin(), m.end(), Store<M>(ComputeType<M>(1)));
      return Status::Ok();
    });
  }

  Status Training(exec::KernelContext& ctx, const ir::Tensor& x, double ratio, uint64_t seed) const {
    const bool want_mask = ctx.num_outputs() >= 2 && ctx.output_requested(1);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x.dtype(), x.dims()));
    ir::Tensor* mask = nullptr;
    if (want_mask) {
      ONNXAMP_ASSIGN_OR_RETURN(mask, ctx.AllocateOutput(1, MaskType(x.dtype()), x.dims()));
    }
    const float threshold = static_cast<float>(ratio);
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      // 1 / (1 - ratio) in the compute type (float for fp16/bf16, as ONNX Runtime does).
      const C scale = ratio < 1.0 ? C(1) / (C(1) - static_cast<C>(ratio)) : C(0);
      const T* px = x.values<T>().data();
      T* py = y->mutable_values<T>().data();
      bool* mask_bool = mask && mask->dtype() == DType::kBool ? mask->mutable_values<bool>().data() : nullptr;
      T* mask_t = mask && mask->dtype() != DType::kBool ? mask->mutable_values<T>().data() : nullptr;
      ParallelRanges(ctx.threads(), x.num_elements(), kElementwiseGrain / 4, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const bool keep = DropoutUniform(seed, static_cast<uint64_t>(i)) >= threshold;
          py[i] = keep ? Store<T>(Load(px[i]) * scale) : Store<T>(C(0));
          if (mask_bool) mask_bool[i] = keep;
          if (mask_t) mask_t[i] = Store<T>(keep ? C(1) : C(0));
        }
      });
      return Status::Ok();
    });
  }

  DropoutSpec spec_;
};

}  // namespace

void RegisterDropoutKernels(exec::KernelRegistry& r) {
  // Float types; bfloat16 is accepted at every version (ONNX adds it at 13).
  r.Register({"Dropout",
              "",
              1,
              23,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              0,
              &exec::MakeKernel<DropoutCpu>});
}

}  // namespace onnxamp::ops
