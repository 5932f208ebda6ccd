// Einsum (CPU): general Einstein summation over any number of inputs, with implicit or explicit output, "..."
// ellipsis (broadcast), repeated labels (diagonals) and size-1 broadcasting.
//
// Two implementations of the same contract: the reference loop visits every combination of label values once
// (obviously right, slow), and the fast path (float types, no size-1 broadcasting) rewrites the equation as a
// chain of batched matrix products on the GEMM core: take diagonals, sum out labels used by one operand only,
// contract operands left to right as [batch, m, k] x [batch, k, n] (transposing operands only when no GEMM
// transpose flag fits), then permute to the output order. fp16/bf16 compute in float and round once on store.
#include <algorithm>
#include <numeric>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_util.h"
#include "runtime/ops/einsum/einsum_equation.h"

namespace onnxamp::ops {
namespace {

// Per input and label: the element stride that label advances (summed over repeats; 0 where the input lacks the
// label or broadcasts it from size 1).
std::vector<std::vector<int64_t>> LabelStrides(const EinsumPlan& plan,
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

// The reference: for every output position, sum over every value of the labels not in the output.
template <typename T>
void EinsumReference(const EinsumPlan& plan, const std::vector<std::vector<int64_t>>& shapes,
                     const std::vector<const T*>& inputs, T* y) {
  const auto strides = LabelStrides(plan, shapes);
  std::vector<int> sum_labels;
  for (int l = 0; l < plan.num_labels; ++l) {
    const bool used = std::any_of(plan.in_labels.begin(), plan.in_labels.end(),
                                  [&](const std::vector<int>& ls) { return std::count(ls.begin(), ls.end(), l) > 0; });
    if (used && std::count(plan.out_labels.begin(), plan.out_labels.end(), l) == 0) sum_labels.push_back(l);
  }
  std::vector<int> all = plan.out_labels;
  all.insert(all.end(), sum_labels.begin(), sum_labels.end());
  int64_t out_count = 1, sum_count = 1;
  for (int l : plan.out_labels) out_count *= plan.size[l];
  for (int l : sum_labels) sum_count *= plan.size[l];
  std::vector<int64_t> value(all.size(), 0);
  for (int64_t o = 0; o < out_count; ++o) {
    AccumType<T> sum = 0;
    for (int64_t s = 0; s < sum_count; ++s) {
      // The label values of (o, s), row-major over the output labels and then the summed labels.
      int64_t rest = s;
      for (size_t j = all.size(); j-- > plan.out_labels.size();) {
        value[j] = rest % plan.size[all[j]];
        rest /= plan.size[all[j]];
      }
      rest = o;
      for (size_t j = plan.out_labels.size(); j-- > 0;) {
        value[j] = rest % plan.size[all[j]];
        rest /= plan.size[all[j]];
      }
      AccumType<T> product = 1;
      for (size_t i = 0; i < inputs.size(); ++i) {
        int64_t offset = 0;
        for (size_t j = 0; j < all.size(); ++j) offset += value[j] * strides[i][all[j]];
        product *= LoadAccum(inputs[i][offset]);
      }
      sum += product;
    }
    y[o] = StoreAccum<T>(sum);
  }
}

// ---- The fast path -----------------------------------------------------------------------------------------

// An operand of the contraction chain: labels (unique), their sizes, and dense row-major data.
template <typename F>
struct Operand {
  std::vector<int> labels;
  std::vector<int64_t> dims;
  const F* data = nullptr;
  std::vector<F> storage;  // owns data unless it points at an input

  int64_t count() const { return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>()); }
  int Find(int label) const {
    auto it = std::find(labels.begin(), labels.end(), label);
    return it == labels.end() ? -1 : static_cast<int>(it - labels.begin());
  }
};

// dst[i over new_labels] = op[i over op.labels] (a permuting copy); new_labels is a permutation of op.labels.
template <typename F>
Operand<F> Permute(const Operand<F>& op, const std::vector<int>& new_labels) {
  if (new_labels == op.labels) {
    Operand<F> same;
    same.labels = op.labels;
    same.dims = op.dims;
    same.data = op.data;
    return same;
  }
  const size_t rank = op.labels.size();
  std::vector<int64_t> src_stride(rank), stride_by_new(rank), dims(rank);
  int64_t s = 1;
  for (size_t d = rank; d-- > 0;) {
    src_stride[d] = s;
    s *= op.dims[d];
  }
  for (size_t d = 0; d < rank; ++d) {
    const int from = op.Find(new_labels[d]);
    dims[d] = op.dims[from];
    stride_by_new[d] = src_stride[from];
  }
  Operand<F> out;
  out.labels = new_labels;
  out.dims = dims;
  out.storage.resize(static_cast<size_t>(op.count()));
  std::vector<int64_t> index(rank, 0);
  int64_t src = 0;
  for (F& v : out.storage) {
    v = op.data[src];
    for (size_t d = rank; d-- > 0;) {
      src += stride_by_new[d];
      if (++index[d] < dims[d]) break;
      src -= stride_by_new[d] * dims[d];
      index[d] = 0;
    }
  }
  out.data = out.storage.data();
  return out;
}

// Sums out the labels of `op` that are not in `keep`.
template <typename F>
Operand<F> SumOut(Operand<F> op, const std::vector<int>& keep) {
  std::vector<int> kept, dropped;
  for (int l : op.labels) (std::count(keep.begin(), keep.end(), l) ? kept : dropped).push_back(l);
  if (dropped.empty()) return op;
  std::vector<int> order = kept;
  order.insert(order.end(), dropped.begin(), dropped.end());
  const Operand<F> p = Permute(op, order);
  Operand<F> out;
  out.labels = kept;
  for (int l : kept) out.dims.push_back(op.dims[op.Find(l)]);
  const int64_t rows = out.count(), inner = rows == 0 ? 0 : p.count() / rows;
  out.storage.assign(static_cast<size_t>(rows), F(0));
  for (int64_t r = 0; r < rows; ++r) {
    F sum = 0;
    for (int64_t j = 0; j < inner; ++j) sum += p.data[r * inner + j];
    out.storage[r] = sum;
  }
  out.data = out.storage.data();
  return out;
}

// A batched product of a and b: labels in both and in `keep` are batch dims, in both and not kept are summed,
// the others stay. The result's labels are [batch, m (a's own), n (b's own)].
template <typename F>
StatusOr<Operand<F>> Contract(const GemmRunner& gemm, exec::ThreadPool& threads, const Operand<F>& a,
                              const Operand<F>& b, const std::vector<int>& keep) {
  std::vector<int> batch, m, k, n;
  int64_t nb = 1, nm = 1, nk = 1, nn = 1;
  for (size_t d = 0; d < a.labels.size(); ++d) {
    const int l = a.labels[d];
    const bool in_b = b.Find(l) >= 0, kept = std::count(keep.begin(), keep.end(), l) > 0;
    if (in_b && kept) {
      batch.push_back(l);
      nb *= a.dims[d];
    } else if (in_b) {
      k.push_back(l);
      nk *= a.dims[d];
    } else {
      m.push_back(l);
      nm *= a.dims[d];
    }
  }
  for (size_t d = 0; d < b.labels.size(); ++d) {
    if (a.Find(b.labels[d]) < 0) {
      n.push_back(b.labels[d]);
      nn *= b.dims[d];
    }
  }
  auto concat = [](std::vector<int> x, const std::vector<int>& y, const std::vector<int>& z) {
    x.insert(x.end(), y.begin(), y.end());
    x.insert(x.end(), z.begin(), z.end());
    return x;
  };
  // Use the operands as they lie when a transpose flag covers their order.
  GemmArgs<F> g;
  Operand<F> pa, pb;
  if (a.labels == concat(batch, k, m)) {
    g.trans_a = true;
    pa = Permute(a, a.labels);
  } else {
    pa = Permute(a, concat(batch, m, k));
  }
  if (b.labels == concat(batch, n, k)) {
    g.trans_b = true;
    pb = Permute(b, b.labels);
  } else {
    pb = Permute(b, concat(batch, k, n));
  }
  Operand<F> out;
  out.labels = concat(batch, m, n);
  for (int l : out.labels) out.dims.push_back(a.Find(l) >= 0 ? a.dims[a.Find(l)] : b.dims[b.Find(l)]);
  out.storage.resize(static_cast<size_t>(nb * nm * nn));
  out.data = out.storage.data();
  if (out.storage.empty()) return out;
  g.batch = nb;
  g.m = nm;
  g.n = nn;
  g.k = nk;
  g.a = pa.data;
  g.b = pb.data;
  g.c = out.storage.data();
  SetDenseLayout(g);
  if (nk == 0) {
    std::fill(out.storage.begin(), out.storage.end(), F(0));
    return out;
  }
  ONNXAMP_RETURN_IF_ERROR(gemm.Run(g, threads));
  return out;
}

// Takes the diagonal over repeated labels: one dim per distinct label, in first-appearance order.
template <typename F>
Operand<F> MakeOperand(const std::vector<int>& labels, const std::vector<int64_t>& shape, const F* data) {
  Operand<F> op;
  std::vector<int64_t> stride;
  int64_t s = 1;
  std::vector<int64_t> dim_stride(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    dim_stride[d] = s;
    s *= shape[d];
  }
  for (size_t d = 0; d < labels.size(); ++d) {
    const int at = op.Find(labels[d]);
    if (at >= 0) {
      stride[at] += dim_stride[d];
      continue;
    }
    op.labels.push_back(labels[d]);
    op.dims.push_back(shape[d]);
    stride.push_back(dim_stride[d]);
  }
  if (op.labels.size() == labels.size()) {
    op.data = data;
    return op;
  }
  op.storage.resize(static_cast<size_t>(op.count()));
  std::vector<int64_t> index(op.dims.size(), 0);
  int64_t src = 0;
  for (F& v : op.storage) {
    v = data[src];
    for (size_t d = op.dims.size(); d-- > 0;) {
      src += stride[d];
      if (++index[d] < op.dims[d]) break;
      src -= stride[d] * op.dims[d];
      index[d] = 0;
    }
  }
  op.data = op.storage.data();
  return op;
}

// The chain of contractions; writes the result in output order into y (float or double).
template <typename F>
Status EinsumFast(const GemmRunner& gemm, exec::ThreadPool& threads, const EinsumPlan& plan,
                  const std::vector<std::vector<int64_t>>& shapes, const std::vector<const F*>& inputs, F* y) {
  const size_t nops = inputs.size();
  // Labels still needed after operand i: those of later operands and the output.
  auto needed_after = [&](size_t i) {
    std::vector<int> keep = plan.out_labels;
    for (size_t j = i + 1; j < nops; ++j) keep.insert(keep.end(), plan.in_labels[j].begin(), plan.in_labels[j].end());
    return keep;
  };
  auto with = [](std::vector<int> keep, const std::vector<int>& more) {
    keep.insert(keep.end(), more.begin(), more.end());
    return keep;
  };
  Operand<F> acc = MakeOperand(plan.in_labels[0], shapes[0], inputs[0]);
  for (size_t i = 1; i < nops; ++i) {
    Operand<F> next = MakeOperand(plan.in_labels[i], shapes[i], inputs[i]);
    const std::vector<int> keep = needed_after(i);
    // Labels used by only one side and needed nowhere else are summed before the product.
    acc = SumOut(std::move(acc), with(keep, next.labels));
    next = SumOut(std::move(next), with(keep, acc.labels));
    ONNXAMP_ASSIGN_OR_RETURN(acc, Contract(gemm, threads, acc, next, keep));
  }
  acc = SumOut(std::move(acc), plan.out_labels);
  const Operand<F> out = Permute(acc, plan.out_labels);
  std::copy(out.data, out.data + out.count(), y);
  return Status::Ok();
}

class EinsumCpu : public exec::OpKernel {
 public:
  EinsumCpu(const exec::KernelInfo& info, Status* st) : gemm_(LinalgImplFor(info)) {
    auto eq = EinsumEquationOf(info.node);
    if (!eq.ok()) {
      *st = eq.status();
      return;
    }
    equation_ = std::move(eq).value();
  }

