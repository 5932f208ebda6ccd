// Max pooling on the blocked channel layout with AVX2 (see blocked_pool_avx2.h).
//
// Geometry: 1 to 3 spatial dims are seen as 3 (missing leading dims of size 1). For every dim and output index the
// window's first input position and its number of positions inside the input are worked out once per call, so the
// inner loops visit only valid positions and never test for padding. One task pools one output row (all positions
// along the last spatial dim) of one (image, channel block); rows are split over the thread pool.
#include "runtime/ops/layout/blocked_pool_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "runtime/common/cpu_features.h"
#include "runtime/ops/common/max_nan_avx2.h"

#define ONNXAMP_AVX2_TARGET __attribute__((target("avx2")))

namespace onnxamp::ops {
namespace {

// The input positions of one window along one dim: first, first + dilation, ... (count of them, all inside).
struct Span {
  int64_t first = 0;
  int64_t count = 0;
};

// The geometry as 3 spatial dims, with each dim's windows resolved.
struct Geometry3 {
  std::array<int64_t, 3> in{}, out{}, dilation{};
  std::array<std::vector<Span>, 3> spans;
};

Geometry3 Resolve3(const WindowGeometry& g) {
  Geometry3 r;
  const size_t lead = 3 - g.rank();
  for (size_t d = 0; d < 3; ++d) {
    std::vector<Span>& spans = r.spans[d];
    if (d < lead) {
      r.in[d] = r.out[d] = r.dilation[d] = 1;
      spans.assign(1, Span{0, 1});
      continue;
    }
    const size_t s = d - lead;
    r.in[d] = g.in[s];
    r.out[d] = g.out[s];
    r.dilation[d] = g.dilation[s];
    spans.assign(g.out[s], Span{});
    for (int64_t o = 0; o < g.out[s]; ++o) {
      Span& span = spans[o];
      for (int64_t k = 0; k < g.kernel[s]; ++k) {
        // Positions grow with k, so those inside the input are consecutive taps.
        const int64_t pos = o * g.stride[s] - g.pad_begin[s] + k * g.dilation[s];
        if (pos < 0 || pos >= g.in[s]) continue;
        if (span.count++ == 0) span.first = pos;
      }
    }
  }
  return r;
}

// Pools output rows [begin, end) (row = ((image * cb + block) * out_d + od) * out_h + oh); kV vectors per position
// (block = 8 * kV).
template <int kV>
ONNXAMP_AVX2_TARGET void PoolRows(const Geometry3& g, const float* x, float* y, int64_t begin, int64_t end) {
  constexpr int64_t kB = 8 * kV;
  const int64_t out_d = g.out[0], out_h = g.out[1], out_w = g.out[2];
  // Strides in floats of one step along each input dim, and of one tap (a dilation) along each.
  const int64_t step_w = kB, step_h = g.in[2] * step_w, step_d = g.in[1] * step_h, in_plane = g.in[0] * step_d;
  const int64_t tap_d = g.dilation[0] * step_d, tap_h = g.dilation[1] * step_h, tap_w = g.dilation[2] * step_w;
  const Span* spans_w = g.spans[2].data();
  const __m256 lowest = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t row = begin; row < end; ++row) {
    const int64_t oh = row % out_h, od = (row / out_h) % out_d, plane = row / (out_h * out_d);
    const Span sd = g.spans[0][od], sh = g.spans[1][oh];
    const float* xr = x + plane * in_plane + sd.first * step_d + sh.first * step_h;
    float* yr = y + row * out_w * kB;
    for (int64_t ow = 0; ow < out_w; ++ow) {
      const Span sw = spans_w[ow];
      __m256 best[kV];
      for (int v = 0; v < kV; ++v) best[v] = lowest;
      const float* xw = xr + sw.first * step_w;
      for (int64_t kd = 0; kd < sd.count; ++kd) {
        for (int64_t kh = 0; kh < sh.count; ++kh) {
          const float* p = xw + kd * tap_d + kh * tap_h;
          for (int64_t kw = 0; kw < sw.count; ++kw, p += tap_w) {
            for (int v = 0; v < kV; ++v) best[v] = MaxNan(best[v], _mm256_loadu_ps(p + 8 * v));
          }
        }
      }
      for (int v = 0; v < kV; ++v) _mm256_storeu_ps(yr + ow * kB + 8 * v, best[v]);
    }
  }
}

}  // namespace

bool BlockedMaxPoolAvx2Applies(const WindowGeometry& g, int64_t block) {
  if (!CpuHasAvx2() || (block != 8 && block != 16) || g.rank() < 1 || g.rank() > 3) return false;
  const Geometry3 r = Resolve3(g);
  for (const std::vector<Span>& spans : r.spans) {
    for (const Span& s : spans) {
      if (s.count == 0) return false;
    }
  }
  return true;
}

void BlockedMaxPoolAvx2(const WindowGeometry& g, int64_t n, int64_t cb, int64_t block, const float* x, float* y,
                        exec::ThreadPool& threads) {
  const Geometry3 r = Resolve3(g);
  const int64_t rows = n * cb * r.out[0] * r.out[1];
  if (rows == 0 || r.out[2] == 0) return;
  // Rows per task: about 16K floats of window reads each, so that a small pooling stays on the calling thread.
  const int64_t row_reads = std::max<int64_t>(1, r.out[2] * g.kernel_size() * block);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / row_reads);
  threads.ParallelFor(rows, grain, [&](int64_t begin, int64_t end) {
    if (block == 8) {
      PoolRows<1>(r, x, y, begin, end);
    } else {
      PoolRows<2>(r, x, y, begin, end);
    }
  });
}

}  // namespace onnxamp::ops
