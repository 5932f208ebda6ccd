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
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/gemm_util.h"

namespace onnxamp::cuda {

StatusOr<MatMulGeometry> PlanMatMul(const std::vector<int64_t>& a_dims, const std::vector<int64_t>& b_dims,
                                    bool trans_a, bool trans_b) {
  using ops::ShapeToString;
  if (a_dims.empty() || b_dims.empty()) {
    return InvalidArgument("inputs must have rank >= 1, got A ", ShapeToString(a_dims), " and B ",
                           ShapeToString(b_dims));
  }
  if ((trans_a && a_dims.size() != 2) || (trans_b && b_dims.size() != 2)) {
    return InvalidArgument("transposed inputs must be 2-D, got A ", ShapeToString(a_dims), (trans_a ? " (transA)" : ""),
                           " and B ", ShapeToString(b_dims), (trans_b ? " (transB)" : ""));
  }
  std::vector<int64_t> a = a_dims, b = b_dims;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  MatMulGeometry g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = trans_a ? a[1] : a[a.size() - 2];
  g.k = trans_a ? a[0] : a.back();
  g.n = trans_b ? b[0] : b.back();
  const int64_t kb = trans_b ? b[1] : b[b.size() - 2];
  if (kb != g.k) {
    return InvalidArgument("input A ", ShapeToString(a_dims), " has ", g.k, " columns but input B ",
                           ShapeToString(b_dims), " has ", kb, " rows");
  }
  const std::vector<int64_t> a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  ONNXAMP_ASSIGN_OR_RETURN(const ops::BatchBroadcast bc, ops::BroadcastBatch(a_batch, b_batch));
  g.out_dims = bc.dims;
  if (a_dims.size() > 1) g.out_dims.push_back(g.m);
  if (b_dims.size() > 1) g.out_dims.push_back(g.n);
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
                 const void* b, void* y, double alpha, const void* bias, LinalgActivation act, std::string_view what) {
  if (g.count == 0 || g.m == 0 || g.n == 0) return Status::Ok();
  const int64_t es = DTypeBits(dtype) / 8;
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
  const int64_t out_per_call = g.inner * g.m * g.n;
  for (size_t c = 0; c < g.a_offsets.size(); ++c) {
    p.a = pa + g.a_offsets[c] * es;
    p.b = pb + g.b_offsets[c] * es;
    p.d = py + static_cast<int64_t>(c) * out_per_call * es;
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

// FusedMatMul (com.onnxamp, CUDA only; made by OptimizeGraphForCuda): Y = act(alpha * op(A) op(B) + bias).
class FusedMatMulCuda : public exec::OpKernel {
 public:
  FusedMatMulCuda(const exec::KernelInfo& info, Status* st)
      : what_(info.node.op_type()), gemm_(info.options.cuda_tf32) {
    const ir::Node& node = info.node;
    alpha_ = node.GetFloat("alpha", 1.0f);
    int64_t ta = 0, tb = 0;
    if (!(*st = ops::GetIntAttr(node, "transA", 0, &ta)).ok() ||
        !(*st = ops::GetIntAttr(node, "transB", 0, &tb)).ok()) {
      return;
    }
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1)) {
      *st = InvalidArgument("attributes 'transA' and 'transB' must be 0 or 1, got ", ta, " and ", tb);
      return;
    }
    trans_a_ = ta == 1;
    trans_b_ = tb == 1;
    const std::string act = node.GetString("activation", "");
    if (act == "Relu") {
      act_ = LinalgActivation::kRelu;
    } else if (act == "Gelu") {
      act_ = LinalgActivation::kGelu;
    } else if (act == "GeluTanh") {
      act_ = LinalgActivation::kGeluTanh;
    } else if (!act.empty()) {
      *st = InvalidArgument("attribute 'activation' must be empty, \"Relu\", \"Gelu\" or \"GeluTanh\", got \"", act,
                            "\"");
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* a = ctx.input(0);
    const ir::Tensor* b = ctx.input(1);
    const ir::Tensor* bias = ctx.input(2);
    if (!a || !b) return InvalidArgument("inputs A and B are required");
    ONNXAMP_RETURN_IF_ERROR(CheckSameType(*a, *b));
    ONNXAMP_ASSIGN_OR_RETURN(const MatMulGeometry g, PlanMatMul(a->dims(), b->dims(), trans_a_, trans_b_));
    if (bias) {
      if (bias->dtype() != a->dtype()) {
        return InvalidArgument("input bias has element type ", DTypeName(bias->dtype()), ", expected ",
                               DTypeName(a->dtype()), " (the type of A)");
      }
      // A row vector of N: [N], [1, N], [1, 1, N]...
      bool row = bias->rank() >= 1 && bias->dims().back() == g.n;
      for (int64_t d = 0; row && d + 1 < bias->rank(); ++d) row = bias->dims()[static_cast<size_t>(d)] == 1;
      if (!row || b->rank() < 2) {
        return InvalidArgument("input bias ", ops::ShapeToString(bias->dims()), " must be a row vector of N = ", g.n,
                               " values (B ", ops::ShapeToString(b->dims()), ")");
      }
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, a->dtype(), g.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    return RunMatMul(gemm_, GetCudaContext(ctx), g, a->dtype(), a->data(), b->data(), y->mutable_data(), alpha_,
                     bias ? bias->data() : nullptr, act_, what_);
  }

 private:
  std::string what_;
  CublasLtGemm gemm_;
  float alpha_ = 1.0f;
  bool trans_a_ = false, trans_b_ = false;
  LinalgActivation act_ = LinalgActivation::kNone;
};

}  // namespace

void RegisterCudaMatMulKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "MatMul", &exec::MakeKernel<MatMulCuda>);
  r.Register({kFusedMatMulOp,
              kFusedMatMulDomain,
              1,
              1,
              exec::Device::kCuda,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              0,
              &exec::MakeKernel<FusedMatMulCuda>});
}

}  // namespace onnxamp::cuda
