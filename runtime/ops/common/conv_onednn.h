// oneDNN convolution and pooling for the Conv and pooling kernels, on plain NC<spatial> float tensors. Each
// object belongs to one kernel and keeps its primitives per problem shape (thread-safe). Without oneDNN in the
// build, Supported() is false and the kernels use their own code.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/common/status.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/conv_geometry.h"

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
  Status Run(const ConvProblem& p, const void* x, const void* w, bool bf16, const float* bias, float* y,
             exec::ThreadPool& threads, const ConvPostOps& post = {}, bool constant_w = false) const;

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

 private:
  struct Cache;
  std::unique_ptr<Cache> cache_;
};

}  // namespace onnxamp::ops
