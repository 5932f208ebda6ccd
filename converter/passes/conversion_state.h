// The state the converter's passes share: options, the per-node and per-value type plan the classify pass
// makes, the caches of inserted Casts, and the report being filled.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "converter/convert.h"
#include "runtime/common/dtype.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/model.h"

namespace onnxamp::converter {

// What the plan says about one value.
struct ValuePlan {
  DType orig = DType::kUndefined;    // element type before conversion (declared or inferred)
  DType actual = DType::kUndefined;  // element type after conversion
  // The type follow-nodes see when they promote. Equal to `actual` except for graph inputs kept FP32 by
  // --keep-io-types, which count as the target type (one Cast after the input feeds the low consumers).
  DType prop = DType::kUndefined;
  // A weak value is a constant or a value computed only from constants (initializers, Constant,
  // ConstantOfShape, Random*, Cast(to=FLOAT)): its type is decided by what its consumers want.
  bool weak = false;
};

// What the plan says about one node.
struct NodePlan {
  Decision decision;
  // The floating type the node computes in (its "group" of type-tied float inputs and outputs); kUndefined when
  // the node has no such group (integer ops, boundaries).
  DType compute = DType::kUndefined;
  std::vector<DType> required;  // per input: the element type the input must have (kUndefined: as it is)
  std::vector<int> group_inputs;
  std::vector<int> group_outputs;
  bool boundary = false;  // inputs and outputs keep their original types (no schema, If/Loop/Scan, ...)
  bool weak = false;      // a follow node fed only by weak values
  // Sources (Constant, ConstantOfShape, Random*, EyeLike, Cast) whose dtype is rewritten to this type.
  DType retype = DType::kUndefined;
  std::string fallback_reason;  // why a low/follow node was kept FP32 (schema, boundary)
};

struct ConversionState {
  ConvertOptions options;
  ConvertReport* report = nullptr;
  ir::Model* model = nullptr;

  std::unordered_map<const ir::Value*, ValuePlan> values;
  std::unordered_map<const ir::Node*, NodePlan> nodes;
  // Values of a graph that nodes of its subgraphs read (outer-scope uses): their type cannot follow demand.
  std::unordered_set<const ir::Value*> implicitly_used;

  // Opset of `domain` for the model ("" and "ai.onnx" are the same).
  int64_t Opset(const std::string& domain) const;

  // The plan of `v`; for an outer-scope stand-in, the plan of the value it stands for. Null when unplanned.
  ValuePlan* FindValue(const ir::Value* v);
  NodePlan* FindNode(const ir::Node* n);
  // `v` itself, or for an outer-scope stand-in the value of an enclosing graph it stands for.
  static const ir::Value* Resolve(const ir::Value* v);
  // The element type `v` has now (its plan's `actual`, else its declared type).
  DType ActualType(const ir::Value* v);
  // The element type graph output `index` of `graph` must have after conversion.
  DType OutputRequired(const ir::Graph& graph, size_t index);
};

// True for float32, float16 and bfloat16: the types the converter moves between.
bool IsConvertible(DType t);

// fp16 and bf16 rank 1, fp32 2, fp64 3: the "widest" order used for promotion. 0 for other types.
int FloatRank(DType t);

// The wider of two floating types (mixed fp16/bf16 promote to fp32).
DType Promote(DType a, DType b);

// Short names used in generated value names: "fp16", "bf16", "fp32".
std::string ShortName(DType t);

// Converts a float tensor to `to` (float32/float16/bfloat16), clamping to the target's largest finite value
// and counting clamped and flushed-to-zero elements into `conv`. Non-float tensors are an internal error.
StatusOr<ir::Tensor> ConvertTensorData(const ir::Tensor& src, DType to, TensorConversion* conv);

}  // namespace onnxamp::converter
