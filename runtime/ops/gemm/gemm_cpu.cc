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
#include "runtime/ops/gemm/gemm.h"

namespace onnxamp::ops {
namespace {

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
  GemmCpu(const exec::KernelInfo& info, Status* st) : gemm_(LinalgImplFor(info)) {
    if (!(*st = spec_.Init(info)).ok()) return;
    const auto& in = info.node.inputs();
    gemm_.SetConstantB(in.size() > 1 && in[1] && in[1]->initializer());
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* a = ctx.input(0);
    const ir::Tensor* b = ctx.input(1);
    const ir::Tensor* c = ctx.input(2);
    GemmShape s;
    ONNXAMP_RETURN_IF_ERROR(spec_.Resolve(a, b, c, &s));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, a->dtype(), s.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    const float alpha = spec_.alpha(), beta = spec_.beta();
    return DispatchNumeric(a->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* pa = a->values<T>().data();
      const T* pb = b->values<T>().data();
      const T* pc = c ? c->values<T>().data() : nullptr;
      T* py = y->mutable_values<T>().data();
      if constexpr (!kIsFloatLike<T>) {
        ONNXAMP_RETURN_IF_ERROR(spec_.CheckWholeScalars(a->dtype()));
      } else if (gemm_.impl() != LinalgImpl::kReference) {
        return RunFloatLinalg(ctx.threads(), py, y->num_elements(), [&](auto* out) {
          return GemmOpFast(gemm_, ctx.threads(), s, alpha, beta, pa, pb, pc, out);
        });
      }
      GemmOpReference(s, alpha, beta, pa, pb, pc, py);
      return Status::Ok();
    });
  }

 private:
  GemmRunner gemm_;
  GemmSpec spec_;
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
