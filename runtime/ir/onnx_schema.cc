// ONNX operator schema checks (see onnx_schema.h).
#include "runtime/ir/onnx_schema.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "runtime/common/status.h"

namespace onnxamp::ir {
namespace {

struct SchemaAttribute {
  const char* name;
  int type;  // AttributeProto.AttributeType
  bool required;
};

struct SchemaEntry {
  const char* op;
  int since;
  int min_inputs, max_inputs, min_outputs, max_outputs;
  const char* inputs;   // per formal input: S required, O optional, V variadic
  const char* outputs;  // the same for the outputs
  int first_attribute, num_attributes;
  bool deprecated;
};

#include "runtime/ir/onnx_schemas.inc"

constexpr size_t kNumEntries = sizeof(kSchemaEntries) / sizeof(kSchemaEntries[0]);

// The entry of `op` at `opset` (the newest version not after it), or null; entries are sorted by op, then version.
const SchemaEntry* Find(std::string_view op, int64_t opset) {
  const SchemaEntry* begin = kSchemaEntries;
  const SchemaEntry* end = kSchemaEntries + kNumEntries;
  const SchemaEntry* first =
      std::lower_bound(begin, end, op, [](const SchemaEntry& e, std::string_view name) { return e.op < name; });
  const SchemaEntry* found = nullptr;
  for (const SchemaEntry* e = first; e != end && e->op == op; ++e) {
    if (e->since <= opset) found = e;
  }
  return found;
}

// The first version of `op`, 0 when ONNX has no such op.
int FirstVersion(std::string_view op) {
  const SchemaEntry* end = kSchemaEntries + kNumEntries;
  const SchemaEntry* first = std::lower_bound(kSchemaEntries, end, op,
                                              [](const SchemaEntry& e, std::string_view name) { return e.op < name; });
  return first != end && first->op == op ? first->since : 0;
}

const char* AttributeTypeName(int type) {
  switch (type) {
    case 1:
      return "float";
    case 2:
      return "int";
    case 3:
      return "string";
    case 4:
      return "tensor";
    case 5:
      return "graph";
    case 6:
      return "floats";
    case 7:
      return "ints";
    case 8:
      return "strings";
    case 9:
      return "tensors";
    case 10:
      return "graphs";
    case 11:
      return "sparse tensor";
    case 12:
      return "sparse tensors";
    case 13:
      return "type proto";
    case 14:
      return "type protos";
    default:
      return "undefined";
  }
}

// The role of formal parameter `index` in `options` (the last one repeats when variadic); 'O' past the list.
char RoleAt(const char* options, size_t index) {
  const size_t n = std::char_traits<char>::length(options);
  if (n == 0) return 'O';
  if (index < n) return options[index];
  return options[n - 1] == 'V' ? 'V' : 'O';
}

class SchemaChecker {
 public:
  SchemaChecker(int64_t opset, std::vector<Finding>* findings) : opset_(opset), findings_(findings) {}

  void CheckGraph(const Graph& g, const std::string& path) {
    for (const Node* n : g.nodes()) {
      const std::string where = StrCat(path, " node ", n->Describe());
      if (IsDefaultDomain(n->domain())) CheckNode(*n, where);
      for (const Graph* sub : n->subgraphs()) {
        CheckGraph(*sub, StrCat(where, " / subgraph '", sub->name(), "'"));
      }
    }
  }

 private:
  void Error(const std::string& where, std::string message) {
    findings_->push_back(Finding{where, std::move(message), Finding::Severity::kError});
  }

  void CheckNode(const Node& n, const std::string& where) {
    const SchemaEntry* e = Find(n.op_type(), opset_);
    if (!e) {
      const int first = FirstVersion(n.op_type());
      Error(where, first == 0
                       ? StrCat("ONNX has no op ", n.op_type(), " (ai.onnx)")
                       : StrCat(n.op_type(), " is in ONNX from opset ", first, "; the model imports opset ", opset_));
      return;
    }
    if (e->deprecated) return;
    const std::string schema = StrCat(n.op_type(), "-", e->since);
    const size_t inputs = n.inputs().size(), outputs = n.outputs().size();
    if (static_cast<int64_t>(inputs) < e->min_inputs || static_cast<int64_t>(inputs) > e->max_inputs) {
      Error(where, StrCat(inputs, inputs == 1 ? " input; " : " inputs; ", schema, " takes ",
                          Range(e->min_inputs, e->max_inputs)));
    } else {
      for (size_t i = 0; i < inputs; ++i) {
        if (!n.input(i) && RoleAt(e->inputs, i) == 'S') Error(where, StrCat("input ", i, " is required by ", schema));
      }
    }
    if (static_cast<int64_t>(outputs) < e->min_outputs || static_cast<int64_t>(outputs) > e->max_outputs) {
      Error(where, StrCat(outputs, outputs == 1 ? " output; " : " outputs; ", schema, " has ",
                          Range(e->min_outputs, e->max_outputs)));
    } else {
      for (size_t i = 0; i < outputs; ++i) {
        if (!n.output(i) && RoleAt(e->outputs, i) == 'S') {
          Error(where, StrCat("output ", i, " is required by ", schema));
        }
      }
    }
    const SchemaAttribute* attrs = kSchemaAttributes + e->first_attribute;
    const SchemaAttribute* attrs_end = attrs + e->num_attributes;
    for (const SchemaAttribute* a = attrs; a != attrs_end; ++a) {
      if (a->required && !n.FindAttribute(a->name)) {
        Error(where, StrCat("attribute '", a->name, "' is required by ", schema));
      }
    }
    for (const Attribute& a : n.attributes()) {
      const SchemaAttribute* s =
          std::find_if(attrs, attrs_end, [&](const SchemaAttribute& x) { return a.name() == x.name; });
      if (s == attrs_end) {
        Error(where, StrCat("attribute '", a.name(), "' is not one of ", schema, "'s"));
      } else if (static_cast<int>(a.type()) != s->type) {
        Error(where, StrCat("attribute '", a.name(), "' is ", AttributeTypeName(static_cast<int>(a.type())), "; ",
                            schema, " takes ", AttributeTypeName(s->type)));
      }
    }
  }

  static std::string Range(int64_t lo, int64_t hi) {
    if (hi >= INT32_MAX) return StrCat(lo, " or more");
    if (lo == hi) return StrCat(lo);
    return StrCat(lo, " to ", hi);
  }

  int64_t opset_;
  std::vector<Finding>* findings_;
};

}  // namespace

std::vector<Finding> CheckOnnxSchemas(const Model& model) {
  std::vector<Finding> findings;
  int64_t opset = 0;
  for (const OpsetImport& op : model.opset_imports) {
    if (IsDefaultDomain(op.domain)) opset = op.version;
  }
  if (!model.graph || opset <= 0) return findings;
  SchemaChecker(opset, &findings).CheckGraph(*model.graph, StrCat("graph '", model.graph->name(), "'"));
  return findings;
}

int OnnxSchemaVersion(std::string_view op_type, int64_t opset) {
  const SchemaEntry* e = Find(op_type, opset);
  return e ? e->since : 0;
}

}  // namespace onnxamp::ir
