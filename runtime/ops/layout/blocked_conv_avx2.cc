// The direct blocked convolution with AVX2 (see blocked_conv_avx2.h).
//
// Work is split by output rows (image, row) into ranges, a few per thread, that the threads take in turn. For a range
// a thread copies the input rows the range reads into a buffer with the left and right padding as zero columns
// (skipped when the convolution reads no padding along the width), so the register kernel never tests a position:
// along the height, each output row runs only the kernel rows that fall inside the input. The buffer keeps X's
// layout: blocked [Cb, rows, width, 8] or plain [C, rows, width].
//
// For each output row, each pair of output channel blocks (the input rows the output row reads stay in cache across
// the pairs) and each tile of up to 6 positions of that row, the register kernel sums over kernel taps and input
// channels: per input channel one or two weight vectors and one broadcast input per position. A row's positions are
// cut into tiles of nearly equal length (16 positions: 6, 5, 5; 8: 4, 4) so that no tile is left with one or two
// accumulators' worth of work.
#include "runtime/ops/layout/blocked_conv_avx2.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <utility>

#include "runtime/common/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ONNXAMP_CONV_AVX2_KERNELS 1
#define ONNXAMP_AVX2_TARGET __attribute__((target("avx2,fma")))
#endif

namespace onnxamp::ops {
namespace {

constexpr int64_t kBlock = 8;            // channels per block of X (when blocked), Y and Z
constexpr int64_t kPairLanes = 16;       // output channels per pair of blocks
constexpr int kMaxTile = 6;              // output positions per register tile
constexpr int64_t kMaxChannels = 128;    // most input channels (see BlockedConvAvx2Applies)
constexpr int64_t kRangesPerThread = 4;  // ranges of output rows per thread (see RunAll)
constexpr int64_t kMinSteps = 64;  // fewest input channel x kernel tap steps per output (see BlockedConvAvx2Applies)

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The convolution's sizes, 2-D.
struct Shape2 {
  int64_t n, c, m, h, w, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow;
  int64_t mb() const { return CeilDiv(m, kBlock); }
  int64_t pairs() const { return CeilDiv(mb(), 2); }
};

Shape2 ShapeOf(const ConvProblem& p) {
  const WindowGeometry& g = p.geo;
  return Shape2{p.n,         p.c,         p.m,           g.in[0],       g.in[1],        g.kernel[0],    g.kernel[1],
                g.stride[0], g.stride[1], g.dilation[0], g.dilation[1], g.pad_begin[0], g.pad_begin[1], g.out[0],
                g.out[1]};
}

#ifdef ONNXAMP_CONV_AVX2_KERNELS

// Where the kernel reads X: element (channel block cb or plain channel, buffer row r, buffer column q, lane l) is at
// base[cb * plane + r * row + q * kLanes + l]; buffer column q holds input column q - left (zeros outside the input),
// buffer row r input row r + row0.
struct Source {
  const float* base;
  int64_t plane, row, row0, left;
};

// What a tile adds before its store: the pair's bias, Z (same layout as Y) and ReLU.
struct Epilogue {
  const float* bias;  // 16 floats of the pair
  bool relu;
  int64_t out_plane;  // floats between output blocks of one image
};

// One register tile: kOcb (1 or 2) output blocks at kP positions of an output row; xrow points at the first position's
// first tap in kernel row kh0 (null when kh1 == kh0: no row inside the input), for rows kh0..kh1-1. The lanes past m
// of the last output block (rem of them real; mask_first / mask_second say which block that is) are stored as zeros.
// kLanes is 8 for blocked X (a block's 8 channels per position), 1 for plain X; kStep the floats between the inputs of
// consecutive output positions.
template <int kLanes, int kStep, int kOcb, int kP>
ONNXAMP_AVX2_TARGET void Tile(const Shape2& s, const Source& src, int64_t c_loops, const float* xrow, int64_t kh0,
                              int64_t kh1, const float* wpair, const Epilogue& e, const float* z, float* y, int rem,
                              bool mask_first, bool mask_second) {
  __m256 acc[kOcb][kP];
#pragma GCC unroll 6
  for (int t = 0; t < kP; ++t) {
#pragma GCC unroll 2
    for (int j = 0; j < kOcb; ++j) acc[j][t] = _mm256_setzero_ps();
  }
  const int64_t tap_floats = s.kw * c_loops * kLanes * kPairLanes;  // weights of one kernel row
  const float* wrow = wpair + kh0 * tap_floats;
  for (int64_t kh = kh0; kh < kh1; ++kh, xrow += s.dh * src.row, wrow += tap_floats) {
    const float* wk = wrow;
    for (int64_t kw = 0; kw < s.kw; ++kw) {
      const float* xc = xrow + kw * s.dw * kLanes;
      for (int64_t cb = 0; cb < c_loops; ++cb, xc += src.plane) {
        const float* xl = xc;
#pragma GCC unroll 2
        for (int l = 0; l < kLanes; ++l, ++xl, wk += kPairLanes) {
          const __m256 w0 = _mm256_loadu_ps(wk);
          const __m256 w1 = kOcb == 2 ? _mm256_loadu_ps(wk + 8) : w0;
#pragma GCC unroll 6
          for (int t = 0; t < kP; ++t) {
            const __m256 x = _mm256_broadcast_ss(xl + t * kStep);
            acc[0][t] = _mm256_fmadd_ps(x, w0, acc[0][t]);
            if constexpr (kOcb == 2) acc[kOcb - 1][t] = _mm256_fmadd_ps(x, w1, acc[kOcb - 1][t]);
          }
        }
      }
    }
  }
  const __m256 zero = _mm256_setzero_ps();
  const __m256 last_mask =
      _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
#pragma GCC unroll 2
  for (int j = 0; j < kOcb; ++j) {
    const __m256 b = _mm256_loadu_ps(e.bias + j * kBlock);
    const bool mask = j == 0 ? mask_first : mask_second;
#pragma GCC unroll 6
    for (int t = 0; t < kP; ++t) {
      __m256 v = _mm256_add_ps(acc[j][t], b);
      if (z) v = _mm256_add_ps(v, _mm256_loadu_ps(z + j * e.out_plane + t * kBlock));
      // max(0, v) keeps a NaN (the second operand wins when either is NaN), as the reference ReLU does.
      if (e.relu) v = _mm256_max_ps(zero, v);
      // The lanes past m hold zeros, as the layout defines them (a weight of 0 times an infinite input is NaN).
      if (mask) v = _mm256_and_ps(v, last_mask);
      _mm256_storeu_ps(y + j * e.out_plane + t * kBlock, v);
    }
  }
}

template <int kLanes, int kStep>
struct Tiles {
  using Fn = void (*)(const Shape2&, const Source&, int64_t, const float*, int64_t, int64_t, const float*,
                      const Epilogue&, const float*, float*, int, bool, bool);
  template <int kOcb, int... kP>
  static constexpr std::array<Fn, kMaxTile> Row(std::integer_sequence<int, kP...>) {
    return {&Tile<kLanes, kStep, kOcb, kP + 1>...};
  }
  static constexpr std::array<std::array<Fn, kMaxTile>, 2> kTable = {
      Row<1>(std::make_integer_sequence<int, kMaxTile>{}), Row<2>(std::make_integer_sequence<int, kMaxTile>{})};
};

// Copies input rows [r0, r1) of image `img` into `buffer` with `left` and `right` zero columns, in X's layout.
template <int kLanes>
ONNXAMP_AVX2_TARGET void FillBuffer(const Shape2& s, const float* x_img, int64_t c_loops, int64_t r0, int64_t r1,
                                    int64_t left, int64_t right, float* buffer) {
  const int64_t width = left + s.w + right, rows = r1 - r0;
  for (int64_t cb = 0; cb < c_loops; ++cb) {
    const float* from = x_img + (cb * s.h + r0) * s.w * kLanes;
    float* to = buffer + cb * rows * width * kLanes;
    for (int64_t r = 0; r < rows; ++r, from += s.w * kLanes, to += width * kLanes) {
      std::memset(to, 0, static_cast<size_t>(left * kLanes) * sizeof(float));
      std::memcpy(to + left * kLanes, from, static_cast<size_t>(s.w * kLanes) * sizeof(float));
      std::memset(to + (left + s.w) * kLanes, 0, static_cast<size_t>(right * kLanes) * sizeof(float));
    }
  }
}

// Output rows [oh0, oh1) of image `img`.
template <int kLanes, int kStep>
ONNXAMP_AVX2_TARGET void RunRows(const Shape2& s, const float* x, const BlockedConvAvx2Weights& wts, const float* z,
                                 bool relu, float* y, int64_t img, int64_t oh0, int64_t oh1,
                                 std::vector<float>& buffer) {
  const int64_t c_loops = kLanes == 1 ? s.c : CeilDiv(s.c, kBlock);
  const float* x_img = x + img * c_loops * s.h * s.w * kLanes;
  // Input columns the row reads: -pw .. (ow - 1) * sw - pw + (kw - 1) * dw.
  const int64_t left = s.pw, right = std::max<int64_t>(0, (s.ow - 1) * s.sw - s.pw + (s.kw - 1) * s.dw + 1 - s.w);
  // Input rows the output rows read (those inside the input).
  const int64_t r0 = std::max<int64_t>(0, oh0 * s.sh - s.ph);
  const int64_t r1 = std::min<int64_t>(s.h, (oh1 - 1) * s.sh - s.ph + (s.kh - 1) * s.dh + 1);
  Source src;
  if (left == 0 && right == 0) {
    src = Source{x_img, s.h * s.w * kLanes, s.w * kLanes, 0, 0};
  } else {
    const int64_t rows = std::max<int64_t>(r1 - r0, 0), width = left + s.w + right;
    if (buffer.size() < static_cast<size_t>(c_loops * rows * width * kLanes))
      buffer.resize(static_cast<size_t>(c_loops * rows * width * kLanes));
    if (rows > 0) FillBuffer<kLanes>(s, x_img, c_loops, r0, r1, left, right, buffer.data());
    src = Source{buffer.data(), rows * width * kLanes, width * kLanes, r0, left};
  }
  const int64_t mb = s.mb(), out_plane = s.oh * s.ow * kBlock;
  const int64_t tiles = CeilDiv(s.ow, kMaxTile), base = s.ow / tiles, extra = s.ow % tiles;
  const int rem = static_cast<int>(s.m % kBlock);  // real lanes of the last output block (0: all 8)
  const int64_t pair_floats = s.kh * s.kw * c_loops * kLanes * kPairLanes;
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    // Kernel rows inside the input: 0 <= oh * sh - ph + kh * dh < h.
    const int64_t top = oh * s.sh - s.ph;
    const int64_t kh0 = top >= 0 ? 0 : CeilDiv(-top, s.dh);
    const int64_t kh1 = std::clamp<int64_t>(top < s.h ? CeilDiv(s.h - top, s.dh) : 0, kh0, s.kh);
    // Kernel rows all in the padding (kh1 == kh0) leave the bias and Z alone; the tile reads no input then.
    const float* xrow = kh1 > kh0 ? src.base + (top + kh0 * s.dh - src.row0) * src.row : nullptr;
    for (int64_t pair = 0; pair < s.pairs(); ++pair) {
      const int ocb = pair * 2 + 1 < mb ? 2 : 1;
      const bool mask_first = rem != 0 && pair * 2 == mb - 1, mask_second = rem != 0 && pair * 2 + 1 == mb - 1;
      const float* wpair = wts.w.data() + pair * pair_floats;
      const Epilogue e{wts.bias.data() + pair * kPairLanes, relu, out_plane};
      const int64_t y_row = (img * mb + pair * 2) * out_plane + oh * s.ow * kBlock;
      int64_t ow = 0;
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t count = base + (t < extra ? 1 : 0);
        // Buffer column of the first tap: ow * sw - pw + left (= ow * sw when the buffer holds the padding).
        const float* xt = xrow ? xrow + (ow * s.sw - s.pw + src.left) * kLanes : nullptr;
        const int64_t at = y_row + ow * kBlock;
        Tiles<kLanes, kStep>::kTable[ocb - 1][count - 1](s, src, c_loops, xt, kh0, kh1, wpair, e, z ? z + at : nullptr,
                                                         y + at, rem, mask_first, mask_second);
        ow += count;
      }
    }
  }
}

