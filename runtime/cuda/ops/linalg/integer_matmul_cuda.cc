// MatMulInteger on CUDA: both 8-bit operands minus their zero points as int32 (integer_matmul.cu), then the int32
// numpy matmul on the tiled integer GEMM (RunMatMul), whose arithmetic modulo 2^64 cast to int32 is the CPU's
// accumulator wrapped to 32 bits: the results are the CPU kernel's exactly. The checks and messages are the CPU's
// (runtime/ops/quantize/qlinear.h); the zero points stay on the device (one value, per row of A, per column of B).
// QLinearMatMul, ConvInteger and QLinearConv stay on the CPU.
#include <memory>
#include <string>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/linalg/linalg_device.h"
#include "runtime/cuda/ops/linalg/matmul_cuda.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/device_context.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/quantize/qlinear.h"

namespace onnxamp::cuda {
namespace {

class MatMulIntegerCuda : public exec::OpKernel {
 public:
  MatMulIntegerCuda(const exec::KernelInfo& info, Status*) : what_(info.node.op_type()), gemm_(false) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* a, ops::RequireInput(ctx, 0, "A"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* b, ops::RequireInput(ctx, 1, "B"));
    ONNXAMP_RETURN_IF_ERROR(ops::CheckEightBit(ctx, 0, "A"));
    ONNXAMP_RETURN_IF_ERROR(ops::CheckEightBit(ctx, 1, "B"));
    ONNXAMP_ASSIGN_OR_RETURN(const MatMulGeometry g, PlanMatMul(a->dims(), b->dims(), false, false));
    const ir::Tensor* az = ctx.input(2);
    const ir::Tensor* bz = ctx.input(3);
    if (az) {
      ONNXAMP_RETURN_IF_ERROR(ops::CheckIntegerZeroPoint(ctx, 2, "a_zero_point", a->dtype(), g.m));
    }
    if (bz) {
      ONNXAMP_RETURN_IF_ERROR(ops::CheckIntegerZeroPoint(ctx, 3, "b_zero_point", b->dtype(), g.n));
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kInt32, g.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    CudaContext& cuda = GetCudaContext(ctx);
    const int64_t na = a->num_elements(), nb = b->num_elements();
    // Released after the launches: later users of the memory are ordered on the same stream.
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<ir::Buffer> ca,
                             ctx.device_context()->Allocate(static_cast<size_t>(na) * sizeof(int32_t)));
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<ir::Buffer> cb,
                             ctx.device_context()->Allocate(static_cast<size_t>(nb) * sizeof(int32_t)));
    auto* pa = reinterpret_cast<int32_t*>(ca->data());
    auto* pb = reinterpret_cast<int32_t*>(cb->data());
    ONNXAMP_RETURN_IF_ERROR(LaunchCenterEightBit(a->dtype(), a->data(), az ? az->data() : nullptr,
                                                 az ? az->num_elements() : 1, g.k, na, pa, cuda.stream(), what_));
    ONNXAMP_RETURN_IF_ERROR(LaunchCenterEightBit(b->dtype(), b->data(), bz ? bz->data() : nullptr,
                                                 bz ? bz->num_elements() : 1, 1, nb, pb, cuda.stream(), what_));
    return RunMatMul(gemm_, cuda, g, DType::kInt32, pa, pb, y->mutable_data(), 1.0, nullptr, LinalgActivation::kNone,
                     what_);
  }

 private:
  std::string what_;
  CublasLtGemm gemm_;
};

}  // namespace

void RegisterCudaIntegerMatMulKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "MatMulInteger", &exec::MakeKernel<MatMulIntegerCuda>);
}

}  // namespace onnxamp::cuda
