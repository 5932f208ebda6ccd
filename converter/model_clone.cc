// CloneModel: a deep copy of a model (graph, functions, metadata).
#include "converter/model_clone.h"

#include <utility>

namespace onnxamp::converter {

ir::Model CloneModel(const ir::Model& m) {
  ir::Model c;
  c.ir_version = m.ir_version;
  c.opset_imports = m.opset_imports;
  c.producer_name = m.producer_name;
  c.producer_version = m.producer_version;
  c.domain = m.domain;
  c.model_version = m.model_version;
  c.doc_string = m.doc_string;
  c.metadata_props = m.metadata_props;
  c.graph = m.graph ? m.graph->Clone() : nullptr;
  for (const ir::Function& f : m.functions) {
    ir::Function fc;
    fc.name = f.name;
    fc.domain = f.domain;
    fc.doc_string = f.doc_string;
    fc.opset_imports = f.opset_imports;
    fc.attributes = f.attributes;
    fc.body = f.body ? f.body->Clone() : nullptr;
    c.functions.push_back(std::move(fc));
  }
  c.training_info = m.training_info;
  return c;
}

}  // namespace onnxamp::converter
