// Session tests: kernel lookup before running, input binding errors, memory plan reuse, thread pool.
#include "runtime/executor/session.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <numeric>

#include "runtime/executor/memory_plan.h"
#include "runtime/executor/thread_pool.h"
#include "tests/runtime/op_tester.h"

namespace onnxamp::exec {
namespace {

// x[batch,3] -> Relu -> Relu -> y, plus z = Identity(w) with w[batch,2] sharing the symbol.
ir::Model ChainModel() {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("batch"), ir::Dim::Value(3)}));
  ir::Value* w = g.CreateValue("w");
  w->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("batch"), ir::Dim::Value(2)}));
  g.AddInput(x);
  g.AddInput(w);
  ir::Value* mid = g.CreateValue("mid");
  ir::Value* y = g.CreateValue("y");
  ir::Value* z = g.CreateValue("z");
  g.AddNode("Relu", {x}, {mid}, "relu1");
  g.AddNode("Relu", {mid}, {y}, "relu2");
  g.AddNode("Identity", {w}, {z}, "id3");
  g.AddOutput(y);
  g.AddOutput(z);
  return m;
}

ir::Tensor Named(ir::Tensor t, std::string name) {
  t.set_name(std::move(name));
  return t;
}

TEST(SessionTest, RunsAndNamesOutputs) {
  auto session = Session::Create(ChainModel());
  ASSERT_TRUE(session.ok()) << session.status().message();
  ir::Tensor x = testing::MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  ir::Tensor w = testing::MakeTensor<float>({2, 2}, {7, 8, 9, 10});
  RunStats stats;
  auto out = (*session)->Run({Named(x, "x"), Named(w, "w")}, &stats);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].name(), "y");
  EXPECT_EQ(testing::Values<float>((*out)[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(testing::Values<float>((*out)[1]), (std::vector<float>{7, 8, 9, 10}));
  EXPECT_GT(stats.seconds, 0.0);
}

TEST(SessionTest, FetchReturnsTheNamedOutputsAndRunsOnlyWhatTheyNeed) {
  auto session = std::move(Session::Create(ChainModel())).value();
  const std::vector<ir::Tensor> inputs = {Named(testing::MakeTensor<float>({1, 3}, {-1, 2, -3}), "x"),
                                          Named(testing::MakeTensor<float>({1, 2}, {7, 8}), "w")};
  RunOptions run;
  run.fetch = {"z"};
  run.profile = true;
  RunStats stats;
  auto out = session->Run(inputs, run, &stats);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name(), "z");
  EXPECT_EQ(testing::Values<float>((*out)[0]), (std::vector<float>{7, 8}));
  ASSERT_EQ(stats.nodes.size(), 1u);  // the Relus are not needed for z
  EXPECT_EQ(stats.nodes[0].node, "Identity 'id3'");
  // Another order, all outputs; a second run of a fetch list reuses its memory plan.
  run.fetch = {"z", "y"};
  for (int i = 0; i < 2; ++i) {
    out = session->Run(inputs, run, &stats);
    ASSERT_TRUE(out.ok()) << out.status().message();
    ASSERT_EQ(out->size(), 2u);
    EXPECT_EQ((*out)[0].name(), "z");
    EXPECT_EQ((*out)[1].name(), "y");
    EXPECT_EQ(testing::Values<float>((*out)[1]), (std::vector<float>{0, 2, 0}));
    EXPECT_EQ(stats.nodes.size(), 3u);
    EXPECT_EQ(stats.planned, i == 1);
  }
  run.fetch = {"nope"};
  out = session->Run(inputs, run);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "fetch 'nope' is not an output of the model (outputs: y, z)");
  run.fetch = {"y", "y"};
  out = session->Run(inputs, run);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "fetch 'y' is given twice");
}

