// InspectModel: a model's opsets, signature, op histogram, parameters, external data and verifier findings.
#include "tools/onnxamp/inspect.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/common/text.h"
#include "runtime/ir/onnx_schema.h"
#include "runtime/ir/verify.h"

namespace onnxamp::tools {
namespace {

using Json = nlohmann::ordered_json;

Json ShapeJson(const std::optional<ir::Shape>& shape) {
  if (!shape) return nullptr;
  Json dims = Json::array();
  for (const ir::Dim& d : *shape) {
    if (d.is_value()) {
      dims.push_back(d.value);
    } else if (d.is_param()) {
      dims.push_back(d.param);
    } else {
      dims.push_back(nullptr);
    }
  }
  return dims;
}

Json ValueJson(const ir::Value& v) {
  const ir::ValueType& t = v.type();
  const bool has_elem = t.kind() == ir::ValueType::Kind::kTensor || t.kind() == ir::ValueType::Kind::kSparseTensor;
  Json j;
  j["name"] = v.name();
  j["type"] = t.ToString();
  j["dtype"] = has_elem ? Json(std::string(DTypeName(t.elem_type()))) : Json(nullptr);
  j["shape"] = has_elem ? ShapeJson(t.shape()) : Json(nullptr);
  j["initializer"] = v.initializer() != nullptr || v.sparse_initializer() != nullptr;
  return j;
}

// (op_type, domain) -> count, rendered sorted by count descending, then op_type, then domain.
using OpCounts = std::map<std::pair<std::string, std::string>, uint64_t>;

Json OpCountsJson(const OpCounts& counts) {
  std::vector<std::pair<std::pair<std::string, std::string>, uint64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return a.first < b.first;
  });
  Json list = Json::array();
  for (const auto& [key, count] : sorted) {
    Json e;
    e["op_type"] = key.first;
    e["domain"] = key.second;
    e["count"] = count;
    list.push_back(std::move(e));
  }
  return list;
}

struct DTypeStats {
  uint64_t tensors = 0;
  uint64_t count = 0;
  uint64_t bytes = 0;
};

struct ExternalStats {
  uint64_t tensors = 0;
  uint64_t bytes = 0;
};

// Everything gathered in one walk over the graph and its subgraphs.
struct Census {
  OpCounts top_ops;
  uint64_t top_nodes = 0;
  OpCounts sub_ops;
  uint64_t sub_nodes = 0;
  uint64_t subgraphs = 0;
  std::map<DType, DTypeStats> params;
  uint64_t sparse_tensors = 0;
  std::map<std::string, ExternalStats> external;
};

// Element count and byte size from dims, so that tensors whose external data were not loaded still count.
// Tensors with invalid dims (which the importer refuses anyway) count as empty.
std::pair<uint64_t, uint64_t> TensorSize(const ir::Tensor& t) {
  StatusOr<int64_t> count = ir::Tensor::ComputeNumElements(t.dims());
  if (!count.ok()) return {0, 0};
  if (t.dtype() == DType::kString) {
    uint64_t bytes = 0;
    for (const std::string& s : t.strings()) bytes += s.size();
    return {static_cast<uint64_t>(*count), bytes};
  }
  StatusOr<size_t> bytes = ir::Tensor::ComputeByteSize(t.dtype(), t.dims());
  return {static_cast<uint64_t>(*count), bytes.ok() ? static_cast<uint64_t>(*bytes) : 0};
}

void AddTensor(const ir::Tensor& t, Census& census) {
  auto [count, bytes] = TensorSize(t);
  DTypeStats& s = census.params[t.dtype()];
  s.tensors += 1;
  s.count += count;
  s.bytes += bytes;
  if (t.external()) {
    ExternalStats& e = census.external[t.external()->location];
    e.tensors += 1;
    e.bytes += t.external()->length ? static_cast<uint64_t>(*t.external()->length) : bytes;
  }
}

void Walk(const ir::Graph& graph, bool top_level, Census& census) {
  for (const ir::Value* v : graph.initializers()) AddTensor(*v->initializer(), census);
  for (const ir::Value* v : graph.sparse_initializers()) {
    const ir::SparseTensor& sp = *v->sparse_initializer();
    census.sparse_tensors += 1;
    AddTensor(sp.values, census);
  }
  for (const ir::Node* node : graph.nodes()) {
    if (top_level) {
      census.top_nodes += 1;
      census.top_ops[{node->op_type(), node->domain()}] += 1;
    } else {
      census.sub_nodes += 1;
      census.sub_ops[{node->op_type(), node->domain()}] += 1;
    }
    for (const ir::Graph* sub : node->subgraphs()) {
      census.subgraphs += 1;
      Walk(*sub, /*top_level=*/false, census);
    }
  }
}

