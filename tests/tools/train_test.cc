// `onnxamp train` on CSV data, run as a subprocess on models/digits_mlp.onnx: --label-column, --save-split (the
// held-out rows, bound as the model reads them), the one-line errors of the CSV options, and --profile.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "importer/model_io.h"
#include "importer/tensor_file.h"
#include "tests/tools/process_util.h"

namespace onnxamp::tools_test {
namespace {

const std::string kDigitsMlp = ModelsDir() + "/digits_mlp.onnx";

// `rows` rows: a header "digit,f0,...,f63", then the label r % 10 first and 64 features valued r + c / 100.
std::string DigitsCsv(int rows) {
  std::string s = "digit";
  for (int c = 0; c < 64; ++c) {
    s += ",f";
    s += std::to_string(c);
  }
  s += '\n';
  for (int r = 0; r < rows; ++r) {
    s += std::to_string(r % 10);
    for (int c = 0; c < 64; ++c) {
      s += ',';
      s += std::to_string(r);
      s += c < 10 ? ".0" : ".";
      s += std::to_string(c);
    }
    s += '\n';
  }
  return s;
}

std::vector<std::string> TrainArgs(const TempDir& dir, const std::string& data) {
  return {
      "train", kDigitsMlp, "--data",  data, "--labels",     "label", "--input-map", "input=features", "--loss", "ce",
      "--amp", "fp16",     "--steps", "2",  "--batch-size", "4",     "-o",          dir / "out.onnx"};
}

// A model converted to FP16 (here by `onnxamp convert`; onnxconverter-common's output is the same kind) trains without
// --amp as with --amp fp16, says so, and -o keeps its weights in float16, trained. Before, step 1 failed: the FP32
// master weights reached the float16 Gemm.
TEST(TrainCliTest, AModelStoredInFp16TrainsAsFp16Amp) {
  TempDir dir;
  const std::string half = dir / "digits16.onnx";
  ProcessResult c = RunOnnxamp({"convert", kDigitsMlp, "--target", "fp16", "--keep-io-types", "-o", half});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(20));
  const std::string out = dir / "out.onnx";
  ProcessResult r = RunOnnxamp({"train", half, "--data", csv, "--label-column", "digit", "--loss", "ce", "--steps",
                                "12", "--batch-size", "4", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("train: the model stores 4 parameters in float16 ('fc1.weight', ...): trained as with --amp "
                       "fp16 (FP32 master weights, dynamic loss scaling); -o keeps them in float16"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("FP16 AMP ("), std::string::npos) << r.err;
  StatusOr<ir::Model> before = importer::LoadModel(half), after = importer::LoadModel(out);
  ASSERT_TRUE(before.ok() && after.ok());
  for (const char* name : {"fc1.weight", "fc2.weight"}) {
    const ir::Tensor* a = before->graph->FindValue(name)->initializer();
    const ir::Tensor* b = after->graph->FindValue(name)->initializer();
    ASSERT_TRUE(a && b) << name;
    EXPECT_EQ(b->dtype(), DType::kFloat16) << name;
    EXPECT_FALSE(a->SameContents(*b)) << name << " trained";
  }
}

TEST(TrainCliTest, CsvWithLabelColumnAndSaveSplit) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(20));
  std::vector<std::string> args = TrainArgs(dir, csv);
  for (const char* a : {"--label-column", "digit", "--val-split", "0.25", "--save-split"}) args.push_back(a);
  args.push_back(dir / "split");
  ProcessResult r = RunOnnxamp(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote the 5 validation samples (input, label) to " + (dir / "split") + "/val.npz"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("15 samples, 5 for validation"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("accuracy"), std::string::npos) << r.err;

  StatusOr<std::vector<ir::Tensor>> val = importer::ReadTensors(dir / "split/val.npz");
  ASSERT_TRUE(val.ok()) << val.status().message();
  ASSERT_EQ(val->size(), 2u);
  const ir::Tensor& x = (*val)[0];
  const ir::Tensor& y = (*val)[1];
  EXPECT_EQ(x.name(), "input");
  EXPECT_EQ(x.dtype(), DType::kFloat32);
  EXPECT_EQ(x.dims(), (std::vector<int64_t>{5, 64}));
  EXPECT_EQ(y.name(), "label");
  EXPECT_EQ(y.dtype(), DType::kInt64);
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{5}));
  // Each held-out row is a whole CSV row: features r + c / 100, label r % 10; rows in file order, distinct.
  std::set<int> rows;
  int last = -1;
  for (int i = 0; i < 5; ++i) {
    const int row = static_cast<int>(x.values<float>()[i * 64]);
    EXPECT_GT(row, last);
    last = row;
    rows.insert(row);
    EXPECT_EQ(y.values<int64_t>()[i], row % 10);
    EXPECT_FLOAT_EQ(x.values<float>()[i * 64 + 63], static_cast<float>(row + 0.63));
  }
  EXPECT_EQ(rows.size(), 5u);
}

// A CSV's labels are its 'label' array and its 'features' feed a model of one input: neither needs naming. Other
// data still names its labels.
TEST(TrainCliTest, CsvNeedsNeitherLabelsNorInputMap) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(20));
  ProcessResult r = RunOnnxamp({"train", kDigitsMlp, "--data", csv, "--label-column", "digit", "--steps", "2",
                                "--batch-size", "4", "-o", dir / "out.onnx"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("loss ce"), std::string::npos) << r.err;
  r = RunOnnxamp({"train", kDigitsMlp, "--data", dir / "out.npz", "--steps", "2", "-o", dir / "out2.onnx"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--labels: name the array of labels"), std::string::npos) << r.err;
}

TEST(TrainCliTest, CsvErrorsAreOneLine) {
  TempDir dir;
  const std::string csv = dir / "bad.csv";
  WriteWholeFile(csv, DigitsCsv(3) + "1,2\n");
  // The default label column is the last one, which holds fractions here.
  ProcessResult r = RunOnnxamp(TrainArgs(dir, csv));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(Lines(r.err),
            std::vector<std::string>{"error: " + csv +
                                     ": line 2, column 65 ('f63'): the label '0.63' is not an integer class index"});
  std::vector<std::string> args = TrainArgs(dir, csv);
  args.insert(args.end(), {"--label-column", "digit"});
  r = RunOnnxamp(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(Lines(r.err), std::vector<std::string>{"error: " + csv +
                                                   ": line 5, column 3 ('f1'): missing (the row has 2 columns, line 1 "
                                                   "has 65)"});

  const std::string good = dir / "good.csv";
  WriteWholeFile(good, DigitsCsv(8));
  args = TrainArgs(dir, good);
  args.insert(args.end(), {"--label-column", "nope"});
  r = RunOnnxamp(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(good + ": --label-column 'nope': no column of that name (header: digit, f0, f1"),
            std::string::npos)
      << r.err;

  args = TrainArgs(dir, good);
  args.insert(args.end(), {"--save-split", dir / "split"});
  r = RunOnnxamp(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--save-split " + (dir / "split") + ": there is no split to save without --val-split"),
            std::string::npos)
      << r.err;

  const std::string npz = dir / "d.npz";
  ir::Tensor features(DType::kFloat32, {2, 64});
  features.set_name("features");
  ASSERT_TRUE(importer::WriteNpz({features}, npz).ok());
  args = TrainArgs(dir, npz);
  args.insert(args.end(), {"--label-column", "0"});
  r = RunOnnxamp(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--label-column 0: only .csv and .csv.gz data have columns"), std::string::npos) << r.err;
}

// digits_mlp.onnx as an exporter without dynamic axes writes it: input [4,64], output [4,10], and the input reshaped
// to the constant `shape` first (PyTorch's x.view(4, 64)).
std::string FixedBatchDigits(const TempDir& dir, const std::vector<int64_t>& shape) {
  StatusOr<ir::Model> m = importer::LoadModel(kDigitsMlp);
  EXPECT_TRUE(m.ok()) << m.status().message();
  ir::Graph& g = *m->graph;
  ir::Value* x = g.inputs()[0];
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(4), ir::Dim::Value(64)}));
  g.outputs()[0]->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(4), ir::Dim::Value(10)}));
  ir::Tensor t(DType::kInt64, {static_cast<int64_t>(shape.size())});
  std::copy(shape.begin(), shape.end(), t.mutable_values<int64_t>().begin());
  t.set_name("fixed_shape");
  ir::Value* s = g.CreateValue("fixed_shape");
  g.SetInitializer(s, std::move(t));
  ir::Value* r = g.CreateValue("input_reshaped");
  const std::vector<ir::Use> uses = x->uses();
  for (const ir::Use& u : uses) u.node->SetInput(u.index, r);
  g.InsertNode(*g.nodes().begin(), "Reshape", {x, s}, {r}, "view");
  const std::string path = dir / "fixed.onnx";
  EXPECT_TRUE(importer::SaveModel(*m, path).ok());
  return path;
}

// Initializer name -> bytes of a model file.
std::map<std::string, std::string> InitializerBytes(const std::string& path) {
  std::map<std::string, std::string> out;
  StatusOr<ir::Model> m = importer::LoadModel(path);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return out;
  for (const ir::Value* v : m->graph->initializers()) {
    const ir::Tensor& t = *v->initializer();
    out[v->name()] = std::string(reinterpret_cast<const char*>(t.data()), t.nbytes());
  }
  return out;
}

// A model of opset 11 (before ONNX had SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss) trains with --loss ce
// and nll as at opset 17, to the same bits, and is written back at opset 11. Before, the loss had no gradient there.
TEST(TrainCliTest, ModelsOfOpsetsBefore12TrainWithClassLosses) {
  TempDir dir;
  StatusOr<ir::Model> m = importer::LoadModel(kDigitsMlp);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->OpsetVersion(""), 17);
  m->SetOpsetVersion("", 11);
  const std::string old = dir / "opset11.onnx";
  ASSERT_TRUE(importer::SaveModel(*m, old).ok());
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(24));
  for (const char* loss : {"ce", "nll"}) {
    SCOPED_TRACE(loss);
    auto train = [&](const std::string& model, const std::string& out) {
      ProcessResult r = RunOnnxamp({"train", model, "--data", csv, "--label-column", "digit", "--loss", loss, "--steps",
                                    "5", "--batch-size", "4", "--seed", "2", "-o", out});
      EXPECT_EQ(r.exit_code, 0) << r.err;
    };
    train(kDigitsMlp, dir / "new.onnx");
    train(old, dir / "old.onnx");
    EXPECT_EQ(InitializerBytes(dir / "old.onnx"), InitializerBytes(dir / "new.onnx"));
    StatusOr<ir::Model> written = importer::LoadModel(dir / "old.onnx");
    ASSERT_TRUE(written.ok()) << written.status().message();
    EXPECT_EQ(written->OpsetVersion(""), 11);
    EXPECT_EQ(written->OpsetVersion("com.onnxamp"), 0) << "the loss is not part of the written model";
  }
}

// digits_mlp with a Dropout (ratio 0.5) after its ReLU, written at `opset`: the ratio an input from opset 12, an
// attribute before.
std::string DigitsWithDropout(const TempDir& dir, int64_t opset) {
  StatusOr<ir::Model> m = importer::LoadModel(kDigitsMlp);
  EXPECT_TRUE(m.ok()) << m.status().message();
  ir::Graph& g = *m->graph;
  ir::Node* relu = nullptr;
  for (ir::Node* n : g.nodes()) {
    if (n->op_type() == "Relu") relu = n;
  }
  EXPECT_NE(relu, nullptr);
  ir::Value* y = relu->output(0);
  ir::Value* dropped = g.CreateValue("dropped");
  const std::vector<ir::Use> uses = y->uses();
  for (const ir::Use& u : uses) u.node->SetInput(u.index, dropped);
  std::vector<ir::Value*> inputs = {y};
  if (opset >= 12) {
    ir::Value* ratio = g.CreateValue("ratio");
    ir::Tensor half(DType::kFloat32, {});
    half.mutable_values<float>()[0] = 0.5f;
    g.SetInitializer(ratio, std::move(half));
    inputs.push_back(ratio);
  }
  ir::Node* d = g.AddNode("Dropout", inputs, {dropped}, "drop");
  if (opset < 12) d->SetAttribute(ir::Attribute::Float("ratio", 0.5f));
  EXPECT_TRUE(g.SortTopologically().ok());
  m->SetOpsetVersion("", opset);
  const std::string path = dir / ("dropout" + std::to_string(opset) + ".onnx");
  EXPECT_TRUE(importer::SaveModel(*m, path).ok());
  return path;
}

// A Dropout of a model before opset 12 drops in training as from opset 12 (the same masks, so the same weights bit
// for bit), LoRA's dropout too; before, the one was the identity there and the other refused.
TEST(TrainCliTest, DropoutTrainsBeforeOpset12) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(24));
  auto train = [&](const std::string& model, const std::string& out) {
    ProcessResult r = RunOnnxamp({"train", model, "--data", csv, "--label-column", "digit", "--steps", "5",
                                  "--batch-size", "4", "--seed", "2", "-o", out});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  };
  train(DigitsWithDropout(dir, 13), dir / "d13.onnx");
  train(DigitsWithDropout(dir, 11), dir / "d11.onnx");
  train(DigitsWithDropout(dir, 10), dir / "d10.onnx");
  train(kDigitsMlp, dir / "none.onnx");
  std::map<std::string, std::string> d13 = InitializerBytes(dir / "d13.onnx");
  d13.erase("ratio");  // opset 13's ratio input
  EXPECT_EQ(InitializerBytes(dir / "d11.onnx"), d13);
  EXPECT_EQ(InitializerBytes(dir / "d10.onnx"), d13);
  EXPECT_NE(InitializerBytes(dir / "none.onnx"), d13) << "the Dropout dropped nothing";

  // LoRA's dropout likewise (refused before opset 12 until then).
  auto lora = [&](int64_t opset) {
    StatusOr<ir::Model> m = importer::LoadModel(kDigitsMlp);
    EXPECT_TRUE(m.ok()) << m.status().message();
    m->SetOpsetVersion("", opset);
    const std::string model = dir / ("lora" + std::to_string(opset) + ".onnx");
    EXPECT_TRUE(importer::SaveModel(*m, model).ok());
    const std::string out = dir / ("lora" + std::to_string(opset) + "_out.onnx");
    ProcessResult r =
        RunOnnxamp({"train", model, "--data", csv, "--label-column", "digit", "--steps", "5", "--batch-size", "4",
                    "--seed", "2", "--lora-rank", "2", "--lora-dropout", "0.2", "-o", out});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return InitializerBytes(out);
  };
  EXPECT_EQ(lora(11), lora(13));
}

