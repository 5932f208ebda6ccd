// CSV training data: plain and gzip-compressed files, header rows, the label column, and every error message.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "trainer/data/csv.h"
#include "trainer/data/dataset.h"

namespace onnxamp::trainer {
namespace {

namespace fs = std::filesystem;

template <typename T>
std::vector<T> Values(const ir::Tensor& t) {
  std::span<const T> v = t.values<T>();
  return std::vector<T>(v.begin(), v.end());
}

class DataCsvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "onnxamp_data_csv_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) const {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    return path;
  }
  // Writes `members` as consecutive gzip members (one member per string), as `cat a.gz b.gz` would.
  std::string WriteGz(const std::string& name, const std::vector<std::string>& members) const {
    const std::string path = (dir_ / name).string();
    fs::remove(path);
    for (const std::string& text : members) {
      gzFile f = gzopen(path.c_str(), "ab");
      EXPECT_NE(f, nullptr);
      if (!f) return path;
      EXPECT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
      EXPECT_EQ(gzclose(f), Z_OK);
    }
    return path;
  }
  static std::vector<ir::Tensor> Read(const std::string& path, const std::string& label_column = "") {
    StatusOr<std::vector<ir::Tensor>> arrays = ReadCsv(path, CsvOptions{label_column});
    EXPECT_TRUE(arrays.ok()) << arrays.status().ToString();
    return arrays.ok() ? std::move(arrays).value() : std::vector<ir::Tensor>();
  }
  static std::string Error(const std::string& path, const std::string& label_column = "") {
    StatusOr<Dataset> d = Dataset::Load(path, CsvOptions{label_column});
    EXPECT_FALSE(d.ok());
    return d.ok() ? "" : d.status().message();
  }

  fs::path dir_;
};

TEST_F(DataCsvTest, ReadsRowsWithTheLastColumnAsLabel) {
  const std::string path = Write("d.csv", "1,2.5,0\n-3,4e1,2\n+5,.25,1\n");
  std::vector<ir::Tensor> a = Read(path);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].name(), "features");
  EXPECT_EQ(a[0].dtype(), DType::kFloat32);
  EXPECT_EQ(a[0].dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values<float>(a[0]), (std::vector<float>{1, 2.5f, -3, 40, 5, 0.25f}));
  EXPECT_EQ(a[1].name(), "label");
  EXPECT_EQ(a[1].dtype(), DType::kInt64);
  EXPECT_EQ(a[1].dims(), (std::vector<int64_t>{3}));
  EXPECT_EQ(Values<int64_t>(a[1]), (std::vector<int64_t>{0, 2, 1}));
  // No trailing newline; integral labels written as floats.
  a = Read(Write("e.csv", "1,2,3.0\n4,5,1e1"));
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(Values<int64_t>(a[1]), (std::vector<int64_t>{3, 10}));
}

TEST_F(DataCsvTest, HeaderNamesTheLabelColumn) {
  // BOM, CRLF, spaces, quotes, empty lines: all tolerated.
  const std::string path = Write("h.csv", "\xEF\xBB\xBF\"a\", digit ,b\r\n1, 7 ,2\r\n\r\n3,\"8\",4\r\n  \n5,9,6\r\n");
  std::vector<ir::Tensor> a = Read(path, "digit");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values<float>(a[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(Values<int64_t>(a[1]), (std::vector<int64_t>{7, 8, 9}));
  // Default: the last column, header or not.
  a = Read(path);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(Values<float>(a[0]), (std::vector<float>{1, 7, 3, 8, 5, 9}));
  EXPECT_EQ(Values<int64_t>(a[1]), (std::vector<int64_t>{2, 4, 6}));
}

// pandas' DataFrame.to_csv writes the row index first, under an empty header name: left out while it counts 0, 1,
// 2, ...; an unnamed column holding anything else, or a named one, is a feature.
TEST_F(DataCsvTest, APandasIndexColumnIsNotAFeature) {
  std::vector<ir::Tensor> a = Read(Write("p.csv", ",a,b,y\n0,1.5,2,1\n1,3,4,0\n2,5,6,1\n"));
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values<float>(a[0]), (std::vector<float>{1.5f, 2, 3, 4, 5, 6}));
  EXPECT_EQ(Values<int64_t>(a[1]), (std::vector<int64_t>{1, 0, 1}));
  a = Read(Write("q.csv", "\"\",a,y\n0,1,1\n5,3,0\n"));  // not 0, 1: a feature
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(Values<float>(a[0]), (std::vector<float>{0, 1, 5, 3}));
  a = Read(Write("r.csv", "i,a,y\n0,1,1\n1,3,0\n"));  // named: a feature
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].dims(), (std::vector<int64_t>{2, 2}));
  a = Read(Write("s.csv", ",y\n0,1\n1,0\n"));  // the only feature column stays
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].dims(), (std::vector<int64_t>{2, 1}));
}