uint64_t CountNodes(const ir::Graph& graph) {
  uint64_t n = 0;
  for (const ir::Node* node : graph.nodes()) {
    n += 1;
    for (const ir::Graph* sub : node->subgraphs()) n += CountNodes(*sub);
  }
  return n;
}

std::string DomainName(const std::string& domain) { return ir::IsDefaultDomain(domain) ? "ai.onnx" : domain; }

std::string OpName(const Json& op) {
  const std::string domain = op["domain"].get<std::string>();
  const std::string type = op["op_type"].get<std::string>();
  return ir::IsDefaultDomain(domain) ? type : domain + "::" + type;
}

std::string ShapeText(const Json& value) { return value["type"].get<std::string>(); }

void RenderOps(std::ostringstream& os, const Json& by_op) {
  size_t width = 0;
  for (const Json& op : by_op) width = std::max(width, OpName(op).size());
  for (const Json& op : by_op) {
    const std::string name = OpName(op);
    os << "  " << name << std::string(width - name.size() + 2, ' ') << FormatCount(op["count"].get<uint64_t>()) << "\n";
  }
}

void RenderValues(std::ostringstream& os, const char* heading, const Json& values) {
  os << heading << " (" << values.size() << "):\n";
  size_t width = 0;
  for (const Json& v : values) width = std::max(width, v["name"].get<std::string>().size());
  for (const Json& v : values) {
    const std::string name = v["name"].get<std::string>();
    os << "  " << name << std::string(width - name.size() + 2, ' ') << ShapeText(v);
    if (v["initializer"].get<bool>()) os << "  (has initializer)";
    os << "\n";
  }
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (v >= 1024.0 && unit + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[unit]);
  return buf;
}

