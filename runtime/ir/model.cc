// Model: opset lookups.
#include "runtime/ir/model.h"

namespace onnxamp::ir {

Model::Model() : graph(std::make_unique<Graph>()) {}
Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

int64_t Model::OpsetVersion(std::string_view d) const {
  const bool want_default = IsDefaultDomain(d);
  for (const OpsetImport& op : opset_imports) {
    if (want_default ? IsDefaultDomain(op.domain) : op.domain == d) return op.version;
  }
  return 0;
}

void Model::SetOpsetVersion(std::string_view d, int64_t version) {
  const bool want_default = IsDefaultDomain(d);
  for (OpsetImport& op : opset_imports) {
    if (want_default ? IsDefaultDomain(op.domain) : op.domain == d) {
      op.version = version;
      return;
    }
  }
  opset_imports.push_back({std::string(d), version});
}

}  // namespace onnxamp::ir
