// Tests of the conformance runner: comparison rules, the expected-failures list, runs over a tiny suite written by
// the test (pass, mismatch, out-of-scope op, bad input count), and --isolate's child and worker processes. With
// --worker this binary is itself a worker that crashes on tests named *crash* and hangs on *hang*.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "importer/tensor_file.h"
#include "runtime/common/half.h"
#include "tests/conformance/compare.h"
#include "tests/conformance/expected.h"
#include "tests/conformance/isolate.h"
#include "tests/conformance/runner.h"
#ifdef ONNXAMP_WITH_CUDA
#include "runtime/cuda/device.h"
#endif

namespace onnxamp::conformance {
namespace {
namespace fs = std::filesystem;

ir::Tensor Floats(std::vector<float> v, std::vector<int64_t> dims) {
  ir::Tensor t(DType::kFloat32, std::move(dims));
  std::memcpy(t.mutable_data(), v.data(), v.size() * 4);
  return t;
}

ir::Tensor Int64s(std::vector<int64_t> v) {
  ir::Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  std::memcpy(t.mutable_data(), v.data(), v.size() * 8);
  return t;
}

TEST(CompareTest, WithinTolerancePasses) {
  // |got - want| <= 1e-7 + 1e-3 * |want|.
  EXPECT_TRUE(CompareTensors(Floats({1.0009f, -2.0f}, {2}), Floats({1.0f, -2.0019f}, {2})).ok());
}

TEST(CompareTest, OutsideToleranceFailsNamingTheElement) {
  Status st = CompareTensors(Floats({1, 2, 3, 4.01f}, {2, 2}), Floats({1, 2, 3, 4}, {2, 2}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("1 of 4 values differ"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[1,1]"), std::string::npos) << st.message();
}

TEST(CompareTest, AbsoluteToleranceNearZero) {
  EXPECT_TRUE(CompareTensors(Floats({5e-8f}, {1}), Floats({0.0f}, {1})).ok());
  EXPECT_FALSE(CompareTensors(Floats({2e-7f}, {1}), Floats({0.0f}, {1})).ok());
}

TEST(CompareTest, NanMatchesNanAndInfMatchesSameSign) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(CompareTensors(Floats({nan, inf, -inf}, {3}), Floats({nan, inf, -inf}, {3})).ok());
  EXPECT_FALSE(CompareTensors(Floats({1.0f}, {1}), Floats({nan}, {1})).ok());
  EXPECT_FALSE(CompareTensors(Floats({nan}, {1}), Floats({1.0f}, {1})).ok());
  EXPECT_FALSE(CompareTensors(Floats({inf}, {1}), Floats({-inf}, {1})).ok());
  EXPECT_FALSE(CompareTensors(Floats({3e38f}, {1}), Floats({inf}, {1})).ok());
}

TEST(CompareTest, DtypeAndShapeMustMatch) {
  Status st = CompareTensors(Floats({1, 2}, {2}), Int64s({1, 2}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("expected int64, got float"), std::string::npos) << st.message();
  st = CompareTensors(Floats({1, 2}, {1, 2}), Floats({1, 2}, {2}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("expected [2], got [1,2]"), std::string::npos) << st.message();
}

TEST(CompareTest, IntegersAreExact) {
  EXPECT_TRUE(CompareTensors(Int64s({1, -5, 1LL << 40}), Int64s({1, -5, 1LL << 40})).ok());
  Status st = CompareTensors(Int64s({1, -5, 7}), Int64s({1, -4, 7}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("got -5, want -4"), std::string::npos) << st.message();
}

TEST(CompareTest, Float16ComparedAsValues) {
  ir::Tensor a(DType::kFloat16, {2});
  ir::Tensor b(DType::kFloat16, {2});
  uint16_t av[2] = {FloatToHalfBits(1.0f), FloatToHalfBits(2.0f)};
  uint16_t bv[2] = {FloatToHalfBits(1.0f), FloatToHalfBits(2.001f)};  // rounds to 2.0 in fp16
  std::memcpy(a.mutable_data(), av, 4);
  std::memcpy(b.mutable_data(), bv, 4);
  EXPECT_TRUE(CompareTensors(a, b).ok());
  bv[1] = FloatToHalfBits(2.1f);
  std::memcpy(b.mutable_data(), bv, 4);
  EXPECT_FALSE(CompareTensors(a, b).ok());
}

TEST(CompareTest, StringsAreExact) {
  ir::Tensor a(DType::kString, {2});
  ir::Tensor b(DType::kString, {2});
  a.mutable_strings() = {"x", "y"};
  b.mutable_strings() = {"x", "y"};
  EXPECT_TRUE(CompareTensors(a, b).ok());
  b.mutable_strings()[1] = "z";
  EXPECT_FALSE(CompareTensors(a, b).ok());
}

TEST(ExpectedTest, ParsesIdsReasonsAndComments) {
  StatusOr<ExpectedFailures> e = ParseExpected("# header\n\nnode/test_a  mismatch: x\nsimple/test_b\n", "list");
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_EQ(e->size(), 2u);
  EXPECT_EQ(e->at("node/test_a"), "mismatch: x");
  EXPECT_EQ(e->at("simple/test_b"), "");
}

TEST(ExpectedTest, RejectsDuplicatesAndBareNames) {
  Status st = ParseExpected("node/test_a\nnode/test_a r\n", "list").status();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("list:2: test 'node/test_a' is listed twice"), std::string::npos) << st.message();
  EXPECT_FALSE(ParseExpected("test_a\n", "list").ok());
}

TEST(ExpectedTest, FormatParsesBack) {
  ExpectedFailures e = {{"node/test_a", "why"}, {"node/test_b", ""}};
  StatusOr<ExpectedFailures> back = ParseExpected(FormatExpected(e), "list");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, e);
}

TEST(ExpectedTest, CompareFlagsEveryChange) {
  std::vector<std::string> ids = {"s/fails_listed", "s/fails_new", "s/passes_listed", "s/passes", "s/unsup_listed"};
  std::vector<TestResult> results(5);
  results[0].outcome = Outcome::kFailed;
  results[0].reason = "new reason";
  results[1].reason = "why it fails";
  results[1].outcome = Outcome::kFailed;
  results[2].outcome = Outcome::kPassed;
  results[3].outcome = Outcome::kPassed;
  results[4].outcome = Outcome::kUnsupported;
  ExpectedFailures expected = {
      {"s/fails_listed", "hand-written"}, {"s/passes_listed", ""}, {"s/unsup_listed", ""}, {"s/not_run", ""}};
  Deviations d = Compare(ids, results, expected);
  ASSERT_EQ(d.unexpected_failures.size(), 1u);
  EXPECT_NE(d.unexpected_failures[0].find("s/fails_new"), std::string::npos);
  ASSERT_EQ(d.unexpected_passes.size(), 1u);
  EXPECT_NE(d.unexpected_passes[0].find("s/passes_listed: remove it from the list"), std::string::npos);
  ASSERT_EQ(d.unexpected_other.size(), 1u);

  ExpectedFailures updated = Updated(ids, results, expected);
  EXPECT_EQ(updated.size(), 3u);  // fails_listed, fails_new, and not_run (kept: it did not run)
  EXPECT_EQ(updated.at("s/fails_new"), "why it fails");
  EXPECT_EQ(updated.at("s/fails_listed"), "hand-written");
  EXPECT_TRUE(updated.count("s/not_run"));
  EXPECT_FALSE(updated.count("s/passes_listed"));
}

// ------------------------------------------------------------------ runs over a tiny suite

class SuiteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "onnxamp_conformance_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // Writes <root>/suite/<name>/model.onnx: one node `op` from x to y (float [2]), plus one data set.
  TestCase Write(const std::string& name, const std::string& op, const ir::Tensor& in, const ir::Tensor& out,
                 int num_inputs = 1) {
    const fs::path dir = root_ / "suite" / name;
    fs::create_directories(dir / "test_data_set_0");
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    onnx::GraphProto* g = m.mutable_graph();
    g->set_name("g");
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->add_input("x");
    n->add_output("y");
    for (const char* io : {"x", "y"}) {
      onnx::ValueInfoProto* v = std::string(io) == "x" ? g->add_input() : g->add_output();
      v->set_name(io);
      auto* tt = v->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(onnx::TensorProto::FLOAT);
      tt->mutable_shape()->add_dim()->set_dim_value(2);
    }
    std::ofstream(dir / "model.onnx", std::ios::binary) << m.SerializeAsString();
    for (int i = 0; i < num_inputs; ++i) {
      EXPECT_TRUE(
          importer::WriteTensorFile(in, (dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb"))).ok());
    }
    EXPECT_TRUE(importer::WriteTensorFile(out, (dir / "test_data_set_0" / "output_0.pb")).ok());
    return {"suite", name, dir.string()};
  }

  fs::path root_;
};

TEST_F(SuiteTest, MatchingOutputPasses) {
  TestResult r = RunTest(Write("test_id", "Identity", Floats({1, 2}, {2}), Floats({1, 2}, {2})), {});
  EXPECT_EQ(r.outcome, Outcome::kPassed) << r.reason;
  EXPECT_EQ(r.ops, std::vector<std::string>{"Identity"});
}

TEST_F(SuiteTest, WrongOutputFailsNamingTheProducer) {
  TestResult r = RunTest(Write("test_id_bad", "Identity", Floats({1, 2}, {2}), Floats({1, 3}, {2})), {});
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(r.culprit, "Identity");
  EXPECT_NE(r.reason.find("output 0 'y' (from Identity)"), std::string::npos) << r.reason;
}

TEST_F(SuiteTest, OpOutsideTheScopeIsUnsupported) {
  TestResult r = RunTest(Write("test_det", "Det", Floats({1, 2}, {2}), Floats({0, 1}, {2})), {});
  EXPECT_EQ(r.outcome, Outcome::kUnsupported) << r.reason;
  EXPECT_EQ(r.out_of_scope, std::vector<std::string>{"Det"});
  EXPECT_NE(r.reason.find("uses Det"), std::string::npos) << r.reason;
}

TEST_F(SuiteTest, TooManyInputFilesFails) {
  TestResult r = RunTest(Write("test_two", "Identity", Floats({1, 2}, {2}), Floats({1, 2}, {2}), 2), {});
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_NE(r.reason.find("2 input files but the model has 1 inputs"), std::string::npos) << r.reason;
}

TEST_F(SuiteTest, FindTestsTakesAFolderWithoutSuitesAsOneSuite) {
  Write("test_b", "Identity", Floats({1, 2}, {2}), Floats({1, 2}, {2}));
  Write("test_a", "Identity", Floats({1, 2}, {2}), Floats({1, 2}, {2}));
  std::vector<TestCase> tests = FindTests((root_ / "suite").string(), {"node"});
  ASSERT_EQ(tests.size(), 2u);
  EXPECT_EQ(tests[0].id(), "suite/test_a");
  tests = FindTests(root_.string(), {"suite", "missing"});
  ASSERT_EQ(tests.size(), 2u);
  EXPECT_EQ(tests[1].id(), "suite/test_b");
}

// ------------------------------------------------------------------ --isolate: children and workers

// The results of running `tests` with RunIsolated, in order.
std::vector<TestResult> Isolated(const std::vector<TestCase>& tests, const RunOptions& options,
                                 const IsolateOptions& isolate) {
  std::vector<TestResult> results(tests.size());
  std::vector<int> calls(tests.size(), 0);
  RunIsolated(tests, options, isolate, [&](size_t i, const TestResult& r) {
    results.at(i) = r;
    ++calls.at(i);
  });
  for (size_t i = 0; i < tests.size(); ++i) EXPECT_EQ(calls[i], 1) << tests[i].id();
  return results;
}

std::string SelfPath() { return fs::read_symlink("/proc/self/exe").string(); }

class IsolateTest : public SuiteTest {
 protected:
  // pass, mismatch, unsupported, bad input count, and a missing model.
  std::vector<TestCase> Mixed() {
    std::vector<TestCase> tests = {
        Write("test_id", "Identity", Floats({1, 2}, {2}), Floats({1, 2}, {2})),
        Write("test_id_bad", "Identity", Floats({1, 2}, {2}), Floats({1, 3}, {2})),
        Write("test_det", "Det", Floats({1, 2}, {2}), Floats({0, 1}, {2})),
        Write("test_two", "Identity", Floats({1, 2}, {2}), Floats({1, 2}, {2}), 2),
    };
    tests.push_back({"suite", "test_missing", (root_ / "suite" / "test_missing").string()});
    return tests;
  }
};

void ExpectSameResults(const std::vector<TestResult>& a, const std::vector<TestResult>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].outcome, b[i].outcome) << i;
    EXPECT_EQ(a[i].reason, b[i].reason) << i;
    EXPECT_EQ(a[i].ops, b[i].ops) << i;
    EXPECT_EQ(a[i].out_of_scope, b[i].out_of_scope) << i;
    EXPECT_EQ(a[i].culprit, b[i].culprit) << i;
    EXPECT_EQ(a[i].cpu_nodes, b[i].cpu_nodes) << i;
  }
}

TEST_F(IsolateTest, ForkedChildrenGiveTheInProcessResults) {
  const std::vector<TestCase> tests = Mixed();
  std::vector<TestResult> in_process;
  for (const TestCase& t : tests) in_process.push_back(RunTest(t, {}));
  IsolateOptions isolate;
  isolate.jobs = 2;
  ExpectSameResults(Isolated(tests, {}, isolate), in_process);
  EXPECT_EQ(in_process[0].outcome, Outcome::kPassed) << in_process[0].reason;
}

TEST_F(IsolateTest, WorkersGiveTheForkedResults) {
  const std::vector<TestCase> tests = Mixed();
  IsolateOptions isolate;
  isolate.jobs = 2;
  const std::vector<TestResult> forked = Isolated(tests, {}, isolate);
  isolate.worker_program = ONNXAMP_CONFORMANCE_PROGRAM;
  int ticks = 0;
  isolate.tick = [&ticks] { ++ticks; };
  for (int jobs : {1, 2, 8}) {
    isolate.jobs = jobs;
    ExpectSameResults(Isolated(tests, {}, isolate), forked);
  }
  EXPECT_GT(ticks, 0);
}

TEST_F(IsolateTest, ACrashedOrHungWorkerFailsItsTestAndIsReplaced) {
  std::vector<TestCase> tests = {
      Write("test_a", "Identity", Floats({1, 2}, {2}), Floats({1, 2}, {2})),
      Write("test_crash", "Identity", Floats({1, 2}, {2}), Floats({1, 2}, {2})),
      Write("test_b", "Identity", Floats({1, 2}, {2}), Floats({1, 2}, {2})),
      Write("test_hang", "Identity", Floats({1, 2}, {2}), Floats({1, 2}, {2})),
      Write("test_c", "Identity", Floats({1, 2}, {2}), Floats({1, 2}, {2})),
  };
  IsolateOptions isolate;
  isolate.jobs = 1;
  isolate.timeout_seconds = 3;
  isolate.worker_program = SelfPath();  // this binary with --worker: see main()
  const std::vector<TestResult> r = Isolated(tests, {}, isolate);
  for (size_t i : {0, 2, 4}) EXPECT_EQ(r[i].outcome, Outcome::kPassed) << tests[i].id() << ": " << r[i].reason;
  EXPECT_EQ(r[1].outcome, Outcome::kFailed);
  EXPECT_EQ(r[1].reason, StrCat("crashed: signal ", SIGSEGV, " (", strsignal(SIGSEGV), ")"));
  EXPECT_EQ(r[1].ops, std::vector<std::string>{"Identity"});  // described by the parent
  EXPECT_EQ(r[3].outcome, Outcome::kFailed);
  EXPECT_EQ(r[3].reason, "timed out after 3 s (killed)");
  EXPECT_GE(r[3].seconds, 3.0);
  EXPECT_LT(r[3].seconds, 30.0);
}

TEST_F(IsolateTest, AWorkerThatCannotStartFailsEveryTest) {
  const std::vector<TestCase> tests = Mixed();
  IsolateOptions isolate;
  isolate.jobs = 2;
  isolate.worker_program = (root_ / "no_such_program").string();
  for (const TestResult& r : Isolated(tests, {}, isolate)) {
    EXPECT_EQ(r.outcome, Outcome::kFailed);
    EXPECT_NE(r.reason.find("cannot start the worker process"), std::string::npos) << r.reason;
  }
}

TEST(WorkerArgumentsTest, NameTheRunOptions) {
  RunOptions options;
  options.device = exec::Device::kCuda;
  options.device_index = 1;
  options.session_threads = 3;
  EXPECT_EQ(WorkerArguments(options), (std::vector<std::string>{"--worker", "--device", "cuda", "--device-index", "1",
                                                                "--session-threads", "3"}));
}

#ifdef ONNXAMP_WITH_CUDA
// --isolate --device cuda: the parent never initialises CUDA, and its workers do try the device. Without a GPU every
// result says there is no CUDA device; with one, the tests pass.
TEST_F(IsolateTest, CudaWorkersLeaveTheParentWithoutCuda) {
  std::vector<TestCase> tests = {
      Write("test_a", "Identity", Floats({1, 2}, {2}), Floats({1, 2}, {2})),
      Write("test_b", "Identity", Floats({3, 4}, {2}), Floats({3, 4}, {2})),
      Write("test_c", "Identity", Floats({5, 6}, {2}), Floats({5, 6}, {2})),
  };
  ASSERT_FALSE(cuda::CudaRuntimeUsed()) << "this test process used CUDA before the test";
  RunOptions options;
  options.device = exec::Device::kCuda;
  IsolateOptions isolate;
  isolate.jobs = 2;
  isolate.worker_program = ONNXAMP_CONFORMANCE_PROGRAM;
  const std::vector<TestResult> results = Isolated(tests, options, isolate);
  EXPECT_FALSE(cuda::CudaRuntimeUsed()) << "RunIsolated initialised CUDA in the parent";
  const bool passed = results[0].outcome == Outcome::kPassed;
  for (size_t i = 0; i < results.size(); ++i) {
    if (passed) {
      EXPECT_EQ(results[i].outcome, Outcome::kPassed) << tests[i].id() << ": " << results[i].reason;
      EXPECT_EQ(results[i].cpu_nodes, 0) << tests[i].id();
    } else {
      EXPECT_EQ(results[i].outcome, Outcome::kFailed) << tests[i].id();
      EXPECT_NE(results[i].reason.find("no CUDA device"), std::string::npos)
          << tests[i].id() << ": " << results[i].reason;
    }
  }
}

// The control: PrepareDevice(kCuda) does set the flag (in a forked child, to leave this process clean).
TEST(CudaRuntimeUsedTest, PrepareDeviceSetsIt) {
  ASSERT_FALSE(cuda::CudaRuntimeUsed());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    (void)PrepareDevice(exec::Device::kCuda);
    _exit(cuda::CudaRuntimeUsed() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "PrepareDevice(kCuda) did not set CudaRuntimeUsed()";
  EXPECT_FALSE(cuda::CudaRuntimeUsed());
}
#endif  // ONNXAMP_WITH_CUDA

TEST(RunTestError, MissingModelDoesNotThrow) {
  TestResult r = RunTest({"s", "t", "/nonexistent/onnxamp_conformance"}, {});
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_FALSE(r.reason.empty());
}

// The worker of ACrashedOrHungWorkerFailsItsTestAndIsReplaced: runs tests on the CPU, but dies from SIGSEGV on a
// test named *crash* and sleeps on one named *hang*.
int FaultyWorker() {
  const rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  return ServeTests([](const TestCase& test) {
    if (test.name.find("crash") != std::string::npos) {
      signal(SIGSEGV, SIG_DFL);
      raise(SIGSEGV);
    }
    if (test.name.find("hang") != std::string::npos) sleep(600);
    return RunTest(test, {});
  });
}

}  // namespace
}  // namespace onnxamp::conformance

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--worker") return onnxamp::conformance::FaultyWorker();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
