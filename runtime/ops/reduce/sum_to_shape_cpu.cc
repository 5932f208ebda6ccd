// SumToShape (CPU, com.onnxamp): a broadcast gradient summed back to the shape of the tensor that was broadcast
// (contract in runtime/ops/gradient_ops.h). Accumulates in double in element order; passes G through unchanged when
// it already has the shape.
//
// Every output is 0.0 plus its input elements in increasing index order, rounded once to T. The kernel keeps that
// order exactly (results are bit for bit those of a walk over G element by element) but walks G in contiguous runs:
// G's dims are merged into alternating summed and kept dims, and only the runs of the innermost one are looped over
// element by element, where the loop is either an elementwise add into the outputs (kept, vectorized) or one chain
// of additions (summed; four chains side by side when neighbouring runs go to neighbouring outputs).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/elementwise_half.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/reduce/reduce_spec.h"

namespace onnxamp::ops {
namespace {

// A dim of G after merging: neighbours both summed or both kept are one dim, dims of size 1 are dropped (their index
// is always 0), so consecutive dims alternate between summed and kept.
struct MergedDim {
  int64_t size = 1;
  bool summed = false;
  int64_t out_stride = 0;  // of the output element the dim's index moves; 0 when summed
};

// G's dims merged; the leading dims the target lacks are summed. Never empty when G is not: G of one element gives one
// kept dim of size 1.
std::vector<MergedDim> MergeDims(const std::vector<int64_t>& in_dims, const std::vector<bool>& reduced) {
  std::vector<MergedDim> dims;
  for (size_t d = 0; d < in_dims.size(); ++d) {
    if (in_dims[d] == 1) continue;
    if (!dims.empty() && dims.back().summed == reduced[d]) {
      dims.back().size *= in_dims[d];
    } else {
      dims.push_back({in_dims[d], reduced[d], 0});
    }
  }
  if (dims.empty()) dims.push_back({1, false, 0});
  // The kept dims, in order, are the output's dims (the target's dims of size > 1): row-major strides.
  int64_t stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d].summed) continue;
    dims[d].out_stride = stride;
    stride *= dims[d].size;
  }
  return dims;
}

// The output offset of each run (span of the innermost merged dim) of G in turn: a multi-index over the merged dims
// outside the innermost, advanced once per run.
class RunOffsets {
 public:
  explicit RunOffsets(std::vector<MergedDim> outer) : dims_(std::move(outer)), index_(dims_.size(), 0) {}

  int64_t out() const { return out_; }
  // Runs, this one included, before the dim just outside the innermost one wraps around.
  int64_t left_in_dim() const { return dims_.empty() ? 1 : dims_.back().size - index_.back(); }

  void Next() {
    for (size_t d = dims_.size(); d-- > 0;) {
      out_ += dims_[d].out_stride;
      if (++index_[d] < dims_[d].size) return;
      out_ -= dims_[d].out_stride * dims_[d].size;
      index_[d] = 0;
    }
  }

 private:
  std::vector<MergedDim> dims_;
  std::vector<int64_t> index_;
  int64_t out_ = 0;
};

// Where the loops read G's values: float and double in place...
template <typename T>
struct InPlaceSource {
  static constexpr int64_t kCapacity = std::numeric_limits<int64_t>::max() / 4;
  const T* x;
  const T* Get(int64_t offset, int64_t /*n*/, int64_t /*at*/ = 0) const { return x + offset; }
};

// ...fp16 and bf16 converted to float a span at a time by the bulk conversion (F16C where the CPU has it), which
// gives Load<T>'s values. A signalling NaN may come back quiet; the conversion to double quiets it anyway, so the
// doubles added are the same.
template <typename T>
struct ConvertingSource {
  static constexpr int64_t kCapacity = 4096;  // floats: 16 KiB, so the converted span stays in L1
  const T* x;
  float* buffer;  // kCapacity floats
  // G[offset, offset + n) as float, written at buffer + at (n + at <= kCapacity).
  const float* Get(int64_t offset, int64_t n, int64_t at = 0) const {
    LoadBlock(x + offset, buffer + at, n);
    return buffer + at;
  }
};

// Kept innermost dim: the run's elements go to consecutive outputs, so this is an elementwise add (vectorized).
template <typename V>
inline void AddRun(const V* __restrict v, double* __restrict acc, int64_t n) {
  for (int64_t j = 0; j < n; ++j) acc[j] += static_cast<double>(v[j]);
}

