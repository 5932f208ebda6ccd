#include "trainer/graph/fake_quantize.h"

#include <cstring>
#include <optional>
#include <unordered_set>
#include <vector>

#include "runtime/executor/graph_match.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ir/model.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/quantize/quant_spec.h"
#include "trainer/autodiff/element_types.h"

namespace onnxamp::trainer {
namespace {

bool IsOnnx(const ir::Node& n, const char* op) { return n.op_type() == op && ir::IsDefaultDomain(n.domain()); }

// Whether a and b hold the same value: the same value, both absent, or constants of equal type, dims and bytes that
// cannot train (not float initializers of more than one element: two such are two parameters, even when equal).
bool SameValue(const ir::Value* a, const ir::Value* b) {
  if (a == b) return true;
  if (!a || !b) return false;
  const ir::Tensor* x = exec::ConstantOf(a);
  const ir::Tensor* y = exec::ConstantOf(b);
  if (!x || !y || !x->has_data() || !y->has_data() || x->dtype() != y->dtype()) return false;
  auto trainable = [](const ir::Value* v, const ir::Tensor* t) {
    return v->initializer() && IsDifferentiableType(t->dtype()) && t->num_elements() > 1;
  };
  if (trainable(a, x) || trainable(b, y)) return false;
  // [] and [1] hold the same one value.
  if (x->dims() != y->dims() && !(x->num_elements() == 1 && y->num_elements() == 1)) return false;
  return x->nbytes() == y->nbytes() && std::memcmp(x->data(), y->data(), x->nbytes()) == 0;
}

// The quantized type's range: QuantizeLinear's output type is its zero point's, else `output_dtype`, else uint8.
std::optional<std::pair<int64_t, int64_t>> Range(const ir::Node& q, const ElementTypes& types) {
  DType t = DType::kUint8;
  if (const ir::Value* zp = q.input(2)) {
    auto it = types.find(zp);
    t = it == types.end() ? DType::kUndefined : it->second;
  } else if (const int64_t code = q.GetInt("output_dtype", 0); code != 0) {
    std::optional<DType> d = DTypeFromCode(code);
    if (!d) return std::nullopt;
    t = *d;
  }
  switch (t) {
    case DType::kInt8:
      return std::pair<int64_t, int64_t>{-128, 127};
    case DType::kUint8:
      return std::pair<int64_t, int64_t>{0, 255};
    case DType::kInt16:
      return std::pair<int64_t, int64_t>{-32768, 32767};
    case DType::kUint16:
      return std::pair<int64_t, int64_t>{0, 65535};
    default:
      return std::nullopt;  // 8-bit floats, 4-bit types, an unknown zero point type: left as they are
  }
}

DType TypeOf(const ir::Value* v, const ElementTypes& types) {
  auto it = v ? types.find(v) : types.end();
  return it == types.end() ? DType::kUndefined : it->second;
}

// Whether the runtime's QuantizeLinear takes this pair's x and scale as FakeQuantize does: float, float16 or bfloat16,
// both of one type (FakeQuantize computes in x's type), a per-axis scale only from opset 13, an output_dtype that
// agrees with the zero point.
bool Supported(const ir::Node& q, const ElementTypes& types, int64_t opset) {
  const DType t = TypeOf(q.input(0), types);
  if (!ops::IsFloatValueType(t)) return false;
  if (TypeOf(q.input(1), types) != t) return false;
  if (opset < 13) {
    const ir::Tensor* s = exec::ConstantOf(q.input(1));
    if (!s || s->num_elements() != 1) return false;
  }
  if (const int64_t code = q.GetInt("output_dtype", 0); code != 0 && q.input(2)) {
    std::optional<DType> d = DTypeFromCode(code);
    if (!d || *d != TypeOf(q.input(2), types)) return false;
  }
  return true;
}

// The values subgraphs read from `g`.
std::unordered_set<const ir::Value*> ReadBySubgraphs(const ir::Graph& g) {
  std::unordered_set<const ir::Value*> out;
  for (const ir::Node* n : g.nodes()) {
    for (const ir::Value* v : g.SubgraphReads(n)) out.insert(v);
  }
  return out;
}

}  // namespace

int UseFakeQuantize(ir::Model& model) {
  ir::Graph& g = *model.graph;
  const ElementTypes types = InferElementTypes(g);
  const int64_t opset = model.OpsetVersion("");
  const std::unordered_set<const ir::Value*> read_below = ReadBySubgraphs(g);
  std::vector<ir::Node*> pairs;
  for (ir::Node* d : g.nodes()) {
    if (!IsOnnx(*d, "DequantizeLinear") || !d->input(0)) continue;
    ir::Node* q = d->input(0)->producer();
    if (!q || !IsOnnx(*q, "QuantizeLinear") || !q->input(1) || !Supported(*q, types, opset)) continue;
    if (d->GetInt("block_size", 0) != 0 || q->GetInt("block_size", 0) != 0) continue;
    if (d->GetInt("axis", 1) != q->GetInt("axis", 1) || d->FindAttribute("output_dtype")) continue;
    if (!SameValue(q->input(1), d->input(1)) || !SameValue(q->input(2), d->input(2)) || !Range(*q, types)) continue;
    pairs.push_back(d);
  }
  for (ir::Node* d : pairs) {
    ir::Node* q = d->input(0)->producer();
    ir::Value* quantized = d->input(0);
    const auto [qmin, qmax] = *Range(*q, types);
    std::vector<ir::Value*> inputs = {q->input(0), q->input(1)};
    if (q->input(2)) inputs.push_back(q->input(2));
    ir::Value* y = d->output(0);
    const std::string name = d->name();
    const int64_t axis = q->GetInt("axis", 1);
    // In the place of the DequantizeLinear, whose readers follow it.
    d->SetOutput(0, nullptr);
    ir::Node* fq = g.InsertNode(d, ops::kFakeQuantizeOp, inputs, {y}, name, exec::kInternalDomain);
    fq->SetAttribute(ir::Attribute::Int("axis", axis));
    fq->SetAttribute(ir::Attribute::Int("qmin", qmin));
    fq->SetAttribute(ir::Attribute::Int("qmax", qmax));
    std::vector<ir::Value*> dq_params = {d->input(1), d->input(2)};
    g.RemoveNode(d);
    // Its scale and zero point when they were values of their own (equal constants): gone when nothing reads them.
    for (ir::Value* v : dq_params) {
      if (v) exec::RemoveIfUnused(g, v);
    }
    if (quantized->uses().empty() && !quantized->is_graph_output() && !read_below.count(quantized)) {
      g.RemoveNode(q);
      g.RemoveValue(quantized);
    }
  }
  if (!pairs.empty() && model.OpsetVersion(exec::kInternalDomain) == 0) model.SetOpsetVersion(exec::kInternalDomain, 1);
  return static_cast<int>(pairs.size());
}

}  // namespace onnxamp::trainer
