// `onnxamp train` on CSV data, run as a subprocess on models/digits_mlp.onnx: --label-column, --save-split (the
// held-out rows, bound as the model reads them), and the one-line errors of the CSV options.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

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
  EXPECT_EQ(r.exit_code, 1);
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
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--label-column 0: only .csv and .csv.gz data have columns"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace onnxamp::tools_test
