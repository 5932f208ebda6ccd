// The random ops on the CPU: RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike (opsets 1-25), Bernoulli
// (15-25) and Multinomial (7-25).
//
//   RandomUniform(dtype, high, low, seed, shape)      -> uniform in [low, high) of `shape`
//   RandomNormal(dtype, mean, scale, seed, shape)     -> normal(mean, scale) of `shape`
//   Random*Like(input; dtype, ..., seed)              -> the same in input's shape (dtype defaults to input's type)
//   Bernoulli(input; dtype, seed)                     -> 1 with probability input[i], else 0 (dtype: input's type)
//   Multinomial(input [batch, classes]; dtype, sample_size, seed)
//                                                     -> [batch, sample_size] class indices drawn from
//                                                        softmax(input[b]) (input: unnormalised log-probabilities)
//
// Numbers are counter-based (random_numbers.h): element i of a run is a function of (seed, i) alone. The seed is the
// node's `seed` attribute when it has one (mixed with the run's RunOptions::rng_step, so that a training loop still
// draws new numbers every step, and step 0 gives what the model always gives), otherwise the session's per-node,
// per-run seed (KernelContext::seed), as Dropout's. Values are computed in double and rounded once to the output type.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/executor/graph_match.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/random/random_numbers.h"
#include "runtime/ops/random/random_spec.h"

namespace onnxamp::ops {
namespace {

using exec::IsFloatType;

// The largest value of float type T below finite `v`.
template <typename T>
T NextBelow(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::nextafter(v, -std::numeric_limits<T>::infinity());
  } else {  // float16, bfloat16
    return T::FromBits(NextBelowHalfBits(v.bits));
  }
}

// Writes f(i) (a double) for every element of `y`, rounded to its type, on the pool. With `below` (a uniform's high,
// above its low), a value that rounded up to it or past it becomes the largest value of the type below it, so that
// the range stays half-open in every type (float16 rounds 1 - 2^-12 up to 1); never below `low`.
template <typename F>
Status FillFrom(exec::KernelContext& ctx, ir::Tensor& y, F&& f, std::optional<std::pair<double, double>> range = {}) {
  return DispatchNumericOrBool(y.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T* out = y.mutable_values<T>().data();
    ParallelRanges(ctx.threads(), y.num_elements(), kElementwiseGrain / 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        if constexpr (std::is_same_v<T, bool>) {
          out[i] = f(i) != 0.0;
        } else {
          out[i] = Store<T>(static_cast<ComputeType<T>>(f(i)));
          if constexpr (kIsFloatLike<T>) {
            if (range && static_cast<double>(Load(out[i])) >= range->second) {
              const T below = NextBelow(out[i]);
              out[i] = static_cast<double>(Load(below)) >= range->first
                           ? below
                           : Store<T>(static_cast<ComputeType<T>>(range->first));
            }
          }
        }
      }
    });
    return Status::Ok();
  });
}

enum class Distribution { kUniform, kNormal };

// RandomUniform, RandomNormal and their *Like forms.
class RandomCpu : public exec::OpKernel {
 public:
  RandomCpu(const exec::KernelInfo& info, Status* st, Distribution dist, bool like) {
    *st = spec_.Init(info.node, dist == Distribution::kUniform, like);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    DType t = DType::kFloat32;
    std::vector<int64_t> dims;
    ONNXAMP_RETURN_IF_ERROR(spec_.Resolve(ctx, &t, &dims));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, t, dims));
    const uint64_t seed = spec_.seed.Seed(ctx);
    const double a = spec_.a, b = spec_.b;
    if (spec_.uniform) {
      return FillFrom(
          ctx, *y, [&](int64_t i) { return a + (b - a) * UniformDouble(seed, static_cast<uint64_t>(i)); },
          spec_.HalfOpenRange());
    }
    return FillFrom(ctx, *y, [&](int64_t i) { return a + b * NormalDouble(seed, static_cast<uint64_t>(i)); });
  }

 private:
  RandomSpec spec_;
};

template <Distribution D, bool Like>
class RandomKernel : public RandomCpu {
 public:
  RandomKernel(const exec::KernelInfo& info, Status* st) : RandomCpu(info, st, D, Like) {}
};

