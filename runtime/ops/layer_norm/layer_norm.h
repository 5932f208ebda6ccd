// LayerNormalization: attribute parsing and the [rows, cols] view of X, shared by the CPU kernel (layer_norm_cpu.cc)
// and device kernels, so that every backend checks the same things with the same messages.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

// LayerNormalization's attributes.
struct LayerNormSpec {
  int64_t axis = -1;              // the first normalised dimension (negative: from the back)
  float epsilon = 1e-5f;          // added to the variance
  DType stash = DType::kFloat32;  // `stash_type`: the element type of outputs Mean and InvStdDev
};

// Parses `axis`, `epsilon` and `stash_type`; checks `axis` against input 0's declared rank where it is known.
Status ParseLayerNormSpec(const exec::KernelInfo& info, LayerNormSpec* spec);

// X as `rows` rows of `cols` normalised values (dims[:axis] and dims[axis:]).
struct LayerNormShape {
  int64_t axis = 0;  // normalised to 0..rank-1
  int64_t rows = 0;
  int64_t cols = 0;
};

// The view of input 0 (X) at `spec.axis`; refused when X or `scale` (input 1) is missing or the axis is outside X's
// rank.
StatusOr<LayerNormShape> ResolveLayerNormShape(const LayerNormSpec& spec, const ir::Tensor* x, const ir::Tensor* scale);

// Checks that Scale or B (`t`, named `what`) broadcasts (NumPy rules, aligned at the back) to X's dims from `first`
// on, without varying along an X dimension before `first`.
Status CheckNormalisedBroadcast(const ir::Tensor& t, const std::vector<int64_t>& x_dims, int64_t first,
                                std::string_view what);

// The strides of `t` (checked by CheckNormalisedBroadcast) over the `rank` normalised dimensions: 0 where `t` is
// broadcast.
std::vector<int64_t> NormalisedBroadcastStrides(const ir::Tensor& t, int64_t rank);

// LayerNormalizationGrad's inputs (com.onnxamp, runtime/ops/gradient_ops.h): dY, X, Scale, Mean and InvStdDev
// (inputs 0-4, all required), and X's view at `spec.axis`.
struct LayerNormGradInputs {
  const ir::Tensor* dy = nullptr;
  const ir::Tensor* x = nullptr;
  const ir::Tensor* scale = nullptr;
  const ir::Tensor* mean = nullptr;
  const ir::Tensor* inv_std = nullptr;
  LayerNormShape shape;
};

// Checks dY of X's type and shape and Scale of X's type broadcasting over the normalised dims (Mean and InvStdDev
// are left to the reader of their values). Errors name the inputs as `ctx` labels them.
StatusOr<LayerNormGradInputs> ResolveLayerNormGradInputs(const exec::KernelContext& ctx, const LayerNormSpec& spec);

}  // namespace onnxamp::ops
