// Transpose (CPU): permutes dims, any element type (strings included), opsets 1-25. The default perm reverses dims.
//
// The fast path first drops size-1 dims and merges input dims that stay adjacent in the output, so [B,S,H,D] with
// perm [0,2,3,1] becomes [B,S,H*D] with perm [0,2,1]. Then: when the innermost input dim stays innermost, each
// output row is one memcpy; otherwise the two innermost axes (the input's and the output's) are transposed in
// cache-sized square tiles, with the remaining axes as a batch; both are split over the thread pool.
#include "runtime/ops/transpose/transpose.h"

#include <algorithm>
#include <cstring>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/common/transpose_blocked.h"

namespace onnxamp::ops {

void TransposeReference(const std::byte* src, std::byte* dst, std::span<const int64_t> dims,
                        std::span<const int64_t> perm, size_t elem_size) {
  const size_t rank = dims.size();
  const std::vector<int64_t> in_strides = ContiguousStrides(dims);
  std::vector<int64_t> out_dims(rank);
  for (size_t k = 0; k < rank; ++k) out_dims[k] = dims[perm[k]];
  const int64_t count = DimProduct(dims, 0, rank);
  for (int64_t o = 0; o < count; ++o) {
    // Decompose the output index, and add each coordinate's input stride.
    int64_t rest = o, src_index = 0;
    for (size_t k = rank; k-- > 0;) {
      src_index += (rest % out_dims[k]) * in_strides[perm[k]];
      rest /= out_dims[k];
    }
    std::memcpy(dst + o * elem_size, src + src_index * elem_size, elem_size);
  }
}

namespace {

// Dims with size-1 dims removed and input dims that stay adjacent in the output merged.
struct SimplifiedPerm {
  DimVector dims;  // input order
  DimVector perm;
};

SimplifiedPerm Simplify(std::span<const int64_t> dims, std::span<const int64_t> perm) {
  // Drop size-1 dims, renumbering the rest.
  DimVector new_index(dims.size(), -1);
  DimVector kept_dims;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    new_index[i] = static_cast<int64_t>(kept_dims.size());
    kept_dims.push_back(dims[i]);
  }
  DimVector kept_perm;
  for (int64_t p : perm)
    if (new_index[p] >= 0) kept_perm.push_back(new_index[p]);
  // Merge runs of output positions whose input dims are consecutive: each run becomes one dim. group_of[i] is the
  // run (numbered in output order) that starts at kept input dim i, -1 for a dim inside a run.
  DimVector group_of(kept_dims.size(), -1);
  DimVector group_size;  // per run: the product of its dims
  for (size_t k = 0; k < kept_perm.size(); ++k) {
    const int64_t p = kept_perm[k];
    if (k > 0 && kept_perm[k - 1] + 1 == p) {
      group_size.back() *= kept_dims[p];
    } else {
      group_of[p] = static_cast<int64_t>(group_size.size());
      group_size.push_back(kept_dims[p]);
    }
  }
  // Number the runs by their first input dim.
  SimplifiedPerm s;
  s.dims.resize(group_size.size());
  s.perm.resize(group_size.size());
  int64_t rank_in = 0;
  for (int64_t g : group_of) {
    if (g < 0) continue;
    s.dims[rank_in] = group_size[g];
    s.perm[g] = rank_in;
    ++rank_in;
  }
  return s;
}

template <typename T>
void TransposeTyped(const T* src, T* dst, std::span<const int64_t> dims_in, std::span<const int64_t> perm_in,
                    exec::ThreadPool* pool) {
  const int64_t count = DimProduct(dims_in, 0, dims_in.size());
  if (count == 0) return;
  const SimplifiedPerm s = Simplify(dims_in, perm_in);
  const size_t rank = s.dims.size();
  if (rank <= 1) {
    CopyElements(dst, src, count);
    return;
  }
  DimVector in_strides(rank), out_dims(rank), src_strides(rank), out_strides(rank);
  in_strides[rank - 1] = 1;
  for (size_t k = rank - 1; k-- > 0;) in_strides[k] = in_strides[k + 1] * s.dims[k + 1];
  for (size_t k = 0; k < rank; ++k) {
    out_dims[k] = s.dims[s.perm[k]];
    src_strides[k] = in_strides[s.perm[k]];
  }
  out_strides[rank - 1] = 1;
  for (size_t k = rank - 1; k-- > 0;) out_strides[k] = out_strides[k + 1] * out_dims[k + 1];
  if (s.perm.back() == static_cast<int64_t>(rank) - 1) {
    // The innermost input dim stays innermost: every output row is a contiguous input row.
    StridedCopy(dst, src, MakeCopyPlan(out_dims, out_strides, src_strides), pool);
    return;
  }
  // a: the input's innermost dim (at output position q); b: the input dim that is the output's innermost.
  const int64_t a = static_cast<int64_t>(rank) - 1;
  const int64_t b = s.perm.back();
  const size_t q = static_cast<size_t>(std::find(s.perm.begin(), s.perm.end(), a) - s.perm.begin());
  DimVector batch_dims, batch_src, batch_dst;
  for (size_t k = 0; k + 1 < rank; ++k) {
    if (k == q) continue;
    batch_dims.push_back(out_dims[k]);
    batch_src.push_back(src_strides[k]);
    batch_dst.push_back(out_strides[k]);
  }
  BlockedTranspose2D(src, dst, s.dims[a], s.dims[b], in_strides[b], out_strides[q], batch_dims, batch_src, batch_dst,
                     pool);
}

}  // namespace

