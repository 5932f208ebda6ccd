// Pooling (CPU): MaxPool (ceil_mode, dilations, storage_order, the optional Indices output), AveragePool
// (count_include_pad, ceil_mode, dilations), GlobalAveragePool and GlobalMaxPool, over X [N, C, D1..Dn].
//
// Windows skip the padding; AveragePool's divisor counts the window positions inside the input, or with
// count_include_pad those inside the explicitly padded input (a ceil-mode window past the end padding is not
// stretched), as ONNX Runtime and PyTorch do. Implementations: the plain loop (reference); the same pooling with
// per-dimension window bounds precomputed, split over the threads by channel (portable; up to 3 spatial dims);
// and oneDNN's pooling for float types when the Indices output is not requested; float MaxPool over 2 spatial dims
// whose windows all lie inside the input (training's usual case, with Indices) has a loop of its own. Averages
// accumulate in FP32 for fp16/bf16 and round once on store.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/common/cpu_features.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/conv_onednn.h"
#include "runtime/ops/common/elementwise_half.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_util.h"
#include "runtime/ops/common/nan_compare.h"
#include "runtime/ops/pool/pool.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "runtime/ops/common/max_nan_avx2.h"
#define ONNXAMP_POOL_AVX2 1
#endif

namespace onnxamp::ops {
namespace {

struct PoolSpec {
  bool max = true;
  bool count_include_pad = false;
  int64_t storage_order = 0;  // Indices: 0 row-major, 1 column-major
};

// Pools planes [begin, end) of x (each one image channel) into y (and indices when not null).
template <typename T>
void PoolPlanes(const PoolSpec& s, const WindowGeometry& g, const T* x, T* y, int64_t* indices, int64_t begin,
                int64_t end) {
  using C = ComputeType<T>;
  const size_t nsp = g.rank();
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.kernel_size();
  std::vector<int64_t> o(nsp), kk(nsp), pos(nsp);
  for (int64_t plane = begin; plane < end; ++plane) {
    const T* xp = x + plane * in_size;
    for (int64_t oi = 0; oi < out_size; ++oi) {
      UnravelIndex(oi, g.out, o);
      bool found = false;
      C best = 0;
      int64_t best_index = -1;
      AccumType<T> sum = 0;
      int64_t count = 0;
      for (int64_t ki = 0; ki < k_size; ++ki) {
        UnravelIndex(ki, g.kernel, kk);
        bool inside = true, in_padded = true;
        int64_t offset = 0;
        for (size_t d = 0; d < nsp; ++d) {
          pos[d] = o[d] * g.stride[d] - g.pad_begin[d] + kk[d] * g.dilation[d];
          inside = inside && pos[d] >= 0 && pos[d] < g.in[d];
          in_padded = in_padded && pos[d] < g.in[d] + g.pad_end[d];
          offset = offset * g.in[d] + pos[d];
        }
        if (!s.max && s.count_include_pad && in_padded) ++count;
        if (!inside) continue;
        const C v = Load<T>(xp[offset]);
        if (s.max) {
          bool take = !found || v > best;
          if constexpr (kIsFloatLike<T>) take = take || (std::isnan(v) && !std::isnan(best));
          if (take) {
            best = v;
            best_index = offset;
            found = true;
          }
        } else {
          sum += static_cast<AccumType<T>>(v);
          if (!s.count_include_pad) ++count;
        }
      }
      if (s.max) {
        if (!found) {
          best = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                      : std::numeric_limits<C>::lowest();
        }
        y[plane * out_size + oi] = Store<T>(best);
        if (indices) {
          int64_t index = best_index;
          if (found && s.storage_order == 1) {
            // Column-major: the first spatial dim varies fastest.
            std::vector<int64_t> c(nsp);
            UnravelIndex(best_index, g.in, c);
            index = 0;
            for (size_t d = nsp; d-- > 0;) index = index * g.in[d] + c[d];
          }
          indices[plane * out_size + oi] = found ? plane * in_size + index : -1;
        }
      } else {
        y[plane * out_size + oi] = Store<T>(static_cast<C>(sum / static_cast<AccumType<T>>(count)));
      }
    }
  }
}

// The same pooling with the window bounds worked out per dimension once, for up to 3 spatial dims (fewer are
// padded with unit dims): the loops over the window then touch only positions inside the input.
struct DimWindows {
  std::vector<int64_t> first, last;  // per output position: the kernel taps [first, last) that land inside
  std::vector<int64_t> padded;       // per output position: taps inside the explicitly padded input
  std::vector<int64_t> start;        // per output position: input position of tap 0
  int64_t in = 1, dilation = 1;
};

DimWindows MakeDimWindows(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                          int64_t pad_end) {
  DimWindows w;
  w.in = in;
  w.dilation = dilation;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * stride - pad_begin;
    int64_t first = kernel, last = 0, padded = 0;
    for (int64_t k = 0; k < kernel; ++k) {
      const int64_t pos = start + k * dilation;
      if (pos >= 0 && pos < in) {
        first = std::min(first, k);
        last = k + 1;
      }
      if (pos < in + pad_end) ++padded;
    }
    w.first.push_back(first);
    w.last.push_back(std::max(first, last));
    w.padded.push_back(padded);
    w.start.push_back(start);
  }
  return w;
}

bool FastPoolApplies(const WindowGeometry& g) { return g.rank() >= 1 && g.rank() <= 3; }

template <typename T>
void PoolPlanesFast(const PoolSpec& s, const WindowGeometry& g, const T* x, T* y, int64_t* indices, int64_t begin,
                    int64_t end) {
  using C = ComputeType<T>;
  // Dims padded to 3 at the front: (d, h, w).
  std::vector<DimWindows> dims;
  for (size_t pad = g.rank(); pad < 3; ++pad) dims.push_back(MakeDimWindows(1, 1, 1, 1, 1, 0, 0));
  for (size_t d = 0; d < g.rank(); ++d) {
    dims.push_back(
        MakeDimWindows(g.in[d], g.out[d], g.kernel[d], g.stride[d], g.dilation[d], g.pad_begin[d], g.pad_end[d]));
  }
  const DimWindows &wd = dims[0], &wh = dims[1], &ww = dims[2];
  const int64_t od_n = static_cast<int64_t>(wd.first.size()), oh_n = static_cast<int64_t>(wh.first.size()),
                ow_n = static_cast<int64_t>(ww.first.size());
  const int64_t in_size = wd.in * wh.in * ww.in, out_size = od_n * oh_n * ow_n;
  for (int64_t plane = begin; plane < end; ++plane) {
    const T* xp = x + plane * in_size;
    T* yp = y + plane * out_size;
    int64_t oi = 0;
    for (int64_t od = 0; od < od_n; ++od) {
      for (int64_t oh = 0; oh < oh_n; ++oh) {
        for (int64_t ow = 0; ow < ow_n; ++ow, ++oi) {
          bool found = false;
          C best = 0;
          int64_t best_index = -1;
          AccumType<T> sum = 0;
          for (int64_t kd = wd.first[od]; kd < wd.last[od]; ++kd) {
            const int64_t id = wd.start[od] + kd * wd.dilation;
            for (int64_t kh = wh.first[oh]; kh < wh.last[oh]; ++kh) {
              const int64_t ih = wh.start[oh] + kh * wh.dilation;
              const int64_t row = (id * wh.in + ih) * ww.in;
              for (int64_t kw = ww.first[ow]; kw < ww.last[ow]; ++kw) {
                const int64_t offset = row + ww.start[ow] + kw * ww.dilation;
                const C v = Load<T>(xp[offset]);
                if (s.max) {
                  bool take = !found || v > best;
                  if constexpr (kIsFloatLike<T>) take = take || (std::isnan(v) && !std::isnan(best));
                  if (take) {
                    best = v;
                    best_index = offset;
                    found = true;
                  }
                } else {
                  sum += static_cast<AccumType<T>>(v);
                }
              }
            }
          }
          if (s.max) {
            if (!found) {
              best = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                          : std::numeric_limits<C>::lowest();
            }
            yp[oi] = Store<T>(best);
            if (indices) {
              int64_t index = best_index;
              if (found && s.storage_order == 1) {
                const int64_t iw = index % ww.in, ih = (index / ww.in) % wh.in, id = index / (ww.in * wh.in);
                // Column-major over the real spatial dims: the first one varies fastest.
                index = g.rank() == 1 ? iw : g.rank() == 2 ? ih + iw * wh.in : id + ih * wd.in + iw * wd.in * wh.in;
              }
              indices[plane * out_size + oi] = found ? plane * in_size + index : -1;
            }
          } else {
            const int64_t count = s.count_include_pad ? wd.padded[od] * wh.padded[oh] * ww.padded[ow]
                                                      : (wd.last[od] - wd.first[od]) * (wh.last[oh] - wh.first[oh]) *
                                                            (ww.last[ow] - ww.first[ow]);
            yp[oi] = Store<T>(static_cast<C>(sum / static_cast<AccumType<T>>(count)));
          }
        }
      }
    }
  }
}

// MaxPool with 2 spatial dims whose windows all lie inside the input (no padding reached, no dilation): the most
// common case in training (with the Indices output, which oneDNN's pooling does not give). Visits a window's
// positions in PoolPlanesFast's order and takes the same maximum (the first of equal values; NaN wins).
bool MaxPool2dInteriorApplies(const WindowGeometry& g) {
  if (g.rank() != 2) return false;
  for (size_t d = 0; d < 2; ++d) {
    if (g.dilation[d] != 1 || g.pad_begin[d] != 0 || g.out[d] < 1 || g.kernel[d] < 1) return false;
    if ((g.out[d] - 1) * g.stride[d] + g.kernel[d] > g.in[d]) return false;
  }
  return true;
}

void MaxPool2dInterior(const WindowGeometry& g, const float* x, float* y, int64_t* indices, int64_t begin,
                       int64_t end) {
  const int64_t ih_n = g.in[0], iw_n = g.in[1], oh_n = g.out[0], ow_n = g.out[1];
  const int64_t kh_n = g.kernel[0], kw_n = g.kernel[1], sh = g.stride[0], sw = g.stride[1];
  const int64_t in_size = ih_n * iw_n, out_size = oh_n * ow_n;
  for (int64_t plane = begin; plane < end; ++plane) {
    const float* xp = x + plane * in_size;
    float* yp = y + plane * out_size;
    int64_t* ip = indices ? indices + plane * out_size : nullptr;
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        const int64_t first = oh * sh * iw_n + ow * sw;
        // Without NaN the first of the largest values is the result: selects (max and a conditional move) rather
        // than branches, as the comparisons of activations do not predict well. A window with a NaN takes the
        // first NaN, found again with the exact rule.
        float best = xp[first];
        int64_t best_index = first;
        bool nan = best != best;
        for (int64_t kh = 0; kh < kh_n; ++kh) {
          const int64_t row = first + kh * iw_n;
          for (int64_t kw = kh == 0 ? 1 : 0; kw < kw_n; ++kw) {
            const float v = xp[row + kw];
            best_index = v > best ? row + kw : best_index;
            best = v > best ? v : best;
            nan |= v != v;
          }
        }
        if (nan) {
          for (int64_t k = 0; k < kh_n * kw_n; ++k) {
            const int64_t at = first + (k / kw_n) * iw_n + k % kw_n;
            if (xp[at] != xp[at]) {
              best = xp[at];
              best_index = at;
              break;
            }
          }
        }
        yp[oh * ow_n + ow] = best;
        if (ip) ip[oh * ow_n + ow] = plane * in_size + best_index;
      }
    }
  }
}

