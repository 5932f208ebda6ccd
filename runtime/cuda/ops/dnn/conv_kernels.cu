// The dnn family's own convolution kernels: direct Conv and ConvTranspose (one thread per output element; the
// fallback where cuDNN does not apply, and the reference path forced by KernelOptions::cuda_conv_direct), the epilogue
// that adds bias and residual and applies ReLU after a cuDNN convolution, and the shifted window copy that pads
// inputs for asymmetric pads and crops ConvTranspose outputs. Conv, the epilogue and the copy take NCHW or
// channels-last tensors (a flag, one kernel body each).
#include <algorithm>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/dnn/dnn_launch.h"

namespace onnxamp::cuda::dnn {
namespace {

// ReLU that keeps NaN (as the Relu it replaces does).
template <typename A>
__device__ __forceinline__ A Relu(A v) {
  return v > A(0) ? v : (v == v ? A(0) : v);
}

// Conv: output element i = (image, oc, spatial o) sums its group's input channels over the kernel window. The
// layout flag only changes the index math: NCHW puts the channel before the spatial dims (x [n, c, in...], w
// [m, c/g, k...]), channels-last after them (x [n, in..., c], w [m, k..., c/g]); the channel loop is innermost, so
// in channels-last it reads consecutive elements.
template <typename T>
__global__ void ConvDirectKernel(WindowParams g, ConvSizes s, const T* __restrict__ x, const T* __restrict__ w,
                                 const T* __restrict__ b, const T* __restrict__ z, bool relu, T* __restrict__ y,
                                 int64_t total) {
  using A = ComputeType<T>;
  const int64_t cg = s.c / s.group, mg = s.m / s.group;
  // Element strides between consecutive input channels of x and of w.
  const int64_t x_cstride = s.channels_last ? 1 : g.in_size;
  const int64_t w_cstride = s.channels_last ? 1 : g.kernel_size;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t oi, oc, image;
    if (s.channels_last) {
      oc = i % s.m;
      oi = (i / s.m) % g.out_size;
      image = i / (s.m * g.out_size);
    } else {
      oi = i % g.out_size;
      oc = (i / g.out_size) % s.m;
      image = i / (g.out_size * s.m);
    }
    const int64_t grp = oc / mg;
    // Input position of kernel tap 0 per spatial dim.
    int64_t start[kMaxSpatial];
    int64_t rest = oi;
    for (int d = g.nsp - 1; d >= 0; --d) {
      start[d] = (rest % g.out[d]) * g.stride[d] - g.pad_begin[d];
      rest /= g.out[d];
    }
    A sum = 0;
    int64_t kk[kMaxSpatial] = {};
    for (int64_t ki = 0; ki < g.kernel_size; ++ki) {
      int64_t offset = 0;  // spatial offset of the tap in one input plane
      bool inside = true;
      for (int d = 0; d < g.nsp; ++d) {
        const int64_t pos = start[d] + kk[d] * g.dilation[d];
        inside = inside && pos >= 0 && pos < g.in[d];
        offset = offset * g.in[d] + pos;
      }
      if (inside) {
        // The group's first input channel at this tap, in x and in w.
        const T* xc = s.channels_last ? x + (image * g.in_size + offset) * s.c + grp * cg
                                      : x + (image * s.c + grp * cg) * g.in_size + offset;
        const T* wc = s.channels_last ? w + (oc * g.kernel_size + ki) * cg : w + oc * cg * g.kernel_size + ki;
        for (int64_t ic = 0; ic < cg; ++ic) sum += LoadValue(xc[ic * x_cstride]) * LoadValue(wc[ic * w_cstride]);
      }
      for (int d = g.nsp - 1; d >= 0; --d) {  // next tap, row-major
        if (++kk[d] < g.kernel[d]) break;
        kk[d] = 0;
      }
    }
    if (b) sum += LoadValue(b[oc]);
    if (z) sum += LoadValue(z[i]);
    if (relu) sum = Relu(sum);
    y[i] = StoreValue<T>(sum);
  }
}

// ConvTranspose: output position o receives input position t / stride through tap k when t = o + pad_begin -
// k * dilation is a non-negative multiple of the stride inside the input.
template <typename T>
__global__ void ConvTransposeDirectKernel(WindowParams g, ConvSizes s, const T* __restrict__ x, const T* __restrict__ w,
                                          const T* __restrict__ b, T* __restrict__ y, int64_t total) {
  using A = ComputeType<T>;
  const int64_t cg = s.c / s.group, mg = s.m / s.group;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t oi = i % g.out_size;
    const int64_t oc = (i / g.out_size) % s.m;
    const int64_t image = i / (g.out_size * s.m);
    const int64_t grp = oc / mg, om = oc % mg;
    int64_t o[kMaxSpatial];
    int64_t rest = oi;
    for (int d = g.nsp - 1; d >= 0; --d) {
      o[d] = rest % g.out[d];
      rest /= g.out[d];
    }
    A sum = 0;
    int64_t kk[kMaxSpatial] = {};
    for (int64_t ki = 0; ki < g.kernel_size; ++ki) {
      int64_t offset = 0;
      bool hit = true;
      for (int d = 0; d < g.nsp && hit; ++d) {
        const int64_t t = o[d] + g.pad_begin[d] - kk[d] * g.dilation[d];
        hit = t >= 0 && t % g.stride[d] == 0 && t / g.stride[d] < g.in[d];
        offset = offset * g.in[d] + t / g.stride[d];
      }
      if (hit) {
        for (int64_t ic = 0; ic < cg; ++ic) {
          const int64_t c = grp * cg + ic;
          sum +=
              LoadValue(x[(image * s.c + c) * g.in_size + offset]) * LoadValue(w[(c * mg + om) * g.kernel_size + ki]);
        }
      }
      for (int d = g.nsp - 1; d >= 0; --d) {
        if (++kk[d] < g.kernel[d]) break;
        kk[d] = 0;
      }
    }
    if (b) sum += LoadValue(b[oc]);
    y[i] = StoreValue<T>(sum);
  }
}

