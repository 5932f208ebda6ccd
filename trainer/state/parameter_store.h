// ParameterStore: a model's trainable parameters, their gradients and the optimizer's state in flat FP32 buffers,
// with per-parameter ir::Tensor views (no copies) to bind as session inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::trainer {

// A parameter to allocate: its name (the initializer's name in the graph) and dims.
struct ParameterSpec {
  std::string name;
  std::vector<int64_t> dims;
};

// Every buffer of the store (parameters, gradients, each optimizer state) has the same layout: parameter i occupies
// numel(i) floats starting at offset(i), offsets are multiples of 16 floats (64 bytes) and each buffer is 64-byte
// aligned, so every parameter's slice starts on a 64-byte boundary. Padding floats between slices are zero and stay
// zero (the optimizers and the GradScaler may process a whole buffer in one loop: zeros map to zeros).
//
// Gradients follow PyTorch's `zero_grad(set_to_none=True)`: after ZeroGrads no parameter has a gradient (its slot
// is zero); SetGrad/AccumulateGrad give it one. Optimizers and clipping skip parameters without a gradient, as
// torch.optim skips parameters whose .grad is None.
//
// Views share the store's memory and keep it alive (the store may be destroyed first). ir::Tensor is
// copy-on-write: writing through a view's mutable_data() reaches the store only while that view is the sole holder
// of its ir::Buffer; write through the store's spans instead, and read through views.
//
// Move-only: a copy would silently share or silently not share the buffers.
class ParameterStore {
 public:
  static constexpr size_t kAlignmentBytes = 64;
  static constexpr size_t kAlignmentFloats = kAlignmentBytes / sizeof(float);

  // Allocates zeroed buffers for `specs`. Fails on an empty or repeated name, or invalid dims (negative, overflow),
  // naming the parameter.
  static StatusOr<ParameterStore> Create(std::vector<ParameterSpec> specs);

  ParameterStore(ParameterStore&&) noexcept = default;
  ParameterStore& operator=(ParameterStore&&) noexcept = default;
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  // ---- Layout ----
  size_t size() const { return entries_.size(); }
  const std::string& name(size_t i) const;
  const std::vector<int64_t>& dims(size_t i) const;
  size_t numel(size_t i) const;
  // Offset of parameter i in every flat buffer, in floats (a multiple of kAlignmentFloats).
  size_t offset(size_t i) const;
  // Floats in each flat buffer, padding included (a multiple of kAlignmentFloats).
  size_t flat_size() const { return flat_size_; }
  // The index of the parameter called `name`; NotFound otherwise.
  StatusOr<size_t> Find(std::string_view name) const;

  // ---- Parameters (FP32 master weights) ----
  float* params_data();
  const float* params_data() const;
  std::span<float> param(size_t i);
  std::span<const float> param(size_t i) const;
  // Copies `value` into parameter i. Accepts float32, and float16, bfloat16 and float64 (converted to float32,
  // round to nearest even; a finite float64 beyond float32's range is an error). Dims must equal the parameter's.
  Status LoadParam(size_t i, const ir::Tensor& value);
  // An owning float32 copy of parameter i, named after it.
  ir::Tensor ReadParam(size_t i) const;
  // A float32 view of parameter i named after it (the name the graph input has).
  ir::Tensor ParamView(size_t i) const;

  // ---- Gradients (the accumulation buffer) ----
  float* grads_data();
  const float* grads_data() const;
  std::span<float> grad(size_t i);
  std::span<const float> grad(size_t i) const;
  bool has_grad(size_t i) const;
  // Marks parameter i as having (or not having) a gradient, for code that writes grad(i) directly.
  void set_has_grad(size_t i, bool has);
  // Zeroes every gradient and marks every parameter as having none.
  void ZeroGrads();
  // grad(i) = g. `g` must be a float32 host tensor with the parameter's dims.
  Status SetGrad(size_t i, const ir::Tensor& g);
  // grad(i) += g (float32, element by element; the first gradient after ZeroGrads is added to zeros, which is
  // exact). `g` must be a float32 host tensor with the parameter's dims.
  Status AccumulateGrad(size_t i, const ir::Tensor& g);
  // A float32 view of gradient i named "<parameter>.grad".
  ir::Tensor GradView(size_t i) const;

  // ---- Optimizer state ----
  // The flat buffer of optimizer state `state` ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer"),
  // allocated zero-filled on first use.
  float* EnsureState(std::string_view state);
  // The flat buffer of `state`, or null when it was never allocated.
  float* FindState(std::string_view state);
  const float* FindState(std::string_view state) const;
  // Names of the allocated states, sorted.
  std::vector<std::string> state_names() const;
  // A float32 view of parameter i's slice of `state`, named "<parameter>.<state>"; NotFound when `state` was never
  // allocated.
  StatusOr<ir::Tensor> StateView(std::string_view state, size_t i) const;

 private:
  struct Entry {
    std::string name;
    std::vector<int64_t> dims;
    size_t numel = 0;
    size_t offset = 0;
  };

  ParameterStore() = default;
  const Entry& entry(size_t i) const;  // ONNXAMP_CHECKs the index
  std::shared_ptr<ir::Buffer> NewFlatBuffer() const;
  ir::Tensor View(const std::shared_ptr<ir::Buffer>& flat, size_t i, std::string name) const;
  // Checks that `g` can be stored as parameter i's gradient; `what` names the operation in errors.
  Status CheckGradTensor(size_t i, const ir::Tensor& g, std::string_view what) const;

  std::vector<Entry> entries_;
  size_t flat_size_ = 0;
  std::shared_ptr<ir::Buffer> params_;
  std::shared_ptr<ir::Buffer> grads_;
  std::vector<uint8_t> has_grad_;
  std::map<std::string, std::shared_ptr<ir::Buffer>, std::less<>> states_;
};

}  // namespace onnxamp::trainer
