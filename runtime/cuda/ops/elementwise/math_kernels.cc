// CUDA kernels (host side) of the unary math and activation ops with IsNaN and IsInf, broadcasting arithmetic (Add
// Sub Mul Div Pow Mod PRelu BitShift), comparisons and logic (Equal Less Greater LessOrEqual GreaterOrEqual And Or Xor
// Not) and the variadic Min Max Sum Mean. Attributes, shapes and error messages are the CPU kernels'
// (runtime/ops/elementwise/, min_max/); the device work is in unary.cu, binary.cu and compare_logic.cu.
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/elementwise/elementwise_kernels.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/device_context.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/elementwise/binary_attr.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/min_max/min_max.h"

namespace onnxamp::cuda {
namespace {

using ew::BinaryOp;
using ew::UnaryOp;

// ---- unary ------------------------------------------------------------------------------------------------------

template <UnaryOp kOp>
class CudaUnary : public exec::OpKernel {
 public:
  CudaUnary(const exec::KernelInfo& info, Status* st) { *st = Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (X) is missing");
    if (kOp == UnaryOp::kNot && x->dtype() != DType::kBool) {
      return InvalidArgument("input 0 (X) has element type ", DTypeName(x->dtype()), ", expected bool");
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    if (x->num_elements() == 0) return Status::Ok();
    return ew::LaunchUnary(op_, x->dtype(), x->data(), y->mutable_data(), x->num_elements(), alpha_, beta_,
                           GetCudaContext(ctx).stream(), ctx.node().op_type());
  }

 private:
  Status Init(const exec::KernelInfo& info) {
    if constexpr (kOp == UnaryOp::kLeakyRelu) {
      ONNXAMP_ASSIGN_OR_RETURN(alpha_, ops::FloatAttribute(info.node, "alpha", 0.01f));
    } else if constexpr (kOp == UnaryOp::kElu) {
      ONNXAMP_ASSIGN_OR_RETURN(alpha_, ops::FloatAttribute(info.node, "alpha", 1.0f));
    } else if constexpr (kOp == UnaryOp::kHardSigmoid) {
      ONNXAMP_ASSIGN_OR_RETURN(alpha_, ops::FloatAttribute(info.node, "alpha", 0.2f));
      ONNXAMP_ASSIGN_OR_RETURN(beta_, ops::FloatAttribute(info.node, "beta", 0.5f));
    } else if constexpr (kOp == UnaryOp::kSelu) {  // alpha and gamma (in beta_): ONNX's defaults, as unary_cpu.cc
      ONNXAMP_ASSIGN_OR_RETURN(alpha_, ops::FloatAttribute(info.node, "alpha", 1.67326319217681884765625f));
      ONNXAMP_ASSIGN_OR_RETURN(beta_, ops::FloatAttribute(info.node, "gamma", 1.05070102214813232421875f));
    } else if constexpr (kOp == UnaryOp::kCelu) {
      ONNXAMP_ASSIGN_OR_RETURN(alpha_, ops::FloatAttribute(info.node, "alpha", 1.0f));
      if (alpha_ == 0) return InvalidArgument("attribute 'alpha' must not be 0");
    } else if constexpr (kOp == UnaryOp::kThresholdedRelu) {
      ONNXAMP_ASSIGN_OR_RETURN(alpha_, ops::FloatAttribute(info.node, "alpha", 1.0f));
    } else if constexpr (kOp == UnaryOp::kShrink) {  // lambd in alpha_, bias in beta_
      ONNXAMP_ASSIGN_OR_RETURN(alpha_, ops::FloatAttribute(info.node, "lambd", 0.5f));
      ONNXAMP_ASSIGN_OR_RETURN(beta_, ops::FloatAttribute(info.node, "bias", 0.0f));
    } else if constexpr (kOp == UnaryOp::kGelu) {
      ONNXAMP_ASSIGN_OR_RETURN(std::string a, ops::StringAttribute(info.node, "approximate", "none"));
      if (a == "tanh") {
        op_ = UnaryOp::kGeluTanh;
      } else if (a != "none") {
        return InvalidArgument("attribute 'approximate' must be \"none\" or \"tanh\", got \"", a, "\"");
      }
    }
    return Status::Ok();
  }

  UnaryOp op_ = kOp;
  float alpha_ = 0.0f;
  float beta_ = 0.0f;
};

// IsNaN and IsInf (detect_negative, detect_positive): a float input, a bool result.
class CudaIsNanInf : public exec::OpKernel {
 public:
  CudaIsNanInf(const exec::KernelInfo& info, Status* st) : inf_(info.node.op_type() == "IsInf") {
    if (inf_) *st = Init(info);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (X) is missing");
    if (!IsFloatingPoint(x->dtype())) {
      return InvalidArgument("input 0 (X) has element type ", DTypeName(x->dtype()), ", expected a float type");
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kBool, x->dims()));
    if (x->num_elements() == 0) return Status::Ok();
    return ew::LaunchIsNanInf(inf_, negative_, positive_, x->dtype(), x->data(),
                              reinterpret_cast<bool*>(y->mutable_data()), x->num_elements(),
                              GetCudaContext(ctx).stream(), ctx.node().op_type());
  }

