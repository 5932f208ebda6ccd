// NaN-aware comparisons for the ops that rank values (ArgMax/ArgMin, TopK): NaN is placed beyond every number, and
// NaNs are equal to each other, so that sorting and selecting stay well defined (as in NumPy).
#pragma once

#include <type_traits>

namespace onnxamp::ops::nan_compare {

// True for a floating-point NaN; always false for integer types.
template <typename A>
inline bool IsNan(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return v != v;
  } else {
    return false;
  }
}

// a > b in the total order where NaN is above +inf and NaNs are equal.
template <typename A>
inline bool Above(A a, A b) {
  if (IsNan(a)) return !IsNan(b);
  if (IsNan(b)) return false;
  return a > b;
}

// Whether `cand` replaces `best` as the running extreme (the largest when kMax, else the smallest; NaN is the
// extreme either way): strictly more extreme, or equal when `select_last`.
template <bool kMax, typename A>
inline bool Replaces(A cand, A best, bool select_last) {
  if (IsNan(best)) return select_last && IsNan(cand);
  if (IsNan(cand)) return true;
  if (kMax ? cand > best : cand < best) return true;
  return select_last && cand == best;
}

}  // namespace onnxamp::ops::nan_compare
