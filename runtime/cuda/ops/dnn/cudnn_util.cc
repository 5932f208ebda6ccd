// cuDNN descriptors, type policy and algorithm choice for the dnn kernels (see cudnn_util.h), and MakeWindowParams.
#include "runtime/cuda/ops/dnn/cudnn_util.h"

#include <climits>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/ops/dnn/dnn_launch.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"

namespace onnxamp::cuda::dnn {
namespace {

std::vector<int> ToInts(const std::vector<int64_t>& v) { return std::vector<int>(v.begin(), v.end()); }

bool SkipForFp32(DType dtype, bool tf32, cudnnMathType_t math) {
  return dtype == DType::kFloat32 && !tf32 &&
         (math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

// The math type to run an algorithm with: fp32 without TF32 stays on FMA whatever the heuristics report.
cudnnMathType_t MathFor(DType dtype, bool tf32, cudnnMathType_t reported) {
  if (dtype == DType::kFloat32 && !tf32) return CUDNN_FMA_MATH;
  return reported;
}

}  // namespace

StatusOr<WindowParams> MakeWindowParams(const ops::WindowGeometry& g) {
  const size_t nsp = g.rank();
  if (nsp > static_cast<size_t>(kMaxSpatial)) {
    return Unimplemented("windows over ", nsp, " spatial dims are not supported on cuda (at most ", kMaxSpatial, ")");
  }
  WindowParams p;
  p.nsp = static_cast<int>(nsp);
  for (size_t d = 0; d < nsp; ++d) {
    p.in[d] = g.in[d];
    p.out[d] = g.out[d];
    p.kernel[d] = g.kernel[d];
    p.stride[d] = g.stride[d];
    p.dilation[d] = g.dilation[d];
    p.pad_begin[d] = g.pad_begin[d];
    p.pad_end[d] = g.pad_end[d];
  }
  p.in_size = g.in_size();
  p.out_size = g.out_size();
  p.kernel_size = g.kernel_size();
  return p;
}

StatusOr<cudnnDataType_t> CudnnDataType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return CUDNN_DATA_FLOAT;
    case DType::kFloat16:
      return CUDNN_DATA_HALF;
    case DType::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    case DType::kFloat64:
      return CUDNN_DATA_DOUBLE;
    default:
      return Unimplemented("element type ", DTypeName(dtype), " has no cuDNN type");
  }
}

cudnnDataType_t CudnnComputeType(DType dtype) {
  return dtype == DType::kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

cudnnMathType_t ConvMathType(DType dtype, bool tf32) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16:
      return CUDNN_TENSOR_OP_MATH;
    case DType::kFloat32:
      return tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    default:
      return CUDNN_DEFAULT_MATH;
  }
}

bool FitsCudnn(const std::vector<int64_t>& dims) {
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d <= 0 || d > INT_MAX) return false;
    count *= d;
    if (count > INT_MAX) return false;
  }
  return true;
}

TensorDesc::~TensorDesc() {
  if (desc_) cudnnDestroyTensorDescriptor(desc_);
}

Status TensorDesc::Set(cudnnDataType_t type, const std::vector<int64_t>& dims, Layout layout) {
  if (!desc_) ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&desc_));
  const std::vector<int> d = ToInts(dims);
  std::vector<int> strides(d.size());
  if (layout == Layout::kChannelsLast && d.size() >= 3) {
    // [n, spatial..., c] in memory: c innermost, then the spatial dims from the last, then n.
    int stride = 1;
    strides[1] = stride;
    stride *= d[1];
    for (size_t i = d.size(); i-- > 2;) {
      strides[i] = stride;
      stride *= d[i];
    }
    strides[0] = stride;
  } else {
    int stride = 1;
    for (size_t i = d.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= d[i];
    }
  }
  ONNXAMP_CUDNN_RETURN_IF_ERROR(
      cudnnSetTensorNdDescriptor(desc_, type, static_cast<int>(d.size()), d.data(), strides.data()), "tensor ",
      ops::ShapeToString(dims), layout == Layout::kChannelsLast ? " (channels-last)" : "");
  return Status::Ok();
}

FilterDesc::~FilterDesc() {
  if (desc_) cudnnDestroyFilterDescriptor(desc_);
}

Status FilterDesc::Set(cudnnDataType_t type, const std::vector<int64_t>& dims, Layout layout) {
  if (!desc_) ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(&desc_));
  const std::vector<int> d = ToInts(dims);
  const cudnnTensorFormat_t format = layout == Layout::kChannelsLast ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnSetFilterNdDescriptor(desc_, type, format, static_cast<int>(d.size()), d.data()),
                                "filter ", ops::ShapeToString(dims),
                                layout == Layout::kChannelsLast ? " (channels-last)" : "");
  return Status::Ok();
}

