// Shared machinery for ops that reduce over axes (Reduce*, ArgMax/ArgMin, TopK, Softmax, normalisations, losses):
// axis normalisation, the merged layout of a reduction with its offset tables, and a multi-threaded reduction
// engine together with the plain reference implementation it is tested against.
//
// The engine folds values with an operation `Op` that provides
//   using Acc = ...;                          // accumulator type (float for fp16/bf16 inputs)
//   Acc Init() const;                         // identity of Combine
//   Acc Map(T x, int64_t out_index) const;    // value contributed by one input element to output `out_index`
//   Acc Combine(Acc a, Acc b) const;          // associative fold
// and writes one unfinalised accumulator per output; the op kernel finalises (mean, sqrt, log, ...) and stores.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/common/half.h"
#include "runtime/common/status.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ir/graph.h"
#include "runtime/ops/common/dtype_dispatch.h"

namespace onnxamp::ops::reduce {

// Inputs smaller than this many elements are reduced on the calling thread.
inline constexpr int64_t kParallelMinElements = 32768;
// Work per parallel unit, in elements, that makes a thread hand-off worthwhile.
inline constexpr int64_t kElementsPerUnit = 16384;

// fp16 bits -> float without branches (the same value as HalfBitsToFloat), so that loops over fp16 data
// vectorise: the exponent is rebased by one multiplication by 2^112, which is exact for normals and subnormals.
inline float HalfBitsToFloatBranchless(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  const uint32_t finite = FloatBits(BitsToFloat(em << 13) * 0x1p112f);
  const uint32_t special = 0x7f800000u | ((em & 0x3ffu) << 13);  // inf, NaN (payload kept)
  // A mask rather than ?: so that the multiplication is not moved under a branch (loops stay vectorisable).
  const uint32_t is_special = 0u - static_cast<uint32_t>(em >= 0x7c00u);
  return BitsToFloat((special & is_special) | (finite & ~is_special) | sign);
}

// float -> fp16 bits, round to nearest even, without branches (the same bits as FloatToHalfBits, NaN payloads
// included). The rounding is done by the FPU: adding a power of two that aligns the fp16 mantissa's last bit with
// the float's makes the float addition round exactly where fp16 must (the FP16 library's method).
inline uint16_t FloatToHalfBitsBranchless(float f) {
  const uint32_t w = FloatBits(f);
  const uint32_t sign = w & 0x80000000u;
  const uint32_t shl1_w = w + w;  // without the sign
  // Scaling up then down sends values that overflow fp16 to inf; below 2^-14 the bias keeps subnormal spacing.
  float base = (BitsToFloat(w & 0x7fffffffu) * 0x1.0p+112f) * 0x1.0p-110f;
  uint32_t bias = shl1_w & 0xff000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;
  base = BitsToFloat((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = FloatBits(base);
  const uint32_t nonsign = ((bits >> 13) & 0x7c00u) + (bits & 0x0fffu);
  const uint32_t nan_bits = 0x7e00u | ((w >> 13) & 0x3ffu);
  const uint32_t is_nan = 0u - static_cast<uint32_t>(shl1_w > 0xff000000u);
  return static_cast<uint16_t>((sign >> 16) | (nan_bits & is_nan) | (nonsign & ~is_nan));
}

// Load<T> for the hot loops of this family: the branch-free fp16 conversion, otherwise Load<T>.
template <typename T>
inline ComputeType<T> LoadFast(T v) {
  if constexpr (std::is_same_v<T, Float16>) {
    return HalfBitsToFloatBranchless(v.bits);
  } else {
    return Load<T>(v);
  }
}

// Store<T> for the hot loops of this family: the branch-free fp16 conversion, otherwise Store<T>.
template <typename T>
inline T StoreFast(ComputeType<T> v) {
  if constexpr (std::is_same_v<T, Float16>) {
    return Float16::FromBits(FloatToHalfBitsBranchless(v));
  } else {
    return Store<T>(v);
  }
}

// exp(x) in float to about one unit in the last place (Cephes' polynomial after reduction by ln 2), written without
// branches or library calls so that loops calling it vectorise. Arguments are clamped to [-88, 88]: exp(x) for
// x < -88 gives 0 (the exact value is subnormal), NaN stays NaN. The softmax family only passes x - max <= 0.
inline float FastExp(float x) {
  // Every selection is made on bit patterns (integer compares), so that the loops calling this vectorise under the
  // default -ftrapping-math too (the compiler will not if-convert floating-point compares there).
  constexpr uint32_t kAbs = 0x7fffffffu, kSign = 0x80000000u;
  constexpr uint32_t kLimit = 0x42b00000u;  // 88.0f
  const uint32_t bits = FloatBits(x);
  const uint32_t mag = bits & kAbs;
  const bool nan = mag > 0x7f800000u;
  const uint32_t clamped = (nan ? 0u : mag > kLimit ? kLimit : mag) | (bits & kSign);
  const float v = BitsToFloat(clamped);
  // v = n * ln2 + r with n = round(v / ln2), |r| <= ln2 / 2; t + 128 > 0, so truncation is floor.
  const float t = v * 1.44269504088896341f + 0.5f;
  const int32_t i = static_cast<int32_t>(t + 128.0f) - 128;
  const float n = static_cast<float>(i);
  float r = v - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  const float scale = BitsToFloat(static_cast<uint32_t>(i + 127) << 23);  // 2^n; 0 for n = -127
  const uint32_t result = FloatBits(y * scale);
  const uint32_t keep = 0u - static_cast<uint32_t>(nan);  // all ones for NaN: return x itself
  return BitsToFloat((bits & keep) | (result & ~keep));
}

// exp for the accumulator type A: FastExp for float, std::exp otherwise.
template <typename A>
inline A ExpOf(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return FastExp(x);
  } else {
    return std::exp(x);
  }
}

// `axis` (negative counts from the back) as an index into a rank-`rank` shape; OutOfRange naming `what` otherwise.
inline StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, std::string_view what = "axis") {
  if (axis < -rank || axis >= rank) {
    if (rank == 0) return OutOfRange(what, " ", axis, " is out of range for a rank-0 input");
    return OutOfRange(what, " ", axis, " is out of range for rank ", rank, " (expected ", -rank, "..", rank - 1, ")");
  }
  return axis < 0 ? axis + rank : axis;
}

// Reduction axes as a per-dimension mask; fails on an axis out of range or given twice.
inline StatusOr<std::vector<bool>> AxesMask(const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<bool> mask(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    ONNXAMP_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(a, rank, "axes value"));
    if (mask[axis]) return InvalidArgument("axes value ", a, " names dimension ", axis, " twice");
    mask[axis] = true;
  }
  return mask;
}

