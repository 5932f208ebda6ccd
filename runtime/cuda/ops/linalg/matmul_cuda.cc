// MatMul and com.onnxamp FusedMatMul on CUDA. numpy matmul semantics as the CPU kernel (1-D operands promoted and
// their unit dim dropped, batch dims broadcast); float types run on cuBLASLt (FP32 accumulation for fp16/bf16),
// integers on the tiled integer kernel. Batch dims become as few strided-batch calls as their strides allow: one call
// when each operand has every matrix or a single one (stride 0), one plain GEMM with M folded over the batch when B
// is a single matrix, and one strided call per outer index otherwise (general broadcasting).
#include "runtime/cuda/ops/linalg/matmul_cuda.h"
#include "runtime/cuda/ops/register_like_cpu.h"

#include <string>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/graph_rewrite.h"
#include "runtime/cuda/ops/linalg/cublaslt_gemm.h"
#include "runtime/cuda/ops/linalg/linalg_device.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/gemm_util.h"
#include "runtime/ops/matmul/fused_matmul.h"

namespace onnxamp::cuda {

StatusOr<MatMulGeometry> PlanMatMul(const std::vector<int64_t>& a_dims, const std::vector<int64_t>& b_dims,
                                    bool trans_a, bool trans_b) {
  ONNXAMP_ASSIGN_OR_RETURN(const ops::MatMulShapes shapes, ops::PlanMatMulShapes(a_dims, b_dims, trans_a, trans_b));
  const ops::BatchBroadcast& bc = shapes.batch;
  std::vector<int64_t> a = a_dims, b = b_dims;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const std::vector<int64_t> a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  MatMulGeometry g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = shapes.m;
  g.n = shapes.n;
  g.k = shapes.k;
  g.out_dims = shapes.out_dims;
  g.count = bc.count;
  if (bc.count == 0) return g;

  // Per output batch dim (dims of size 1 dropped): its size and each operand's stride in matrices (0: broadcast).
  const size_t rank = bc.dims.size();
  std::vector<int64_t> dims, sa, sb;
  {
    int64_t acc_a = 1, acc_b = 1;
    std::vector<int64_t> all_sa(rank), all_sb(rank);
    for (size_t d = rank; d-- > 0;) {
      const int64_t da = d + a_batch.size() >= rank ? a_batch[d + a_batch.size() - rank] : 1;
      const int64_t db = d + b_batch.size() >= rank ? b_batch[d + b_batch.size() - rank] : 1;
      all_sa[d] = da == 1 ? 0 : acc_a;
      all_sb[d] = db == 1 ? 0 : acc_b;
      acc_a *= da;
      acc_b *= db;
    }
    for (size_t d = 0; d < rank; ++d) {
      if (bc.dims[d] == 1) continue;
      dims.push_back(bc.dims[d]);
      sa.push_back(all_sa[d]);
      sb.push_back(all_sb[d]);
    }
  }
  // The longest suffix of batch dims over which both operands step by one stride each: one strided call.
  g.inner = 1;
  int64_t step_a = 0, step_b = 0;
  if (!dims.empty()) {
    size_t first = dims.size() - 1;
    g.inner = dims[first];
    step_a = sa[first];
    step_b = sb[first];
    while (first > 0 && sa[first - 1] == step_a * g.inner && sb[first - 1] == step_b * g.inner) {
      --first;
      g.inner *= dims[first];
    }
  }
  const int64_t a_matrix = g.m * g.k, b_matrix = g.k * g.n;
  g.stride_a = step_a * a_matrix;
  g.stride_b = step_b * b_matrix;
  // The calls: every outer index (row-major over the batch dims before that suffix), starting at flat batch index
  // c * inner.
  const int64_t calls = bc.count / g.inner;
  g.a_offsets.resize(static_cast<size_t>(calls));
  g.b_offsets.resize(static_cast<size_t>(calls));
  for (int64_t c = 0; c < calls; ++c) {
    g.a_offsets[static_cast<size_t>(c)] = bc.offsets_a[static_cast<size_t>(c * g.inner)] * a_matrix;
    g.b_offsets[static_cast<size_t>(c)] = bc.offsets_b[static_cast<size_t>(c * g.inner)] * b_matrix;
  }
  // A's matrices back to back and one B: a single [inner * m, k] x [k, n] product.
  g.fold_m = g.inner > 1 && step_b == 0 && step_a == 1 && !trans_a;
  return g;
}

Status RunMatMul(const CublasLtGemm& gemm, CudaContext& cuda, const MatMulGeometry& g, DType dtype, const void* a,
                 const void* b, void* y, double alpha, const void* bias, LinalgActivation act, std::string_view what,
                 DType out_dtype, GemmBiasGrad bias_grad, void* bias_grad_out, const uint8_t* relu_mask,
                 uint8_t* relu_mask_out, int64_t mask_row_bytes, const void* gelu_x) {
  if (g.count == 0 || g.m == 0 || g.n == 0) return Status::Ok();
  if ((relu_mask || relu_mask_out || gelu_x) && (g.a_offsets.size() != 1 || !(g.fold_m || g.inner == 1))) {
    return InvalidArgument(what, ": an activation gradient or ReLU mask needs the product as one GEMM (a 2-D B)");
  }
  const int64_t es = DTypeBits(dtype) / 8;
  const int64_t es_y = DTypeBits(out_dtype == DType::kUndefined ? dtype : out_dtype) / 8;
  const auto* pa = static_cast<const std::byte*>(a);
  const auto* pb = static_cast<const std::byte*>(b);
  auto* py = static_cast<std::byte*>(y);
  GemmProblem p;
  p.dtype = dtype;
  p.m = g.fold_m ? g.inner * g.m : g.m;
  p.batch = g.fold_m ? 1 : g.inner;
  p.n = g.n;
  p.k = g.k;
  p.trans_a = g.trans_a;
  p.trans_b = g.trans_b;
  p.lda = g.trans_a ? g.m : g.k;
  p.ldb = g.trans_b ? g.k : g.n;
  p.stride_a = p.batch > 1 ? g.stride_a : 0;
  p.stride_b = p.batch > 1 ? g.stride_b : 0;
  p.alpha = alpha;
  p.bias = bias;
  p.act = act;
  p.d_dtype = out_dtype;
  p.bias_grad = bias_grad;
  p.bias_grad_out = bias_grad_out;
  p.relu_mask = relu_mask;
  p.relu_mask_out = relu_mask_out;
  p.mask_row_bytes = mask_row_bytes;
  p.gelu_x = gelu_x;
  const int64_t out_per_call = g.inner * g.m * g.n;
  for (size_t c = 0; c < g.a_offsets.size(); ++c) {
    p.a = pa + g.a_offsets[c] * es;
    p.b = pb + g.b_offsets[c] * es;
    p.d = py + static_cast<int64_t>(c) * out_per_call * es_y;
    ONNXAMP_RETURN_IF_ERROR(gemm.Run(cuda, p, what));
  }
  return Status::Ok();
}

namespace {

Status CheckSameType(const ir::Tensor& a, const ir::Tensor& b) {
  if (a.dtype() != b.dtype()) {
    return InvalidArgument("input B has element type ", DTypeName(b.dtype()), ", expected ", DTypeName(a.dtype()),
                           " (the type of A)");
  }
  return Status::Ok();
}

class MatMulCuda : public exec::OpKernel {
 public:
  MatMulCuda(const exec::KernelInfo& info, Status*) : what_(info.node.op_type()), gemm_(info.options.cuda_tf32) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* a = ctx.input(0);
    const ir::Tensor* b = ctx.input(1);
    if (!a || !b) return InvalidArgument("inputs A and B are required");
    ONNXAMP_RETURN_IF_ERROR(CheckSameType(*a, *b));
    ONNXAMP_ASSIGN_OR_RETURN(const MatMulGeometry g, PlanMatMul(a->dims(), b->dims(), false, false));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, a->dtype(), g.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    return RunMatMul(gemm_, GetCudaContext(ctx), g, a->dtype(), a->data(), b->data(), y->mutable_data(), 1.0, nullptr,
                     LinalgActivation::kNone, what_);
  }

