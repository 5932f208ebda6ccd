// Host-side helpers of the CUDA shape and data-movement kernels: dtype lists, strided copies from a CopyPlan (widened
// to 16-byte units where the layout allows), asynchronous uploads of host data and tables kept on the device while
// they stay the same, and running a CPU kernel of the same node on host inputs (for ops whose result is computed on
// the host: Constant, Range).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::cuda::tensor_ops {

// Element types the CUDA data-movement kernels take: every type of 1, 2, 4, 8 or 16 bytes (not strings, not the
// packed sub-byte types).
std::vector<DType> MovableDTypes();
// Element types ops that only reinterpret dims take on the device: every type with a fixed size, sub-byte included.
std::vector<DType> FixedSizeDTypes();

// Runs `plan` (ops::MakeCopyPlan, strides in elements of `elem_size` bytes) on the device: dst and src are device
// pointers at the element of index 0. The copy moves 16-, 8-, 4- or 2-byte units instead of elements when the inner
// row is contiguous on both sides and every stride, the row length and both addresses allow. An empty plan does
// nothing. Unimplemented when the plan keeps more than kMaxMoveRank dims.
Status CopyPlanOnDevice(void* dst, const void* src, const ops::CopyPlan& plan, size_t elem_size, cudaStream_t stream,
                        std::string_view what);

// Copies `bytes` from host memory at `src` to device memory at `dst` on the context's stream without waiting, and
// keeps `keep` (the owner of src) alive until the copy has run.
Status UploadAsync(CudaContext& cc, std::shared_ptr<const void> keep, const void* src, void* dst, size_t bytes);

// A host-built table kept on the device while its bytes stay the same: a steady-state run (and a captured training
// step) uploads nothing. Thread-safe.
class DeviceTable {
 public:
  // The device copy of `bytes`: the kept one when the bytes are unchanged, else a new upload (asynchronous; the host
  // bytes stay alive until the copy has run). The caller holds the returned buffer until its kernels are queued.
  StatusOr<std::shared_ptr<ir::Buffer>> Upload(exec::KernelContext& ctx, std::vector<std::byte> bytes) const;

 private:
  mutable std::mutex mu_;
  mutable std::shared_ptr<const std::vector<std::byte>> host_;
  mutable std::shared_ptr<ir::Buffer> device_;
};

// Appends `values` to `bytes` at a 16-byte aligned offset, which it returns (a DeviceTable's parts).
template <typename V>
size_t Append(std::vector<std::byte>& bytes, const std::vector<V>& values) {
  const size_t offset = (bytes.size() + 15) / 16 * 16;
  bytes.resize(offset + values.size() * sizeof(V));
  if (!values.empty()) std::memcpy(bytes.data() + offset, values.data(), values.size() * sizeof(V));
  return offset;
}

// The CPU kernel of the node (the CPU registry's kernel for the same op and opset), for device kernels that reuse it.
StatusOr<std::unique_ptr<exec::OpKernel>> MakeCpuKernel(const exec::KernelInfo& info);

// Runs `cpu` on ctx's inputs (which must all be host tensors: the KernelDef lists them in host_inputs) and returns
// the outputs it produced (host tensors; an unrequested output may be empty).
StatusOr<std::vector<ir::Tensor>> RunCpuKernel(const exec::OpKernel& cpu, exec::KernelContext& ctx);

// The bytes of a device tensor (const and mutable), as void pointers for the launchers.
inline const void* DeviceData(const ir::Tensor& t) { return t.data(); }
inline void* MutableDeviceData(ir::Tensor& t) { return t.mutable_data(); }

// The widest unit (16, 8, 4 or 2 bytes, else `elem_size`) that divides `run_bytes` and both addresses: runs of
// run_bytes bytes that start at multiples of run_bytes from `a` and `b` can move in units of it (embedding rows of
// fp16 as 16-byte vectors).
size_t WidestUnit(size_t elem_size, size_t run_bytes, const void* a, const void* b);

// OK for an element type the CPU kernels of `op` can move element by element; else the CPU's Unimplemented
// (ops::DispatchByElementSize: sub-byte types), for device kernels that refuse what their CPU kernel refuses.
Status CheckMovableLikeCpu(DType t, std::string_view op);

// Element size in bytes of a movable dtype.
inline size_t ElementSize(DType t) { return static_cast<size_t>(DTypeBits(t) / 8); }

}  // namespace onnxamp::cuda::tensor_ops