template <typename T>
__global__ void EpilogueKernel(int64_t count, const T* src, IndexMap src_map, bool src_direct, const T* b,
                               int64_t b_plane, int64_t b_channels, const T* z, IndexMap z_map, bool z_direct,
                               bool relu, T* y) {
  using A = ComputeType<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t so = src_direct ? i : MapIndex(src_map, i);
    A v = LoadValue(src[so]);
    if (b) v += LoadValue(b[(so / b_plane) % b_channels]);  // b_plane 1 in channels-last
    if (z) v += LoadValue(z[z_direct ? i : MapIndex(z_map, i)]);
    if (relu) v = Relu(v);
    y[i] = StoreValue<T>(v);
  }
}

struct SpatialDims {
  int64_t v[kMaxSpatial] = {};
};

// dst element i = (plane, o): NCHW i = plane * dst_plane + o; channels-last i = (image * dst_plane + o) * channels +
// channel with plane = image * channels + channel.
template <typename T>
__global__ void WindowCopyKernel(int64_t count, int nsp, SpatialDims src_sp, SpatialDims dst_sp, SpatialDims offset,
                                 int64_t src_plane, int64_t channels, bool channels_last, const T* __restrict__ src,
                                 const T* __restrict__ b, T* __restrict__ dst) {
  using A = ComputeType<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t lane = channels_last ? i % channels : 0;  // the channel, in channels-last
    int64_t rest = channels_last ? i / channels : i, src_offset = 0, src_stride = 1;
    bool inside = true;
    for (int d = nsp - 1; d >= 0; --d) {
      const int64_t pos = rest % dst_sp.v[d] + offset.v[d];
      rest /= dst_sp.v[d];
      inside = inside && pos >= 0 && pos < src_sp.v[d];
      src_offset += pos * src_stride;
      src_stride *= src_sp.v[d];
    }
    // rest is now the plane (image * channels + channel), or the image in channels-last.
    int64_t channel, at;
    if (channels_last) {
      channel = lane;
      at = (rest * src_plane + src_offset) * channels + channel;
    } else {
      channel = rest % channels;
      at = rest * src_plane + src_offset;
    }
    A v = inside ? LoadValue(src[at]) : A(0);
    if (b) v += LoadValue(b[channel]);
    dst[i] = StoreValue<T>(v);
  }
}

int64_t Product(const std::vector<int64_t>& dims, size_t from = 0) {
  int64_t n = 1;
  for (size_t i = from; i < dims.size(); ++i) n *= dims[i];
  return n;
}

}  // namespace

