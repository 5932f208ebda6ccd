// Broadcasting comparisons and logic (CPU): Equal Less Greater LessOrEqual GreaterOrEqual (numeric types; Equal
// also bool and string) giving bool, and And Or Xor Not on bool. Floats compare as IEEE does (NaN is unequal to
// everything); fp16/bf16 compare their float values.
#include <limits>
#include <string>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"

namespace onnxamp::ops {
namespace {

struct EqualOp {
  template <typename C>
  bool operator()(C a, C b) const {
    return a == b;
  }
};
struct LessOp {
  template <typename C>
  bool operator()(C a, C b) const {
    return a < b;
  }
};
struct GreaterOp {
  template <typename C>
  bool operator()(C a, C b) const {
    return a > b;
  }
};
struct LessOrEqualOp {
  template <typename C>
  bool operator()(C a, C b) const {
    return a <= b;
  }
};
struct GreaterOrEqualOp {
  template <typename C>
  bool operator()(C a, C b) const {
    return a >= b;
  }
};
struct AndOp {
  bool operator()(bool a, bool b) const { return a && b; }
};
struct OrOp {
  bool operator()(bool a, bool b) const { return a || b; }
};
struct XorOp {
  bool operator()(bool a, bool b) const { return a != b; }
};

// Which element types a binary predicate takes.
enum class Inputs { kNumeric, kNumericBoolString, kBool };

template <typename Op, Inputs kInputs>
class PredicateCpu : public exec::OpKernel {
 public:
  PredicateCpu(const exec::KernelInfo& info, Status* st) { *st = ReadLegacyBroadcast(info.node, info.opset, &legacy_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* a = ctx.input(0);
    const ir::Tensor* b = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(BroadcastPlan plan, PlanBinaryInputs(a, b, true, legacy_));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, DType::kBool, plan.output_dims()));
    if (plan.num_elements() == 0) return Status::Ok();
    bool* po = out->mutable_values<bool>().data();
    if constexpr (kInputs == Inputs::kNumericBoolString) {
      if (a->dtype() == DType::kString) {
        // Rare: the plain per-element path.
        const auto& sa = a->strings();
        const auto& sb = b->strings();
        std::vector<int64_t> b_dims = b->dims();
        if (legacy_.enabled) {
          ONNXAMP_ASSIGN_OR_RETURN(b_dims, LegacyBroadcastShape(a->dims(), b->dims(), legacy_.broadcast, legacy_.axis));
        }
        for (int64_t i = 0; i < plan.num_elements(); ++i) {
          const int64_t ia = BroadcastInputOffset(a->dims(), plan.output_dims(), i);
          const int64_t ib = BroadcastInputOffset(b_dims, plan.output_dims(), i);
          po[i] = Op()(sa[ia], sb[ib]);
        }
        return Status::Ok();
      }
    }
    auto run = [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      BinaryBroadcast(ctx.threads(), plan, a->values<T>().data(), b->values<T>().data(), po, Op());
      return Status::Ok();
    };
    if constexpr (kInputs == Inputs::kBool) {
      if (a->dtype() != DType::kBool) {
        return InvalidArgument("input 0 (A) has element type ", DTypeName(a->dtype()), ", expected bool");
      }
      return run(TypeTag<bool>{});
    } else if constexpr (kInputs == Inputs::kNumericBoolString) {
      return DispatchNumericOrBool(a->dtype(), run);
    } else {
      return DispatchNumeric(a->dtype(), run);
    }
  }

 private:
  LegacyBroadcast legacy_;
};

class NotCpu : public exec::OpKernel {
 public:
  NotCpu(const exec::KernelInfo&, Status*) {}
  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (X) is missing");
    if (x->dtype() != DType::kBool) {
      return InvalidArgument("input 0 (X) has element type ", DTypeName(x->dtype()), ", expected bool");
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kBool, x->dims()));
    UnaryMap(ctx.threads(), x->values<bool>().data(), y->mutable_values<bool>().data(), x->num_elements(),
             [](bool v) { return !v; });
    return Status::Ok();
  }
};