// A thread's scratch buffer holds at least n floats; it never shrinks, so that pools of other sizes taking turns do
// not clear its regrown part on every run.
void GrowTo(std::vector<float>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
}

#ifdef ONNXAMP_POOL_AVX2
#define ONNXAMP_AVX2_TARGET __attribute__((target("avx2")))

// The floats p[0], p[2], ..., p[14] (the even lanes of two vectors, in order).
ONNXAMP_AVX2_TARGET inline __m256 EvenLanes(const float* p) {
  const __m256 lo = _mm256_loadu_ps(p), hi = _mm256_loadu_ps(p + 8);
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))),
                                                _MM_SHUFFLE(3, 1, 2, 0)));
}

// MaxPool2dInterior without Indices, vectorized: for each output row, the maximum over the kernel rows of the input
// columns the row reads (8 columns at a time), then over the kernel columns of that row maximum (8 outputs at a time
// for width strides 1 and 2). NaN wins, as in MaxPool2dInterior; of equal values it may keep another zero's sign.
ONNXAMP_AVX2_TARGET void MaxPool2dInteriorAvx2(const WindowGeometry& g, const float* x, float* y, int64_t begin,
                                               int64_t end) {
  const int64_t iw_n = g.in[1], oh_n = g.out[0], ow_n = g.out[1];
  const int64_t kh_n = g.kernel[0], kw_n = g.kernel[1], sh = g.stride[0], sw = g.stride[1];
  const int64_t in_size = g.in[0] * iw_n, out_size = oh_n * ow_n;
  const int64_t span = (ow_n - 1) * sw + kw_n;  // input columns one output row reads
  thread_local std::vector<float> rowmax;
  GrowTo(rowmax, span + 16);
  float* rm = rowmax.data();
  for (int64_t plane = begin; plane < end; ++plane) {
    const float* xp = x + plane * in_size;
    float* yp = y + plane * out_size;
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      const float* top = xp + oh * sh * iw_n;
      int64_t i = 0;
      for (; i + 8 <= span; i += 8) {
        __m256 m = _mm256_loadu_ps(top + i);
        for (int64_t kh = 1; kh < kh_n; ++kh) m = MaxNan(m, _mm256_loadu_ps(top + kh * iw_n + i));
        _mm256_storeu_ps(rm + i, m);
      }
      for (; i < span; ++i) {
        float m = top[i];
        for (int64_t kh = 1; kh < kh_n; ++kh) {
          const float v = top[kh * iw_n + i];
          if (nan_compare::Replaces<true>(v, m, false)) m = v;  // NaN wins, the first of equal values stays
        }
        rm[i] = m;
      }
      float* yr = yp + oh * ow_n;
      int64_t o = 0;
      if (sw == 1) {
        for (; o + 8 <= ow_n; o += 8) {
          __m256 m = _mm256_loadu_ps(rm + o);
          for (int64_t kw = 1; kw < kw_n; ++kw) m = MaxNan(m, _mm256_loadu_ps(rm + o + kw));
          _mm256_storeu_ps(yr + o, m);
        }
      } else if (sw == 2) {
        for (; o + 8 <= ow_n; o += 8) {
          // Columns 2 * (o + j) + kw for j = 0..7.
          __m256 m = EvenLanes(rm + 2 * o);
          for (int64_t kw = 1; kw < kw_n; ++kw) m = MaxNan(m, EvenLanes(rm + 2 * o + kw));
          _mm256_storeu_ps(yr + o, m);
        }
      }
      for (; o < ow_n; ++o) {
        float m = rm[o * sw];
        for (int64_t kw = 1; kw < kw_n; ++kw) {
          const float v = rm[o * sw + kw];
          if (nan_compare::Replaces<true>(v, m, false)) m = v;
        }
        yr[o] = m;
      }
    }
  }
}