 private:
  Status Init(const exec::KernelInfo& info) {
    ONNXAMP_ASSIGN_OR_RETURN(int64_t neg, ops::IntAttribute(info.node, "detect_negative", 1));
    ONNXAMP_ASSIGN_OR_RETURN(int64_t pos, ops::IntAttribute(info.node, "detect_positive", 1));
    negative_ = neg != 0;
    positive_ = pos != 0;
    return Status::Ok();
  }

  bool inf_;
  bool negative_ = true, positive_ = true;
};

// ---- binary -----------------------------------------------------------------------------------------------------

constexpr bool IsPredicate(BinaryOp op) { return op >= BinaryOp::kEqual && op <= BinaryOp::kXor; }
constexpr bool IsLogic(BinaryOp op) { return op == BinaryOp::kAnd || op == BinaryOp::kOr || op == BinaryOp::kXor; }

// Add Sub Mul Div and the comparisons and logic: two inputs of one type, numpy broadcasting (legacy `broadcast` /
// `axis` attributes before opset 7).
template <BinaryOp kOp>
class CudaBinary : public exec::OpKernel {
 public:
  CudaBinary(const exec::KernelInfo& info, Status* st) {
    *st = ops::ReadLegacyBroadcast(info.node, info.opset, &legacy_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* a = ctx.input(0);
    const ir::Tensor* b = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(ops::BroadcastPlan plan, ops::PlanBinaryInputs(a, b, true, legacy_));
    if (IsLogic(kOp) && a->dtype() != DType::kBool) {
      return InvalidArgument("input 0 (A) has element type ", DTypeName(a->dtype()), ", expected bool");
    }
    const DType out_type = IsPredicate(kOp) ? DType::kBool : a->dtype();
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, out_type, plan.output_dims()));
    if (plan.num_elements() == 0) return Status::Ok();
    ONNXAMP_ASSIGN_OR_RETURN(ew::Geometry g, ew::GeometryFromPlan(plan));
    return ew::LaunchBinary(kOp, a->dtype(), a->data(), b->data(), out->mutable_data(), g, GetCudaContext(ctx).stream(),
                            ctx.node().op_type());
  }

 private:
  ops::LegacyBroadcast legacy_;
};

// Pow: the exponent may have any numeric type. It is first converted (Cast's rules, on the device) to the type the
// kernel computes with (ew::PowExponentType), which reproduces the CPU's conversions of the exponent exactly.
class CudaPow : public exec::OpKernel {
 public:
  CudaPow(const exec::KernelInfo& info, Status* st) { *st = ops::ReadLegacyBroadcast(info.node, info.opset, &legacy_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* a = ctx.input(0);
    const ir::Tensor* b = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(ops::BroadcastPlan plan, ops::PlanBinaryInputs(a, b, false, legacy_));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, a->dtype(), plan.output_dims()));
    if (plan.num_elements() == 0) return Status::Ok();
    ONNXAMP_ASSIGN_OR_RETURN(ew::Geometry g, ew::GeometryFromPlan(plan));
    const std::string& what = ctx.node().op_type();
    cudaStream_t stream = GetCudaContext(ctx).stream();
    const DType exp_type = ew::PowExponentType(a->dtype(), b->dtype());
    const void* exponent = b->data();
    std::shared_ptr<ir::Buffer> converted;  // released after the launch: later users are ordered on the same stream
    if (exp_type != b->dtype()) {
      const int64_t nb = b->num_elements();
      ONNXAMP_ASSIGN_OR_RETURN(converted,
                               ctx.device_context()->Allocate(static_cast<size_t>(nb) * (DTypeBits(exp_type) / 8)));
      ONNXAMP_RETURN_IF_ERROR(ew::LaunchCast(b->dtype(), exp_type, b->data(), converted->data(), nb, stream, what));
      exponent = converted->data();
    }
    const bool scalar_fast = plan.IsScalar(1) && plan.IsFull(0);
    return ew::LaunchPow(a->dtype(), exp_type, a->data(), exponent, out->mutable_data(), g, scalar_fast, stream, what);
  }

