// com.onnxamp FusedMatMul on the CPU (fused_matmul.h). Two paths:
//  - the plain reference loop (LinalgImpl::kReference), which the fast path and the CUDA kernel are tested against:
//    every output element is accumulated in float (double for float64) in order k = 0..K-1, then scaled, the bias
//    added and the activation applied in that precision, and stored once in the output type;
//  - the GEMM core (every other LinalgImpl, as MatMul and Gemm use it): alpha * op(A) op(B) into the output (float,
//    double) or a float buffer (fp16/bf16, one rounding on store), then, while each band of rows is still in cache,
//    the bias and the activation in float (the vector functions of elementwise_math.h: the erf form of Gelu as
//    models write it, FastGeluErf) or double.
// A bias gradient is summed in order k = 0..K-1 in float (double) on both paths.
#include "runtime/ops/matmul/fused_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/elementwise_half.h"
#include "runtime/ops/common/elementwise_math.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_util.h"

namespace onnxamp::ops {

Status FusedMatMulAttrs::Init(const ir::Node& node) {
  alpha = node.GetFloat("alpha", 1.0f);
  int64_t ta = 0, tb = 0;
  ONNXAMP_RETURN_IF_ERROR(GetIntAttr(node, "transA", 0, &ta));
  ONNXAMP_RETURN_IF_ERROR(GetIntAttr(node, "transB", 0, &tb));
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1)) {
    return InvalidArgument("attributes 'transA' and 'transB' must be 0 or 1, got ", ta, " and ", tb);
  }
  trans_a = ta == 1;
  trans_b = tb == 1;
  const std::string act = node.GetString("activation", "");
  if (act == "Relu") {
    activation = FusedActivation::kRelu;
  } else if (act == "Gelu") {
    activation = FusedActivation::kGelu;
  } else if (act == "GeluTanh") {
    activation = FusedActivation::kGeluTanh;
  } else if (!act.empty()) {
    return InvalidArgument("attribute 'activation' must be empty, \"Relu\", \"Gelu\" or \"GeluTanh\", got \"", act,
                           "\"");
  }
  int64_t out = 0;
  ONNXAMP_RETURN_IF_ERROR(GetIntAttr(node, "output_type", 0, &out));
  output_type = static_cast<DType>(out);
  if (out != 0 && out != static_cast<int64_t>(DType::kFloat32) && out != static_cast<int64_t>(DType::kFloat16) &&
      out != static_cast<int64_t>(DType::kBFloat16) && out != static_cast<int64_t>(DType::kFloat64)) {
    return InvalidArgument("attribute 'output_type' must be a float type (1, 10, 11 or 16), got ", out);
  }
  const std::string grad = node.GetString("bias_grad", "");
  if (grad == "A") {
    bias_grad = FusedBiasGrad::kA;
  } else if (grad == "B") {
    bias_grad = FusedBiasGrad::kB;
  } else if (!grad.empty()) {
    return InvalidArgument("attribute 'bias_grad' must be empty, \"A\" or \"B\", got \"", grad, "\"");
  }
  if (bias_grad != FusedBiasGrad::kNone && (alpha != 1.0f || activation != FusedActivation::kNone)) {
    return InvalidArgument("attribute 'bias_grad' takes alpha 1 and no activation, got alpha ", alpha,
                           " and activation \"", act, "\"");
  }
  int64_t mask = 0;
  ONNXAMP_RETURN_IF_ERROR(GetIntAttr(node, "relu_mask", 0, &mask));
  if (mask != 0 && mask != 1) return InvalidArgument("attribute 'relu_mask' must be 0 or 1, got ", mask);
  relu_mask = mask == 1;
  if (relu_mask && (activation != FusedActivation::kRelu || bias_grad != FusedBiasGrad::kNone)) {
    return InvalidArgument("attribute 'relu_mask' takes activation \"Relu\" and no bias_grad, got activation \"", act,
                           "\"");
  }
  const std::string act_grad = node.GetString("activation_grad", "");
  if (act_grad == "Relu") {
    relu_grad = true;
  } else if (act_grad == "GeluTanh") {
    gelu_grad = true;
  } else if (!act_grad.empty()) {
    return InvalidArgument("attribute 'activation_grad' must be empty, \"Relu\" or \"GeluTanh\", got \"", act_grad,
                           "\"");
  }
  if ((relu_grad || gelu_grad) && (activation != FusedActivation::kNone || bias_grad != FusedBiasGrad::kNone)) {
    return InvalidArgument("attribute 'activation_grad' takes no activation and no bias_grad, got activation \"", act,
                           "\"", (bias_grad != FusedBiasGrad::kNone ? " and a bias_grad" : ""));
  }
  if ((relu_grad || gelu_grad) && output_type != DType::kUndefined) {
    return InvalidArgument("attribute 'activation_grad' takes the inputs' type for Y, got output_type ",
                           static_cast<int>(output_type));
  }
  return Status::Ok();
}

