// Host-side helpers of the CUDA shape and data-movement kernels (see tensor_util.h).
#include "runtime/cuda/ops/tensor/tensor_util.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/ops/tensor/tensor_launch.h"

namespace onnxamp::cuda::tensor_ops {

std::vector<DType> MovableDTypes() {
  std::vector<DType> out;
  for (int32_t code = 1; code <= kMaxDTypeCode; ++code) {
    const DType t = static_cast<DType>(code);
    const int bits = DTypeBits(t);
    if (bits >= 8 && bits <= 128 && !IsSubByte(t) && t != DType::kString) out.push_back(t);
  }
  return out;
}

std::vector<DType> FixedSizeDTypes() {
  std::vector<DType> out;
  for (int32_t code = 1; code <= kMaxDTypeCode; ++code) {
    const DType t = static_cast<DType>(code);
    if (DTypeBits(t) > 0 && t != DType::kString) out.push_back(t);
  }
  return out;
}

Status CopyPlanOnDevice(void* dst, const void* src, const ops::CopyPlan& plan, size_t elem_size, cudaStream_t stream,
                        std::string_view what) {
  if (plan.rows == 0 || plan.inner == 0 || plan.dims.empty()) return Status::Ok();
  const size_t rank = plan.dims.size();
  if (rank > static_cast<size_t>(kMaxMoveRank)) {
    return Unimplemented(what, ": a copy over ", rank, " dims that do not merge is above the ", kMaxMoveRank,
                         " dims the cuda kernel takes");
  }
  // Widest unit (a multiple of the element size, at most 16 bytes) that every stride, the inner row and both
  // addresses are multiples of; only for an inner row contiguous on both sides.
  size_t unit = elem_size;
  if (plan.dst_strides.back() == 1 && plan.src_strides.back() == 1) {
    for (size_t u = 16; u > elem_size; u /= 2) {
      if (u % elem_size != 0) continue;
      const int64_t f = static_cast<int64_t>(u / elem_size);
      bool ok =
          plan.inner % f == 0 && reinterpret_cast<uintptr_t>(dst) % u == 0 && reinterpret_cast<uintptr_t>(src) % u == 0;
      for (size_t k = 0; ok && k + 1 < rank; ++k) ok = plan.dst_strides[k] % f == 0 && plan.src_strides[k] % f == 0;
      if (ok) {
        unit = u;
        break;
      }
    }
  }
  const int64_t f = static_cast<int64_t>(unit / elem_size);
  StridedCopyArgs args;
  args.rank = static_cast<int>(rank);
  for (size_t k = 0; k < rank; ++k) {
    const bool last = k + 1 == rank;
    args.dims[k] = last ? plan.dims[k] / f : plan.dims[k];
    args.dst_strides[k] = last ? plan.dst_strides[k] : plan.dst_strides[k] / f;
    args.src_strides[k] = last ? plan.src_strides[k] : plan.src_strides[k] / f;
  }
  return LaunchStridedCopy(dst, src, args, unit, stream, what);
}

namespace {

void CUDART_CB ReleaseHostData(void* p) { delete static_cast<std::shared_ptr<const void>*>(p); }

}  // namespace

size_t WidestUnit(size_t elem_size, size_t run_bytes, const void* a, const void* b) {
  for (size_t u = 16; u > elem_size; u /= 2) {
    if (run_bytes % u == 0 && reinterpret_cast<uintptr_t>(a) % u == 0 && reinterpret_cast<uintptr_t>(b) % u == 0) {
      return u;
    }
  }
  return elem_size;
}

Status CheckMovableLikeCpu(DType t, std::string_view op) {
  return ops::DispatchByElementSize(t, op, [](auto) { return Status::Ok(); });
}

StatusOr<std::shared_ptr<ir::Buffer>> DeviceTable::Upload(exec::KernelContext& ctx,
                                                          std::vector<std::byte> bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (device_ && host_ && *host_ == bytes) return device_;
  auto host = std::make_shared<const std::vector<std::byte>>(std::move(bytes));
  ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<ir::Buffer> buffer,
                           ctx.device_context()->Allocate(std::max<size_t>(host->size(), 1)));
  if (!host->empty()) {
    ONNXAMP_RETURN_IF_ERROR(UploadAsync(GetCudaContext(ctx), host, host->data(), buffer->data(), host->size()));
  }
  host_ = std::move(host);
  device_ = buffer;
  return buffer;
}

Status UploadAsync(CudaContext& cc, std::shared_ptr<const void> keep, const void* src, void* dst, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  ONNXAMP_RETURN_IF_ERROR(cc.CopyHostToDevice(src, dst, bytes));
  // A host function queued behind the copy drops the reference once the copy has run.
  auto* pending = new std::shared_ptr<const void>(std::move(keep));
  const cudaError_t e = cudaLaunchHostFunc(cc.stream(), &ReleaseHostData, pending);
  if (e != cudaSuccess) {
    // The copy may still read src: wait for it before letting go (an error path only).
    const Status waited = cc.Synchronize();
    delete pending;
    Status st = CudaErrorToStatus(e, "cudaLaunchHostFunc", "releasing uploaded host data");
    return waited.ok() ? st : waited;
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<exec::OpKernel>> MakeCpuKernel(const exec::KernelInfo& info) {
  ONNXAMP_ASSIGN_OR_RETURN(
      const exec::KernelDef* def,
      exec::KernelRegistry::Global().Find(info.node.op_type(), info.node.domain(), info.opset, exec::Device::kCpu));
  exec::KernelInfo cpu_info{info.node, info.opset, exec::Device::kCpu, info.options};
  return def->factory(cpu_info);
}

StatusOr<std::vector<ir::Tensor>> RunCpuKernel(const exec::OpKernel& cpu, exec::KernelContext& ctx) {
  std::vector<const ir::Tensor*> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const ir::Tensor* t = ctx.input(i);
    ONNXAMP_CHECK(t == nullptr || t->on_host(), "input ", i, " of ", ctx.node().Describe(), " is not on the host");
    inputs.push_back(t);
  }
  return exec::RunOnHost(cpu, ctx.node(), ctx.opset(), std::move(inputs), ctx);
}

}  // namespace onnxamp::cuda::tensor_ops