// The first of the largest values of the window of output (oh, ow) clipped to the input (NaN wins: the first NaN),
// and its offset in the plane; -inf and -1 for a window with no input position (PoolPlanesFast's rule).
void MaxAtClipped(const WindowGeometry& g, const float* xp, int64_t oh, int64_t ow, float* value, int64_t* index) {
  const int64_t ih_n = g.in[0], iw_n = g.in[1];
  const int64_t ih0 = oh * g.stride[0] - g.pad_begin[0], iw0 = ow * g.stride[1] - g.pad_begin[1];
  const int64_t kh0 = std::max<int64_t>(0, -ih0), kh1 = std::min(g.kernel[0], ih_n - ih0);
  const int64_t kw0 = std::max<int64_t>(0, -iw0), kw1 = std::min(g.kernel[1], iw_n - iw0);
  bool found = false;
  float best = -std::numeric_limits<float>::infinity();
  int64_t best_index = -1;
  for (int64_t kh = kh0; kh < kh1; ++kh) {
    for (int64_t kw = kw0; kw < kw1; ++kw) {
      const int64_t at = (ih0 + kh) * iw_n + iw0 + kw;
      const float v = xp[at];
      if (!found || nan_compare::Replaces<true>(v, best, false)) {
        best = v;
        best_index = at;
        found = true;
      }
    }
  }
  *value = best;
  *index = best_index;
}

