// The gradient of an If: a backward If on the same condition whose branches are the backward passes of the forward
// branches. Each backward branch recomputes its forward branch (nothing of a branch's intermediate values outlives
// the forward If) and back-propagates the gradients reaching the If's outputs into the enclosing values the branch
// reads; a value the other branch reads but this one does not gets zeros. A branch is differentiated by the autodiff
// itself (BuildGradients with output_gradients), so an If nested in a branch is differentiated the same way.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/model.h"

namespace onnxamp::trainer {

// The backward branch for graph attribute `attribute` ("then_branch" or "else_branch") of If node `node` of `model`'s
// graph. `reads`: the enclosing values whose gradients are wanted (values of the node's graph, floating); `dys`: per
// output of the node, the value holding the gradient that reaches it (null: none). `type_of` gives the element type of
// a value of the node's graph. The branch's outputs are the gradients of `reads`, in order; it reads `reads`, the
// other enclosing values its forward branch reads and `dys` by name from outer scope. Its own values are named
// `prefix` + their name, so that none shadows a value of the enclosing graphs. `uses_internal` is set when it holds
// com.onnxamp ops.
StatusOr<std::unique_ptr<ir::Graph>> IfBranchGradient(const ir::Model& model, const ir::Node& node,
                                                      const std::string& attribute,
                                                      const std::vector<ir::Value*>& reads,
                                                      const std::vector<ir::Value*>& dys,
                                                      const std::function<DType(const ir::Value*)>& type_of,
                                                      const std::string& prefix, bool* uses_internal);

}  // namespace onnxamp::trainer