 private:
  std::string what_;
  CublasLtGemm gemm_;
};

// FusedMatMul (com.onnxamp; made by OptimizeGraphForCuda; contract and CPU reference in
// runtime/ops/matmul/fused_matmul.h): Y = act(alpha * op(A) op(B) + bias), optionally in float for fp16/bf16 inputs
// and with a bias gradient.
class FusedMatMulCuda : public exec::OpKernel {
 public:
  FusedMatMulCuda(const exec::KernelInfo& info, Status* st)
      : what_(info.node.op_type()), gemm_(info.options.cuda_tf32) {
    if (!(*st = attrs_.Init(info.node)).ok()) return;
    switch (attrs_.activation) {
      case ops::FusedActivation::kRelu:
        act_ = LinalgActivation::kRelu;
        break;
      case ops::FusedActivation::kGelu:
        act_ = LinalgActivation::kGelu;
        break;
      case ops::FusedActivation::kGeluTanh:
        act_ = LinalgActivation::kGeluTanh;
        break;
      case ops::FusedActivation::kNone:
      default:
        act_ = LinalgActivation::kNone;
    }
    grad_ = attrs_.bias_grad == ops::FusedBiasGrad::kA   ? GemmBiasGrad::kA
            : attrs_.bias_grad == ops::FusedBiasGrad::kB ? GemmBiasGrad::kB
                                                         : GemmBiasGrad::kNone;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* a = ctx.input(0);
    const ir::Tensor* b = ctx.input(1);
    const ir::Tensor* bias = ctx.input(2);
    if (!a || !b) return InvalidArgument("inputs A and B are required");
    ONNXAMP_RETURN_IF_ERROR(CheckSameType(*a, *b));
    ONNXAMP_ASSIGN_OR_RETURN(const MatMulGeometry g, PlanMatMul(a->dims(), b->dims(), attrs_.trans_a, attrs_.trans_b));
    ONNXAMP_ASSIGN_OR_RETURN(const DType out_type, attrs_.OutputType(a->dtype(), bias != nullptr));
    ONNXAMP_RETURN_IF_ERROR(attrs_.CheckOperands(*a, *b, bias, g.n));
    const uint8_t* mask_in = nullptr;
    if (attrs_.relu_grad) {
      const ir::Tensor* mask = ctx.input(3);
      ONNXAMP_RETURN_IF_ERROR(ops::CheckReluMaskInput(mask, g.out_dims));
      mask_in = mask->values<uint8_t>().data();
    }
    const void* gelu_x = nullptr;
    if (attrs_.gelu_grad) {
      const ir::Tensor* x = ctx.input(3);
      ONNXAMP_RETURN_IF_ERROR(ops::CheckGeluInput(x, a->dtype(), g.out_dims));
      gelu_x = x->data();
    }
    const bool with_grad = grad_ != GemmBiasGrad::kNone;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, out_type, g.out_dims));
    uint8_t* mask_out = nullptr;
    if (attrs_.relu_mask && ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * mask, ctx.AllocateOutput(1, DType::kUint8, ops::ReluMaskDims(g.out_dims)));
      mask_out = mask->mutable_values<uint8_t>().data();
    }
    void* grad = nullptr;
    if (with_grad && ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * t,
                               ctx.AllocateOutput(1, out_type, {grad_ == GemmBiasGrad::kA ? g.m : g.n}));
      grad = t->mutable_data();
      if (t->num_elements() > 0 && (g.m == 0 || g.n == 0)) {
        // No GEMM runs for an empty product; the sums still do (K may be non-zero).
        const ir::Tensor* op = grad_ == GemmBiasGrad::kA ? a : b;
        const bool trans = grad_ == GemmBiasGrad::kA ? attrs_.trans_a : attrs_.trans_b;
        const int64_t rows = op->dims()[0], cols = op->dims()[1];
        return LaunchMatrixSum(a->dtype(), out_type, op->data(), rows, cols, cols,
                               grad_ == GemmBiasGrad::kA ? trans : !trans, grad, GetCudaContext(ctx).stream(), what_);
      }
    }
    if (y->num_elements() == 0) return Status::Ok();
    return RunMatMul(gemm_, GetCudaContext(ctx), g, a->dtype(), a->data(), b->data(), y->mutable_data(), attrs_.alpha,
                     bias ? bias->data() : nullptr, act_, what_, out_type, grad ? grad_ : GemmBiasGrad::kNone, grad,
                     mask_in, mask_out, ops::ReluMaskRowBytes(g.n), gelu_x);
  }

 private:
  std::string what_;
  CublasLtGemm gemm_;
  ops::FusedMatMulAttrs attrs_;
  LinalgActivation act_ = LinalgActivation::kNone;
  GemmBiasGrad grad_ = GemmBiasGrad::kNone;
};

}  // namespace

void RegisterCudaMatMulKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "MatMul", &exec::MakeKernel<MatMulCuda>);
  RegisterLikeCpu(r, kFusedMatMulOp, &exec::MakeKernel<FusedMatMulCuda>, {}, kFusedMatMulDomain);
}

}  // namespace onnxamp::cuda