  Status Compute(exec::KernelContext& ctx) const override {
    DType dtype = DType::kFloat32;
    std::vector<std::vector<int64_t>> shapes;
    ONNXAMP_RETURN_IF_ERROR(EinsumInputs(ctx, &dtype, &shapes));
    ONNXAMP_ASSIGN_OR_RETURN(const EinsumPlan plan, PlanEinsum(equation_, shapes));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, dtype, plan.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    return DispatchNumeric(dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      std::vector<const T*> inputs;
      for (size_t i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(ctx.input(i)->values<T>().data());
      T* py = y->mutable_values<T>().data();
      if constexpr (kIsFloatLike<T>) {
        if (gemm_.impl() != LinalgImpl::kReference && !plan.broadcasts) {
          using F = ComputeType<T>;
          if constexpr (std::is_same_v<T, F>) {
            return EinsumFast<F>(gemm_, ctx.threads(), plan, shapes, inputs, py);
          } else {
            // fp16/bf16: convert to float, compute with FP32 accumulation, round once on store.
            std::vector<std::vector<float>> converted(inputs.size());
            std::vector<const float*> fin;
            for (size_t i = 0; i < inputs.size(); ++i) {
              const int64_t n = ctx.input(i)->num_elements();
              converted[i].resize(static_cast<size_t>(n));
              ConvertToFloat(inputs[i], converted[i].data(), n, ctx.threads());
              fin.push_back(converted[i].data());
            }
            std::vector<float> fy(static_cast<size_t>(y->num_elements()));
            const Status st = EinsumFast<float>(gemm_, ctx.threads(), plan, shapes, fin, fy.data());
            if (!st.ok()) return st;
            ConvertFromFloat(fy.data(), py, y->num_elements(), ctx.threads());
            return Status::Ok();
          }
        }
      }
      EinsumReference(plan, shapes, inputs, py);
      return Status::Ok();
    });
  }

 private:
  EinsumEquation equation_;
  GemmRunner gemm_;
};

}  // namespace

void RegisterEinsumKernels(exec::KernelRegistry& r) {
  // Einsum exists from opset 12 and has not changed since.
  r.Register({"Einsum",
              "",
              12,
              23,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8, DType::kInt16,
               DType::kInt32, DType::kInt64, DType::kUint8, DType::kUint16, DType::kUint32, DType::kUint64},
              0,
              &exec::MakeKernel<EinsumCpu>});
}

}  // namespace onnxamp::ops
