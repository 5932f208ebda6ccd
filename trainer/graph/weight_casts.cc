#include "trainer/graph/weight_casts.h"

#include <unordered_map>

namespace onnxamp::trainer {

std::vector<LowPrecisionWeight> ExternalizeWeightCasts(ir::Model& model, const std::vector<Parameter>& params,
                                                       DType low) {
  std::vector<LowPrecisionWeight> out;
  if (low != DType::kFloat16 && low != DType::kBFloat16) return out;
  ir::Graph& g = *model.graph;
  std::unordered_map<const ir::Value*, size_t> param_index;
  for (size_t i = 0; i < params.size(); ++i) {
    ir::Value* v = g.FindValue(params[i].name);
    if (v && v->is_graph_input()) param_index.emplace(v, i);
  }
  std::vector<ir::Node*> casts;
  for (ir::Node* n : g.nodes()) {
    if (n->op_type() != "Cast" || !n->domain().empty() || n->inputs().size() != 1 || n->outputs().size() != 1) {
      continue;
    }
    if (n->GetInt("to", 0) != static_cast<int64_t>(low) || !param_index.count(n->input(0))) continue;
    if (n->output(0)->is_graph_output()) continue;
    casts.push_back(n);
  }
  std::unordered_map<size_t, ir::Value*> inputs;  // by parameter index
  for (ir::Node* n : casts) {
    const size_t p = param_index.at(n->input(0));
    ir::Value*& input = inputs[p];
    if (!input) {
      input = g.CreateValue(g.UniqueName(params[p].name + (low == DType::kFloat16 ? "_fp16" : "_bf16")));
      ir::Shape shape;
      for (int64_t d : params[p].initial.dims()) shape.push_back(ir::Dim::Value(d));
      input->set_type(ir::ValueType::Tensor(low, shape));
      g.AddInput(input);
    }
    ir::Value* cast_out = n->output(0);
    const std::vector<ir::Use> uses = cast_out->uses();
    for (const ir::Use& u : uses) u.node->SetInput(u.index, input);
    g.RemoveValueInfo(cast_out);
    g.RemoveNode(n);
    g.RemoveValue(cast_out);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    auto it = inputs.find(i);
    if (it != inputs.end()) out.push_back({i, it->second->name()});
  }
  return out;
}

}  // namespace onnxamp::trainer