 private:
  ops::LegacyBroadcast legacy_;
};

// Mod (fmod) and PRelu (opset-6 slope rule): ops/elementwise/binary_attr.h's checks and plan, as binary_cpu.cc.
template <bool kPRelu>
class CudaBinaryAttr : public exec::OpKernel {
 public:
  CudaBinaryAttr(const exec::KernelInfo& info, Status* st) : opset_(info.opset) {
    if constexpr (!kPRelu) {
      StatusOr<bool> fmod = ops::ReadModFmod(info.node);
      if (!fmod.ok()) {
        *st = fmod.status();
      } else {
        fmod_ = *fmod;
      }
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* a = ctx.input(0);
    const ir::Tensor* b = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(ops::BroadcastPlan plan, ops::PlanBinaryAttrInputs(a, b, kPRelu, opset_));
    if constexpr (!kPRelu) ONNXAMP_RETURN_IF_ERROR(ops::CheckModType(fmod_, a->dtype()));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, a->dtype(), plan.output_dims()));
    if (plan.num_elements() == 0) return Status::Ok();
    ONNXAMP_ASSIGN_OR_RETURN(ew::Geometry g, ew::GeometryFromPlan(plan));
    const BinaryOp op = kPRelu ? BinaryOp::kPRelu : (fmod_ ? BinaryOp::kModTrunc : BinaryOp::kModFloor);
    return ew::LaunchBinary(op, a->dtype(), a->data(), b->data(), out->mutable_data(), g, GetCudaContext(ctx).stream(),
                            ctx.node().op_type());
  }

 private:
  int64_t opset_;
  bool fmod_ = false;
};

class CudaBitShift : public exec::OpKernel {
 public:
  CudaBitShift(const exec::KernelInfo& info, Status* st) {
    StatusOr<bool> left = ops::ReadShiftLeft(info.node);
    if (!left.ok()) {
      *st = left.status();
    } else {
      left_ = *left;
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(ops::BroadcastPlan plan, ops::PlanBitShiftInputs(ctx));
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * z, ctx.AllocateOutput(0, x->dtype(), plan.output_dims()));
    if (plan.num_elements() == 0) return Status::Ok();
    ONNXAMP_ASSIGN_OR_RETURN(ew::Geometry g, ew::GeometryFromPlan(plan));
    return ew::LaunchBinary(left_ ? BinaryOp::kShiftLeft : BinaryOp::kShiftRight, x->dtype(), x->data(),
                            ctx.input(1)->data(), z->mutable_data(), g, GetCudaContext(ctx).stream(),
                            ctx.node().op_type());
  }

 private:
  bool left_ = true;
};

// Min and Max: variadic, numpy broadcasting over all inputs. out = op(in0, in1), then out = op(out, in_k).
template <BinaryOp kOp>
class CudaMinMax : public exec::OpKernel {
 public:
  CudaMinMax(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const size_t n = ctx.num_inputs();
    DType dtype = DType::kFloat32;
    std::vector<std::vector<int64_t>> shapes;
    ONNXAMP_RETURN_IF_ERROR(ops::MinMaxInputs(ctx, &dtype, &shapes));
    if (n == 1) return ctx.SetOutput(0, *ctx.input(0));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, ops::BroadcastShapes(shapes));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, dtype, out_shape));
    if (out->num_elements() == 0) return Status::Ok();
    const std::string& what = ctx.node().op_type();
    cudaStream_t stream = GetCudaContext(ctx).stream();
    void* po = out->mutable_data();
    ONNXAMP_ASSIGN_OR_RETURN(ops::BroadcastPlan first, ops::BroadcastPlan::MakeTo(out_shape, {shapes[0], shapes[1]}));
    ONNXAMP_ASSIGN_OR_RETURN(ew::Geometry g, ew::GeometryFromPlan(first));
    ONNXAMP_RETURN_IF_ERROR(
        ew::LaunchBinary(kOp, dtype, ctx.input(0)->data(), ctx.input(1)->data(), po, g, stream, what));
    for (size_t k = 2; k < n; ++k) {
      ONNXAMP_ASSIGN_OR_RETURN(ops::BroadcastPlan plan, ops::BroadcastPlan::MakeTo(out_shape, {out_shape, shapes[k]}));
      ONNXAMP_ASSIGN_OR_RETURN(g, ew::GeometryFromPlan(plan));
      ONNXAMP_RETURN_IF_ERROR(ew::LaunchBinary(kOp, dtype, po, ctx.input(k)->data(), po, g, stream, what));
    }
    return Status::Ok();
  }
};

