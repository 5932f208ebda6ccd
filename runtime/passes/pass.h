// One interface for every graph rewrite: the converter's precision passes, the session's inference optimizations
// and the trainer's graph construction (autodiff, loss insertion). A pass is a named object with one entry point;
// a PassPipeline runs a list of them in order and, when asked, checks the graph with ir::Verify after each one so
// that a pass that breaks the graph is named in the error instead of surfacing later as a kernel or run failure.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/model.h"

namespace onnxamp::passes {

// What every pass may read besides the model. Pass-specific state (the converter's plan, the trainer's parameter
// list) lives in the pass object itself.
struct PassContext {
  exec::Device device = exec::Device::kCpu;  // the device the rewritten graph will run on
  // Training graphs: values bound as graph inputs change between runs, so nothing reading one as a weight may be
  // folded or fused (exec::SessionMode::kTraining).
  bool training = false;
  // ir::Verify after each pass (PassPipeline::Run); the error names the pass that left the graph invalid.
  bool verify = true;
};

class GraphPass {
 public:
  virtual ~GraphPass() = default;
  // A short snake_case name for messages and logs ("fold_conv_batch_norm").
  virtual std::string_view name() const = 0;
  // Rewrites `model` in place and sets *changed when anything changed. A failing pass returns a Status naming what
  // and where; the pipeline prefixes it with the pass's name.
  virtual Status Run(ir::Model& model, const PassContext& ctx, bool* changed) = 0;
};

using PassFunction = std::function<Status(ir::Model& model, const PassContext& ctx, bool* changed)>;

// A pass made from a function (the stateless rewrites, which are free functions over a graph).
std::unique_ptr<GraphPass> MakePass(std::string name, PassFunction run);

class PassPipeline {
 public:
  PassPipeline() = default;
  PassPipeline(PassPipeline&&) = default;
  PassPipeline& operator=(PassPipeline&&) = default;

  PassPipeline& Add(std::unique_ptr<GraphPass> pass);
  PassPipeline& Add(std::string name, PassFunction run) { return Add(MakePass(std::move(name), std::move(run))); }

  // Runs the passes in order and sets *changed (when given) if any pass changed the model. Stops at the first
  // error, returned as "pass <name>: <message>". With ctx.verify, runs ir::Verify(model) after every pass and fails
  // with "pass <name> left an invalid graph: <finding>" at the first one that leaves the model invalid.
  Status Run(ir::Model& model, const PassContext& ctx, bool* changed = nullptr) const;

  size_t size() const { return passes_.size(); }
  std::vector<std::string> names() const;

 private:
  std::vector<std::unique_ptr<GraphPass>> passes_;
};

}  // namespace onnxamp::passes
