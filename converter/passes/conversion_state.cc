// Shared helpers of the converter's passes: plan lookups, float type ordering, tensor data conversion.
#include "converter/passes/conversion_state.h"

#include <cmath>
#include <limits>

#include "runtime/common/half.h"
#include "runtime/executor/graph_match.h"

namespace onnxamp::converter {

int64_t ConversionState::Opset(const std::string& domain) const {
  return model ? model->OpsetVersion(ir::IsDefaultDomain(domain) ? "" : domain) : 0;
}

const ir::Value* ConversionState::Resolve(const ir::Value* v) { return exec::DefiningValue(v); }

ValuePlan* ConversionState::FindValue(const ir::Value* v) {
  auto it = values.find(Resolve(v));
  return it == values.end() ? nullptr : &it->second;
}

NodePlan* ConversionState::FindNode(const ir::Node* n) {
  auto it = nodes.find(n);
  return it == nodes.end() ? nullptr : &it->second;
}

DType ConversionState::ActualType(const ir::Value* v) {
  if (const ValuePlan* p = FindValue(v); p && p->actual != DType::kUndefined) return p->actual;
  const ir::Value* r = Resolve(v);
  return r->type().is_tensor() ? r->type().elem_type() : DType::kUndefined;
}

DType ConversionState::OutputRequired(const ir::Graph& graph, size_t index) {
  const ir::Value* v = graph.outputs()[index];
  const ValuePlan* p = FindValue(v);
  const DType orig = p ? p->orig : (v->type().is_tensor() ? v->type().elem_type() : DType::kUndefined);
  // Subgraph outputs bind positionally to their node's outputs, whose types do not change: keep them.
  if (graph.parent_node() != nullptr || options.keep_io_types) return orig;
  return orig == DType::kFloat32 ? options.target : orig;
}

bool IsConvertible(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; }

int FloatRank(DType t) {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16:
      return 1;
    case DType::kFloat32:
      return 2;
    case DType::kFloat64:
      return 3;
    default:
      return 0;
  }
}

DType Promote(DType a, DType b) {
  if (a == DType::kUndefined) return b;
  if (b == DType::kUndefined) return a;
  if (a == b) return a;
  const int ra = FloatRank(a), rb = FloatRank(b);
  if (ra == rb) return DType::kFloat32;  // fp16 with bf16: neither holds the other
  return ra > rb ? a : b;
}

std::string ShortName(DType t) {
  switch (t) {
    case DType::kFloat16:
      return "fp16";
    case DType::kBFloat16:
      return "bf16";
    case DType::kFloat32:
      return "fp32";
    case DType::kFloat64:
      return "fp64";
    default:
      return std::string(DTypeName(t));
  }
}

namespace {

float LoadFloat(DType t, const std::byte* p, int64_t i) {
  switch (t) {
    case DType::kFloat32:
      return reinterpret_cast<const float*>(p)[i];
    case DType::kFloat16:
      return HalfBitsToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
    default:  // kBFloat16
      return BFloat16BitsToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
  }
}

}  // namespace

StatusOr<ir::Tensor> ConvertTensorData(const ir::Tensor& src, DType to, TensorConversion* conv) {
  if (!IsConvertible(src.dtype()) || !IsConvertible(to)) {
    return Internal("cannot convert tensor '", src.name(), "' from ", DTypeName(src.dtype()), " to ", DTypeName(to));
  }
  if (!src.has_data()) {
    return FailedPrecondition("tensor '", src.name(), "' was loaded without its data; load external data to convert");
  }
  const int64_t n = src.num_elements();
  ir::Tensor out = ir::Tensor::Uninitialized(to, src.dims());
  out.set_name(src.name());
  out.set_doc_string(src.doc_string());
  if (src.external()) {
    ir::ExternalDataInfo info = *src.external();
    info.offset = 0;
    info.length.reset();
    info.checksum.clear();
    out.set_external(info);
  }
  const std::byte* in = src.data();
  std::byte* dst = out.mutable_data();
  int64_t clamped = 0, flushed = 0;
  if (to == DType::kFloat32) {
    float* o = reinterpret_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) o[i] = LoadFloat(src.dtype(), in, i);
  } else {
    const bool half = to == DType::kFloat16;
    const float max_finite = half ? 65504.0f : BFloat16BitsToFloat(0x7f7f);
    uint16_t* o = reinterpret_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) {
      float x = LoadFloat(src.dtype(), in, i);
      if (std::isfinite(x) && std::fabs(x) > max_finite) {
        x = std::copysign(max_finite, x);
        ++clamped;
      }
      const uint16_t bits = half ? FloatToHalfBits(x) : FloatToBFloat16Bits(x);
      if (x != 0.0f && (bits & 0x7fffu) == 0) ++flushed;
      o[i] = bits;
    }
  }
  if (conv) {
    conv->elements += n;
    conv->clamped += clamped;
    conv->flushed_to_zero += flushed;
  }
  return out;
}

}  // namespace onnxamp::converter