// RunOptions::output_into: y (made by a Relu that allocates it) is computed into the caller's memory, the returned
// output shares it and the caller's other data stay untouched; z (an Identity that passes w through) gets its own
// memory; a tensor of other dims, or none, is not used; a list of the wrong length is refused. Plans still work.
TEST(SessionTest, OutputsComputedIntoCallerMemory) {
  auto session = std::move(Session::Create(ChainModel())).value();
  const std::vector<ir::Tensor> inputs = {Named(testing::MakeTensor<float>({2, 3}, {-1, 2, -3, 4, -5, 6}), "x"),
                                          Named(testing::MakeTensor<float>({2, 2}, {7, 8, 9, 10}), "w")};
  // The caller's buffer: 8 floats, y's 6 in the middle of it.
  auto memory = std::make_shared<ir::Buffer>(8 * sizeof(float));
  float* base = reinterpret_cast<float*>(memory->data());
  std::iota(base, base + 8, 100.0f);
  auto region = std::make_shared<ir::Buffer>(memory->data() + sizeof(float), 6 * sizeof(float), memory);
  const ir::Tensor y_into = ir::Tensor::FromBuffer(DType::kFloat32, {2, 3}, region);
  const ir::Tensor z_into(DType::kFloat32, {2, 2});
  RunOptions run;
  run.fetch = {"y", "z"};
  run.output_into = {y_into, z_into};
  for (int i = 0; i < 2; ++i) {  // the second run on the plan the first made
    auto out = session->Run(inputs, run);
    ASSERT_TRUE(out.ok()) << out.status().message();
    ASSERT_EQ(out->size(), 2u);
    EXPECT_EQ((*out)[0].data(), y_into.data()) << "y was not computed into the caller's memory";
    EXPECT_EQ(testing::Values<float>((*out)[0]), (std::vector<float>{0, 2, 0, 4, 0, 6}));
    EXPECT_EQ(std::vector<float>(base, base + 8), (std::vector<float>{100, 0, 2, 0, 4, 0, 6, 107}));
    EXPECT_NE((*out)[1].data(), z_into.data());  // passed through from w, not allocated
    EXPECT_EQ(testing::Values<float>((*out)[1]), (std::vector<float>{7, 8, 9, 10}));
    EXPECT_EQ(testing::Values<float>(z_into), (std::vector<float>{0, 0, 0, 0}));
    std::iota(base, base + 8, 100.0f);
  }
  run.output_into = {ir::Tensor(DType::kFloat32, {3, 2}), ir::Tensor()};  // other dims: not used
  auto out = session->Run(inputs, run);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_NE((*out)[0].data(), run.output_into[0].data());
  EXPECT_EQ(testing::Values<float>((*out)[0]), (std::vector<float>{0, 2, 0, 4, 0, 6}));
  run.output_into = {y_into};
  out = session->Run(inputs, run);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "RunOptions::output_into has 1 tensors for 2 fetched outputs");
}

TEST(SessionTest, ProfileTimesEveryNodeOnTheCpu) {
  auto session = std::move(Session::Create(ChainModel())).value();
  RunOptions run;
  run.profile = true;
  RunStats stats;
  auto out = session->Run({Named(testing::MakeTensor<float>({1, 3}, {1, 2, 3}), "x"),
                           Named(testing::MakeTensor<float>({1, 2}, {7, 8}), "w")},
                          run, &stats);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(stats.nodes.size(), 3u);
  double sum = 0;
  for (const NodeTime& t : stats.nodes) {
    EXPECT_FALSE(t.on_device);
    EXPECT_GE(t.seconds, 0.0);
    sum += t.seconds;
  }
  EXPECT_LE(sum, stats.seconds);
  EXPECT_EQ(stats.nodes[0].op_type, "Relu");
  // Without profile, no node times.
  out = session->Run({Named(testing::MakeTensor<float>({1, 3}, {1, 2, 3}), "x"),
                      Named(testing::MakeTensor<float>({1, 2}, {7, 8}), "w")},
                     &stats);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(stats.nodes.empty());
}