// The outputs [lo, hi) along one dim whose windows lie inside the input (lo == hi when none do).
void InsideRange(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad_begin, int64_t* lo, int64_t* hi) {
  *lo = std::min(out, (pad_begin + stride - 1) / stride);  // o * stride - pad_begin >= 0
  const int64_t last = in - kernel + pad_begin;            // o * stride - pad_begin + kernel <= in
  *hi = last < 0 ? *lo : std::max(*lo, std::min(out, last / stride + 1));
}

// 2-D MaxPool with Indices (storage_order 0), any pads, no dilation, width stride 1 or 2, on planes [begin, end):
// MaxAtClipped's maxima and indices exactly. Outputs whose windows lie inside the input go 8 at a time along a row
// (strict > keeps the first of equal values; a group with a NaN is redone by MaxAtClipped); the others, and groups
// whose vector loads would pass the plane's end, one at a time.
bool MaxPool2dIndicesAvx2Applies(const WindowGeometry& g) {
  return g.rank() == 2 && g.dilation[0] == 1 && g.dilation[1] == 1 && (g.stride[1] == 1 || g.stride[1] == 2) &&
         g.kernel[0] >= 1 && g.kernel[1] >= 1 && g.pad_begin[0] >= 0 && g.pad_begin[1] >= 0 && g.in[1] < (1 << 20) &&
         g.in[0] * g.in[1] < (int64_t{1} << 30);
}