// Sum (kMean false) and Mean of float inputs, as min_max_cpu.cc: one pass per input over an accumulator in the compute
// type (the context's workspace for fp16/bf16, the output itself for float and double), then one rounding on store.
template <bool kMean>
class CudaSumMean : public exec::OpKernel {
 public:
  CudaSumMean(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const size_t n = ctx.num_inputs();
    DType dtype = DType::kFloat32;
    std::vector<std::vector<int64_t>> shapes;
    ONNXAMP_RETURN_IF_ERROR(ops::MinMaxInputs(ctx, &dtype, &shapes));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, ops::BroadcastShapes(shapes));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, dtype, out_shape));
    const int64_t size = out->num_elements();
    if (size == 0) return Status::Ok();
    if (!IsFloatingPoint(dtype)) return InvalidArgument("element type ", DTypeName(dtype), " is not a float type");
    const std::string& what = ctx.node().op_type();
    cudaStream_t stream = GetCudaContext(ctx).stream();
    void* acc = out->mutable_data();
    if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) {
      ONNXAMP_ASSIGN_OR_RETURN(acc, GetCudaContext(ctx).Workspace(static_cast<size_t>(size) * sizeof(float)));
    }
    for (size_t k = 0; k < n; ++k) {
      ONNXAMP_ASSIGN_OR_RETURN(ops::BroadcastPlan plan, ops::BroadcastPlan::MakeTo(out_shape, {out_shape, shapes[k]}));
      ONNXAMP_ASSIGN_OR_RETURN(ew::Geometry g, ew::GeometryFromPlan(plan));
      ONNXAMP_RETURN_IF_ERROR(ew::LaunchSumAccumulate(dtype, acc, ctx.input(k)->data(), g, k == 0, stream, what));
    }
    if (!kMean && acc == out->mutable_data()) return Status::Ok();
    return ew::LaunchSumFinish(dtype, acc, out->mutable_data(), size, kMean ? static_cast<int64_t>(n) : 0, stream,
                               what);
  }
};

// ---- registration -----------------------------------------------------------------------------------------------

// The kernel K for `op`, with the CPU kernel's opsets and element types.
template <typename K>
void Add(exec::KernelRegistry& r, const char* op) {
  RegisterLikeCpu(r, op, &exec::MakeKernel<K>);
}

}  // namespace

