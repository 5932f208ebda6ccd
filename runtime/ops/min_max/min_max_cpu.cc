// Min and Max (CPU): variadic, numpy broadcasting over all inputs, every numeric type. A NaN in any input gives
// NaN (as numpy.minimum/maximum and PyTorch do). Sum and Mean, the other variadic elementwise ops, float types: the
// inputs added in order (fp16/bf16 in float, rounded once), Mean then divided by their count.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/elementwise_math.h"
#include "runtime/ops/min_max/min_max.h"

namespace onnxamp::ops {
namespace {

struct MaxOp {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return Select((a > b) | (a != a), a, b);
    } else {
      return a > b ? a : b;
    }
  }
};

struct MinOp {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return Select((a < b) | (a != a), a, b);
    } else {
      return a < b ? a : b;
    }
  }
};

template <typename Op>
class MinMaxCpu : public exec::OpKernel {
 public:
  MinMaxCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const size_t n = ctx.num_inputs();
    DType dtype = DType::kFloat32;
    std::vector<std::vector<int64_t>> shapes;
    ONNXAMP_RETURN_IF_ERROR(MinMaxInputs(ctx, &dtype, &shapes));
    if (n == 1) return ctx.SetOutput(0, *ctx.input(0));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, BroadcastShapes(shapes));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, dtype, out_shape));
    if (out->num_elements() == 0) return Status::Ok();
    return DispatchNumeric(dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T* po = out->mutable_values<T>().data();
      // out = op(in0, in1), then out = op(out, in_k): each step reads out at the index it writes.
      ONNXAMP_ASSIGN_OR_RETURN(BroadcastPlan first, BroadcastPlan::MakeTo(out_shape, {shapes[0], shapes[1]}));
      BinaryBroadcast(ctx.threads(), first, ctx.input(0)->values<T>().data(), ctx.input(1)->values<T>().data(), po,
                      Op());
      for (size_t k = 2; k < n; ++k) {
        ONNXAMP_ASSIGN_OR_RETURN(BroadcastPlan plan, BroadcastPlan::MakeTo(out_shape, {out_shape, shapes[k]}));
        BinaryBroadcast(ctx.threads(), plan, static_cast<const T*>(po), ctx.input(k)->values<T>().data(), po, Op());
      }
      return Status::Ok();
    });
  }
};

// Sum (kMean false) and Mean of float inputs: one pass per input over a float accumulator (for fp16/bf16; float and
// double accumulate in the output), so that the result is rounded once.
template <bool kMean>
class SumMeanCpu : public exec::OpKernel {
 public:
  SumMeanCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const size_t n = ctx.num_inputs();
    DType dtype = DType::kFloat32;
    std::vector<std::vector<int64_t>> shapes;
    ONNXAMP_RETURN_IF_ERROR(MinMaxInputs(ctx, &dtype, &shapes));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, BroadcastShapes(shapes));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, dtype, out_shape));
    const int64_t size = out->num_elements();
    if (size == 0) return Status::Ok();
    return DispatchNumeric(dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      if constexpr (!kIsFloatLike<T>) {
        return InvalidArgument("element type ", DTypeName(dtype), " is not a float type");
      } else {
        using C = ComputeType<T>;
        std::vector<C> acc_buffer;
        C* acc;
        if constexpr (std::is_same_v<C, T>) {
          acc = out->mutable_values<T>().data();
        } else {
          acc_buffer.resize(size);
          acc = acc_buffer.data();
        }
        for (size_t k = 0; k < n; ++k) {
          ONNXAMP_ASSIGN_OR_RETURN(BroadcastPlan plan, BroadcastPlan::MakeTo(out_shape, {out_shape, shapes[k]}));
          const T* in = ctx.input(k)->values<T>().data();
          if (k == 0) {
            BinaryBroadcast(ctx.threads(), plan, static_cast<const C*>(acc), in, acc, [](C, C b) { return b; });
          } else {
            BinaryBroadcast(ctx.threads(), plan, static_cast<const C*>(acc), in, acc, [](C a, C b) { return a + b; });
          }
        }
        const C count = static_cast<C>(n);
        UnaryMap(ctx.threads(), static_cast<const C*>(acc), out->mutable_values<T>().data(), size,
                 [count](C v) { return kMean ? v / count : v; });
        return Status::Ok();
      }
    });
  }
};

}  // namespace

void RegisterMinMaxKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                    DType::kInt8,    DType::kInt16,   DType::kInt32,    DType::kInt64,
                                    DType::kUint8,   DType::kUint16,  DType::kUint32,   DType::kUint64};
  // Before opset 8 the inputs had to have equal shapes, which broadcasting accepts too; 12 and 13 add types.
  r.Register({"Min", "", 1, 23, exec::Device::kCpu, types, 0, &exec::MakeKernel<MinMaxCpu<MinOp>>});
  r.Register({"Max", "", 1, 23, exec::Device::kCpu, types, 0, &exec::MakeKernel<MinMaxCpu<MaxOp>>});
  // Sum and Mean: 1-5 the legacy consumed_inputs, 6-7 equal shapes (which broadcasting accepts), 8 broadcasting, 13
  // bfloat16.
  const std::vector<DType> floats = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"Sum", "", 1, 23, exec::Device::kCpu, floats, 0, &exec::MakeKernel<SumMeanCpu<false>>});
  r.Register({"Mean", "", 1, 23, exec::Device::kCpu, floats, 0, &exec::MakeKernel<SumMeanCpu<true>>});
}

}  // namespace onnxamp::ops
