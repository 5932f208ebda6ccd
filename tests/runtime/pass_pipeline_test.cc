// PassPipeline (runtime/passes/pass.h): passes run in order, errors and invalid graphs name the pass, and the
// inference pipeline a session runs follows its SessionOptions.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/session.h"
#include "runtime/ir/verify.h"
#include "runtime/ops/common/conv_onednn.h"
#include "runtime/passes/pass.h"
#include "tests/runtime/layout_test_util.h"

namespace onnxamp::testing {
namespace {

using passes::PassContext;
using passes::PassPipeline;

// X -> Relu -> Y.
ir::Model ReluModel() {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("X");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(4)}));
  g.AddInput(x);
  ir::Value* y = g.CreateValue("Y");
  y->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(4)}));
  g.AddNode("Relu", {x}, {y}, "relu");
  g.AddOutput(y);
  return m;
}

TEST(PassPipeline, RunsPassesInOrderAndReportsChanges) {
  std::vector<std::string> ran;
  PassPipeline pipeline;
  pipeline.Add("first", [&](ir::Model&, const PassContext&, bool* changed) {
    ran.push_back("first");
    *changed = false;
    return Status::Ok();
  });
  pipeline.Add("rename_node", [&](ir::Model& m, const PassContext&, bool* changed) {
    ran.push_back("rename_node");
    (*m.graph->nodes().begin())->set_name("renamed");
    *changed = true;
    return Status::Ok();
  });
  EXPECT_EQ(pipeline.names(), (std::vector<std::string>{"first", "rename_node"}));
  ir::Model m = ReluModel();
  bool changed = false;
  ASSERT_TRUE(pipeline.Run(m, PassContext{}, &changed).ok());
  EXPECT_TRUE(changed);
  EXPECT_EQ(ran, (std::vector<std::string>{"first", "rename_node"}));
  EXPECT_EQ((*m.graph->nodes().begin())->name(), "renamed");
}

// A pass that removes the node producing the graph output: the output is then defined by nothing.
Status DropProducer(ir::Model& m, const PassContext&, bool* changed) {
  m.graph->RemoveNode(*m.graph->nodes().begin());
  *changed = true;
  return Status::Ok();
}

