// BatchNormTraining and BatchNormalizationGrad (CPU, com.onnxamp): batch normalization in training mode as PyTorch's
// BatchNorm computes it, and its backward pass (contracts in runtime/ops/gradient_ops.h).
//
// BatchNormTraining: per channel the batch mean and biased variance over N and the spatial dims normalise X; the
// running statistics become momentum * running + (1 - momentum) * batch statistic, with the unbiased variance
// (n / (n - 1)) for running_var; saved_mean and saved_inv_std = 1 / sqrt(biased var + epsilon) come out in float32.
// BatchNormalizationGrad: with x_hat = (x - mean) * inv_std, dB = sum(dY), dScale = sum(dY * x_hat) and
// dX = scale * inv_std * (dY - dB / n - x_hat * dScale / n). Statistics and sums accumulate in double for every X type
// (as PyTorch's CPU kernels do for float), each run of a channel in 8 lanes added in a fixed order (so the loops
// vectorise and the results do not depend on the thread count); the normalisation itself runs in float (double for
// double X).
#include <cmath>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/batch_norm/batch_norm.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/elementwise_half.h"
#include "runtime/ops/common/gemm_util.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

// The 8-lane double sums below, for float runs: with SSE2 two lanes per register, each lane summed exactly as the
// plain loop sums it (the same operations in the same order), so both give the same bits.
#if defined(__SSE2__)
inline __m128d Lo(__m128 v) { return _mm_cvtps_pd(v); }
inline __m128d Hi(__m128 v) { return _mm_cvtps_pd(_mm_movehl_ps(v, v)); }
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) of lanes (l0 l1) (l2 l3) (l4 l5) (l6 l7).
inline double Combine(__m128d a, __m128d b, __m128d c, __m128d d) {
  double l[8];
  _mm_storeu_pd(l, a);
  _mm_storeu_pd(l + 2, b);
  _mm_storeu_pd(l + 4, c);
  _mm_storeu_pd(l + 6, d);
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}
#endif

// fp16/bf16 runs are worked on as float: each run converted with the vector conversions of elementwise_half.h (the
// values Load<T> gives, one run at a time into a buffer of the calling thread), the float loops run on it, and an
// output run is rounded once with StoreBlock (the rounding Store<T> does). The results are the bits the per-element
// loops gave; the per-element conversions were most of the time of these ops (BatchNormalizationGrad in fp16 took
// 30 times its float time).
float* RunBuffer(int slot, int64_t n) {
  thread_local FloatScratch buffers[3];
  return buffers[slot].Get(n);
}

// A run of fp16/bf16 values as float, in the calling thread's buffer `slot`.
template <typename T>
const float* FloatRun(const T* x, int64_t n, int slot) {
  float* f = RunBuffer(slot, n);
  LoadBlock(x, f, n);
  return f;
}

// reduce::SumRun<double> of a run of X.
template <typename T>
double SumRun(const T* x, int64_t n) {
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    __m128d s0 = _mm_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const __m128 a = _mm_loadu_ps(x + j), b = _mm_loadu_ps(x + j + 4);
      s0 = _mm_add_pd(s0, Lo(a));
      s1 = _mm_add_pd(s1, Hi(a));
      s2 = _mm_add_pd(s2, Lo(b));
      s3 = _mm_add_pd(s3, Hi(b));
    }
    double tail = _mm_cvtsd_f64(s0);
    for (; j < n; ++j) tail += static_cast<double>(x[j]);
    s0 = _mm_move_sd(s0, _mm_set_sd(tail));
    return Combine(s0, s1, s2, s3);
  }
#endif
  if constexpr (kIsHalfLike<T>) return reduce::SumRun<double>(FloatRun(x, n, 0), n);
  return reduce::SumRun<double>(x, n);
}

