// ConvInteger and QLinearConv on CUDA: the CPU kernel's checks and messages, and its zero points, scales and bias read
// on the host (runtime/ops/quantize/qlinear.h: host inputs, the initializers of a quantized model), kept on the device
// as one table while they stay the same. The operands minus their zero points in double, the convolution on the
// direct kernel in double (exact for 8-bit operands), then int32 or the requantized 8-bit output
// (conv_integer_launch.h): the CPU's bits.
#include <memory>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/dnn/conv_integer_launch.h"
#include "runtime/cuda/ops/dnn/dnn_launch.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/cuda/ops/tensor/tensor_util.h"
#include "runtime/ops/quantize/qlinear.h"

namespace onnxamp::cuda::dnn {
namespace {

class ConvIntegerCuda : public exec::OpKernel {
 public:
  ConvIntegerCuda(const exec::KernelInfo& info, Status* st) : qlinear_(info.node.op_type() == "QLinearConv") {
    *st = ops::ParseConvAttrs(info.node, /*transpose=*/false, &attrs_, &group_, nullptr);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ops::ConvIntegerPlan plan, ops::ResolveConvInteger(ctx, attrs_, group_, qlinear_));
    const ir::Tensor* x = ctx.input(0);
    const ir::Tensor* w = ctx.input(qlinear_ ? 3 : 1);
    const ops::ConvShape& s = plan.shape;
    const DType out_type = qlinear_ ? plan.y_zero_point->dtype() : DType::kInt32;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, out_type, plan.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    // One table: the zero points, the bias (as doubles) and the scales.
    std::vector<std::byte> bytes;
    const size_t x_zp = tensor_ops::Append(bytes, plan.x_zero_point);
    const size_t w_zp = tensor_ops::Append(bytes, plan.w_zero_point);
    const size_t bias = tensor_ops::Append(bytes, plan.bias);
    const size_t scales = tensor_ops::Append(bytes, plan.scales);
    ONNXAMP_ASSIGN_OR_RETURN(const std::shared_ptr<ir::Buffer> table, tables_.Upload(ctx, std::move(bytes)));
    const std::byte* base = table->data();
    CudaContext& cuda = GetCudaContext(ctx);
    cudaStream_t stream = cuda.stream();
    const int64_t x_count = x->num_elements(), w_count = w->num_elements(), y_count = y->num_elements();
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<ir::Buffer> work,
                             cuda.Allocate(static_cast<size_t>(x_count + w_count + y_count) * sizeof(double)));
    double* xd = reinterpret_cast<double*>(work->data());
    double* wd = xd + x_count;
    double* acc = wd + w_count;
    ONNXAMP_RETURN_IF_ERROR(LaunchCenterToDouble(x->dtype(), x->data(), x_count,
                                                 reinterpret_cast<const double*>(base + x_zp), 1, 1, xd, stream));
    const int64_t w_groups = static_cast<int64_t>(plan.w_zero_point.size());
    ONNXAMP_RETURN_IF_ERROR(LaunchCenterToDouble(w->dtype(), w->data(), w_count,
                                                 reinterpret_cast<const double*>(base + w_zp), w_groups, w_count / s.m,
                                                 wd, stream));
    ONNXAMP_ASSIGN_OR_RETURN(const WindowParams params, MakeWindowParams(plan.geo));
    const ConvSizes sizes{s.n, s.c, s.m, s.group, /*channels_last=*/false};
    ONNXAMP_RETURN_IF_ERROR(LaunchConvDirect(stream, DType::kFloat64, params, sizes, xd, wd,
                                             plan.bias.empty() ? nullptr : base + bias, nullptr, false, acc));
    double zero_point = 0;
    if (qlinear_) {
      zero_point = plan.y_zero_point->dtype() == DType::kInt8 ? plan.y_zero_point->values<int8_t>()[0]
                                                              : plan.y_zero_point->values<uint8_t>()[0];
    }
    return LaunchIntegerConvOutput(
        acc, y_count, plan.geo.out_size(), s.m, qlinear_ ? reinterpret_cast<const float*>(base + scales) : nullptr,
        static_cast<int64_t>(plan.scales.size()), out_type, zero_point, y->mutable_data(), stream);
  }

 private:
  bool qlinear_;
  ops::WindowAttrs attrs_;
  int64_t group_ = 1;
  tensor_ops::DeviceTable tables_;
};

}  // namespace

void RegisterCudaConvIntegerKernels(exec::KernelRegistry& r) {
  // The zero points, scales and bias are read on the host, as the CPU kernel reads them.
  RegisterLikeCpu(r, "ConvInteger", &exec::MakeKernel<ConvIntegerCuda>, {2, 3});
  RegisterLikeCpu(r, "QLinearConv", &exec::MakeKernel<ConvIntegerCuda>, {1, 2, 4, 5, 6, 7, 8});
}

}  // namespace onnxamp::cuda::dnn
