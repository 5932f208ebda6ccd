// Shared machinery of the elementwise kernels: parallel loops, unary maps, broadcasting binary and ternary loops
// (a fast span-based path and a plain per-element reference), and attribute reading with type checks.
//
// Functors work on compute types (ComputeType<T>: float for fp16/bf16), loads and stores convert, so an fp16
// result is the fp32 result rounded once to nearest even.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ir/graph.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/elementwise_half.h"

namespace onnxamp::ops {

// Elements per parallel chunk: below two chunks a loop runs inline on the calling thread.
inline constexpr int64_t kElementwiseGrain = 32768;

// Calls fn(begin, end) over disjoint ranges covering [0, n): on `pool` when n spans at least two grains,
// inline otherwise.
template <typename Fn>
void ParallelRanges(exec::ThreadPool& pool, int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (n < 2 * grain || pool.num_threads() <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  pool.ParallelFor(n, grain, [&fn](int64_t b, int64_t e) { fn(b, e); });
}

// Element types held in 16 bits and computed in float: their loops convert blocks of kBlock elements at a time
// (runtime/ops/common/elementwise_half.h) and run the float computation on the block.
template <typename T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
inline constexpr int64_t kBlock = 256;

// A unary functor may offer `void Block(const float* in, float* out, int64_t n) const`, a whole-array float version
// (used for float data and for fp16/bf16 blocks) when the per-element form cannot be both fast and exact.
template <typename F>
concept HasFloatBlock = requires(const F& f, const float* in, float* out, int64_t n) {
  f.Block(in, out, n);
};

// out[i] = Store<TOut>(f(Load(in[i]))) for i in [0, n), on the calling thread.
template <typename TIn, typename TOut, typename F>
void UnaryRange(const TIn* in, TOut* out, int64_t n, const F& f) {
  using CIn = ComputeType<TIn>;
  using COut = ComputeType<TOut>;
  constexpr bool kFloatBlock = std::is_same_v<CIn, float> && std::is_same_v<COut, float> && HasFloatBlock<F>;
  if constexpr (kIsHalfLike<TIn> || kIsHalfLike<TOut>) {
    CIn bin[kBlock];
    COut bout[kBlock];
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = std::min(kBlock, n - i);
      LoadBlock(in + i, bin, m);
      if constexpr (kFloatBlock) {
        f.Block(bin, bout, m);
      } else {
        for (int64_t j = 0; j < m; ++j) bout[j] = static_cast<COut>(f(bin[j]));
      }
      StoreBlock(bout, out + i, m);
    }
  } else if constexpr (kFloatBlock) {
    f.Block(in, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = Store<TOut>(f(Load(in[i])));
  }
}

// UnaryRange over [0, n), in parallel for large n.
template <typename TIn, typename TOut, typename F>
void UnaryMap(exec::ThreadPool& pool, const TIn* in, TOut* out, int64_t n, const F& f) {
  ParallelRanges(pool, n, kElementwiseGrain, [&](int64_t b, int64_t e) { UnaryRange(in + b, out + b, e - b, f); });
}

// The inner loops of a binary span in compute types: out[j] = f(a[j * sa], b[j * sb]) with sa, sb in {0, 1}. Each
// stride pair has its own loop so that the contiguous ones vectorize.
template <typename CA, typename CB, typename COut, typename F>
inline void BinaryLoops(const CA* a, int64_t sa, const CB* b, int64_t sb, COut* out, int64_t n, const F& f) {
  if (sa && sb) {
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<COut>(f(a[j], b[j]));
  } else if (sa) {
    const CB bv = b[0];
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<COut>(f(a[j], bv));
  } else if (sb) {
    const CA av = a[0];
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<COut>(f(av, b[j]));
  } else {
    std::fill_n(out, n, static_cast<COut>(f(a[0], b[0])));
  }
}

// One span of a broadcast binary op: out[j] = f(a[j * sa], b[j * sb]) with sa, sb in {0, 1}, in storage types.
template <typename TA, typename TB, typename TOut, typename F>
inline void BinarySpan(const TA* a, int64_t sa, const TB* b, int64_t sb, TOut* out, int64_t n, const F& f) {
  if constexpr (kIsHalfLike<TA> || kIsHalfLike<TB> || kIsHalfLike<TOut>) {
    using CA = ComputeType<TA>;
    using CB = ComputeType<TB>;
    using COut = ComputeType<TOut>;
    CA ba[kBlock];
    CB bb[kBlock];
    COut bo[kBlock];
    if (!sa) ba[0] = Load(a[0]);
    if (!sb) bb[0] = Load(b[0]);
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = std::min(kBlock, n - i);
      if (sa) LoadBlock(a + i, ba, m);
      if (sb) LoadBlock(b + i, bb, m);
      BinaryLoops(ba, sa, bb, sb, bo, m, f);
      StoreBlock(bo, out + i, m);
    }
  } else {
    BinaryLoops(a, sa, b, sb, out, n, f);
  }
}

// The fast path of a broadcasting binary op over a two-input plan: spans along the innermost merged dim, in
// parallel chunks for large outputs.
template <typename TA, typename TB, typename TOut, typename F>
void BinaryBroadcast(exec::ThreadPool& pool, const BroadcastPlan& plan, const TA* a, const TB* b, TOut* out,
                     const F& f) {
  const int64_t sa = plan.inner_stride(0);
  const int64_t sb = plan.inner_stride(1);
  ParallelRanges(pool, plan.num_elements(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    ForEachBroadcastSpan(plan, begin, end, [&](int64_t o, const int64_t* off, int64_t len) {
      BinarySpan(a + off[0], sa, b + off[1], sb, out + o, len, f);
    });
  });
}

// The reference: one element at a time, input offsets from the unmerged shapes by division. Slow and plain.
template <typename TA, typename TB, typename TOut, typename F>
void BinaryBroadcastReference(std::span<const int64_t> a_dims, const TA* a, std::span<const int64_t> b_dims,
                              const TB* b, std::span<const int64_t> out_dims, TOut* out, const F& f) {
  int64_t n = 1;
  for (int64_t d : out_dims) n *= d;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t ia = BroadcastInputOffset(a_dims, out_dims, i);
    const int64_t ib = BroadcastInputOffset(b_dims, out_dims, i);
    out[i] = Store<TOut>(f(Load(a[ia]), Load(b[ib])));
  }
}