template <int kLanes, int kStep>
void RunAll(const Shape2& s, const float* x, const BlockedConvAvx2Weights& wts, const float* z, bool relu, float* y,
            exec::ThreadPool& threads) {
  const int64_t rows = s.n * s.oh;
  const double row_flops = 2.0 * static_cast<double>(s.m * s.c * s.kh * s.kw * s.ow);
  // Ranges of rows of at least about 1 MFLOP (fewer: the calling thread runs them all), kRangesPerThread per thread,
  // which the threads take in turn until none is left: a thread that loses its core for a while (a virtual machine's
  // vCPU, a busy machine) holds up one range, not half the work.
  const int64_t min_rows = std::max<int64_t>(1, static_cast<int64_t>(1e6 / std::max(row_flops, 1.0)));
  const int64_t parts = std::min<int64_t>(threads.num_threads(), rows / min_rows);
  auto run_range = [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> buffer;  // the running thread's
    for (int64_t r = begin; r < end;) {
      const int64_t img = r / s.oh, oh0 = r % s.oh, oh1 = std::min(s.oh, oh0 + (end - r));
      RunRows<kLanes, kStep>(s, x, wts, z, relu, y, img, oh0, oh1, buffer);
      r += oh1 - oh0;
    }
  };
  if (parts <= 1) {
    run_range(0, rows);
    return;
  }
  const int64_t ranges = std::min(rows / min_rows, parts * kRangesPerThread);
  const int64_t per_range = CeilDiv(rows, ranges);
  std::atomic<int64_t> next{0};
  threads.ParallelFor(parts, 1, [&](int64_t, int64_t) {
    for (int64_t i = next.fetch_add(1); i * per_range < rows; i = next.fetch_add(1))
      run_range(i * per_range, std::min(rows, (i + 1) * per_range));
  });
}