// IsNaN and IsInf (detect_negative, detect_positive): a float input, a bool result.
class IsNanInfCpu : public exec::OpKernel {
 public:
  IsNanInfCpu(const exec::KernelInfo& info, Status* st) : inf_(info.node.op_type() == "IsInf") {
    if (!inf_) return;
    auto neg = IntAttribute(info.node, "detect_negative", 1);
    auto pos = IntAttribute(info.node, "detect_positive", 1);
    if (!neg.ok()) {
      *st = neg.status();
    } else if (!pos.ok()) {
      *st = pos.status();
    } else {
      negative_ = *neg != 0;
      positive_ = *pos != 0;
    }
  }
  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (X) is missing");
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kBool, x->dims()));
    return DispatchNumeric(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      if constexpr (kIsFloatLike<T>) {
        using C = ComputeType<T>;
        const bool inf = inf_, neg = negative_, pos = positive_;
        UnaryMap(ctx.threads(), x->values<T>().data(), y->mutable_values<bool>().data(), x->num_elements(),
                 [inf, neg, pos](C v) {
                   if (!inf) return v != v;
                   return (pos && v == std::numeric_limits<C>::infinity()) ||
                          (neg && v == -std::numeric_limits<C>::infinity());
                 });
        return Status::Ok();
      } else {
        return InvalidArgument("input 0 (X) has element type ", DTypeName(x->dtype()), ", expected a float type");
      }
    });
  }

 private:
  bool inf_;
  bool negative_ = true, positive_ = true;
};

std::vector<DType> NumericTypes() {
  return {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,   DType::kInt16,
          DType::kInt32,   DType::kInt64,   DType::kUint8,    DType::kUint16,  DType::kUint32, DType::kUint64};
}

template <typename Op, Inputs kInputs>
void Add(exec::KernelRegistry& r, const char* op, int64_t since) {
  std::vector<DType> types = {DType::kBool};
  if (kInputs != Inputs::kBool) types = NumericTypes();
  if (kInputs == Inputs::kNumericBoolString) types.insert(types.end(), {DType::kBool, DType::kString});
  r.Register({op, "", since, 23, exec::Device::kCpu, types, 0, &exec::MakeKernel<PredicateCpu<Op, kInputs>>});
}

}  // namespace

void RegisterCompareLogicKernels(exec::KernelRegistry& r) {
  // Opsets 1-6 use the legacy `broadcast`/`axis` attributes; later versions only add element types (Equal:
  // every numeric type at 11, bfloat16 at 13, string at 19).
  Add<EqualOp, Inputs::kNumericBoolString>(r, "Equal", 1);
  Add<LessOp, Inputs::kNumeric>(r, "Less", 1);
  Add<GreaterOp, Inputs::kNumeric>(r, "Greater", 1);
  Add<LessOrEqualOp, Inputs::kNumeric>(r, "LessOrEqual", 12);
  Add<GreaterOrEqualOp, Inputs::kNumeric>(r, "GreaterOrEqual", 12);
  Add<AndOp, Inputs::kBool>(r, "And", 1);
  Add<OrOp, Inputs::kBool>(r, "Or", 1);
  Add<XorOp, Inputs::kBool>(r, "Xor", 1);
  r.Register({"Not", "", 1, 23, exec::Device::kCpu, {DType::kBool}, 0, &exec::MakeKernel<NotCpu>});
  const std::vector<DType> floats = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"IsNaN", "", 9, 23, exec::Device::kCpu, floats, 0, &exec::MakeKernel<IsNanInfCpu>});
  r.Register({"IsInf", "", 10, 23, exec::Device::kCpu, floats, 0, &exec::MakeKernel<IsNanInfCpu>});
}

}  // namespace onnxamp::ops