StatusOr<DType> FusedMatMulAttrs::OutputType(DType t, bool has_bias) const {
  if (output_type == DType::kUndefined || output_type == t) return t;
  if (output_type != DType::kFloat32 || (t != DType::kFloat16 && t != DType::kBFloat16)) {
    return InvalidArgument("attribute 'output_type' is ", DTypeName(output_type), " for inputs of type ", DTypeName(t),
                           ": expected ", DTypeName(t), " or float for float16/bfloat16 inputs");
  }
  if (has_bias || activation != FusedActivation::kNone) {
    return InvalidArgument("a float output of ", DTypeName(t), " inputs takes no bias and no activation");
  }
  return DType::kFloat32;
}

Status FusedMatMulAttrs::CheckOperands(const ir::Tensor& a, const ir::Tensor& b, const ir::Tensor* bias,
                                       int64_t n) const {
  if (bias) {
    if (bias->dtype() != a.dtype()) {
      return InvalidArgument("input bias has element type ", DTypeName(bias->dtype()), ", expected ",
                             DTypeName(a.dtype()), " (the type of A)");
    }
    // A row vector of N: [N], [1, N], [1, 1, N]...
    bool row = bias->rank() >= 1 && bias->dims().back() == n;
    for (size_t d = 0; row && d + 1 < bias->dims().size(); ++d) row = bias->dims()[d] == 1;
    if (!row || b.rank() < 2) {
      return InvalidArgument("input bias ", ShapeToString(bias->dims()), " must be a row vector of N = ", n,
                             " values (B ", ShapeToString(b.dims()), ")");
    }
  }
  if (bias_grad != FusedBiasGrad::kNone && (a.rank() != 2 || b.rank() != 2 || bias)) {
    return InvalidArgument("attribute 'bias_grad' needs 2-D A and B and no bias, got A ", ShapeToString(a.dims()),
                           " and B ", ShapeToString(b.dims()), (bias ? " with a bias" : ""));
  }
  if ((relu_mask || relu_grad || gelu_grad) && b.rank() != 2) {
    return InvalidArgument(relu_mask ? "attribute 'relu_mask'" : "attribute 'activation_grad'",
                           " needs a 2-D B, got B ", ShapeToString(b.dims()));
  }
  if ((relu_grad || gelu_grad) && bias) return InvalidArgument("attribute 'activation_grad' takes no bias");
  return Status::Ok();
}

std::vector<int64_t> ReluMaskDims(const std::vector<int64_t>& y_dims) {
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < y_dims.size(); ++d) rows *= y_dims[d];
  return {rows, ReluMaskRowBytes(y_dims.empty() ? 1 : y_dims.back())};
}

Status CheckGeluInput(const ir::Tensor* x, DType t, const std::vector<int64_t>& y_dims) {
  if (!x) return InvalidArgument("input 3 (the GELU's input) is required with activation_grad \"GeluTanh\"");
  if (x->dtype() != t || x->dims() != y_dims) {
    return InvalidArgument("input 3 (the GELU's input) is ", DTypeName(x->dtype()), " ", ShapeToString(x->dims()),
                           ", expected ", DTypeName(t), " ", ShapeToString(y_dims), " (Y's)");
  }
  return Status::Ok();
}

