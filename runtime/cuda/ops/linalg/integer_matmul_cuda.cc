// MatMulInteger and QLinearMatMul on CUDA: both 8-bit operands minus their zero points as int32 (integer_matmul.cu),
// then the int32 numpy matmul on the tiled integer GEMM (RunMatMul), whose arithmetic modulo 2^64 cast to int32 is the
// CPU's accumulator wrapped to 32 bits; QLinearMatMul then requantizes with the CPU's float arithmetic: the results
// are the CPU kernel's exactly. The checks and messages are the CPU's (runtime/ops/quantize/qlinear.h); zero points
// and scales stay on the device (one value, per row of A, per column of B), so QLinearMatMul's scales are not checked
// for non-finite values (the CPU's error). ConvInteger and QLinearConv stay on the CPU.
#include <string>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/linalg/linalg_device.h"
#include "runtime/cuda/ops/linalg/matmul_cuda.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/quantize/qlinear.h"

namespace onnxamp::cuda {
namespace {

// MatMulInteger (qlinear false: A 0, B 1, a_zp 2, b_zp 3 -> int32) and QLinearMatMul (qlinear: a 0, a_scale 1, a_zp 2,
// b 3, b_scale 4, b_zp 5, y_scale 6, y_zp 7 -> int8/uint8), in the CPU kernel's order of checks.
class IntegerMatMulCuda : public exec::OpKernel {
 public:
  IntegerMatMulCuda(const exec::KernelInfo& info, Status*)
      : what_(info.node.op_type()), qlinear_(what_ == "QLinearMatMul"), gemm_(false) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const size_t ia = 0, ib = qlinear_ ? 3 : 1, iaz = 2, ibz = qlinear_ ? 5 : 3;
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* a, ops::RequireInput(ctx, ia, "A"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* b, ops::RequireInput(ctx, ib, "B"));
    ONNXAMP_RETURN_IF_ERROR(ops::CheckEightBit(ctx, ia, "A"));
    ONNXAMP_RETURN_IF_ERROR(ops::CheckEightBit(ctx, ib, "B"));
    ONNXAMP_ASSIGN_OR_RETURN(const MatMulGeometry g, PlanMatMul(a->dims(), b->dims(), false, false));
    const ir::Tensor* az = ctx.input(iaz);
    const ir::Tensor* bz = ctx.input(ibz);
    if (az) {
      ONNXAMP_RETURN_IF_ERROR(ops::CheckIntegerZeroPoint(ctx, iaz, "a_zero_point", a->dtype(), g.m));
    }
    if (bz) {
      ONNXAMP_RETURN_IF_ERROR(ops::CheckIntegerZeroPoint(ctx, ibz, "b_zero_point", b->dtype(), g.n));
    }
    RequantizeArgs rq;
    if (qlinear_) {
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* as, ops::CheckQLinearScale(ctx, 1, "a_scale", g.m));
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* bs, ops::CheckQLinearScale(ctx, 4, "b_scale", g.n));
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* ys, ops::CheckQLinearScale(ctx, 6, "y_scale", 1));
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* yz, ops::OutputZeroPoint(ctx));
      if (as->num_elements() > 1 && bs->num_elements() > 1) {
        return Unimplemented("per-row a_scale and per-column b_scale together are not supported");
      }
      rq.a_scale_type = as->dtype();
      rq.b_scale_type = bs->dtype();
      rq.y_scale_type = ys->dtype();
      rq.a_scale = as->data();
      rq.b_scale = bs->data();
      rq.y_scale = ys->data();
      rq.a_count = as->num_elements();
      rq.b_count = bs->num_elements();
      rq.y_type = yz->dtype();
      rq.y_zero_point = yz->data();
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, qlinear_ ? rq.y_type : DType::kInt32, g.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    CudaContext& cuda = GetCudaContext(ctx);
    const int64_t na = a->num_elements(), nb = b->num_elements(), ny = y->num_elements();
    // One workspace for the centered operands (and QLinearMatMul's int32 products), each part starting on 16 bytes;
    // the integer GEMM takes no workspace of its own.
    auto padded = [](int64_t words) { return (words + 3) / 4 * 4; };
    const int64_t words = padded(na) + padded(nb) + (qlinear_ ? ny : 0);
    ONNXAMP_ASSIGN_OR_RETURN(void* scratch, cuda.Workspace(static_cast<size_t>(words) * sizeof(int32_t)));
    auto* pa = static_cast<int32_t*>(scratch);
    int32_t* pb = pa + padded(na);
    int32_t* products = qlinear_ ? pb + padded(nb) : reinterpret_cast<int32_t*>(y->mutable_data());
    ONNXAMP_RETURN_IF_ERROR(LaunchCenterEightBit(a->dtype(), a->data(), az ? az->data() : nullptr,
                                                 az ? az->num_elements() : 1, g.k, na, pa, cuda.stream(), what_));
    ONNXAMP_RETURN_IF_ERROR(LaunchCenterEightBit(b->dtype(), b->data(), bz ? bz->data() : nullptr,
                                                 bz ? bz->num_elements() : 1, 1, nb, pb, cuda.stream(), what_));
    ONNXAMP_RETURN_IF_ERROR(
        RunMatMul(gemm_, cuda, g, DType::kInt32, pa, pb, products, 1.0, nullptr, LinalgActivation::kNone, what_));
    if (!qlinear_) return Status::Ok();
    rq.acc = products;
    rq.n = ny;
    rq.rows = g.m;
    rq.cols = g.n;
    rq.y = y->mutable_data();
    return LaunchRequantize(rq, cuda.stream(), what_);
  }

 private:
  std::string what_;
  bool qlinear_;
  CublasLtGemm gemm_;
};

}  // namespace

void RegisterCudaIntegerMatMulKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "MatMulInteger", &exec::MakeKernel<IntegerMatMulCuda>);
  RegisterLikeCpu(r, "QLinearMatMul", &exec::MakeKernel<IntegerMatMulCuda>);
}

}  // namespace onnxamp::cuda