std::string FormatCount(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

nlohmann::ordered_json InspectModel(const ir::Model& model) {
  Json report;
  report["ir_version"] = model.ir_version;
  report["producer"] = {{"name", model.producer_name}, {"version", model.producer_version}};
  report["domain"] = model.domain;
  report["model_version"] = model.model_version;

  Json opsets = Json::array();
  for (const ir::OpsetImport& op : model.opset_imports)
    opsets.push_back({{"domain", op.domain}, {"version", op.version}});
  report["opsets"] = std::move(opsets);

  Census census;
  Json inputs = Json::array();
  Json outputs = Json::array();
  if (model.graph) {
    for (const ir::Value* v : model.graph->inputs()) inputs.push_back(ValueJson(*v));
    for (const ir::Value* v : model.graph->outputs()) outputs.push_back(ValueJson(*v));
    Walk(*model.graph, /*top_level=*/true, census);
  }
  report["inputs"] = std::move(inputs);
  report["outputs"] = std::move(outputs);
  report["nodes"] = {{"total", census.top_nodes}, {"by_op", OpCountsJson(census.top_ops)}};
  report["subgraph_nodes"] = {
      {"subgraphs", census.subgraphs}, {"total", census.sub_nodes}, {"by_op", OpCountsJson(census.sub_ops)}};

  DTypeStats total;
  Json by_dtype = Json::array();
  for (const auto& [dtype, s] : census.params) {
    total.tensors += s.tensors;
    total.count += s.count;
    total.bytes += s.bytes;
    by_dtype.push_back(
        {{"dtype", std::string(DTypeName(dtype))}, {"tensors", s.tensors}, {"count", s.count}, {"bytes", s.bytes}});
  }
  report["parameters"] = {{"tensors", total.tensors},
                          {"count", total.count},
                          {"bytes", total.bytes},
                          {"sparse_tensors", census.sparse_tensors},
                          {"by_dtype", std::move(by_dtype)}};

  Json external = Json::array();
  for (const auto& [location, e] : census.external) {
    external.push_back({{"location", location}, {"tensors", e.tensors}, {"bytes", e.bytes}});
  }
  report["external_data"] = std::move(external);

  Json functions = Json::array();
  for (const ir::Function& f : model.functions) {
    functions.push_back({{"name", f.name}, {"domain", f.domain}, {"nodes", f.body ? CountNodes(*f.body) : 0}});
  }
  report["functions"] = std::move(functions);

  Json findings = Json::array();
  std::vector<ir::Finding> all = ir::VerifyAll(model);
  for (ir::Finding& f : ir::CheckOnnxSchemas(model)) all.push_back(std::move(f));
  for (const ir::Finding& f : all) findings.push_back({{"where", f.where}, {"message", f.message}});
  report["findings"] = std::move(findings);
  return report;
}

namespace {

// The report with every string's control bytes escaped, for the text rendering (JSON escapes control characters
// itself).
Json PrintableStrings(const Json& j) {
  if (j.is_string()) return EscapeControlBytes(j.get<std::string>());
  if (j.is_object()) {
    Json out = Json::object();
    for (auto it = j.begin(); it != j.end(); ++it) out[EscapeControlBytes(it.key())] = PrintableStrings(it.value());
    return out;
  }
  if (j.is_array()) {
    Json out = Json::array();
    for (const Json& e : j) out.push_back(PrintableStrings(e));
    return out;
  }
  return j;
}

}  // namespace

std::string RenderInspectText(const nlohmann::ordered_json& report, const std::string& title) {
  // Names come from the model: a hostile one could hide a line break or a terminal escape sequence in them.
  const Json r = PrintableStrings(report);
  std::ostringstream os;
  if (!title.empty()) os << EscapeControlBytes(title) << "\n";
  const Json& producer = r["producer"];
  std::string producer_text = producer["name"].get<std::string>();
  const std::string producer_version = producer["version"].get<std::string>();
  if (!producer_version.empty()) producer_text.append(" ").append(producer_version);
  os << "ir_version: " << r["ir_version"].get<int64_t>()
     << "  producer: " << (producer_text.empty() ? "(none)" : producer_text);
  if (!r["domain"].get<std::string>().empty()) os << "  domain: " << r["domain"].get<std::string>();
  if (r["model_version"].get<int64_t>() != 0) os << "  model_version: " << r["model_version"].get<int64_t>();
  os << "\nopsets:";
  for (const Json& op : r["opsets"]) os << " " << DomainName(op["domain"].get<std::string>()) << "=" << op["version"];
  if (r["opsets"].empty()) os << " (none)";
  os << "\n";

  RenderValues(os, "inputs", r["inputs"]);
  RenderValues(os, "outputs", r["outputs"]);

  os << "nodes: " << FormatCount(r["nodes"]["total"].get<uint64_t>()) << "\n";
  RenderOps(os, r["nodes"]["by_op"]);
  const Json& sub = r["subgraph_nodes"];
  if (sub["subgraphs"].get<uint64_t>() > 0) {
    os << "subgraph nodes: " << FormatCount(sub["total"].get<uint64_t>()) << " in "
       << FormatCount(sub["subgraphs"].get<uint64_t>()) << " subgraphs\n";
    RenderOps(os, sub["by_op"]);
  }

  const Json& p = r["parameters"];
  os << "parameters: " << FormatCount(p["count"].get<uint64_t>()) << " (" << FormatBytes(p["bytes"].get<uint64_t>())
     << ") in " << FormatCount(p["tensors"].get<uint64_t>()) << " initializers";
  if (p["sparse_tensors"].get<uint64_t>() > 0) os << " (" << p["sparse_tensors"].get<uint64_t>() << " sparse)";
  os << "\n";
  for (const Json& d : p["by_dtype"]) {
    os << "  " << d["dtype"].get<std::string>() << ": " << FormatCount(d["count"].get<uint64_t>()) << " ("
       << FormatBytes(d["bytes"].get<uint64_t>()) << ") in " << FormatCount(d["tensors"].get<uint64_t>())
       << " initializers\n";
  }

  if (r["external_data"].empty()) {
    os << "external data: none\n";
  } else {
    os << "external data:\n";
    for (const Json& e : r["external_data"]) {
      os << "  " << e["location"].get<std::string>() << ": " << FormatCount(e["tensors"].get<uint64_t>())
         << " tensors, " << FormatBytes(e["bytes"].get<uint64_t>()) << "\n";
    }
  }

  if (r["functions"].empty()) {
    os << "functions: none\n";
  } else {
    os << "functions:\n";
    for (const Json& f : r["functions"]) {
      const std::string domain = f["domain"].get<std::string>();
      os << "  " << (domain.empty() ? "" : domain + "::") << f["name"].get<std::string>() << ": "
         << FormatCount(f["nodes"].get<uint64_t>()) << " nodes\n";
    }
  }

  if (r["findings"].empty()) {
    os << "verifier: no findings\n";
  } else {
    os << "verifier: " << r["findings"].size() << " findings\n";
    for (const Json& f : r["findings"]) {
      const std::string where = f["where"].get<std::string>();
      os << "  " << (where.empty() ? "" : where + ": ") << f["message"].get<std::string>() << "\n";
    }
  }
  return os.str();
}

}  // namespace onnxamp::tools