Status CheckReluMaskInput(const ir::Tensor* mask, const std::vector<int64_t>& y_dims) {
  if (!mask) return InvalidArgument("input 3 (the ReLU mask) is required with activation_grad \"Relu\"");
  const std::vector<int64_t> want = ReluMaskDims(y_dims);
  if (mask->dtype() != DType::kUint8 || mask->dims() != want) {
    return InvalidArgument("input 3 (the ReLU mask) is ", DTypeName(mask->dtype()), " ", ShapeToString(mask->dims()),
                           ", expected uint8 ", ShapeToString(want), " for Y ", ShapeToString(y_dims));
  }
  return Status::Ok();
}

namespace {

template <typename C>
C Activate(C x, FusedActivation act) {
  switch (act) {
    case FusedActivation::kRelu:
      return x < C(0) ? C(0) : x;  // NaN stays NaN, as Relu keeps it
    case FusedActivation::kGelu:
      return C(0.5) * x * (C(1) + std::erf(x / std::sqrt(C(2))));
    case FusedActivation::kGeluTanh: {
      const C c = std::sqrt(C(2) / C(3.14159265358979323846));
      return C(0.5) * x * (C(1) + std::tanh(c * (x + C(0.044715) * x * x * x)));
    }
    case FusedActivation::kNone:
    default:
      return x;
  }
}

template <typename T, typename O>
void StoreAs(ComputeType<T> v, O* out) {
  if constexpr (std::is_same_v<O, T>) {
    *out = Store<T>(v);
  } else {
    *out = static_cast<O>(v);
  }
}

// The bias gradient of 2-D operands (checked by the caller): op(A) summed over its columns or op(B) over its rows,
// in order p = 0..K-1.
template <typename T, typename O>
void BiasGrad(const FusedMatMulAttrs& at, const MatMulShapes& g, const T* a, const T* b, O* grad) {
  using C = ComputeType<T>;
  const int64_t m = g.m, n = g.n, k = g.k;
  const bool of_a = at.bias_grad == FusedBiasGrad::kA;
  const int64_t len = of_a ? m : n;
  for (int64_t r = 0; r < len; ++r) {
    C sum = 0;
    for (int64_t p = 0; p < k; ++p) {
      sum +=
          of_a ? Load<T>(at.trans_a ? a[p * m + r] : a[r * k + p]) : Load<T>(at.trans_b ? b[r * k + p] : b[p * n + r]);
    }
    StoreAs<T>(sum, grad + r);
  }
}

// The ReLU masks (fused_matmul.h): bit j % 8 of byte [r, j / 8].
bool MaskBit(const uint8_t* mask, int64_t row_bytes, int64_t r, int64_t j) {
  return ((mask[r * row_bytes + j / 8] >> (j % 8)) & 1) != 0;
}

// Writes rows [r0, r1) of the mask of y (rows of n values of type T, stored): a bit where the value is > 0.
template <typename T>
void WriteReluMask(const T* y, int64_t n, int64_t r0, int64_t r1, uint8_t* mask) {
  const int64_t row_bytes = ReluMaskRowBytes(n);
  for (int64_t r = r0; r < r1; ++r) {
    uint8_t* row = mask + r * row_bytes;
    std::memset(row, 0, static_cast<size_t>(row_bytes));
    for (int64_t j = 0; j < n; ++j) {
      if (Load<T>(y[r * n + j]) > 0) row[j / 8] = static_cast<uint8_t>(row[j / 8] | (1u << (j % 8)));
    }
  }
}

// Zeroes the values of rows [r0, r1) of c (rows of n values) whose mask bit is clear.
template <typename C>
void ApplyReluMask(const uint8_t* mask, int64_t n, int64_t r0, int64_t r1, C* c) {
  const int64_t row_bytes = ReluMaskRowBytes(n);
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      if (!MaskBit(mask, row_bytes, r, j)) c[r * n + j] = C(0);
    }
  }
}

// Gelu'(x) of the tanh form as GeluGrad computes it: FastGeluTanhGrad in float, GeluTanhGradExact in double.
template <typename C>
C GeluTanhDerivative(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return FastGeluTanhGrad(x);
  } else {
    return GeluTanhGradExact(x);
  }
}