// reduce::SumSquaredDeviationRun<double> of a run of X.
template <typename T>
double SumSquaredDeviationRun(const T* x, int64_t n, double mean) {
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    const __m128d m = _mm_set1_pd(mean);
    __m128d s0 = _mm_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    auto add = [&m](__m128d s, __m128d v) {
      const __m128d d = _mm_sub_pd(v, m);
      return _mm_add_pd(s, _mm_mul_pd(d, d));
    };
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const __m128 a = _mm_loadu_ps(x + j), b = _mm_loadu_ps(x + j + 4);
      s0 = add(s0, Lo(a));
      s1 = add(s1, Hi(a));
      s2 = add(s2, Lo(b));
      s3 = add(s3, Hi(b));
    }
    double tail = _mm_cvtsd_f64(s0);
    for (; j < n; ++j) {
      const double d = static_cast<double>(x[j]) - mean;
      tail += d * d;
    }
    s0 = _mm_move_sd(s0, _mm_set_sd(tail));
    return Combine(s0, s1, s2, s3);
  }
#endif
  if constexpr (kIsHalfLike<T>) return reduce::SumSquaredDeviationRun<double>(FloatRun(x, n, 0), n, mean);
  return reduce::SumSquaredDeviationRun<double>(x, n, mean);
}

// Adds sum(g) and sum(g * (x - mean)) over [0, n) to *sum_g and *sum_gx, in double, in 8 lanes each.
template <typename T>
void AddGradSumsRun(const T* g, const T* x, int64_t n, double mean, double* sum_g, double* sum_gx) {
  if constexpr (kIsHalfLike<T>) {
    // The float loop below sums the converted values in the same lanes and order as the generic loop.
    return AddGradSumsRun<float>(FloatRun(g, n, 0), FloatRun(x, n, 1), n, mean, sum_g, sum_gx);
  }
  double a[8] = {}, b[8] = {};
  int64_t j = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    const __m128d m = _mm_set1_pd(mean);
    __m128d a0 = _mm_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    auto add = [&m](__m128d& sa, __m128d& sb, __m128d gv, __m128d xv) {
      sa = _mm_add_pd(sa, gv);
      sb = _mm_add_pd(sb, _mm_mul_pd(gv, _mm_sub_pd(xv, m)));
    };
    for (; j + 8 <= n; j += 8) {
      const __m128 g0 = _mm_loadu_ps(g + j), g1 = _mm_loadu_ps(g + j + 4);
      const __m128 x0 = _mm_loadu_ps(x + j), x1 = _mm_loadu_ps(x + j + 4);
      add(a0, b0, Lo(g0), Lo(x0));
      add(a1, b1, Hi(g0), Hi(x0));
      add(a2, b2, Lo(g1), Lo(x1));
      add(a3, b3, Hi(g1), Hi(x1));
    }
    _mm_storeu_pd(a, a0);
    _mm_storeu_pd(a + 2, a1);
    _mm_storeu_pd(a + 4, a2);
    _mm_storeu_pd(a + 6, a3);
    _mm_storeu_pd(b, b0);
    _mm_storeu_pd(b + 2, b1);
    _mm_storeu_pd(b + 4, b2);
    _mm_storeu_pd(b + 6, b3);
  }
#endif
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) {
      const double gv = static_cast<double>(Load<T>(g[j + l]));
      a[l] += gv;
      b[l] += gv * (static_cast<double>(Load<T>(x[j + l])) - mean);
    }
  }
  for (; j < n; ++j) {
    const double gv = static_cast<double>(Load<T>(g[j]));
    a[0] += gv;
    b[0] += gv * (static_cast<double>(Load<T>(x[j])) - mean);
  }
  *sum_g += ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  *sum_gx += ((b[0] + b[1]) + (b[2] + b[3])) + ((b[4] + b[5]) + (b[6] + b[7]));
}

// Writes `values` into output i, a new tensor of `dtype` and `dims` (when the output is requested).
Status WriteOutput(exec::KernelContext& ctx, size_t i, DType dtype, const std::vector<int64_t>& dims,
                   const std::vector<double>& values) {
  if (i >= ctx.num_outputs() || !ctx.output_requested(i)) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * t, ctx.AllocateOutput(i, dtype, dims));
  return reduce::WriteParam(t, values);
}

// The number of values each channel's statistics are taken over; refused below 2 (no unbiased variance), as
// PyTorch refuses "more than 1 value per channel" in training.
StatusOr<int64_t> TrainingCount(const ir::Tensor& x, const BatchNormShape& shape) {
  const int64_t count = shape.batch * shape.run;
  if (count < 2) {
    return InvalidArgument("input 0 (X) of shape ", ShapeToString(x.dims()),
                           " gives fewer than 2 values per channel: training-mode statistics need at least 2");
  }
  return count;
}