void RegisterCudaMathKernels(exec::KernelRegistry& r) {
  // Unary (as unary_cpu.cc): versions 1-5 only add the ignored consumed_inputs; later ones only add types.
  Add<CudaUnary<UnaryOp::kSqrt>>(r, "Sqrt");
  Add<CudaUnary<UnaryOp::kExp>>(r, "Exp");
  Add<CudaUnary<UnaryOp::kLog>>(r, "Log");
  Add<CudaUnary<UnaryOp::kNeg>>(r, "Neg");
  Add<CudaUnary<UnaryOp::kAbs>>(r, "Abs");
  Add<CudaUnary<UnaryOp::kReciprocal>>(r, "Reciprocal");
  Add<CudaUnary<UnaryOp::kRelu>>(r, "Relu");
  Add<CudaUnary<UnaryOp::kLeakyRelu>>(r, "LeakyRelu");
  Add<CudaUnary<UnaryOp::kElu>>(r, "Elu");
  Add<CudaUnary<UnaryOp::kSigmoid>>(r, "Sigmoid");
  Add<CudaUnary<UnaryOp::kTanh>>(r, "Tanh");
  Add<CudaUnary<UnaryOp::kErf>>(r, "Erf");
  Add<CudaUnary<UnaryOp::kGelu>>(r, "Gelu");
  RegisterLikeCpu(r, ops::kGeluOp, &exec::MakeKernel<CudaUnary<UnaryOp::kGelu>>, {}, exec::kInternalDomain);
  Add<CudaUnary<UnaryOp::kSoftplus>>(r, "Softplus");
  Add<CudaUnary<UnaryOp::kNot>>(r, "Not");
  Add<CudaUnary<UnaryOp::kSin>>(r, "Sin");
  Add<CudaUnary<UnaryOp::kCos>>(r, "Cos");
  Add<CudaUnary<UnaryOp::kFloor>>(r, "Floor");
  Add<CudaUnary<UnaryOp::kCeil>>(r, "Ceil");
  Add<CudaUnary<UnaryOp::kRound>>(r, "Round");
  Add<CudaUnary<UnaryOp::kHardSigmoid>>(r, "HardSigmoid");
  Add<CudaUnary<UnaryOp::kHardSwish>>(r, "HardSwish");
  Add<CudaUnary<UnaryOp::kMish>>(r, "Mish");
  Add<CudaUnary<UnaryOp::kTan>>(r, "Tan");
  Add<CudaUnary<UnaryOp::kAsin>>(r, "Asin");
  Add<CudaUnary<UnaryOp::kAcos>>(r, "Acos");
  Add<CudaUnary<UnaryOp::kAtan>>(r, "Atan");
  Add<CudaUnary<UnaryOp::kSinh>>(r, "Sinh");
  Add<CudaUnary<UnaryOp::kCosh>>(r, "Cosh");
  Add<CudaUnary<UnaryOp::kAsinh>>(r, "Asinh");
  Add<CudaUnary<UnaryOp::kAcosh>>(r, "Acosh");
  Add<CudaUnary<UnaryOp::kAtanh>>(r, "Atanh");
  Add<CudaUnary<UnaryOp::kSign>>(r, "Sign");
  Add<CudaUnary<UnaryOp::kSoftsign>>(r, "Softsign");
  Add<CudaUnary<UnaryOp::kSelu>>(r, "Selu");
  Add<CudaUnary<UnaryOp::kCelu>>(r, "Celu");
  Add<CudaUnary<UnaryOp::kThresholdedRelu>>(r, "ThresholdedRelu");
  Add<CudaUnary<UnaryOp::kShrink>>(r, "Shrink");
  Add<CudaIsNanInf>(r, "IsNaN");
  Add<CudaIsNanInf>(r, "IsInf");

  // Binary arithmetic (as binary_cpu.cc): 1-6 legacy broadcast attributes, 7-23 numpy broadcasting.
  Add<CudaBinary<BinaryOp::kAdd>>(r, "Add");
  Add<CudaBinary<BinaryOp::kSub>>(r, "Sub");
  Add<CudaBinary<BinaryOp::kMul>>(r, "Mul");
  Add<CudaBinary<BinaryOp::kDiv>>(r, "Div");
  Add<CudaPow>(r, "Pow");
  Add<CudaBinaryAttr<false>>(r, "Mod");
  Add<CudaBinaryAttr<true>>(r, "PRelu");
  Add<CudaBitShift>(r, "BitShift");

  // Comparisons and logic (as compare_logic_cpu.cc; Equal on strings stays on the CPU).
  const std::vector<DType> equal_types = {
      DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,   DType::kInt16, DType::kInt32,
      DType::kInt64,   DType::kUint8,   DType::kUint16,   DType::kUint32,  DType::kUint64, DType::kBool};
  r.Register(
      {"Equal", "", 1, 23, exec::Device::kCuda, equal_types, 0, &exec::MakeKernel<CudaBinary<BinaryOp::kEqual>>});
  Add<CudaBinary<BinaryOp::kLess>>(r, "Less");
  Add<CudaBinary<BinaryOp::kGreater>>(r, "Greater");
  Add<CudaBinary<BinaryOp::kLessOrEqual>>(r, "LessOrEqual");
  Add<CudaBinary<BinaryOp::kGreaterOrEqual>>(r, "GreaterOrEqual");
  Add<CudaBinary<BinaryOp::kAnd>>(r, "And");
  Add<CudaBinary<BinaryOp::kOr>>(r, "Or");
  Add<CudaBinary<BinaryOp::kXor>>(r, "Xor");

  // Min and Max (as min_max_cpu.cc).
  Add<CudaMinMax<BinaryOp::kMin>>(r, "Min");
  Add<CudaMinMax<BinaryOp::kMax>>(r, "Max");
  Add<CudaSumMean<false>>(r, "Sum");
  Add<CudaSumMean<true>>(r, "Mean");
}

}  // namespace onnxamp::cuda