Status LaunchConvDirect(cudaStream_t stream, DType dtype, const WindowParams& g, const ConvSizes& s, const void* x,
                        const void* w, const void* b, const void* z, bool relu, void* y) {
  const int64_t total = s.n * s.m * g.out_size;
  if (total == 0) return Status::Ok();
  return DispatchFloat(dtype, "Conv", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ConvDirectKernel<T><<<GridFor(total), kThreadsPerBlock, 0, stream>>>(
        g, s, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b), static_cast<const T*>(z),
        relu, static_cast<T*>(y), total);
    return CheckLaunch("Conv (direct)");
  });
}

Status LaunchConvTransposeDirect(cudaStream_t stream, DType dtype, const WindowParams& g, const ConvSizes& s,
                                 const void* x, const void* w, const void* b, void* y) {
  const int64_t total = s.n * s.m * g.out_size;
  if (total == 0) return Status::Ok();
  return DispatchFloat(dtype, "ConvTranspose", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ConvTransposeDirectKernel<T><<<GridFor(total), kThreadsPerBlock, 0, stream>>>(
        g, s, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b), static_cast<T*>(y), total);
    return CheckLaunch("ConvTranspose (direct)");
  });
}

Status LaunchConvEpilogue(cudaStream_t stream, DType dtype, const std::vector<int64_t>& out_dims, const void* src,
                          const std::vector<int64_t>& src_dims, bool channels_last, const void* b, const void* z,
                          const std::vector<int64_t>& z_dims, bool relu, void* y) {
  const int64_t count = Product(out_dims);
  if (count == 0 || (!b && !z && !relu && src == y)) return Status::Ok();
  const bool src_direct = src_dims == out_dims;
  IndexMap src_map, z_map;
  if (!src_direct) {
    ONNXAMP_ASSIGN_OR_RETURN(src_map, MakeBroadcastMap(out_dims, src_dims));
  }
  const bool z_direct = !z || z_dims == out_dims;
  if (!z_direct) {
    ONNXAMP_ASSIGN_OR_RETURN(z_map, MakeBroadcastMap(out_dims, z_dims));
  }
  // The channel of src element so is (so / b_plane) % b_channels.
  int64_t b_channels = src_dims.size() > 1 ? src_dims[1] : 1;
  int64_t b_plane = std::max<int64_t>(1, Product(src_dims, 2));
  if (channels_last) {
    b_channels = src_dims.empty() ? 1 : src_dims.back();
    b_plane = 1;
  }
  return DispatchFloat(dtype, "Conv epilogue", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    EpilogueKernel<T><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(
        count, static_cast<const T*>(src), src_map, src_direct, static_cast<const T*>(b), b_plane,
        std::max<int64_t>(1, b_channels), static_cast<const T*>(z), z_map, z_direct, relu, static_cast<T*>(y));
    return CheckLaunch("Conv epilogue");
  });
}

Status LaunchWindowCopy(cudaStream_t stream, DType dtype, int64_t planes, int64_t channels, bool channels_last,
                        const std::vector<int64_t>& src_sp, const std::vector<int64_t>& dst_sp,
                        const std::vector<int64_t>& offset, const void* src, const void* b, void* dst) {
  const size_t nsp = dst_sp.size();
  if (nsp > static_cast<size_t>(kMaxSpatial) || src_sp.size() != nsp || offset.size() != nsp) {
    return Unimplemented("window copy over ", nsp, " spatial dims (at most ", kMaxSpatial, ")");
  }
  const int64_t count = planes * Product(dst_sp);
  if (count == 0) return Status::Ok();
  SpatialDims s, d, o;
  for (size_t i = 0; i < nsp; ++i) {
    s.v[i] = src_sp[i];
    d.v[i] = dst_sp[i];
    o.v[i] = offset[i];
  }
  const int64_t src_plane = Product(src_sp);
  return DispatchFloat(dtype, "window copy", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    WindowCopyKernel<T><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(
        count, static_cast<int>(nsp), s, d, o, src_plane, std::max<int64_t>(1, channels), channels_last,
        static_cast<const T*>(src), static_cast<const T*>(b), static_cast<T*>(dst));
    return CheckLaunch("window copy");
  });
}

}  // namespace onnxamp::cuda::dnn
