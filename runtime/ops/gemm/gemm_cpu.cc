// Gemm (CPU): Y = alpha * op(A) * op(B) + beta * C with transA/transB, C broadcast unidirectionally to [M, N].
// Opsets 1-6 need the `broadcast` attribute for a C smaller than [M, N]; C is optional from opset 11. Float types
// run on the GEMM core (FP32 accumulation, one rounding on store; fp16/bf16 operands go to GemmRunner as they
// are, and a B that is an initializer is converted once); integer types (alpha and beta must then be whole numbers;
// arithmetic wraps) and the reference mode run the plain loop.
#include <cmath>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_util.h"

namespace onnxamp::ops {
namespace {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  std::vector<int64_t> c_strides;  // C read as [M, N] (broadcast strides); empty when C is absent
};

// The reference loop for any element type.
template <typename T>
void GemmOpReference(const GemmShape& s, float alpha, float beta, const T* a, const T* b, const T* c, T* y) {
  using Acc = AccumType<T>;
  const Acc al = kIsFloatLike<T> ? static_cast<Acc>(alpha) : static_cast<Acc>(static_cast<int64_t>(alpha));
  const Acc be = kIsFloatLike<T> ? static_cast<Acc>(beta) : static_cast<Acc>(static_cast<int64_t>(beta));
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      Acc sum = 0;
      for (int64_t p = 0; p < s.k; ++p) {
        const T x = s.trans_a ? a[p * s.m + i] : a[i * s.k + p];
        const T w = s.trans_b ? b[j * s.k + p] : b[p * s.n + j];
        sum += LoadAccum(x) * LoadAccum(w);
      }
      Acc v = al * sum;
      if (c && beta != 0) v += be * LoadAccum(c[i * s.c_strides[0] + j * s.c_strides[1]]);
      y[i * s.n + j] = StoreAccum<T>(v);
    }
  }
}

// On the GEMM core (float or double, or bfloat16 inputs with a float result FC); c (storage type T) is broadcast
// into y first and scaled by beta there.
template <typename F, typename T, typename FC = F>
Status GemmOpFast(const GemmRunner& gemm, exec::ThreadPool& threads, const GemmShape& s, float alpha, float beta,
                  const F* a, const F* b, const T* c, FC* y) {
  GemmArgs<F, FC> g;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.trans_a = s.trans_a;
  g.trans_b = s.trans_b;
  g.a = a;
  g.b = b;
  g.c = y;
  g.alpha = static_cast<FC>(alpha);
  SetDenseLayout(g);
  if (c && beta != 0) {
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j)
        y[i * s.n + j] = static_cast<FC>(Load<T>(c[i * s.c_strides[0] + j * s.c_strides[1]]));
    g.beta = static_cast<FC>(beta);
  }
  return gemm.Run(g, threads);
}