// Rows [r0, r1) of c (rows of n values, compute type C) times Gelu'(x) of the same rows of x (type T).
template <typename T, typename C>
void ApplyGeluTanhGrad(const T* x, int64_t n, int64_t r0, int64_t r1, C* c) {
  for (int64_t r = r0; r < r1; ++r) {
    C* row = c + r * n;
    const T* xr = x + r * n;
    if constexpr (std::is_same_v<C, float> && std::is_same_v<T, float>) {
      GeluTanhGradArray(row, xr, row, n);
    } else if constexpr (std::is_same_v<C, float>) {
      thread_local std::vector<float> xf;
      if (xf.size() < static_cast<size_t>(n)) xf.resize(static_cast<size_t>(n));
      LoadBlock(xr, xf.data(), n);
      GeluTanhGradArray(row, xf.data(), row, n);
    } else {
      for (int64_t j = 0; j < n; ++j) row[j] *= GeluTanhDerivative<C>(Load<T>(xr[j]));
    }
  }
}

// The reference loops for inputs of type T and output type O (T, or float for fp16/bf16 T). mask_in (relu_grad)
// zeroes the products whose bit is clear before they are stored; gelu_x (gelu_grad) multiplies them by Gelu'(x);
// mask_out (relu_mask) receives Y's mask.
template <typename T, typename O>
void Run(const FusedMatMulAttrs& at, const MatMulShapes& g, const T* a, const T* b, const T* bias, O* y, O* grad,
         const uint8_t* mask_in = nullptr, uint8_t* mask_out = nullptr, const T* gelu_x = nullptr) {
  using C = ComputeType<T>;
  const int64_t m = g.m, n = g.n, k = g.k;
  // op(A)[i, p] and op(B)[p, j] of one batch entry.
  auto a_at = [&](const T* ab, int64_t i, int64_t p) { return Load<T>(at.trans_a ? ab[p * m + i] : ab[i * k + p]); };
  auto b_at = [&](const T* bb, int64_t p, int64_t j) { return Load<T>(at.trans_b ? bb[j * k + p] : bb[p * n + j]); };
  for (int64_t bt = 0; bt < g.batch.count; ++bt) {
    const T* ab = a + g.batch.offsets_a[static_cast<size_t>(bt)] * m * k;
    const T* bb = b + g.batch.offsets_b[static_cast<size_t>(bt)] * k * n;
    O* yb = y + bt * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        C sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += a_at(ab, i, p) * b_at(bb, p, j);
        C v = static_cast<C>(at.alpha) * sum;
        if (bias) v += Load<T>(bias[j]);
        if (mask_in && !MaskBit(mask_in, ReluMaskRowBytes(n), bt * m + i, j)) v = C(0);
        if (gelu_x) v = v * GeluTanhDerivative<C>(Load<T>(gelu_x[(bt * m + i) * n + j]));
        StoreAs<T>(Activate(v, at.activation), yb + i * n + j);
      }
    }
  }
  if constexpr (std::is_same_v<O, T>) {
    if (mask_out) WriteReluMask(y, n, 0, g.batch.count * m, mask_out);
  }
  if (grad) BiasGrad(at, g, a, b, grad);
}

// Adds the bias (n values, or null) and applies the activation to rows [r0, r1) of c (rows of n values, in compute
// type C: float, or double).
template <typename C>
void Epilogue(const FusedMatMulAttrs& at, const C* bias, C* c, int64_t n, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    C* row = c + r * n;
    if (bias) {
      for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
    }
    if constexpr (std::is_same_v<C, float>) {
      switch (at.activation) {
        case FusedActivation::kRelu:
          ReluArray(row, row, n);  // NaN stays NaN
          break;
        case FusedActivation::kGelu:
          GeluErfArray(row, row, n);
          break;
        case FusedActivation::kGeluTanh:
          GeluTanhArray(row, row, n);
          break;
        case FusedActivation::kNone:
          break;
      }
    } else if (at.activation != FusedActivation::kNone) {
      for (int64_t j = 0; j < n; ++j) row[j] = Activate(row[j], at.activation);
    }
  }
}

