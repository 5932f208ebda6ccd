// SoftmaxCrossEntropyLossGrad and NegativeLogLikelihoodLossGrad (CPU), com.onnxamp version 1: the backward of the two
// losses with respect to their input 0 (runtime/ops/gradient_ops.h). Labels and weights get no gradient.
//
// SoftmaxCrossEntropyLossGrad(dLoss, log_prob, labels[, weights]): log_prob is the forward's output 1 ([N, C] or
// [N, C, D1..Dk]); dScores[n, c, d] = g(n, d) * w[t] * (exp(log_prob[n, c, d]) - (c == t)) with t the label at
// (n, d). NegativeLogLikelihoodLossGrad(dLoss, input, target[, weight]) gives dInput[n, c, d] = -g(n, d) * w[t] *
// (c == t); `input` only gives the shape and type. g is dLoss at (n, d) for reduction "none" (dLoss then has the
// labels' shape), dLoss itself for "sum" and dLoss / (sum of w[t] over the non-ignored positions) for "mean" (dLoss a
// scalar); ignored positions (label == ignore_index) get 0. Attributes reduction and ignore_index as the forward's
// (ParseLossSpec). Float types of the forward (dLoss of the same type); fp16/bf16 compute in float.
#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/elementwise_math.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/loss/loss.h"

namespace onnxamp::ops {
namespace {

template <bool kSoftmax>
class LossGradCpu : public exec::OpKernel {
 public:
  LossGradCpu(const exec::KernelInfo& info, Status* st) { *st = ParseLossSpec(info, kSoftmax, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const char* x_role = kSoftmax ? "log_prob" : "input";
    const char* label_role = kSoftmax ? "labels" : "target";
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dloss, RequireInput(ctx, 0, "dLoss"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 1, x_role));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* labels, RequireInput(ctx, 2, label_role));
    StatusOr<LossShape> shape_or = ResolveLossShape(spec_, x, labels);
    if (!shape_or.ok()) {
      // The forward's checks name the forward's inputs 0 and 1: these are inputs 1 and 2 here.
      return shape_or.status().WithContext(
          StrCat(InputLabel(ctx, 1, x_role), " and ", InputLabel(ctx, 2, label_role), ", checked as the forward's"));
    }
    const LossShape& shape = *shape_or;
    const int64_t batch = shape.batch, classes = shape.classes, inner = shape.inner;
    if (dloss->dtype() != x->dtype() || dloss->dims() != shape.loss_dims) {
      return InvalidArgument(InputLabel(ctx, 0, "dLoss"), " is ", DTypeName(dloss->dtype()), " ",
                             ShapeToString(dloss->dims()), "; expected ", DTypeName(x->dtype()), " ",
                             ShapeToString(shape.loss_dims), " (the loss's type and shape)");
    }
    std::optional<std::vector<double>> weights;
    if (const ir::Tensor* w = ctx.input(3)) {
      ONNXAMP_ASSIGN_OR_RETURN(weights, reduce::ReadParam(w, classes, InputLabel(ctx, 3, "weights")));
    }
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<double> g_loss,
                             reduce::ReadParam(dloss, dloss->num_elements(), InputLabel(ctx, 0, "dLoss")));
    // Labels as int64, checked against the class count as the forward checks them.
    std::vector<int64_t> label(static_cast<size_t>(batch * inner));
    if (labels->dtype() == DType::kInt32) {
      const auto v = labels->values<int32_t>();
      std::copy(v.begin(), v.end(), label.begin());
    } else {
      const auto v = labels->values<int64_t>();
      std::copy(v.begin(), v.end(), label.begin());
    }
    // Per position: the factor g(n, d) * w[t], 0 where ignored.
    std::vector<double> factor(label.size(), 0.0);
    double weight_total = 0;
    for (size_t e = 0; e < label.size(); ++e) {
      if (spec_.ignore_index && label[e] == *spec_.ignore_index) continue;
      if (label[e] < 0 || label[e] >= classes) {
        return InvalidArgument(InputLabel(ctx, 2, label_role), ": value ", label[e], " at flat index ", e,
                               " is outside [0, ", classes, ")", spec_.ignore_index ? " and is not ignore_index" : "");
      }
      const double w = weights ? (*weights)[label[e]] : 1.0;
      weight_total += w;
      factor[e] = w * (spec_.reduction == LossReduction::kNone ? g_loss[e] : g_loss[0]);
    }
    if (spec_.reduction == LossReduction::kMean) {
      for (double& f : factor) f /= weight_total;
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = ComputeType<T>;
      const T* lp = x->values<T>().data();
      T* out = dx->mutable_values<T>().data();
      if constexpr (kSoftmax && std::is_same_v<T, float>) {
        if (inner == 1) {
          // Contiguous float rows, without the per-element index arithmetic: exp(log_prob), then f * (p - onehot)
          // over the row (the same values as the general loop below).
          reduce::ParallelOver(ctx.threads(), batch, classes, [&](int64_t b, int64_t e) {
            for (int64_t p = b; p < e; ++p) {
              float* row = out + p * classes;
              const int64_t t = label[p];
              if (spec_.ignore_index && t == *spec_.ignore_index) {
                std::fill(row, row + classes, 0.0f);
                continue;
              }
              const float f = static_cast<float>(factor[p]);
              const float* in = lp + p * classes;
              ExpArray(in, row, classes);
              row[t] -= 1.0f;
              for (int64_t c = 0; c < classes; ++c) row[c] *= f;
            }
          });
          return Status::Ok();
        }
      }
      reduce::ParallelOver(ctx.threads(), batch * inner, classes, [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          const int64_t n = p / inner, d = p % inner;
          const int64_t t = label[p];
          const A f = static_cast<A>(factor[p]);
          const bool ignored = spec_.ignore_index && t == *spec_.ignore_index;
          for (int64_t c = 0; c < classes; ++c) {
            const int64_t k = (n * classes + c) * inner + d;
            A v = 0;
            if (!ignored) {
              const A onehot = c == t ? A(1) : A(0);
              v = kSoftmax ? f * (reduce::ExpOf(static_cast<A>(Load<T>(lp[k]))) - onehot) : -f * onehot;
            }
            out[k] = Store<T>(v);
          }
        }
      });
      return Status::Ok();
    });
  }

 private:
  LossSpec spec_;
};

}  // namespace

void RegisterLossGradKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  const char* d = exec::kInternalDomain;
  // dtype_input 1: the forward's input 0 (log_prob / input).
  r.Register({kSoftmaxCrossEntropyLossGradOp, d, 1, 1, Device::kCpu, types, 1, &exec::MakeKernel<LossGradCpu<true>>});
  r.Register(
      {kNegativeLogLikelihoodLossGradOp, d, 1, 1, Device::kCpu, types, 1, &exec::MakeKernel<LossGradCpu<false>>});
}

}  // namespace onnxamp::ops