#endif  // ONNXAMP_CONV_AVX2_KERNELS

}  // namespace

bool BlockedConvAvx2Applies(const ConvProblem& p, const ConvLayouts& layouts, bool has_z) {
#ifdef ONNXAMP_CONV_AVX2_KERNELS
  const WindowGeometry& g = p.geo;
  // Where oneDNN's kernels are faster on this kind of CPU (docs/benchmarks.md): products of fewer than kMinSteps steps
  // per output (input channels, padded to the block, times kernel taps), whose tiles spend too much on their stores
  // (a 3-channel 3x3 stem); 1x1 kernels (oneDNN runs them as a GEMM over positions); more than kMaxChannels input
  // channels (a tile's reads then walk that many planes of X, far apart).
  const int64_t c_padded = layouts.x == 0 ? p.c : CeilDiv(p.c, kBlock) * kBlock;
  const int64_t taps = g.rank() == 2 ? g.kernel_size() : 0;
  return CpuHasAvx2Fma() && g.rank() == 2 && taps > 1 && c_padded * taps >= kMinSteps && c_padded <= kMaxChannels &&
         p.group == 1 && (layouts.x == 0 || layouts.x == kBlock) && layouts.y == kBlock &&
         (!has_z || layouts.z == kBlock) && (g.stride[1] == 1 || g.stride[1] == 2) && g.pad_begin[0] >= 0 &&
         g.pad_begin[1] >= 0 && p.n > 0 && p.c > 0 && p.m > 0 && g.out[0] > 0 && g.out[1] > 0;
#else
  (void)p;
  (void)layouts;
  (void)has_z;
  return false;
#endif
}

