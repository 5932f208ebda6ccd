// ParameterStore: flat FP32 buffers (64-byte aligned slices) for parameters, gradients and optimizer state.
#include "trainer/state/parameter_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "runtime/common/dtype.h"
#include "runtime/common/half.h"
#include "runtime/ops/common/broadcast.h"

namespace onnxamp::trainer {
namespace {

size_t RoundUpToAlignment(size_t floats) {
  const size_t a = ParameterStore::kAlignmentFloats;
  return (floats + a - 1) / a * a;
}

float* FloatData(const std::shared_ptr<ir::Buffer>& buffer) { return reinterpret_cast<float*>(buffer->data()); }

}  // namespace

StatusOr<ParameterStore> ParameterStore::Create(std::vector<ParameterSpec> specs) {
  ParameterStore store;
  std::set<std::string, std::less<>> seen;
  size_t offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    ParameterSpec& spec = specs[i];
    if (spec.name.empty()) return InvalidArgument("parameter ", i, " has an empty name");
    if (!seen.insert(spec.name).second) return InvalidArgument("parameter '", spec.name, "' is listed twice");
    StatusOr<int64_t> numel = ir::Tensor::ComputeNumElements(spec.dims);
    if (!numel.ok()) return numel.status().WithContext(StrCat("parameter '", spec.name, "'"));
    const size_t n = static_cast<size_t>(*numel);
    // Keep every byte count of the flat buffers representable, padding included.
    constexpr size_t kMaxFloats = std::numeric_limits<size_t>::max() / sizeof(float) / 2;
    if (offset > kMaxFloats || n > kMaxFloats - offset) {
      return OutOfRange("parameter '", spec.name, "' with dims ", ops::ShapeToString(spec.dims), " is too large");
    }
    Entry entry;
    entry.name = std::move(spec.name);
    entry.dims = std::move(spec.dims);
    entry.numel = n;
    entry.offset = offset;
    offset = RoundUpToAlignment(offset + n);
    store.entries_.push_back(std::move(entry));
  }
  store.flat_size_ = offset;
  store.params_ = store.NewFlatBuffer();
  store.grads_ = store.NewFlatBuffer();
  store.has_grad_.assign(store.entries_.size(), 0);
  return store;
}

std::shared_ptr<ir::Buffer> ParameterStore::NewFlatBuffer() const {
  // ir::Buffer's own allocation is 64-byte aligned and zero-filled.
  return std::make_shared<ir::Buffer>(flat_size_ * sizeof(float), ir::Buffer::Init::kZero);
}

const ParameterStore::Entry& ParameterStore::entry(size_t i) const {
  ONNXAMP_CHECK(i < entries_.size(), "parameter index ", i, " out of range (", entries_.size(), " parameters)");
  return entries_[i];
}

const std::string& ParameterStore::name(size_t i) const { return entry(i).name; }
const std::vector<int64_t>& ParameterStore::dims(size_t i) const { return entry(i).dims; }
size_t ParameterStore::numel(size_t i) const { return entry(i).numel; }
size_t ParameterStore::offset(size_t i) const { return entry(i).offset; }

StatusOr<size_t> ParameterStore::Find(std::string_view name) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].name == name) return i;
  }
  return NotFound("no trainable parameter named '", name, "'");
}

float* ParameterStore::params_data() { return FloatData(params_); }
const float* ParameterStore::params_data() const { return FloatData(params_); }
float* ParameterStore::grads_data() { return FloatData(grads_); }
const float* ParameterStore::grads_data() const { return FloatData(grads_); }

std::span<float> ParameterStore::param(size_t i) { return {params_data() + offset(i), numel(i)}; }
std::span<const float> ParameterStore::param(size_t i) const { return {params_data() + offset(i), numel(i)}; }
std::span<float> ParameterStore::grad(size_t i) { return {grads_data() + offset(i), numel(i)}; }
std::span<const float> ParameterStore::grad(size_t i) const { return {grads_data() + offset(i), numel(i)}; }

Status ParameterStore::LoadParam(size_t i, const ir::Tensor& value) {
  const Entry& e = entry(i);
  const std::string where = StrCat("initial value of parameter '", e.name, "'");
  if (!value.has_data()) return InvalidArgument(where, ": the tensor has no data (external data not loaded?)");
  if (!value.on_host()) return InvalidArgument(where, ": the tensor is in device memory; copy it to the host first");
  if (value.dims() != e.dims) {
    return InvalidArgument(where, ": expected dims ", ops::ShapeToString(e.dims), ", got ",
                           ops::ShapeToString(value.dims()));
  }
  float* out = param(i).data();
  const size_t n = e.numel;
  switch (value.dtype()) {
    case DType::kFloat32:
      if (n) std::memcpy(out, value.data(), n * sizeof(float));
      return Status::Ok();
    case DType::kFloat16: {
      std::span<const uint16_t> in = value.values<uint16_t>();
      for (size_t j = 0; j < n; ++j) out[j] = HalfBitsToFloat(in[j]);
      return Status::Ok();
    }
    case DType::kBFloat16: {
      std::span<const uint16_t> in = value.values<uint16_t>();
      for (size_t j = 0; j < n; ++j) out[j] = BFloat16BitsToFloat(in[j]);
      return Status::Ok();
    }
    case DType::kFloat64: {
      std::span<const double> in = value.values<double>();
      // Check everything first so that a failure leaves the parameter as it was.
      for (size_t j = 0; j < n; ++j) {
        if (std::isfinite(in[j]) && !std::isfinite(static_cast<float>(in[j]))) {
          return OutOfRange(where, ": element ", j, " (", in[j], ") is beyond float32's range");
        }
      }
      for (size_t j = 0; j < n; ++j) out[j] = static_cast<float>(in[j]);
      return Status::Ok();
    }
    default:
      return InvalidArgument(where, ": expected float, float16, bfloat16 or double, got ", DTypeName(value.dtype()));
  }
}

