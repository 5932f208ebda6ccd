// The default LSTM cell, one row at a time (see lstm_cell.h).
#include "runtime/ops/rnn/lstm_cell.h"

#include "runtime/common/cpu_features.h"
#include "runtime/ops/common/elementwise_math.h"

namespace onnxamp::ops::rnn {
namespace {

#if defined(__GNUC__)
#define ONNXAMP_CELL_INLINE inline __attribute__((always_inline))
#else
#define ONNXAMP_CELL_INLINE inline
#endif

// The loops, inlined into one function per instruction set so that each is vectorized for its target.
ONNXAMP_CELL_INLINE void Forward(const float* __restrict xg, const float* __restrict hg, const float* __restrict p,
                                 float* __restrict c, float* __restrict h, float* __restrict z, int64_t H) {
  for (int64_t j = 0; j < H; ++j) {
    const float zi = xg[j] + hg[j] + p[j] * c[j];
    const float zf = xg[2 * H + j] + hg[2 * H + j] + p[2 * H + j] * c[j];
    const float zc = xg[3 * H + j] + hg[3 * H + j];
    const float cell = FastSigmoid(zf) * c[j] + FastSigmoid(zi) * FastTanh(zc);
    const float zo = xg[H + j] + hg[H + j] + p[H + j] * cell;
    c[j] = cell;
    h[j] = FastSigmoid(zo) * FastTanh(cell);
    z[j] = zi;
    z[H + j] = zo;
    z[2 * H + j] = zf;
    z[3 * H + j] = zc;
  }
}

// The derivatives from the values: s (1 - s) for the sigmoids, 1 - t^2 for the tanhs.
ONNXAMP_CELL_INLINE void Backward(const float* __restrict z, const float* __restrict c, const float* __restrict cp,
                                  const float* __restrict p, const float* __restrict dh, float* __restrict dc,
                                  float* __restrict dp, float* __restrict dz, int64_t H) {
  for (int64_t j = 0; j < H; ++j) {
    const float i = FastSigmoid(z[j]), o = FastSigmoid(z[H + j]), f = FastSigmoid(z[2 * H + j]);
    const float g = FastTanh(z[3 * H + j]), hc = FastTanh(c[j]);
    const float dzo = dh[j] * hc * (o * (1.0f - o));
    const float dcell = dc[j] + dh[j] * o * (1.0f - hc * hc) + dzo * p[H + j];
    const float dzi = dcell * g * (i * (1.0f - i));
    const float dzf = dcell * cp[j] * (f * (1.0f - f));
    const float dzc = dcell * i * (1.0f - g * g);
    dc[j] = dcell * f + dzi * p[j] + dzf * p[2 * H + j];
    dp[j] += dzi * cp[j];
    dp[H + j] += dzo * c[j];
    dp[2 * H + j] += dzf * cp[j];
    dz[j] = dzi;
    dz[H + j] = dzo;
    dz[2 * H + j] = dzf;
    dz[3 * H + j] = dzc;
  }
}

#define ONNXAMP_CELL_FUNCTIONS(Suffix, Attributes)                                                                    \
  Attributes void Forward##Suffix(const LstmRowForward& r, int64_t H) { Forward(r.xg, r.hg, r.p, r.c, r.h, r.z, H); } \
  Attributes void Backward##Suffix(const LstmRowBackward& r, int64_t H) {                                             \
    Backward(r.z, r.c, r.cp, r.p, r.dh, r.dc, r.dp, r.dz, H);                                                         \
  }

ONNXAMP_CELL_FUNCTIONS(Baseline, )
#if defined(__x86_64__) && defined(__GNUC__)
ONNXAMP_CELL_FUNCTIONS(Avx2, __attribute__((target("avx2,fma"))))
#if defined(__clang__)
ONNXAMP_CELL_FUNCTIONS(Avx512, __attribute__((target("avx512f,avx2,fma"))))
#else
ONNXAMP_CELL_FUNCTIONS(Avx512, __attribute__((target("avx512f,avx2,fma,prefer-vector-width=512"))))
#endif
#endif
#undef ONNXAMP_CELL_FUNCTIONS

using ForwardFn = void (*)(const LstmRowForward&, int64_t);
using BackwardFn = void (*)(const LstmRowBackward&, int64_t);

struct Kernels {
  ForwardFn forward = ForwardBaseline;
  BackwardFn backward = BackwardBaseline;
};

const Kernels& Chosen() {
  static const Kernels k = [] {
    Kernels out;
#if defined(__x86_64__) && defined(__GNUC__)
    if (CpuHasAvx512F()) {
      out = {ForwardAvx512, BackwardAvx512};
    } else if (CpuHasAvx2Fma()) {
      out = {ForwardAvx2, BackwardAvx2};
    }
#endif
    return out;
  }();
  return k;
}

}  // namespace

void LstmCellForward(const LstmRowForward& row, int64_t hidden) { Chosen().forward(row, hidden); }
void LstmCellBackward(const LstmRowBackward& row, int64_t hidden) { Chosen().backward(row, hidden); }

}  // namespace onnxamp::ops::rnn
