// DFT, STFT and their gradients on CUDA (spectral_launch.h). Built with --fmad=false (runtime/cuda/CMakeLists.txt) so
// that the sums round as the CPU's do.
#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/spectral/spectral_launch.h"

namespace onnxamp::cuda {
namespace {

namespace sp = ops::spectral;

template <typename T>
__device__ __forceinline__ double Wide(T v) {
  return static_cast<double>(LoadValue(v));
}

template <typename T>
__device__ __forceinline__ T Narrow(double v) {
  return StoreValue<T>(static_cast<ComputeType<T>>(v));
}

template <typename T>
__global__ void DftKernel(DftArgs a, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t out_len = a.t.out_len, n_in = a.t.n_in, total = a.outer * out_len * a.inner;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = e / (out_len * a.inner), k = (e / a.inner) % out_len, i = e % a.inner;
    double re = 0, im = 0;
    sp::DftAt(
        a.t, a.wc, a.ws, k,
        [&](int64_t j, double* r, double* m) {
          const int64_t at = ((o * n_in + j) * a.inner + i) * a.channels;
          *r = Wide(x[at]);
          *m = a.channels == 2 ? Wide(x[at + 1]) : 0.0;
        },
        &re, &im);
    y[e * 2] = Narrow<T>(re);
    y[e * 2 + 1] = Narrow<T>(im);
  }
}

template <typename T>
__global__ void DftGradKernel(DftArgs a, const T* __restrict__ dy, T* __restrict__ dx) {
  const int64_t out_len = a.t.out_len, n_in = a.t.n_in, total = a.outer * n_in * a.inner;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = e / (n_in * a.inner), j = (e / a.inner) % n_in, i = e % a.inner;
    double re = 0, im = 0;
    sp::AdjointAt(
        a.t, a.wc, a.ws, j,
        [&](int64_t k, double* r, double* m) {
          const int64_t at = ((o * out_len + k) * a.inner + i) * 2;
          *r = Wide(dy[at]);
          *m = Wide(dy[at + 1]);
        },
        &re, &im);
    dx[e * a.channels] = Narrow<T>(re);
    if (a.channels == 2) dx[e * 2 + 1] = Narrow<T>(im);
  }
}

template <typename T>
__global__ void StftKernel(StftArgs a, const T* __restrict__ s, T* __restrict__ y) {
  const int64_t bins = a.t.out_len, total = a.batch * a.frames * bins;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / bins, k = e % bins, bi = r / a.frames, f = r % a.frames;
    double re = 0, im = 0;
    sp::DftAt(
        a.t, a.wc, a.ws, k,
        [&](int64_t j, double* x, double* m) {
          const int64_t at = (bi * a.length + f * a.step + j) * a.channels;
          const double wv = a.window ? a.window[j] : 1.0;
          *x = Wide(s[at]) * wv;
          *m = a.channels == 2 ? Wide(s[at + 1]) * wv : 0.0;
        },
        &re, &im);
    y[e * 2] = Narrow<T>(re);
    y[e * 2 + 1] = Narrow<T>(im);
  }
}

// adj[(r * frame + j) * 2 + {0, 1}]: the adjoint of frame r's transform at value j.
template <typename T>
__global__ void FrameAdjointKernel(StftArgs a, const T* __restrict__ dy, double* __restrict__ adj) {
  const int64_t bins = a.t.out_len, total = a.batch * a.frames * a.frame;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / a.frame, j = e % a.frame;
    sp::AdjointAt(
        a.t, a.wc, a.ws, j,
        [&](int64_t k, double* x, double* m) {
          *x = Wide(dy[(r * bins + k) * 2]);
          *m = Wide(dy[(r * bins + k) * 2 + 1]);
        },
        &adj[e * 2], &adj[e * 2 + 1]);
  }
}

// dsignal at (bi, position): the frames holding it, in order, each adjoint value times the window there.
template <typename T>
__global__ void SignalGradKernel(StftArgs a, const double* __restrict__ adj, T* __restrict__ ds) {
  const int64_t total = a.batch * a.length;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t bi = e / a.length, pos = e % a.length;
    const int64_t first = pos < a.frame ? 0 : (pos - a.frame) / a.step + 1;
    const int64_t last = pos / a.step < a.frames - 1 ? pos / a.step : a.frames - 1;
    double re = 0, im = 0;
    for (int64_t f = first; f <= last; ++f) {
      const int64_t j = pos - f * a.step;
      if (j < 0 || j >= a.frame) continue;
      const double wv = a.window ? a.window[j] : 1.0;
      const double* v = adj + ((bi * a.frames + f) * a.frame + j) * 2;
      re += v[0] * wv;
      im += v[1] * wv;
    }
    ds[e * a.channels] = Narrow<T>(re);
    if (a.channels == 2) ds[e * 2 + 1] = Narrow<T>(im);
  }
}

