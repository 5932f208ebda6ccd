// Datasets: loading .npz/.npy, binding arrays to model inputs and labels, every error message, splits and batches.
#include "trainer/data/dataset.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "importer/tensor_file.h"
#include "runtime/common/file_util.h"
#include "trainer/checkpoint/checkpoint.h"

namespace onnxamp::trainer {
namespace {

namespace fs = std::filesystem;

template <typename T>
ir::Tensor MakeTensor(const std::string& name, DType dtype, std::vector<int64_t> dims, const std::vector<T>& values) {
  StatusOr<ir::Tensor> t = ir::Tensor::FromBytes(
      dtype, std::move(dims),
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(values.data()), values.size() * sizeof(T)));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  t->set_name(name);
  return std::move(t).value();
}

// n x cols floats with value 10 * row + col.
ir::Tensor Floats(const std::string& name, int64_t n, int64_t cols) {
  std::vector<float> v;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < cols; ++c) v.push_back(static_cast<float>(10 * r + c));
  }
  return MakeTensor(name, DType::kFloat32, {n, cols}, v);
}

ir::Tensor Int64s(const std::string& name, std::vector<int64_t> v) {
  const auto n = static_cast<int64_t>(v.size());
  return MakeTensor(name, DType::kInt64, {n}, v);
}

template <typename T>
std::vector<T> Values(const ir::Tensor& t) {
  std::span<const T> v = t.values<T>();
  return std::vector<T>(v.begin(), v.end());
}

// Every sample of `d` gathered (through a view's rows): its arrays as a model would be fed them.
std::vector<ir::Tensor> Gathered(const Dataset& d) {
  std::vector<int64_t> all(static_cast<size_t>(d.num_samples()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  StatusOr<std::vector<ir::Tensor>> batch = MakeBatch(d, all);
  EXPECT_TRUE(batch.ok()) << batch.status().ToString();
  return batch.ok() ? std::move(batch).value() : std::vector<ir::Tensor>{};
}

// A float input of shape [batch, cols].
ModelInput FloatInput(const std::string& name, int64_t cols) {
  return ModelInput{name,
                    ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("batch"), ir::Dim::Value(cols)})};
}

BindOptions WithLabels(const std::string& labels, LabelKind kind = LabelKind::kClassIndices, int64_t num_classes = 0) {
  BindOptions o;
  o.labels.array = labels;
  o.labels.kind = kind;
  o.labels.num_classes = num_classes;
  return o;
}

class DataDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "onnxamp_data_dataset_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Npz(const std::string& name, const std::vector<ir::Tensor>& arrays) const {
    const std::string path = (dir_ / name).string();
    Status s = importer::WriteNpz(arrays, path);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return path;
  }
  Dataset Load(const std::string& path) const {
    StatusOr<Dataset> d = Dataset::Load(path);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? std::move(d).value() : Dataset();
  }
  // The message of a load that must fail.
  std::string LoadError(const std::string& path) const {
    StatusOr<Dataset> d = Dataset::Load(path);
    EXPECT_FALSE(d.ok());
    return d.status().message();
  }
  static std::string BindError(const Dataset& d, const std::vector<ModelInput>& inputs, const BindOptions& options) {
    StatusOr<Dataset> b = d.Bind(inputs, options);
    EXPECT_FALSE(b.ok());
    return b.status().message();
  }

  fs::path dir_;
};