ConvDesc::~ConvDesc() {
  if (desc_) cudnnDestroyConvolutionDescriptor(desc_);
}

Status ConvDesc::Set(const std::vector<int64_t>& pads, const std::vector<int64_t>& strides,
                     const std::vector<int64_t>& dilations, int64_t group, DType dtype, bool tf32) {
  tf32_ = tf32;
  if (!desc_) ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnCreateConvolutionDescriptor(&desc_));
  const std::vector<int> p = ToInts(pads), s = ToInts(strides), d = ToInts(dilations);
  ONNXAMP_CUDNN_RETURN_IF_ERROR(
      cudnnSetConvolutionNdDescriptor(desc_, static_cast<int>(p.size()), p.data(), s.data(), d.data(),
                                      CUDNN_CROSS_CORRELATION, CudnnComputeType(dtype)),
      "convolution pads ", ops::ShapeToString(pads), " strides ", ops::ShapeToString(strides), " dilations ",
      ops::ShapeToString(dilations));
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionGroupCount(desc_, static_cast<int>(group)), "group ", group);
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(desc_, ConvMathType(dtype, tf32)));
  return Status::Ok();
}

ActivationDesc::~ActivationDesc() {
  if (desc_) cudnnDestroyActivationDescriptor(desc_);
}

Status ActivationDesc::SetRelu() {
  if (!desc_) ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnCreateActivationDescriptor(&desc_));
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnSetActivationDescriptor(desc_, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
  return Status::Ok();
}

StatusOr<cudnnConvolutionFwdAlgo_t> PickForwardAlgorithm(cudnnHandle_t handle, const TensorDesc& x, const FilterDesc& w,
                                                         const ConvDesc& conv, const TensorDesc& y, DType dtype,
                                                         size_t* workspace_bytes) {
  int max_count = 0;
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(max_count > 0 ? max_count : 1));
  int returned = 0;
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithm_v7(
      handle, x.get(), w.get(), conv.get(), y.get(), static_cast<int>(perf.size()), &returned, perf.data()));
  for (int i = 0; i < returned; ++i) {
    const cudnnConvolutionFwdAlgoPerf_t& p = perf[static_cast<size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS || SkipForFp32(dtype, conv.tf32(), p.mathType)) continue;
    ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(conv.get(), MathFor(dtype, conv.tf32(), p.mathType)));
    size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(handle, x.get(), w.get(), conv.get(), y.get(), p.algo, &bytes) !=
            CUDNN_STATUS_SUCCESS ||
        bytes > kMaxConvWorkspaceBytes) {
      continue;
    }
    *workspace_bytes = bytes;
    return p.algo;
  }
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(conv.get(), ConvMathType(dtype, conv.tf32())));
  return Unimplemented("cuDNN offers no forward convolution algorithm for this problem");
}

StatusOr<cudnnConvolutionBwdDataAlgo_t> PickBackwardDataAlgorithm(cudnnHandle_t handle, const FilterDesc& w,
                                                                  const TensorDesc& dy, const ConvDesc& conv,
                                                                  const TensorDesc& dx, DType dtype,
                                                                  size_t* workspace_bytes) {
  int max_count = 0;
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<size_t>(max_count > 0 ? max_count : 1));
  int returned = 0;
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithm_v7(
      handle, w.get(), dy.get(), conv.get(), dx.get(), static_cast<int>(perf.size()), &returned, perf.data()));
  for (int i = 0; i < returned; ++i) {
    const cudnnConvolutionBwdDataAlgoPerf_t& p = perf[static_cast<size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS || SkipForFp32(dtype, conv.tf32(), p.mathType)) continue;
    ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(conv.get(), MathFor(dtype, conv.tf32(), p.mathType)));
    size_t bytes = 0;
    if (cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w.get(), dy.get(), conv.get(), dx.get(), p.algo, &bytes) !=
            CUDNN_STATUS_SUCCESS ||
        bytes > kMaxConvWorkspaceBytes) {
      continue;
    }
    *workspace_bytes = bytes;
    return p.algo;
  }
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(conv.get(), ConvMathType(dtype, conv.tf32())));
  return Unimplemented("cuDNN offers no backward-data convolution algorithm for this problem");
}

}  // namespace onnxamp::cuda::dnn
