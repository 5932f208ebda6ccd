// cuBLASLt GEMM with cached plans (see cublaslt_gemm.h).
//
// cuBLASLt is column-major. A row-major [m, n] matrix D is the column-major [n, m] matrix D^T, and
// D^T = op(B)^T op(A)^T, so cuBLASLt's "A" is our B and its "B" is our A, each with its own transpose flag, and no
// data moves. The bias epilogue adds a vector over cuBLASLt's rows, which are our columns: a row vector [n] of the
// row-major result, as MatMul + Add(bias) computes.
#include "runtime/cuda/ops/linalg/cublaslt_gemm.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/ops/elementwise/activation_grad_launch.h"

namespace onnxamp::cuda {
namespace {

constexpr size_t kMaxWorkspaceBytes = size_t{32} << 20;  // cap on what an algorithm may ask for
constexpr size_t kMaxCachedPlans = 64;                   // per kernel; cleared when exceeded (shapes churn)

bool IsFloatType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
}

cudaDataType_t CudaTypeOf(DType t) {
  switch (t) {
    case DType::kFloat16:
      return CUDA_R_16F;
    case DType::kBFloat16:
      return CUDA_R_16BF;
    case DType::kFloat64:
      return CUDA_R_64F;
    default:
      return CUDA_R_32F;
  }
}

// The largest power of two (up to 256) dividing the address and every byte step from it (leading dims, batch
// strides): what cuBLASLt may assume about every matrix it reads at that pointer.
uint32_t AlignmentOf(const void* p, std::initializer_list<int64_t> byte_steps) {
  uint64_t bits = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
  for (int64_t s : byte_steps) bits |= static_cast<uint64_t>(s);
  uint32_t align = 256;
  while (align > 1 && bits % align != 0) align /= 2;
  return align;
}

// ONNXAMP_CUBLASLT_DRELU=0 (DGELU=0) keeps the ReLU mask (the GELU gradient) out of cuBLASLt: LaunchApplyReluMask
// (GeluGrad's kernel, ew::LaunchActivationGrad, in place) applies it after the GEMM. Read when a plan is made.
bool EpilogueAllowed(const char* variable) {
  const char* v = std::getenv(variable);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

cublasLtEpilogue_t EpilogueFor(bool bias, LinalgActivation act, GemmBiasGrad grad, bool relu_mask, bool gelu_x,
                               int64_t n) {
  // The GELU gradient: D times the tanh form's derivative at the aux input (X, D's type, leading dim n, which
  // cuBLASLt wants a multiple of 8).
  if (gelu_x)
    return n % 8 == 0 && EpilogueAllowed("ONNXAMP_CUBLASLT_DGELU") ? CUBLASLT_EPILOGUE_DGELU
                                                                   : CUBLASLT_EPILOGUE_DEFAULT;
  // The ReLU gradient: D where the bit mask (the aux input) is set. Our rows are cuBLASLt's columns, so bit
  // r * ld + j of its column-major mask is our [r, j / 8] byte's bit j % 8 for ld a multiple of 8 (bits in a byte
  // from the least significant, as in the little-endian words the device reads).
  if (relu_mask) return EpilogueAllowed("ONNXAMP_CUBLASLT_DRELU") ? CUBLASLT_EPILOGUE_DRELU : CUBLASLT_EPILOGUE_DEFAULT;
  // cuBLASLt's A is our B: its BGRADA sums our op(B) over k (D's rows in its terms, our n), BGRADB our op(A).
  if (grad == GemmBiasGrad::kA) return CUBLASLT_EPILOGUE_BGRADB;
  if (grad == GemmBiasGrad::kB) return CUBLASLT_EPILOGUE_BGRADA;
  switch (act) {
    case LinalgActivation::kRelu:
      // cuBLASLt's RELU epilogues turn NaN into 0 (max(x, 0)); the CPU, the Relu op and PyTorch keep it, and a NaN
      // hidden there hides an overflow from the loss scaler. cuBLASLt adds the bias, LaunchBiasActivation the ReLU.
      return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    case LinalgActivation::kGeluTanh:
      // cuBLASLt's GELU is the tanh approximation, so only Gelu(approximate="tanh") runs in its epilogue.
      return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    case LinalgActivation::kGelu:
      return CUBLASLT_EPILOGUE_DEFAULT;  // the erf form runs in LaunchBiasActivation
    case LinalgActivation::kNone:
    default:
      return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
}

}  // namespace

struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr;  // cuBLASLt's A: our B
  cublasLtMatrixLayout_t lt_b = nullptr;  // cuBLASLt's B: our A
  cublasLtMatrixLayout_t lt_d = nullptr;  // C and D
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;
  bool lt_epilogue = false;  // cuBLASLt adds the bias and applies the activation (or the ReLU mask); else
                             // LaunchBiasActivation (LaunchApplyReluMask) does
  bool per_matrix = false;   // no algorithm takes the strided batch: one product per matrix (batch 1 each)

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    // Destroy calls only fail for null descriptors, which are skipped.
    if (lt_d) cublasLtMatrixLayoutDestroy(lt_d);
    if (lt_b) cublasLtMatrixLayoutDestroy(lt_b);
    if (lt_a) cublasLtMatrixLayoutDestroy(lt_a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

namespace {

// RAII for the heuristic preference (not kept in the plan).
struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  ~Preference() {
    if (p) cublasLtMatmulPreferenceDestroy(p);
  }
};

Status MakeLayout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                  int64_t batch, int64_t stride, std::string_view what) {
  ONNXAMP_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(layout, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld), what);
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    ONNXAMP_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)), what);
    ONNXAMP_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
        what);
  }
  return Status::Ok();
}

}  // namespace

