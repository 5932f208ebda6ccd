// CUDA kernels (host side) of RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike and Bernoulli, with the
// CPU kernels' attributes, checks, messages and seeds (runtime/ops/random/random_spec.h); the numbers are drawn on the
// device by random.cu. Multinomial stays on the CPU. A device-resident RNG step (a replayed CUDA Graph of a training
// step) is mixed into the seed on the device (DeviceRngStep), as Dropout does, so each replay draws new numbers.
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/elementwise/elementwise_kernels.h"
#include "runtime/cuda/ops/elementwise/random_launch.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/ops/random/random_spec.h"

namespace onnxamp::cuda {
namespace {

template <bool kUniform, bool kLike>
class CudaRandom : public exec::OpKernel {
 public:
  CudaRandom(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info.node, kUniform, kLike); }

  Status Compute(exec::KernelContext& ctx) const override {
    DType t = DType::kFloat32;
    std::vector<int64_t> dims;
    ONNXAMP_RETURN_IF_ERROR(spec_.Resolve(ctx, &t, &dims));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, t, dims));
    ONNXAMP_ASSIGN_OR_RETURN(const uint64_t* device_step, DeviceRngStep(ctx));
    return ew::LaunchRandomFill(t, y->mutable_data(), y->num_elements(), spec_.seed.Seed(ctx), !kUniform, spec_.a,
                                spec_.b, spec_.HalfOpenRange().has_value(), GetCudaContext(ctx).stream(),
                                ctx.node().op_type(), device_step);
  }

 private:
  ops::RandomSpec spec_;
};

class CudaBernoulli : public exec::OpKernel {
 public:
  CudaBernoulli(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info.node); }

  Status Compute(exec::KernelContext& ctx) const override {
    DType out_type = DType::kFloat32;
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* p, spec_.Probabilities(ctx, &out_type));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, out_type, p->dims()));
    ONNXAMP_ASSIGN_OR_RETURN(const uint64_t* device_step, DeviceRngStep(ctx));
    return ew::LaunchBernoulli(p->dtype(), p->data(), out_type, y->mutable_data(), p->num_elements(),
                               spec_.seed.Seed(ctx), GetCudaContext(ctx).stream(), ctx.node().op_type(), device_step);
  }

 private:
  ops::BernoulliSpec spec_;
};

}  // namespace

void RegisterCudaRandomKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "RandomUniform", &exec::MakeKernel<CudaRandom<true, false>>);
  RegisterLikeCpu(r, "RandomNormal", &exec::MakeKernel<CudaRandom<false, false>>);
  RegisterLikeCpu(r, "RandomUniformLike", &exec::MakeKernel<CudaRandom<true, true>>);
  RegisterLikeCpu(r, "RandomNormalLike", &exec::MakeKernel<CudaRandom<false, true>>);
  RegisterLikeCpu(r, "Bernoulli", &exec::MakeKernel<CudaBernoulli>);
}

}  // namespace onnxamp::cuda