// digits_mlp whose second weight is the Concat of two initializers (its first 20 inputs and the rest), at `opset`:
// Concat's gradient is a Slice per input, whose starts and ends are inputs from opset 10 only.
std::string DigitsWithConcatWeight(const TempDir& dir, int64_t opset) {
  StatusOr<ir::Model> m = importer::LoadModel(kDigitsMlp);
  EXPECT_TRUE(m.ok()) << m.status().message();
  ir::Graph& g = *m->graph;
  ir::Node* second = nullptr;
  for (ir::Node* n : g.nodes()) {
    if (n->op_type() == "Gemm") second = n;
  }
  EXPECT_NE(second, nullptr);
  ir::Value* w = second->input(1);
  const ir::Tensor whole = *w->initializer();
  EXPECT_EQ(whole.dims().size(), 2u);
  const ir::Attribute* trans_b = second->FindAttribute("transB");
  const int64_t axis = trans_b && trans_b->i ? 1 : 0;  // K, the dim the Gemm sums over
  const int64_t rows = whole.dims()[0], cols = whole.dims()[1];
  std::vector<ir::Value*> parts;
  for (const auto& [name, begin, end] :
       {std::tuple<std::string, int64_t, int64_t>{"w_front", 0, 20}, {"w_back", 20, whole.dims()[axis]}}) {
    ir::Tensor t(DType::kFloat32,
                 axis == 0 ? std::vector<int64_t>{end - begin, cols} : std::vector<int64_t>{rows, end - begin});
    auto to = t.mutable_values<float>();
    for (int64_t r = 0; r < t.dims()[0]; ++r) {
      for (int64_t c = 0; c < t.dims()[1]; ++c) {
        to[r * t.dims()[1] + c] = whole.values<float>()[axis == 0 ? (r + begin) * cols + c : r * cols + c + begin];
      }
    }
    ir::Value* v = g.CreateValue(name);
    g.SetInitializer(v, std::move(t));
    parts.push_back(v);
  }
  ir::Value* joined = g.CreateValue("w_joined");
  second->SetInput(1, joined);
  g.RemoveInitializer(w);
  g.AddNode("Concat", parts, {joined}, "join")->SetAttribute(ir::Attribute::Int("axis", axis));
  EXPECT_TRUE(g.SortTopologically().ok());
  m->SetOpsetVersion("", opset);
  const std::string path = dir / ("concat" + std::to_string(opset) + ".onnx");
  EXPECT_TRUE(importer::SaveModel(*m, path).ok());
  return path;
}

// A model of opsets 7-9 whose gradient needs newer ops (Concat's Slices, from opset 10) trains at opset 13, raised
// by ONNX's version converter, to the bits of the same model at opset 13; the written model keeps its opset.
TEST(TrainCliTest, ModelsBeforeOpset10TrainRaisedToOpset13) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(24));
  auto train = [&](int64_t opset) {
    const std::string out = dir / ("concat" + std::to_string(opset) + "_out.onnx");
    ProcessResult r = RunOnnxamp({"train", DigitsWithConcatWeight(dir, opset), "--data", csv, "--label-column", "digit",
                                  "--steps", "5", "--batch-size", "4", "--seed", "2", "-o", out});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::string note = StrCat("train: the graphs are built at opset 13, raised from the model's ", opset,
                                    " by ONNX's version converter (at ", opset, ": ");
    EXPECT_EQ(r.err.find(note) != std::string::npos, opset < 10) << r.err;
    StatusOr<ir::Model> written = importer::LoadModel(out);
    EXPECT_TRUE(written.ok()) << written.status().message();
    if (written.ok()) {
      EXPECT_EQ(written->OpsetVersion(""), opset);
    }
    return InitializerBytes(out);
  };
  const auto want = train(13);
  EXPECT_EQ(train(10), want);
  EXPECT_EQ(train(9), want);
  EXPECT_EQ(train(7), want);
}

// X [1, 3, 6, 6] -> Conv (4 channels) -> + bias -> Relu -> GlobalAveragePool -> Reshape [1, 4] -> Gemm (5 classes):
// at opset 6 the bias is [4] added with broadcast 1 from axis 1 (and the Gemm has `broadcast`), at 13 it is [4, 1, 1].
std::string LegacyBroadcastCnn(const TempDir& dir, int64_t opset) {
  ir::Model m;
  m.ir_version = opset < 7 ? 3 : 7;
  m.opset_imports = {{"", opset}};
  ir::Graph& g = *m.graph;
  auto init = [&](const std::string& name, std::vector<int64_t> dims, uint32_t seed, bool int64 = false) {
    ir::Value* v = g.CreateValue(name);
    ir::Tensor t(int64 ? DType::kInt64 : DType::kFloat32, dims);
    if (int64) {
      t.mutable_values<int64_t>()[0] = 1;
      t.mutable_values<int64_t>()[1] = 4;
    } else {
      std::mt19937 gen(seed);
      std::uniform_real_distribution<float> u(-0.5f, 0.5f);
      for (float& x : t.mutable_values<float>()) x = u(gen);
    }
    ir::Shape shape;
    for (int64_t d : dims) shape.push_back(ir::Dim::Value(d));
    v->set_type(ir::ValueType::Tensor(t.dtype(), shape));
    g.SetInitializer(v, std::move(t));
    if (opset < 7) g.AddInput(v);  // IR 3: initializers are graph inputs
    return v;
  };
  ir::Value* x = g.CreateValue("x");
  x->set_type(ir::ValueType::Tensor(
      DType::kFloat32, ir::Shape{ir::Dim::Value(1), ir::Dim::Value(3), ir::Dim::Value(6), ir::Dim::Value(6)}));
  g.AddInput(x);
  auto value = [&](const std::string& name) { return g.CreateValue(name); };
  ir::Value *c = value("c"), *cb = value("cb"), *r = value("r"), *p = value("p"), *f = value("f"), *y = value("y");
  g.AddNode("Conv", {x, init("w", {4, 3, 3, 3}, 1)}, {c}, "conv")
      ->SetAttribute(ir::Attribute::Ints("pads", {1, 1, 1, 1}));
  ir::Node* add = g.AddNode(
      "Add", {c, init("bias", opset < 7 ? std::vector<int64_t>{4} : std::vector<int64_t>{4, 1, 1}, 2)}, {cb}, "add");
  g.AddNode("Relu", {cb}, {r}, "relu");
  g.AddNode("GlobalAveragePool", {r}, {p}, "pool");
  g.AddNode("Reshape", {p, init("shape", {2}, 0, true)}, {f}, "flat");
  ir::Node* fc = g.AddNode("Gemm", {f, init("fc_w", {5, 4}, 3), init("fc_b", {5}, 4)}, {y}, "fc");
  fc->SetAttribute(ir::Attribute::Int("transB", 1));
  if (opset < 7) {
    add->SetAttribute(ir::Attribute::Int("broadcast", 1));
    add->SetAttribute(ir::Attribute::Int("axis", 1));
    fc->SetAttribute(ir::Attribute::Int("broadcast", 1));
  }
  y->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(1), ir::Dim::Value(5)}));
  g.AddOutput(y);
  const std::string path = dir / ("legacy" + std::to_string(opset) + ".onnx");
  EXPECT_TRUE(importer::SaveModel(m, path).ok());
  return path;
}

// An opset-6 CNN whose bias is added with the legacy broadcast from axis 1 trains (raised to opset 13: its
// GlobalAveragePool has no gradient before opset 8) as the same CNN written at opset 13 does, at batch 1 and 4, to the
// same bits. Before, ONNX's adapter added the bias along the batch: the run failed at batch 1 and trained another
// function at batch 4.
TEST(TrainCliTest, LegacyBroadcastModelsTrainAsTheirOpset13Form) {
  TempDir dir;
  const std::string data = dir / "data.npz";
  {
    ir::Tensor x(DType::kFloat32, {8, 3, 6, 6});
    std::mt19937 gen(5);
    std::normal_distribution<float> normal;
    for (float& v : x.mutable_values<float>()) v = normal(gen);
    x.set_name("x");
    ir::Tensor labels(DType::kInt64, {8});
    for (int64_t i = 0; i < 8; ++i) labels.mutable_values<int64_t>()[i] = (i * 3) % 5;
    labels.set_name("labels");
    ASSERT_TRUE(importer::WriteNpz({x, labels}, data).ok());
  }
  for (const char* batch : {"1", "4"}) {
    SCOPED_TRACE(batch);
    auto train = [&](int64_t opset, const std::string& amp) {
      SCOPED_TRACE(amp);
      const std::string out = dir / ("legacy" + std::to_string(opset) + "_" + amp + "_out.onnx");
      ProcessResult r =
          RunOnnxamp({"train", LegacyBroadcastCnn(dir, opset), "--data", data, "--labels", "labels", "--loss", "ce",
                      "--steps", "4", "--batch-size", batch, "--no-shuffle", "--amp", amp, "-o", out});
      EXPECT_EQ(r.exit_code, 0) << r.err;
      if (amp == "bf16") {  // on the CPU the graphs keep the model's opset: its Conv has no bfloat16
        EXPECT_NE(r.err.find("train: kept in float: 1 Conv node: Conv-11 has no bfloat16 (opset 13; ONNX added it at "
                             "opset 22): computes in float\n"),
                  std::string::npos)
            << r.err;
      }
      if (opset < 13) {
        // FP32: GlobalAveragePool has no gradient before opset 8; BF16 needs opset 13 before anything else (the
        // Gemm's adapter from opset 6 needs the batch dim the model declares, and the graphs make it symbolic).
        const std::string why = amp == "bf16" ? "(at 6: bfloat16 needs opset 13, and Add 'add' changed in between)"
                                              : "(at 6: pass build_gradients: node GlobalAveragePool 'pool'";
        EXPECT_NE(r.err.find("train: the graphs are built at opset 13, raised from the model's 6 by ONNX's version "
                             "converter " +
                             why),
                  std::string::npos)
            << r.err;
      }
      return InitializerBytes(out);
    };
    EXPECT_EQ(train(6, "off"), train(13, "off"));
    EXPECT_EQ(train(6, "bf16"), train(13, "bf16"));
  }
}

// A three-class classifier x [n, 4] -> Gemm 'fc' (w [4, 3], b [3]) -> logits, for the caller to extend (an opset 17
// model: `init` adds a float initializer), and its data: 8 samples of x and their labels (i % classes).
struct SmallGemm {
  ir::Model model;
  ir::Value* logits = nullptr;

  SmallGemm() {
    model.ir_version = 8;
    model.opset_imports = {{"", 17}};
    ir::Graph& g = *model.graph;
    ir::Value* x = g.CreateValue("x");
    x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("n"), ir::Dim::Value(4)}));
    g.AddInput(x);
    logits = g.CreateValue("logits");
    g.AddNode("Gemm",
              {x, init("w", {4, 3}, {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f, -0.9f, 1.0f, 1.1f, 1.2f}),
               init("b", {3}, {0.1f, 0.2f, 0.3f})},
              {logits}, "fc");
  }
  ir::Value* init(const std::string& name, std::vector<int64_t> dims, std::vector<float> values) {
    ir::Value* v = model.graph->CreateValue(name);
    ir::Tensor t(DType::kFloat32, dims);
    std::copy(values.begin(), values.end(), t.mutable_values<float>().begin());
    model.graph->SetInitializer(v, std::move(t));
    return v;
  }
  // `y` [n, 3] becomes the model's output.
  void Output(ir::Value* y) {
    y->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("n"), ir::Dim::Value(3)}));
    model.graph->AddOutput(y);
  }
  static Status WriteData(const std::string& path, int64_t classes) {
    ir::Tensor xs(DType::kFloat32, {8, 4});
    for (int64_t i = 0; i < 32; ++i) xs.mutable_values<float>()[i] = static_cast<float>((i * 7) % 5) - 2.0f;
    xs.set_name("x");
    ir::Tensor labels(DType::kInt64, {8});
    for (int64_t i = 0; i < 8; ++i) labels.mutable_values<int64_t>()[i] = i % classes;
    labels.set_name("labels");
    return importer::WriteNpz({xs, labels}, path);
  }
};

// A classifier whose logits a weight masks through a comparison (a causal mask's form): the weight reaches the loss
// but no gradient does. `onnxamp train` says it is not trained and why, trains the rest, and writes it back as it
// was. Before, the run stopped: parameter 'mask' does not affect the loss.
TEST(TrainCliTest, AMaskWeightThroughAComparisonIsNotTrained) {
  TempDir dir;
  SmallGemm m;
  ir::Graph& g = *m.model.graph;
  ir::Value *off = g.CreateValue("off"), *y = g.CreateValue("y");
  g.AddNode("Equal", {m.init("mask", {3}, {1, 1, 0}), m.init("zero", {}, {0})}, {off}, "eq");
  g.AddNode("Where", {off, m.init("neg", {}, {-1e4f}), m.logits}, {y}, "where");
  m.Output(y);
  const std::string model = dir / "masked.onnx";
  ASSERT_TRUE(importer::SaveModel(m.model, model).ok());
  const std::string data = dir / "data.npz";
  ASSERT_TRUE(SmallGemm::WriteData(data, 2).ok());
  const std::string out = dir / "out.onnx";
  ProcessResult r = RunOnnxamp({"train", model, "--data", data, "--labels", "labels", "--loss", "ce", "--steps", "3",
                                "--batch-size", "4", "--amp", "fp16", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("masked.onnx, 2 parameters (15 values)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("train: 'mask' is not trained: the loss depends on it, but Equal 'eq' makes no floating value "
                       "of it, so no gradient flows back"),
            std::string::npos)
      << r.err;
  const std::map<std::string, std::string> before = InitializerBytes(model), after = InitializerBytes(out);
  EXPECT_EQ(after.at("mask"), before.at("mask"));
  EXPECT_NE(after.at("w"), before.at("w"));
}

// A one-element weight stays a constant by default, and the run says so; --trainable @FILE trains the names it lists
// (as a list of PyTorch's named_parameters() would give them) and reports the ones the model does not have.
TEST(TrainCliTest, TrainableListsTheParameters) {
  TempDir dir;
  SmallGemm m;
  ir::Value* y = m.model.graph->CreateValue("y");
  m.model.graph->AddNode("Mul", {m.logits, m.init("logit_scale", {}, {2.0f})}, {y}, "scale");
  m.Output(y);
  const std::string model = dir / "scaled.onnx";
  ASSERT_TRUE(importer::SaveModel(m.model, model).ok());
  const std::string data = dir / "data.npz";
  ASSERT_TRUE(SmallGemm::WriteData(data, 3).ok());
  const std::vector<std::string> common = {"train",  model,     "--data", data,           "--labels",
                                           "labels", "--steps", "3",      "--batch-size", "4"};
  auto run = [&](std::vector<std::string> extra, const std::string& out) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"-o", out});
    return RunOnnxamp(args);
  };
  const std::map<std::string, std::string> before = InitializerBytes(model);

  ProcessResult r = run({}, dir / "default.onnx");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("train: 1 one-element initializer the loss reads stays a constant, not "
                       "trained ('logit_scale'): --trainable trains what it names"),
            std::string::npos)
      << r.err;
  std::map<std::string, std::string> after = InitializerBytes(dir / "default.onnx");
  EXPECT_EQ(after.at("logit_scale"), before.at("logit_scale"));
  EXPECT_NE(after.at("b"), before.at("b"));

  const std::string names = dir / "params.txt";
  WriteWholeFile(names, "w\nlogit_scale\nhead.weight\n");
  r = run({"--trainable", "@" + names}, dir / "listed.onnx");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("scaled.onnx, 2 parameters (13 values)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("train: --trainable @" + names +
                       " lists 1 name that no initializer has ('head.weight'): a tied weight"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("one-element"), std::string::npos) << r.err;
  after = InitializerBytes(dir / "listed.onnx");
  EXPECT_NE(after.at("logit_scale"), before.at("logit_scale"));
  EXPECT_NE(after.at("w"), before.at("w"));
  EXPECT_EQ(after.at("b"), before.at("b"));
  EXPECT_NE(r.err.find("train: --trainable @" + names +
                       " leaves 1 initializer the loss reads constant that onnxamp would train by default ('b')"),
            std::string::npos)
      << r.err;

  // A checkpoint of a run whose file named other parameters: resuming says what changed.
  r = run({"--trainable", "@" + names, "--checkpoint-dir", dir / "ck"}, dir / "ck.onnx");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  WriteWholeFile(names, "w\nb\n");
  r = run({"--trainable", "@" + names, "--resume", dir / "ck"}, dir / "resumed.onnx");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("parameter 'logit_scale' where 'b' was expected (this run chooses other parameters than the "
                       "one that wrote the state: did a --trainable or --freeze file change?)"),
            std::string::npos)
      << r.err;

  // Errors are one line naming the flag.
  r = run({"--trainable", "@" + (dir / "missing.txt")}, dir / "x.onnx");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--trainable @" + (dir / "missing.txt") + ": "), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// --list-parameters prints every float initializer's role and stops: no data read, nothing written.