TEST(PassPipeline, VerificationNamesThePassThatBrokeTheGraph) {
  std::vector<std::string> ran;
  PassPipeline pipeline;
  pipeline.Add("harmless", [](ir::Model&, const PassContext&, bool* changed) {
    *changed = false;
    return Status::Ok();
  });
  pipeline.Add("drop_producer", DropProducer);
  pipeline.Add("after", [&](ir::Model&, const PassContext&, bool*) {
    ran.push_back("after");
    return Status::Ok();
  });
  ir::Model m = ReluModel();
  const Status st = pipeline.Run(m, PassContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("pass drop_producer left an invalid graph"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("harmless"), std::string::npos) << st.message();
  EXPECT_TRUE(ran.empty()) << "the pipeline went on after an invalid graph";

  // Without verification the broken graph goes through unnoticed (what the pipeline's check is for).
  ir::Model unchecked = ReluModel();
  PassContext no_verify;
  no_verify.verify = false;
  EXPECT_TRUE(pipeline.Run(unchecked, no_verify).ok());
  EXPECT_FALSE(ir::Verify(unchecked).ok());
}

TEST(PassPipeline, ErrorsArePrefixedWithThePassNameAndStopThePipeline) {
  bool later_ran = false;
  PassPipeline pipeline;
  pipeline.Add("refuse", [](ir::Model&, const PassContext&, bool*) { return InvalidArgument("node 'x' is odd"); });
  pipeline.Add("later", [&](ir::Model&, const PassContext&, bool*) {
    later_ran = true;
    return Status::Ok();
  });
  ir::Model m = ReluModel();
  const Status st = pipeline.Run(m, PassContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "pass refuse: node 'x' is odd");
  EXPECT_FALSE(later_ran);
}

TEST(PassPipeline, ContextReachesThePasses) {
  PassContext seen;
  PassPipeline pipeline;
  pipeline.Add("look", [&](ir::Model&, const PassContext& ctx, bool* changed) {
    seen = ctx;
    *changed = false;
    return Status::Ok();
  });
  PassContext ctx;
  ctx.device = exec::Device::kCuda;
  ctx.training = true;
  ir::Model m = ReluModel();
  ASSERT_TRUE(pipeline.Run(m, ctx).ok());
  EXPECT_EQ(seen.device, exec::Device::kCuda);
  EXPECT_TRUE(seen.training);
}

bool BlockedLayoutAvailable() {
  return ops::PreferredChannelBlock(ops::AvailableLinalgImpl(ops::LinalgImpl::kOneDnn)) != 0;
}

TEST(InferencePasses, FollowTheSessionOptions) {
  exec::SessionOptions options;
  options.graph_optimization = exec::GraphOptimization::kNone;
  EXPECT_EQ(exec::InferencePasses(options).size(), 0u);

  options.graph_optimization = exec::GraphOptimization::kBasic;
  const std::vector<std::string> basic = {"fold_conv_batch_norm", "fuse_conv_activation", "fuse_matmul_epilogues",
                                          "import_internal_domain"};
  EXPECT_EQ(exec::InferencePasses(options).names(), basic);

  options.graph_optimization = exec::GraphOptimization::kAll;
  const std::vector<std::string> all = {"fold_conv_batch_norm",  "fuse_conv_activation",
                                        "fuse_matmul_epilogues", "compute_half_convs_in_float",
                                        "use_blocked_layout",    "import_internal_domain"};
  EXPECT_EQ(exec::InferencePasses(options).names(), BlockedLayoutAvailable() ? all : basic);

  // No blocked layout when it is switched off, for the reference kernels, on CUDA or in training (which still fuses
  // GEMM epilogues: its forward products with their bias and ReLU).
  exec::SessionOptions off = options;
  off.blocked_layout = false;
  EXPECT_EQ(exec::InferencePasses(off).names(), basic);
  exec::SessionOptions reference = options;
  reference.kernels.linalg = exec::LinalgImpl::kReference;
  EXPECT_EQ(exec::InferencePasses(reference).names(), basic);
  exec::SessionOptions cuda = options;
  cuda.device = exec::Device::kCuda;
  EXPECT_EQ(exec::InferencePasses(cuda).names(), basic);
  // A training session also hands its recurrent nodes' traces to their gradients; a CPU one fuses its backward GEMMs
  // with their Cast to float (bf16), a CUDA one those in its own passes.
  exec::SessionOptions training = options;
  training.mode = exec::SessionMode::kTraining;
  EXPECT_EQ(exec::InferencePasses(training).names(),
            (std::vector<std::string>{"fold_conv_batch_norm", "fuse_conv_activation", "fuse_matmul_epilogues",
                                      "stash_recurrent_traces", "fuse_backward_gemms", "import_internal_domain"}));
  training.device = exec::Device::kCuda;
  EXPECT_EQ(exec::InferencePasses(training).names(),
            (std::vector<std::string>{"fold_conv_batch_norm", "fuse_conv_activation", "fuse_matmul_epilogues",
                                      "stash_recurrent_traces", "import_internal_domain"}));
}

// The whole inference pipeline on a resnet-like graph, verified after every pass: the graph stays valid and the
// passes do their work.
TEST(InferencePasses, ResNetLikeStaysValidAfterEveryPass) {
  ir::Model model = ResNetLike(3, 16, 32);
  exec::SessionOptions options;
  PassContext ctx;
  ASSERT_EQ(ctx.verify, true);
  bool changed = false;
  const Status st = exec::InferencePasses(options).Run(model, ctx, &changed);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(changed);
  EXPECT_EQ(Count(model, "BatchNormalization"), 0);
  EXPECT_EQ(model.OpsetVersion(exec::kInternalDomain), 1);
}

}  // namespace
}  // namespace onnxamp::testing