// dwindow[j]: every frame in order, its adjoint value times the signal there.
template <typename T>
__global__ void WindowGradKernel(StftArgs a, const double* __restrict__ adj, const T* __restrict__ s,
                                 double* __restrict__ dw) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < a.frame;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double sum = 0;
    for (int64_t r = 0; r < a.batch * a.frames; ++r) {
      const int64_t bi = r / a.frames, f = r % a.frames;
      const int64_t at = (bi * a.length + f * a.step + j) * a.channels;
      const double ar = adj[(r * a.frame + j) * 2], ai = adj[(r * a.frame + j) * 2 + 1];
      sum += ar * Wide(s[at]) + (a.channels == 2 ? ai * Wide(s[at + 1]) : 0.0);
    }
    dw[j] = sum;
  }
}

}  // namespace

Status LaunchDft(const DftArgs& a, cudaStream_t stream) {
  const int64_t total = a.outer * a.t.out_len * a.inner;
  if (total == 0) return Status::Ok();
  return DispatchFloat(a.dtype, "DFT", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    DftKernel<T><<<GridFor(total), kThreadsPerBlock, 0, stream>>>(a, static_cast<const T*>(a.x), static_cast<T*>(a.y));
    return CheckLaunch("DFT");
  });
}

Status LaunchDftGrad(const DftArgs& a, cudaStream_t stream) {
  const int64_t total = a.outer * a.t.n_in * a.inner;
  if (total == 0) return Status::Ok();
  return DispatchFloat(a.dtype, "DFTGrad", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    DftGradKernel<T>
        <<<GridFor(total), kThreadsPerBlock, 0, stream>>>(a, static_cast<const T*>(a.dy), static_cast<T*>(a.dx));
    return CheckLaunch("DFTGrad");
  });
}

Status LaunchStft(const StftArgs& a, cudaStream_t stream) {
  const int64_t total = a.batch * a.frames * a.t.out_len;
  if (total == 0) return Status::Ok();
  return DispatchFloat(a.dtype, "STFT", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    StftKernel<T>
        <<<GridFor(total), kThreadsPerBlock, 0, stream>>>(a, static_cast<const T*>(a.signal), static_cast<T*>(a.y));
    return CheckLaunch("STFT");
  });
}

Status LaunchStftGrad(const StftArgs& a, const GradScratchFn& scratch, cudaStream_t stream) {
  const int64_t values = a.batch * a.frames * a.frame;
  double* adj = nullptr;
  if (values > 0 && (a.dsignal || a.dwindow)) {
    ONNXAMP_ASSIGN_OR_RETURN(void* p, scratch(static_cast<size_t>(values) * 2 * sizeof(double)));
    adj = static_cast<double*>(p);
  }
  return DispatchFloat(a.dtype, "STFTGrad", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (adj) {
      FrameAdjointKernel<T><<<GridFor(values), kThreadsPerBlock, 0, stream>>>(a, static_cast<const T*>(a.dy), adj);
      ONNXAMP_RETURN_IF_ERROR(CheckLaunch("STFTGrad"));
    }
    if (a.dsignal && a.batch * a.length > 0) {
      SignalGradKernel<T>
          <<<GridFor(a.batch * a.length), kThreadsPerBlock, 0, stream>>>(a, adj, static_cast<T*>(a.dsignal));
      ONNXAMP_RETURN_IF_ERROR(CheckLaunch("STFTGrad"));
    }
    if (a.dwindow && a.frame > 0) {
      WindowGradKernel<T>
          <<<GridFor(a.frame), kThreadsPerBlock, 0, stream>>>(a, adj, static_cast<const T*>(a.signal), a.dwindow);
      ONNXAMP_RETURN_IF_ERROR(CheckLaunch("STFTGrad"));
    }
    return Status::Ok();
  });
}

}  // namespace onnxamp::cuda