TEST_F(DataDatasetTest, LoadsNpzAndBindsByName) {
  const std::string path = Npz("train.npz", {Floats("extra", 4, 2), Int64s("y", {0, 1, 2, 1}), Floats("x", 4, 3)});
  Dataset d = Load(path);
  EXPECT_EQ(d.source(), path);
  EXPECT_EQ(d.num_samples(), 4);
  EXPECT_EQ(d.NamesList(), "extra, y, x");
  StatusOr<Dataset> bound = d.Bind({FloatInput("x", 3)}, WithLabels("y", LabelKind::kClassIndices, 3));
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  EXPECT_EQ(bound->NamesList(), "x, y");
  EXPECT_EQ(bound->num_features(), 1u);
  ASSERT_NE(bound->labels(), nullptr);
  EXPECT_EQ(bound->labels()->name(), "y");
  EXPECT_EQ(bound->num_samples(), 4);
  EXPECT_TRUE(bound->arrays()[0].SameContents(*d.Find("x")));
  EXPECT_EQ(bound->arrays()[0].data(), d.Find("x")->data());  // shares the bytes

  // Without labels: only the features.
  StatusOr<Dataset> unlabeled = d.Bind({FloatInput("x", 3)}, BindOptions{});
  ASSERT_TRUE(unlabeled.ok());
  EXPECT_EQ(unlabeled->labels(), nullptr);
  EXPECT_EQ(unlabeled->num_features(), 1u);
}

TEST_F(DataDatasetTest, InputMapOverridesAndRenames) {
  Dataset d = Load(Npz("train.npz", {Floats("x", 3, 2), Floats("features", 3, 2), Int64s("target", {1, 0, 1})}));
  BindOptions o = WithLabels("target");
  StatusOr<std::vector<std::pair<std::string, std::string>>> map = ParseInputMap({"input_0=features"});
  ASSERT_TRUE(map.ok());
  o.input_map = *map;
  StatusOr<Dataset> bound = d.Bind({FloatInput("input_0", 2), FloatInput("x", 2)}, o);
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  EXPECT_EQ(bound->NamesList(), "input_0, x, target");
  EXPECT_TRUE(bound->arrays()[0].SameContents(*d.Find("features")));
  EXPECT_TRUE(bound->arrays()[1].SameContents(*d.Find("x")));
  EXPECT_EQ(bound->num_features(), 2u);
}

TEST_F(DataDatasetTest, LoadsNpy) {
  const std::string path = (dir_ / "feat.npy").string();
  ASSERT_TRUE(importer::WriteTensorFile(Floats("", 5, 2), path).ok());
  Dataset d = Load(path);
  EXPECT_EQ(d.NamesList(), "feat");
  EXPECT_EQ(d.num_samples(), 5);
}

TEST_F(DataDatasetTest, ParseInputMap) {
  StatusOr<std::vector<std::pair<std::string, std::string>>> ok = ParseInputMap({"a=b", "c=d=e"});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (std::vector<std::pair<std::string, std::string>>{{"a", "b"}, {"c", "d=e"}}));
  EXPECT_EQ(ParseInputMap({"ab"}).status().message(), "--input-map 'ab': expected NAME=ARRAY");
  EXPECT_EQ(ParseInputMap({"=b"}).status().message(), "--input-map '=b': expected NAME=ARRAY");
  EXPECT_EQ(ParseInputMap({"a="}).status().message(), "--input-map 'a=': expected NAME=ARRAY");
  EXPECT_EQ(ParseInputMap({"a=b", "a=c"}).status().message(), "--input-map: model input 'a' is mapped twice");
}

// A model with one input and data with one array besides the labels (a CSV's 'features'): that array feeds the
// input, whatever its name. Two candidates, or a model of two inputs, still need names.
TEST_F(DataDatasetTest, TheOneInputReadsTheOnlyArrayBesidesTheLabels) {
  const std::string path = Npz("one.npz", {Floats("feat", 2, 3), Int64s("cls", {0, 1})});
  Dataset d = Load(path);
  StatusOr<Dataset> bound = d.Bind({FloatInput("x", 3)}, WithLabels("cls"));
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  EXPECT_EQ(bound->NamesList(), "x, cls");
  EXPECT_EQ(bound->arrays()[0].data(), d.Find("feat")->data());
  // Its shape is still checked against the input's.
  EXPECT_NE(BindError(d, {FloatInput("x", 4)}, WithLabels("cls")).find("array 'feat'"), std::string::npos);
  // Without labels both arrays are candidates; with two inputs nothing is guessed.
  EXPECT_NE(BindError(d, {FloatInput("x", 3)}, BindOptions{}).find("no array 'x'"), std::string::npos);
  EXPECT_NE(BindError(d, {FloatInput("x", 3), FloatInput("w", 3)}, WithLabels("cls")).find("no array 'x'"),
            std::string::npos);
  Dataset two = Load(Npz("two.npz", {Floats("a", 2, 3), Floats("b", 2, 3), Int64s("cls", {0, 1})}));
  EXPECT_NE(BindError(two, {FloatInput("x", 3)}, WithLabels("cls")).find("no array 'x'"), std::string::npos);
}

