// The converter's passes. Each is `Status Run(ir::Graph&, bool* changed)` over a graph and its subgraphs, and
// works on the ConversionState the classify pass fills; convert.cc runs them in the order listed here.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "converter/passes/conversion_state.h"
#include "runtime/common/status.h"
#include "runtime/ir/graph.h"
#include "runtime/passes/pass.h"

namespace onnxamp::converter {

// 1 + 5 + 7. Decides a precision per node (policy, then the ONNX schema at the model's opset), and plans the
// element type of every value and the type every node input must have. Inputs that must stay FP32 (Resize
// scales/roi, index and shape inputs) are outside the node's float group and keep their types. Recurses into
// If/Loop/Scan bodies, whose formal inputs and outputs keep their types. Changes nothing in the graph.
class ClassifyPass {
 public:
  explicit ClassifyPass(ConversionState& state) : state_(state) {}
  Status Run(ir::Graph& graph, bool* changed);

 private:
  Status PlanGraph(ir::Graph& graph);
  Status PlanNode(ir::Node* node);
  void PlanBoundary(ir::Node* node, NodePlan& np, const std::string& reason);
  // Backward over `order`: weak values whose consumers all want one type take it (see conversion_state.h).
  void ResolveWeak(const std::vector<ir::Node*>& order);
  // The types the node inputs and graph outputs reading `v` require (inputs that take it as it is are not
  // listed); `pinned` is set when a subgraph reads `v` by name, so its type must not change.
  std::vector<DType> Demands(const ir::Value* v, bool* pinned);
  void SetOutput(ir::Value* v, DType inferred_orig, DType actual, bool weak);
  DType Orig(const ir::Value* v);

  ConversionState& state_;
};

// 3. Initializers and Constant/ConstantOfShape values feeding nodes that need another float type are converted:
// in place when every use wants the same type, else one copy per precision (the FP32 original is never
// retyped under an FP32 consumer). Clamps to the target's range and counts flushes, per tensor.
class ConvertInitializersPass {
 public:
  explicit ConvertInitializersPass(ConversionState& state) : state_(state) {}
  Status Run(ir::Graph& graph, bool* changed);

 private:
  Status ConvertConstantNode(ir::Node* node, DType to, bool* changed);
  ConversionState& state_;
};

// 2. One Cast per (value, target type) and graph, shared by all consumers, placed before the first consumer
// (so topological order holds); graph outputs that need another type get a Cast that takes over their name.
class InsertCastsPass {
 public:
  explicit InsertCastsPass(ConversionState& state) : state_(state) {}
  Status Run(ir::Graph& graph, bool* changed);

 private:
  ir::Value* CastOf(ir::Graph& graph, ir::Value* v, DType to, ir::Node* before);
  Status CastOutputs(ir::Graph& graph, bool* changed);
  ConversionState& state_;
  std::map<std::pair<const ir::Value*, DType>, ir::Value*> cache_;
};

// 4. Writes the plan into everything that carries a dtype: value types (graph inputs, outputs, value_info,
// outer-scope references), Cast `to`, RandomNormal/RandomUniform/*Like/EyeLike/Bernoulli `dtype`.
class UpdateTypesPass {
 public:
  explicit UpdateTypesPass(ConversionState& state) : state_(state) {}
  Status Run(ir::Graph& graph, bool* changed);

 private:
  ConversionState& state_;
};

// 6. Removes no-op Casts and lossless pairs (low -> wider -> the same low type); a lossy pair
// (fp32 -> fp16 -> fp32) is kept because it changes values.
class FoldCastsPass {
 public:
  explicit FoldCastsPass(ConversionState* state = nullptr) : state_(state) {}
  Status Run(ir::Graph& graph, bool* changed);
  int64_t folded() const { return folded_; }

 private:
  ConversionState* state_;
  int64_t folded_ = 0;
};

// The passes above in run order as one pipeline (runtime/passes/pass.h): classify_precision, apply_precision_plan
// (ConvertInitializersPass, InsertCastsPass and UpdateTypesPass as one step: the graph verifies only once all three
// ran, since an initializer that is also a graph input changes type before its declaration does), fold_casts and
// sort_topologically (the main graph and every subgraph). The passes share `state`, which must outlive the pipeline.
passes::PassPipeline ConversionPasses(ConversionState& state);

// The ONNX schema's verdict: may input group `type_param` of `node` (at `opset`) hold `t`? True when the op has
// no schema (nothing to check against). bfloat16 is also allowed where a later opset of ONNX added it to the
// parameter (Conv at 22) and that opset is at most max(opset, types_opset) (ConvertOptions::bfloat16_types_opset).
bool SchemaAllows(const ir::Node& node, int64_t opset, const std::string& type_param, DType t, int64_t types_opset = 0);

}  // namespace onnxamp::converter
