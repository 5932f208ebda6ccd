// Model: a top-level graph with its opset imports, metadata and model-local functions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/ir/graph.h"

namespace onnxamp::ir {

struct OpsetImport {
  std::string domain;  // "" (or "ai.onnx") is the default ONNX domain
  int64_t version = 0;
  bool operator==(const OpsetImport& o) const = default;
};

// True for "" and "ai.onnx", the two spellings of the default domain.
inline bool IsDefaultDomain(std::string_view d) { return d.empty() || d == "ai.onnx"; }

// A model-local function (FunctionProto). Its body is a Graph whose inputs/outputs are the formal
// parameters (untyped values).
struct Function {
  std::string name;
  std::string domain;
  std::string doc_string;
  std::vector<OpsetImport> opset_imports;
  std::vector<std::string> attributes;  // attribute names the body may reference
  std::unique_ptr<Graph> body;
};

class Model {
 public:
  Model();
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  int64_t ir_version = 8;
  std::vector<OpsetImport> opset_imports;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  std::vector<std::pair<std::string, std::string>> metadata_props;
  std::unique_ptr<Graph> graph;
  std::vector<Function> functions;
  // TrainingInfoProto messages, serialized, written back unchanged (no pass of ours reads them).
  std::vector<std::string> training_info;

  // Opset version imported for `domain` (default-domain spellings are equivalent); 0 when not imported.
  int64_t OpsetVersion(std::string_view domain) const;
  void SetOpsetVersion(std::string_view domain, int64_t version);
};

}  // namespace onnxamp::ir