TEST_F(DataDatasetTest, MissingArrays) {
  const std::string path = Npz("train.npz", {Floats("feat", 2, 3), Int64s("cls", {0, 1})});
  Dataset d = Load(path);
  EXPECT_EQ(BindError(d, {FloatInput("x", 3)}, BindOptions{}),
            path + ": no array 'x' for model input 'x' (available: feat, cls; map another with --input-map x=ARRAY)");
  BindOptions mapped;
  mapped.input_map = {{"x", "features"}};
  EXPECT_EQ(BindError(d, {FloatInput("x", 3)}, mapped),
            path + ": no array 'features' for model input 'x' (mapped by --input-map; available: feat, cls)");
  BindOptions labels = WithLabels("y");
  labels.input_map = {{"x", "feat"}};
  EXPECT_EQ(BindError(d, {FloatInput("x", 3)}, labels), path + ": no labels array 'y' (available: feat, cls)");
  BindOptions unknown;
  unknown.input_map = {{"z", "feat"}};
  EXPECT_EQ(BindError(d, {FloatInput("x", 3), FloatInput("w", 3)}, unknown),
            "--input-map z=feat: the model has no input 'z' (inputs: x, w)");
}

TEST_F(DataDatasetTest, LoadErrors) {
  const std::string differ = Npz("differ.npz", {Floats("x", 4, 3), Int64s("y", {0, 1, 2})});
  EXPECT_EQ(LoadError(differ), differ + ": arrays disagree on the number of samples (first dim): 'x' has 4, 'y' has 3");

  const std::string empty = (dir_ / "empty.npz").string();
  ASSERT_TRUE(WriteFileAtomic(empty, std::string("PK\x05\x06", 4) + std::string(18, '\0')).ok());
  EXPECT_EQ(LoadError(empty), empty + ": no arrays");

  const std::string zero = Npz("zero.npz", {Floats("x", 0, 3), Int64s("y", {})});
  EXPECT_EQ(LoadError(zero), zero + ": 0 samples (every array's first dim is 0)");

  const std::string scalar = Npz("scalar.npz", {Floats("x", 2, 3), MakeTensor<float>("s", DType::kFloat32, {}, {1.f})});
  EXPECT_EQ(LoadError(scalar), scalar + ": array 's' is a scalar; every array needs a first dimension of samples");

  EXPECT_FALSE(Dataset::Load((dir_ / "missing.npz").string()).ok());
  EXPECT_EQ(Dataset::FromTensors({}, "mem").status().message(), "mem: no arrays");
  EXPECT_EQ(Dataset::FromTensors({Floats("a", 2, 1), Floats("a", 2, 1)}, "mem").status().message(),
            "mem: two arrays are named 'a'");
}

