// The attributes, checks and per-run seeds of the random ops (RandomUniform, RandomNormal, their *Like forms and
// Bernoulli), shared by the CPU kernels (random_cpu.cc) and the CUDA kernels
// (runtime/cuda/ops/elementwise/random_cuda.cc), so that both backends refuse the same nodes with the same messages
// and draw the same numbers (random_numbers.h) for the same seed.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/common/random.h"
#include "runtime/common/status.h"
#include "runtime/executor/graph_match.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

// The `seed` attribute (a float in ONNX) and the seed of one run: the attribute's seed mixed with the run's rng_step
// (SeedForStep: step 0 gives the attribute's numbers), else the session's per-node, per-run seed (KernelContext::seed).
class RandomSeed {
 public:
  Status Init(const ir::Node& node) {
    ONNXAMP_ASSIGN_OR_RETURN(std::optional<float> seed, OptionalFloatAttribute(node, "seed"));
    if (seed) base_ = SplitMix64Mix(std::bit_cast<uint32_t>(*seed) ^ 0x5eed5eed5eed5eedull);
    return Status::Ok();
  }
  uint64_t Seed(const exec::KernelContext& ctx) const {
    return base_ ? SeedForStep(*base_, ctx.rng_step()) : ctx.seed();
  }

 private:
  std::optional<uint64_t> base_;
};

// The `dtype` attribute as an element type of `allowed`; nullopt when absent (or 0).
inline StatusOr<std::optional<DType>> RandomDTypeAttribute(const ir::Node& node, bool (*allowed)(DType),
                                                           const char* what) {
  ONNXAMP_ASSIGN_OR_RETURN(std::optional<int64_t> code, OptionalIntAttribute(node, "dtype"));
  if (!code || *code == 0) return std::optional<DType>();
  const std::optional<DType> t = DTypeFromCode(*code);
  if (!t || !allowed(*t)) return InvalidArgument("attribute 'dtype' is ", *code, ", expected ", what);
  return t;
}

inline bool IsNumericOrBoolType(DType t) { return exec::IsFloatType(t) || IsInteger(t) || t == DType::kBool; }

// RandomUniform (low, high) and RandomNormal (mean, scale), and their *Like forms (the shape and by default the type
// of input 0).
struct RandomSpec {
  bool uniform = true;
  bool like = false;
  RandomSeed seed;
  std::optional<DType> dtype;
  double a = 0.0, b = 1.0;  // (low, high) or (mean, scale)
  std::vector<int64_t> shape;

  Status Init(const ir::Node& node, bool is_uniform, bool is_like) {
    uniform = is_uniform;
    like = is_like;
    ONNXAMP_RETURN_IF_ERROR(seed.Init(node));
    ONNXAMP_ASSIGN_OR_RETURN(dtype,
                             RandomDTypeAttribute(node, &exec::IsFloatType, "float16, float, double or bfloat16"));
    ONNXAMP_ASSIGN_OR_RETURN(float fa, FloatAttribute(node, uniform ? "low" : "mean", 0.0f));
    ONNXAMP_ASSIGN_OR_RETURN(float fb, FloatAttribute(node, uniform ? "high" : "scale", 1.0f));
    a = fa;
    b = fb;
    if (!std::isfinite(a) || !std::isfinite(b)) {
      return InvalidArgument("attributes '", uniform ? "low" : "mean", "' and '", uniform ? "high" : "scale",
                             "' must be finite, got ", a, " and ", b);
    }
    if (like) return Status::Ok();
    const ir::Attribute* s = node.FindAttribute("shape");
    if (s == nullptr || s->type() != ir::AttrType::kInts)
      return InvalidArgument("attribute 'shape' (ints) is required");
    for (int64_t d : s->ints) {
      if (d < 0) return InvalidArgument("attribute 'shape' has a negative dim: ", ShapeToString(s->ints));
    }
    shape = s->ints;
    return Status::Ok();
  }

  // The output's element type and dims for this run (checked to fit in memory).
  Status Resolve(const exec::KernelContext& ctx, DType* t, std::vector<int64_t>* dims) const {
    *t = dtype.value_or(DType::kFloat32);
    *dims = shape;
    if (like) {
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
      if (!dtype) {
        if (!exec::IsFloatType(x->dtype())) {
          return InvalidArgument(InputLabel(ctx, 0, "input"), " is ", DTypeName(x->dtype()),
                                 ": without attribute 'dtype' the output takes its type, which must be a float type");
        }
        *t = x->dtype();
      }
      *dims = x->dims();
    }
    return CheckFitsInMemory(*t, *dims, "the random output");
  }

  // A uniform's [low, high) when it is not empty: values that round up to high are moved below it.
  std::optional<std::pair<double, double>> HalfOpenRange() const {
    if (uniform && b > a) return std::pair<double, double>(a, b);
    return std::nullopt;
  }
};

// Bernoulli: the output type (attribute dtype, else the probabilities') and the seed.
struct BernoulliSpec {
  RandomSeed seed;
  std::optional<DType> dtype;

  Status Init(const ir::Node& node) {
    ONNXAMP_RETURN_IF_ERROR(seed.Init(node));
    ONNXAMP_ASSIGN_OR_RETURN(dtype, RandomDTypeAttribute(node, &IsNumericOrBoolType, "a numeric or bool element type"));
    return Status::Ok();
  }

  // Input 0, a float tensor of probabilities, and the output's element type.
  StatusOr<const ir::Tensor*> Probabilities(const exec::KernelContext& ctx, DType* out_type) const {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* p, RequireInput(ctx, 0, "input"));
    if (!exec::IsFloatType(p->dtype())) {
      return InvalidArgument(InputLabel(ctx, 0, "input"), " must be a float tensor of probabilities, got ",
                             DTypeName(p->dtype()));
    }
    *out_type = dtype.value_or(p->dtype());
    return p;
  }
};

}  // namespace onnxamp::ops
