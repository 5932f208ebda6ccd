// Parameter groups (trainer/optim/param_groups.h): assignment from --no-decay / --no-decay-1d / --lr-scale, their
// one-line errors, and the optimizers stepping each parameter as a separate optimizer with its group's learning rate
// and weight decay would.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainer/optim/optimizer.h"
#include "trainer/optim/param_groups.h"
#include "trainer/state/parameter_store.h"

namespace onnxamp::trainer {
namespace {

const std::vector<std::string> kNames = {"fc1.weight", "fc1.bias", "ln.scale", "head.weight", "head.bias"};
const std::vector<size_t> kRanks = {2, 1, 1, 2, 1};

TEST(ParamGroupsTest, DefaultIsOneGroup) {
  StatusOr<ParamGroups> g = AssignParamGroups({}, kNames, kRanks);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->groups.size(), 1u);
  EXPECT_EQ(g->of, std::vector<int32_t>(5, 0));
  EXPECT_EQ(DescribeParamGroups(*g, {6, 3, 3, 6, 2}), "");
}

TEST(ParamGroupsTest, NoDecayOneDimAndFirstMatchingLrScale) {
  ParamGroupOptions o;
  o.no_decay_1d = true;
  o.lr_scale = {{"^head", 10.0}, {"weight", 0.5}};
  StatusOr<ParamGroups> g = AssignParamGroups(o, kNames, kRanks);
  ASSERT_TRUE(g.ok()) << g.status().message();
  // fc1.weight: 0.5x, decay; fc1.bias, ln.scale: no decay; head.weight: 10x (the first rule), decay; head.bias: 10x,
  // no decay.
  ASSERT_EQ(g->groups.size(), 5u);
  EXPECT_EQ(g->at(0), (ParamGroup{0.5, true}));
  EXPECT_EQ(g->at(1), (ParamGroup{1.0, false}));
  EXPECT_EQ(g->of[2], g->of[1]);
  EXPECT_EQ(g->at(3), (ParamGroup{10.0, true}));
  EXPECT_EQ(g->at(4), (ParamGroup{10.0, false}));
  EXPECT_EQ(g->groups[0], ParamGroup{});  // group 0 is the default even when no parameter is in it
  EXPECT_EQ(DescribeParamGroups(*g, {6, 3, 3, 6, 2}),
            "4 parameter groups: 1 parameter (6 values) at 0.5x the learning rate; 2 parameters (6 values) without "
            "weight decay; 1 parameter (6 values) at 10x the learning rate; 1 parameter (2 values) at 10x the learning "
            "rate without weight decay");

  o = ParamGroupOptions();
  o.no_decay = "bias|scale";
  g = AssignParamGroups(o, kNames, kRanks);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->of, (std::vector<int32_t>{0, 1, 1, 0, 1}));
}

// Layer-wise decay: the blocks named by the default pattern in the common conventions (numbered by increasing index,
// wherever they start), the parameters before the first block layer 0, those after it the head; factors
// decay ** (B + 1 - layer), times an --lr-scale factor.
TEST(ParamGroupsTest, LayerDecayNumbersBlocksEmbeddingsAndHead) {
  const std::vector<std::string> names = {"embeddings.word.weight",
                                          "encoder.layer.0.attn.weight",
                                          "encoder.layer.1.attn.weight",
                                          "encoder.layer.10.attn.weight",
                                          "pooler.weight",
                                          "classifier.weight"};
  // The pooler reads the last block's output, the embeddings come first.
  const std::vector<int64_t> first_use = {0, 5, 9, 13, 20, 21};
  ParamGroupOptions o;
  o.layer_decay = 0.5;
  StatusOr<LayerAssignment> layers = AssignLayers(o, names, first_use);
  ASSERT_TRUE(layers.ok()) << layers.status().message();
  EXPECT_EQ(layers->blocks, 3);
  EXPECT_EQ(layers->layer, (std::vector<int64_t>{0, 1, 2, 3, 4, 4}));
  o.lr_scale = {{"^classifier", 10.0}};
  StatusOr<ParamGroups> g = AssignParamGroups(o, names, std::vector<size_t>(6, 2), first_use);
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::vector<double> want = {0.0625, 0.125, 0.25, 0.5, 1.0, 10.0};
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(g->at(i).lr_scale, want[i]) << names[i];

  // The default pattern's other conventions: ResNet stages, LLaMA/GPT-2 layers, timm blocks.
  for (const auto& [name, index] : std::vector<std::pair<std::string, int64_t>>{{"layer3.0.conv1.weight", 3},
                                                                                {"model.layers.7.mlp.weight", 7},
                                                                                {"transformer.h.2.attn.weight", 2},
                                                                                {"blocks.4.norm1.weight", 4},
                                                                                {"stages_1/conv:0", 1}}) {
    StatusOr<LayerAssignment> one = AssignLayers(ParamGroupOptions{}, {name, "head.weight"}, {0, 1});
    ASSERT_TRUE(one.ok()) << name << ": " << one.status().message();
    EXPECT_EQ(one->layer, (std::vector<int64_t>{1, 2})) << name << " (index " << index << ")";
  }
  // Names without a block index, a pattern without a group, a bad decay.
  o = ParamGroupOptions();
  o.layer_decay = 0.8;
  EXPECT_NE(AssignParamGroups(o, kNames, kRanks, {0, 1, 2, 3, 4})
                .status()
                .message()
                .find("--layer-decay: no trained parameter's name matches the layer pattern"),
            std::string::npos);
  o.layer_pattern = "fc";
  EXPECT_NE(AssignParamGroups(o, kNames, kRanks, {0, 1, 2, 3, 4})
                .status()
                .message()
                .find("--layer-pattern 'fc': needs a capture group for the block index"),
            std::string::npos);
  o.layer_pattern = "fc(\\d)";
  StatusOr<ParamGroups> fc = AssignParamGroups(o, kNames, kRanks, {0, 1, 2, 3, 4});
  ASSERT_TRUE(fc.ok()) << fc.status().message();
  EXPECT_EQ(fc->at(0).lr_scale, 0.8);  // fc1: the one block; ln and head after it
  EXPECT_EQ(fc->at(3).lr_scale, 1.0);
  o.layer_decay = 1.5;
  EXPECT_NE(AssignParamGroups(o, kNames, kRanks, {0, 1, 2, 3, 4})
                .status()
                .message()
                .find("--layer-decay 1.5: expected a factor in (0, 1]"),
            std::string::npos);
}

