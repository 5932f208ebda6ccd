// GraphPass, MakePass and PassPipeline (see pass.h).
#include "runtime/passes/pass.h"

#include <utility>

#include "runtime/ir/verify.h"

namespace onnxamp::passes {
namespace {

class FunctionPass : public GraphPass {
 public:
  FunctionPass(std::string name, PassFunction run) : name_(std::move(name)), run_(std::move(run)) {}
  std::string_view name() const override { return name_; }
  Status Run(ir::Model& model, const PassContext& ctx, bool* changed) override { return run_(model, ctx, changed); }

 private:
  std::string name_;
  PassFunction run_;
};

}  // namespace

std::unique_ptr<GraphPass> MakePass(std::string name, PassFunction run) {
  ONNXAMP_CHECK(run != nullptr, "pass ", name, " has no function");
  return std::make_unique<FunctionPass>(std::move(name), std::move(run));
}

PassPipeline& PassPipeline::Add(std::unique_ptr<GraphPass> pass) {
  ONNXAMP_CHECK(pass != nullptr, "null pass added to a pipeline");
  passes_.push_back(std::move(pass));
  return *this;
}

Status PassPipeline::Run(ir::Model& model, const PassContext& ctx, bool* changed) const {
  if (changed) *changed = false;
  for (const std::unique_ptr<GraphPass>& pass : passes_) {
    bool c = false;
    Status st = pass->Run(model, ctx, &c);
    if (!st.ok()) return st.WithContext(StrCat("pass ", pass->name()));
    if (changed) *changed |= c;
    if (!ctx.verify) continue;
    if (Status v = ir::Verify(model); !v.ok()) {
      return Internal("pass ", pass->name(), " left an invalid graph: ", v.message());
    }
  }
  return Status::Ok();
}

std::vector<std::string> PassPipeline::names() const {
  std::vector<std::string> out;
  out.reserve(passes_.size());
  for (const std::unique_ptr<GraphPass>& pass : passes_) out.emplace_back(pass->name());
  return out;
}

}  // namespace onnxamp::passes