ONNXAMP_AVX2_TARGET void MaxPool2dIndicesAvx2(const WindowGeometry& g, const float* x, float* y, int64_t* indices,
                                              int64_t begin, int64_t end) {
  const int64_t iw_n = g.in[1], oh_n = g.out[0], ow_n = g.out[1];
  const int64_t kh_n = g.kernel[0], kw_n = g.kernel[1], sh = g.stride[0], sw = g.stride[1];
  const int64_t ph = g.pad_begin[0], pw = g.pad_begin[1];
  const int64_t in_size = g.in[0] * iw_n, out_size = oh_n * ow_n;
  int64_t oh_lo, oh_hi, ow_lo, ow_hi;
  InsideRange(g.in[0], oh_n, kh_n, sh, ph, &oh_lo, &oh_hi);
  InsideRange(iw_n, ow_n, kw_n, sw, pw, &ow_lo, &ow_hi);
  // The floats a group of 8 reads past its first column in a row: 7 * sw + 1 columns, EvenLanes reading 16.
  const int64_t group_span = sw == 1 ? 8 : 16;
  const __m256i lane_step = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(int(sw)));
  for (int64_t plane = begin; plane < end; ++plane) {
    const float* xp = x + plane * in_size;
    float* yp = y + plane * out_size;
    int64_t* ip = indices + plane * out_size;
    const __m256i plane_base = _mm256_set1_epi64x(plane * in_size);
    auto one = [&](int64_t oh, int64_t ow) {
      float v;
      int64_t at;
      MaxAtClipped(g, xp, oh, ow, &v, &at);
      yp[oh * ow_n + ow] = v;
      ip[oh * ow_n + ow] = at < 0 ? -1 : plane * in_size + at;
    };
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      const bool inside_row = oh >= oh_lo && oh < oh_hi;
      int64_t ow = 0;
      if (inside_row) {
        for (; ow < ow_lo; ++ow) one(oh, ow);
        const int64_t row0 = (oh * sh - ph) * iw_n;
        for (; ow + 8 <= ow_hi; ow += 8) {
          const int64_t first = row0 + ow * sw - pw;  // the window of output ow starts here
          if (first + (kh_n - 1) * iw_n + kw_n - 1 + group_span > in_size) break;
          __m256 best = sw == 1 ? _mm256_loadu_ps(xp + first) : EvenLanes(xp + first);
          __m256i best_at = _mm256_add_epi32(lane_step, _mm256_set1_epi32(int(first)));
          __m256 nan = _mm256_cmp_ps(best, best, _CMP_UNORD_Q);
          for (int64_t kh = 0; kh < kh_n; ++kh) {
            for (int64_t kw = kh == 0 ? 1 : 0; kw < kw_n; ++kw) {
              const int64_t at = first + kh * iw_n + kw;
              const __m256 v = sw == 1 ? _mm256_loadu_ps(xp + at) : EvenLanes(xp + at);
              const __m256 gt = _mm256_cmp_ps(v, best, _CMP_GT_OQ);
              best = _mm256_blendv_ps(best, v, gt);
              best_at = _mm256_castps_si256(
                  _mm256_blendv_ps(_mm256_castsi256_ps(best_at),
                                   _mm256_castsi256_ps(_mm256_add_epi32(lane_step, _mm256_set1_epi32(int(at)))), gt));
              nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            }
          }
          float* yo = yp + oh * ow_n + ow;
          int64_t* io = ip + oh * ow_n + ow;
          _mm256_storeu_ps(yo, best);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(io),
                              _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(best_at)), plane_base));
          _mm256_storeu_si256(
              reinterpret_cast<__m256i*>(io + 4),
              _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(best_at, 1)), plane_base));
          if (const int lanes = _mm256_movemask_ps(nan)) {
            for (int j = 0; j < 8; ++j) {
              if (lanes & (1 << j)) one(oh, ow + j);
            }
          }
        }
      }
      for (; ow < ow_n; ++ow) one(oh, ow);
    }
  }
}
#endif