// The rank of node input `i` when the model declares it, for checking axis attributes at session creation.
inline std::optional<int64_t> DeclaredRank(const ir::Node& node, size_t i) {
  const ir::Value* v = node.input(i);
  if (!v || !v->type().is_tensor() || !v->type().shape()) return std::nullopt;
  return static_cast<int64_t>(v->type().shape()->size());
}

// dims viewed as [outer, n, inner] around `axis`: n = dims[axis], outer/inner the products before/after it.
struct AxisView {
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;
};
inline AxisView ViewAround(const std::vector<int64_t>& dims, int64_t axis) {
  AxisView v;
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
    if (d < axis) v.outer *= dims[d];
    if (d == axis) v.n = dims[d];
    if (d > axis) v.inner *= dims[d];
  }
  return v;
}

// Product of dims[begin .. end) (1 for an empty range).
inline int64_t Product(const std::vector<int64_t>& dims, size_t begin = 0, size_t end = SIZE_MAX) {
  int64_t p = 1;
  for (size_t d = begin; d < dims.size() && d < end; ++d) p *= dims[d];
  return p;
}

// Offsets of every position of an index space given as (size, stride) pairs, in row-major order. An empty list
// gives the single offset 0; a zero size gives no offsets.
inline std::vector<int64_t> OffsetTable(const std::vector<std::pair<int64_t, int64_t>>& dims) {
  int64_t count = 1;
  for (const auto& d : dims) count *= d.first;
  std::vector<int64_t> table;
  table.reserve(static_cast<size_t>(count));
  if (count == 0) return table;
  std::vector<int64_t> index(dims.size(), 0);
  int64_t offset = 0;
  for (int64_t n = 0; n < count; ++n) {
    table.push_back(offset);
    for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
      offset += dims[d].second;
      if (++index[d] < dims[d].first) break;
      offset -= dims[d].second * dims[d].first;
      index[d] = 0;
    }
  }
  return table;
}

