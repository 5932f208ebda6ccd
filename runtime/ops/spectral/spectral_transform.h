// The direct discrete Fourier transform of DFT and STFT and its adjoint, one output at a time, for host and device
// code: the CPU kernels (spectral_cpu.cc) and the CUDA ones (runtime/cuda/ops/spectral/) run the very same sums, in
// double over a table of the L-th roots of unity (a direct O(L^2) transform per signal).
#pragma once

#include <cstdint>

#include "runtime/common/host_device.h"

namespace onnxamp::ops::spectral {

// One transform: `n_in` input values (re, im), `out_len` outputs of a length-l transform; inverse: the sign +1 (else
// -1); scale multiplies the result.
struct Transform {
  int64_t l = 0, n_in = 0, out_len = 0;
  bool inverse = false;
  double scale = 1.0;
};

// y[k] = scale * sum_{j < min(n_in, l)} x[j] * exp(sign 2 pi i k j / l), with wc[m], ws[m] = cos, sin of 2 pi m / l.
// get(j, &re, &im) reads x[j] (im 0.0 for a real signal).
template <typename Get>
ONNXAMP_HOST_DEVICE void DftAt(const Transform& t, const double* wc, const double* ws, int64_t k, const Get& get,
                               double* yr, double* yi) {
  const int64_t n = t.n_in < t.l ? t.n_in : t.l;
  const double sign = t.inverse ? 1.0 : -1.0;
  double re = 0, im = 0;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t m = (k * j) % t.l;
    const double c = wc[m], s = sign * ws[m];
    double a = 0, b = 0;
    get(j, &a, &b);
    re += a * c - b * s;
    im += a * s + b * c;
  }
  *yr = t.scale * re;
  *yi = t.scale * im;
}

// The adjoint at input j: dx[j] = scale * sum_k (dyr_k c + dyi_k s, -dyr_k s + dyi_k c) for j < min(n_in, l), 0 past
// l. get(k, &re, &im) reads dy[k].
template <typename Get>
ONNXAMP_HOST_DEVICE void AdjointAt(const Transform& t, const double* wc, const double* ws, int64_t j, const Get& get,
                                   double* dxr, double* dxi) {
  const int64_t n = t.n_in < t.l ? t.n_in : t.l;
  const double sign = t.inverse ? 1.0 : -1.0;
  double re = 0, im = 0;
  if (j < n) {
    for (int64_t k = 0; k < t.out_len; ++k) {
      const int64_t m = (k * j) % t.l;
      const double c = wc[m], s = sign * ws[m];
      double gr = 0, gi = 0;
      get(k, &gr, &gi);
      re += gr * c + gi * s;
      im += -gr * s + gi * c;
    }
  }
  *dxr = t.scale * re;
  *dxi = t.scale * im;
}

}  // namespace onnxamp::ops::spectral
