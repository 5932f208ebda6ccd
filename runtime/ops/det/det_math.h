// Det's arithmetic for host and device code: the CPU kernels (det_cpu.cc) and the CUDA ones
// (runtime/cuda/ops/linalg/det_cuda.cc) run the very same LU factorisation and cofactor computations, in double, on
// caller-provided storage (one matrix per call).
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>

#include "runtime/common/host_device.h"

namespace onnxamp::ops::det {

// The largest singular matrix whose cofactors are computed minor by minor (O(n^5)): 32^5 is 3.4e7 operations.
inline constexpr int64_t kMaxMinorsOrder = 32;

// LU with partial pivoting of the n x n matrix `a` (row-major, overwritten in place); returns the determinant.
ONNXAMP_HOST_DEVICE inline double LuDeterminant(double* a, int64_t n) {
  double det = 1.0;
  for (int64_t c = 0; c < n; ++c) {
    int64_t pivot = c;
    for (int64_t r = c + 1; r < n; ++r) {
      if (std::fabs(a[r * n + c]) > std::fabs(a[pivot * n + c])) pivot = r;
    }
    if (a[pivot * n + c] == 0.0) return 0.0;
    if (pivot != c) {
      for (int64_t k = 0; k < n; ++k) {
        const double t = a[c * n + k];
        a[c * n + k] = a[pivot * n + k];
        a[pivot * n + k] = t;
      }
      det = -det;
    }
    const double p = a[c * n + c];
    det *= p;
    for (int64_t r = c + 1; r < n; ++r) {
      const double f = a[r * n + c] / p;
      for (int64_t k = c; k < n; ++k) a[r * n + k] -= f * a[c * n + k];
    }
  }
  return det;
}

// The cofactor matrix of a singular `a` minor by minor (C[i][j] = (-1)^(i+j) det of a without row i and column j;
// O(n^5)), into c; `minor` holds (n - 1)^2 values.
ONNXAMP_HOST_DEVICE inline void CofactorsByMinors(const double* a, int64_t n, double* minor, double* c) {
  if (n == 1) {
    c[0] = 1.0;
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t k = 0;
      for (int64_t r = 0; r < n; ++r) {
        if (r == i) continue;
        for (int64_t s = 0; s < n; ++s) {
          if (s != j) minor[k++] = a[r * n + s];
        }
      }
      c[i * n + j] = ((i + j) % 2 ? -1.0 : 1.0) * LuDeterminant(minor, n - 1);  // minor is rebuilt for every entry
    }
  }
}

// The cofactor matrix of `a` into c (adj(a)^T, the gradient of det(a)): det(a) * inv(a)^T by Gauss-Jordan
// elimination for an invertible a (O(n^3)); minor by minor for a singular one (a singular a of rank n - 1 has a
// non-zero gradient too). m and inv hold n^2 values each, minor (n - 1)^2. False (c not written) for a singular a
// larger than kMaxMinorsOrder.
ONNXAMP_HOST_DEVICE inline bool Cofactors(const double* a, int64_t n, double* m, double* inv, double* minor,
                                          double* c) {
  for (int64_t i = 0; i < n * n; ++i) {
    m[i] = a[i];
    inv[i] = 0.0;
  }
  for (int64_t i = 0; i < n; ++i) inv[i * n + i] = 1.0;
  double det = 1.0;
  for (int64_t col = 0; col < n; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < n; ++r) {
      if (std::fabs(m[r * n + col]) > std::fabs(m[pivot * n + col])) pivot = r;
    }
    const double p = m[pivot * n + col];
    if (p == 0.0) {
      if (n > kMaxMinorsOrder) return false;
      CofactorsByMinors(a, n, minor, c);
      return true;
    }
    if (pivot != col) {
      for (int64_t k = 0; k < n; ++k) {
        double t = m[col * n + k];
        m[col * n + k] = m[pivot * n + k];
        m[pivot * n + k] = t;
        t = inv[col * n + k];
        inv[col * n + k] = inv[pivot * n + k];
        inv[pivot * n + k] = t;
      }
      det = -det;
    }
    det *= p;
    for (int64_t k = 0; k < n; ++k) {
      m[col * n + k] /= p;
      inv[col * n + k] /= p;
    }
    for (int64_t r = 0; r < n; ++r) {
      const double f = m[r * n + col];
      if (r == col || f == 0.0) continue;
      for (int64_t k = 0; k < n; ++k) {
        m[r * n + k] -= f * m[col * n + k];
        inv[r * n + k] -= f * inv[col * n + k];
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * n + j] = det * inv[j * n + i];
  }
  return true;
}

}  // namespace onnxamp::ops::det