TEST(TrainCliTest, ListParametersPrintsTheRolesAndTrainsNothing) {
  TempDir dir;
  const std::string model = ModelsDir() + "/digits_mlp.onnx";
  ProcessResult r = RunOnnxamp({"train", model, "--list-parameters", "--freeze", "fc2\\.bias"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("trained   fc1.weight  float     [128, 64]\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("frozen    fc2.bias    float     [10]                matches --freeze 'fc2\\.bias'\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("digits_mlp.onnx: 3 parameters (9600 values) trained, 0 buffers"), std::string::npos) << r.out;
  EXPECT_TRUE(dir.List().empty());
  // jsonl: an object per initializer, then a summary.
  r = RunOnnxamp({"train", model, "--list-parameters", "--freeze", "fc2\\.bias", "--log-format", "jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 5) << r.out;
  EXPECT_EQ(r.out.rfind("{\"type\":\"initializer\",\"name\":\"fc1.weight\",\"role\":\"trained\",\"dtype\":\"float\","
                        "\"shape\":[128,64],\"why\":\"\"}\n",
                        0),
            0u)
      << r.out;
  EXPECT_NE(r.out.find("\"role\":\"frozen\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("{\"type\":\"summary\",\"model\":\"" + model +
                       "\",\"parameters\":3,\"values\":9600,\"buffers\":0,\"unknown_names\":{}}\n"),
            std::string::npos)
      << r.out;
  // A file's names the model lacks are listed after the table.
  WriteWholeFile(dir / "names.txt", "fc1.weight\nhead.weight\n");
  r = RunOnnxamp({"train", model, "--list-parameters", "--trainable", "@" + (dir / "names.txt")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--trainable @" + (dir / "names.txt") + " lists 1 name that no initializer has: 'head.weight'"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 parameter (8192 values) trained"), std::string::npos) << r.out;
  std::filesystem::remove(dir / "names.txt");
  // What does not go with it, and what the run needs without it: usage errors.
  r = RunOnnxamp({"train", model, "--list-parameters", "-o", dir / "x.onnx"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("-o with --list-parameters, which trains nothing"), std::string::npos) << r.err;
  r = RunOnnxamp({"train", model, "-o", dir / "x.onnx"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--data is required"), std::string::npos) << r.err;
  r = RunOnnxamp({"train", model, "--data", dir / "d.npz", "--labels", "y"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("-o is required"), std::string::npos) << r.err;
}

ir::Dim InputDim0(const std::string& path) {
  StatusOr<ir::Model> m = importer::LoadModel(path);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? (*m->graph->inputs()[0]->type().shape())[0] : ir::Dim::Unknown();
}

TEST(TrainCliTest, FixedBatchModelTrainsAtAnyBatchSize) {
  TempDir dir;
  const std::string model = FixedBatchDigits(dir, {4, 64});
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(11));
  // Batches of 3 over 11 rows: 3, 3, 3 and a partial 2; then the validation at batch 3.
  ProcessResult r = RunOnnxamp({"train", model, "--data", csv, "--labels", "label", "--input-map", "input=features",
                                "--label-column", "digit", "--steps", "4", "--batch-size", "3", "--no-shuffle",
                                "--val-data", csv, "-o", dir / "out.onnx"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("train: the model fixes the batch size to 4; trained with it symbolic ('batch': 1 inputs, 1 "
                       "other shapes, 1 Reshape constants)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("done: 4 steps"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(11 samples)"), std::string::npos) << r.err;
  EXPECT_EQ(InputDim0(dir / "out.onnx"), ir::Dim::Value(4)) << "the written model keeps its input shapes";

  // `onnxamp export --dynamic-batch` writes the batch symbolic; the export runs at batch 3, the fixed model does not.
  r = RunOnnxamp({"export", dir / "out.onnx", "--dynamic-batch", "-o", dir / "dynamic.onnx"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(InputDim0(dir / "dynamic.onnx"), ir::Dim::Param("batch"));
  ir::Tensor x(DType::kFloat32, {3, 64});
  x.set_name("input");
  ASSERT_TRUE(importer::WriteNpz({x}, dir / "x3.npz").ok());
  r = RunOnnxamp({"run", dir / "dynamic.onnx", "--input", dir / "x3.npz", "--output-dir", dir.path().string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunOnnxamp({"run", dir / "out.onnx", "--input", dir / "x3.npz", "--output-dir", dir.path().string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("input 'input': dim 0 expected 4, got 3"), std::string::npos) << r.err;
}

TEST(TrainCliTest, FixedBatchThatCannotBeMadeSymbolicIsNamed) {
  TempDir dir;
  const std::string model = FixedBatchDigits(dir, {2, 2, 64});
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(8));
  ProcessResult r = RunOnnxamp({"train", model, "--data", csv, "--labels", "label", "--input-map", "input=features",
                                "--label-column", "digit", "--steps", "1", "--batch-size", "3", "-o", dir / "o.onnx"});
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("node Reshape 'view': its shape constant [2, 2, 64] splits the batch dimension (4 at "
                       "export); re-export with a dynamic batch axis"),
            std::string::npos)
      << r.err;
}

// Names in a folder, sorted.
std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(path)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// --checkpoint-dir/--resume: a run stopped after 3 steps and resumed to 8 writes the same model and the same
// checkpoint state as the uninterrupted run (FP16 AMP, Adam, shuffled across epochs); `onnxamp export CHECKPOINT_DIR`
// writes what exporting the trained model writes; foreign, changed and corrupt resumes are one-line errors.
// A run that failed: the last line of stderr holds `text`; exit status 2 for a usage error (a mistake of the command
// line alone, whose line ends with the --help hint), 1 for any other.
void ExpectErrorEndingWith(const ProcessResult& p, const std::string& text) {
  const bool usage = p.err.find("(see 'onnxamp train --help')") != std::string::npos;
  EXPECT_EQ(p.exit_code, usage ? 2 : 1) << p.err;
  const std::vector<std::string> lines = Lines(p.err);
  ASSERT_FALSE(lines.empty()) << p.err;
  EXPECT_NE(lines.back().find(text), std::string::npos) << p.err;
}

// Paths with control bytes (a terminal escape, a bell) are written as \xNN on every line of a run that succeeds, as
// in errors: train's summary, data, split, checkpoint, resume and output lines, export's and repack's.
TEST(TrainCliTest, PathsWithControlBytesAreEscapedInProgressLines) {
  TempDir dir;
  const std::string evil = "e\x1b[2J\x07";
  const std::string model = dir / (evil + ".onnx");
  WriteWholeFile(model, ReadWholeFile(kDigitsMlp));
  const std::string csv = dir / (evil + ".csv");
  WriteWholeFile(csv, DigitsCsv(20));
  auto expect_clean = [&](const ProcessResult& r, int lines_naming_it) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (char c : r.err) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << static_cast<int>(c);
    int naming = 0;
    for (const std::string& line : Lines(r.err)) naming += line.find("e\\x1b[2J\\x07") != std::string::npos;
    EXPECT_GE(naming, lines_naming_it) << r.err;
  };
  auto args = [&](const std::string& steps) {
    return std::vector<std::string>{"train",
                                    model,
                                    "--data",
                                    csv,
                                    "--labels",
                                    "label",
                                    "--input-map",
                                    "input=features",
                                    "--label-column",
                                    "digit",
                                    "--batch-size",
                                    "4",
                                    "--val-split",
                                    "0.25",
                                    "--save-split",
                                    dir / (evil + "split"),
                                    "--checkpoint-dir",
                                    dir / (evil + "ck"),
                                    "-o",
                                    dir / (evil + "out.onnx"),
                                    "--steps",
                                    steps};
  };
  // The summary (model), the split, the checkpoint and the output.
  expect_clean(RunOnnxamp(args("2")), 4);
  std::vector<std::string> resume = args("3");
  resume.insert(resume.end(), {"--resume", dir / (evil + "ck")});
  expect_clean(RunOnnxamp(resume), 5);  // and "resumed from"
  expect_clean(RunOnnxamp({"export", dir / (evil + "ck"), "-o", dir / (evil + "exported.onnx")}), 1);
  expect_clean(RunOnnxamp({"repack", model, "-o", dir / (evil + "repacked.onnx")}), 1);
}

TEST(TrainCliTest, CheckpointResumeAndExport) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(30));
  auto args = [&](const std::string& steps, std::vector<std::string> more) {
    std::vector<std::string> a = {
        "train",          kDigitsMlp, "--data",  csv,    "--labels",     "label", "--input-map", "input=features",
        "--label-column", "digit",    "--amp",   "fp16", "--optimizer",  "adam",  "--schedule",  "step",
        "--step-size",    "3",        "--lr",    "0.01", "--batch-size", "8",     "--seed",      "3",
        "--threads",      "1",        "--steps", steps};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  ProcessResult r = RunOnnxamp(args("8", {"--checkpoint-dir", dir / "full_ck", "-o", dir / "full.onnx"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunOnnxamp(args("3", {"--checkpoint-dir", dir / "ck", "--checkpoint-every", "1", "--keep-checkpoints", "2", "-o",
                            dir / "part.onnx"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ListDir(dir / "ck"), (std::vector<std::string>{"latest", "step-00000002", "step-00000003"}));
  r = RunOnnxamp(args("8", {"--resume", dir / "ck", "--checkpoint-dir", dir / "ck", "-o", dir / "resumed.onnx"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("resumed from " + (dir / "ck/step-00000003") + " at step 3"), std::string::npos) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "full.onnx"), ReadWholeFile(dir / "resumed.onnx"));
  const std::string state = ReadWholeFile(dir / "full_ck/step-00000008/state.safetensors");
  EXPECT_FALSE(state.empty());
  EXPECT_EQ(state, ReadWholeFile(dir / "ck/step-00000008/state.safetensors"));

  // Export from the checkpoint = export of the trained model, in FP32 and FP16.
  r = RunOnnxamp({"export", dir / "ck", "-o", dir / "exported.onnx"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "exported.onnx"), ReadWholeFile(dir / "full.onnx"));
  r = RunOnnxamp({"export", dir / "ck", "--precision", "fp16", "-o", dir / "ck16.onnx"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunOnnxamp({"export", dir / "full.onnx", "--precision", "fp16", "-o", dir / "full16.onnx"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "ck16.onnx"), ReadWholeFile(dir / "full16.onnx"));

  // Errors: one line each, the last of the output.
  auto expect_error = [](const ProcessResult& p, const std::string& text) {
    ExpectErrorEndingWith(p, text);
    const std::vector<std::string> lines = Lines(p.err);
    if (!lines.empty()) {
      EXPECT_EQ(lines.back().rfind("error: ", 0), 0u) << p.err;
    }
  };
  std::vector<std::string> other = args("9", {"--resume", dir / "ck", "-o", dir / "x.onnx"});
  other[1] = ModelsDir() + "/mlp.onnx";
  expect_error(RunOnnxamp(other), "the checkpoint is of another model");
  std::vector<std::string> lr = args("9", {"--resume", dir / "ck", "-o", dir / "x.onnx"});
  *std::find(lr.begin(), lr.end(), "0.01") = "0.02";
  expect_error(RunOnnxamp(lr), "option lr is 0.02, the checkpoint's 0.01");
  expect_error(RunOnnxamp(args("9", {"--checkpoint-every", "2", "-o", dir / "x.onnx"})),
               "--checkpoint-every and --keep-checkpoints need --checkpoint-dir");
  WriteWholeFile(dir / "a_file", "x");
  expect_error(RunOnnxamp(args("1", {"--checkpoint-dir", dir / "a_file", "-o", dir / "x.onnx"})),
               "a_file: is not a folder");
  std::string corrupt = state;
  corrupt[corrupt.size() - 3] ^= 1;
  WriteWholeFile(dir / "ck/step-00000008/state.safetensors", corrupt);
  expect_error(RunOnnxamp(args("9", {"--resume", dir / "ck", "-o", dir / "x.onnx"})),
               "state.safetensors: contents do not match the recorded hash (corrupt)");
  expect_error(RunOnnxamp({"export", dir / "ck", "-o", dir / "x.onnx"}), "(corrupt)");
  // A run that ends where the checkpoint is has nothing to train: an error, not a model and a loss of 0.
  expect_error(RunOnnxamp(args("3", {"--resume", dir / "ck/step-00000003", "-o", dir / "x.onnx"})),
               "the checkpoint is at step 3 and this run ends at step 3: nothing to train");
  // The older checkpoint is still whole: resumed from its step folder, the run ends where the full run ended.
  r = RunOnnxamp(args("8", {"--resume", dir / "ck/step-00000003", "-o", dir / "again.onnx"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "again.onnx"), ReadWholeFile(dir / "full.onnx"));
}

// A model with external data: the checkpoint holds its data file, a resumed run ends as the uninterrupted one, and
// export from the checkpoint equals the trained model; a data file changed since the checkpoint is named on resume.
TEST(TrainCliTest, CheckpointOfAModelWithExternalData) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(30));
  const std::string model = dir / "net.onnx";
  ProcessResult r = RunOnnxamp({"repack", kDigitsMlp, "-o", model, "--external-data", "always"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto args = [&](const std::string& steps, std::vector<std::string> more) {
    std::vector<std::string> a = {
        "train",          model,   "--data",       csv, "--labels",  "label", "--input-map", "input=features",
        "--label-column", "digit", "--batch-size", "8", "--threads", "1",     "--steps",     steps};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  r = RunOnnxamp(args("4", {"-o", dir / "full.onnx"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunOnnxamp(args("2", {"--checkpoint-dir", dir / "ck", "-o", dir / "part.onnx"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "ck/step-00000002/net.onnx.data"), ReadWholeFile(dir / "net.onnx.data"));
  r = RunOnnxamp(args("4", {"--resume", dir / "ck", "--checkpoint-dir", dir / "ck", "-o", dir / "resumed.onnx"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "full.onnx"), ReadWholeFile(dir / "resumed.onnx"));
  r = RunOnnxamp({"export", dir / "ck", "-o", dir / "exported.onnx"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "exported.onnx"), ReadWholeFile(dir / "full.onnx"));

  std::string data = ReadWholeFile(dir / "net.onnx.data");
  data[data.size() / 2] ^= 1;
  WriteWholeFile(dir / "net.onnx.data", data);
  ExpectErrorEndingWith(RunOnnxamp(args("6", {"--resume", dir / "ck", "-o", dir / "x.onnx"})),
                        "external data file " + (dir / "net.onnx.data") + " differs from the checkpoint's");
}

// Option values outside their range are usage errors where the option's "not given" value would otherwise stand in
// for them (a NaN weight decay meant AdamW's default), and --threads has a ceiling.
TEST(TrainCliTest, OutOfRangeValuesAreRefusedNotReplacedByDefaults) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(12));
  for (const auto& [option, value, message] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--weight-decay", "nan", "--weight-decay: 'nan' must be a finite number >= 0"},
           {"--weight-decay", "-1", "--weight-decay: '-1' must be a finite number >= 0"},
           {"--loss-scale", "0", "--loss-scale: '0' must be a finite number > 0"},
           {"--loss-scale", "inf", "--loss-scale: 'inf' must be a finite number > 0"},
           {"--val-split", "nan", "--val-split: 'nan' must be a finite number > 0"},
           {"--lora-rank", "0", "--lora-rank: '0' must be a whole number from 1 to 1048576"},
           {"--threads", "40000", "--threads: '40000' must be a whole number from 0 to 1024"},
           // Past int64 (CLI11 alone would take 2^63 - 1), a fraction, past uint64 for the seed.
           {"--steps", "99999999999999999999", "--steps: '99999999999999999999' must be a whole number >= 1"},
           {"--batch-size", "1.5", "--batch-size: '1.5' is not a whole number"},
           {"--seed", "18446744073709551616", "--seed: '18446744073709551616' must be a whole number from 0 to "},
           {"--seed", "-1", "--seed: '-1' must be a whole number from 0 to 18446744073709551615"},
           // Values that would silently mean "not given".
           {"--layer-decay", "0", "--layer-decay: '0' must be a finite number > 0"},
           {"--swa-start", "-1", "--swa-start: '-1' must be a whole number >= 0"},
           {"--early-stop", "0", "--early-stop: '0' must be a whole number >= 1"},
           {"--top-k", "1", "--top-k: '1' must be a whole number >= 2"}}) {
    const ProcessResult r =
        RunOnnxamp({"train", kDigitsMlp, "--data", csv, "--labels", "label", "--input-map", "input=features",
                    "--label-column", "digit", "--steps", "1", option, value, "-o", dir / "x.onnx"});
    EXPECT_EQ(r.exit_code, 2) << option << " " << value << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  }
}

// Options that contradict each other, would be ignored, or need another one: usage errors (exit status 2) before
// any file is read (the data file here does not exist).
TEST(TrainCliTest, ContradictoryAndIdleOptionsAreUsageErrors) {
  TempDir dir;
  for (const auto& [extra, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--epochs", "1"}, "give --epochs or --steps, not both"},
           {{"--loss", "ce", "--loss-output", "loss"}, "give --loss or --loss-output, not both"},
           {{"--amp", "off", "--loss-scale", "128"},
            "--loss-scale needs --amp fp16 or bf16 (FP32 training has no loss scaling)"},
           {{"--amp", "bf16", "--min-loss-scale", "1"},
            "--min-loss-scale bounds dynamic loss scaling: it needs --amp fp16 and no --loss-scale"},
           {{"--amp", "fp16", "--loss-scale", "128", "--min-loss-scale", "1"},
            "--min-loss-scale bounds dynamic loss scaling: it needs --amp fp16 and no --loss-scale"},
           {{"--gamma", "0.5"}, "--gamma needs --schedule step or plateau, not constant"},
           {{"--schedule", "cosine", "--step-size", "3"}, "--step-size needs --schedule step, not cosine"},
           {{"--schedule", "step", "--min-lr", "0.1"},
            "--min-lr needs --schedule cosine, linear, polynomial or plateau, not step"},
           {{"--warmup-start-factor", "0.5"}, "--warmup-start-factor needs --warmup"},
           {{"--top-k", "3"}, "--top-k is reported by evaluations: it needs --val-data or --val-split"},
           {{"--loss", "mse", "--top-k", "3", "--val-split", "0.2"}, "--top-k needs class labels (--loss ce or nll)"},
           {{"--device-index", "1"}, "--device-index needs --device cuda"},
           {{"--amp", "fp16", "--keep-op", "Gemm", "--force-low-op", "Gemm"},
            "--keep-op Gemm and --force-low-op Gemm contradict each other"},
           {{"--export-precision", "fp8"}, "--export-precision fp8: expected fp16, bf16 or fp32"}}) {
    std::vector<std::string> args = {"train",   kDigitsMlp, "--data", dir / "absent.csv", "--labels", "label",
                                     "--steps", "2",        "-o",     dir / "out.onnx"};
    args.insert(args.end(), extra.begin(), extra.end());
    const ProcessResult r = RunOnnxamp(args);
    EXPECT_EQ(r.exit_code, 2) << extra[0] << ": " << r.err;
    ASSERT_EQ(Lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find(message + " (see 'onnxamp train --help')"), std::string::npos) << r.err;
  }
}

// Outputs the run could never write fail before the data are read and the steps run, naming the option.
TEST(TrainCliTest, OutputsThatCannotBeWrittenFailBeforeTraining) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(12));
  WriteWholeFile(dir / "a_file", "x");
  for (const auto& [extra, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"-o", dir / "missing/out.onnx"},
            "-o: " + (dir / "missing/out.onnx") + ": the folder " + (dir / "missing") + " does not exist"},
           {{"-o", dir.path().string()}, "-o: " + dir.path().string() + ": is a folder, not a file"},
           {{"-o", dir / "out.onnx", "--checkpoint-dir", dir / "a_file/ck"},
            "--checkpoint-dir: " + (dir / "a_file/ck") + ": " + (dir / "a_file") + " is not a folder"},
           {{"-o", dir / "out.onnx", "--log-dir", dir / "a_file"},
            "--log-dir: " + (dir / "a_file") + ": is not a folder"},
           {{"-o", dir / "out.onnx", "--lora-rank", "2", "--lora-save", dir / "a_file/a.npz"},
            "--lora-save: " + (dir / "a_file/a.npz") + ": " + (dir / "a_file") + " is not a folder"}}) {
    std::vector<std::string> args = {"train",       kDigitsMlp,       "--data",         csv,     "--labels", "label",
                                     "--input-map", "input=features", "--label-column", "digit", "--steps",  "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    const ProcessResult r = RunOnnxamp(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(Lines(r.err), std::vector<std::string>{"error: " + message});
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "out.onnx"));
}

// A trained weight holding NaN or infinities is refused before the first step, naming it and the first element.
TEST(TrainCliTest, NonFiniteWeightsAreRefusedByName) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(12));
  StatusOr<ir::Model> model = importer::LoadModel(kDigitsMlp);
  ASSERT_TRUE(model.ok()) << model.status().message();
  ir::Tensor w = *model->graph->FindValue("fc2.weight")->initializer();
  w.mutable_values<float>()[7] = std::numeric_limits<float>::infinity();
  w.mutable_values<float>()[9] = std::nanf("");
  model->graph->SetInitializer(model->graph->FindValue("fc2.weight"), std::move(w));
  const std::string bad = dir / "bad.onnx";
  ASSERT_TRUE(importer::SaveModel(*model, bad).ok());
  const ProcessResult r = RunOnnxamp({"train", bad, "--data", csv, "--labels", "label", "--input-map", "input=features",
                                      "--label-column", "digit", "--steps", "1", "-o", dir / "out.onnx"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(Lines(r.err).back(), "error: " + bad +
                                     ": trained initializer 'fc2.weight' has inf at element 7 (2 values are not "
                                     "finite): training would spread it to every weight");
  EXPECT_FALSE(std::filesystem::exists(dir / "out.onnx"));
}

// SIGINT stops the run after the step in progress: a checkpoint of that step (which resumes to the uninterrupted
// run's model, bit for bit), no -o, exit status 130. SIGTERM without --checkpoint-dir: nothing written, 143.
TEST(TrainCliTest, InterruptedRunsStopAfterTheStepAndKeepACheckpoint) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(40));
  auto args = [&](const std::string& steps, std::vector<std::string> more) {
    std::vector<std::string> a = {
        OnnxampBinary(),  "train",          kDigitsMlp, "--data",       csv,   "--labels",    "label", "--input-map",
        "input=features", "--label-column", "digit",    "--batch-size", "8",   "--amp",       "fp16",  "--optimizer",
        "adam",           "--lr",           "0.01",     "--steps",      steps, "--log-every", "1"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  ProcessResult r =
      RunProcessSignalled(args("10000000", {"--checkpoint-dir", dir / "ck", "-o", dir / "x.onnx"}), SIGINT, "step 5/");
  ASSERT_EQ(r.exit_code, 130) << r.err;
  const std::string marker = "train: interrupted by SIGINT after step ";
  const size_t at = r.err.find(marker);
  ASSERT_NE(at, std::string::npos) << r.err;
  const int64_t stopped = std::stoll(r.err.substr(at + marker.size()));
  EXPECT_GE(stopped, 5);
  EXPECT_NE(r.err.find(" of 10000000; the checkpoint in " + (dir / "ck") + " resumes it"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "x.onnx"));
  char step_name[32];
  std::snprintf(step_name, sizeof step_name, "step-%08lld", static_cast<long long>(stopped));
  EXPECT_EQ(ReadWholeFile(dir / "ck/latest"), std::string(step_name) + "\n");

  const std::string total = std::to_string(stopped + 3);
  r = RunProcess(args(total, {"--resume", dir / "ck", "-o", dir / "resumed.onnx"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunProcess(args(total, {"-o", dir / "whole.onnx"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "resumed.onnx"), ReadWholeFile(dir / "whole.onnx"));

  r = RunProcessSignalled(args("10000000", {"-o", dir / "y.onnx"}), SIGTERM, "step 2/");
  EXPECT_EQ(r.exit_code, 143) << r.err;
  EXPECT_NE(r.err.find("; nothing written (a run with --checkpoint-dir keeps its state when interrupted)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "y.onnx"));
}

// --schedule linear with --warmup-start-factor: the learning rates of the steps, from the JSON lines; the one-line
// errors of the two options.
TEST(TrainCliTest, LinearScheduleAndWarmupStartFactor) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(24));
  auto args = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {"train",          kDigitsMlp, "--data",      csv,
                                  "--labels",       "label",    "--input-map", "input=features",
                                  "--label-column", "digit",    "--steps",     "6",
                                  "--batch-size",   "4",        "--lr",        "0.1",
                                  "--schedule",     "linear",   "-o",          dir / "out.onnx"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  ProcessResult r =
      RunOnnxamp(args({"--warmup", "2", "--warmup-start-factor", "0.5", "--log-format", "jsonl", "--log-every", "1"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> lrs;
  for (const std::string& line : Lines(r.out)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] == "step") lrs.push_back(j["lr"].get<double>());
  }
  // Warm-up 0.05, 0.075; then 0.1 decaying linearly over the 4 remaining steps towards 0.
  const std::vector<double> expected = {0.05, 0.075, 0.1, 0.075, 0.05, 0.025};
  ASSERT_EQ(lrs.size(), expected.size()) << r.out;
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(lrs[i], expected[i], 1e-12) << i;
  for (const auto& [extra, text] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--warmup", "2", "--warmup-start-factor", "0"}, "the warm-up start factor must be in (0, 1], got 0"},
           {{"--min-lr", "0.5"}, "must not be larger, got 0.5"},
           {{"--warmup", "6"}, "linear needs total_steps (6) greater than warmup_steps (6)"},
           {{"--cycles", "2"}, "cycles (2) need the cosine schedule, not linear"},
           {{"--power", "2"}, "a power (2) needs the polynomial schedule, not linear"},
           {{"--decay-steps", "7"}, "decay_steps must be in [0, 6]"},
           {{"--timescale", "3"}, "a timescale (3) needs the inverse_sqrt schedule, not linear"}}) {
    ExpectErrorEndingWith(RunOnnxamp(args(extra)), text);
  }
}

// --class-weights as a list or a .npy file give the same model; --label-smoothing with them; the one-line errors.
TEST(TrainCliTest, ClassWeightsFromAListOrANpyFileAndLabelSmoothing) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(24));
  auto args = [&](const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> a = {"train",
                                  kDigitsMlp,
                                  "--data",
                                  csv,
                                  "--labels",
                                  "label",
                                  "--input-map",
                                  "input=features",
                                  "--label-column",
                                  "digit",
                                  "--steps",
                                  "3",
                                  "--batch-size",
                                  "8",
                                  "--threads",
                                  "1",
                                  "-o",
                                  dir / out};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const std::string list = "1,2,1,0.5,1,1,3,1,1,1";
  ProcessResult r = RunOnnxamp(args("list.onnx", {"--class-weights", list, "--label-smoothing", "0.1"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ir::Tensor w(DType::kFloat64, {10});
  const std::vector<double> values = {1, 2, 1, 0.5, 1, 1, 3, 1, 1, 1};
  std::copy(values.begin(), values.end(), w.mutable_values<double>().begin());
  ASSERT_TRUE(importer::WriteTensorFile(w, dir / "w.npy").ok());
  r = RunOnnxamp(args("npy.onnx", {"--class-weights", dir / "w.npy", "--label-smoothing", "0.1"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "list.onnx"), ReadWholeFile(dir / "npy.onnx"));
  r = RunOnnxamp(args("plain.onnx", {}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(ReadWholeFile(dir / "list.onnx"), ReadWholeFile(dir / "plain.onnx"));
  for (const auto& [extra, text] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--class-weights", "1,x,2"}, "--class-weights: 'x' (item 2) is not a number"},
           {{"--class-weights", "1,2"}, "--class-weights: 2 weights for output 'logits' of 10 classes"},
           {{"--label-smoothing", "2"}, "--label-smoothing 2: expected a value in [0, 1]"},
           {{"--class-weights", dir / "missing.npy"}, "missing.npy"}}) {
    ExpectErrorEndingWith(RunOnnxamp(args("x.onnx", extra)), text);
  }
}

// A folder with a 24-row digits CSV (labels in its column "digit"), and `onnxamp train` runs of digits_mlp on it:
// batches of 8, one thread, the model written to the folder, with `extra`, and --steps 4 and --lr 0.05 where `extra`
// gives neither.
struct DigitsRuns {
  DigitsRuns() { WriteWholeFile(csv, DigitsCsv(24)); }
  std::vector<std::string> args(const std::string& out, const std::vector<std::string>& extra) const {
    std::vector<std::string> a = {
        "train",          kDigitsMlp, "--data",       csv, "--labels",  "label", "--input-map", "input=features",
        "--label-column", "digit",    "--batch-size", "8", "--threads", "1",     "-o",          dir / out};
    a.insert(a.end(), extra.begin(), extra.end());
    for (const auto& [flag, value] : {std::pair{"--steps", "4"}, std::pair{"--lr", "0.05"}}) {
      if (std::find(extra.begin(), extra.end(), flag) == extra.end()) {
        a.push_back(flag);
        a.push_back(value);
      }
    }
    return a;
  }
  // The run, expected to succeed.
  ProcessResult run(const std::string& out, const std::vector<std::string>& extra) const {
    ProcessResult r = RunOnnxamp(args(out, extra));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r;
  }
  TempDir dir;
  const std::string csv = dir / "digits.csv";
};

// --padding-idx: the rows named (negative from the end, the flag repeatable) get no gradient, as nn.Embedding's
// padding_idx in PyTorch, on any parameter's first dim; SGD without weight decay then leaves them as they were while
// the other rows train; the one-line errors.
TEST(TrainCliTest, PaddingIdxRowsGetNoGradient) {
  DigitsRuns runs;
  runs.run("pad.onnx", {"--optimizer", "sgd", "--padding-idx", "fc1.weight=0,-1", "--padding-idx", "fc1.weight=5"});
  StatusOr<ir::Model> before = importer::LoadModel(kDigitsMlp), after = importer::LoadModel(runs.dir / "pad.onnx");
  ASSERT_TRUE(before.ok() && after.ok());
  const ir::Tensor* w0 = before->graph->FindValue("fc1.weight")->initializer();
  const ir::Tensor* w1 = after->graph->FindValue("fc1.weight")->initializer();
  ASSERT_TRUE(w0 && w1);
  const int64_t rows = w0->dims()[0], cols = w0->num_elements() / rows;
  auto row_equal = [&](int64_t r) {
    const auto a = w0->values<float>().subspan(static_cast<size_t>(r * cols), static_cast<size_t>(cols));
    const auto b = w1->values<float>().subspan(static_cast<size_t>(r * cols), static_cast<size_t>(cols));
    return std::equal(a.begin(), a.end(), b.begin());
  };
  int changed = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const bool padding = r == 0 || r == 5 || r == rows - 1;
    if (padding) EXPECT_TRUE(row_equal(r)) << "row " << r;
    changed += !padding && !row_equal(r);
  }
  EXPECT_GT(changed, rows / 2);
  for (const auto& [value, text] : std::vector<std::pair<std::string, std::string>>{
           {"fc1.weight=128", "--padding-idx fc1.weight=128: outside [-128, 128), the rows of [128,64]"},
           {"fc1.weight=1,x", "--padding-idx 'fc1.weight=1,x': 'x' is not an integer row (expected NAME=ROW[,ROW...])"},
           {"fc1.weight=", "--padding-idx 'fc1.weight=': no NAME=ROW (expected NAME=ROW[,ROW...])"},
           {"nothing=1", "--padding-idx nothing: no parameter of that name trains"}}) {
    ExpectErrorEndingWith(RunOnnxamp(runs.args("x.onnx", {"--padding-idx", value})), text);
  }
}

// A table the model looks rows up in with a row of zeros (what nn.Embedding(padding_idx=0) leaves) gets a hint naming
// --padding-idx, unless the flag names the table; a table without one gets none.
TEST(TrainCliTest, ZeroRowOfALookupTableHintsAtPaddingIdx) {
  TempDir dir;
  auto model_with_table = [&](const std::string& name, bool zero_row) {
    StatusOr<ir::Model> m = importer::LoadModel(kDigitsMlp);
    EXPECT_TRUE(m.ok()) << m.status().message();
    ir::Graph& g = *m->graph;
    ir::Value* x = g.inputs()[0];
    ir::Tensor table(DType::kFloat32, {12, 64});
    auto v = table.mutable_values<float>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = zero_row && i < 64 ? 0.0f : static_cast<float>(i % 7) * 0.1f - 0.3f;
    ir::Value* t = g.CreateValue("table");
    g.SetInitializer(t, std::move(table));
    ir::Value* ids = g.CreateValue("ids");
    ids->set_type(ir::ValueType::Tensor(DType::kInt64, ir::Shape{ir::Dim::Param("batch")}));
    ir::Value* looked_up = g.CreateValue("looked_up");
    const std::vector<ir::Use> uses = x->uses();
    for (const ir::Use& u : uses) u.node->SetInput(u.index, looked_up);
    g.InsertNode(*g.nodes().begin(), "Gather", {t, ids}, {looked_up}, "lookup");
    g.RemoveInput(x);
    g.RemoveValue(x);
    g.AddInput(ids);
    const std::string path = dir / name;
    EXPECT_TRUE(importer::SaveModel(*m, path).ok());
    return path;
  };
  ir::Tensor ids(DType::kInt64, {24}), labels(DType::kInt64, {24});
  for (int64_t i = 0; i < 24; ++i) {
    ids.mutable_values<int64_t>()[i] = i % 12;
    labels.mutable_values<int64_t>()[i] = i % 10;
  }
  ids.set_name("ids");
  labels.set_name("labels");
  ASSERT_TRUE(importer::WriteNpz({ids, labels}, dir / "ids.npz").ok());
  auto train = [&](const std::string& model, std::vector<std::string> extra) {
    std::vector<std::string> a = {"train",     model,     "--data", dir / "ids.npz", "--labels",
                                  "labels",    "--steps", "1",      "--batch-size",  "8",
                                  "--threads", "1",       "-o",     dir / "out.onnx"};
    a.insert(a.end(), extra.begin(), extra.end());
    ProcessResult r = RunOnnxamp(a);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.err;
  };
  const std::string padded = model_with_table("padded.onnx", true);
  EXPECT_NE(train(padded, {})
                .find("train: row 0 of 'table' (looked up by Gather 'lookup') is all zeros, as "
                      "nn.Embedding(padding_idx=...) leaves its padding row; PyTorch gives that row no "
                      "gradient, and the export does not say so: if it is one, give --padding-idx "
                      "table=0 (else it trains like any other row)\n"),
            std::string::npos);
  EXPECT_EQ(train(padded, {"--padding-idx", "table=0"}).find("all zeros"), std::string::npos);
  EXPECT_EQ(train(model_with_table("plain.onnx", false), {}).find("all zeros"), std::string::npos);
}

// Parameter groups: a learning-rate factor of 0 for every parameter trains nothing (the model of --lr 0); --no-decay
// on every parameter is --weight-decay 0; the groups are printed and kept across --resume; the one-line errors.
TEST(TrainCliTest, ParameterGroups) {
  const DigitsRuns d;
  const TempDir& dir = d.dir;
  auto args = [&](const std::string& out, const std::vector<std::string>& extra) { return d.args(out, extra); };
  auto run = [&](const std::string& out, const std::vector<std::string>& extra) { return d.run(out, extra); };
  run("plain.onnx", {});
  run("lr0.onnx", {"--lr", "0"});
  run("scaled0.onnx", {"--lr-scale", "weight=0", "--lr-scale", "bias=0"});
  EXPECT_EQ(ReadWholeFile(dir / "lr0.onnx"), ReadWholeFile(dir / "scaled0.onnx"));
  EXPECT_NE(ReadWholeFile(dir / "lr0.onnx"), ReadWholeFile(dir / "plain.onnx"));
  run("wd0.onnx", {"--weight-decay", "0"});
  run("nodecay.onnx", {"--weight-decay", "0.5", "--no-decay", "fc"});
  EXPECT_EQ(ReadWholeFile(dir / "wd0.onnx"), ReadWholeFile(dir / "nodecay.onnx"));
  EXPECT_NE(ReadWholeFile(dir / "wd0.onnx"), ReadWholeFile(dir / "plain.onnx"));
  // Only the fc2 weights at a factor: the others train as in the plain run, so the model differs from both.
  ProcessResult r = run("grouped.onnx", {"--no-decay-1d", "--lr-scale", "fc2\\.weight=10"});
  EXPECT_NE(r.err.find("train: 3 parameter groups: 1 parameter (8192 values) with the optimizer's settings; 2 "
                       "parameters (138 values) without weight decay; 1 parameter (1280 values) at 10x the learning "
                       "rate\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(ReadWholeFile(dir / "grouped.onnx"), ReadWholeFile(dir / "plain.onnx"));

  // Checkpointed at step 2 and resumed with the same groups: the uninterrupted run's model.
  const std::vector<std::string> groups = {"--no-decay-1d", "--lr-scale", "fc2\\.weight=10"};
  std::vector<std::string> first = groups;
  for (const std::string& a : {std::string("--checkpoint-dir"), dir / "ck", std::string("--steps"), std::string("2")}) {
    first.push_back(a);
  }
  run("first.onnx", first);
  std::vector<std::string> resumed = groups;
  resumed.push_back("--resume");
  resumed.push_back(dir / "ck");
  run("resumed.onnx", resumed);
  EXPECT_EQ(ReadWholeFile(dir / "grouped.onnx"), ReadWholeFile(dir / "resumed.onnx"));
  ExpectErrorEndingWith(RunOnnxamp(args("x.onnx", {"--resume", dir / "ck"})),
                        "option lr_scale is [], the checkpoint's [{\"factor\":10.0,\"pattern\":\"fc2\\\\.weight\"}]");

  for (const auto& [extra, text] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--lr-scale", "fc3=2"}, "--lr-scale 'fc3': matches no trained parameter"},
           {{"--lr-scale", "fc=2", "--lr-scale", "fc1=3"},
            "--lr-scale 'fc1': matches no trained parameter that an earlier --lr-scale did not take"},
           {{"--lr-scale", "fc1"}, "--lr-scale 'fc1': expected PATTERN=FACTOR"},
           {{"--lr-scale", "fc1=-1"}, "--lr-scale 'fc1=-1': the factor '-1' is not a finite number >= 0"},
           {{"--lr-scale", "fc1=1e308", "--lr", "100"},
            "--lr-scale 1e+308: the learning rate 100 times it is not finite"},
           {{"--no-decay", "norm"}, "--no-decay 'norm': matches no trained parameter"},
           {{"--no-decay", "fc("}, "--no-decay 'fc(': not a valid regular expression"}}) {
    const ProcessResult p = RunOnnxamp(args("x.onnx", extra));
    EXPECT_NE(p.exit_code, 0);
    EXPECT_NE(p.err.find(text), std::string::npos) << p.err;
  }
}

// --recompute: the same trained model, byte for byte, with the segments it reports; a checkpoint resumes with another
// setting; a bad value is a one-line error.
TEST(TrainCliTest, RecomputeTrainsTheSameModel) {
  DigitsRuns d;
  d.run("plain.onnx", {"--amp", "fp16", "--checkpoint-dir", d.dir / "ck", "--steps", "2"});
  ProcessResult r = d.run("recomputed.onnx", {"--amp", "fp16", "--recompute", "2", "--steps", "2"});
  EXPECT_NE(r.err.find("train: recompute: 2 segments, "), std::string::npos) << r.err;
  EXPECT_EQ(ReadWholeFile(d.dir / "plain.onnx"), ReadWholeFile(d.dir / "recomputed.onnx"));
  r = d.run("full.onnx", {"--amp", "fp16"});
  r = d.run("resumed.onnx", {"--amp", "fp16", "--recompute", "2", "--resume", d.dir / "ck"});
  EXPECT_EQ(ReadWholeFile(d.dir / "full.onnx"), ReadWholeFile(d.dir / "resumed.onnx"));
  ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", {"--recompute", "1"})),
                        "--recompute must be 'off', 'auto', 'cheap' or a number of segments >= 2, got '1'");
}

// --layer-decay: digits_mlp's two layers as blocks (--layer-pattern, its names carry no "layers.N") train at
// 0.5^2 and 0.5 times the rate: the model of the same factors given by --lr-scale, bit for bit; the errors.
TEST(TrainCliTest, LayerDecay) {
  const DigitsRuns d;
  const TempDir& dir = d.dir;
  const ProcessResult r = d.run("decayed.onnx", {"--layer-decay", "0.5", "--layer-pattern", "^fc(\\d)\\."});
  EXPECT_NE(r.err.find("train: 2 parameter groups: 2 parameters (8320 values) at 0.25x the learning rate; 2 "
                       "parameters (1290 values) at 0.5x the learning rate"),
            std::string::npos)
      << r.err;
  d.run("scaled.onnx", {"--lr-scale", "fc1=0.25", "--lr-scale", "fc2=0.5"});
  EXPECT_TRUE(ReadWholeFile(dir / "decayed.onnx") == ReadWholeFile(dir / "scaled.onnx"));
  ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", {"--layer-decay", "0.5"})),
                        "--layer-decay: no trained parameter's name matches the layer pattern");
  ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", {"--layer-pattern", "fc(\\d)"})),
                        "--layer-pattern needs --layer-decay");
}

// --ema: -o gets the moving average (not the live model), a run resumed from a checkpoint ends with the same one, the
// checkpoint exports it too; the option's errors.
TEST(TrainCliTest, EmaIsExportedCheckpointedAndResumed) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(24));
  auto args = [&](const std::string& out, const std::string& steps, std::vector<std::string> extra) {
    std::vector<std::string> a = {
        "train",          kDigitsMlp, "--data",       csv,      "--labels",  "label", "--input-map", "input=features",
        "--label-column", "digit",    "--batch-size", "8",      "--threads", "1",     "--lr",        "0.05",
        "--steps",        steps,      "-o",           dir / out};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  ProcessResult r = RunOnnxamp(args("plain.onnx", "4", {}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunOnnxamp(args("ema.onnx", "4", {"--ema", "0.9", "--ema-warmup"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("train: a moving average of the weights, decay 0.9 with warm-up: evaluations and -o use it"),
            std::string::npos)
      << r.err;
  EXPECT_NE(ReadWholeFile(dir / "ema.onnx"), ReadWholeFile(dir / "plain.onnx"));
  r = RunOnnxamp(args("first.onnx", "2", {"--ema", "0.9", "--ema-warmup", "--checkpoint-dir", dir / "ck"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunOnnxamp(args("resumed.onnx", "4",
                      {"--ema", "0.9", "--ema-warmup", "--resume", dir / "ck", "--checkpoint-dir", dir / "ck"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "ema.onnx"), ReadWholeFile(dir / "resumed.onnx"));
  r = RunOnnxamp({"export", dir / "ck", "-o", dir / "exported.onnx"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "ema.onnx"), ReadWholeFile(dir / "exported.onnx"));
  ExpectErrorEndingWith(RunOnnxamp(args("x.onnx", "6", {"--resume", dir / "ck"})),
                        "option ema is 0.0, the checkpoint's 0.9");
  ExpectErrorEndingWith(RunOnnxamp(args("x.onnx", "4", {"--ema", "1"})), "--ema 1: expected a decay in (0, 1)");
  ExpectErrorEndingWith(RunOnnxamp(args("x.onnx", "4", {"--ema-warmup"})), "--ema-warmup needs --ema");
}

// --swa-start: -o gets the equal average of the weights after steps 3 and 4, a run resumed from step 3's checkpoint
// ends with the same average, the checkpoint exports it; with --ema it is an error.
TEST(TrainCliTest, SwaIsExportedCheckpointedAndResumed) {
  const DigitsRuns d;
  const TempDir& dir = d.dir;
  d.run("plain.onnx", {});
  const ProcessResult r = d.run("swa.onnx", {"--swa-start", "2"});
  EXPECT_NE(r.err.find("train: stochastic weight averaging, the equal average of the weights after each step from "
                       "step 3 on: evaluations and -o use it"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(ReadWholeFile(dir / "swa.onnx") == ReadWholeFile(dir / "plain.onnx"));
  d.run("first.onnx", {"--swa-start", "2", "--steps", "3", "--checkpoint-dir", dir / "ck"});
  d.run("resumed.onnx", {"--swa-start", "2", "--resume", dir / "ck", "--checkpoint-dir", dir / "ck"});
  EXPECT_TRUE(ReadWholeFile(dir / "swa.onnx") == ReadWholeFile(dir / "resumed.onnx"));
  const ProcessResult e = RunOnnxamp({"export", dir / "ck", "-o", dir / "exported.onnx"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_TRUE(ReadWholeFile(dir / "swa.onnx") == ReadWholeFile(dir / "exported.onnx"));
  ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", {"--swa-start", "2", "--ema", "0.9"})),
                        "--ema and --swa-start: keep a moving average or an equal one, not both");
}

// LoRA: -o has the original structure with the adapters merged (frozen initializers unchanged); the adapters saved
// with --lora-save and read back with --lora-init at --lr 0 give the same model; a run resumed from a checkpoint
// ends where the uninterrupted one does and the checkpoint exports it merged; the one-line errors.
TEST(TrainCliTest, LoraMergesSavesResumesAndExports) {
  const DigitsRuns d;
  const TempDir& dir = d.dir;
  const std::vector<std::string> lora = {"--lora-rank", "2", "--lora-alpha", "4", "--lora-train", "fc2\\.bias"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), lora.begin(), lora.end());
    return extra;
  };
  const ProcessResult r = d.run("lora.onnx", with({"--lora-save", dir / "adapters.npz"}));
  EXPECT_NE(r.err.find("train: LoRA rank 2, scale 2, on 2 weights (9472 values frozen beside them)"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("5 parameters (670 values)"), std::string::npos) << r.err;
  StatusOr<ir::Model> original = importer::LoadModel(kDigitsMlp);
  StatusOr<ir::Model> trained = importer::LoadModel(dir / "lora.onnx");
  ASSERT_TRUE(original.ok() && trained.ok());
  EXPECT_EQ(trained->graph->num_nodes(), original->graph->num_nodes());
  for (const ir::Value* v : original->graph->initializers()) {
    const ir::Value* t = trained->graph->FindValue(v->name());
    ASSERT_TRUE(t && t->initializer()) << v->name();
    const bool same = t->initializer()->SameContents(*v->initializer());
    EXPECT_EQ(same, v->name() == "fc1.bias") << v->name() << ": only fc1.bias is neither adapted nor trained";
  }
  StatusOr<std::vector<ir::Tensor>> adapters = importer::ReadTensors(dir / "adapters.npz");
  ASSERT_TRUE(adapters.ok()) << adapters.status().message();
  std::set<std::string> names;
  for (const ir::Tensor& t : *adapters)
    names.insert(t.name() + (t.dims() == std::vector<int64_t>{2, 64} ? " [2, 64]" : ""));
  EXPECT_EQ(names, (std::set<std::string>{"fc1.weight.lora_A [2, 64]", "fc1.weight.lora_B", "fc2.weight.lora_A",
                                          "fc2.weight.lora_B"}));
  // The saved adapters merged by a run that trains nothing: the fc weights of lora.onnx (fc2.bias is not saved).
  d.run("again.onnx", {"--lora-rank", "2", "--lora-alpha", "4", "--lora-init", dir / "adapters.npz", "--lr", "0"});
  StatusOr<ir::Model> again = importer::LoadModel(dir / "again.onnx");
  ASSERT_TRUE(again.ok());
  for (const char* w : {"fc1.weight", "fc2.weight"}) {
    const ir::Tensor& a = *again->graph->FindValue(w)->initializer();
    const ir::Tensor& b = *trained->graph->FindValue(w)->initializer();
    const auto x = a.values<float>();
    const auto y = b.values<float>();
    float most = 0;
    for (size_t i = 0; i < x.size(); ++i) most = std::max(most, std::fabs(x[i] - y[i]));
    EXPECT_LT(most, 1e-6f) << w;
  }
  d.run("first.onnx", with({"--steps", "3", "--checkpoint-dir", dir / "ck"}));
  d.run("resumed.onnx", with({"--resume", dir / "ck", "--checkpoint-dir", dir / "ck"}));
  EXPECT_TRUE(ReadWholeFile(dir / "lora.onnx") == ReadWholeFile(dir / "resumed.onnx"));
  const ProcessResult e = RunOnnxamp({"export", dir / "ck", "-o", dir / "exported.onnx"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_TRUE(ReadWholeFile(dir / "lora.onnx") == ReadWholeFile(dir / "exported.onnx"));
  ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", {"--lora-rank", "3", "--resume", dir / "ck"})),
                        "option lora_alpha is 8.0, the checkpoint's 4.0 (only --steps, --epochs, --threads and "
                        "--recompute may change on resume)");
  ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", {"--lora-alpha", "4"})),
                        "--lora-alpha, --lora-rslora, --lora-targets, --lora-dropout, --lora-train, --lora-init and "
                        "--lora-save need --lora-rank");
  ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", {"--lora-rank", "2", "--lora-targets", "nothing"})),
                        "LoRA: no weight to adapt matches --lora-targets 'nothing' (float32 initializers read only "
                        "as the second input of MatMul, Gemm or, when named by --lora-targets, Conv)");
  ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", {"--lora-rank", "2", "--lora-dropout", "1"})),
                        "--lora-dropout must be in [0, 1), got 1");
}

// --update-bn: on cnn.onnx with SWA, -o has the averaged weights of the plain SWA run and other BatchNormalization
// statistics (recomputed, and written only there: the final checkpoint keeps the averaged ones); the one-line errors.
// `n` samples for models/cnn.onnx in an .npz: standard-normal "input" [n, 3, 32, 32] (seeded) and "labels" i % 10.
bool WriteCnnData(const std::string& path, int64_t n, uint32_t seed) {
  ir::Tensor x(DType::kFloat32, {n, 3, 32, 32});
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  for (float& v : x.mutable_values<float>()) v = normal(gen);
  x.set_name("input");
  ir::Tensor y(DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) y.mutable_values<int64_t>()[i] = i % 10;
  y.set_name("labels");
  return importer::WriteNpz({x, y}, path).ok();
}

// cnn with its BatchNormalizations in training mode (training_mode = 1 and the running-statistics outputs, as a
// training-mode torch.onnx.export writes them): train says evaluation runs them in inference mode, and
// --export-inference-mode and `export --inference-mode` write them so.
TEST(TrainCliTest, TrainingModeNodesAreEvaluatedAndExportedInInferenceMode) {
  const TempDir dir;
  StatusOr<ir::Model> m = importer::LoadModel(ModelsDir() + "/cnn.onnx");
  ASSERT_TRUE(m.ok()) << m.status().message();
  int bns = 0;
  for (ir::Node* n : m->graph->nodes()) {
    if (n->op_type() != "BatchNormalization") continue;
    n->SetAttribute(ir::Attribute::Int("training_mode", 1));
    for (int i = 1; i <= 2; ++i) n->SetOutput(i, m->graph->CreateValue(m->graph->UniqueName(n->name() + "_stat")));
    ++bns;
  }
  ASSERT_EQ(bns, 6);
  ASSERT_TRUE(importer::SaveModel(*m, dir / "bn_train.onnx").ok());
  ASSERT_TRUE(WriteCnnData(dir / "cnn.npz", 8, 2));
  auto training_modes = [](const std::string& path) {
    std::vector<int64_t> modes;
    StatusOr<ir::Model> model = importer::LoadModel(path);
    EXPECT_TRUE(model.ok()) << model.status().message();
    if (!model.ok()) return modes;
    for (const ir::Node* n : model->graph->nodes()) {
      if (n->op_type() != "BatchNormalization") continue;
      modes.push_back(n->GetInt("training_mode", 0));
      // Inference mode lists one output (ONNX's checker refuses empty running-statistics outputs after it).
      if (modes.back() == 0) {
        EXPECT_EQ(n->outputs().size(), 1u) << n->Describe();
      }
    }
    return modes;
  };
  for (bool inference : {false, true}) {
    std::vector<std::string> a = {
        "train", dir / "bn_train.onnx", "--data", dir / "cnn.npz", "--labels", "labels", "--steps",
        "2",     "--batch-size",        "4",      "--threads",     "1",        "-o",     dir / "out.onnx"};
    if (inference) a.push_back("--export-inference-mode");
    ProcessResult r = RunOnnxamp(a);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("train: evaluation runs 6 BatchNormalization nodes in inference mode"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("--export-inference-mode writes -o so") != std::string::npos, !inference) << r.err;
    EXPECT_EQ(r.err.find("6 BatchNormalization nodes written in inference mode") != std::string::npos, inference)
        << r.err;
    EXPECT_EQ(training_modes(dir / "out.onnx"), std::vector<int64_t>(6, inference ? 0 : 1));
  }
  ProcessResult e = RunOnnxamp({"export", dir / "bn_train.onnx", "--inference-mode", "-o", dir / "exported.onnx"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.err.find("(fp32; 6 BatchNormalization nodes in inference mode)"), std::string::npos) << e.err;
  EXPECT_EQ(training_modes(dir / "exported.onnx"), std::vector<int64_t>(6, 0));
}

TEST(TrainCliTest, UpdateBnRecomputesTheExportedStatistics) {
  const TempDir dir;
  ASSERT_TRUE(WriteCnnData(dir / "cnn.npz", 20, 3));
  auto args = [&](const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> a = {"train",        ModelsDir() + "/cnn.onnx",
                                  "--data",       dir / "cnn.npz",
                                  "--labels",     "labels",
                                  "--optimizer",  "sgd",
                                  "--lr",         "0.05",
                                  "--batch-size", "8",
                                  "--steps",      "6",
                                  "--threads",    "1",
                                  "-o",           dir / out};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  ProcessResult swa = RunOnnxamp(args("swa.onnx", {"--swa-start", "2"}));
  ASSERT_EQ(swa.exit_code, 0) << swa.err;
  ProcessResult bn = RunOnnxamp(args("bn.onnx", {"--swa-start", "2", "--update-bn"}));
  ASSERT_EQ(bn.exit_code, 0) << bn.err;
  EXPECT_NE(bn.err.find("BatchNormalization statistics recomputed over the training data (3 batches"),
            std::string::npos)
      << bn.err;
  StatusOr<ir::Model> a = importer::LoadModel(dir / "swa.onnx");
  StatusOr<ir::Model> b = importer::LoadModel(dir / "bn.onnx");
  ASSERT_TRUE(a.ok() && b.ok());
  int stats = 0;
  for (const ir::Value* v : a->graph->initializers()) {
    const bool statistic = v->name().find("running_") != std::string::npos;
    stats += statistic;
    const bool same = v->initializer()->SameContents(*b->graph->FindValue(v->name())->initializer());
    EXPECT_EQ(same, !statistic) << v->name();
  }
  EXPECT_GT(stats, 0);
  ExpectErrorEndingWith(RunOnnxamp(args("x.onnx", {"--update-bn"})),
                        "--update-bn recomputes the statistics of averaged weights: it needs --swa-start or --ema");
  ir::Tensor features(DType::kFloat32, {8, 256});
  features.set_name("input");
  ir::Tensor classes(DType::kInt64, {8});
  classes.set_name("labels");
  ASSERT_TRUE(importer::WriteNpz({features, classes}, dir / "mlp.npz").ok());
  ExpectErrorEndingWith(RunOnnxamp({"train", ModelsDir() + "/mlp.onnx", "--data", dir / "mlp.npz", "--labels", "labels",
                                    "--steps", "1", "--ema", "0.9", "--update-bn", "-o", dir / "x.onnx"}),
                        "mlp.onnx has no BatchNormalization statistics");
}

// The optimizers' options: their defaults given explicitly change nothing (bit for bit), other values change the
// model; the options are kept in checkpoints; RMSprop and Lion resume bit for bit; an option of another optimizer is
// an error.
TEST(TrainCliTest, OptimizerOptions) {
  const DigitsRuns d;
  const TempDir& dir = d.dir;
  // The run, expected to succeed: the model it wrote.
  auto run = [&](const std::string& out, const std::vector<std::string>& extra) {
    d.run(out, extra);
    return ReadWholeFile(dir / out);
  };
  const std::string adamw = run("adamw.onnx", {});
  EXPECT_EQ(run("defaults.onnx", {"--beta1", "0.9", "--beta2", "0.999", "--eps", "1e-8"}), adamw);
  for (const std::vector<std::string>& changed :
       {std::vector<std::string>{"--beta1", "0.5"}, {"--beta2", "0.9"}, {"--eps", "0.1"}, {"--amsgrad"}}) {
    EXPECT_NE(run("changed.onnx", changed), adamw) << changed[0];
  }
  const std::string sgd = run("sgd.onnx", {"--optimizer", "sgd", "--momentum", "0.9"});
  EXPECT_NE(run("dampened.onnx", {"--optimizer", "sgd", "--momentum", "0.9", "--dampening", "0.5"}), sgd);
  run("ck.onnx", {"--amsgrad", "--beta2", "0.95", "--checkpoint-dir", dir / "ck"});
  const nlohmann::json options = nlohmann::json::parse(ReadWholeFile(dir / "ck/step-00000004/trainer.json"))["options"];
  EXPECT_EQ(options["amsgrad"], true);
  EXPECT_EQ(options["beta2"], 0.95);

  // RMSprop and Lion: their defaults (RMSprop's alpha 0.99 and eps 1e-8, Lion's betas 0.9 and 0.99) given explicitly
  // change nothing; their options change the model.
  const std::string rmsprop = run("rmsprop.onnx", {"--optimizer", "rmsprop", "--lr", "0.01"});
  EXPECT_EQ(run("r.onnx", {"--optimizer", "rmsprop", "--lr", "0.01", "--alpha", "0.99", "--eps", "1e-8"}), rmsprop);
  for (const std::vector<std::string>& changed :
       {std::vector<std::string>{"--alpha", "0.9"}, {"--centered"}, {"--momentum", "0.9"}, {"--weight-decay", "0.1"}}) {
    std::vector<std::string> a = {"--optimizer", "rmsprop", "--lr", "0.01"};
    a.insert(a.end(), changed.begin(), changed.end());
    EXPECT_NE(run("r.onnx", a), rmsprop) << changed[0];
  }
  const std::string adagrad = run("adagrad.onnx", {"--optimizer", "adagrad", "--lr", "0.01"});
  EXPECT_EQ(run("a.onnx", {"--optimizer", "adagrad", "--lr", "0.01", "--eps", "1e-10", "--lr-decay", "0",
                           "--initial-accumulator", "0"}),
            adagrad);
  for (const std::vector<std::string>& changed :
       {std::vector<std::string>{"--lr-decay", "0.5"}, {"--initial-accumulator", "0.1"}, {"--eps", "1e-3"}}) {
    std::vector<std::string> a = {"--optimizer", "adagrad", "--lr", "0.01"};
    a.insert(a.end(), changed.begin(), changed.end());
    EXPECT_NE(run("a.onnx", a), adagrad) << changed[0];
  }
  const std::string radam = run("radam.onnx", {"--optimizer", "radam", "--lr", "0.01"});
  EXPECT_EQ(
      run("r2.onnx", {"--optimizer", "radam", "--lr", "0.01", "--beta1", "0.9", "--beta2", "0.999", "--eps", "1e-8"}),
      radam);
  // The first steps are momentum SGD on the bias-corrected first moment (rho_t <= 5): beta1 shows, beta2 not yet.
  EXPECT_TRUE(run("r2.onnx", {"--optimizer", "radam", "--lr", "0.01", "--beta1", "0.5"}) != radam);
  // RAdamW: the decoupled decay is another optimizer than L2 at the same weight decay.
  const std::string radam_l2 = run("r3.onnx", {"--optimizer", "radam", "--lr", "0.01", "--weight-decay", "1"});
  EXPECT_TRUE(run("r4.onnx", {"--optimizer", "radam", "--lr", "0.01", "--weight-decay", "1",
                              "--decoupled-weight-decay"}) != radam_l2);
  // NAdam: its defaults (betas 0.9 and 0.999, eps 1e-8, momentum decay 4e-3) given explicitly change nothing; its
  // options change the model.
  const std::string nadam = run("nadam.onnx", {"--optimizer", "nadam", "--lr", "0.01"});
  EXPECT_TRUE(nadam != adamw);
  EXPECT_TRUE(run("n.onnx", {"--optimizer", "nadam", "--lr", "0.01", "--beta1", "0.9", "--beta2", "0.999", "--eps",
                             "1e-8", "--momentum-decay", "4e-3"}) == nadam);
  for (const std::vector<std::string>& changed :
       {std::vector<std::string>{"--momentum-decay", "0.5"}, {"--beta1", "0.5"}, {"--weight-decay", "1"}}) {
    std::vector<std::string> a = {"--optimizer", "nadam", "--lr", "0.01"};
    a.insert(a.end(), changed.begin(), changed.end());
    EXPECT_TRUE(run("n.onnx", a) != nadam) << changed[0];
  }
  const std::string lion = run("lion.onnx", {"--optimizer", "lion", "--lr", "0.001"});
  EXPECT_NE(lion, adamw);
  EXPECT_EQ(run("l.onnx", {"--optimizer", "lion", "--lr", "0.001", "--beta1", "0.9", "--beta2", "0.99"}), lion);
  EXPECT_NE(run("l.onnx", {"--optimizer", "lion", "--lr", "0.001", "--weight-decay", "1"}), lion);
  // Checkpointed at step 2 and resumed: the uninterrupted run's model, with the optimizer's state (torch's names).
  for (const std::vector<std::string>& o :
       {std::vector<std::string>{"--optimizer", "rmsprop", "--momentum", "0.5", "--centered"},
        std::vector<std::string>{"--optimizer", "lion", "--weight-decay", "0.1"},
        std::vector<std::string>{"--optimizer", "nadam", "--weight-decay", "0.1", "--decoupled-weight-decay"}}) {
    const std::string whole = run("whole.onnx", o);
    std::vector<std::string> first = o;
    for (const std::string& a :
         {std::string("--checkpoint-dir"), dir / (o[1] + "-ck"), std::string("--steps"), std::string("2")}) {
      first.push_back(a);
    }
    run("first.onnx", first);
    std::vector<std::string> resumed = o;
    resumed.push_back("--resume");
    resumed.push_back(dir / (o[1] + "-ck"));
    EXPECT_EQ(run("resumed.onnx", resumed), whole) << o[1];
    const nlohmann::json t = nlohmann::json::parse(ReadWholeFile(dir / (o[1] + "-ck/step-00000002/trainer.json")));
    const nlohmann::json state = o[1] == "lion"    ? nlohmann::json({"exp_avg"})
                                 : o[1] == "nadam" ? nlohmann::json({"exp_avg", "exp_avg_sq"})
                                                   : nlohmann::json({"grad_avg", "momentum_buffer", "square_avg"});
    EXPECT_EQ(t["optimizer"]["state"], state) << t.dump();
  }
  ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", {"--optimizer", "lion", "--resume", dir / "lion-ck"})),
                        "option lion_weight_decay is 0.0, the checkpoint's 0.1 (only --steps, --epochs, --threads and "
                        "--recompute may change on resume)");

  // An option the optimizer does not take is a usage error naming those that do.
  for (const auto& [extra, text] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--momentum", "0.9"}, "--momentum is an option of --optimizer sgd and rmsprop, not of adamw"},
           {{"--optimizer", "sgd", "--amsgrad"}, "--amsgrad is an option of --optimizer adam and adamw, not of sgd"},
           {{"--optimizer", "lion", "--eps", "1e-6"},
            "--eps is an option of --optimizer adam, adamw, radam, nadam, rmsprop and adagrad, not of lion"},
           {{"--optimizer", "adam", "--centered"}, "--centered is an option of --optimizer rmsprop, not of adam"},
           {{"--optimizer", "rmsprop", "--beta1", "0.5"},
            "--beta1 is an option of --optimizer adam, adamw, radam, nadam and lion, not of rmsprop"},
           {{"--momentum-decay", "0.1"}, "--momentum-decay is an option of --optimizer nadam, not of adamw"},
           {{"--decoupled-weight-decay"},
            "--decoupled-weight-decay is an option of --optimizer radam and nadam, not of adamw"},
           {{"--optimizer", "nadam", "--momentum-decay", "-1"},
            "nadam: momentum_decay must be finite and >= 0, got -1"},
           {{"--optimizer", "rmsprop", "--alpha", "2"}, "rmsprop: alpha must be in [0, 1], got 2"},
           {{"--optimizer", "lion", "--beta2", "1"}, "lion: beta2 must be in [0, 1), got 1"},
           {{"--optimizer", "adagrad", "--alpha", "0.5"},
            "--alpha is an option of --optimizer rmsprop, not of adagrad"},
           {{"--lr-decay", "0.1"}, "--lr-decay is an option of --optimizer adagrad, not of adamw"},
           {{"--optimizer", "adagrad", "--initial-accumulator", "-1"},
            "adagrad: initial_accumulator_value must be finite and >= 0, got -1"},
           {{"--optimizer", "adafactor"},
            "--optimizer adafactor: expected sgd, adam, adamw, radam, nadam, rmsprop, adagrad or lion"}}) {
    ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", extra)), text);
  }
}

// GradScaler's arguments: PyTorch's defaults given explicitly change nothing (bit for bit); others drive the scale
// each step uses (--growth-interval 1: every clean step grows it, an overflow backs it off); they need dynamic scaling,
// and the scaler's checks are one-line errors.
TEST(TrainCliTest, LossScalerOptions) {
  const DigitsRuns d;
  const TempDir& dir = d.dir;
  const std::vector<std::string> fp16 = {"--amp", "fp16", "--log-format", "jsonl", "--log-every", "1"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), fp16.begin(), fp16.end());
    return extra;
  };
  const ProcessResult plain = d.run("plain.onnx", fp16);
  d.run("defaults.onnx", with({"--init-scale", "65536", "--growth-factor", "2", "--backoff-factor", "0.5",
                               "--growth-interval", "2000"}));
  EXPECT_EQ(ReadWholeFile(dir / "defaults.onnx"), ReadWholeFile(dir / "plain.onnx"));
  const ProcessResult grown = d.run(
      "grown.onnx", with({"--init-scale", "1024", "--growth-factor", "4", "--growth-interval", "1", "--lr", "0.001"}));
  std::vector<double> scales;
  std::vector<bool> skipped;
  for (const std::string& line : Lines(grown.out)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] != "step") continue;
    scales.push_back(j["loss_scale"]);
    skipped.push_back(j["skipped"]);
  }
  // Grown by 4 after each clean step, until the gradients at 16384 overflow in FP16: skipped, backed off by 0.5.
  EXPECT_EQ(scales, (std::vector<double>{1024, 4096, 16384, 8192})) << grown.out;
  EXPECT_EQ(skipped, (std::vector<bool>{false, false, true, false})) << grown.out;
  for (const auto& [extra, text] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--growth-interval", "5"}, "they need --amp fp16 and no --loss-scale"},
           {{"--amp", "fp16", "--loss-scale", "128", "--growth-factor", "3"},
            "they need --amp fp16 and no --loss-scale"},
           {{"--amp", "fp16", "--growth-factor", "1"}, "loss scaler: growth_factor must be finite and > 1, got 1"},
           {{"--amp", "fp16", "--backoff-factor", "1.5"}, "loss scaler: backoff_factor must be in (0, 1), got 1.5"},
           {{"--amp", "fp16", "--growth-interval", "0"}, "--growth-interval: '0' must be a whole number >= 1"},
           {{"--amp", "fp16", "--init-scale", "1e39"},
            "loss scaler: init_scale must be a finite float32 > 0, got 1e+39"}}) {
    ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", extra)), text);
  }
}

// --clip-value: a bound above every gradient element changes nothing (bit for bit), a small one changes the model;
// it is an option in checkpoints; with --clip-norm, or not positive, it is an error.
TEST(TrainCliTest, ClipValue) {
  const DigitsRuns d;
  const TempDir& dir = d.dir;
  d.run("plain.onnx", {"--optimizer", "sgd"});
  d.run("loose.onnx", {"--optimizer", "sgd", "--clip-value", "1e30"});
  EXPECT_TRUE(ReadWholeFile(dir / "loose.onnx") == ReadWholeFile(dir / "plain.onnx"));
  d.run("tight.onnx", {"--optimizer", "sgd", "--clip-value", "1e-3", "--checkpoint-dir", dir / "ck"});
  EXPECT_FALSE(ReadWholeFile(dir / "tight.onnx") == ReadWholeFile(dir / "plain.onnx"));
  const nlohmann::json options = nlohmann::json::parse(ReadWholeFile(dir / "ck/step-00000004/trainer.json"))["options"];
  EXPECT_EQ(options["clip_value"], 1e-3);
  ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", {"--clip-value", "1", "--clip-norm", "1"})),
                        "--clip-norm and --clip-value: clip by the norm or by value, not both");
  ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", {"--clip-value", "-1"})),
                        "--clip-norm 0, --clip-value -1: expected finite values > 0 (0: no clipping");
  // Below float32's smallest value the clamp's bound would be 0: refused rather than clamping every gradient to 0.
  ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", {"--clip-value", "1e-50"})),
                        "--clip-value 1e-50: expected finite values > 0 (0: no clipping; --clip-value a positive "
                        "float32)");
}

// --schedule plateau: a validation loss that stops improving lowers the rate by --gamma (--patience 0: at the first
// evaluation without an improvement; --plateau-threshold 0.9: only a loss below a tenth of the best improves), which
// the step records show; a run resumed from a checkpoint continues the plateau's state and ends with the
// uninterrupted run's model; the option errors.
TEST(TrainCliTest, PlateauScheduleFollowsTheValidationLoss) {
  const DigitsRuns d;
  const TempDir& dir = d.dir;
  const std::vector<std::string> plateau = {
      "--schedule", "plateau", "--val-split",         "0.25", "--eval-every", "2",     "--patience",  "0",
      "--gamma",    "0.5",     "--plateau-threshold", "0.9",  "--log-format", "jsonl", "--log-every", "1",
      "--steps",    "8"};
  const ProcessResult whole = d.run("whole.onnx", plateau);
  std::vector<double> lrs;
  for (const std::string& line : Lines(whole.out)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] == "step") lrs.push_back(j["lr"]);
  }
  // The evaluation after step 2 sets the best; those after steps 4 and 6 do not beat it by 90%: each halves the rate
  // (the one after step 8 lowers it for the steps a resumed run would take).
  EXPECT_EQ(lrs, (std::vector<double>{0.05, 0.05, 0.05, 0.05, 0.025, 0.025, 0.0125, 0.0125})) << whole.out;
  EXPECT_NE(
      (whole.out + whole.err).find("no better validation loss in 1 evaluations: the learning rate falls to 0.025"),
      std::string::npos)
      << whole.out << whole.err;

  std::vector<std::string> first = plateau;
  first.back() = "4";
  first.push_back("--checkpoint-dir");
  first.push_back(dir / "ck");
  d.run("first.onnx", first);
  const nlohmann::json saved =
      nlohmann::json::parse(ReadWholeFile(dir / "ck/step-00000004/trainer.json"))["lr_schedule"]["plateau"];
  EXPECT_EQ(saved["lr"], lrs[4]) << saved.dump();
  EXPECT_TRUE(saved["best"].is_number()) << saved.dump();
  std::vector<std::string> resumed = plateau;
  resumed.push_back("--resume");
  resumed.push_back(dir / "ck");
  d.run("resumed.onnx", resumed);
  EXPECT_TRUE(ReadWholeFile(dir / "resumed.onnx") == ReadWholeFile(dir / "whole.onnx"));
  std::vector<std::string> other = resumed;
  other[std::find(other.begin(), other.end(), "--patience") - other.begin() + 1] = "3";
  ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", other)),
                        "option patience is 3, the checkpoint's 0 (only --steps, "
                        "--epochs, --threads and --recompute may change on resume)");

  for (const auto& [extra, text] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--schedule", "plateau", "--val-split", "0.25"},
            "--schedule plateau needs --eval-every (and --val-data or --val-split): it follows the validation loss"},
           {{"--patience", "3"}, "--patience, --cooldown and --plateau-threshold need --schedule plateau"},
           {{"--schedule", "plateau", "--val-split", "0.25", "--eval-every", "2", "--gamma", "1"},
            "lr schedule: plateau's factor (gamma) must be in [0, 1), got 1"},
           {{"--schedule", "plateau", "--val-split", "0.25", "--eval-every", "2", "--cooldown", "-1"},
            "--cooldown: '-1' must be a whole number >= 0"}}) {
    ExpectErrorEndingWith(RunOnnxamp(d.args("x.onnx", extra)), text);
  }
}

// The AMP precision policy, as `onnxamp convert` takes it: with every Gemm kept in FP32, FP16 AMP computes what FP32
// training computes (the loss scale is a power of two), bit for bit; --policy FILE does the same; a node kept by
// name; the errors; a resumed run must keep the policy.
TEST(TrainCliTest, AmpPolicyOptions) {
  const DigitsRuns d;
  const TempDir& dir = d.dir;
  auto args = [&](const std::string& out, const std::vector<std::string>& extra) { return d.args(out, extra); };
  auto run = [&](const std::string& out, const std::vector<std::string>& extra) { return d.run(out, extra); };
  run("fp32.onnx", {});
  run("fp16.onnx", {"--amp", "fp16"});
  ProcessResult r = run("kept.onnx", {"--amp", "fp16", "--keep-op", "Gemm"});
  EXPECT_NE(r.err.find("FP16 AMP (0 nodes in low precision)"), std::string::npos) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "kept.onnx"), ReadWholeFile(dir / "fp32.onnx"));
  EXPECT_NE(ReadWholeFile(dir / "fp16.onnx"), ReadWholeFile(dir / "fp32.onnx"));
  WriteWholeFile(dir / "policy.json", R"({"keep": ["Gemm"]})");
  run("file.onnx", {"--amp", "fp16", "--policy", dir / "policy.json"});
  EXPECT_EQ(ReadWholeFile(dir / "file.onnx"), ReadWholeFile(dir / "fp32.onnx"));
  r = run("node.onnx", {"--amp", "bf16", "--keep-node", "fc1"});
  EXPECT_NE(r.err.find("BF16 AMP (1 node in low precision)"), std::string::npos) << r.err;

  // The FP16 exports convert with the run's policy: fc1 stays FP32, from the run and from its checkpoint.
  run("first.onnx", {"--amp", "fp16", "--keep-node", "fc1", "--checkpoint-dir", dir / "ck", "--steps", "2",
                     "--export-precision", "fp16"});
  r = RunOnnxamp({"export", dir / "ck", "--precision", "fp16", "-o", dir / "exported.onnx"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "exported.onnx"), ReadWholeFile(dir / "first.onnx"));
  StatusOr<ir::Model> exported = importer::LoadModel(dir / "first.onnx");
  ASSERT_TRUE(exported.ok()) << exported.status().message();
  EXPECT_EQ(exported->graph->FindValue("fc1.weight")->initializer()->dtype(), DType::kFloat32);
  EXPECT_EQ(exported->graph->FindValue("fc2.weight")->initializer()->dtype(), DType::kFloat16);
  run("resumed.onnx", {"--amp", "fp16", "--keep-node", "fc1", "--resume", dir / "ck"});
  run("whole.onnx", {"--amp", "fp16", "--keep-node", "fc1"});
  EXPECT_EQ(ReadWholeFile(dir / "resumed.onnx"), ReadWholeFile(dir / "whole.onnx"));
  ExpectErrorEndingWith(RunOnnxamp(args("x.onnx", {"--amp", "fp16", "--resume", dir / "ck"})), "option amp_policy is ");
  ExpectErrorEndingWith(
      RunOnnxamp(args("x.onnx", {"--keep-op", "Gemm"})),
      "--keep-op, --force-low-op, --keep-node, --force-low-node and --policy need --amp fp16 or bf16");
  ExpectErrorEndingWith(RunOnnxamp(args("x.onnx", {"--amp", "fp16", "--keep-node", "fc("})),
                        "--keep-node: invalid node pattern 'fc('");
  ExpectErrorEndingWith(RunOnnxamp(args("x.onnx", {"--amp", "fp16", "--policy", dir / "missing.json"})),
                        "missing.json");

  // The range rules on the first batch (its 8 rows in file order): fc1's outputs reach 14.3 there, so --data-max 10
  // keeps it, the Relu reading them and fc2 FP32; the policy they make resumes like any other.
  r = run("ranged.onnx", {"--amp", "fp16", "--data-max", "10"});
  EXPECT_NE(r.err.find("train: kept in FP32 by the range rules: fc1 (Gemm): --data-max 10: output 'fc1' reaches "
                       "|x| = 14.3 on the samples"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("FP16 AMP (0 nodes in low precision)"), std::string::npos) << r.err;
  run("ranged_first.onnx", {"--amp", "fp16", "--data-max", "10", "--checkpoint-dir", dir / "ck2", "--steps", "2"});
  run("ranged_resumed.onnx", {"--amp", "fp16", "--data-max", "10", "--resume", dir / "ck2"});
  EXPECT_EQ(ReadWholeFile(dir / "ranged_resumed.onnx"), ReadWholeFile(dir / "ranged.onnx"));
  ExpectErrorEndingWith(RunOnnxamp(args("x.onnx", {"--data-max", "10"})),
                        "--init-max, --data-max and --max-reduction-depth need --amp fp16 or bf16");
}

// --keep-best: -o gets the model of the best evaluation (the same file as a run that stops at that step);
// --early-stop N ends the run after N evaluations without a better one; both carry across --resume; the errors of
// the three options. The data
// cannot be learnt at this learning rate, so the validation loss rises after the first evaluation.
TEST(TrainCliTest, KeepBestAndEarlyStop) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(60));
  auto args = [&](const std::string& steps, const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> a = {
        "train",          kDigitsMlp, "--data",      csv,   "--labels",     "label", "--input-map", "input=features",
        "--label-column", "digit",    "--steps",     steps, "--batch-size", "8",     "--threads",   "1",
        "--val-split",    "0.25",     "--optimizer", "sgd", "--lr",         "0.5",   "-o",          dir / out};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  ProcessResult r = RunOnnxamp(args("12", "best.onnx", {"--eval-every", "2", "--keep-best", "--log-format", "jsonl"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  double best_loss = 1e300;
  int64_t best_step = -1;
  nlohmann::json done;
  for (const std::string& line : Lines(r.out)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] == "eval" && j["val_loss"].get<double>() < best_loss) {
      best_loss = j["val_loss"].get<double>();
      best_step = j["step"].get<int64_t>();
    }
    if (j["type"] == "done") done = j;
  }
  ASSERT_GT(best_step, 0) << r.out;
  ASSERT_LT(best_step, 12) << "the test needs a best evaluation before the last step: " << r.out;
  EXPECT_EQ(done.value("best_step", int64_t{-1}), best_step) << r.out;
  EXPECT_NE(r.err.find("exported the best, after step " + std::to_string(best_step)), std::string::npos) << r.err;
  r = RunOnnxamp(args(std::to_string(best_step), "stopped.onnx", {}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "best.onnx"), ReadWholeFile(dir / "stopped.onnx"));

  r = RunOnnxamp(args("12", "early.onnx", {"--eval-every", "2", "--early-stop", "2", "--log-format", "jsonl"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int64_t stop = best_step + 2 * 2;  // two evaluations, two steps apart, after the best
  EXPECT_NE(r.err.find("stopping early after step " + std::to_string(stop) +
                       ": 2 evaluations without a better "
                       "validation loss than step " +
                       std::to_string(best_step) + "'s"),
            std::string::npos)
      << r.err;
  const nlohmann::json last = nlohmann::json::parse(Lines(r.out).back());
  EXPECT_EQ(last["steps"], stop) << r.out;
  EXPECT_EQ(last["stopped_early"], true) << r.out;

  // Interrupted after step 6 and resumed: the checkpoint carries the best so far (its model in best.safetensors),
  // so the resumed run exports the same file and stops early at the same step.
  r = RunOnnxamp(args("6", "part.onnx",
                      {"--eval-every", "2", "--keep-best", "--checkpoint-dir", dir / "ck", "--checkpoint-every", "2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(ReadWholeFile(dir / "ck/step-00000006/best.safetensors").empty());
  r = RunOnnxamp(args("12", "resumed.onnx", {"--eval-every", "2", "--keep-best", "--resume", dir / "ck"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "resumed.onnx"), ReadWholeFile(dir / "best.onnx"));
  r = RunOnnxamp(args("4", "part2.onnx", {"--eval-every", "2", "--early-stop", "2", "--checkpoint-dir", dir / "ck2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunOnnxamp(args("12", "early2.onnx", {"--eval-every", "2", "--early-stop", "2", "--resume", dir / "ck2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("stopping early after step " + std::to_string(stop)), std::string::npos) << r.err;
  EXPECT_EQ(ReadWholeFile(dir / "early2.onnx"), ReadWholeFile(dir / "early.onnx"));

  for (const auto& [extra, text] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--keep-best"}, "--keep-best needs --eval-every"},
           {{"--early-stop", "3"}, "--early-stop needs --eval-every"},
           {{"--eval-every", "2", "--keep-best", "--best-metric", "f1"}, "--best-metric f1: expected loss or accuracy"},
           {{"--eval-every", "2", "--early-stop", "-1"}, "--early-stop: '-1' must be a whole number >= 1"}}) {
    ExpectErrorEndingWith(RunOnnxamp(args("4", "x.onnx", extra)), text);
  }
}

// --log-format jsonl, --log-dir and --eval-every: the JSON lines on stdout, DIR/metrics.jsonl, the event file; the
// plain lines when stderr is not a terminal; the errors of the logging flags.
TEST(TrainCliTest, LogFormatsLogDirAndEvalEvery) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(20));
  auto args = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {
        "train",          kDigitsMlp,       "--data",      csv,       "--labels", "label",         "--input-map",
        "input=features", "--label-column", "digit",       "--steps", "6",        "--batch-size",  "4",
        "--val-split",    "0.25",           "--log-every", "3",       "-o",       dir / "out.onnx"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  ProcessResult r = RunOnnxamp(args({"--eval-every", "2", "--log-format", "jsonl", "--log-dir", dir / "logs"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> types;
  std::vector<int64_t> steps;
  for (const std::string& line : Lines(r.out)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    types.push_back(j["type"]);
    steps.push_back(j.value("step", int64_t{-1}));
  }
  EXPECT_EQ(types, (std::vector<std::string>{"eval", "step", "eval", "step", "eval", "done"})) << r.out;
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 3, 4, 6, 6, -1})) << r.out;
  EXPECT_EQ(r.err.find("step 3/6"), std::string::npos) << "no text lines with jsonl: " << r.err;
  EXPECT_NE(r.err.find("done: 6 steps"), std::string::npos) << r.err;
  // The process's own peak resident set (not ru_maxrss, which a child inherits from the test binary across exec).
  const nlohmann::json done = nlohmann::json::parse(Lines(r.out).back());
  EXPECT_GT(done.value("peak_rss_bytes", uint64_t{0}), uint64_t{1} << 20) << r.out;
  EXPECT_NE(r.err.find("; peak resident memory "), std::string::npos) << r.err;
  // DIR: every step, every evaluation, the final record; one event file that starts with the file version.
  const std::vector<std::string> metrics = Lines(ReadWholeFile(dir / "logs/metrics.jsonl"));
  ASSERT_EQ(metrics.size(), 10u);
  std::vector<std::string> metric_types;
  std::vector<int64_t> metric_steps;
  for (const std::string& line : metrics) {
    const nlohmann::json j = nlohmann::json::parse(line);
    metric_types.push_back(j["type"]);
    metric_steps.push_back(j.value("step", int64_t{-1}));
  }
  EXPECT_EQ(metric_types,
            (std::vector<std::string>{"step", "step", "eval", "step", "step", "eval", "step", "step", "eval", "done"}));
  EXPECT_EQ(metric_steps, (std::vector<int64_t>{1, 2, 2, 3, 4, 4, 5, 6, 6, -1}));
  EXPECT_EQ(nlohmann::json::parse(metrics.back())["model"], dir / "out.onnx");
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir / "logs")) files.push_back(e.path().filename());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].rfind("events.out.tfevents.", 0), 0u) << files[0];
  EXPECT_EQ(files[1], "metrics.jsonl");
  const std::string events = ReadWholeFile(dir / ("logs/" + files[0]));
  EXPECT_NE(events.substr(0, 40).find("brain.Event:2"), std::string::npos);

  // Text on a pipe: the plain lines every --log-every steps, and the evaluations.
  r = RunOnnxamp(args({"--eval-every", "4"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("\nstep 3/6  epoch 1  loss "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\neval after step 4: validation loss "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\neval after step 6: validation loss "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;

  r = RunOnnxamp(args({"--log-format", "xml"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err),
            std::vector<std::string>{"error: --log-format xml: expected text or jsonl (see 'onnxamp train --help')"})
      << r.err;
  std::vector<std::string> no_val = args({"--eval-every", "2"});
  no_val.erase(std::find(no_val.begin(), no_val.end(), "--val-split"),
               std::find(no_val.begin(), no_val.end(), "--val-split") + 2);
  r = RunOnnxamp(no_val);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--eval-every needs --val-data or --val-split"), std::string::npos) << r.err;
  r = RunOnnxamp(args({"--log-dir", csv + "/logs"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--log-dir: " + csv + "/logs: " + csv + " is not a folder"), std::string::npos) << r.err;
}

// An ONNX test-data folder (test_data_set_K/input_0.pb, output_0.pb: `rows` rows each, class labels as the output)
// trains with --labels named after the model's output, and --top-k adds the top-K accuracy to the evaluation.
TEST(TrainCliTest, TestDataFolderAndTopK) {
  TempDir dir;
  auto write_sets = [&](const std::string& root, int sets, int rows) {
    for (int k = 0; k < sets; ++k) {
      const std::string set = root + "/test_data_set_" + std::to_string(k);
      std::filesystem::create_directories(set);
      ir::Tensor x(DType::kFloat32, {rows, 64});
      ir::Tensor y(DType::kInt64, {rows});
      for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < 64; ++c) x.mutable_values<float>()[r * 64 + c] = static_cast<float>((k + r + c) % 7);
        y.mutable_values<int64_t>()[r] = (k * rows + r) % 10;
      }
      x.set_name("input");
      ASSERT_TRUE(importer::WriteTensorFile(x, set + "/input_0.pb").ok());
      ASSERT_TRUE(importer::WriteTensorFile(y, set + "/output_0.pb").ok());
    }
  };
  write_sets(dir / "train", 3, 2);
  write_sets(dir / "val", 2, 1);
  std::vector<std::string> args = {
      "train",   kDigitsMlp, "--data",       dir / "train", "--labels", "logits", "--val-data", dir / "val",
      "--steps", "2",        "--batch-size", "4",           "--top-k",  "3",      "-o",         dir / "out.onnx"};
  ProcessResult r = RunOnnxamp(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("6 samples, 2 for validation"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(", top-3 accuracy "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(2 samples)"), std::string::npos) << r.err;

  // A set whose input does not match the first set's: one line naming the file.
  ir::Tensor wide(DType::kFloat32, {1, 32});
  ASSERT_TRUE(importer::WriteTensorFile(wide, dir / "val/test_data_set_1/input_0.pb").ok());
  r = RunOnnxamp(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(Lines(r.err), std::vector<std::string>{"error: " + (dir / "val/test_data_set_1/input_0.pb") +
                                                   ": array 'input' (float, per-sample shape [32]) does not match "
                                                   "'input' (float, [64]) in " +
                                                   (dir / "val/test_data_set_0/input_0.pb")})
      << r.err;
  r = RunOnnxamp({"train", kDigitsMlp, "--data", dir / "train", "--labels", "logits", "--steps", "1", "--top-k", "-1",
                  "-o", dir / "out.onnx"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--top-k: '-1' must be a whole number >= 2"), std::string::npos) << r.err;
  // As many as the output's classes: always 100%.
  r = RunOnnxamp({"train", kDigitsMlp, "--data", dir / "train", "--val-data", dir / "val", "--labels", "logits",
                  "--steps", "1", "--top-k", "10", "-o", dir / "out.onnx"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--top-k 10: the model's output has 10 classes"), std::string::npos) << r.err;
}

// --profile prints where the profiled steps' time went (the first step warms up), and changes nothing: the trained
// model and the printed losses are those of the same run without it.
TEST(TrainCliTest, ProfilePrintsTheTableAndChangesNothing) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(20));
  std::vector<std::string> args = TrainArgs(dir, csv);
  for (const char* a : {"--label-column", "digit", "--log-every", "1"}) args.push_back(a);
  *(std::find(args.begin(), args.end(), "--steps") + 1) = "3";
  ProcessResult plain = RunOnnxamp(args);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const std::string plain_model = ReadWholeFile(dir / "out.onnx");
  args.push_back("--profile");
  ProcessResult profiled = RunOnnxamp(args);
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  EXPECT_EQ(ReadWholeFile(dir / "out.onnx"), plain_model);
  EXPECT_EQ(plain.err.find("profile:"), std::string::npos) << plain.err;
  for (const char* want :
       {"profile: 2 steps after 1 warm-up step", "part of the step", "data (batches)", "forward nodes",
        "backward nodes", "optimizer step", "op type", "top 15 nodes", "Gemm", "forward", "backward"}) {
    EXPECT_NE(profiled.err.find(want), std::string::npos) << want << "\n" << profiled.err;
  }
  // The step lines: the same losses, in the same order.
  auto losses = [](const std::string& err) {
    std::vector<std::string> out;
    for (const std::string& line : Lines(err)) {
      const size_t at = line.find("loss ");
      if (line.rfind("step ", 0) == 0 && at != std::string::npos)
        out.push_back(line.substr(at, line.find(' ', at + 5) - at));
    }
    return out;
  };
  EXPECT_EQ(losses(profiled.err), losses(plain.err));
  EXPECT_EQ(losses(plain.err).size(), 3u) << plain.err;
}

// --cuda-graph: only with --device cuda, only on|off|auto (usage errors), off changes nothing.
TEST(TrainCliTest, CudaGraphOptionIsCheckedAndOffByDefault) {
  TempDir dir;
  const std::string csv = dir / "digits.csv";
  WriteWholeFile(csv, DigitsCsv(12));
  std::vector<std::string> args = TrainArgs(dir, csv);
  args.insert(args.end(), {"--label-column", "digit", "--cuda-graph", "on"});
  ProcessResult r = RunOnnxamp(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err),
            std::vector<std::string>{"error: --cuda-graph on needs --device cuda (see 'onnxamp train --help')"});
  args.back() = "sometimes";
  r = RunOnnxamp(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--cuda-graph"), std::string::npos) << r.err;
  args.back() = "off";
  r = RunOnnxamp(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("cuda graph"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace onnxamp::tools_test