TEST_F(DataDatasetTest, NonFiniteFeaturesAreRefusedUnlessAllowed) {
  ir::Tensor x = Floats("x", 4, 3);
  x.mutable_values<float>()[7] = std::numeric_limits<float>::quiet_NaN();  // row 2
  std::vector<uint16_t> half_bits(8, 0x3c00);                              // 1.0
  half_bits[3] = 0xfc00;                                                   // -inf in row 1
  ir::Tensor h = MakeTensor("h", DType::kFloat16, {4, 2}, half_bits);
  const std::string path = Npz("bad.npz", {x, h});
  Dataset d = Load(path);
  EXPECT_EQ(BindError(d, {FloatInput("x", 3)}, BindOptions{}),
            path + ": array 'x' for model input 'x' has nan at row 2 (non-finite values are refused unless allowed)");
  const ModelInput half_input{"in", ir::ValueType::Tensor(DType::kFloat16)};
  BindOptions mapped;
  mapped.input_map = {{"in", "h"}};
  EXPECT_EQ(BindError(d, {half_input}, mapped),
            path + ": array 'h' for model input 'in' has -inf at row 1 (non-finite values are refused unless allowed)");
  BindOptions allow;
  allow.allow_non_finite = true;
  EXPECT_TRUE(d.Bind({FloatInput("x", 3)}, allow).ok());

  // Float targets are checked the same way.
  const std::string targets =
      Npz("targets.npz", {Floats("x", 3, 1), MakeTensor<float>("t", DType::kFloat32, {3}, {0.f, 1.f, INFINITY})});
  EXPECT_EQ(BindError(Load(targets), {FloatInput("x", 1)}, WithLabels("t", LabelKind::kFloatTargets)),
            targets + ": labels array 't' has inf at row 2 (non-finite values are refused unless allowed)");
}

TEST_F(DataDatasetTest, LabelDtypes) {
  const std::string path = Npz("train.npz", {Floats("x", 3, 1), Floats("fy", 3, 1), Int64s("iy", {0, 1, 2})});
  Dataset d = Load(path);
  EXPECT_EQ(BindError(d, {FloatInput("x", 1)}, WithLabels("fy", LabelKind::kClassIndices)),
            path + ": labels array 'fy' has dtype float, expected integer class indices");
  EXPECT_EQ(BindError(d, {FloatInput("x", 1)}, WithLabels("iy", LabelKind::kFloatTargets)),
            path + ": labels array 'iy' has dtype int64, expected floating-point targets");
  EXPECT_TRUE(d.Bind({FloatInput("x", 1)}, WithLabels("fy", LabelKind::kFloatTargets)).ok());
  EXPECT_TRUE(d.Bind({FloatInput("x", 1)}, WithLabels("iy", LabelKind::kClassIndices, 3)).ok());
}

