// OpInfoRegistry: the runtime's OpInfos are consistent (one per op, builder ranges apart, builders only on
// differentiable ops, random ops not deterministic, the converter's default precision table), and Check and the
// gradient lookup over them behave on registries built here.
#include "runtime/ops/op_info.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/placement.h"
#include "runtime/ir/graph.h"

namespace onnxamp::ops {
namespace {

Status NoOpBuilder(GradContext&) { return Status::Ok(); }

const OpInfoRegistry& Global() { return OpInfoRegistry::Global(); }

TEST(OpInfo, GlobalRegistryIsConsistent) {
  const Status st = Global().Check();
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_GT(Global().ops().size(), 100u);
}

TEST(OpInfo, NoOpIsRegisteredTwice) {
  std::set<std::string> seen;
  for (const OpInfo& info : Global().ops()) EXPECT_TRUE(seen.insert(info.Name()).second) << info.Name();
}

TEST(OpInfo, BuilderRangesDoNotOverlap) {
  for (const OpInfo& info : Global().ops()) {
    for (size_t i = 0; i < info.gradients.size(); ++i) {
      EXPECT_LE(info.gradients[i].since, info.gradients[i].until) << info.Name();
      for (size_t j = 0; j < i; ++j) {
        const bool apart =
            info.gradients[i].since > info.gradients[j].until || info.gradients[j].since > info.gradients[i].until;
        EXPECT_TRUE(apart) << info.Name() << ": builders " << j << " and " << i << " overlap";
      }
    }
  }
}

TEST(OpInfo, OpsWithBuildersAreNotMarkedNotDifferentiable) {
  int with_builders = 0;
  for (const OpInfo& info : Global().ops()) {
    if (info.gradients.empty()) continue;
    ++with_builders;
    EXPECT_TRUE(info.not_differentiable.empty()) << info.Name() << ": " << info.not_differentiable;
  }
  EXPECT_GT(with_builders, 60);
}

TEST(OpInfo, RandomOpsAreNotDeterministic) {
  const std::set<std::string> random = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                                        "Multinomial",  "Bernoulli",     "Dropout"};
  std::set<std::string> not_deterministic;
  for (const OpInfo& info : Global().ops()) {
    if (!info.deterministic) not_deterministic.insert(info.Name());
  }
  EXPECT_EQ(not_deterministic, random);

