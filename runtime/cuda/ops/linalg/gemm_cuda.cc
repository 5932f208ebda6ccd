// Gemm on CUDA: Y = alpha * op(A) op(B) + beta * C with the CPU kernel's attributes, checks and messages. A C that is
// a row vector ([N] or [1, N]) with beta = 1 is added by cuBLASLt's bias epilogue; any other C is broadcast into Y
// first and read back with beta (in place, C = D). Integer types run on the tiled integer kernel.
#include <cmath>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/linalg/cublaslt_gemm.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"

namespace onnxamp::cuda {
namespace {

bool IsFloatType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
}

class GemmCuda : public exec::OpKernel {
 public:
  GemmCuda(const exec::KernelInfo& info, Status* st) : opset_(info.opset) {
    const ir::Node& node = info.node;
    alpha_ = node.GetFloat("alpha", 1.0f);
    beta_ = node.GetFloat("beta", 1.0f);
    int64_t ta = 0, tb = 0, broadcast = 0;
    if (!(*st = ops::GetIntAttr(node, "transA", 0, &ta)).ok() ||
        !(*st = ops::GetIntAttr(node, "transB", 0, &tb)).ok() ||
        !(*st = ops::GetIntAttr(node, "broadcast", 0, &broadcast)).ok()) {
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
  }

  Status Compute(exec::KernelContext& ctx) const override {
    using ops::ShapeToString;
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
    GemmProblem p;
    p.dtype = a->dtype();
    p.trans_a = trans_a_;
    p.trans_b = trans_b_;
    p.m = trans_a_ ? a->dims()[1] : a->dims()[0];
    p.k = trans_a_ ? a->dims()[0] : a->dims()[1];
    p.n = trans_b_ ? b->dims()[0] : b->dims()[1];
    const int64_t kb = trans_b_ ? b->dims()[1] : b->dims()[0];
    if (kb != p.k) {
      return InvalidArgument("input A ", ShapeToString(a->dims()), (trans_a_ ? " (transposed)" : ""), " has K = ", p.k,
                             " but input B ", ShapeToString(b->dims()), (trans_b_ ? " (transposed)" : ""),
                             " has K = ", kb);
    }
    const std::vector<int64_t> out_dims = {p.m, p.n};
    std::vector<int64_t> c_strides;
    if (c) {
      if (c_must_match_ && c->dims() != out_dims) {
        return InvalidArgument("input C has shape ", ShapeToString(c->dims()), ", expected ", ShapeToString(out_dims),
                               " (attribute 'broadcast' is 0)");
      }
      ONNXAMP_RETURN_IF_ERROR(ops::CheckUnidirectionalBroadcast(c->dims(), out_dims, "input C"));
      c_strides = ops::BroadcastStrides(c->dims(), out_dims);
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, a->dtype(), out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    const bool is_float = IsFloatType(a->dtype());
    if (!is_float) {
      constexpr float kLimit = 9.2e18f;  // inside int64_t's range
      if (alpha_ != std::trunc(alpha_) || beta_ != std::trunc(beta_) || std::abs(alpha_) > kLimit ||
          std::abs(beta_) > kLimit) {
        return InvalidArgument("alpha (", alpha_, ") and beta (", beta_, ") must be whole numbers for element type ",
                               DTypeName(a->dtype()));
      }
    }
    CudaContext& cuda = GetCudaContext(ctx);
    p.a = a->data();
    p.b = b->data();
    p.d = y->mutable_data();
    p.lda = trans_a_ ? p.m : p.k;
    p.ldb = trans_b_ ? p.k : p.n;
    p.alpha = alpha_;
    if (c && beta_ != 0) {
      // A row vector: one value per column, the same for every row.
      const bool row_vector = c->rank() >= 1 && c->num_elements() == p.n && c->dims().back() == p.n &&
                              (c->rank() == 1 || c->dims()[0] == 1);
      if (is_float && row_vector && beta_ == 1.0f) {
        p.bias = c->data();
      } else {
        ONNXAMP_RETURN_IF_ERROR(LaunchBroadcast2D(a->dtype(), c->data(), c_strides[0], c_strides[1], y->mutable_data(),
                                                  p.m, p.n, cuda.stream(), "Gemm"));
        p.beta = beta_;
      }
    }
    return gemm_.Run(cuda, p, "Gemm");
  }

 private:
  CublasLtGemm gemm_;
  int64_t opset_;
  float alpha_ = 1.0f, beta_ = 1.0f;
  bool trans_a_ = false, trans_b_ = false;
  bool c_must_match_ = false;
};

}  // namespace

void RegisterCudaGemmKernels(exec::KernelRegistry& r) {
  // The CPU kernel's opsets and types: 1-6 (`broadcast` attribute), 7 (C broadcasts), 9 (adds integers), 11 (C
  // optional), 13 (adds bfloat16).
  r.Register({"Gemm",
              "",
              1,
              23,
              exec::Device::kCuda,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt32, DType::kInt64,
               DType::kUint32, DType::kUint64},
              0,
              &exec::MakeKernel<GemmCuda>});
}

}  // namespace onnxamp::cuda