TEST(SessionTest, InputErrorsNameTheInput) {
  auto session = std::move(Session::Create(ChainModel())).value();
  ir::Tensor w = Named(testing::MakeTensor<float>({2, 2}, {0, 0, 0, 0}), "w");
  auto expect_error = [&](std::vector<ir::Tensor> feeds, const std::string& fragment) {
    auto out = session->Run(feeds);
    ASSERT_FALSE(out.ok()) << fragment;
    EXPECT_NE(out.status().message().find(fragment), std::string::npos) << out.status().message();
  };
  expect_error({w}, "missing input 'x' (expected tensor(float)[batch,3])");
  expect_error({Named(ir::Tensor(DType::kFloat16, {2, 3}), "x"), w}, "input 'x': expected dtype float, got float16");
  expect_error({Named(ir::Tensor(DType::kFloat32, {6}), "x"), w}, "input 'x': expected rank 2 [batch,3], got rank 1");
  expect_error({Named(ir::Tensor(DType::kFloat32, {2, 4}), "x"), w}, "input 'x': dim 1 expected 3, got 4");
  expect_error({Named(ir::Tensor(DType::kFloat32, {5, 3}), "x"), w}, "input 'w': dim 0 ('batch') is 2 but input 'x'");
  expect_error({Named(ir::Tensor(DType::kFloat32, {2, 3}), "x"), w, Named(ir::Tensor(DType::kFloat32, {1}), "q")},
               "input 'q' is not an input of the model (inputs: x, w)");
}

TEST(SessionTest, UnsupportedOpIsRefusedBeforeRunning) {
  ir::Model m = ChainModel();
  ir::Node* n = m.graph->FindValue("mid")->producer();
  n->set_op_type("NoSuchOp");
  auto session = Session::Create(std::move(m));
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(session.status().message().find("node NoSuchOp 'relu1': op NoSuchOp (domain ai.onnx) is not supported"),
            std::string::npos)
      << session.status().message();
}

TEST(SessionTest, UnsupportedOpsetNamesTheSupportedRange) {
  ir::Model m = ChainModel();
  m.opset_imports = {{"", 40}};
  auto session = Session::Create(std::move(m));
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("node Relu 'relu1': op Relu at opset 40"), std::string::npos)
      << session.status().message();
  EXPECT_NE(session.status().message().find("supported opsets: "), std::string::npos);
}

TEST(SessionTest, MaxMemoryPlansEvictsTheOldest) {
  SessionOptions options;
  options.max_memory_plans = 1;
  auto session = std::move(Session::Create(ChainModel(), options)).value();
  auto feeds = [](int64_t batch) {
    return std::vector<ir::Tensor>{
        Named(testing::MakeTensor<float>({batch, 3}, std::vector<float>(batch * 3, 1.0f)), "x"),
        Named(testing::MakeTensor<float>({batch, 2}, std::vector<float>(batch * 2, 2.0f)), "w")};
  };
  // Batch 4 twice (planned the second time), batch 5 twice (its plan replaces batch 4's), batch 4 again: unplanned.
  std::vector<bool> planned;
  for (int64_t batch : {4, 4, 5, 5, 4}) {
    RunStats stats;
    ASSERT_TRUE(session->Run(feeds(batch), &stats).ok());
    planned.push_back(stats.planned);
  }
  EXPECT_EQ(planned, (std::vector<bool>{false, true, false, true, false}));
}

TEST(SessionTest, SecondRunUsesTheStaticPlan) {
  auto session = std::move(Session::Create(ChainModel())).value();
  std::vector<ir::Tensor> feeds = {Named(testing::MakeTensor<float>({4, 3}, std::vector<float>(12, 1.0f)), "x"),
                                   Named(testing::MakeTensor<float>({4, 2}, std::vector<float>(8, 2.0f)), "w")};
  RunStats first, second;
  ASSERT_TRUE(session->Run(feeds, &first).ok());
  EXPECT_FALSE(first.planned);
  auto out = session->Run(feeds, &second);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(second.planned);
  EXPECT_EQ(second.arena_bytes, 64u);  // `mid` (48 bytes) rounded to the arena alignment
  EXPECT_EQ(testing::Values<float>((*out)[0]), std::vector<float>(12, 1.0f));
  // Outputs never live in the arena: a third run does not change what the second returned.
  feeds[0] = Named(testing::MakeTensor<float>({4, 3}, std::vector<float>(12, 5.0f)), "x");
  ASSERT_TRUE(session->Run(feeds).ok());
  EXPECT_EQ(testing::Values<float>((*out)[0]), std::vector<float>(12, 1.0f));
}

