// Conversions between the plain and the blocked channel layout for tests of the Blocked* kernels.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace onnxamp::testing {

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Plain [N, C, S] <-> blocked [N, ceil(C / b), S, b] (S positions per channel); padding lanes are zero.
inline std::vector<float> ToBlocked(const std::vector<float>& x, int64_t n, int64_t c, int64_t s, int64_t b) {
  const int64_t cb = CeilDiv(c, b);
  std::vector<float> out(static_cast<size_t>(n * cb * s * b), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t p = 0; p < s; ++p) out[((i * cb + ch / b) * s + p) * b + ch % b] = x[(i * c + ch) * s + p];
    }
  }
  return out;
}

// The logical channels of blocked y as plain [N, C, S]; expects the padding lanes to hold zeros.
inline std::vector<float> FromBlocked(const float* y, int64_t n, int64_t c, int64_t s, int64_t b,
                                      const std::string& what) {
  const int64_t cb = CeilDiv(c, b);
  std::vector<float> out(static_cast<size_t>(n * c * s));
  int failures = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < cb * b; ++ch) {
      for (int64_t p = 0; p < s; ++p) {
        const float v = y[((i * cb + ch / b) * s + p) * b + ch % b];
        if (ch < c) {
          out[(i * c + ch) * s + p] = v;
        } else if (v != 0.0f && failures++ < 5) {
          ADD_FAILURE() << what << ": padding lane " << ch << " of image " << i << " position " << p << " is " << v;
        }
      }
    }
  }
  return out;
}

}  // namespace onnxamp::testing
