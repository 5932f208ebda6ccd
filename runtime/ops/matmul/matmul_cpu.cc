// MatMul (CPU): numpy matmul. Batch dims broadcast; a 1-D A is a row [1, K] and a 1-D B a column [K, 1], whose
// unit dim is dropped from the result. Float types run on the GEMM core with FP32 accumulation and one rounding on
// store (fp16/bf16 operands go to GemmRunner as they are; a B that is an initializer is converted once); integer
// types (which wrap on overflow) and the reference mode run the plain loop.
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_util.h"
#include "runtime/ops/matmul/fused_matmul.h"

namespace onnxamp::ops {
namespace {

// The plain loop, any element type: accumulate in AccumType<T> in order k = 0..K-1, store once.
template <typename T>
void MatMulReference(const MatMulShapes& s, const T* a, const T* b, T* y) {
  for (int64_t bt = 0; bt < s.batch.count; ++bt) {
    const T* ab = a + s.batch.offsets_a[bt] * s.m * s.k;
    const T* bb = b + s.batch.offsets_b[bt] * s.k * s.n;
    T* yb = y + bt * s.m * s.n;
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        AccumType<T> sum = 0;
        for (int64_t p = 0; p < s.k; ++p) sum += LoadAccum(ab[i * s.k + p]) * LoadAccum(bb[p * s.n + j]);
        yb[i * s.n + j] = StoreAccum<T>(sum);
      }
    }
  }
}

// On the GEMM core: float or double, or bfloat16 inputs with a float result.
template <typename F, typename FC = F>
Status MatMulFast(const GemmRunner& gemm, exec::ThreadPool& threads, const MatMulShapes& s, const F* a, const F* b,
                  FC* y) {
  GemmArgs<F, FC> g;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = a;
  g.b = b;
  g.c = y;
  return RunBroadcastBatch(gemm, threads, g, s.batch);
}

class MatMulCpu : public exec::OpKernel {
 public:
  MatMulCpu(const exec::KernelInfo& info, Status*) : gemm_(LinalgImplFor(info)) {
    const auto& in = info.node.inputs();
    gemm_.SetConstantB(in.size() > 1 && in[1] && in[1]->initializer());
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* a = ctx.input(0);
    const ir::Tensor* b = ctx.input(1);
    if (!a || !b) return InvalidArgument("inputs A and B are required");
    if (a->dtype() != b->dtype()) {
      return InvalidArgument("input B has element type ", DTypeName(b->dtype()), ", expected ", DTypeName(a->dtype()),
                             " (the type of A)");
    }
    ONNXAMP_ASSIGN_OR_RETURN(const MatMulShapes s, PlanMatMulShapes(a->dims(), b->dims(), false, false));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, a->dtype(), s.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    if (s.k == 0) {
      std::fill(y->mutable_data(), y->mutable_data() + y->nbytes(), std::byte{0});
      return Status::Ok();
    }
    return DispatchNumeric(a->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* pa = a->values<T>().data();
      const T* pb = b->values<T>().data();
      T* py = y->mutable_values<T>().data();
      if constexpr (kIsFloatLike<T>) {
        if (gemm_.impl() != LinalgImpl::kReference) {
          return RunFloatLinalg(ctx.threads(), py, y->num_elements(),
                                [&](auto* c) { return MatMulFast(gemm_, ctx.threads(), s, pa, pb, c); });
        }
      }
      MatMulReference(s, pa, pb, py);
      return Status::Ok();
    });
  }

 private:
  GemmRunner gemm_;
};

}  // namespace

void RegisterMatMulKernels(exec::KernelRegistry& r) {
  // One kernel for every opset: 1 (float types), 9 (adds 32/64-bit integers), 13 (adds bfloat16).
  r.Register({"MatMul",
              "",
              1,
              23,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt32, DType::kInt64,
               DType::kUint32, DType::kUint64},
              0,
              &exec::MakeKernel<MatMulCpu>});
}

}  // namespace onnxamp::ops
