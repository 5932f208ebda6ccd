// oneDNN's convolution backward primitives for ConvGrad on plain float32 tensors: the data gradient
// (convolution_backward_data) and the weight gradient (convolution_backward_weights), each with the layouts oneDNN
// prefers and reorders from and to the plain ones. oneDNN always runs single-threaded here and the work is split
// into tasks over the session's threads in a way that does not change the results with their number: the weight
// gradient by fixed blocks of images (kImagesPerBlock) whose partial sums are added in block order, the data
// gradient by parts of images (each image's gradient is computed alone, whatever part it is in). Both gradients' tasks
// share one parallel loop, so that at a batch of one weight block (ResNet-50 at batch 8) the weight gradient and the
// data gradient run side by side instead of the weight gradient taking one thread while the others wait. Without
// oneDNN in the build, Supported() is false and ConvGrad uses its own code.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

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

  // dx [n, c, in...] (when dx is not null) = the gradient of conv(x, w) with respect to x, and dw [m, c / group,
  // kernel...] (when dw is not null) = the gradient with respect to w, summed over the images; dy [n, m, out...].
  Status Backward(const ConvProblem& p, const float* dy, const float* w, const float* x, float* dx, float* dw,
                  exec::ThreadPool& threads) const;

  // One unit of Backward's parallel loop: the weight gradient of images [first, first + count) (one block), or the
  // data gradient of those images.
  struct Task {
    enum Kind { kData, kWeights } kind;
    int64_t first = 0;
    int64_t count = 0;
  };
  // Backward's tasks for n images on `threads`: every weight block (when `weights`), then the data gradient (when
  // `data`) in one part per thread the blocks leave free, or, when the blocks alone fill the threads, in parts of a
  // block's size (so that the pool's equal shares of tasks are about equal work).
  static std::vector<Task> Plan(int64_t n, bool data, bool weights, int threads);

 private:
  Status DataPart(const ConvProblem& p, const float* dy, const float* w, float* dx, int64_t n0, int64_t nn) const;
  Status WeightsBlock(const ConvProblem& p, const float* dy, const float* x, float* out, int64_t n0, int64_t nn) const;
  struct Cache;
  std::unique_ptr<Cache> cache_;
};

}  // namespace onnxamp::ops