// Sums G (`n` elements, merged `dims`) into `acc`, in element order per output.
template <typename Source>
void SumRuns(const Source& src, const std::vector<MergedDim>& dims, int64_t n, double* acc) {
  constexpr int64_t kCap = Source::kCapacity;
  const int64_t len = dims.back().size;
  const int64_t runs = n / len;
  RunOffsets offsets(std::vector<MergedDim>(dims.begin(), dims.end() - 1));
  if (!dims.back().summed) {
    if (len <= kCap) {  // whole runs, as many as fit, per read
      const int64_t per_read = std::min(runs, kCap / len);
      for (int64_t r = 0; r < runs;) {
        const int64_t count = std::min(per_read, runs - r);
        const auto* v = src.Get(r * len, count * len);
        for (int64_t q = 0; q < count; ++q, ++r, offsets.Next()) AddRun(v + q * len, acc + offsets.out(), len);
      }
    } else {  // long runs (16-bit types): in pieces
      for (int64_t r = 0; r < runs; ++r, offsets.Next()) {
        for (int64_t p = 0; p < len; p += kCap) {
          const int64_t count = std::min(kCap, len - p);
          AddRun(src.Get(r * len + p, count), acc + offsets.out() + p, count);
        }
      }
    }
    return;
  }
  // Summed innermost dim: each run is one chain of additions into one output, which is latency-bound. The dim just
  // outside is kept with output stride 1 (dims alternate), so four runs before it wraps go to four neighbouring
  // outputs: their chains are summed side by side, each in its own order.
  if (len <= kCap / 4) {  // whole runs per read, a multiple of four of them (so reads do not split the groups)
    const int64_t per_read = std::min(runs, kCap / len / 4 * 4);
    for (int64_t r = 0; r < runs;) {
      const int64_t count = std::min(per_read, runs - r);
      const auto* v = src.Get(r * len, count * len);
      for (int64_t q = 0; q < count;) {
        const auto* x = v + q * len;
        double* a = acc + offsets.out();
        if (q + 4 <= count && offsets.left_in_dim() >= 4) {
          double a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
          for (int64_t j = 0; j < len; ++j) {
            a0 += static_cast<double>(x[j]);
            a1 += static_cast<double>(x[len + j]);
            a2 += static_cast<double>(x[2 * len + j]);
            a3 += static_cast<double>(x[3 * len + j]);
          }
          a[0] = a0;
          a[1] = a1;
          a[2] = a2;
          a[3] = a3;
          for (int k = 0; k < 4; ++k) offsets.Next();
          q += 4;
        } else {
          double a0 = a[0];
          for (int64_t j = 0; j < len; ++j) a0 += static_cast<double>(x[j]);
          a[0] = a0;
          offsets.Next();
          ++q;
        }
      }
      r += count;
    }
    return;
  }
  // Long runs (16-bit types): four at a time, each read in pieces into its quarter of the buffer.
  constexpr int64_t kPiece = kCap / 4;
  for (int64_t r = 0; r < runs;) {
    double* a = acc + offsets.out();
    if (r + 4 <= runs && offsets.left_in_dim() >= 4) {
      double a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
      for (int64_t p = 0; p < len; p += kPiece) {
        const int64_t count = std::min(kPiece, len - p);
        const auto* x0 = src.Get(r * len + p, count, 0);
        const auto* x1 = src.Get((r + 1) * len + p, count, kPiece);
        const auto* x2 = src.Get((r + 2) * len + p, count, 2 * kPiece);
        const auto* x3 = src.Get((r + 3) * len + p, count, 3 * kPiece);
        for (int64_t j = 0; j < count; ++j) {
          a0 += static_cast<double>(x0[j]);
          a1 += static_cast<double>(x1[j]);
          a2 += static_cast<double>(x2[j]);
          a3 += static_cast<double>(x3[j]);
        }
      }
      a[0] = a0;
      a[1] = a1;
      a[2] = a2;
      a[3] = a3;
      for (int k = 0; k < 4; ++k) offsets.Next();
      r += 4;
    } else {
      double a0 = a[0];
      for (int64_t p = 0; p < len; p += kCap) {
        const int64_t count = std::min(kCap, len - p);
        const auto* x = src.Get(r * len + p, count);
        for (int64_t j = 0; j < count; ++j) a0 += static_cast<double>(x[j]);
      }
      a[0] = a0;
      offsets.Next();
      ++r;
    }
  }
}

class SumToShapeCpu : public exec::OpKernel {
 public:
  SumToShapeCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* g = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const SumToShapePlan plan, ResolveSumToShape(g, ctx.input(1)));
    if (plan.same) return ctx.SetOutput(0, *g);
    return DispatchFloat(g->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, g->dtype(), plan.out_dims));
      std::vector<double> acc(static_cast<size_t>(y->num_elements()), 0.0);
      const auto in = g->values<T>();
      const int64_t n = static_cast<int64_t>(in.size());
      if (n > 0) {  // an empty G leaves the outputs 0 (a dim of size 0 summed away)
        const std::vector<MergedDim> dims = MergeDims(g->dims(), plan.reduced);
        if constexpr (std::is_same_v<ComputeType<T>, T>) {
          SumRuns(InPlaceSource<T>{in.data()}, dims, n, acc.data());
        } else {
          alignas(64) float buffer[ConvertingSource<T>::kCapacity];
          SumRuns(ConvertingSource<T>{in.data(), buffer}, dims, n, acc.data());
        }
      }
      auto out = y->mutable_values<T>();
      for (size_t i = 0; i < acc.size(); ++i) out[i] = Store<T>(static_cast<ComputeType<T>>(acc[i]));
      return Status::Ok();
    });
  }
};

}  // namespace

void RegisterSumToShapeKernels(exec::KernelRegistry& r) {
  r.Register({kSumToShapeOp,
              exec::kInternalDomain,
              1,
              1,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              0,
              &exec::MakeKernel<SumToShapeCpu>});
}

}  // namespace onnxamp::ops
