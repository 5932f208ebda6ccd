// LayerNormalization (CPU), opsets 17-23.
//
// X is normalised over its dimensions from `axis` (default -1) on: for each of the prod(dims[:axis]) rows,
// Y = (X - Mean) * InvStdDev * Scale + B with InvStdDev = 1 / sqrt(Var + epsilon) (population variance). Scale and
// the optional B broadcast to dims[axis:]. The optional outputs Mean and InvStdDev have X's shape with the
// normalised dimensions set to 1 and the element type named by `stash_type` (default 1, float), which is also the
// precision of the statistics (float at least; double for double X).
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/elementwise_half.h"
#include "runtime/ops/common/elementwise_math.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/layer_norm/layer_norm.h"

namespace onnxamp::ops {
namespace {

// Values of `t` broadcast (NumPy rules, aligned at the back) to `dims`, which start at X's dimension `first`;
// fails when `t` does not broadcast or varies along an X dimension before `first`.
StatusOr<std::vector<double>> BroadcastParam(const ir::Tensor* t, const std::vector<int64_t>& x_dims, int64_t first,
                                             std::string_view what) {
  const std::vector<int64_t> dims(x_dims.begin() + first, x_dims.end());
  const int64_t count = reduce::Product(dims);
  const int64_t rank = static_cast<int64_t>(dims.size());
  ONNXAMP_RETURN_IF_ERROR(CheckNormalisedBroadcast(*t, x_dims, first, what));
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> values, reduce::ReadParam(t, t->num_elements(), what));
  std::vector<double> out(static_cast<size_t>(count));
  const std::vector<int64_t> stride = NormalisedBroadcastStrides(*t, rank);
  std::vector<int64_t> index(rank, 0);
  int64_t offset = 0;
  for (int64_t e = 0; e < count; ++e) {
    out[e] = values[offset];
    for (int64_t d = rank - 1; d >= 0; --d) {
      offset += stride[d];
      if (++index[d] < dims[d]) break;
      offset -= stride[d] * dims[d];
      index[d] = 0;
    }
  }
  return out;
}

// True when `t` holds exactly one value per normalised element, in their order: its dims are X's dims from `first` on
// (leading 1s aside on both sides). Scale and B have this shape in practice; anything else takes the general path.
bool MatchesNormalisedShape(const ir::Tensor& t, const std::vector<int64_t>& x_dims, int64_t first) {
  auto strip = [](auto begin, auto end) {
    while (begin != end && *begin == 1) ++begin;
    return std::vector<int64_t>(begin, end);
  };
  return strip(t.dims().begin(), t.dims().end()) == strip(x_dims.begin() + first, x_dims.end());
}

// A float scratch row of the calling thread (slot 0..2), grown as needed and kept.
float* ScratchRow(int slot, int64_t n) {
  thread_local std::vector<float> rows[3];
  std::vector<float>& r = rows[slot];
  if (r.size() < static_cast<size_t>(n)) r.resize(static_cast<size_t>(n));
  return r.data();
}

class LayerNormCpu : public exec::OpKernel {
 public:
  LayerNormCpu(const exec::KernelInfo& info, Status* st) { *st = ParseLayerNormSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const LayerNormShape shape, ResolveLayerNormShape(spec_, x, ctx.input(1)));
    const int64_t axis = shape.axis, rows = shape.rows, cols = shape.cols;
    const ir::Tensor* scale_t = ctx.input(1);
    const ir::Tensor* bias_t = ctx.input(2);
    if (spec_.stash != DType::kFloat64 && x->dtype() != DType::kFloat64 && cols > 0 && scale_t->dtype() == x->dtype() &&
        MatchesNormalisedShape(*scale_t, x->dims(), axis) &&
        (!bias_t || (bias_t->dtype() == x->dtype() && MatchesNormalisedShape(*bias_t, x->dims(), axis)))) {
      return ComputeRows(ctx, *x, *scale_t, bias_t, axis, rows, cols);
    }
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> scale,
                             BroadcastParam(ctx.input(1), x->dims(), axis, "input 1 (Scale)"));
    std::vector<double> bias(static_cast<size_t>(cols), 0.0);
    if (ctx.input(2)) {
      ONNXAMP_ASSIGN_OR_RETURN(bias, BroadcastParam(ctx.input(2), x->dims(), axis, "input 2 (B)"));
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    std::vector<int64_t> stat_dims = x->dims();
    for (int64_t d = axis; d < x->rank(); ++d) stat_dims[d] = 1;
    ir::Tensor* mean_out = nullptr;
    ir::Tensor* inv_out = nullptr;
    if (ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(mean_out, ctx.AllocateOutput(1, spec_.stash, stat_dims));
    }
    if (ctx.output_requested(2)) {
      ONNXAMP_ASSIGN_OR_RETURN(inv_out, ctx.AllocateOutput(2, spec_.stash, stat_dims));
    }
    std::vector<double> means(mean_out ? rows : 0), invs(inv_out ? rows : 0);
    Status st = DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      if (spec_.stash == DType::kFloat64) {
        Run<T, double>(*x, *y, rows, cols, scale, bias, ctx.threads(), means, invs);
      } else {
        Run<T, reduce::NormAcc<T>>(*x, *y, rows, cols, scale, bias, ctx.threads(), means, invs);
      }
      return Status::Ok();
    });
    ONNXAMP_RETURN_IF_ERROR(st);
    if (mean_out) ONNXAMP_RETURN_IF_ERROR(reduce::WriteParam(mean_out, means));
    if (inv_out) ONNXAMP_RETURN_IF_ERROR(reduce::WriteParam(inv_out, invs));
    return Status::Ok();
  }

 private:
  // The common case: float, fp16 or bf16 X with float statistics, and Scale and B with one value per normalised
  // element. Rows go through LayerNormRow (vectorized for the CPU's widest ISA); 16-bit rows are converted in and
  // out with vector conversions.
  Status ComputeRows(exec::KernelContext& ctx, const ir::Tensor& x, const ir::Tensor& scale_t, const ir::Tensor* bias_t,
                     int64_t axis, int64_t rows, int64_t cols) const {
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x.dtype(), x.dims()));
    std::vector<int64_t> stat_dims = x.dims();
    for (int64_t d = axis; d < x.rank(); ++d) stat_dims[d] = 1;
    ir::Tensor* mean_out = nullptr;
    ir::Tensor* inv_out = nullptr;
    if (ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(mean_out, ctx.AllocateOutput(1, spec_.stash, stat_dims));
    }
    if (ctx.output_requested(2)) {
      ONNXAMP_ASSIGN_OR_RETURN(inv_out, ctx.AllocateOutput(2, spec_.stash, stat_dims));
    }
    std::vector<double> means(mean_out ? rows : 0), invs(inv_out ? rows : 0);
    const float eps = spec_.epsilon;
    ONNXAMP_RETURN_IF_ERROR(DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, double>) {
        const T* xd = x.values<T>().data();
        T* yd = y->mutable_values<T>().data();
        const float* scale = nullptr;
        const float* bias = nullptr;
        if constexpr (std::is_same_v<T, float>) {
          scale = scale_t.values<float>().data();
          bias = bias_t ? bias_t->values<float>().data() : nullptr;
        } else {
          float* s = ScratchRow(0, cols);
          LoadBlock(scale_t.values<T>().data(), s, cols);
          scale = s;
          if (bias_t) {
            float* b = ScratchRow(1, cols);
            LoadBlock(bias_t->values<T>().data(), b, cols);
            bias = b;
          }
        }
        reduce::ParallelOver(ctx.threads(), rows, cols, [&](int64_t r0, int64_t r1) {
          // Worker threads have their own scratch; slot 2 holds a converted row.
          float* row = std::is_same_v<T, float> ? nullptr : ScratchRow(2, cols);
          for (int64_t r = r0; r < r1; ++r) {
            float mean, inv;
            if constexpr (std::is_same_v<T, float>) {
              LayerNormRow(xd + r * cols, cols, scale, bias, eps, yd + r * cols, &mean, &inv);
            } else {
              LoadBlock(xd + r * cols, row, cols);
              LayerNormRow(row, cols, scale, bias, eps, row, &mean, &inv);
              StoreBlock(row, yd + r * cols, cols);
            }
            if (!means.empty()) means[r] = mean;
            if (!invs.empty()) invs[r] = inv;
          }
        });
      }
      return Status::Ok();
    }));
    if (mean_out) ONNXAMP_RETURN_IF_ERROR(reduce::WriteParam(mean_out, means));
    if (inv_out) ONNXAMP_RETURN_IF_ERROR(reduce::WriteParam(inv_out, invs));
    return Status::Ok();
  }

  template <typename T, typename A>
  void Run(const ir::Tensor& x, ir::Tensor& y, int64_t rows, int64_t cols, const std::vector<double>& scale_d,
           const std::vector<double>& bias_d, exec::ThreadPool& pool, std::vector<double>& means,
           std::vector<double>& invs) const {
    const std::vector<A> scale(scale_d.begin(), scale_d.end()), bias(bias_d.begin(), bias_d.end());
    const T* xd = x.values<T>().data();
    T* yd = y.mutable_values<T>().data();
    const double eps = spec_.epsilon;
    reduce::ParallelOver(pool, rows, cols, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* in = xd + r * cols;
        T* out = yd + r * cols;
        A mean = 0, var = 0;
        if (cols > 0) reduce::MomentsRun<A>(in, cols, &mean, &var);
        const A inv = reduce::InvStdDev(var, eps);
        for (int64_t j = 0; j < cols; ++j) {
          out[j] = reduce::StoreFast<T>(static_cast<ComputeType<T>>(
              (static_cast<A>(reduce::LoadFast<T>(in[j])) - mean) * inv * scale[j] + bias[j]));
        }
        if (!means.empty()) means[r] = static_cast<double>(mean);
        if (!invs.empty()) invs[r] = static_cast<double>(inv);
      }
    });
  }

  LayerNormSpec spec_;
};

}  // namespace

void RegisterLayerNormKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"LayerNormalization", "", 17, 23, Device::kCpu, types, 0, &exec::MakeKernel<LayerNormCpu>});
}

}  // namespace onnxamp::ops
