// CUDA Resize (opsets 10-25) and Upsample (7-9): attributes, output sizes and the per-axis index and weight tables
// come from the same code as the CPU kernel (runtime/ops/resize/resize.h), so both backends sample the same source
// positions with the same weights. The tables are uploaded when they change (a new input shape, scales or sizes)
// and kept on the device otherwise, so a steady-state run uploads nothing; nearest is one gather over all axes,
// linear and cubic one separable pass per resized axis with intermediates in the compute type.
#include <cstring>
#include <mutex>

#include "runtime/cuda/ops/tensor/tensor_launch.h"
#include "runtime/cuda/ops/tensor/tensor_util.h"
#include "runtime/ops/resize/resize.h"

namespace onnxamp::cuda::tensor_ops {
namespace {

using ops::AxisPlan;
using ops::InterpMode;

// The tables a kernel uploaded last, on the host and on the device.
struct TableCache {
  std::mutex mu;
  std::shared_ptr<const std::vector<std::byte>> host;
  std::shared_ptr<ir::Buffer> device;
};

// Host bytes to upload in one piece; Add returns the offset of what it appended (16-byte aligned).
class Staging {
 public:
  template <typename T>
  size_t Add(const T* data, size_t count) {
    const size_t offset = (bytes_->size() + 15) / 16 * 16;
    bytes_->resize(offset + count * sizeof(T));
    if (count) std::memcpy(bytes_->data() + offset, data, count * sizeof(T));
    return offset;
  }
  size_t size() const { return bytes_->size(); }

  // The device copy of the bytes: the one `cache` holds when the bytes are the same as last time, else device
  // memory the bytes are uploaded to (asynchronously; the host bytes stay alive until the copy has run), which
  // `cache` then keeps. The caller holds the returned buffer until its kernels are queued.
  StatusOr<std::shared_ptr<ir::Buffer>> Upload(exec::KernelContext& ctx, TableCache& cache);

