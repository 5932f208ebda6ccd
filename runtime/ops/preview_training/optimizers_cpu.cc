// The optimizer ops of ONNX's ai.onnx.preview.training domain (opset 1) on the CPU: Adagrad, Momentum and Adam, each
// updating n tensors in one node.
//
//   Adagrad(R, T, X_1..X_n, G_1..G_n, H_1..H_n)            -> X_1'..X_n', H_1'..H_n'
//   Momentum(R, T, X_1..X_n, G_1..G_n, V_1..V_n)           -> X_1'..X_n', V_1'..V_n'
//   Adam(R, T, X_1..X_n, G_1..G_n, V_1..V_n, H_1..H_n)     -> X_1'..X_n', V_1'..V_n', H_1'..H_n'
//
// R is the learning rate (a float or double scalar), T the update count (an int64 scalar), X, G and the states
// float or double tensors of one shape per i. With g = norm_coefficient * X + G:
//   Adagrad: H' = H + g^2; X' = X - R / (1 + T * decay_factor) * g / (sqrt(H') + epsilon)
//   Momentum: V' = alpha * V + b * g with b = beta, or 1 on the first update (T = 0); X' = X - R * V' (standard) or
//             X - R * (g + alpha * V') (nesterov)
//   Adam: V' = alpha * V + (1 - alpha) * g; H' = beta * H + (1 - beta) * g^2; X' = (1 - norm_coefficient_post) *
//         (X - r * V' / (sqrt(H') + epsilon)) with r = R * sqrt(1 - beta^T) / (1 - alpha^T) for T > 0, else R.
// Arithmetic is in the tensors' type; the step's scalars (the decayed or bias-corrected rate) in double. These ops are
// what a training graph in ONNX's own form calls; `onnxamp train` has its own optimizers (trainer/optim/).
#include <cmath>
#include <string>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

enum class Kind { kAdagrad, kMomentum, kAdam };

constexpr char kPreviewTrainingDomain[] = "ai.onnx.preview.training";

// States per tensor: Adagrad H, Momentum V, Adam V and H.
int StatesOf(Kind k) { return k == Kind::kAdam ? 2 : 1; }

class PreviewOptimizerCpu : public exec::OpKernel {
 public:
  PreviewOptimizerCpu(const exec::KernelInfo& info, Status* st)
      : kind_(info.node.op_type() == "Adagrad" ? Kind::kAdagrad
                                               : (info.node.op_type() == "Momentum" ? Kind::kMomentum : Kind::kAdam)) {
    *st = Init(info.node);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const int s = StatesOf(kind_);
    const size_t inputs = ctx.num_inputs();
    if (inputs < 2 || (inputs - 2) % static_cast<size_t>(2 + s) != 0) {
      return InvalidArgument(ctx.node().op_type(), " takes R, T and ", 2 + s, " inputs per tensor, got ", inputs,
                             " inputs");
    }
    const size_t n = (inputs - 2) / static_cast<size_t>(2 + s);
    if (ctx.num_outputs() != n * static_cast<size_t>(1 + s)) {
      return InvalidArgument(ctx.node().op_type(), " of ", n, " tensors has ", n * static_cast<size_t>(1 + s),
                             " outputs, got ", ctx.num_outputs());
    }
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* r, RequireInput(ctx, 0, "R"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* t, RequireInput(ctx, 1, "T"));
    if (r->num_elements() != 1 || (r->dtype() != DType::kFloat32 && r->dtype() != DType::kFloat64)) {
      return InvalidArgument(InputLabel(ctx, 0, "R"), " must be one float or double, got ", DTypeName(r->dtype()), " ",
                             ShapeToString(r->dims()));
    }
    if (t->num_elements() != 1 || t->dtype() != DType::kInt64) {
      return InvalidArgument(InputLabel(ctx, 1, "T"), " must be one int64, got ", DTypeName(t->dtype()), " ",
                             ShapeToString(t->dims()));
    }
    const double rate = r->dtype() == DType::kFloat32 ? r->values<float>()[0] : r->values<double>()[0];
    const int64_t step = t->values<int64_t>()[0];
    for (size_t i = 0; i < n; ++i) {
      ONNXAMP_RETURN_IF_ERROR(UpdateOne(ctx, n, i, rate, step));
    }
    return Status::Ok();
  }

 private:
  Status Init(const ir::Node& node) {
    ONNXAMP_ASSIGN_OR_RETURN(norm_coefficient_, FloatAttribute(node, "norm_coefficient", 0.0f));
    // ONNX's default epsilon is 1e-6 (Adagrad and Adam; Momentum has none).
    ONNXAMP_ASSIGN_OR_RETURN(epsilon_, FloatAttribute(node, "epsilon", kind_ == Kind::kMomentum ? 0.0f : 1e-6f));
    switch (kind_) {
      case Kind::kAdagrad: {
        ONNXAMP_ASSIGN_OR_RETURN(decay_factor_, FloatAttribute(node, "decay_factor", 0.0f));
        break;
      }
      case Kind::kMomentum: {
        for (const char* name : {"alpha", "beta", "norm_coefficient", "mode"}) {
          if (!node.FindAttribute(name)) return InvalidArgument("attribute '", name, "' is required");
        }
        ONNXAMP_ASSIGN_OR_RETURN(alpha_, FloatAttribute(node, "alpha", 0.0f));
        ONNXAMP_ASSIGN_OR_RETURN(beta_, FloatAttribute(node, "beta", 0.0f));
        const std::string mode = node.GetString("mode", "");
        if (mode != "standard" && mode != "nesterov") {
          return InvalidArgument("attribute 'mode' is '", mode, "', expected standard or nesterov");
        }
        nesterov_ = mode == "nesterov";
        break;
      }
      case Kind::kAdam: {
        ONNXAMP_ASSIGN_OR_RETURN(alpha_, FloatAttribute(node, "alpha", 0.9f));
        ONNXAMP_ASSIGN_OR_RETURN(beta_, FloatAttribute(node, "beta", 0.999f));
        ONNXAMP_ASSIGN_OR_RETURN(norm_coefficient_post_, FloatAttribute(node, "norm_coefficient_post", 0.0f));
        break;
      }
    }
    return Status::Ok();
  }