TEST(ParamGroupsTest, OneLineErrors) {
  auto error = [](const ParamGroupOptions& o) {
    StatusOr<ParamGroups> g = AssignParamGroups(o, kNames, kRanks);
    EXPECT_FALSE(g.ok());
    return g.ok() ? std::string() : g.status().message();
  };
  ParamGroupOptions o;
  o.no_decay = "norm";
  EXPECT_EQ(error(o), "--no-decay 'norm': matches no trained parameter");
  o.no_decay = "[";
  EXPECT_EQ(error(o).rfind("--no-decay '[': not a valid regular expression: ", 0), 0u) << error(o);
  o = ParamGroupOptions();
  o.lr_scale = {{"fc", 2.0}, {"fc1", 3.0}};
  EXPECT_EQ(error(o), "--lr-scale 'fc1': matches no trained parameter that an earlier --lr-scale did not take");
  o.lr_scale = {{"head", -1.0}};
  EXPECT_EQ(error(o), "--lr-scale 'head=-1': the factor must be finite and >= 0");

  StatusOr<LrScaleRule> r = ParseLrScaleRule("a=b=0.25");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->pattern, "a=b");
  EXPECT_EQ(r->factor, 0.25);
  for (const char* bad : {"head", "=2", "head=", "head=x", "head=1e999", "head=nan", "head=2x"}) {
    EXPECT_FALSE(ParseLrScaleRule(bad).ok()) << bad;
  }
  EXPECT_EQ(ParseLrScaleRule("head").status().message(), "--lr-scale 'head': expected PATTERN=FACTOR");
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// Three steps of `opt` on a store of the parameters p0 with the gradients of each step.
ParameterStore Run(Optimizer& opt, const std::vector<std::vector<float>>& p0, double lr) {
  std::vector<ParameterSpec> specs;
  for (size_t i = 0; i < p0.size(); ++i) specs.push_back({StrCat("p", i), {static_cast<int64_t>(p0[i].size())}});
  ParameterStore store = ParameterStore::Create(specs).value();
  for (size_t i = 0; i < p0.size(); ++i) std::copy(p0[i].begin(), p0[i].end(), store.param(i).begin());
  for (int step = 0; step < 3; ++step) {
    store.ZeroGrads();
    for (size_t i = 0; i < p0.size(); ++i) {
      std::span<float> g = store.grad(i);
      for (size_t j = 0; j < g.size(); ++j) g[j] = 0.1f * static_cast<float>((j + i + step) % 5) - 0.2f;
      store.set_has_grad(i, true);
    }
    const Status s = opt.Step(store, lr);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  return store;
}

// Each parameter of a grouped optimizer ends bit for bit where a one-group optimizer with the group's learning rate
// and weight decay takes it.
void ExpectGroupsAsSeparateOptimizers(const std::function<std::unique_ptr<Optimizer>(double wd)>& make, double wd) {
  const std::vector<std::vector<float>> p0 = {{1.0f, -2.0f, 0.5f, 3.0f}, {0.25f, -0.75f}, {2.0f, 1.0f, -1.0f}};
  ParamGroups groups;
  groups.groups = {ParamGroup{}, ParamGroup{0.5, false}, ParamGroup{3.0, true}};
  groups.of = {0, 1, 2};
  std::unique_ptr<Optimizer> grouped = make(wd);
  grouped->SetGroups(groups);
  const double lr = 0.01;
  const ParameterStore g = Run(*grouped, p0, lr);
  for (size_t i = 0; i < p0.size(); ++i) {
    std::unique_ptr<Optimizer> alone = make(groups.at(i).decay ? wd : 0.0);
    const ParameterStore a = Run(*alone, p0, lr * groups.at(i).lr_scale);
    for (size_t j = 0; j < p0[i].size(); ++j) {
      EXPECT_EQ(Bits(g.param(i)[j]), Bits(a.param(i)[j])) << grouped->name() << " parameter " << i << "[" << j << "]";
    }
    EXPECT_NE(g.param(i)[0], p0[i][0]);
  }
  // The groups changed something: parameter 1 without decay and at half the rate is not where the default takes it.
  const ParameterStore ungrouped = Run(*make(wd), p0, lr);
  EXPECT_NE(Bits(g.param(1)[0]), Bits(ungrouped.param(1)[0]));
  EXPECT_NE(Bits(g.param(2)[0]), Bits(ungrouped.param(2)[0]));
  EXPECT_EQ(Bits(g.param(0)[0]), Bits(ungrouped.param(0)[0]));
}

TEST(ParamGroupsTest, AdamWAdamAndSgdStepEachGroupAsItsOwnOptimizer) {
  ExpectGroupsAsSeparateOptimizers(
      [](double wd) {
        AdamOptions o = AdamWDefaults();
        o.weight_decay = wd;
        return MakeAdamW(o).value();
      },
      0.1);
  ExpectGroupsAsSeparateOptimizers(
      [](double wd) {
        AdamOptions o;
        o.weight_decay = wd;
        o.amsgrad = true;
        return MakeAdam(o).value();
      },
      0.1);
  ExpectGroupsAsSeparateOptimizers(
      [](double wd) {
        SgdOptions o;
        o.momentum = 0.9;
        o.nesterov = true;
        o.weight_decay = wd;
        return MakeSgd(o).value();
      },
      0.1);
}

// The element loops split over a thread pool give the bits of the single-threaded loop (ranges start anywhere, the
// vector and scalar paths compute the same bits).
TEST(OptimizerThreadsTest, APoolGivesTheSameBits) {
  const int64_t n = 300007;  // several ranges, not a multiple of the vector width
  exec::ThreadPool pool(2);
  auto run = [&](Optimizer& opt, bool threaded) {
    ParameterStore store = ParameterStore::Create({{"w", {n}}, {"b", {17}}}).value();
    for (size_t i = 0; i < store.size(); ++i) {
      std::span<float> p = store.param(i);
      for (size_t j = 0; j < p.size(); ++j) p[j] = 0.001f * static_cast<float>(j % 997) - 0.5f;
    }
    opt.SetThreadPool(threaded ? &pool : nullptr);
    for (int step = 0; step < 3; ++step) {
      store.ZeroGrads();
      for (size_t i = 0; i < store.size(); ++i) {
        std::span<float> g = store.grad(i);
        for (size_t j = 0; j < g.size(); ++j) g[j] = 0.01f * static_cast<float>((j * 7 + step) % 101) - 0.5f;
        store.set_has_grad(i, true);
      }
      EXPECT_TRUE(opt.Step(store, 0.01).ok());
    }
    return store;
  };
  std::vector<std::unique_ptr<Optimizer>> single, threaded;
  for (auto* list : {&single, &threaded}) {
    AdamOptions amsgrad = AdamWDefaults();
    amsgrad.amsgrad = true;
    SgdOptions sgd;
    sgd.momentum = 0.9;
    sgd.weight_decay = 1e-3;
    list->push_back(MakeAdamW(amsgrad).value());
    list->push_back(MakeSgd(sgd).value());
  }
  for (size_t k = 0; k < single.size(); ++k) {
    const ParameterStore a = run(*single[k], false);
    const ParameterStore b = run(*threaded[k], true);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(std::memcmp(a.param(i).data(), b.param(i).data(), a.numel(i) * sizeof(float)), 0)
          << single[k]->name() << " parameter " << i;
    }
    for (const std::string& state : a.state_names()) {
      EXPECT_EQ(std::memcmp(a.FindState(state), b.FindState(state), a.flat_size() * sizeof(float)), 0)
          << single[k]->name() << " " << state;
    }
  }
}

TEST(ParamGroupsTest, StepRejectsGroupsOfAnotherParameterCount) {
  std::unique_ptr<Optimizer> opt = MakeAdamW(AdamWDefaults()).value();
  opt->SetGroups(ParamGroups::Single(2));
  ParameterStore store = ParameterStore::Create({{"a", {2}}}).value();
  store.set_has_grad(0, true);
  const Status s = opt->Step(store, 0.1);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "adamw: the parameter groups cover 2 parameters, this store has 1");
}

}  // namespace
}  // namespace onnxamp::trainer