// Labels come out as the training graph reads them: class indices of any integer type as int64, targets of any float
// type as float32 (float64 beyond float32's range refused), per-sample shapes that differ from the loss's in size-1
// dims only viewed in its shape ([N, 1] for [N]), other shapes left as they are.
TEST_F(DataDatasetTest, LabelsTakeTheLossTypeAndShape) {
  const std::string path =
      Npz("train.npz", {Floats("x", 3, 1), MakeTensor<int32_t>("i32", DType::kInt32, {3, 1}, {2, 0, 1}),
                        MakeTensor<uint8_t>("u8", DType::kUint8, {3}, {1, 2, 0}),
                        MakeTensor<double>("f64", DType::kFloat64, {3}, {0.5, -1.25, 3}),
                        MakeTensor<double>("big", DType::kFloat64, {3}, {0.5, 1e300, 3}),
                        MakeTensor<int64_t>("pairs", DType::kInt64, {3, 2}, {0, 1, 1, 0, 2, 2})});
  Dataset d = Load(path);
  BindOptions o = WithLabels("i32", LabelKind::kClassIndices, 3);
  o.labels.sample_dims = std::vector<int64_t>{};
  StatusOr<Dataset> b = d.Bind({FloatInput("x", 1)}, o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_NE(b->labels(), nullptr);
  EXPECT_EQ(b->labels()->dtype(), DType::kInt64);
  EXPECT_EQ(b->labels()->dims(), (std::vector<int64_t>{3}));
  EXPECT_EQ(b->labels()->name(), "i32");
  StatusOr<std::vector<ir::Tensor>> batch = MakeBatch(*b, {2, 0});
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_EQ(batch->size(), 2u);
  EXPECT_EQ(Values<int64_t>((*batch)[1]), (std::vector<int64_t>{1, 2}));
  o.labels.array = "u8";
  b = d.Bind({FloatInput("x", 1)}, o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(Values<int64_t>(*b->labels()), (std::vector<int64_t>{1, 2, 0}));
  // Another element count is left to the loss (a declared shape can be wrong): bound as it is.
  o.labels.array = "pairs";
  b = d.Bind({FloatInput("x", 1)}, o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->labels()->dims(), (std::vector<int64_t>{3, 2}));

  BindOptions t = WithLabels("f64", LabelKind::kFloatTargets);
  t.labels.sample_dims = std::vector<int64_t>{1};  // an output [N, 1] and targets [N]
  b = d.Bind({FloatInput("x", 1)}, t);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->labels()->dtype(), DType::kFloat32);
  EXPECT_EQ(b->labels()->dims(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(Values<float>(*b->labels()), (std::vector<float>{0.5f, -1.25f, 3.0f}));
  t.labels.array = "big";
  EXPECT_EQ(BindError(d, {FloatInput("x", 1)}, t),
            path + ": labels array 'big' has a value beyond float32's range (inf as float32) at row 1");
  t.allow_non_finite = true;
  EXPECT_TRUE(d.Bind({FloatInput("x", 1)}, t).ok());
}

TEST_F(DataDatasetTest, LabelRange) {
  const std::string path =
      Npz("train.npz", {Floats("x", 4, 1), Int64s("y", {0, -100, 7, 1}),
                        MakeTensor<int32_t>("seg", DType::kInt32, {4, 2}, {0, 1, 1, 0, 2, 2, 5, 1})});
  Dataset d = Load(path);
  BindOptions o = WithLabels("y", LabelKind::kClassIndices, 5);
  EXPECT_EQ(BindError(d, {FloatInput("x", 1)}, o), path + ": labels array 'y' has -100 at row 1, outside [0, 5)");
  o.labels.ignore_index = -100;
  EXPECT_EQ(BindError(d, {FloatInput("x", 1)}, o),
            path + ": labels array 'y' has 7 at row 2, outside [0, 5) and not the ignore_index -100");
  o.labels.num_classes = 8;
  EXPECT_TRUE(d.Bind({FloatInput("x", 1)}, o).ok());
  // Without num_classes only negative indices are caught.
  EXPECT_EQ(BindError(d, {FloatInput("x", 1)}, WithLabels("y")),
            path + ": labels array 'y' has -100 at row 1, a negative index");
  // Rows of multi-dim labels: element 6 is in row 3.
  EXPECT_EQ(BindError(d, {FloatInput("x", 1)}, WithLabels("seg", LabelKind::kClassIndices, 3)),
            path + ": labels array 'seg' has 5 at row 3, outside [0, 3)");
}

TEST_F(DataDatasetTest, ArraysMustFitModelInputs) {
  const std::string path = Npz(
      "train.npz", {MakeTensor<float>("x", DType::kFloat32, {2, 3, 5}, std::vector<float>(30)), Int64s("ids", {4, 5})});
  Dataset d = Load(path);
  using ir::Dim;
  auto input = [](DType t, ir::Shape shape) { return ModelInput{"x", ir::ValueType::Tensor(t, std::move(shape))}; };
  EXPECT_EQ(BindError(d, {input(DType::kFloat16, {})}, BindOptions{}),
            path + ": array 'x' for model input 'x' has dtype float, expected float16");
  EXPECT_EQ(BindError(d, {input(DType::kFloat32, {Dim::Param("N"), Dim::Value(15)})}, BindOptions{}),
            path + ": array 'x' (shape [2,3,5]) does not fit model input 'x' (shape [N,15]): rank 3, expected 2");
  EXPECT_EQ(BindError(d, {input(DType::kFloat32, {Dim::Param("N"), Dim::Value(3), Dim::Value(4)})}, BindOptions{}),
            path + ": array 'x' (shape [2,3,5]) does not fit model input 'x' (shape [N,3,4]): dim 2 is 5, expected 4");
  BindOptions ids;
  ids.input_map = {{"x", "ids"}};
  EXPECT_EQ(BindError(d, {input(DType::kFloat32, {})}, ids),
            path + ": array 'ids' for model input 'x' has dtype int64, expected float");
  // The batch dim, symbolic and unknown dims, an unknown shape and an unknown element type all fit.
  EXPECT_TRUE(d.Bind({input(DType::kFloat32, {Dim::Value(1), Dim::Param("c"), Dim::Value(5)})}, BindOptions{}).ok());
  EXPECT_TRUE(d.Bind({input(DType::kFloat32, {Dim::Unknown(), Dim::Value(3), Dim::Unknown()})}, BindOptions{}).ok());
  EXPECT_TRUE(d.Bind({ModelInput{"x", ir::ValueType::Tensor(DType::kFloat32)}}, BindOptions{}).ok());
  EXPECT_TRUE(d.Bind({ModelInput{"x", ir::ValueType::Tensor(DType::kUndefined)}}, BindOptions{}).ok());
  StatusOr<Dataset> seq =
      d.Bind({ModelInput{"x", ir::ValueType::Sequence(ir::ValueType::Tensor(DType::kFloat32))}}, {});
  ASSERT_FALSE(seq.ok());
  EXPECT_EQ(seq.status().message(),
            path + ": model input 'x' has type seq(tensor(float)[*]); only tensor inputs can be fed from a data file");
}

TEST_F(DataDatasetTest, SplitSizesAndDisjointness) {
  std::vector<int64_t> ids(100);
  for (int64_t i = 0; i < 100; ++i) ids[static_cast<size_t>(i)] = i;
  Dataset d = Load(Npz("train.npz", {Floats("x", 100, 2), Int64s("y", ids)}));
  StatusOr<Dataset> bound = d.Bind({FloatInput("x", 2)}, WithLabels("y", LabelKind::kClassIndices, 100));
  ASSERT_TRUE(bound.ok());
  StatusOr<std::pair<Dataset, Dataset>> split = bound->Split(0.2, 3);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  const auto& [train, val] = *split;
  EXPECT_EQ(train.num_samples(), 80);
  EXPECT_EQ(val.num_samples(), 20);
  ASSERT_NE(train.labels(), nullptr);
  ASSERT_NE(val.labels(), nullptr);
  const std::vector<int64_t> t = Values<int64_t>(Gathered(train).back());
  const std::vector<int64_t> v = Values<int64_t>(Gathered(val).back());
  EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));  // file order kept
  EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
  std::set<int64_t> all(t.begin(), t.end());
  all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), 100u);  // disjoint, and together every sample
  // Features travel with their labels: x row r is 10 * id + col.
  const std::vector<float> vx = Values<float>(Gathered(val)[0]);
  for (size_t r = 0; r < v.size(); ++r) EXPECT_EQ(vx[2 * r + 1], static_cast<float>(10 * v[r] + 1));
  // Deterministic in the seed.
  EXPECT_EQ(Values<int64_t>(Gathered(bound->Split(0.2, 3)->second).back()), v);
  EXPECT_NE(Values<int64_t>(Gathered(bound->Split(0.2, 4)->second).back()), v);
  EXPECT_EQ(d.Split(0.25, 0)->second.num_samples(), 25);

  EXPECT_EQ(d.Split(0.0, 1).status().message(),
            d.source() + ": validation fraction 0 must lie strictly between 0 and 1");
  EXPECT_EQ(d.Split(1.5, 1).status().message(),
            d.source() + ": validation fraction 1.5 must lie strictly between 0 and 1");
  EXPECT_EQ(d.Split(0.001, 1).status().message(),
            d.source() + ": a validation fraction of 0.001 of 100 samples leaves the validation set empty");
  EXPECT_EQ(d.Split(0.999, 1).status().message(),
            d.source() + ": a validation fraction of 0.999 of 100 samples leaves the training set empty");
}