void TransposeFast(const std::byte* src, std::byte* dst, std::span<const int64_t> dims, std::span<const int64_t> perm,
                   size_t elem_size, exec::ThreadPool* pool) {
  switch (elem_size) {
    case 1:
      return TransposeTyped(reinterpret_cast<const uint8_t*>(src), reinterpret_cast<uint8_t*>(dst), dims, perm, pool);
    case 2:
      return TransposeTyped(reinterpret_cast<const uint16_t*>(src), reinterpret_cast<uint16_t*>(dst), dims, perm, pool);
    case 4:
      return TransposeTyped(reinterpret_cast<const uint32_t*>(src), reinterpret_cast<uint32_t*>(dst), dims, perm, pool);
    case 8:
      return TransposeTyped(reinterpret_cast<const uint64_t*>(src), reinterpret_cast<uint64_t*>(dst), dims, perm, pool);
    case 16:
      return TransposeTyped(reinterpret_cast<const Bytes16*>(src), reinterpret_cast<Bytes16*>(dst), dims, perm, pool);
    default:
      ONNXAMP_CHECK(false, "TransposeFast: unsupported element size ", elem_size);
  }
}

Status TransposeElements(const ir::Tensor& x, std::span<const int64_t> view, std::span<const int64_t> perm,
                         ir::Tensor* y, exec::ThreadPool* pool) {
  return DispatchByElementSize(x.dtype(), "Transpose", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, std::string>) {
      const size_t rank = view.size();
      std::vector<int64_t> out_dims(rank), src_strides(rank);
      const std::vector<int64_t> in_strides = ContiguousStrides(view);
      for (size_t k = 0; k < rank; ++k) {
        out_dims[k] = view[static_cast<size_t>(perm[k])];
        src_strides[k] = in_strides[static_cast<size_t>(perm[k])];
      }
      StridedCopy(MutableElementsOf<T>(*y), ElementsOf<T>(x),
                  MakeCopyPlan(out_dims, ContiguousStrides(out_dims), src_strides), nullptr);
    } else {
      TransposeFast(x.data(), y->mutable_data(), view, perm, sizeof(T), pool);
    }
    return Status::Ok();
  });
}

namespace {

class TransposeCpu : public exec::OpKernel {
 public:
  TransposeCpu(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "data"));
    const size_t rank = x->dims().size();
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> perm, spec_.Perm(*x));
    std::vector<int64_t> out_dims(rank);
    for (size_t k = 0; k < rank; ++k) out_dims[k] = x->dims()[perm[k]];
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), out_dims));
    return TransposeElements(*x, x->dims(), perm, y, &ctx.threads());
  }

 private:
  TransposeSpec spec_;
};

}  // namespace

void RegisterTransposeKernels(exec::KernelRegistry& r) {
  r.Register({"Transpose", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<TransposeCpu>});
}

}  // namespace onnxamp::ops