// The offsets of an index space: i * stride when it has at most one dimension (no table needed), else a table.
class OffsetList {
 public:
  OffsetList() = default;
  explicit OffsetList(const std::vector<std::pair<int64_t, int64_t>>& dims) {
    if (dims.size() <= 1) {
      count_ = dims.empty() ? 1 : dims[0].first;
      stride_ = dims.empty() ? 0 : dims[0].second;
    } else {
      table_ = OffsetTable(dims);
      count_ = static_cast<int64_t>(table_.size());
    }
  }
  int64_t size() const { return count_; }
  int64_t operator[](int64_t i) const { return table_.empty() ? i * stride_ : table_[i]; }

 private:
  int64_t count_ = 1;
  int64_t stride_ = 0;
  std::vector<int64_t> table_;
};

// A reduction laid out for the engine. Dimensions of size 1 are dropped and neighbouring dimensions that are both
// reduced or both kept are merged; the innermost merged dimension is then either
//   reduced (inner_reduced): output o folds, for each r in `red`, the contiguous run x[outer[o] + red[r] + 0..inner)
//   kept: output k*inner + i folds x[outer[k] + red[r] + i] over r, so rows of `inner` outputs advance together.
// Offsets are precomputed once per call (or are i * stride for a single dimension), so the hot loops do no index
// arithmetic beyond one lookup per contiguous run.
struct ReducePlan {
  bool inner_reduced = true;
  int64_t inner = 1;
  OffsetList outer;
  OffsetList red;
  int64_t out_count = 1;     // outputs
  int64_t reduce_count = 1;  // input values folded into each output
  // Length of the engine's reduction index space per output: |red| * inner, or |red|.
  int64_t fold_extent() const {
    const int64_t rows = static_cast<int64_t>(red.size());
    return inner_reduced ? rows * inner : rows;
  }
};

// `dims` reduced over the dimensions flagged in `reduced`, simplified: size-1 dimensions dropped, and neighbours
// that are both reduced or both kept merged into one (at least one dimension is left).
struct MergedReduceDims {
  std::vector<int64_t> dims;     // the merged dimensions
  std::vector<bool> reduced;     // whether each is reduced
  std::vector<int64_t> strides;  // their row-major strides in elements
  int64_t out_count = 1;         // outputs
  int64_t reduce_count = 1;      // input values folded into each output
};

inline MergedReduceDims MergeReduceDims(const std::vector<int64_t>& dims, const std::vector<bool>& reduced) {
  MergedReduceDims m;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (reduced[d]) {
      m.reduce_count *= dims[d];
    } else {
      m.out_count *= dims[d];
    }
    if (dims[d] == 1) continue;
    if (!m.reduced.empty() && m.reduced.back() == reduced[d]) {
      m.dims.back() *= dims[d];
    } else {
      m.dims.push_back(dims[d]);
      m.reduced.push_back(reduced[d]);
    }
  }
  if (m.dims.empty()) {  // a scalar, or only dims of size 1: each output is one input value
    m.dims.push_back(1);
    m.reduced.push_back(true);
  }
  const size_t n = m.dims.size();
  m.strides.assign(n, 1);
  for (size_t d = n - 1; d > 0; --d) m.strides[d - 1] = m.strides[d] * m.dims[d];
  return m;
}

// The plan of reducing a tensor of `dims` over the dimensions flagged in `reduced`.
inline ReducePlan MakeReducePlan(const std::vector<int64_t>& dims, const std::vector<bool>& reduced) {
  ReducePlan plan;
  const MergedReduceDims merged = MergeReduceDims(dims, reduced);
  const std::vector<bool>& flags = merged.reduced;
  const size_t m = merged.dims.size();
  plan.out_count = merged.out_count;
  plan.reduce_count = merged.reduce_count;
  plan.inner_reduced = flags[m - 1];
  plan.inner = merged.dims[m - 1];
  std::vector<std::pair<int64_t, int64_t>> kept_dims, red_dims;
  for (size_t d = 0; d + 1 < m; ++d) {
    (flags[d] ? red_dims : kept_dims).emplace_back(merged.dims[d], merged.strides[d]);
  }
  plan.outer = OffsetList(kept_dims);
  plan.red = OffsetList(red_dims);
  return plan;
}

