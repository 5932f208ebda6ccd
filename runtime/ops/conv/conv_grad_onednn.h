// oneDNN's convolution backward primitives for ConvGrad on plain float32 tensors: the data gradient
// (convolution_backward_data) and the weight gradient (convolution_backward_weights), each with the layouts oneDNN
// prefers and reorders from and to the plain ones. oneDNN always runs single-threaded here and the work is split
// over the session's threads in a way that does not depend on their number: the data gradient by images (each
// image's gradient is computed alone), the weight gradient by fixed blocks of images whose partial sums are added
// in block order. So results are deterministic and the same at every thread count. Without oneDNN in the build,
// Supported() is false and ConvGrad uses its own code.
#pragma once

#include <memory>

#include "runtime/common/status.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/conv_onednn.h"

namespace onnxamp::ops {

class OneDnnConvGrad {
 public:
  OneDnnConvGrad();
  ~OneDnnConvGrad();
  OneDnnConvGrad(const OneDnnConvGrad&) = delete;
  OneDnnConvGrad& operator=(const OneDnnConvGrad&) = delete;

  // True when oneDNN is in the build and takes problems of this rank (1 to 3 spatial dims).
  static bool Supported(const ConvProblem& p);
  // The images per block of the weight gradient (its partial sums are added in block order).
  static constexpr int64_t kImagesPerBlock = 8;

  // dx [n, c, in...] = the gradient of conv(x, w) with respect to x, given dy [n, m, out...].
  Status BackwardData(const ConvProblem& p, const float* dy, const float* w, float* dx,
                      exec::ThreadPool& threads) const;
  // dw [m, c / group, kernel...] = the gradient of conv(x, w) with respect to w, summed over the images.
  Status BackwardWeights(const ConvProblem& p, const float* dy, const float* x, float* dw,
                         exec::ThreadPool& threads) const;

 private:
  struct Cache;
  std::unique_ptr<Cache> cache_;
};

}  // namespace onnxamp::ops
