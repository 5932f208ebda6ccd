// Einsum on CUDA, with the CPU kernel's equation parser and planner (runtime/ops/einsum/einsum_equation.h) and its
// messages. Two float operands whose labels each fall in one of batch (both inputs and the output), m (first input
// and output), n (second input and output) or k (both inputs, summed) run as one batched cuBLASLt GEMM
// [batch, m, k] x [batch, k, n], with a permuting copy of an operand only when no transpose flag covers its order,
// and of the result only when the output order is not [batch, m, n]. Everything else (one or three and more inputs,
// repeated labels, size-1 broadcasting, labels summed within one operand, integers) runs on the general kernel,
// which sums the product of the inputs over the summed labels for every output element.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/linalg/cublaslt_gemm.h"
#include "runtime/cuda/ops/linalg/linalg_device.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/ops/einsum/einsum_equation.h"

namespace onnxamp::cuda {
namespace {

using Labels = std::vector<int>;

bool Contains(const Labels& ls, int l) { return std::find(ls.begin(), ls.end(), l) != ls.end(); }

bool IsFloatType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
}

// Per input and label: the element stride that label advances (summed over repeats; 0 where the input lacks the
// label or broadcasts it from size 1), as the CPU reference computes it.
std::vector<std::vector<int64_t>> LabelStrides(const ops::EinsumPlan& plan,
                                               const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<std::vector<int64_t>> strides(shapes.size(), std::vector<int64_t>(plan.num_labels, 0));
  for (size_t i = 0; i < shapes.size(); ++i) {
    int64_t stride = 1;
    for (size_t d = shapes[i].size(); d-- > 0;) {
      const int l = plan.in_labels[i][d];
      if (shapes[i][d] != 1 || plan.size[l] == 1) strides[i][l] += stride;
      stride *= shapes[i][d];
    }
  }
  return strides;
}

// The general kernel's arguments: out_labels index the output, sum_labels are summed, strides[i][label] per input.
StatusOr<EinsumArgs> MakeArgs(const std::vector<const void*>& inputs, const std::vector<std::vector<int64_t>>& strides,
                              const std::vector<int64_t>& label_size, const Labels& out_labels,
                              const Labels& sum_labels) {
  if (inputs.size() > static_cast<size_t>(kEinsumMaxInputs)) {
    return Unimplemented("Einsum on cuda takes at most ", kEinsumMaxInputs, " inputs, got ", inputs.size());
  }
  if (out_labels.size() > static_cast<size_t>(kEinsumMaxLabels) ||
      sum_labels.size() > static_cast<size_t>(kEinsumMaxLabels)) {
    return Unimplemented("Einsum on cuda takes at most ", kEinsumMaxLabels, " output and ", kEinsumMaxLabels,
                         " summed labels, got ", out_labels.size(), " and ", sum_labels.size());
  }
  EinsumArgs e;
  e.num_inputs = static_cast<int>(inputs.size());
  e.out_rank = static_cast<int>(out_labels.size());
  e.sum_rank = static_cast<int>(sum_labels.size());
  for (size_t i = 0; i < inputs.size(); ++i) e.inputs[i] = inputs[i];
  for (size_t d = 0; d < out_labels.size(); ++d) {
    e.out_dims[d] = label_size[static_cast<size_t>(out_labels[d])];
    e.out_count *= e.out_dims[d];
    for (size_t i = 0; i < inputs.size(); ++i) e.out_strides[i][d] = strides[i][static_cast<size_t>(out_labels[d])];
  }
  for (size_t d = 0; d < sum_labels.size(); ++d) {
    e.sum_dims[d] = label_size[static_cast<size_t>(sum_labels[d])];
    e.sum_count *= e.sum_dims[d];
    for (size_t i = 0; i < inputs.size(); ++i) e.sum_strides[i][d] = strides[i][static_cast<size_t>(sum_labels[d])];
  }
  return e;
}

// Copies a dense operand with (unique) labels `from` into dense `to` order.
Status Permute(DType dtype, const void* src, const Labels& from, const std::vector<int64_t>& label_size,
               const Labels& to, void* dst, cudaStream_t stream) {
  std::vector<std::vector<int64_t>> strides(1, std::vector<int64_t>(label_size.size(), 0));
  int64_t s = 1;
  for (size_t d = from.size(); d-- > 0;) {
    strides[0][static_cast<size_t>(from[d])] = s;
    s *= label_size[static_cast<size_t>(from[d])];
  }
  ONNXAMP_ASSIGN_OR_RETURN(const EinsumArgs e, MakeArgs({src}, strides, label_size, to, {}));
  return LaunchEinsum(dtype, e, dst, stream, "Einsum");
}

Labels Concat(Labels x, const Labels& y, const Labels& z) {
  x.insert(x.end(), y.begin(), y.end());
  x.insert(x.end(), z.begin(), z.end());
  return x;
}

// The two-operand contraction as [batch, m, k] x [batch, k, n], or false when the equation does not have that form.
struct Contraction {
  Labels batch, m, n, k;
};

bool AsContraction(const ops::EinsumPlan& plan, Contraction* c) {
  if (plan.in_labels.size() != 2 || plan.broadcasts) return false;
  const Labels& a = plan.in_labels[0];
  const Labels& b = plan.in_labels[1];
  for (const Labels* ls : {&a, &b}) {
    Labels sorted = *ls;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return false;  // a diagonal
  }
  for (int l : plan.out_labels) {
    const bool in_a = Contains(a, l), in_b = Contains(b, l);
    (in_a && in_b ? c->batch : in_a ? c->m : c->n).push_back(l);
  }
  for (int l : a) {
    if (Contains(plan.out_labels, l)) continue;
    if (!Contains(b, l)) return false;  // summed within A alone
    c->k.push_back(l);
  }
  for (int l : b) {
    if (!Contains(plan.out_labels, l) && !Contains(a, l)) return false;  // summed within B alone
  }
  return true;
}

int64_t Product(const Labels& ls, const std::vector<int64_t>& size) {
  int64_t p = 1;
  for (int l : ls) p *= size[static_cast<size_t>(l)];
  return p;
}

class EinsumCuda : public exec::OpKernel {
 public:
  EinsumCuda(const exec::KernelInfo& info, Status* st) : gemm_(info.options.cuda_tf32) {
    auto eq = ops::EinsumEquationOf(info.node);
    if (!eq.ok()) {
      *st = eq.status();
      return;
    }
    equation_ = std::move(eq).value();
    // Beyond the general kernel's fixed argument sizes the node is left to the CPU kernel (the executor places a node
    // whose device factory says Unimplemented on the CPU); ellipsis dims can still exceed them at run time.
    std::vector<int> count(52, 0);
    for (const ops::EinsumTerm& term : equation_.inputs) {
      for (int l : term.letters) {
        if (l >= 0 && l < 52) ++count[static_cast<size_t>(l)];
      }
    }
    std::vector<bool> in_output(52, false);
    for (size_t l = 0; l < 52; ++l) in_output[l] = !equation_.explicit_output && count[l] == 1;
    if (equation_.explicit_output) {
      for (int l : equation_.output.letters) {
        if (l >= 0 && l < 52) in_output[static_cast<size_t>(l)] = true;
      }
    }
    int out_labels = 0, sum_labels = 0;
    for (size_t l = 0; l < 52; ++l) {
      out_labels += in_output[l] ? 1 : 0;
      sum_labels += !in_output[l] && count[l] > 0 ? 1 : 0;
    }
    if (equation_.inputs.size() > static_cast<size_t>(kEinsumMaxInputs) || out_labels > kEinsumMaxLabels ||
        sum_labels > kEinsumMaxLabels) {
      *st = Unimplemented("Einsum on cuda takes at most ", kEinsumMaxInputs, " inputs and ", kEinsumMaxLabels,
                          " output and summed labels each, got ", equation_.inputs.size(), ", ", out_labels, " and ",
                          sum_labels);
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    DType dtype = DType::kFloat32;
    std::vector<std::vector<int64_t>> shapes;
    ONNXAMP_RETURN_IF_ERROR(ops::EinsumInputs(ctx, &dtype, &shapes));
    std::vector<const void*> data;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) data.push_back(ctx.input(i)->data());
    ONNXAMP_ASSIGN_OR_RETURN(const ops::EinsumPlan plan, ops::PlanEinsum(equation_, shapes));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, dtype, plan.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    CudaContext& cuda = GetCudaContext(ctx);
    Contraction c;
    if (IsFloatType(dtype) && AsContraction(plan, &c)) return RunContraction(ctx, cuda, plan, c, data, dtype, *y);
    // The general kernel: summed labels in ascending id order, as the CPU reference.
    Labels sum_labels;
    for (int l = 0; l < plan.num_labels; ++l) {
      const bool used =
          std::any_of(plan.in_labels.begin(), plan.in_labels.end(), [&](const Labels& ls) { return Contains(ls, l); });
      if (used && !Contains(plan.out_labels, l)) sum_labels.push_back(l);
    }
    ONNXAMP_ASSIGN_OR_RETURN(const EinsumArgs e,
                             MakeArgs(data, LabelStrides(plan, shapes), plan.size, plan.out_labels, sum_labels));
    return LaunchEinsum(dtype, e, y->mutable_data(), cuda.stream(), "Einsum");
  }

