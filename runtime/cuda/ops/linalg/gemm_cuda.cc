// Gemm on CUDA: Y = alpha * op(A) op(B) + beta * C with the CPU kernel's attributes, checks and messages. A C that is
// a row vector ([N] or [1, N]) with beta = 1 is added by cuBLASLt's bias epilogue; any other C is broadcast into Y
// first and read back with beta (in place, C = D). Integer types run on the tiled integer kernel.
#include <string>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/linalg/cublaslt_gemm.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/ops/gemm/gemm.h"

namespace onnxamp::cuda {
namespace {

bool IsFloatType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
}

class GemmCuda : public exec::OpKernel {
 public:
  GemmCuda(const exec::KernelInfo& info, Status* st) : gemm_(info.options.cuda_tf32) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* a = ctx.input(0);
    const ir::Tensor* b = ctx.input(1);
    const ir::Tensor* c = ctx.input(2);
    ops::GemmShape s;
    ONNXAMP_RETURN_IF_ERROR(spec_.Resolve(a, b, c, &s));
    GemmProblem p;
    p.dtype = a->dtype();
    p.trans_a = s.trans_a;
    p.trans_b = s.trans_b;
    p.m = s.m;
    p.k = s.k;
    p.n = s.n;
    const std::vector<int64_t>& c_strides = s.c_strides;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, a->dtype(), s.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    const bool is_float = IsFloatType(a->dtype());
    if (!is_float) ONNXAMP_RETURN_IF_ERROR(spec_.CheckWholeScalars(a->dtype()));
    const float alpha = spec_.alpha(), beta = spec_.beta();
    CudaContext& cuda = GetCudaContext(ctx);
    p.a = a->data();
    p.b = b->data();
    p.d = y->mutable_data();
    p.lda = s.trans_a ? p.m : p.k;
    p.ldb = s.trans_b ? p.k : p.n;
    p.alpha = alpha;
    if (c && beta != 0) {
      // A row vector: one value per column, the same for every row.
      const bool row_vector = c->rank() >= 1 && c->num_elements() == p.n && c->dims().back() == p.n &&
                              (c->rank() == 1 || c->dims()[0] == 1);
      if (is_float && row_vector && beta == 1.0f) {
        p.bias = c->data();
      } else {
        ONNXAMP_RETURN_IF_ERROR(LaunchBroadcast2D(a->dtype(), c->data(), c_strides[0], c_strides[1], y->mutable_data(),
                                                  p.m, p.n, cuda.stream(), "Gemm"));
        p.beta = beta;
      }
    }
    return gemm_.Run(cuda, p, "Gemm");
  }

 private:
  CublasLtGemm gemm_;
  ops::GemmSpec spec_;
};

}  // namespace

void RegisterCudaGemmKernels(exec::KernelRegistry& r) { RegisterLikeCpu(r, "Gemm", &exec::MakeKernel<GemmCuda>); }

}  // namespace onnxamp::cuda