// The fast path: the product on the GEMM core into y or a float buffer, then the epilogue and (fp16/bf16) the
// rounding to T, a band of rows at a time. O is Y's type: T, or float for fp16/bf16 T.
template <typename T, typename O>
Status RunFast(const GemmRunner& gemm, exec::ThreadPool& threads, const FusedMatMulAttrs& at, const MatMulShapes& s,
               const T* a, const T* b, const T* bias, O* y, O* grad, const uint8_t* mask_in, uint8_t* mask_out,
               const T* gelu_x) {
  using C = ComputeType<T>;  // float for fp16/bf16: what the GEMM core writes for them
  constexpr bool kRound = !std::is_same_v<O, C>;
  const int64_t rows = s.batch.count * s.m, count = rows * s.n;
  C* c = nullptr;
  if constexpr (kRound) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < static_cast<size_t>(count)) buffer.resize(static_cast<size_t>(count));
    c = buffer.data();
  } else {
    c = y;
  }
  if (s.k == 0) {
    std::fill(c, c + count, C(0));
  } else {
    GemmArgs<T, C> g;
    g.m = s.m;
    g.n = s.n;
    g.k = s.k;
    g.trans_a = at.trans_a;
    g.trans_b = at.trans_b;
    g.alpha = static_cast<C>(at.alpha);
    g.a = a;
    g.b = b;
    g.c = c;
    ONNXAMP_RETURN_IF_ERROR(RunBroadcastBatch(gemm, threads, g, s.batch));
  }
  const bool epilogue = bias || at.activation != FusedActivation::kNone;
  if (epilogue || kRound || mask_in || mask_out || gelu_x) {
    const C* bias_c = nullptr;
    thread_local std::vector<float> bias_buffer;
    if (bias) {
      if constexpr (std::is_same_v<T, C>) {
        bias_c = bias;
      } else {
        bias_buffer.resize(static_cast<size_t>(s.n));
        LoadBlock(bias, bias_buffer.data(), s.n);
        bias_c = bias_buffer.data();
      }
    }
    // Bands of about 16K values: the epilogue of a band runs while the band is in cache.
    threads.ParallelFor(rows, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(s.n, 1)),
                        [&](int64_t r0, int64_t r1) {
                          if (epilogue) Epilogue(at, bias_c, c, s.n, r0, r1);
                          if (mask_in) ApplyReluMask(mask_in, s.n, r0, r1, c);
                          if (gelu_x) ApplyGeluTanhGrad(gelu_x, s.n, r0, r1, c);
                          if constexpr (kRound) StoreBlock(c + r0 * s.n, y + r0 * s.n, (r1 - r0) * s.n);
                          if constexpr (std::is_same_v<O, T>) {
                            if (mask_out) WriteReluMask(y, s.n, r0, r1, mask_out);
                          }
                        });
  }
  if (grad) BiasGrad(at, s, a, b, grad);
  return Status::Ok();
}

