// oneDNN convolution and pooling for the Conv and pooling kernels, on plain NC<spatial> float tensors or on the
// blocked layout [N, ceil(C / b), spatial..., b] (channels in blocks of b, the last block zero-padded) that the
// graph optimizer keeps between consecutive convolutions and poolings. Each object belongs to one kernel and keeps
// its primitives per problem shape (thread-safe). Without oneDNN in the build, Supported() is false and the kernels
// use their own code.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/common/status.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/gemm.h"

namespace onnxamp::ops {

// One convolution: x [n, c, in...], w [m, c / group, kernel...], optional bias [m], y [n, m, out...].
struct ConvProblem {
  int64_t n = 0, c = 0, m = 0, group = 1;
  WindowGeometry geo;
};

// Work fused after a convolution: y = relu(conv(x, w) + bias + sum), each part optional.
struct ConvPostOps {
  const float* sum = nullptr;  // added to the result; the same shape and layout as y
  bool relu = false;
};

// The layout of each tensor of a convolution: 0 plain [N, C, spatial...], else the channel block b of the blocked
// layout [N, ceil(C / b), spatial..., b]. Z (the sum post-op's operand) has the shape of Y in its own layout.
struct ConvLayouts {
  int64_t x = 0, z = 0, y = 0;
  bool any_blocked() const { return x != 0 || z != 0 || y != 0; }
};

// Elements of one image of a tensor with `c` channels and `spatial` positions per channel in layout `block`.
inline int64_t ImageElements(int64_t c, int64_t spatial, int64_t block) {
  return (block == 0 ? c : (c + block - 1) / block * block) * spatial;
}

// The channel block of the blocked layout this build and CPU run fast (16 with AVX-512, 8 with AVX2), or 0 when
// the blocked layout is not worth using (no oneDNN, `impl` is another linalg implementation, an older CPU).
int64_t PreferredChannelBlock(LinalgImpl impl);

class OneDnnConv {
 public:
  OneDnnConv();
  ~OneDnnConv();
  OneDnnConv(const OneDnnConv&) = delete;
  OneDnnConv& operator=(const OneDnnConv&) = delete;

  // True when oneDNN is in the build and takes problems of this rank (1 to 3 spatial dims).
  static bool Supported(const ConvProblem& p);
  // True when Run also takes bfloat16 x and w (a CPU with oneDNN bfloat16 support).
  static bool SupportsBf16();

  // y = conv(x, w) + bias (bias may be null), then `post`, with FP32 accumulation, split over `threads`. x and w are
  // float, or bfloat16 when `bf16` (their products are exact in float); bias, post.sum and y are float. With
  // `constant_w` the caller promises that the data at `w` never change while this object lives (a constant
  // initializer, or a buffer the caller keeps): the weights are then reordered into oneDNN's preferred layout once
  // and the copy is reused by every later call.
  // `layouts` gives the layout of x, post.sum and y (block 8 or 16; bf16 inputs must be plain): a blocked tensor
  // makes the primitive run on that blocked layout, and a plain one beside it is reordered in or out.
  Status Run(const ConvProblem& p, const void* x, const void* w, bool bf16, const float* bias, float* y,
             exec::ThreadPool& threads, const ConvPostOps& post = {}, bool constant_w = false,
             const ConvLayouts& layouts = {}) const;

 private:
  struct Cache;
  std::unique_ptr<Cache> cache_;
};

enum class PoolKind { kMax, kAverageIncludePad, kAverageExcludePad };

// One pooling: x [n, c, in...] -> y [n, c, out...], windows as in `geo` (geo.out must be consistent with the
// padding: ForwardGeometry without ceil mode, or with ceil mode where the extra window fits in pad_end + stride).
class OneDnnPool {
 public:
  OneDnnPool();
  ~OneDnnPool();
  OneDnnPool(const OneDnnPool&) = delete;
  OneDnnPool& operator=(const OneDnnPool&) = delete;

  static bool Supported(const WindowGeometry& geo);

  Status Run(PoolKind kind, int64_t n, int64_t c, const WindowGeometry& geo, const float* x, float* y,
             exec::ThreadPool& threads) const;

  // The same on blocked tensors: x [n, c / block, in..., block] -> y [n, c / block, out..., block], c a multiple
  // of block (the padded channel count; padding channels pool to 0).
  Status RunBlocked(PoolKind kind, int64_t n, int64_t c, int64_t block, const WindowGeometry& geo, const float* x,
                    float* y, exec::ThreadPool& threads) const;

 private:
  struct Cache;
  std::unique_ptr<Cache> cache_;
};

}  // namespace onnxamp::ops