class BatchNormTrainingCpu : public exec::OpKernel {
 public:
  BatchNormTrainingCpu(const exec::KernelInfo& info, Status* st) {
    // BatchNormTraining has BatchNormalization-9's attributes (epsilon, momentum; no `spatial`, no training_mode).
    *st = ParseBatchNormSpec(exec::KernelInfo{info.node, 9, info.device}, &spec_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const BatchNormShape shape, ResolveBatchNormShape(x, spec_));
    const int64_t batch = shape.batch, params = shape.params, run = shape.run;
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t count, TrainingCount(*x, shape));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> scale, reduce::ReadParam(ctx.input(1), params, "input 1 (scale)"));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> bias, reduce::ReadParam(ctx.input(2), params, "input 2 (B)"));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> running_mean,
                             reduce::ReadParam(ctx.input(3), params, "input 3 (running_mean)"));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> running_var,
                             reduce::ReadParam(ctx.input(4), params, "input 4 (running_var)"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    std::vector<double> mean(static_cast<size_t>(params)), var(mean.size()), inv_std(mean.size());
    ONNXAMP_RETURN_IF_ERROR(DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = reduce::NormAcc<T>;
      const T* xd = x->values<T>().data();
      T* yd = y->mutable_values<T>().data();
      reduce::ParallelOver(ctx.threads(), params, count, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          double sum = 0;
          for (int64_t n = 0; n < batch; ++n) sum += SumRun<T>(xd + (n * params + p) * run, run);
          const double mu = sum / static_cast<double>(count);
          double dev = 0;
          for (int64_t n = 0; n < batch; ++n) {
            dev += SumSquaredDeviationRun<T>(xd + (n * params + p) * run, run, mu);
          }
          mean[p] = mu;
          var[p] = dev / static_cast<double>(count);
          inv_std[p] = 1.0 / std::sqrt(var[p] + static_cast<double>(spec_.epsilon));
          const A a = static_cast<A>(scale[p] * inv_std[p]);
          for (int64_t n = 0; n < batch; ++n) {
            const int64_t at = (n * params + p) * run;
            if constexpr (kIsHalfLike<T>) {
              float* yf = RunBuffer(1, run);
              reduce::NormalizeRun<A>(FloatRun(xd + at, run, 0), yf, run, static_cast<A>(mu), a,
                                      static_cast<A>(bias[p]));
              StoreBlock(yf, yd + at, run);
            } else {
              reduce::NormalizeRun<A>(xd + at, yd + at, run, static_cast<A>(mu), a, static_cast<A>(bias[p]));
            }
          }
        }
      });
      return Status::Ok();
    }));
    const double mom = spec_.momentum, unbias = static_cast<double>(count) / static_cast<double>(count - 1);
    std::vector<double> new_mean(mean.size()), new_var(mean.size());
    for (size_t p = 0; p < mean.size(); ++p) {
      new_mean[p] = mom * running_mean[p] + (1 - mom) * mean[p];
      new_var[p] = mom * running_var[p] + (1 - mom) * var[p] * unbias;
    }
    ONNXAMP_RETURN_IF_ERROR(WriteOutput(ctx, 1, ctx.input(3)->dtype(), ctx.input(3)->dims(), new_mean));
    ONNXAMP_RETURN_IF_ERROR(WriteOutput(ctx, 2, ctx.input(4)->dtype(), ctx.input(4)->dims(), new_var));
    ONNXAMP_RETURN_IF_ERROR(WriteOutput(ctx, 3, DType::kFloat32, {params}, mean));
    return WriteOutput(ctx, 4, DType::kFloat32, {params}, inv_std);
  }

 private:
  BatchNormSpec spec_;
};