class FusedMatMulCpu : public exec::OpKernel {
 public:
  FusedMatMulCpu(const exec::KernelInfo& info, Status* st) : gemm_(LinalgImplFor(info)) {
    *st = attrs_.Init(info.node);
    const auto& in = info.node.inputs();
    gemm_.SetConstantB(in.size() > 1 && in[1] && in[1]->initializer());
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* a = ctx.input(0);
    const ir::Tensor* b = ctx.input(1);
    const ir::Tensor* bias = ctx.input(2);
    if (!a || !b) return InvalidArgument("inputs A and B are required");
    if (a->dtype() != b->dtype()) {
      return InvalidArgument("input B has element type ", DTypeName(b->dtype()), ", expected ", DTypeName(a->dtype()),
                             " (the type of A)");
    }
    ONNXAMP_ASSIGN_OR_RETURN(const MatMulShapes g,
                             PlanMatMulShapes(a->dims(), b->dims(), attrs_.trans_a, attrs_.trans_b));
    ONNXAMP_ASSIGN_OR_RETURN(const DType out_type, attrs_.OutputType(a->dtype(), bias != nullptr));
    ONNXAMP_RETURN_IF_ERROR(attrs_.CheckOperands(*a, *b, bias, g.n));
    const uint8_t* mask_in = nullptr;
    if (attrs_.relu_grad) {
      const ir::Tensor* mask = ctx.input(3);
      ONNXAMP_RETURN_IF_ERROR(CheckReluMaskInput(mask, g.out_dims));
      mask_in = mask->values<uint8_t>().data();
    }
    const ir::Tensor* gelu_x = nullptr;
    if (attrs_.gelu_grad) {
      gelu_x = ctx.input(3);
      ONNXAMP_RETURN_IF_ERROR(CheckGeluInput(gelu_x, a->dtype(), g.out_dims));
    }
    const bool with_grad = attrs_.bias_grad != FusedBiasGrad::kNone;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, out_type, g.out_dims));
    ir::Tensor* grad = nullptr;
    if (with_grad && ctx.output_requested(1)) {
      const int64_t len = attrs_.bias_grad == FusedBiasGrad::kA ? g.m : g.n;
      ONNXAMP_ASSIGN_OR_RETURN(grad, ctx.AllocateOutput(1, out_type, {len}));
    }
    uint8_t* mask_out = nullptr;
    if (attrs_.relu_mask && ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * mask, ctx.AllocateOutput(1, DType::kUint8, ReluMaskDims(g.out_dims)));
      mask_out = mask->mutable_values<uint8_t>().data();
    }
    return DispatchFloat(a->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* pa = a->values<T>().data();
      const T* pb = b->values<T>().data();
      const T* pbias = bias ? bias->values<T>().data() : nullptr;
      const T* px = gelu_x ? gelu_x->values<T>().data() : nullptr;
      const bool fast = gemm_.impl() != LinalgImpl::kReference;
      if (out_type == a->dtype()) {
        T* py = y->mutable_values<T>().data();
        T* pgrad = grad ? grad->mutable_values<T>().data() : nullptr;
        if (fast) {
          return RunFast<T, T>(gemm_, ctx.threads(), attrs_, g, pa, pb, pbias, py, pgrad, mask_in, mask_out, px);
        }
        Run<T, T>(attrs_, g, pa, pb, pbias, py, pgrad, mask_in, mask_out, px);
      } else {
        float* py = y->mutable_values<float>().data();
        float* pgrad = grad ? grad->mutable_values<float>().data() : nullptr;
        if constexpr (!std::is_same_v<T, double>) {
          if (fast)
            return RunFast<T, float>(gemm_, ctx.threads(), attrs_, g, pa, pb, pbias, py, pgrad, nullptr, nullptr,
                                     nullptr);
        }
        Run<T, float>(attrs_, g, pa, pb, pbias, py, pgrad);
      }
      return Status::Ok();
    });
  }

 private:
  FusedMatMulAttrs attrs_;
  GemmRunner gemm_;
};

}  // namespace

StatusOr<MatMulShapes> PlanMatMulShapes(const std::vector<int64_t>& a_dims, const std::vector<int64_t>& b_dims,
                                        bool trans_a, bool trans_b) {
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
  MatMulShapes g;
  g.m = trans_a ? a[1] : a[a.size() - 2];
  g.k = trans_a ? a[0] : a.back();
  g.n = trans_b ? b[0] : b.back();
  const int64_t kb = trans_b ? b[1] : b[b.size() - 2];
  if (kb != g.k) {
    return InvalidArgument("input A ", ShapeToString(a_dims), " has ", g.k, " columns but input B ",
                           ShapeToString(b_dims), " has ", kb, " rows");
  }
  ONNXAMP_ASSIGN_OR_RETURN(g.batch, BroadcastBatch({a.begin(), a.end() - 2}, {b.begin(), b.end() - 2}));
  g.out_dims = g.batch.dims;
  if (a_dims.size() > 1) g.out_dims.push_back(g.m);
  if (b_dims.size() > 1) g.out_dims.push_back(g.n);
  return g;
}

void RegisterFusedMatMulKernels(exec::KernelRegistry& r) {
  r.Register({kFusedMatMulOp,
              kFusedMatMulDomain,
              1,
              1,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              0,
              &exec::MakeKernel<FusedMatMulCpu>});
}

}  // namespace onnxamp::ops