// The parts of a split are views: they share the arrays' storage (nothing is copied), gather through their rows,
// hash for checkpoints as the rows gathered into arrays of their own would, check only their own rows when bound, and
// split again by composing the rows.
TEST_F(DataDatasetTest, SplitPartsAreViewsThatCopyNoArray) {
  std::vector<int64_t> ids(100);
  for (int64_t i = 0; i < 100; ++i) ids[static_cast<size_t>(i)] = i;
  ir::Tensor x = Floats("x", 100, 2);
  x.mutable_values<float>()[2 * 57 + 1] = std::numeric_limits<float>::quiet_NaN();  // row 57
  const std::string path = Npz("train.npz", {x, Int64s("y", ids)});
  Dataset d = Load(path);
  StatusOr<std::pair<Dataset, Dataset>> split = d.Split(0.2, 3);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  for (const Dataset* part : {&split->first, &split->second}) {
    ASSERT_EQ(part->arrays().size(), d.arrays().size());
    for (size_t k = 0; k < d.arrays().size(); ++k) {
      EXPECT_EQ(part->arrays()[k].buffer(), d.arrays()[k].buffer()) << "array " << k << " was copied";
    }
    EXPECT_EQ(part->rows().size(), static_cast<size_t>(part->num_samples()));
    EXPECT_TRUE(std::is_sorted(part->rows().begin(), part->rows().end()));
  }
  // Row 57 (a NaN) lies in one part only: binding that part names it, the other binds.
  const Dataset& with_nan =
      std::binary_search(split->first.rows().begin(), split->first.rows().end(), 57) ? split->first : split->second;
  const Dataset& without_nan = &with_nan == &split->first ? split->second : split->first;
  EXPECT_EQ(BindError(with_nan, {FloatInput("x", 2)}, WithLabels("y", LabelKind::kClassIndices, 100)),
            path + ": array 'x' for model input 'x' has nan at row 57 (non-finite values are refused unless allowed)");
  StatusOr<Dataset> bound = without_nan.Bind({FloatInput("x", 2)}, WithLabels("y", LabelKind::kClassIndices, 100));
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  EXPECT_EQ(bound->arrays()[0].buffer(), d.arrays()[0].buffer());
  EXPECT_EQ(std::vector<int64_t>(bound->rows().begin(), bound->rows().end()),
            std::vector<int64_t>(without_nan.rows().begin(), without_nan.rows().end()));

  // Sample i of a view is row rows()[i]; the same batches, and hash, as its rows gathered into a dataset of their own.
  const std::vector<int64_t> rows(bound->rows().begin(), bound->rows().end());
  StatusOr<std::vector<ir::Tensor>> batch = MakeBatch(*bound, {0, 5, 2});
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(Values<int64_t>((*batch)[1]), (std::vector<int64_t>{rows[0], rows[5], rows[2]}));
  EXPECT_EQ(Values<float>((*batch)[0])[2], static_cast<float>(10 * rows[5]));
  StatusOr<Dataset> copied = Dataset::FromTensors(Gathered(*bound), path);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  StatusOr<Dataset> copied_bound = copied->Bind({FloatInput("x", 2)}, WithLabels("y"));
  ASSERT_TRUE(copied_bound.ok()) << copied_bound.status().ToString();
  EXPECT_NE(copied_bound->arrays()[0].buffer(), d.arrays()[0].buffer());
  EXPECT_EQ(CheckpointDataHash(*bound), CheckpointDataHash(*copied_bound));
  EXPECT_NE(CheckpointDataHash(*bound), CheckpointDataHash(without_nan.Split(0.5, 1)->first));

  // A view of a view: rows of the base arrays, still no copy.
  StatusOr<std::pair<Dataset, Dataset>> again = bound->Split(0.25, 1);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->first.num_samples() + again->second.num_samples(), bound->num_samples());
  EXPECT_EQ(again->second.arrays()[0].buffer(), d.arrays()[0].buffer());
  std::vector<int64_t> all(again->first.rows().begin(), again->first.rows().end());
  all.insert(all.end(), again->second.rows().begin(), again->second.rows().end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, rows);
  EXPECT_EQ(Values<int64_t>(Gathered(again->second).back()),
            std::vector<int64_t>(again->second.rows().begin(), again->second.rows().end()));
}