 private:
  std::shared_ptr<std::vector<std::byte>> bytes_ = std::make_shared<std::vector<std::byte>>();
};

StatusOr<std::shared_ptr<ir::Buffer>> Staging::Upload(exec::KernelContext& ctx, TableCache& cache) {
  std::lock_guard<std::mutex> lock(cache.mu);
  if (cache.device && cache.host && *cache.host == *bytes_) return cache.device;
  ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<ir::Buffer> buffer, ctx.device_context()->Allocate(size()));
  const std::byte* src = bytes_->data();
  ONNXAMP_RETURN_IF_ERROR(UploadAsync(GetCudaContext(ctx), bytes_, src, buffer->data(), size()));
  cache.host = bytes_;
  cache.device = buffer;
  return buffer;
}

inline const void* At(const std::shared_ptr<ir::Buffer>& b, size_t offset) { return b->data() + offset; }

class ResizeCuda : public exec::OpKernel {
 public:
  ResizeCuda(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node, info.opset); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, ops::RequireInput(ctx, 0, "X"));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<AxisPlan> plans, spec_.PlanAxes(ctx, *x));
    if (spec_.attrs().mode == InterpMode::kNearest) return Nearest(ctx, *x, plans);
    return Weighted(ctx, *x, plans)
        .WithContext(spec_.attrs().mode == InterpMode::kLinear ? "mode 'linear'" : "mode 'cubic'");
  }

 private:
  Status Nearest(exec::KernelContext& ctx, const ir::Tensor& x, std::vector<AxisPlan>& plans) const {
    const ops::ResizeAttrs& attrs = spec_.attrs();
    std::vector<int64_t> out_dims;
    for (const AxisPlan& a : plans) out_dims.push_back(a.out);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x.dtype(), out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    const size_t rank = plans.size();
    if (rank > static_cast<size_t>(kMaxMoveRank)) {
      return Unimplemented("Resize: rank ", rank, " is above the ", kMaxMoveRank, " dims the cuda kernel takes");
    }
    for (AxisPlan& a : plans) PlanAxis(attrs, a);
    unsigned char fill[16] = {};
    if (attrs.coord == ops::CoordMode::kTfCropAndResize) {
      ONNXAMP_RETURN_IF_ERROR(ops::DispatchByElementSize(x.dtype(), "Resize", [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        T f{};
        ONNXAMP_RETURN_IF_ERROR(spec_.ExtrapolationValue(x.dtype(), &f));
        if constexpr (std::is_trivially_copyable_v<T>) std::memcpy(fill, &f, sizeof(T));
        return Status::Ok();
      }));
    }
    // One source map per axis (identity axes map to themselves), concatenated.
    ResizeNearestArgs args;
    args.rank = static_cast<int>(rank);
    std::vector<int64_t> maps;
    const std::vector<int64_t> in_strides = ops::ContiguousStrides(x.dims());
    for (size_t k = 0; k < rank; ++k) {
      args.out_dims[k] = plans[k].out;
      args.in_strides[k] = in_strides[k];
      args.map_offsets[k] = static_cast<int64_t>(maps.size());
      if (plans[k].identity) {
        for (int64_t o = 0; o < plans[k].out; ++o) maps.push_back(o);
      } else {
        maps.insert(maps.end(), plans[k].src.begin(), plans[k].src.end());
      }
    }
    Staging staging;
    staging.Add(maps.data(), maps.size());
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<ir::Buffer> tables, staging.Upload(ctx, nearest_tables_));
    return LaunchResizeNearest(MutableDeviceData(*y), DeviceData(x), static_cast<const int64_t*>(At(tables, 0)), args,
                               fill, ElementSize(x.dtype()), GetCudaContext(ctx).stream());
  }

  Status Weighted(exec::KernelContext& ctx, const ir::Tensor& x, std::vector<AxisPlan>& plans) const {
    ResizeFloat type = ResizeFloat::kFloat32;
    ONNXAMP_RETURN_IF_ERROR(ops::DispatchFloat(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      type = std::is_same_v<T, double>     ? ResizeFloat::kFloat64
             : std::is_same_v<T, Float16>  ? ResizeFloat::kFloat16
             : std::is_same_v<T, BFloat16> ? ResizeFloat::kBFloat16
                                           : ResizeFloat::kFloat32;
      return Status::Ok();
    }));
    const bool wide = type == ResizeFloat::kFloat64;
    const DType compute = wide ? DType::kFloat64 : DType::kFloat32;
    std::vector<int64_t> out_dims;
    for (const AxisPlan& a : plans) out_dims.push_back(a.out);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x.dtype(), out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    CudaContext& cc = GetCudaContext(ctx);
    for (AxisPlan& a : plans) PlanAxis(spec_.attrs(), a);
    std::vector<size_t> passes;
    for (size_t k = 0; k < plans.size(); ++k)
      if (!plans[k].identity) passes.push_back(k);
    if (passes.empty()) {
      // Every axis keeps its size and scale 1: the output is the input (load and store round trip exactly).
      return cc.CopyDeviceToDevice(x.data(), y->mutable_data(), x.nbytes());
    }
    // Tables of every pass in one upload: tap indices, weights in the compute type, extrapolation flags.
    Staging staging;
    struct PassTables {
      size_t index, weight, extrapolate;
    };
    std::vector<PassTables> offsets;
    for (size_t k : passes) {
      const AxisPlan& a = plans[k];
      PassTables t;
      t.index = staging.Add(a.tap_index.data(), a.tap_index.size());
      if (wide) {
        t.weight = staging.Add(a.tap_weight.data(), a.tap_weight.size());
      } else {
        std::vector<float> w(a.tap_weight.size());
        for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(a.tap_weight[i]);
        t.weight = staging.Add(w.data(), w.size());
      }
      std::vector<uint8_t> ex(a.extrapolate.size());
      for (size_t i = 0; i < ex.size(); ++i) ex[i] = a.extrapolate[i] ? 1 : 0;
      t.extrapolate = staging.Add(ex.data(), ex.size());
      offsets.push_back(t);
    }
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<ir::Buffer> tables, staging.Upload(ctx, weighted_tables_));
    // Intermediates between passes, in the compute type (two, used alternately).
    std::shared_ptr<ir::Buffer> scratch[2];
    std::vector<int64_t> dims = x.dims();
    for (size_t p = 0; p + 1 < passes.size(); ++p) {
      dims[passes[p]] = plans[passes[p]].out;
      ONNXAMP_RETURN_IF_ERROR(ops::CheckFitsInMemory(compute, dims, "Resize intermediate"));
      ONNXAMP_ASSIGN_OR_RETURN(const size_t bytes, ir::Tensor::ComputeByteSize(compute, dims));
      std::shared_ptr<ir::Buffer>& s = scratch[p % 2];
      if (!s || s->size() < bytes) {
        ONNXAMP_ASSIGN_OR_RETURN(s, ctx.device_context()->Allocate(bytes));
      }
    }
    dims = x.dims();
    const void* src = x.data();
    for (size_t p = 0; p < passes.size(); ++p) {
      const size_t k = passes[p];
      const AxisPlan& a = plans[k];
      const bool last = p + 1 == passes.size();
      void* dst = last ? y->mutable_data() : static_cast<void*>(scratch[p % 2]->data());
      ResizePassArgs args;
      args.outer = ops::DimProduct(dims, 0, k);
      args.in = a.in;
      args.out = a.out;
      args.inner = ops::DimProduct(dims, k + 1, dims.size());
      args.taps = a.taps;
      args.tap_index = static_cast<const int64_t*>(At(tables, offsets[p].index));
      args.weights = At(tables, offsets[p].weight);
      args.extrapolate = static_cast<const uint8_t*>(At(tables, offsets[p].extrapolate));
      args.extrapolation = spec_.attrs().extrapolation;
      args.src_is_storage = p == 0;
      args.dst_is_storage = last;
      ONNXAMP_RETURN_IF_ERROR(LaunchResizePass(dst, src, type, args, cc.stream()));
      dims[k] = a.out;
      src = dst;
    }
    return Status::Ok();
  }

  ops::ResizeSpec spec_;
  mutable TableCache nearest_tables_, weighted_tables_;
};

}  // namespace

void RegisterResizeKernels(exec::KernelRegistry& r) {
  exec::KernelDef resize{"Resize", "", 10, 25, exec::Device::kCuda, MovableDTypes(), 0, &exec::MakeKernel<ResizeCuda>};
  resize.host_inputs = {1, 2, 3};
  r.Register(std::move(resize));
  exec::KernelDef upsample{
      "Upsample", "", 7, 9, exec::Device::kCuda, MovableDTypes(), 0, &exec::MakeKernel<ResizeCuda>};
  upsample.host_inputs = {1};
  r.Register(std::move(upsample));
}

}  // namespace onnxamp::cuda::tensor_ops
