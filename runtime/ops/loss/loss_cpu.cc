// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (CPU), opsets 12-23.
//
// Scores / log-probabilities are [N, C] or [N, C, D1..Dk]; labels are int32/int64 [N] or [N, D1..Dk]; the optional
// weights are [C]. For each position with label t (not equal to `ignore_index`): loss = -weights[t] * logp[t] where
// logp is the input itself (NLL) or LogSoftmax of the scores along C (SCE). Ignored positions have loss 0 and weight
// 0. `reduction`: "none" gives the per-position losses ([N, D1..Dk]); "sum" their sum; "mean" (default) their sum
// divided by the sum of the weights of the positions (with neither weights nor ignore_index: the position count).
// SoftmaxCrossEntropyLoss's optional output 1 is the LogSoftmax itself. Accumulation in float (double for double
// inputs), the final sum in double.
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/common/reduce_softmax.h"
#include "runtime/ops/loss/loss.h"

namespace onnxamp::ops {
namespace {

template <bool kSoftmax>
class LossCpu : public exec::OpKernel {
 public:
  LossCpu(const exec::KernelInfo& info, Status* st) { *st = ParseLossSpec(info, kSoftmax, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    const ir::Tensor* labels = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(const LossShape shape, ResolveLossShape(spec_, x, labels));
    const int64_t batch = shape.batch, classes = shape.classes, inner = shape.inner;
    std::optional<std::vector<double>> weights;
    if (const ir::Tensor* w = ctx.input(2)) {
      ONNXAMP_ASSIGN_OR_RETURN(weights, reduce::ReadParam(w, classes, spec_.weight_name()));
    }
    // Labels as int64, checked against the class count.
    std::vector<int64_t> label(static_cast<size_t>(batch * inner));
    if (labels->dtype() == DType::kInt32) {
      const auto v = labels->values<int32_t>();
      std::copy(v.begin(), v.end(), label.begin());
    } else {
      const auto v = labels->values<int64_t>();
      std::copy(v.begin(), v.end(), label.begin());
    }
    for (size_t e = 0; e < label.size(); ++e) {
      if (spec_.ignore_index && label[e] == *spec_.ignore_index) continue;
      if (label[e] < 0 || label[e] >= classes) {
        return InvalidArgument(spec_.label_name(), ": value ", label[e], " at flat index ", e, " is outside [0, ",
                               classes, ")", spec_.ignore_index ? " and is not ignore_index" : "");
      }
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * loss, ctx.AllocateOutput(0, x->dtype(), shape.loss_dims));
    ir::Tensor* log_prob = nullptr;
    if (kSoftmax && ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(log_prob, ctx.AllocateOutput(1, x->dtype(), x->dims()));
    }
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = ComputeType<T>;
      const T* xd = x->values<T>().data();
      // The log-probability of class c at position (n, d).
      std::vector<A> max, log_sum;
      // With output 1 in the compute type (float, double), its values are the log-probabilities the loss picks, bit
      // for bit (the same maximum, sum and formula): the exponentials are computed once.
      const T* lp = nullptr;
      if constexpr (kSoftmax) {
        if (log_prob) {
          reduce::SoftmaxForward(xd, log_prob->mutable_values<T>().data(), batch, classes, inner, true, ctx.threads());
          if constexpr (std::is_same_v<T, A>) lp = log_prob->values<T>().data();
        }
        if (!lp) {
          max.resize(static_cast<size_t>(batch * inner));
          log_sum.resize(max.size());
          reduce::LogSoftmaxStats(xd, batch, classes, inner, max.data(), log_sum.data(), ctx.threads());
        }
      }
      auto logp = [&](int64_t n, int64_t c, int64_t d) -> A {
        const int64_t k = (n * classes + c) * inner + d;
        if constexpr (kSoftmax) {
          if (lp) return Load<T>(lp[k]);
          const int64_t p = n * inner + d;
          return (Load<T>(xd[k]) - max[p]) - log_sum[p];
        } else {
          return Load<T>(xd[k]);
        }
      };
      T* out = loss->mutable_values<T>().data();
      double total = 0, weight_total = 0;
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t d = 0; d < inner; ++d) {
          const int64_t p = n * inner + d;
          const int64_t t = label[p];
          A l = 0;
          double w = 0;
          if (!(spec_.ignore_index && t == *spec_.ignore_index)) {
            w = weights ? (*weights)[t] : 1.0;
            l = -static_cast<A>(w) * logp(n, t, d);
          }
          if (spec_.reduction == LossReduction::kNone) out[p] = Store<T>(l);
          total += static_cast<double>(l);
          weight_total += w;
        }
      }
      if (spec_.reduction == LossReduction::kSum) out[0] = Store<T>(static_cast<A>(total));
      if (spec_.reduction == LossReduction::kMean) out[0] = Store<T>(static_cast<A>(total / weight_total));
      return Status::Ok();
    });
  }

 private:
  LossSpec spec_;
};

}  // namespace

void RegisterLossKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  // Opsets 12-23: opset 13 only widened the element types.
  r.Register({"SoftmaxCrossEntropyLoss", "", 12, 23, Device::kCpu, types, 0, &exec::MakeKernel<LossCpu<true>>});
  r.Register({"NegativeLogLikelihoodLoss", "", 12, 23, Device::kCpu, types, 0, &exec::MakeKernel<LossCpu<false>>});
  // The same ops in the internal domain, for models of opsets before 12 (gradient_ops.h).
  r.Register({"SoftmaxCrossEntropyLoss", exec::kInternalDomain, 1, 1, Device::kCpu, types, 0,
              &exec::MakeKernel<LossCpu<true>>});
  r.Register({"NegativeLogLikelihoodLoss", exec::kInternalDomain, 1, 1, Device::kCpu, types, 0,
              &exec::MakeKernel<LossCpu<false>>});
}

}  // namespace onnxamp::ops