class BernoulliCpu : public exec::OpKernel {
 public:
  BernoulliCpu(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info.node); }

  Status Compute(exec::KernelContext& ctx) const override {
    DType out_type = DType::kFloat32;
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* p, spec_.Probabilities(ctx, &out_type));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, out_type, p->dims()));
    const uint64_t seed = spec_.seed.Seed(ctx);
    return DispatchFloat(p->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* prob = p->values<T>().data();
      return FillFrom(ctx, *y, [&](int64_t i) {
        return UniformDouble(seed, static_cast<uint64_t>(i)) < static_cast<double>(Load(prob[i])) ? 1.0 : 0.0;
      });
    });
  }

 private:
  BernoulliSpec spec_;
};

class MultinomialCpu : public exec::OpKernel {
 public:
  MultinomialCpu(const exec::KernelInfo& info, Status* st) { *st = Init(info.node); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    const std::string label = InputLabel(ctx, 0, "input");
    if (!IsFloatType(x->dtype())) return InvalidArgument(label, " must be a float tensor, got ", DTypeName(x->dtype()));
    if (x->rank() != 2 || x->dims()[1] < 1) {
      return InvalidArgument(label, " must be [batch_size, class_size] with at least one class, got ",
                             ShapeToString(x->dims()));
    }
    const int64_t batch = x->dims()[0], classes = x->dims()[1], samples = sample_size_;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, dtype_, {batch, samples}));
    const uint64_t seed = seed_.Seed(ctx);
    std::vector<double> cdf(static_cast<size_t>(batch * classes));
    Status st = DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* logits = x->values<T>().data();
      for (int64_t b = 0; b < batch; ++b) {
        const T* row = logits + b * classes;
        double* c = cdf.data() + b * classes;
        double top = -INFINITY;
        for (int64_t k = 0; k < classes; ++k) top = std::max(top, static_cast<double>(Load(row[k])));
        if (!std::isfinite(top)) {
          return InvalidArgument(label, " row ", b, " has no finite largest log-probability (", top, ")");
        }
        double sum = 0.0;
        for (int64_t k = 0; k < classes; ++k) {
          const double v = static_cast<double>(Load(row[k]));
          if (std::isnan(v)) return InvalidArgument(label, " row ", b, " holds NaN at class ", k);
          sum += std::exp(v - top);
          c[k] = sum;
        }
      }
      return Status::Ok();
    });
    ONNXAMP_RETURN_IF_ERROR(st);
    auto draw = [&](int64_t i) -> int64_t {
      const double* c = cdf.data() + (i / samples) * classes;
      const double u = UniformDouble(seed, static_cast<uint64_t>(i)) * c[classes - 1];
      // The first class whose cumulative weight exceeds u (classes of weight 0 are never drawn).
      return std::min<int64_t>(std::upper_bound(c, c + classes, u) - c, classes - 1);
    };
    if (dtype_ == DType::kInt64) {
      int64_t* out = y->mutable_values<int64_t>().data();
      for (int64_t i = 0; i < batch * samples; ++i) out[i] = draw(i);
    } else {
      int32_t* out = y->mutable_values<int32_t>().data();
      for (int64_t i = 0; i < batch * samples; ++i) out[i] = static_cast<int32_t>(draw(i));
    }
    return Status::Ok();
  }

 private:
  Status Init(const ir::Node& node) {
    ONNXAMP_RETURN_IF_ERROR(seed_.Init(node));
    ONNXAMP_ASSIGN_OR_RETURN(int64_t code, IntAttribute(node, "dtype", 6));
    if (code != 6 && code != 7)
      return InvalidArgument("attribute 'dtype' is ", code, ", expected 6 (int32) or 7 (int64)");
    dtype_ = code == 7 ? DType::kInt64 : DType::kInt32;
    ONNXAMP_ASSIGN_OR_RETURN(sample_size_, IntAttribute(node, "sample_size", 1));
    if (sample_size_ < 1) return InvalidArgument("attribute 'sample_size' is ", sample_size_, ", expected at least 1");
    return Status::Ok();
  }

  RandomSeed seed_;
  DType dtype_ = DType::kInt32;
  int64_t sample_size_ = 1;
};

}  // namespace

void RegisterRandomKernels(exec::KernelRegistry& r) {
  using D = Distribution;
  r.Register(
      {"RandomUniform", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<RandomKernel<D::kUniform, false>>});
  r.Register(
      {"RandomNormal", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<RandomKernel<D::kNormal, false>>});
  r.Register(
      {"RandomUniformLike", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<RandomKernel<D::kUniform, true>>});
  r.Register(
      {"RandomNormalLike", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<RandomKernel<D::kNormal, true>>});
  r.Register({"Bernoulli", "", 15, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<BernoulliCpu>});
  r.Register({"Multinomial", "", 7, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<MultinomialCpu>});
}

}  // namespace onnxamp::ops