BlockedConvAvx2Weights BlockedConvAvx2PackWeights(const ConvProblem& p, const ConvLayouts& layouts, const float* w,
                                                  const float* bias) {
  const Shape2 s = ShapeOf(p);
  BlockedConvAvx2Weights out;
  out.c_padded = layouts.x == 0 ? s.c : CeilDiv(s.c, kBlock) * kBlock;
  const int64_t taps = s.kh * s.kw;
  out.w.assign(static_cast<size_t>(s.pairs() * taps * out.c_padded * kPairLanes), 0.0f);
  out.bias.assign(static_cast<size_t>(s.pairs() * kPairLanes), 0.0f);
  for (int64_t oc = 0; oc < s.m; ++oc) {
    const int64_t pair = oc / kPairLanes, lane = oc % kPairLanes;
    if (bias) out.bias[static_cast<size_t>(oc)] = bias[oc];
    for (int64_t c = 0; c < s.c; ++c) {
      for (int64_t t = 0; t < taps; ++t) {
        const size_t at = static_cast<size_t>(((pair * taps + t) * out.c_padded + c) * kPairLanes + lane);
        out.w[at] = w[(oc * s.c + c) * taps + t];
      }
    }
  }
  return out;
}

void BlockedConvAvx2(const ConvProblem& p, const ConvLayouts& layouts, const float* x,
                     const BlockedConvAvx2Weights& weights, const float* z, bool relu, float* y,
                     exec::ThreadPool& threads) {
#ifdef ONNXAMP_CONV_AVX2_KERNELS
  const Shape2 s = ShapeOf(p);
  if (layouts.x == 0) {
    if (s.sw == 1)
      RunAll<1, 1>(s, x, weights, z, relu, y, threads);
    else
      RunAll<1, 2>(s, x, weights, z, relu, y, threads);
  } else {
    if (s.sw == 1)
      RunAll<8, 8>(s, x, weights, z, relu, y, threads);
    else
      RunAll<8, 16>(s, x, weights, z, relu, y, threads);
  }
#else
  (void)p;
  (void)layouts;
  (void)x;
  (void)weights;
  (void)z;
  (void)relu;
  (void)y;
  (void)threads;
#endif
}

}  // namespace onnxamp::ops
