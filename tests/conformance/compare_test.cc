// Tests of the conformance runner: comparison rules, the expected-failures list, and runs over a tiny suite
// written by the test (pass, mismatch, out-of-scope op, bad input count).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "importer/tensor_file.h"
#include "runtime/common/half.h"
#include "tests/conformance/compare.h"
#include "tests/conformance/expected.h"
#include "tests/conformance/runner.h"

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
  TestResult r = RunTest(Write("test_hardmax", "Hardmax", Floats({1, 2}, {2}), Floats({0, 1}, {2})), {});
  EXPECT_EQ(r.outcome, Outcome::kUnsupported) << r.reason;
  EXPECT_EQ(r.out_of_scope, std::vector<std::string>{"Hardmax"});
  EXPECT_NE(r.reason.find("uses Hardmax"), std::string::npos) << r.reason;
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

TEST(RunTestError, MissingModelDoesNotThrow) {
  TestResult r = RunTest({"s", "t", "/nonexistent/onnxamp_conformance"}, {});
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_FALSE(r.reason.empty());
}

}  // namespace
}  // namespace onnxamp::conformance