// Output dims of a reduction: reduced dims become 1 (keepdims) or disappear.
inline std::vector<int64_t> ReducedDims(const std::vector<int64_t>& dims, const std::vector<bool>& reduced,
                                        bool keepdims) {
  std::vector<int64_t> out;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (!reduced[d]) {
      out.push_back(dims[d]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  return out;
}

// Folds a contiguous run into kLanes independent accumulators. The inner loop is long enough that the compiler
// vectorises it as a loop (conditional folds such as a NaN-propagating max included) instead of unrolling it, and
// the partial sums also make long sums more accurate. Runs shorter than kMinLaneRun are folded directly.
inline constexpr int kLanes = 64;
inline constexpr int64_t kMinLaneRun = 2 * kLanes;
template <typename T, typename Op>
inline void FoldRun(const T* x, int64_t n, int64_t out_index, const Op& op, typename Op::Acc* lanes) {
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = op.Combine(lanes[l], op.Map(x[j + l], out_index));
  }
  for (; j < n; ++j) lanes[0] = op.Combine(lanes[0], op.Map(x[j], out_index));
}

// Folds a contiguous run into the single accumulator `acc` and returns it.
template <typename T, typename Op>
inline typename Op::Acc FoldRunDirect(const T* x, int64_t n, int64_t out_index, const Op& op, typename Op::Acc acc) {
  for (int64_t j = 0; j < n; ++j) acc = op.Combine(acc, op.Map(x[j], out_index));
  return acc;
}

// Outputs [ob, oe) folded over the engine's reduction indices [fb, fe), written to dst[0 .. oe-ob).
template <typename T, typename Op>
void ReduceBlock(const T* x, const ReducePlan& p, const Op& op, int64_t ob, int64_t oe, int64_t fb, int64_t fe,
                 typename Op::Acc* dst) {
  using Acc = typename Op::Acc;
  if (p.inner_reduced) {
    const int64_t len = p.inner;
    const bool use_lanes = fe - fb >= kMinLaneRun && len >= kLanes;
    Acc lanes[kLanes];
    for (int64_t o = ob; o < oe; ++o) {
      Acc a = op.Init();
      if (use_lanes) {
        for (Acc& l : lanes) l = op.Init();
      }
      for (int64_t f = fb; f < fe;) {
        const int64_t r = f / len, j0 = f % len;
        const int64_t j1 = std::min(len, j0 + (fe - f));
        const T* run = x + p.outer[o] + p.red[r] + j0;
        if (use_lanes) {
          FoldRun(run, j1 - j0, o, op, lanes);
        } else {
          a = FoldRunDirect(run, j1 - j0, o, op, a);
        }
        f += j1 - j0;
      }
      if (use_lanes) {
        for (int l = 0; l < kLanes; ++l) a = op.Combine(a, lanes[l]);
      }
      dst[o - ob] = a;
    }
    return;
  }
  const int64_t width = p.inner;
  for (int64_t o = ob; o < oe;) {
    const int64_t k = o / width, i0 = o % width;
    const int64_t i1 = std::min(width, i0 + (oe - o));
    const int64_t n = i1 - i0;
    Acc* d = dst + (o - ob);
    for (int64_t i = 0; i < n; ++i) d[i] = op.Init();
    const int64_t base_out = k * width + i0;
    for (int64_t r = fb; r < fe; ++r) {
      const T* row = x + p.outer[k] + p.red[r] + i0;
      for (int64_t i = 0; i < n; ++i) d[i] = op.Combine(d[i], op.Map(row[i], base_out + i));
    }
    o += i1 - i0;
  }
}

// Runs the reduction described by `plan` over x into out[0 .. plan.out_count), in parallel on `pool` when the
// input is large. Small output counts split the reduction itself and combine per-chunk partial results.
template <typename T, typename Op>
void RunReduce(const T* x, const ReducePlan& p, const Op& op, typename Op::Acc* out, exec::ThreadPool* pool) {
  using Acc = typename Op::Acc;
  const int64_t outs = p.out_count;
  if (outs == 0) return;
  const int64_t extent = p.fold_extent();
  const int64_t total = outs * p.reduce_count;
  const int64_t threads = pool ? pool->num_threads() : 1;
  if (threads <= 1 || total < kParallelMinElements) {
    ReduceBlock(x, p, op, 0, outs, 0, extent, out);
    return;
  }
  const int64_t want = 4 * threads;
  // Output blocks of the kept-inner layout stay long enough to vectorise and short enough to stay in cache.
  const int64_t min_block = p.inner_reduced ? 1 : std::min<int64_t>(p.inner, 64);
  int64_t blocks = std::min(want, std::max<int64_t>(1, outs / min_block));
  if (!p.inner_reduced) blocks = std::max(blocks, (outs + 4095) / 4096);
  int64_t chunks = 1;
  if (blocks < want) {
    const int64_t by_work = std::max<int64_t>(1, total / (blocks * kElementsPerUnit));
    chunks = std::max<int64_t>(1, std::min({(want + blocks - 1) / blocks, by_work, extent}));
  }
  auto block_begin = [&](int64_t b) { return outs * b / blocks; };
  auto chunk_begin = [&](int64_t c) { return extent * c / chunks; };
  if (chunks == 1) {
    pool->ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        ReduceBlock(x, p, op, block_begin(b), block_begin(b + 1), 0, extent, out + block_begin(b));
      }
    });
    return;
  }
  std::unique_ptr<Acc[]> partial(new Acc[static_cast<size_t>(chunks * outs)]);
  pool->ParallelFor(blocks * chunks, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t b = u / chunks, c = u % chunks;
      ReduceBlock(x, p, op, block_begin(b), block_begin(b + 1), chunk_begin(c), chunk_begin(c + 1),
                  partial.get() + c * outs + block_begin(b));
    }
  });
  for (int64_t o = 0; o < outs; ++o) {
    Acc a = partial[o];
    for (int64_t c = 1; c < chunks; ++c) a = op.Combine(a, partial[c * outs + o]);
    out[o] = a;
  }
}