ir::Tensor ParameterStore::ReadParam(size_t i) const {
  ir::Tensor t = ir::Tensor::Uninitialized(DType::kFloat32, dims(i));
  if (numel(i)) std::memcpy(t.mutable_data(), param(i).data(), numel(i) * sizeof(float));
  t.set_name(name(i));
  return t;
}

ir::Tensor ParameterStore::View(const std::shared_ptr<ir::Buffer>& flat, size_t i, std::string name) const {
  const Entry& e = entry(i);
  std::byte* data = flat->data() + e.offset * sizeof(float);
  auto view = std::make_shared<ir::Buffer>(data, e.numel * sizeof(float), std::shared_ptr<void>(flat));
  ir::Tensor t = ir::Tensor::FromBuffer(DType::kFloat32, e.dims, std::move(view));
  t.set_name(std::move(name));
  return t;
}

ir::Tensor ParameterStore::ParamView(size_t i) const { return View(params_, i, name(i)); }

ir::Tensor ParameterStore::GradView(size_t i) const { return View(grads_, i, name(i) + ".grad"); }

bool ParameterStore::has_grad(size_t i) const {
  entry(i);  // checks the index
  return has_grad_[i] != 0;
}

void ParameterStore::set_has_grad(size_t i, bool has) {
  entry(i);  // checks the index
  has_grad_[i] = has ? 1 : 0;
}

void ParameterStore::ZeroGrads() {
  if (flat_size_) std::memset(grads_data(), 0, flat_size_ * sizeof(float));
  std::fill(has_grad_.begin(), has_grad_.end(), 0);
}

Status ParameterStore::CheckGradTensor(size_t i, const ir::Tensor& g, std::string_view what) const {
  const Entry& e = entry(i);
  if (!g.has_data()) return InvalidArgument(what, " of parameter '", e.name, "': the tensor has no data");
  if (!g.on_host()) {
    return InvalidArgument(what, " of parameter '", e.name, "': the tensor is in device memory; copy it to the host");
  }
  if (g.dtype() != DType::kFloat32 || g.dims() != e.dims) {
    return InvalidArgument(what, " of parameter '", e.name, "': expected float ", ops::ShapeToString(e.dims), ", got ",
                           DTypeName(g.dtype()), " ", ops::ShapeToString(g.dims()));
  }
  return Status::Ok();
}

Status ParameterStore::SetGrad(size_t i, const ir::Tensor& g) {
  ONNXAMP_RETURN_IF_ERROR(CheckGradTensor(i, g, "gradient"));
  if (numel(i)) std::memcpy(grad(i).data(), g.data(), numel(i) * sizeof(float));
  has_grad_[i] = 1;
  return Status::Ok();
}

Status ParameterStore::AccumulateGrad(size_t i, const ir::Tensor& g) {
  ONNXAMP_RETURN_IF_ERROR(CheckGradTensor(i, g, "gradient"));
  std::span<float> acc = grad(i);
  std::span<const float> in = g.values<float>();
  for (size_t j = 0; j < acc.size(); ++j) acc[j] += in[j];
  has_grad_[i] = 1;
  return Status::Ok();
}

float* ParameterStore::EnsureState(std::string_view state) {
  auto it = states_.find(state);
  if (it == states_.end()) it = states_.emplace(std::string(state), NewFlatBuffer()).first;
  return FloatData(it->second);
}

float* ParameterStore::FindState(std::string_view state) {
  auto it = states_.find(state);
  return it == states_.end() ? nullptr : FloatData(it->second);
}

const float* ParameterStore::FindState(std::string_view state) const {
  auto it = states_.find(state);
  return it == states_.end() ? nullptr : FloatData(it->second);
}

std::vector<std::string> ParameterStore::state_names() const {
  std::vector<std::string> names;
  for (const auto& [name, buffer] : states_) names.push_back(name);
  return names;
}

StatusOr<ir::Tensor> ParameterStore::StateView(std::string_view state, size_t i) const {
  auto it = states_.find(state);
  if (it == states_.end()) return NotFound("optimizer state '", state, "' was never allocated");
  return View(it->second, i, StrCat(name(i), ".", state));
}

}  // namespace onnxamp::trainer
