// One tolerance table per element type for kernel tests, and a comparison helper that reports the worst element.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/ir/tensor.h"
#include "runtime/ops/common/dtype_dispatch.h"

namespace onnxamp::testing {

struct Tolerance {
  double rtol;
  double atol;
};

// fp16/bf16 results are computed in float and rounded once on store: allow two units in the last place.
inline Tolerance ToleranceFor(DType t) {
  switch (t) {
    case DType::kFloat64:
      return {1e-12, 1e-14};
    case DType::kFloat32:
      return {1e-5, 1e-6};
    case DType::kFloat16:
      return {2e-3, 1e-4};
    case DType::kBFloat16:
      return {1.6e-2, 1e-3};
    default:
      return {0, 0};  // integers and bool: exact
  }
}

// Every element of `t` as double (float types via their compute type, integers and bool exactly).
inline std::vector<double> AsDoubles(const ir::Tensor& t) {
  std::vector<double> out;
  Status st = ops::DispatchNumericOrBool(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (T v : t.values<T>()) out.push_back(static_cast<double>(ops::Load<T>(v)));
    return Status::Ok();
  });
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// Expects |got - want| <= atol + rtol * |want| elementwise with the tolerance of got's dtype (NaN matches NaN).
inline void ExpectClose(const ir::Tensor& got, const std::vector<double>& want, const std::string& what = "",
                        Tolerance tol = {-1, -1}) {
  if (tol.rtol < 0) tol = ToleranceFor(got.dtype());
  std::vector<double> values = AsDoubles(got);
  ASSERT_EQ(values.size(), want.size()) << what;
  size_t worst = 0;
  double worst_excess = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(values[i])) continue;
    if (std::isinf(want[i]) && values[i] == want[i]) continue;
    const double excess = std::abs(values[i] - want[i]) - (tol.atol + tol.rtol * std::abs(want[i]));
    if (!(excess <= 0) && (worst_excess == 0 || !(excess <= worst_excess))) {
      worst = i;
      worst_excess = std::isnan(excess) ? INFINITY : excess;
    }
  }
  EXPECT_EQ(worst_excess, 0) << what << " (" << DTypeName(got.dtype()) << "): element " << worst << " is "
                             << values[worst] << ", expected " << want[worst] << " (rtol " << tol.rtol << ", atol "
                             << tol.atol << ")";
}

}  // namespace onnxamp::testing