// A broadcasting three-input op over a three-input plan: out = f(a, b, c) (Where).
template <typename TA, typename TB, typename TC, typename TOut, typename F>
void TernaryBroadcast(exec::ThreadPool& pool, const BroadcastPlan& plan, const TA* a, const TB* b, const TC* c,
                      TOut* out, const F& f) {
  const int64_t sa = plan.inner_stride(0);
  const int64_t sb = plan.inner_stride(1);
  const int64_t sc = plan.inner_stride(2);
  ParallelRanges(pool, plan.num_elements(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    ForEachBroadcastSpan(plan, begin, end, [&](int64_t o, const int64_t* off, int64_t len) {
      const TA* pa = a + off[0];
      const TB* pb = b + off[1];
      const TC* pc = c + off[2];
      TOut* po = out + o;
      if (sa && sb && sc) {
        for (int64_t j = 0; j < len; ++j) po[j] = f(pa[j], pb[j], pc[j]);
      } else {
        for (int64_t j = 0; j < len; ++j) po[j] = f(pa[j * sa], pb[j * sb], pc[j * sc]);
      }
    });
  });
}

// Reads an optional attribute of the node, checking its type; the error names the attribute, the expected type
// and the type found. Absent: `default_value`.
StatusOr<float> FloatAttribute(const ir::Node& node, std::string_view name, float default_value);
StatusOr<int64_t> IntAttribute(const ir::Node& node, std::string_view name, int64_t default_value);
StatusOr<std::string> StringAttribute(const ir::Node& node, std::string_view name, std::string default_value);
// nullopt when the attribute is absent.
StatusOr<std::optional<float>> OptionalFloatAttribute(const ir::Node& node, std::string_view name);
StatusOr<std::optional<int64_t>> OptionalIntAttribute(const ir::Node& node, std::string_view name);

// The broadcasting rule of a binary op: before opset 7 the attributes `broadcast` and `axis` (LegacyBroadcastShape),
// from opset 7 numpy broadcasting (enabled is false).
struct LegacyBroadcast {
  bool enabled = false;  // opset < 7
  bool broadcast = false;
  std::optional<int64_t> axis;
};
// Reads the legacy attributes of `node` at `opset` into `out` (left disabled from opset 7).
Status ReadLegacyBroadcast(const ir::Node& node, int64_t opset, LegacyBroadcast* out);

// The plan of a binary op on shapes a and b: numpy broadcasting, or the legacy rule when `legacy.enabled`.
StatusOr<BroadcastPlan> MakeBinaryPlan(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                       const LegacyBroadcast& legacy);

// Checks the inputs of a binary op (both present; with `same_type`, B of A's element type) and returns their plan
// (MakeBinaryPlan); the messages name the input, expected and got.
StatusOr<BroadcastPlan> PlanBinaryInputs(const ir::Tensor* a, const ir::Tensor* b, bool same_type,
                                         const LegacyBroadcast& legacy);

}  // namespace onnxamp::ops