  // The placement reads it: random ops are never folded; other domains and unknown ops are deterministic.
  ir::Graph g("main");
  auto node = [&](const std::string& op, const std::string& domain = "") {
    return g.AddNode(op, {}, {g.CreateValue(g.UniqueName("v"))}, "", domain);
  };
  for (const std::string& op : random) EXPECT_FALSE(exec::IsDeterministic(*node(op))) << op;
  EXPECT_FALSE(exec::IsDeterministic(*node("Dropout", "ai.onnx")));
  EXPECT_TRUE(exec::IsDeterministic(*node("Add")));
  EXPECT_TRUE(exec::IsDeterministic(*node("Dropout", "com.example")));
  EXPECT_TRUE(exec::IsDeterministic(*node("NoSuchOp")));
}

// The low/keep classes are checked whole through PrecisionPolicy::Default (tests/converter/policy_test.cc); the
// attribute that keeps an op FP32 is the OpInfo's alone.
TEST(OpInfo, OnlyTheReducingScattersKeepFp32ByAttribute) {
  std::set<std::string> keep_unless_none;
  for (const OpInfo& info : Global().ops()) {
    if (!info.keep_unless_none.empty()) keep_unless_none.insert(info.Name() + "." + info.keep_unless_none);
  }
  EXPECT_EQ(keep_unless_none, (std::set<std::string>{"ScatterND.reduction", "ScatterElements.reduction"}));
}

TEST(OpInfo, FindNormalisesTheOnnxDomain) {
  ASSERT_NE(Global().Find("", "MatMul"), nullptr);
  EXPECT_EQ(Global().Find("ai.onnx", "MatMul"), Global().Find("", "MatMul"));
  EXPECT_EQ(Global().Find("", "MatMul")->op_type, "MatMul");
  ASSERT_NE(Global().Find(exec::kInternalDomain, "ReluGrad"), nullptr);
  EXPECT_EQ(Global().Find(exec::kInternalDomain, "ReluGrad")->Name(), "com.onnxamp:ReluGrad");
  EXPECT_EQ(Global().Find("", "ReluGrad"), nullptr);
  EXPECT_EQ(Global().Find("", "NoSuchOp"), nullptr);
}

// Check reports each kind of inconsistency, naming the op.
TEST(OpInfo, CheckFindsInconsistencies) {
  auto check = [](void (*fill)(OpInfoRegistry&)) {
    OpInfoRegistry r;
    fill(r);
    return r.Check();
  };
  EXPECT_TRUE(check([](OpInfoRegistry& r) {
                r.Add("A").Gradient(1, 6, &NoOpBuilder).Gradient(7, INT64_MAX, &NoOpBuilder);
                r.Add("B").Gradient(1, INT64_MAX, &NoOpBuilder).NoGradientInputs({1, 2}, "scales");
                r.Add("A", "com.example").NotDifferentiable("test");
              }).ok());
  const std::map<std::string, void (*)(OpInfoRegistry&)> broken = {
      {"registered twice",
       [](OpInfoRegistry& r) {
         r.Add("A");
         r.Add("A", "ai.onnx");
       }},
      {"overlap", [](OpInfoRegistry& r) { r.Add("A").Gradient(1, 7, &NoOpBuilder).Gradient(7, 9, &NoOpBuilder); }},
      {"empty gradient builder range", [](OpInfoRegistry& r) { r.Add("A").Gradient(9, 7, &NoOpBuilder); }},
      {"null", [](OpInfoRegistry& r) { r.Add("A").Gradient(1, 7, nullptr); }},
      {"marked not differentiable",
       [](OpInfoRegistry& r) { r.Add("A").Gradient(1, 7, &NoOpBuilder).NotDifferentiable("bool"); }},
      {"gradient floor reason",
       [](OpInfoRegistry& r) { r.Add("A").Gradient(kOldestTrainedOpset, 9, &NoOpBuilder).GradientFloor("late"); }},
      {"without a reason", [](OpInfoRegistry& r) { r.Add("A").Keep(""); }},
      {"but the op follows", [](OpInfoRegistry& r) { r.Add("A").precision_reason = "why"; }},
      {"outside the ONNX domain", [](OpInfoRegistry& r) { r.Add("A", "com.example").Low("fast"); }},
      {"already classifies", [](OpInfoRegistry& r) { r.Add("A").Keep("range").KeepUnlessNone("reduction"); }},
      {"inputs without gradient, but no builders", [](OpInfoRegistry& r) { r.Add("A").NoGradientInputs({1}, "x"); }},
      {"inputs without gradient unnamed",
       [](OpInfoRegistry& r) { r.Add("A").Gradient(1, 7, &NoOpBuilder).NoGradientInputs({1}, ""); }},
      {"input without gradient -1",
       [](OpInfoRegistry& r) { r.Add("A").Gradient(1, 7, &NoOpBuilder).NoGradientInputs({-1}, "x"); }},
  };
  for (const auto& [what, fill] : broken) {
    const Status st = check(fill);
    EXPECT_EQ(st.code(), StatusCode::kInternal) << what;
    EXPECT_NE(st.message().find(what), std::string::npos) << what << ": " << st.message();
    const bool names_op = st.message().find("OpInfo A:") != std::string::npos ||
                          st.message().find("OpInfo com.example:A:") != std::string::npos;
    EXPECT_TRUE(names_op) << what << ": " << st.message();
  }
}

// The autodiff's lookup reads the builders of the OpInfos, by opset, with the same messages as before.
TEST(OpInfo, GradientRegistryFindsBuildersByOpset) {
  OpInfoRegistry infos;
  infos.Add("A").Gradient(6, 8, &NoOpBuilder).Gradient(14, INT64_MAX, &NoOpBuilder);
  infos.Add("B").NotDifferentiable("bool result");
  infos.Add("C", exec::kInternalDomain).Gradient(1, 1, &NoOpBuilder);
  const GradientRegistry grads(infos);
  EXPECT_EQ(*grads.Find("A", "", 7), &infos.Find("", "A")->gradients[0]);
  EXPECT_EQ(*grads.Find("A", "ai.onnx", 20), &infos.Find("", "A")->gradients[1]);
  EXPECT_TRUE(grads.Find("C", exec::kInternalDomain, 1).ok());
  EXPECT_EQ(grads.Find("A", "", 10).status().message(), "op A at opset 10 has no gradient (opsets with one: 6-8, 14+)");
  EXPECT_EQ(grads.Find("B", "", 13).status().message(), "op B has no gradient");
  EXPECT_EQ(grads.Find("Z", "com.example", 1).status().message(), "op com.example:Z has no gradient");
  EXPECT_EQ(grads.Ops(), (std::vector<std::string>{"A", "com.onnxamp:C"}));
}

}  // namespace
}  // namespace onnxamp::ops
