// What the gradients of If, Scan and Loop share: a subgraph made a model of its own (the enclosing values it reads
// become inputs), differentiated by BuildGradients with output gradients, and made a subgraph again (those inputs read
// by name from the enclosing graph, its own values prefixed so that none shadows an enclosing name, random ops and
// nested subgraphs keeping the seeds of their forward twins).
#pragma once

#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/model.h"

namespace onnxamp::trainer::subgraph {

using TypeOf = std::function<DType(const ir::Value*)>;

// `from`'s element type (by `type_of`) and declared shape, on `v`; nothing when the type is unknown.
void CopyType(ir::Value* v, const ir::Value* from, const TypeOf& type_of);

// Makes every name `g` reads from enclosing graphs an input of `g`, typed like the value of that name in `outer` (the
// graph of the node that holds `g`) when it is one.
void PromoteOuterReads(ir::Graph& g, const ir::Graph& outer, const TypeOf& type_of);

// Removes the nodes none of whose outputs is read (by a node or a subgraph) or a graph output, repeatedly; with
// `only`, just those of its nodes (the others stay, read or not), which it no longer holds after.
void RemoveDeadNodes(ir::Graph& g, std::unordered_set<ir::Node*>* only = nullptr);

// The names of the inputs of `g` from which one of `seeded` (values of g) is reached through values of floating or
// unknown type, not through inputs that take no gradient (ops::OpInfo::no_gradient_inputs): the inputs whose gradient
// the autodiff must find (an integer path, such as a shape, stops it).
std::unordered_set<std::string> MayReach(const ir::Graph& g, const std::vector<std::string>& seeded);

// Zeros of `x`'s shape and element type `type`, computed in `g` (Shape, ConstantOfShape).
ir::Value* ZerosLike(ir::Graph& g, ir::Value* x, DType type, const std::string& base);

// Back to a subgraph: the first `formal_inputs` inputs of `g` stay its inputs; the others are read from the enclosing
// graph by name (or dropped when nothing reads them). Random ops and nodes with subgraphs get attribute `seed_from`
// (their seed name before the renaming), every value not read from outside is renamed `prefix` + its name, and the
// graph is named after the prefix.
Status FinishSubgraph(ir::Graph& g, size_t formal_inputs, const std::string& prefix);

}  // namespace onnxamp::trainer::subgraph
