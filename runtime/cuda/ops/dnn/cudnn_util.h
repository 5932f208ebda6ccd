// cuDNN helpers of the dnn family: owning wrappers of the legacy descriptors (created once per kernel and input
// shape, never per run), element type and math type policy, and the algorithm choice for forward and
// backward-data convolutions.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"

namespace onnxamp::cuda::dnn {

// cuDNN's element type for fp32, fp16, bf16 and double; Unimplemented otherwise.
StatusOr<cudnnDataType_t> CudnnDataType(DType dtype);

// The convolution's compute type: double for double, float otherwise (fp16/bf16 accumulate in FP32).
cudnnDataType_t CudnnComputeType(DType dtype);

// The math type a convolution of `dtype` starts with: tensor cores for fp16/bf16, FMA only for fp32 unless `tf32`
// (the session's KernelOptions::cuda_tf32: fp32 convolutions may then use TF32 tensor cores), the default for double.
cudnnMathType_t ConvMathType(DType dtype, bool tf32);

// Scaling factors alpha/beta of the type cuDNN reads for `dtype` (double for double, float otherwise).
class Scale {
 public:
  Scale(DType dtype, double value) : is_double_(dtype == DType::kFloat64), d_(value), f_(static_cast<float>(value)) {}
  const void* get() const { return is_double_ ? static_cast<const void*>(&d_) : static_cast<const void*>(&f_); }

 private:
  bool is_double_;
  double d_;
  float f_;
};

// True when every dim and the element count fit cuDNN's int arguments.
bool FitsCudnn(const std::vector<int64_t>& dims);

// How a tensor of logical shape [n, c, spatial...] lies in memory: packed NCHW(D), or channels-last [n, spatial...,
// c] (cuDNN's NHWC / NDHWC).
enum class Layout { kNchw, kChannelsLast };

class TensorDesc {
 public:
  TensorDesc() = default;
  ~TensorDesc();
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;

  // A tensor of logical dims [n, c, spatial...] (rank 4 or 5; callers add a unit dim for 1-D problems), packed in
  // `layout`: the strides are computed from the logical dims (channel stride 1 in channels-last).
  Status Set(cudnnDataType_t type, const std::vector<int64_t>& dims, Layout layout = Layout::kNchw);
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class FilterDesc {
 public:
  FilterDesc() = default;
  ~FilterDesc();
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;

  // A filter of logical dims [m, c/group, kernel...] (rank 4 or 5), stored as given (kNchw) or as [m, kernel...,
  // c/group] (kChannelsLast: cuDNN's CUDNN_TENSOR_NHWC filter format).
  Status Set(cudnnDataType_t type, const std::vector<int64_t>& dims, Layout layout = Layout::kNchw);
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

class ConvDesc {
 public:
  ConvDesc() = default;
  ~ConvDesc();
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;

  // Cross-correlation with symmetric `pads`, `strides`, `dilations` (one per spatial dim), `group` groups; `tf32`
  // lets an fp32 convolution use TF32 tensor cores (ConvMathType).
  Status Set(const std::vector<int64_t>& pads, const std::vector<int64_t>& strides,
             const std::vector<int64_t>& dilations, int64_t group, DType dtype, bool tf32);
  cudnnConvolutionDescriptor_t get() const { return desc_; }
  bool tf32() const { return tf32_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
  bool tf32_ = false;
};

class ActivationDesc {
 public:
  ActivationDesc() = default;
  ~ActivationDesc();
  ActivationDesc(const ActivationDesc&) = delete;
  ActivationDesc& operator=(const ActivationDesc&) = delete;

  // ReLU that propagates NaN.
  Status SetRelu();
  cudnnActivationDescriptor_t get() const { return desc_; }

 private:
  cudnnActivationDescriptor_t desc_ = nullptr;
};

// Workspace above this is not asked for: such algorithms are skipped.
inline constexpr size_t kMaxConvWorkspaceBytes = size_t{1} << 30;

// The first algorithm cuDNN's heuristics rank for this forward convolution that reports success, fits the
// workspace limit and (fp32 without conv.tf32()) does not use tensor cores; sets the convolution's math type to the
// algorithm's and its workspace size into *workspace_bytes. Unimplemented when none qualifies.
StatusOr<cudnnConvolutionFwdAlgo_t> PickForwardAlgorithm(cudnnHandle_t handle, const TensorDesc& x, const FilterDesc& w,
                                                         const ConvDesc& conv, const TensorDesc& y, DType dtype,
                                                         size_t* workspace_bytes);

// The same for the backward-data convolution that computes ConvTranspose (dy = its input, dx = its output).
StatusOr<cudnnConvolutionBwdDataAlgo_t> PickBackwardDataAlgorithm(cudnnHandle_t handle, const FilterDesc& w,
                                                                  const TensorDesc& dy, const ConvDesc& conv,
                                                                  const TensorDesc& dx, DType dtype,
                                                                  size_t* workspace_bytes);

// True for cuDNN statuses that say "this configuration is not supported" (3xxx): callers then fall back to the
// direct kernels.
inline bool IsNotSupported(cudnnStatus_t status) {
  return static_cast<int>(status) / 1000 == static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED) / 1000;
}

}  // namespace onnxamp::cuda::dnn