class GemmCpu : public exec::OpKernel {
 public:
  GemmCpu(const exec::KernelInfo& info, Status* st) : gemm_(GetLinalgImpl()), opset_(info.opset) {
    const ir::Node& node = info.node;
    alpha_ = node.GetFloat("alpha", 1.0f);
    beta_ = node.GetFloat("beta", 1.0f);
    int64_t ta = 0, tb = 0, broadcast = 0;
    if (!(*st = GetIntAttr(node, "transA", 0, &ta)).ok() || !(*st = GetIntAttr(node, "transB", 0, &tb)).ok() ||
        !(*st = GetIntAttr(node, "broadcast", 0, &broadcast)).ok()) {
      return;
    }
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1)) {
      *st = InvalidArgument("attributes 'transA' and 'transB' must be 0 or 1, got ", ta, " and ", tb);
      return;
    }
    trans_a_ = ta == 1;
    trans_b_ = tb == 1;
    // Before opset 7, C is broadcast only when `broadcast` says so.
    c_must_match_ = info.opset < 7 && broadcast == 0;
    const auto& in = node.inputs();
    gemm_.SetConstantB(in.size() > 1 && in[1] && in[1]->initializer());
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* a = ctx.input(0);
    const ir::Tensor* b = ctx.input(1);
    const ir::Tensor* c = ctx.input(2);
    if (!a || !b) return InvalidArgument("inputs A and B are required");
    if (!c && opset_ < 11)
      return InvalidArgument("input C is required before opset 11 (this node is at opset ", opset_, ")");
    for (const ir::Tensor* t : {b, c}) {
      if (t && t->dtype() != a->dtype()) {
        return InvalidArgument("input ", t == b ? "B" : "C", " has element type ", DTypeName(t->dtype()), ", expected ",
                               DTypeName(a->dtype()), " (the type of A)");
      }
    }
    if (a->rank() != 2 || b->rank() != 2) {
      return InvalidArgument("inputs A and B must be 2-D, got A ", ShapeToString(a->dims()), " and B ",
                             ShapeToString(b->dims()));
    }
    GemmShape s;
    s.trans_a = trans_a_;
    s.trans_b = trans_b_;
    s.m = trans_a_ ? a->dims()[1] : a->dims()[0];
    s.k = trans_a_ ? a->dims()[0] : a->dims()[1];
    s.n = trans_b_ ? b->dims()[0] : b->dims()[1];
    const int64_t kb = trans_b_ ? b->dims()[1] : b->dims()[0];
    if (kb != s.k) {
      return InvalidArgument("input A ", ShapeToString(a->dims()), (trans_a_ ? " (transposed)" : ""), " has K = ", s.k,
                             " but input B ", ShapeToString(b->dims()), (trans_b_ ? " (transposed)" : ""),
                             " has K = ", kb);
    }
    const std::vector<int64_t> out_dims = {s.m, s.n};
    if (c) {
      if (c_must_match_ && c->dims() != out_dims) {
        return InvalidArgument("input C has shape ", ShapeToString(c->dims()), ", expected ", ShapeToString(out_dims),
                               " (attribute 'broadcast' is 0)");
      }
      ONNXAMP_RETURN_IF_ERROR(CheckUnidirectionalBroadcast(c->dims(), out_dims, "input C"));
      s.c_strides = BroadcastStrides(c->dims(), out_dims);
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, a->dtype(), out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    return DispatchNumeric(a->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* pa = a->values<T>().data();
      const T* pb = b->values<T>().data();
      const T* pc = c ? c->values<T>().data() : nullptr;
      T* py = y->mutable_values<T>().data();
      if constexpr (!kIsFloatLike<T>) {
        constexpr float kLimit = 9.2e18f;  // inside int64_t's range
        if (alpha_ != std::trunc(alpha_) || beta_ != std::trunc(beta_) || std::abs(alpha_) > kLimit ||
            std::abs(beta_) > kLimit) {
          return InvalidArgument("alpha (", alpha_, ") and beta (", beta_, ") must be whole numbers for element type ",
                                 DTypeName(a->dtype()));
        }
      } else if (gemm_.impl() != LinalgImpl::kReference) {
        return RunFloatLinalg(ctx.threads(), py, y->num_elements(), [&](auto* out) {
          return GemmOpFast(gemm_, ctx.threads(), s, alpha_, beta_, pa, pb, pc, out);
        });
      }
      GemmOpReference(s, alpha_, beta_, pa, pb, pc, py);
      return Status::Ok();
    });
  }

 private:
  GemmRunner gemm_;
  int64_t opset_;
  float alpha_ = 1.0f, beta_ = 1.0f;
  bool trans_a_ = false, trans_b_ = false;
  bool c_must_match_ = false;
};

}  // namespace

void RegisterGemmKernels(exec::KernelRegistry& r) {
  // One kernel for every opset: 1-6 (`broadcast` attribute), 7 (C broadcasts), 9 (adds integers), 11 (C
  // optional), 13 (adds bfloat16).
  r.Register({"Gemm",
              "",
              1,
              23,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt32, DType::kInt64,
               DType::kUint32, DType::kUint64},
              0,
              &exec::MakeKernel<GemmCpu>});
}

}  // namespace onnxamp::ops