CublasLtGemm::CublasLtGemm(bool tf32) : tf32_(tf32) {}
CublasLtGemm::~CublasLtGemm() = default;

StatusOr<CublasLtGemm::Plan*> CublasLtGemm::GetPlan(CudaContext& cuda, const GemmProblem& p, const Key& key,
                                                    std::string_view what) const {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  if (plans_.size() >= kMaxCachedPlans) plans_.clear();
  if (p.batch > std::numeric_limits<int32_t>::max()) {
    return Unimplemented(what, ": a batch of ", p.batch, " matrices is more than cuBLASLt takes in one call");
  }

  auto plan = std::make_unique<Plan>();
  const bool f64 = p.dtype == DType::kFloat64;
  const cublasComputeType_t compute = f64                                     ? CUBLAS_COMPUTE_64F
                                      : (p.dtype == DType::kFloat32 && tf32_) ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                              : CUBLAS_COMPUTE_32F;
  ONNXAMP_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan->desc, compute, f64 ? CUDA_R_64F : CUDA_R_32F), what);
  const int32_t op_a = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is our B
  const int32_t op_b = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  ONNXAMP_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), what);
  ONNXAMP_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), what);

  const cudaDataType_t type = CudaTypeOf(p.dtype);
  const cudaDataType_t d_type = CudaTypeOf(p.d_dtype == DType::kUndefined ? p.dtype : p.d_dtype);
  // Column-major views: our B stored [k, n] row-major is [n, k] column-major (or [k, n] when stored [n, k]).
  ONNXAMP_RETURN_IF_ERROR(
      MakeLayout(&plan->lt_a, type, p.trans_b ? p.k : p.n, p.trans_b ? p.n : p.k, p.ldb, p.batch, p.stride_b, what));
  ONNXAMP_RETURN_IF_ERROR(
      MakeLayout(&plan->lt_b, type, p.trans_a ? p.m : p.k, p.trans_a ? p.k : p.m, p.lda, p.batch, p.stride_a, what));
  ONNXAMP_RETURN_IF_ERROR(MakeLayout(&plan->lt_d, d_type, p.n, p.m, p.n, p.batch, p.m * p.n, what));

  Preference pref;
  ONNXAMP_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref.p), what);
  const uint64_t max_ws = kMaxWorkspaceBytes;
  ONNXAMP_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulPreferenceSetAttribute(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof(max_ws)),
      what);
  // Alignments from the key: cuBLASLt's A is our B.
  const uint32_t align_lt_a = std::get<15>(key), align_lt_b = std::get<14>(key), align_d = std::get<16>(key);
  ONNXAMP_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
                                     pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_lt_a, sizeof(uint32_t)),
                                 what);
  ONNXAMP_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
                                     pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_lt_b, sizeof(uint32_t)),
                                 what);
  ONNXAMP_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
                                     pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(uint32_t)),
                                 what);
  ONNXAMP_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
                                     pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(uint32_t)),
                                 what);

  // First with the epilogue in cuBLASLt; when no algorithm takes it (some types or alignments), without it, and the
  // bias and activation then run as a separate kernel.
  const cublasLtEpilogue_t wanted =
      EpilogueFor(p.bias != nullptr, p.act, p.bias_grad, p.relu_mask != nullptr, p.gelu_x != nullptr, p.n);
  const void* aux_in = p.relu_mask != nullptr ? static_cast<const void*>(p.relu_mask) : p.gelu_x;
  if (aux_in != nullptr) {
    // The aux input's leading dim in elements (the mask's in bits); the heuristic reads the pointer's alignment.
    const int64_t aux_ld = p.relu_mask != nullptr ? p.mask_row_bytes * 8 : p.n;
    ONNXAMP_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)),
        what);
  }
  for (const cublasLtEpilogue_t epilogue : {wanted, CUBLASLT_EPILOGUE_DEFAULT}) {
    ONNXAMP_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)), what);
    const bool with_bias = epilogue == CUBLASLT_EPILOGUE_BIAS || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ||
                           epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
    const bool with_grad = epilogue == CUBLASLT_EPILOGUE_BGRADA || epilogue == CUBLASLT_EPILOGUE_BGRADB;
    // The heuristic reads the bias pointer's alignment (never its data). A bias gradient is of D's type (Ctype),
    // cuBLASLt's default for it.
    const void* bias = with_bias ? p.bias : with_grad ? p.bias_grad_out : nullptr;
    ONNXAMP_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), what);
    if (aux_in != nullptr) {
      const void* aux = epilogue == CUBLASLT_EPILOGUE_DRELU || epilogue == CUBLASLT_EPILOGUE_DGELU ? aux_in : nullptr;
      ONNXAMP_CUBLAS_RETURN_IF_ERROR(
          cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)),
          what);
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(cuda.cublaslt(), plan->desc, plan->lt_a, plan->lt_b,
                                                             plan->lt_d, plan->lt_d, pref.p, 1, &result, &found);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
      plan->algo = result.algo;
      plan->workspace_bytes = result.workspaceSize;
      plan->lt_epilogue = epilogue != CUBLASLT_EPILOGUE_DEFAULT;
      Plan* out = plan.get();
      plans_.emplace(key, std::move(plan));
      return out;
    }
    // An epilogue the library refuses for these types (NOT_SUPPORTED, or INVALID_VALUE for a combination it does not
    // take) is retried without; the plain GEMM's errors are errors.
    const bool refused = st == CUBLAS_STATUS_NOT_SUPPORTED ||
                         (st == CUBLAS_STATUS_INVALID_VALUE && epilogue != CUBLASLT_EPILOGUE_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS && !refused) {
      return CublasErrorToStatus(st, "cublasLtMatmulAlgoGetHeuristic", what);
    }
    if (epilogue == CUBLASLT_EPILOGUE_DEFAULT) break;
  }
  if (p.batch > 1) {
    // A batch cuBLASLt cannot stride through (a broadcast stride of 0, say) still runs matrix by matrix.
    auto per_matrix = std::make_unique<Plan>();
    per_matrix->per_matrix = true;
    Plan* out = per_matrix.get();
    plans_.emplace(key, std::move(per_matrix));
    return out;
  }
  return Unimplemented(what, ": cuBLASLt has no algorithm for a ", DTypeName(p.dtype), " GEMM of batch ", p.batch,
                       ", m ", p.m, ", n ", p.n, ", k ", p.k, (p.trans_a ? ", A transposed" : ""),
                       (p.trans_b ? ", B transposed" : ""));
}