// Whether MaxPool2dBest takes a 2-D max pool: with Indices (storage_order 0) where the CPU has AVX2, any pads
// (MaxPool2dIndicesAvx2Applies); otherwise windows inside the input (MaxPool2dInteriorApplies).
bool MaxPool2dBestApplies(const WindowGeometry& g, bool indices) {
#ifdef ONNXAMP_POOL_AVX2
  if (indices && CpuHasAvx2() && MaxPool2dIndicesAvx2Applies(g)) return true;
#endif
  return MaxPool2dInteriorApplies(g);
}

// On planes [begin, end): with Indices, MaxPool2dIndicesAvx2 where the CPU has AVX2; without, MaxPool2dInteriorAvx2;
// else MaxPool2dInterior.
void MaxPool2dBest(const WindowGeometry& g, const float* x, float* y, int64_t* indices, int64_t begin, int64_t end) {
#ifdef ONNXAMP_POOL_AVX2
  if (indices && CpuHasAvx2() && MaxPool2dIndicesAvx2Applies(g))
    return MaxPool2dIndicesAvx2(g, x, y, indices, begin, end);
  if (!indices && CpuHasAvx2()) return MaxPool2dInteriorAvx2(g, x, y, begin, end);
#endif
  MaxPool2dInterior(g, x, y, indices, begin, end);
}

// MaxPool2dBest on fp16/bf16 planes [begin, end): each plane widened to float (exact), pooled, narrowed back
// (exact: the maxima are input values). The same maxima and Indices as the 16-bit loop, at the float loop's speed.
template <typename T>
void MaxPool2dWidened(const WindowGeometry& g, const T* x, T* y, int64_t* indices, int64_t begin, int64_t end) {
  thread_local std::vector<float> in, out;
  const int64_t in_size = g.in[0] * g.in[1], out_size = g.out[0] * g.out[1];
  GrowTo(in, in_size);
  GrowTo(out, out_size);
  for (int64_t plane = begin; plane < end; ++plane) {
    LoadBlock(x + plane * in_size, in.data(), in_size);
    int64_t* ip = indices ? indices + plane * out_size : nullptr;
    MaxPool2dBest(g, in.data(), out.data(), ip, 0, 1);
    StoreBlock(out.data(), y + plane * out_size, out_size);
    if (ip) {
      for (int64_t i = 0; i < out_size; ++i) {
        if (ip[i] >= 0) ip[i] += plane * in_size;  // indices count from the first plane; -1 (no input) stays
      }
    }
  }
}