TEST_F(DataDatasetTest, SeparateValidationFileMustBeCompatible) {
  const ModelInput any{"x", ir::ValueType::Tensor(DType::kFloat32)};
  Dataset train = *Load(Npz("train.npz", {Floats("x", 4, 3), Int64s("y", {0, 1, 0, 1})})).Bind({any}, WithLabels("y"));
  const std::string val_path = Npz("val.npz", {Floats("x", 2, 2), Int64s("y", {0, 1})});
  Dataset val = *Load(val_path).Bind({any}, WithLabels("y"));
  EXPECT_EQ(train.CheckCompatible(val).message(), val_path +
                                                      ": array 'x' has dtype float and per-sample shape [2], but in " +
                                                      train.source() + " it has float [3]");
  Dataset ok = *Load(Npz("val2.npz", {Floats("x", 2, 3), Int64s("y", {0, 1})})).Bind({any}, WithLabels("y"));
  EXPECT_TRUE(train.CheckCompatible(ok).ok());
  Dataset unlabeled = *Load(Npz("val3.npz", {Floats("x", 2, 3)})).Bind({any}, BindOptions{});
  EXPECT_EQ(train.CheckCompatible(unlabeled).message(),
            unlabeled.source() + ": arrays x do not match those of " + train.source() + ": x, y");
}

