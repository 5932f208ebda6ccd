// ONNX's operator schemas (runtime/ir/onnx_schemas.inc, generated from PyPI's onnx by scripts/gen_onnx_schemas.py):
// the checks of onnx.checker that a node's schema decides, for the nodes of the default domain.
#pragma once

#include <string_view>
#include <vector>

#include "runtime/ir/model.h"
#include "runtime/ir/verify.h"

namespace onnxamp::ir {

// The findings of every default-domain node of `model` (subgraphs included, with the model's opset; model-local
// function bodies are not checked), against the version of its op that the model's ai.onnx opset selects:
//  - the op exists at that opset (an op ONNX added later, or one unknown to ONNX, is an error);
//  - the input and output counts lie within the schema's, and no required input or output is omitted;
//  - every required attribute is present, every attribute is one the schema has, with the schema's type.
// Versions that deprecate their op (Upsample from 10, Scatter from 11) are only checked to exist. Node names are
// given as Verify gives them ("graph 'main' node Relu 'r1'").
std::vector<Finding> CheckOnnxSchemas(const Model& model);

// The newest version of `op_type` (ai.onnx) at or below `opset`, 0 when it has none; for tests and tools.
int OnnxSchemaVersion(std::string_view op_type, int64_t opset);

}  // namespace onnxamp::ir