class PoolCpu : public exec::OpKernel {
 public:
  PoolCpu(const exec::KernelInfo& info, bool max, Status* st) : impl_(LinalgImplFor(info)) {
    if (!(*st = ParsePoolAttrs(info.node, max, &pool_)).ok()) return;
    spec_.max = max;
    spec_.storage_order = pool_.storage_order;
    spec_.count_include_pad = pool_.count_include_pad;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    WindowGeometry g;
    std::vector<int64_t> out_dims;
    ONNXAMP_RETURN_IF_ERROR(ResolvePool(pool_, x, &g, &out_dims));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_dims));
    int64_t* indices = nullptr;
    if (spec_.max && ctx.num_outputs() > 1 && ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * ind, ctx.AllocateOutput(1, DType::kInt64, out_dims));
      indices = ind->mutable_values<int64_t>().data();
    }
    if (y->num_elements() == 0) return Status::Ok();
    const int64_t planes = x->dims()[0] * x->dims()[1];
    auto run = [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x->values<T>().data();
      T* py = y->mutable_values<T>().data();
      if constexpr (kIsFloatLike<T> && !std::is_same_v<T, double>) {
        // Max pooling whose windows lie inside the input takes its own loop before oneDNN: oneDNN 2.6's pooling on
        // the plain layout is far slower (models/cnn.onnx's 2x2 pool at batch 32, AMD EPYC: 15.7 ms against 0.2 ms
        // for the vectorized loop; the blocked layout's pooling is another kernel). So does max pooling with Indices
        // (training's) on AVX2, padded too (ResNet-50's 3x3 stem pool at batch 8: 55 ms in PoolPlanesFast).
        // fp16/bf16 planes are widened to float for it.
        if (impl_ != LinalgImpl::kReference && spec_.max && (spec_.storage_order == 0 || !indices) &&
            MaxPool2dBestApplies(g, indices != nullptr)) {
          ctx.threads().ParallelFor(planes, 1, [&](int64_t b, int64_t e) {
            if constexpr (std::is_same_v<T, float>) {
              MaxPool2dBest(g, px, py, indices, b, e);
            } else {
              MaxPool2dWidened(g, px, py, indices, b, e);
            }
          });
          return Status::Ok();
        }
        if (impl_ == LinalgImpl::kOneDnn && !indices && OneDnnPool::Supported(g) && OneDnnFits(g)) {
          return RunOneDnn<T>(ctx.threads(), x->dims()[0], x->dims()[1], g, px, py, x->num_elements(),
                              y->num_elements());
        }
      }
      if (impl_ == LinalgImpl::kReference) {
        PoolPlanes(spec_, g, px, py, indices, 0, planes);
      } else {
        const bool fast = FastPoolApplies(g);
        ctx.threads().ParallelFor(planes, 1, [&](int64_t b, int64_t e) {
          fast ? PoolPlanesFast(spec_, g, px, py, indices, b, e) : PoolPlanes(spec_, g, px, py, indices, b, e);
        });
      }
      return Status::Ok();
    };
    if (spec_.max) {
      if (x->dtype() == DType::kInt8) return run(TypeTag<int8_t>{});
      if (x->dtype() == DType::kUint8) return run(TypeTag<uint8_t>{});
    }
    return DispatchFloat(x->dtype(), run);
  }

 private:
  // oneDNN's average with padding always divides by the kernel size: equal to ours unless a ceil-mode window
  // reaches past the end padding.
  bool OneDnnFits(const WindowGeometry& g) const {
    if (spec_.max || !spec_.count_include_pad) return true;
    for (size_t d = 0; d < g.rank(); ++d) {
      const int64_t k_eff = (g.kernel[d] - 1) * g.dilation[d] + 1;
      if ((g.out[d] - 1) * g.stride[d] + k_eff > g.in[d] + g.pad_begin[d] + g.pad_end[d]) return false;
    }
    return true;
  }

  template <typename T>
  Status RunOneDnn(exec::ThreadPool& threads, int64_t n, int64_t c, const WindowGeometry& g, const T* x, T* y,
                   int64_t x_count, int64_t y_count) const {
    const PoolKind kind = spec_.max                 ? PoolKind::kMax
                          : spec_.count_include_pad ? PoolKind::kAverageIncludePad
                                                    : PoolKind::kAverageExcludePad;
    if constexpr (std::is_same_v<T, float>) {
      return onednn_.Run(kind, n, c, g, x, y, threads);
    } else {
      std::vector<float> fx(static_cast<size_t>(x_count)), fy(static_cast<size_t>(y_count));
      ConvertToFloat(x, fx.data(), x_count, threads);
      const Status st = onednn_.Run(kind, n, c, g, fx.data(), fy.data(), threads);
      if (!st.ok()) return st;
      ConvertFromFloat(fy.data(), y, y_count, threads);
      return Status::Ok();
    }
  }

  PoolSpec spec_;
  PoolAttrs pool_;
  LinalgImpl impl_;
  OneDnnPool onednn_;
};

class MaxPoolCpu : public PoolCpu {
 public:
  MaxPoolCpu(const exec::KernelInfo& info, Status* st) : PoolCpu(info, true, st) {}
};