TEST(SessionTest, PlanIsKeptAcrossRunsWithKernelBuiltValues) {
  // y = Relu(Add(x, Constant)): the Constant's output is built by its kernel, not allocated through the plan,
  // and must not make every run throw the plan away.
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(4)}));
  g.AddInput(x);
  ir::Value* c = g.CreateValue("c");
  ir::Value* s = g.CreateValue("s");
  ir::Value* y = g.CreateValue("y");
  ir::Node* constant = g.AddNode("Constant", {}, {c}, "const");
  constant->SetAttribute(ir::Attribute::TensorValue("value", testing::MakeTensor<float>({4}, {1, -2, 3, -4})));
  g.AddNode("Add", {x, c}, {s}, "add");
  g.AddNode("Relu", {s}, {y}, "relu");
  g.AddOutput(y);
  auto session = std::move(Session::Create(std::move(m))).value();
  std::vector<ir::Tensor> feeds = {Named(testing::MakeTensor<float>({4}, {0, 0, 0, 0}), "x")};
  RunStats first, second, third;
  ASSERT_TRUE(session->Run(feeds, &first).ok());
  EXPECT_EQ(first.unplanned_values, 1);  // `s`
  ASSERT_TRUE(session->Run(feeds, &second).ok());
  auto out = session->Run(feeds, &third);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(second.planned && third.planned);
  EXPECT_EQ(second.unplanned_values, 0);
  EXPECT_EQ(third.unplanned_values, 0);
  EXPECT_EQ(testing::Values<float>((*out)[0]), (std::vector<float>{1, 0, 3, 0}));
}

TEST(SessionTest, PlannedRunsLendAndTakeBackTheArenaViews) {
  // x -> Neg -> Neg -> Abs -> Relu -> y = |x| over shapes [3] and [5]: each planned run lends every intermediate value
  // its view of the arena and takes it back on release; many runs with changing values and alternating shapes (two
  // plans) must give the right answers and never fall back to the heap.
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("n")}));
  g.AddInput(x);
  ir::Value* prev = x;
  int i = 0;
  for (const char* op : {"Neg", "Neg", "Abs", "Relu"}) {
    ir::Value* v = g.CreateValue(i == 3 ? "y" : "v" + std::to_string(i));
    g.AddNode(op, {prev}, {v}, "n" + std::to_string(i));
    prev = v;
    ++i;
  }
  g.AddOutput(prev);
  auto session = std::move(Session::Create(std::move(m))).value();
  for (int run = 0; run < 12; ++run) {
    const int64_t n = run % 2 ? 5 : 3;
    std::vector<float> values(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      want[j] = static_cast<float>(run * 10 + j);
      values[j] = j % 2 ? -want[j] : want[j];
    }
    RunStats stats;
    auto out = session->Run({Named(testing::MakeTensor<float>({n}, values), "x")}, &stats);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(testing::Values<float>((*out)[0]), want) << run;
    if (run >= 2) {
      EXPECT_TRUE(stats.planned) << run;
      EXPECT_EQ(stats.unplanned_values, 0) << run;
    }
  }
}

