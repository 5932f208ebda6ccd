// What `onnxamp inspect` reports about a model, as a JSON document with stable keys, and its text rendering.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "runtime/ir/model.h"

namespace onnxamp::tools {

// Summarises `model` as one JSON object (keys in the order listed below). Works on models loaded without their external
// data: sizes come from dims and dtypes, never from loaded bytes. Keys (all always present):
//   "ir_version": int, "producer": {"name", "version"}, "domain": str, "model_version": int,
//   "opsets": [{"domain", "version"}]                    ("" is the default domain),
//   "inputs"/"outputs": [{"name", "type", "dtype", "shape", "initializer"}]
//       type: the full type ("tensor(float)[batch,256]"); dtype: element type name or null for non-tensors;
//       shape: list of int (known), string (symbolic) or null (unknown) per dim, or null when the rank is
//       unknown; initializer: true for a graph input that also has an initializer (IR < 4 style),
//   "nodes": {"total": int, "by_op": [{"op_type", "domain", "count"}]}          (top-level graph),
//   "subgraph_nodes": {"subgraphs": int, "total": int, "by_op": [...]}          (If/Loop/Scan bodies, nested),
//       by_op sorted by count (descending), then op_type, then domain,
//   "parameters": {"tensors", "count", "bytes", "sparse_tensors",
//                  "by_dtype": [{"dtype", "tensors", "count", "bytes"}]}       (initializers of every graph),
//   "external_data": [{"location", "tensors", "bytes"}]                          (sorted by location),
//   "functions": [{"name", "domain", "nodes"}],
//   "findings": [{"where", "message"}]                                          (ir::VerifyAll).
// `onnxamp inspect --json` prints this object with one more key first: "file", the path it was given.
nlohmann::ordered_json InspectModel(const ir::Model& model);

// Renders the document InspectModel returns as human-readable text (several lines, ending in a newline).
// `title` heads the report (usually the model's path); empty leaves the heading out.
std::string RenderInspectText(const nlohmann::ordered_json& report, const std::string& title);

// "1.5 KiB", "200.0 MiB", "12 B": a byte count for people.
std::string FormatBytes(uint64_t bytes);

// "1,234,567": a count with thousands separators.
std::string FormatCount(uint64_t n);

}  // namespace onnxamp::tools