TEST_F(DataCsvTest, LabelColumnByIndex) {
  const std::string path = Write("i.csv", "7,1,2\n8,3,4\n");
  std::vector<ir::Tensor> a = Read(path, "0");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(Values<float>(a[0]), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(Values<int64_t>(a[1]), (std::vector<int64_t>{7, 8}));
  a = Read(path, "-2");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(Values<float>(a[0]), (std::vector<float>{7, 2, 8, 4}));
  EXPECT_EQ(Values<int64_t>(a[1]), (std::vector<int64_t>{1, 3}));
}

TEST_F(DataCsvTest, ReadsGzipIncludingConcatenatedMembers) {
  const std::string text = "x0,x1,y\n0.5,1,3\n2,-1,0\n";
  std::vector<ir::Tensor> plain = Read(Write("p.csv", text));
  std::vector<ir::Tensor> gz = Read(WriteGz("p.csv.gz", {text}));
  ASSERT_EQ(plain.size(), 2u);
  ASSERT_EQ(gz.size(), 2u);
  EXPECT_TRUE(plain[0].SameContents(gz[0]));
  EXPECT_TRUE(plain[1].SameContents(gz[1]));

  gz = Read(WriteGz("two.csv.gz", {"x0,x1,y\n0.5,1,3\n", "2,-1,0\n"}));
  ASSERT_EQ(gz.size(), 2u);
  EXPECT_TRUE(plain[0].SameContents(gz[0]));
  EXPECT_TRUE(plain[1].SameContents(gz[1]));
}

TEST_F(DataCsvTest, DatasetLoadBindsCsvArrays) {
  const std::string path = WriteGz("train.CSV.GZ", {"1,2,0\n3,4,1\n5,6,1\n"});
  EXPECT_TRUE(IsCsvPath(path));
  StatusOr<Dataset> d = Dataset::Load(path);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->num_samples(), 3);
  EXPECT_EQ(d->NamesList(), "features, label");
  BindOptions o;
  o.input_map = {{"input", "features"}};
  o.labels.array = "label";
  o.labels.num_classes = 2;
  const ModelInput input{"input",
                         ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("batch"), ir::Dim::Value(2)})};
  StatusOr<Dataset> bound = d->Bind({input}, o);
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  EXPECT_EQ(bound->NamesList(), "input, label");
}

TEST_F(DataCsvTest, IsCsvPath) {
  EXPECT_TRUE(IsCsvPath("a.csv"));
  EXPECT_TRUE(IsCsvPath("dir/A.Csv"));
  EXPECT_TRUE(IsCsvPath("a.csv.gz"));
  EXPECT_FALSE(IsCsvPath("a.gz"));
  EXPECT_FALSE(IsCsvPath("a.npz"));
  EXPECT_FALSE(IsCsvPath("csv"));
}

TEST_F(DataCsvTest, Errors) {
  std::string p = Write("ragged.csv", "1,2,0\n3,4,1\n5,1\n");
  EXPECT_EQ(Error(p), p + ": line 3, column 3: missing (the row has 2 columns, line 1 has 3)");
  p = Write("extra.csv", "a,b,c\n1,2,0\n\n3,4,1,9\n");
  EXPECT_EQ(Error(p), p + ": line 4, column 4: an extra value (the row has 4 columns, line 1 has 3)");
  p = Write("nan.csv", "a,b,c\n1,2,0\n3,x4,1\n");
  EXPECT_EQ(Error(p), p + ": line 3, column 2 ('b'): 'x4' is not a number");
  p = Write("empty_value.csv", "1,2,0\n3,,1\n");
  EXPECT_EQ(Error(p), p + ": line 2, column 2: an empty value is not a number");
  p = Write("label.csv", "1,2,0\n3,4,1.5\n");
  EXPECT_EQ(Error(p), p + ": line 2, column 3: the label '1.5' is not an integer class index");
  p = Write("label_nan.csv", "1,2,nan\n");
  EXPECT_EQ(Error(p), p + ": line 1, column 3: the label 'nan' is not an integer class index");
  p = Write("label_text.csv", "f,g,y\n1,2,seven\n");
  EXPECT_EQ(Error(p), p + ": line 2, column 3 ('y'): 'seven' is not a number");
  p = Write("range.csv", "1,1e39,0\n");
  EXPECT_EQ(Error(p), p + ": line 1, column 2: '1e39' is beyond the range of float32");
  p = Write("empty.csv", "");
  EXPECT_EQ(Error(p), p + ": empty file (no rows)");
  p = Write("blank.csv", "\n  \r\n");
  EXPECT_EQ(Error(p), p + ": empty file (no rows)");
  p = Write("header_only.csv", "a,b\n");
  EXPECT_EQ(Error(p), p + ": line 1 is a header row and no data rows follow it");
  p = Write("one_column.csv", "1\n2\n");
  EXPECT_EQ(Error(p), p + ": line 1 has 1 column; CSV data needs the features and a label (at least 2 columns)");
  p = Write("named.csv", "a,b,c\n1,2,0\n");
  EXPECT_EQ(Error(p, "d"), p + ": --label-column 'd': no column of that name (header: a, b, c)");
  EXPECT_EQ(Error(p, "3"), p + ": --label-column 3: outside the 3 columns (0..2, or -3..-1 from the end)");
  p = Write("unnamed.csv", "1,2,0\n");
  EXPECT_EQ(Error(p, "c"),
            p + ": --label-column 'c': the file has no header row to name columns, and it is not a column index");
  p = (dir_ / "missing.csv").string();
  EXPECT_NE(Error(p).find(p), std::string::npos);

  // A gzip stream cut short, and bytes that are not gzip after the magic.
  const std::string whole = WriteGz("whole.csv.gz", {"1,2,0\n3,4,1\n5,6,1\n7,8,0\n"});
  std::ifstream in(whole, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  p = Write("cut.csv.gz", bytes.substr(0, bytes.size() - 6));
  EXPECT_EQ(Error(p), p + ": truncated gzip data (the compressed stream ends early)");
  p = Write("bad.csv.gz", std::string("\x1f\x8b\x08\x00garbage-garbage-garbage", 27));
  EXPECT_EQ(Error(p).rfind(p + ": bad gzip data: ", 0), 0u) << Error(p);
}

}  // namespace
}  // namespace onnxamp::trainer
