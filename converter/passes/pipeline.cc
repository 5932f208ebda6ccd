// The conversion passes as one PassPipeline (see ConversionPasses in passes.h).
#include <memory>
#include <string>
#include <utility>

#include "converter/passes/passes.h"

namespace onnxamp::converter {
namespace {

// A converter pass (an object with Status Run(ir::Graph&, bool*)) seen as a GraphPass over the model's main graph.
template <typename P>
class ConverterPass : public passes::GraphPass {
 public:
  ConverterPass(std::string name, P pass) : name_(std::move(name)), pass_(std::move(pass)) {}
  std::string_view name() const override { return name_; }
  Status Run(ir::Model& model, const passes::PassContext&, bool* changed) override {
    return pass_.Run(*model.graph, changed);
  }

 private:
  std::string name_;
  P pass_;
};

template <typename P>
std::unique_ptr<passes::GraphPass> Wrap(std::string name, P pass) {
  return std::make_unique<ConverterPass<P>>(std::move(name), std::move(pass));
}

// Converts the initializers, inserts the Casts and writes the planned types, as one pass: between these steps the
// graph is not valid in general (an initializer that is also a graph input holds the new type before
// update_types declares it), so they are checked together.
class ApplyPlanPass : public passes::GraphPass {
 public:
  explicit ApplyPlanPass(ConversionState& state) : initializers_(state), casts_(state), types_(state) {}
  std::string_view name() const override { return "apply_precision_plan"; }
  Status Run(ir::Model& model, const passes::PassContext&, bool* changed) override {
    *changed = false;
    bool c = false;
    ONNXAMP_RETURN_IF_ERROR(initializers_.Run(*model.graph, &c));
    *changed |= c;
    ONNXAMP_RETURN_IF_ERROR(casts_.Run(*model.graph, &c));
    *changed |= c;
    ONNXAMP_RETURN_IF_ERROR(types_.Run(*model.graph, &c));
    *changed |= c;
    return Status::Ok();
  }

 private:
  ConvertInitializersPass initializers_;
  InsertCastsPass casts_;
  UpdateTypesPass types_;
};

Status SortAll(ir::Graph& g) {
  ONNXAMP_RETURN_IF_ERROR(g.SortTopologically());
  for (ir::Node* n : g.nodes()) {
    for (ir::Graph* sub : n->subgraphs()) ONNXAMP_RETURN_IF_ERROR(SortAll(*sub));
  }
  return Status::Ok();
}

}  // namespace

passes::PassPipeline ConversionPasses(ConversionState& state) {
  passes::PassPipeline pipeline;
  pipeline.Add(Wrap("classify_precision", ClassifyPass(state)));
  pipeline.Add(std::make_unique<ApplyPlanPass>(state));
  pipeline.Add(Wrap("fold_casts", FoldCastsPass(&state)));
  pipeline.Add("sort_topologically", [](ir::Model& model, const passes::PassContext&, bool* changed) {
    *changed = false;  // reordering is not a change of the converted model
    return SortAll(*model.graph);
  });
  return pipeline;
}

}  // namespace onnxamp::converter