TEST_F(DataDatasetTest, MakeBatchGathersRows) {
  Dataset d = Load(Npz("train.npz", {Floats("feat", 5, 3), Int64s("y", {10, 11, 12, 13, 14})}));
  BindOptions o = WithLabels("y");
  o.input_map = {{"x", "feat"}};
  StatusOr<Dataset> bound = d.Bind({FloatInput("x", 3)}, o);
  ASSERT_TRUE(bound.ok());
  StatusOr<std::vector<ir::Tensor>> batch = MakeBatch(*bound, {3, 0, 1, 2, 2});
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_EQ(batch->size(), 2u);
  const ir::Tensor& x = (*batch)[0];
  const ir::Tensor& y = (*batch)[1];
  EXPECT_EQ(x.name(), "x");
  EXPECT_EQ(y.name(), "y");
  EXPECT_EQ(x.dtype(), DType::kFloat32);
  EXPECT_EQ(x.dims(), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{5}));
  EXPECT_EQ(Values<float>(x), (std::vector<float>{30, 31, 32, 0, 1, 2, 10, 11, 12, 20, 21, 22, 20, 21, 22}));
  EXPECT_EQ(Values<int64_t>(y), (std::vector<int64_t>{13, 10, 11, 12, 12}));

  EXPECT_EQ(MakeBatch(*bound, {0, 5}).status().message(), d.source() + ": sample index 5 is outside [0, 5)");
  EXPECT_EQ(MakeBatch(*bound, {-1}).status().message(), d.source() + ": sample index -1 is outside [0, 5)");
}

TEST_F(DataDatasetTest, MakeBatchCopiesAnyDtypeByBytes) {
  std::vector<uint16_t> half = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600};  // fp16 1..6, [3,2]
  std::vector<uint16_t> bf = {0x3f80, 0x4000, 0x4040};                            // bf16 1..3, [3]
  std::vector<uint8_t> flags = {1, 0, 1};
  StatusOr<Dataset> d =
      Dataset::FromTensors({MakeTensor("h", DType::kFloat16, {3, 2}, half), MakeTensor("b", DType::kBFloat16, {3}, bf),
                            MakeTensor("m", DType::kBool, {3}, flags)},
                           "mem");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  StatusOr<std::vector<ir::Tensor>> batch = MakeBatch(*d, {2, 1});
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(Values<uint16_t>((*batch)[0]), (std::vector<uint16_t>{0x4500, 0x4600, 0x4200, 0x4400}));
  EXPECT_EQ((*batch)[0].dtype(), DType::kFloat16);
  EXPECT_EQ(Values<uint16_t>((*batch)[1]), (std::vector<uint16_t>{0x4040, 0x4000}));
  EXPECT_EQ((*batch)[1].dtype(), DType::kBFloat16);
  EXPECT_EQ(Values<uint8_t>((*batch)[2]), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ((*batch)[2].dtype(), DType::kBool);
}

}  // namespace
}  // namespace onnxamp::trainer