Status CublasLtGemm::Run(CudaContext& cuda, const GemmProblem& p, std::string_view what) const {
  if (p.batch == 0 || p.m == 0 || p.n == 0) return Status::Ok();
  const bool has_epilogue = p.bias != nullptr || p.act != LinalgActivation::kNone;
  const DType d_dtype = p.d_dtype == DType::kUndefined ? p.dtype : p.d_dtype;
  const bool with_grad = p.bias_grad != GemmBiasGrad::kNone;
  ONNXAMP_CHECK(d_dtype == p.dtype ||
                    (d_dtype == DType::kFloat32 && (p.dtype == DType::kFloat16 || p.dtype == DType::kBFloat16) &&
                     !has_epilogue && p.beta == 0),
                "a GEMM's D is of its inputs' type, or float for fp16/bf16 inputs without bias, activation or beta");
  ONNXAMP_CHECK(!with_grad || (p.batch == 1 && !has_epilogue && p.alpha == 1 && p.beta == 0 && p.bias_grad_out),
                "a bias gradient takes one matrix, alpha 1, no beta, bias or activation, and an output");
  ONNXAMP_CHECK(!p.relu_mask || (p.batch == 1 && !has_epilogue && !with_grad && p.beta == 0 && d_dtype == p.dtype &&
                                 p.mask_row_bytes * 8 >= p.n && p.mask_row_bytes % 16 == 0),
                "a ReLU mask read takes one matrix, no beta, bias, activation or bias gradient, and 128-bit rows");
  ONNXAMP_CHECK(!p.relu_mask_out || (p.batch == 1 && p.act == LinalgActivation::kRelu && d_dtype == p.dtype),
                "a ReLU mask written takes one matrix and the ReLU");
  ONNXAMP_CHECK(
      !p.gelu_x || (p.batch == 1 && !has_epilogue && !with_grad && p.beta == 0 && d_dtype == p.dtype && !p.relu_mask),
      "a GELU gradient takes one matrix, no beta, bias, activation, bias gradient or ReLU mask");
  if (!IsFloatType(p.dtype)) {
    ONNXAMP_CHECK(!has_epilogue && !with_grad && d_dtype == p.dtype, "integer GEMMs take no bias or activation");
    IntegerGemmArgs g;
    g.batch = p.batch;
    g.m = p.m;
    g.n = p.n;
    g.k = p.k;
    g.trans_a = p.trans_a;
    g.trans_b = p.trans_b;
    g.a = p.a;
    g.b = p.b;
    g.d = p.d;
    g.lda = p.lda;
    g.ldb = p.ldb;
    g.ldd = p.n;
    g.stride_a = p.stride_a;
    g.stride_b = p.stride_b;
    g.stride_d = p.m * p.n;
    g.alpha = static_cast<int64_t>(p.alpha);
    g.beta = static_cast<int64_t>(p.beta);
    return LaunchIntegerGemm(p.dtype, g, cuda.stream(), what);
  }
  const size_t es = static_cast<size_t>(DTypeBits(p.dtype) / 8);
  const size_t es_d = static_cast<size_t>(DTypeBits(d_dtype) / 8);
  if (p.k == 0) {
    // An empty sum: D = beta * C (or 0), then the bias and activation; a bias gradient of zeros.
    if (p.beta == 0) {
      ONNXAMP_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(p.d, 0, static_cast<size_t>(p.batch * p.m * p.n) * es_d, cuda.stream()), what);
    }
    if (with_grad) {
      const int64_t len = p.bias_grad == GemmBiasGrad::kA ? p.m : p.n;
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p.bias_grad_out, 0, static_cast<size_t>(len) * es_d, cuda.stream()),
                                   what);
    }
    if (p.beta != 0 || has_epilogue) {
      return LaunchBiasActivation(p.dtype, p.d, p.batch * p.m, p.n, p.beta == 0 ? 1.0 : p.beta, p.bias, p.act,
                                  cuda.stream(), what, p.relu_mask_out, p.mask_row_bytes);
    }
    if (p.gelu_x != nullptr) {  // zeros times the derivative (NaN where it is NaN, as on the CPU)
      return ew::LaunchActivationGrad(ew::ActivationGradOp::kGeluTanh, p.dtype, p.d, p.gelu_x, p.d, p.m * p.n, 0.0f,
                                      cuda.stream(), what);
    }
    return Status::Ok();  // a masked product of zeros is zeros
  }

  const int64_t ies = static_cast<int64_t>(es), ies_d = static_cast<int64_t>(es_d);
  const bool batched = p.batch > 1;
  const Key key{static_cast<int>(p.dtype),
                p.batch,
                p.m,
                p.n,
                p.k,
                p.trans_a,
                p.trans_b,
                p.lda,
                p.ldb,
                p.stride_a,
                p.stride_b,
                p.beta != 0,
                p.bias != nullptr,
                static_cast<int>(p.act),
                AlignmentOf(p.a, {p.lda * ies, batched ? p.stride_a * ies : 0}),
                AlignmentOf(p.b, {p.ldb * ies, batched ? p.stride_b * ies : 0}),
                AlignmentOf(p.d, {p.n * ies_d, batched ? p.m * p.n * ies_d : 0}),
                p.bias      ? AlignmentOf(p.bias, {})
                : with_grad ? AlignmentOf(p.bias_grad_out, {})
                            : 0u,
                p.dtype == DType::kFloat32 && tf32_,
                static_cast<int>(d_dtype),
                static_cast<int>(p.bias_grad),
                p.relu_mask ? AlignmentOf(p.relu_mask, {p.mask_row_bytes}) : 0u,
                p.relu_mask ? p.mask_row_bytes : 0,
                p.gelu_x ? AlignmentOf(p.gelu_x, {p.n * ies}) : 0u};

  std::unique_lock<std::mutex> lock(mu_);  // the plan's descriptor carries this call's bias pointer
  ONNXAMP_ASSIGN_OR_RETURN(Plan * plan, GetPlan(cuda, p, key, what));
  if (plan->per_matrix) {
    lock.unlock();
    GemmProblem one = p;
    one.batch = 1;
    one.stride_a = one.stride_b = 0;
    for (int64_t i = 0; i < p.batch; ++i) {
      one.a = static_cast<const std::byte*>(p.a) + i * p.stride_a * ies;
      one.b = static_cast<const std::byte*>(p.b) + i * p.stride_b * ies;
      one.d = static_cast<std::byte*>(p.d) + i * p.m * p.n * ies_d;
      ONNXAMP_RETURN_IF_ERROR(Run(cuda, one, what));
    }
    return Status::Ok();
  }
  if (plan->lt_epilogue && (p.bias != nullptr || with_grad)) {
    const void* bias = with_grad ? p.bias_grad_out : p.bias;
    ONNXAMP_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), what);
  }
  if (plan->lt_epilogue && (p.relu_mask != nullptr || p.gelu_x != nullptr)) {
    const void* aux = p.relu_mask != nullptr ? static_cast<const void*>(p.relu_mask) : p.gelu_x;
    ONNXAMP_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)), what);
  }
  void* workspace = nullptr;
  if (plan->workspace_bytes > 0) {
    ONNXAMP_ASSIGN_OR_RETURN(workspace, cuda.Workspace(plan->workspace_bytes));
  }
  const float alpha_f = static_cast<float>(p.alpha), beta_f = static_cast<float>(p.beta);
  const double alpha_d = p.alpha, beta_d = p.beta;
  const bool f64 = p.dtype == DType::kFloat64;
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : static_cast<const void*>(&alpha_f);
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : static_cast<const void*>(&beta_f);
  ONNXAMP_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmul(cuda.cublaslt(), plan->desc, alpha, p.b, plan->lt_a, p.a, plan->lt_b, beta, p.d, plan->lt_d, p.d,
                     plan->lt_d, &plan->algo, workspace, plan->workspace_bytes, cuda.stream()),
      what);
  // What cuBLASLt's epilogue did not apply: the bias and activation, or the ReLU after its bias (EpilogueFor).
  if (has_epilogue && (!plan->lt_epilogue || p.act == LinalgActivation::kRelu)) {
    return LaunchBiasActivation(p.dtype, p.d, p.batch * p.m, p.n, 1.0, plan->lt_epilogue ? nullptr : p.bias, p.act,
                                cuda.stream(), what, p.relu_mask_out, p.mask_row_bytes);
  }
  if (p.relu_mask != nullptr && !plan->lt_epilogue) {
    return LaunchApplyReluMask(p.dtype, p.d, p.m, p.n, p.relu_mask, p.mask_row_bytes, cuda.stream(), what);
  }
  if (p.gelu_x != nullptr && !plan->lt_epilogue) {
    return ew::LaunchActivationGrad(ew::ActivationGradOp::kGeluTanh, p.dtype, p.d, p.gelu_x, p.d, p.m * p.n, 0.0f,
                                    cuda.stream(), what);
  }
  if (!plan->lt_epilogue && with_grad) {
    // The operand as stored: op(A) [m, k] is A [m, k] (sum each row) or, transposed, A [k, m] (sum each column);
    // op(B) [k, n] is B [k, n] (columns) or B [n, k] (rows).
    if (p.bias_grad == GemmBiasGrad::kA) {
      return LaunchMatrixSum(p.dtype, d_dtype, p.a, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, p.lda, p.trans_a,
                             p.bias_grad_out, cuda.stream(), what);
    }
    return LaunchMatrixSum(p.dtype, d_dtype, p.b, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, p.ldb, !p.trans_b,
                           p.bias_grad_out, cuda.stream(), what);
  }
  return Status::Ok();
}

}  // namespace onnxamp::cuda