class BatchNormalizationGradCpu : public exec::OpKernel {
 public:
  BatchNormalizationGradCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* x = ctx.input(1);
    const BatchNormSpec spec;  // per channel
    ONNXAMP_ASSIGN_OR_RETURN(const BatchNormShape shape, ResolveBatchNormShape(x, spec));
    if (!dy || dy->dtype() != x->dtype() || dy->dims() != x->dims()) {
      return InvalidArgument("input 0 (dY) must have X's element type and shape (", DTypeName(x->dtype()), " ",
                             ShapeToString(x->dims()), "), got ", dy ? DTypeName(dy->dtype()) : "none", " ",
                             dy ? ShapeToString(dy->dims()) : "");
    }
    const int64_t batch = shape.batch, params = shape.params, run = shape.run, count = batch * run;
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> scale, reduce::ReadParam(ctx.input(2), params, "input 2 (scale)"));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> mean, reduce::ReadParam(ctx.input(3), params, "input 3 (saved_mean)"));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> inv_std,
                             reduce::ReadParam(ctx.input(4), params, "input 4 (saved_inv_std)"));
    ir::Tensor* dx = nullptr;
    if (ctx.output_requested(0)) {
      ONNXAMP_ASSIGN_OR_RETURN(dx, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    }
    std::vector<double> dscale(static_cast<size_t>(params)), dbias(dscale.size());
    ONNXAMP_RETURN_IF_ERROR(DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = reduce::NormAcc<T>;
      const T* xd = x->values<T>().data();
      const T* gd = dy->values<T>().data();
      T* dxd = dx ? dx->mutable_values<T>().data() : nullptr;
      reduce::ParallelOver(ctx.threads(), params, count, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          double sum_dy = 0, sum_dy_xhat = 0;
          for (int64_t n = 0; n < batch; ++n) {
            const int64_t at = (n * params + p) * run;
            AddGradSumsRun<T>(gd + at, xd + at, run, mean[p], &sum_dy, &sum_dy_xhat);
          }
          sum_dy_xhat *= inv_std[p];
          dbias[p] = sum_dy;
          dscale[p] = sum_dy_xhat;
          if (!dxd || count == 0) continue;
          // dX = k * (dY - mean(dY) - x_hat * mean(dY * x_hat)), k = scale * inv_std.
          const A k = static_cast<A>(scale[p] * inv_std[p]);
          const A mu = static_cast<A>(mean[p]), is = static_cast<A>(inv_std[p]);
          const A mean_dy = static_cast<A>(sum_dy / static_cast<double>(count));
          const A mean_dy_xhat = static_cast<A>(sum_dy_xhat / static_cast<double>(count));
          for (int64_t n = 0; n < batch; ++n) {
            const int64_t at = (n * params + p) * run;
            if constexpr (kIsHalfLike<T>) {
              const float* gf = FloatRun(gd + at, run, 0);
              const float* xf = FloatRun(xd + at, run, 1);
              float* df = RunBuffer(2, run);
              for (int64_t j = 0; j < run; ++j) {
                const A xhat = (xf[j] - mu) * is;
                df[j] = k * (gf[j] - mean_dy - xhat * mean_dy_xhat);
              }
              StoreBlock(df, dxd + at, run);
            } else {
              for (int64_t j = 0; j < run; ++j) {
                const A xhat = (static_cast<A>(Load<T>(xd[at + j])) - mu) * is;
                const A g = static_cast<A>(Load<T>(gd[at + j]));
                dxd[at + j] = Store<T>(static_cast<ComputeType<T>>(k * (g - mean_dy - xhat * mean_dy_xhat)));
              }
            }
          }
        }
      });
      return Status::Ok();
    }));
    const ir::Tensor* s = ctx.input(2);
    ONNXAMP_RETURN_IF_ERROR(WriteOutput(ctx, 1, s->dtype(), s->dims(), dscale));
    return WriteOutput(ctx, 2, s->dtype(), s->dims(), dbias);
  }
};

}  // namespace

void RegisterBatchNormGradKernels(exec::KernelRegistry& r) {
  const std::vector<DType> floats = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({kBatchNormTrainingOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, floats, 0,
              &exec::MakeKernel<BatchNormTrainingCpu>});
  r.Register({kBatchNormalizationGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, floats, 0,
              &exec::MakeKernel<BatchNormalizationGradCpu>});
}

}  // namespace onnxamp::ops
