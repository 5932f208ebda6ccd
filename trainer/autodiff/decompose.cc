// DecomposeForGradients: the path from wrt to the targets (by name, whatever the types: a decomposition the backward
// pass does not need costs speed, never correctness), and the decomposition of each node on it that has no builder.
#include "trainer/autodiff/decompose.h"

#include <unordered_set>

#include "runtime/ops/decompose.h"
#include "runtime/ops/op_info.h"
#include "trainer/autodiff/element_types.h"

namespace onnxamp::trainer {

StatusOr<int> DecomposeForGradients(ir::Model& model, const std::vector<std::string>& wrt,
                                    const std::vector<std::string>& targets) {
  if (!model.graph) return 0;
  ir::Graph& g = *model.graph;
  const ops::OpInfoRegistry& infos = ops::OpInfoRegistry::Global();
  const ops::GradientRegistry& builders = ops::GradientRegistry::Global();
  int decomposed = 0;
  // A decomposition emits ops that have builders; the bound only stops one that emits its own op again.
  for (int round = 0; round < 8; ++round) {
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, g.TopologicalOrder());
    std::unordered_set<const ir::Value*> from_wrt;
    for (const std::string& name : wrt) {
      if (const ir::Value* v = g.FindValue(name)) from_wrt.insert(v);
    }
    for (const ir::Node* n : order) {
      bool reached = false;
      for (const ir::Value* v : g.ImplicitInputs(n)) reached = reached || from_wrt.count(v);
      if (!reached) continue;
      for (const ir::Value* v : n->outputs()) {
        if (v) from_wrt.insert(v);
      }
    }
    std::unordered_set<const ir::Value*> to_target;
    for (const std::string& name : targets) {
      if (const ir::Value* v = g.FindValue(name)) to_target.insert(v);
    }
    std::vector<ir::Node*> chosen;
    for (size_t k = order.size(); k-- > 0;) {
      ir::Node* n = order[k];
      bool reaches = false;
      for (const ir::Value* v : n->outputs()) reaches = reaches || (v && to_target.count(v));
      if (!reaches) continue;
      bool reached = false;
      for (const ir::Value* v : g.ImplicitInputs(n)) {
        to_target.insert(v);
        reached = reached || from_wrt.count(v);
      }
      if (!reached) continue;
      const ops::OpInfo* info = infos.Find(n->domain(), n->op_type());
      if (!info || !info->decompose) continue;
      if (builders.Find(n->op_type(), n->domain(), model.OpsetVersion(n->domain())).ok()) continue;
      chosen.push_back(n);
    }
    if (chosen.empty()) return decomposed;
    // The decompositions broadcast numpy-style, which the arithmetic ops (and their builders) do from opset 7.
    if (model.OpsetVersion("") < 7) {
      return Unimplemented("node ", chosen[0]->Describe(),
                           " lies on the path of a second derivative, which needs ONNX ",
                           "opset 7 or later (numpy broadcasting); the model's opset is ", model.OpsetVersion(""));
    }
    const ElementTypes types = InferElementTypes(g);
    auto type_of = [&types](const ir::Value* v) {
      auto it = types.find(v);
      return it == types.end() ? DType::kUndefined : it->second;
    };
    for (ir::Node* n : chosen) {
      const std::string what = n->Describe();
      const ops::OpInfo* info = infos.Find(n->domain(), n->op_type());
      ops::DecomposeContext ctx(g, *n, model.OpsetVersion(""), type_of);
      Status st = info->decompose(ctx);
      if (st.ok()) st = ctx.Finish();
      if (!st.ok()) return st.WithContext(StrCat("decomposition of node ", what, " (for its gradient)"));
      ++decomposed;
    }
  }
  return Internal("decompositions still left after 8 rounds: one emits the op it decomposes");
}

}  // namespace onnxamp::trainer
