// The default LSTM and GRU cells, one row at a time (see rnn_cells.h).
#include "runtime/ops/rnn/rnn_cells.h"

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
                                  float* __restrict dz, int64_t H) {
  for (int64_t j = 0; j < H; ++j) {
    const float i = FastSigmoid(z[j]), o = FastSigmoid(z[H + j]), f = FastSigmoid(z[2 * H + j]);
    const float g = FastTanh(z[3 * H + j]), hc = FastTanh(c[j]);
    const float dzo = dh[j] * hc * (o * (1.0f - o));
    const float dcell = dc[j] + dh[j] * o * (1.0f - hc * hc) + dzo * p[H + j];
    const float dzi = dcell * g * (i * (1.0f - i));
    const float dzf = dcell * cp[j] * (f * (1.0f - f));
    const float dzc = dcell * i * (1.0f - g * g);
    dc[j] = dcell * f + dzi * p[j] + dzf * p[2 * H + j];
    dz[j] = dzi;
    dz[H + j] = dzo;
    dz[2 * H + j] = dzf;
    dz[3 * H + j] = dzc;
  }
}

ONNXAMP_CELL_INLINE void GruForward(const float* __restrict xg, const float* __restrict hg, const float* __restrict rb,
                                    float* __restrict h, float* __restrict z, float* __restrict q, int64_t H) {
  for (int64_t j = 0; j < H; ++j) {
    const float zu = xg[j] + hg[j], zr = xg[H + j] + hg[H + j];
    const float linear = hg[2 * H + j] + rb[2 * H + j];
    const float zc = xg[2 * H + j] + FastSigmoid(zr) * linear;
    const float update = FastSigmoid(zu);
    h[j] = (1.0f - update) * FastTanh(zc) + update * h[j];
    z[j] = zu;
    z[H + j] = zr;
    z[2 * H + j] = zc;
    q[j] = linear;
  }
}

ONNXAMP_CELL_INLINE void GruBackward(const float* __restrict z, const float* __restrict q, const float* __restrict hp,
                                     const float* __restrict dh, float* __restrict dz, float* __restrict direct,
                                     float* __restrict dxh, int64_t H) {
  for (int64_t j = 0; j < H; ++j) {
    const float update = FastSigmoid(z[j]), reset = FastSigmoid(z[H + j]), cand = FastTanh(z[2 * H + j]);
    const float dzh = dh[j] * (1.0f - update) * (1.0f - cand * cand);
    direct[j] = dh[j] * update;
    dz[j] = dh[j] * (hp[j] - cand) * (update * (1.0f - update));
    dz[H + j] = dzh * q[j] * (reset * (1.0f - reset));
    dz[2 * H + j] = dzh * reset;
    dxh[j] = dzh;
  }
}

#define ONNXAMP_CELL_FUNCTIONS(Suffix, Attributes)                                                                    \
  Attributes void Forward##Suffix(const LstmRowForward& r, int64_t H) { Forward(r.xg, r.hg, r.p, r.c, r.h, r.z, H); } \
  Attributes void Backward##Suffix(const LstmRowBackward& r, int64_t H) {                                             \
    Backward(r.z, r.c, r.cp, r.p, r.dh, r.dc, r.dz, H);                                                               \
  }                                                                                                                   \
  Attributes void GruForward##Suffix(const GruRowForward& r, int64_t H) {                                             \
    GruForward(r.xg, r.hg, r.rb, r.h, r.z, r.q, H);                                                                   \
  }                                                                                                                   \
  Attributes void GruBackward##Suffix(const GruRowBackward& r, int64_t H) {                                           \
    GruBackward(r.z, r.q, r.hp, r.dh, r.dz, r.direct, r.dxh, H);                                                      \
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

struct Kernels {
  void (*forward)(const LstmRowForward&, int64_t) = ForwardBaseline;
  void (*backward)(const LstmRowBackward&, int64_t) = BackwardBaseline;
  void (*gru_forward)(const GruRowForward&, int64_t) = GruForwardBaseline;
  void (*gru_backward)(const GruRowBackward&, int64_t) = GruBackwardBaseline;
};

const Kernels& Chosen() {
  static const Kernels k = [] {
    Kernels out;
#if defined(__x86_64__) && defined(__GNUC__)
    if (CpuHasAvx512F()) {
      out = {ForwardAvx512, BackwardAvx512, GruForwardAvx512, GruBackwardAvx512};
    } else if (CpuHasAvx2Fma()) {
      out = {ForwardAvx2, BackwardAvx2, GruForwardAvx2, GruBackwardAvx2};
    }
#endif
    return out;
  }();
  return k;
}

}  // namespace

void LstmCellForward(const LstmRowForward& row, int64_t hidden) { Chosen().forward(row, hidden); }
void LstmCellBackward(const LstmRowBackward& row, int64_t hidden) { Chosen().backward(row, hidden); }
void GruCellForward(const GruRowForward& row, int64_t hidden) { Chosen().gru_forward(row, hidden); }
void GruCellBackward(const GruRowBackward& row, int64_t hidden) { Chosen().gru_backward(row, hidden); }

}  // namespace onnxamp::ops::rnn
