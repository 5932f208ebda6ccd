// ONNX test-data folders as data: DIR/test_data_set_*/input_N.pb and output_N.pb, concatenated in set order, named by
// TensorProto name or by model input/output position; errors name the set and the file.
#include "trainer/data/test_data_sets.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "importer/tensor_file.h"
#include "runtime/common/file_util.h"

namespace onnxamp::trainer {
namespace {

namespace fs = std::filesystem;

// rows x 2 floats starting at `first`, counting up.
ir::Tensor Floats(const std::string& name, int64_t rows, float first) {
  ir::Tensor t(DType::kFloat32, {rows, 2});
  for (float& v : t.mutable_values<float>()) v = first++;
  t.set_name(name);
  return t;
}

ir::Tensor Int64s(const std::string& name, std::vector<int64_t> v) {
  ir::Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.mutable_values<int64_t>().begin());
  t.set_name(name);
  return t;
}

class TestDataSets : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "onnxamp_test_sets_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& set, const std::string& file, const ir::Tensor& t) {
    fs::create_directories(dir_ / set);
    const std::string path = (dir_ / set / file).string();
    EXPECT_TRUE(importer::WriteTensorFile(t, path).ok());
    return path;
  }
  std::string Dir() const { return dir_.string(); }

  fs::path dir_;
};

TEST_F(TestDataSets, ConcatenatesSetsInNumericOrderAndNamesArrays) {
  // Sets 0, 1 and 10 (10 sorts after 1 and 2 numerically, not by name), one row, two rows, one row.
  Write("test_data_set_0", "input_0.pb", Floats("x", 1, 0));
  Write("test_data_set_0", "input_1.pb", Floats("", 1, 100));  // unnamed: the model's 2nd data input
  Write("test_data_set_0", "output_0.pb", Int64s("whatever", {7}));
  Write("test_data_set_10", "input_0.pb", Floats("x", 1, 20));
  Write("test_data_set_10", "input_1.pb", Floats("", 1, 120));
  Write("test_data_set_10", "output_0.pb", Int64s("whatever", {9}));
  Write("test_data_set_2", "input_0.pb", Floats("x", 2, 10));
  Write("test_data_set_2", "input_1.pb", Floats("", 2, 110));
  Write("test_data_set_2", "output_0.pb", Int64s("whatever", {8, 8}));
  ASSERT_TRUE(WriteFileAtomic((dir_ / "README.txt").string(), "not a set").ok());
  EXPECT_TRUE(IsTestDataFolder(Dir()));

  StatusOr<Dataset> d = LoadTestDataSets(Dir(), {"x", "mask"}, {"logits"});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->source(), Dir());
  EXPECT_EQ(d->num_samples(), 4);
  EXPECT_EQ(d->NamesList(), "x, mask, logits");
  auto values = [](const ir::Tensor& t) {
    std::span<const float> v = t.values<float>();
    return std::vector<float>(v.begin(), v.end());
  };
  EXPECT_EQ(values(*d->Find("x")), (std::vector<float>{0, 1, 10, 11, 12, 13, 20, 21}));
  EXPECT_EQ(values(*d->Find("mask")), (std::vector<float>{100, 101, 110, 111, 112, 113, 120, 121}));
  std::span<const int64_t> labels = d->Find("logits")->values<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(labels.begin(), labels.end()), (std::vector<int64_t>{7, 8, 8, 9}));
}

TEST_F(TestDataSets, ErrorsNameTheSetAndFile) {
  EXPECT_FALSE(IsTestDataFolder(Dir()));
  StatusOr<Dataset> d = LoadTestDataSets(Dir(), {"x"}, {"y"});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), Dir() + ": no test_data_set_* folders");

  Write("test_data_set_0", "input_0.pb", Floats("x", 1, 0));
  Write("test_data_set_1", "input_0.pb", Floats("x", 1, 0));
  const std::string extra = Write("test_data_set_1", "output_0.pb", Int64s("y", {1}));
  d = LoadTestDataSets(Dir(), {"x"}, {"y"});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(),
            (dir_ / "test_data_set_1").string() + ": 2 input/output files where test_data_set_0 has 1");
  fs::remove(extra);

  // A different per-sample shape in a later set.
  const std::string wide = Write("test_data_set_1", "input_0.pb", ir::Tensor(DType::kFloat32, {1, 3}));
  d = LoadTestDataSets(Dir(), {"x"}, {"y"});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), wide +
                                      ": array 'x' (float, per-sample shape [3]) does not match 'x' (float, [2]) in " +
                                      (dir_ / "test_data_set_0" / "input_0.pb").string());

  // An input file beyond the model's data inputs, unnamed.
  Write("test_data_set_1", "input_0.pb", Floats("x", 1, 0));
  Write("test_data_set_0", "input_1.pb", Floats("", 1, 0));
  Write("test_data_set_1", "input_1.pb", Floats("", 1, 0));
  d = LoadTestDataSets(Dir(), {"x"}, {"y"});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), (dir_ / "test_data_set_0" / "input_1.pb").string() +
                                      ": the model has 1 data inputs, so this file has no input to name it after");

  // A set with different files.
  fs::remove(dir_ / "test_data_set_0" / "input_1.pb");
  fs::remove(dir_ / "test_data_set_1" / "input_1.pb");
  Write("test_data_set_1", "input_2.pb", Floats("z", 1, 0));
  Write("test_data_set_0", "input_1.pb", Floats("z", 1, 0));
  d = LoadTestDataSets(Dir(), {"x", "z"}, {"y"});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), (dir_ / "test_data_set_1" / "input_2.pb").string() +
                                      ": test_data_set_0 has input_1.pb here; every set must hold the same files");

  // A set with no inputs, and a file that is not a TensorProto.
  fs::remove_all(dir_ / "test_data_set_1");
  fs::create_directories(dir_ / "test_data_set_1");
  d = LoadTestDataSets(Dir(), {"x", "z"}, {"y"});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), (dir_ / "test_data_set_1").string() + ": no input_N.pb files");
  const std::string junk = (dir_ / "test_data_set_1" / "input_0.pb").string();
  ASSERT_TRUE(WriteFileAtomic(junk, "\xff\xff\xff").ok());
  Write("test_data_set_1", "input_1.pb", Floats("z", 1, 0));
  d = LoadTestDataSets(Dir(), {"x", "z"}, {"y"});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message().rfind(junk + ": ", 0), 0u) << d.status().message();
}

}  // namespace
}  // namespace onnxamp::trainer