class AveragePoolCpu : public PoolCpu {
 public:
  AveragePoolCpu(const exec::KernelInfo& info, Status* st) : PoolCpu(info, false, st) {}
};

// GlobalAveragePool / GlobalMaxPool: one value per (image, channel) over all spatial positions.
class GlobalPoolCpu : public exec::OpKernel {
 public:
  GlobalPoolCpu(const exec::KernelInfo& info, bool max) : max_(max), impl_(LinalgImplFor(info)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    std::vector<int64_t> out_dims;
    int64_t planes = 0, size = 0;
    ONNXAMP_RETURN_IF_ERROR(ResolveGlobalPool(x, &out_dims, &planes, &size));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_dims));
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x->values<T>().data();
      T* py = y->mutable_values<T>().data();
      auto pool = [&](int64_t begin, int64_t end) {
        for (int64_t plane = begin; plane < end; ++plane) {
          const T* p = px + plane * size;
          py[plane] = Store<T>(max_ ? Max(p, size) : static_cast<ComputeType<T>>(Sum(p, size) / size));
        }
      };
      if (impl_ == LinalgImpl::kReference) {
        pool(0, planes);
      } else {
        ctx.threads().ParallelFor(planes, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(size, 1)), pool);
      }
      return Status::Ok();
    });
  }

 private:
  // fp16/bf16 planes are read in blocks converted with the vector conversions (ForEachComputeBlock); one element at
  // a time costs 40 times more than the float plane.
  template <typename T>
  ComputeType<T> Max(const T* p, int64_t size) const {
    ComputeType<T> best = Load<T>(p[0]);
    ForEachComputeBlock(p, size, [&](const ComputeType<T>* v, int64_t, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        if (v[i] > best || (std::isnan(v[i]) && !std::isnan(best))) best = v[i];
      }
      return true;
    });
    return best;
  }

  // The reference adds in order; the other modes keep eight partial sums (which the compiler vectorizes).
  template <typename T>
  AccumType<T> Sum(const T* p, int64_t size) const {
    using A = AccumType<T>;
    if (impl_ == LinalgImpl::kReference) {
      A sum = 0;
      for (int64_t i = 0; i < size; ++i) sum += Load<T>(p[i]);
      return sum;
    }
    A part[8] = {};
    ForEachComputeBlock(p, size, [&](const ComputeType<T>* v, int64_t, int64_t n) {
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) part[j] += v[i + j];
      for (; i < n; ++i) part[0] += v[i];
      return true;
    });
    return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  }

  bool max_;
  LinalgImpl impl_;
};

class GlobalAveragePoolCpu : public GlobalPoolCpu {
 public:
  GlobalAveragePoolCpu(const exec::KernelInfo& info, Status*) : GlobalPoolCpu(info, false) {}
};

class GlobalMaxPoolCpu : public GlobalPoolCpu {
 public:
  GlobalMaxPoolCpu(const exec::KernelInfo& info, Status*) : GlobalPoolCpu(info, true) {}
};

}  // namespace

void RegisterPoolKernels(exec::KernelRegistry& r) {
  const std::vector<DType> floats = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  std::vector<DType> max_types = floats;
  max_types.push_back(DType::kInt8);
  max_types.push_back(DType::kUint8);
  // One kernel per op for every opset. MaxPool: 8 adds storage_order and Indices, 10 ceil_mode and dilations, 12
  // int8/uint8. AveragePool: 7 adds count_include_pad, 10 ceil_mode, 19 dilations. Global pools: unchanged.
  r.Register({"MaxPool", "", 1, 23, exec::Device::kCpu, max_types, 0, &exec::MakeKernel<MaxPoolCpu>});
  r.Register({"AveragePool", "", 1, 23, exec::Device::kCpu, floats, 0, &exec::MakeKernel<AveragePoolCpu>});
  r.Register({"GlobalAveragePool", "", 1, 23, exec::Device::kCpu, floats, 0, &exec::MakeKernel<GlobalAveragePoolCpu>});
  r.Register({"GlobalMaxPool", "", 1, 23, exec::Device::kCpu, floats, 0, &exec::MakeKernel<GlobalMaxPoolCpu>});
}

}  // namespace onnxamp::ops