 private:
  // A device buffer of `count` elements for a permuted operand (kept alive by `keep` until Compute returns; work on
  // the stream is ordered, so the cache may hand it to the next kernel after that).
  static StatusOr<void*> Temp(exec::KernelContext& ctx, DType dtype, int64_t count,
                              std::vector<std::shared_ptr<ir::Buffer>>& keep) {
    ONNXAMP_ASSIGN_OR_RETURN(auto buffer,
                             ctx.device_context()->Allocate(static_cast<size_t>(count * (DTypeBits(dtype) / 8))));
    keep.push_back(buffer);
    return static_cast<void*>(buffer->data());
  }

  Status RunContraction(exec::KernelContext& ctx, CudaContext& cuda, const ops::EinsumPlan& plan, const Contraction& c,
                        const std::vector<const void*>& data, DType dtype, ir::Tensor& y) const {
    const std::vector<int64_t>& size = plan.size;
    const int64_t nb = Product(c.batch, size), nm = Product(c.m, size), nn = Product(c.n, size),
                  nk = Product(c.k, size);
    std::vector<std::shared_ptr<ir::Buffer>> keep;
    GemmProblem p;
    p.dtype = dtype;
    p.batch = nb;
    p.m = nm;
    p.n = nn;
    p.k = nk;
    // Operands as they lie when their order is [batch, m, k] / [batch, k, n] or the transposed one; else permuted.
    const Labels& a = plan.in_labels[0];
    const Labels& b = plan.in_labels[1];
    p.a = data[0];
    p.b = data[1];
    if (a == Concat(c.batch, c.k, c.m)) {
      p.trans_a = true;
    } else if (a != Concat(c.batch, c.m, c.k) && nb * nm * nk > 0) {
      ONNXAMP_ASSIGN_OR_RETURN(void* t, Temp(ctx, dtype, nb * nm * nk, keep));
      ONNXAMP_RETURN_IF_ERROR(Permute(dtype, data[0], a, size, Concat(c.batch, c.m, c.k), t, cuda.stream()));
      p.a = t;
    }
    if (b == Concat(c.batch, c.n, c.k)) {
      p.trans_b = true;
    } else if (b != Concat(c.batch, c.k, c.n) && nb * nk * nn > 0) {
      ONNXAMP_ASSIGN_OR_RETURN(void* t, Temp(ctx, dtype, nb * nk * nn, keep));
      ONNXAMP_RETURN_IF_ERROR(Permute(dtype, data[1], b, size, Concat(c.batch, c.k, c.n), t, cuda.stream()));
      p.b = t;
    }
    p.lda = p.trans_a ? nm : nk;
    p.ldb = p.trans_b ? nk : nn;
    p.stride_a = nm * nk;
    p.stride_b = nk * nn;
    const Labels product_order = Concat(c.batch, c.m, c.n);
    const bool direct = product_order == plan.out_labels;
    if (direct) {
      p.d = y.mutable_data();
    } else {
      ONNXAMP_ASSIGN_OR_RETURN(p.d, Temp(ctx, dtype, nb * nm * nn, keep));
    }
    ONNXAMP_RETURN_IF_ERROR(gemm_.Run(cuda, p, "Einsum"));
    if (direct) return Status::Ok();
    return Permute(dtype, p.d, product_order, size, plan.out_labels, y.mutable_data(), cuda.stream());
  }

  ops::EinsumEquation equation_;
  CublasLtGemm gemm_;
};

}  // namespace

void RegisterCudaEinsumKernels(exec::KernelRegistry& r) { RegisterLikeCpu(r, "Einsum", &exec::MakeKernel<EinsumCuda>); }

}  // namespace onnxamp::cuda