  // Tensor i of n: X at input 2 + i, G at 2 + n + i, the states at 2 + (2 + k) n + i; outputs X' at i, state k at
  // (1 + k) n + i.
  Status UpdateOne(exec::KernelContext& ctx, size_t n, size_t i, double rate, int64_t step) const {
    const int s = StatesOf(kind_);
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 2 + i, "X"));
    if (x->dtype() != DType::kFloat32 && x->dtype() != DType::kFloat64) {
      return InvalidArgument(InputLabel(ctx, 2 + i, "X"), " is ", DTypeName(x->dtype()), ", expected float or double");
    }
    std::vector<const ir::Tensor*> others;  // G, then the states
    for (int k = 0; k < 1 + s; ++k) {
      const size_t index = 2 + static_cast<size_t>(1 + k) * n + i;
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* o, RequireInput(ctx, index, k == 0 ? "G" : "state"));
      if (o->dtype() != x->dtype() || o->dims() != x->dims()) {
        return InvalidArgument(InputLabel(ctx, index, k == 0 ? "G" : "state"), " is ", DTypeName(o->dtype()), " ",
                               ShapeToString(o->dims()), ", expected X's ", DTypeName(x->dtype()), " ",
                               ShapeToString(x->dims()));
      }
      others.push_back(o);
    }
    std::vector<ir::Tensor*> outs;
    for (int k = 0; k < 1 + s; ++k) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * o,
                               ctx.AllocateOutput(static_cast<size_t>(k) * n + i, x->dtype(), x->dims()));
      outs.push_back(o);
    }
    if (x->dtype() == DType::kFloat32) return Apply<float>(*x, others, outs, rate, step);
    return Apply<double>(*x, others, outs, rate, step);
  }

  template <typename C>
  Status Apply(const ir::Tensor& x_t, const std::vector<const ir::Tensor*>& in, const std::vector<ir::Tensor*>& out,
               double rate, int64_t step) const {
    const C* x = x_t.values<C>().data();
    const C* g = in[0]->values<C>().data();
    C* x_new = out[0]->mutable_values<C>().data();
    const int64_t size = x_t.num_elements();
    const C norm = static_cast<C>(norm_coefficient_), eps = static_cast<C>(epsilon_);
    const C alpha = static_cast<C>(alpha_), beta = static_cast<C>(beta_);
    switch (kind_) {
      case Kind::kAdagrad: {
        const C* h = in[1]->values<C>().data();
        C* h_new = out[1]->mutable_values<C>().data();
        const C r = static_cast<C>(rate / (1.0 + static_cast<double>(step) * decay_factor_));
        for (int64_t k = 0; k < size; ++k) {
          const C gr = norm * x[k] + g[k];
          h_new[k] = h[k] + gr * gr;
          x_new[k] = x[k] - r * gr / (std::sqrt(h_new[k]) + eps);
        }
        break;
      }
      case Kind::kMomentum: {
        const C* v = in[1]->values<C>().data();
        C* v_new = out[1]->mutable_values<C>().data();
        const C b = step > 0 ? beta : C(1);
        const C r = static_cast<C>(rate);
        for (int64_t k = 0; k < size; ++k) {
          const C gr = norm * x[k] + g[k];
          v_new[k] = alpha * v[k] + b * gr;
          x_new[k] = nesterov_ ? x[k] - r * (gr + alpha * v_new[k]) : x[k] - r * v_new[k];
        }
        break;
      }
      case Kind::kAdam: {
        const C* v = in[1]->values<C>().data();
        const C* h = in[2]->values<C>().data();
        C* v_new = out[1]->mutable_values<C>().data();
        C* h_new = out[2]->mutable_values<C>().data();
        const double t = static_cast<double>(step);
        const C r = static_cast<C>(step > 0 ? rate * std::sqrt(1.0 - std::pow(static_cast<double>(beta_), t)) /
                                                  (1.0 - std::pow(static_cast<double>(alpha_), t))
                                            : rate);
        const C post = static_cast<C>(1.0 - static_cast<double>(norm_coefficient_post_));
        for (int64_t k = 0; k < size; ++k) {
          const C gr = norm * x[k] + g[k];
          v_new[k] = alpha * v[k] + (C(1) - alpha) * gr;
          h_new[k] = beta * h[k] + (C(1) - beta) * gr * gr;
          x_new[k] = post * (x[k] - r * (v_new[k] / (std::sqrt(h_new[k]) + eps)));
        }
        break;
      }
    }
    return Status::Ok();
  }

  Kind kind_;
  float norm_coefficient_ = 0, epsilon_ = 0, decay_factor_ = 0, alpha_ = 0, beta_ = 0, norm_coefficient_post_ = 0;
  bool nesterov_ = false;
};

}  // namespace

void RegisterPreviewTrainingKernels(exec::KernelRegistry& r) {
  for (const char* op : {"Adagrad", "Momentum", "Adam"}) {
    r.Register({op, kPreviewTrainingDomain, 1, 1, exec::Device::kCpu, {}, 0, &exec::MakeKernel<PreviewOptimizerCpu>});
  }
}

}  // namespace onnxamp::ops