// The reference: every input element, in order, folded into its output, the output index recomputed from the
// element's coordinates. Slow and obviously right; the engine above is tested against it.
template <typename T, typename Op>
void RunReduceReference(const T* x, const std::vector<int64_t>& dims, const std::vector<bool>& reduced, const Op& op,
                        typename Op::Acc* out) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t outs = 1, total = 1;
  for (int64_t d = 0; d < rank; ++d) {
    total *= dims[d];
    if (!reduced[d]) outs *= dims[d];
  }
  for (int64_t o = 0; o < outs; ++o) out[o] = op.Init();
  std::vector<int64_t> index(rank, 0);
  for (int64_t e = 0; e < total; ++e) {
    int64_t rem = e;
    for (int64_t d = rank - 1; d >= 0; --d) {
      index[d] = rem % dims[d];
      rem /= dims[d];
    }
    int64_t o = 0;
    for (int64_t d = 0; d < rank; ++d) {
      if (!reduced[d]) o = o * dims[d] + index[d];
    }
    out[o] = op.Combine(out[o], op.Map(x[e], o));
  }
}

// Runs fn(begin, end) over [0, n) on `pool`, in units of about kElementsPerUnit elements when each index stands
// for `elements_per_index` elements; inline when the whole is small.
template <typename F>
void ParallelOver(exec::ThreadPool& pool, int64_t n, int64_t elements_per_index, F&& fn) {
  if (n <= 0) return;
  const int64_t per = std::max<int64_t>(1, elements_per_index);
  if (pool.num_threads() <= 1 || n * per < kParallelMinElements || n < 2) {
    fn(int64_t{0}, n);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kElementsPerUnit / per);
  pool.ParallelFor(n, grain, [&](int64_t b, int64_t e) { fn(b, e); });
}

}  // namespace onnxamp::ops::reduce