TEST(SessionTest, PassedThroughValuesShareTheArenaAndKeepItAlive) {
  // a = Neg(x); r = Reshape(a) is read last, after `a`'s own last reader and after b and c are made: a planned run
  // keeps a's region for r (no copy) and gives b and c other memory. z = Reshape(c) is a graph output, so it gets
  // its own copy: what one run returned does not change in the next.
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(2), ir::Dim::Value(2)}));
  g.AddInput(x);
  ir::Value* shape = g.CreateValue("shape");
  g.SetInitializer(shape, testing::MakeTensor<int64_t>({1}, {4}));
  ir::Value* a = g.CreateValue("a");
  ir::Value* r = g.CreateValue("r");
  ir::Value* b = g.CreateValue("b");
  ir::Value* c = g.CreateValue("c");
  ir::Value* d = g.CreateValue("d");
  ir::Value* y = g.CreateValue("y");
  ir::Value* z = g.CreateValue("z");
  g.AddNode("Neg", {x}, {a}, "neg");
  g.AddNode("Reshape", {a, shape}, {r}, "reshape_a");
  g.AddNode("Abs", {x}, {b}, "abs");
  g.AddNode("Relu", {b}, {c}, "relu");
  g.AddNode("Reshape", {c, shape}, {d}, "reshape_c");
  g.AddNode("Add", {r, d}, {y}, "add");
  g.AddNode("Reshape", {c, shape}, {z}, "reshape_out");
  g.AddOutput(y);
  g.AddOutput(z);
  SessionOptions options;
  options.graph_optimization = GraphOptimization::kNone;
  auto session = std::move(Session::Create(std::move(m), options)).value();
  std::vector<ir::Tensor> previous;
  std::vector<float> previous_z;
  for (int run = 0; run < 6; ++run) {
    const std::vector<float> xs = {1.0f + run, -2.0f, 3.0f, -4.0f - run};
    RunStats stats;
    auto out = session->Run({Named(testing::MakeTensor<float>({2, 2}, xs), "x")}, &stats);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::vector<float> want_y, want_z;
    for (float v : xs) {
      want_y.push_back(-v + std::abs(v));
      want_z.push_back(std::abs(v));
    }
    EXPECT_EQ(testing::Values<float>((*out)[0]), want_y) << run;
    EXPECT_EQ(testing::Values<float>((*out)[1]), want_z) << run;
    if (run >= 1) {
      EXPECT_TRUE(stats.planned) << run;
      EXPECT_EQ(stats.unplanned_values, 0) << run;
      EXPECT_EQ(testing::Values<float>(previous[1]), previous_z) << run;
    }
    previous = std::move(out).value();
    previous_z = want_z;
  }
}

TEST(MemoryPlanTest, ReusesMemoryOfDeadValues) {
  // a: steps 0-1, b: 1-2, c: 2-3. a and c never overlap in time, so they share memory.
  MemoryPlan plan = PlanMemory({{100, 0, 1}, {100, 1, 2}, {100, 2, 3}});
  EXPECT_EQ(plan.arena_bytes, 256u);
  EXPECT_EQ(plan.offsets[0], plan.offsets[2]);
  EXPECT_NE(plan.offsets[0], plan.offsets[1]);
  for (uint64_t off : plan.offsets) EXPECT_EQ(off % 64, 0u);
}

TEST(MemoryPlanTest, OverlappingLifetimesNeverOverlapInMemory) {
  std::vector<PlanRequest> reqs;
  uint64_t seed = 12345;
  for (int i = 0; i < 200; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    int first = static_cast<int>((seed >> 33) % 50);
    int len = static_cast<int>((seed >> 20) % 10);
    reqs.push_back({(seed >> 40) % 5000 + 1, first, first + len});
  }
  MemoryPlan plan = PlanMemory(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_LE(plan.offsets[i] + reqs[i].bytes, plan.arena_bytes);
    for (size_t j = i + 1; j < reqs.size(); ++j) {
      const bool time = reqs[i].first_step <= reqs[j].last_step && reqs[j].first_step <= reqs[i].last_step;
      const bool space =
          plan.offsets[i] < plan.offsets[j] + reqs[j].bytes && plan.offsets[j] < plan.offsets[i] + reqs[i].bytes;
      ASSERT_FALSE(time && space) << i << " and " << j;
    }
  }
}

TEST(ThreadPoolTest, CoversTheRangeExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {0, 1, 7, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.ParallelFor(n, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << i;
  }
  // Nested loops run inline instead of deadlocking.
  std::atomic<int64_t> total{0};
  pool.ParallelFor(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) pool.ParallelFor(10, 1, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
  });
  EXPECT_EQ(total.load(), 80);
}

}  // namespace
}  // namespace onnxamp::exec
