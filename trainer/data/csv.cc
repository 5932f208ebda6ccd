// CSV training data: gzip through zlib's inflate, a header row detected by its non-numeric fields, one float32
// features array and one int64 label array, every error naming the file, the line and the column.
#include "trainer/data/csv.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <system_error>
#include <utility>

#include "runtime/common/file_util.h"

namespace onnxamp::trainer {
namespace {

bool EndsWithNoCase(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), s.end() - static_cast<ptrdiff_t>(suffix.size()),
                    [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); });
}

bool IsGzip(std::string_view bytes) { return bytes.starts_with("\x1f\x8b"); }

// Inflates every gzip member of `compressed` (as gzip -d does with concatenated members).
StatusOr<std::string> Gunzip(const std::string& path, std::string_view compressed) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return Internal(path, ": zlib inflateInit2 failed");
  std::string out;
  std::string chunk(1 << 16, '\0');
  size_t consumed = 0;  // bytes of `compressed` handed to zlib so far
  Status status = Status::Ok();
  while (true) {
    if (zs.avail_in == 0 && consumed < compressed.size()) {
      const size_t n = std::min<size_t>(compressed.size() - consumed, UINT_MAX);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data() + consumed));
      zs.avail_in = static_cast<uInt>(n);
      consumed += n;
    }
    zs.next_out = reinterpret_cast<Bytef*>(chunk.data());
    zs.avail_out = static_cast<uInt>(chunk.size());
    const int rc = inflate(&zs, Z_NO_FLUSH);
    out.append(chunk.data(), chunk.size() - zs.avail_out);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0 && consumed == compressed.size()) break;
      if (inflateReset(&zs) != Z_OK) {
        status = Internal(path, ": zlib inflateReset failed");
        break;
      }
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && consumed == compressed.size()) {
      status = InvalidArgument(path, ": truncated gzip data (the compressed stream ends early)");
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      status = InvalidArgument(path, ": bad gzip data: ", zs.msg ? zs.msg : zError(rc));
      break;
    }
  }
  inflateEnd(&zs);
  if (!status.ok()) return status;
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// The fields of one line, trimmed, one pair of surrounding double quotes removed.
void SplitFields(std::string_view line, std::vector<std::string_view>* fields) {
  fields->clear();
  while (true) {
    const size_t comma = line.find(',');
    std::string_view f = Trim(line.substr(0, comma));
    if (f.size() >= 2 && f.front() == '"' && f.back() == '"') f = Trim(f.substr(1, f.size() - 2));
    fields->push_back(f);
    if (comma == std::string_view::npos) break;
    line.remove_prefix(comma + 1);
  }
}

// from_chars over the whole field; a leading '+' is accepted.
template <typename T>
std::errc ParseWhole(std::string_view s, T* value) {
  if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  if (s.empty()) return std::errc::invalid_argument;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *value);
  if (ec != std::errc()) return ec;
  return end == s.data() + s.size() ? std::errc() : std::errc::invalid_argument;
}

bool IsNumber(std::string_view s) {
  double d;
  const std::errc ec = ParseWhole(s, &d);
  return ec == std::errc() || ec == std::errc::result_out_of_range;
}

// "'abc'" (shortened when long), or "an empty value".
std::string Quoted(std::string_view s) {
  if (s.empty()) return "an empty value";
  if (s.size() > 40) return StrCat("'", s.substr(0, 37), "...'");
  return StrCat("'", s, "'");
}

// Resolves --label-column against the column count and the header names (empty without a header).
StatusOr<size_t> LabelColumn(const std::string& path, const std::string& spec, size_t columns,
                             const std::vector<std::string>& header) {
  if (spec.empty()) return columns - 1;
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c] == spec) return c;
  }
  int64_t index = 0;
  if (ParseWhole(std::string_view(spec), &index) != std::errc()) {
    std::string names;
    for (const std::string& h : header) names += StrCat(names.empty() ? "" : ", ", h);
    return InvalidArgument(path, ": --label-column '", spec, "': ",
                           header.empty() ? "the file has no header row to name columns, and it is not a column index"
                                          : StrCat("no column of that name (header: ", names, ")"));
  }
  const auto n = static_cast<int64_t>(columns);
  if (index < -n || index >= n) {
    return InvalidArgument(path, ": --label-column ", spec, ": outside the ", columns, " columns (0..", n - 1, ", or ",
                           -n, "..-1 from the end)");
  }
  return static_cast<size_t>(index < 0 ? index + n : index);
}

}  // namespace

bool IsCsvPath(std::string_view path) { return EndsWithNoCase(path, ".csv") || EndsWithNoCase(path, ".csv.gz"); }

StatusOr<std::vector<ir::Tensor>> ReadCsv(const std::string& path, const CsvOptions& options) {
  ONNXAMP_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  if (IsGzip(text)) {
    ONNXAMP_ASSIGN_OR_RETURN(text, Gunzip(path, text));
  }
  std::string_view rest = text;
  if (rest.starts_with("\xEF\xBB\xBF")) rest.remove_prefix(3);  // UTF-8 byte order mark

  std::vector<std::string_view> fields;
  std::vector<std::string> header;
  size_t columns = 0;         // of the first row
  int64_t first_line = 0;     // the first row's line number
  size_t label_col = 0;       // resolved once the first row is known
  bool index_column = false;  // column 0 is a row index, not a feature (decided when the rows are read)
  std::vector<float> features;
  std::vector<int64_t> labels;
  int64_t line_no = 0;
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    ++line_no;
    if (Trim(line).empty()) continue;
    SplitFields(line, &fields);
    auto where = [&](size_t c) {
      std::string s = StrCat(path, ": line ", line_no, ", column ", c + 1);
      if (c < header.size() && !header[c].empty()) s += StrCat(" ('", header[c], "')");
      return s;
    };
    if (columns == 0) {  // the first row: a header, and the column count
      columns = fields.size();
      first_line = line_no;
      if (columns < 2) {
        return InvalidArgument(path, ": line ", line_no,
                               " has 1 column; CSV data needs the features and a label (at least 2 columns)");
      }
      const bool is_header = std::any_of(fields.begin(), fields.end(), [](std::string_view f) { return !IsNumber(f); });
      if (is_header) header.assign(fields.begin(), fields.end());
      ONNXAMP_ASSIGN_OR_RETURN(label_col, LabelColumn(path, options.label_column, columns, header));
      // A first column without a name is pandas' index (DataFrame.to_csv's default) while it holds 0, 1, 2, ...
      index_column = is_header && header[0].empty() && label_col != 0 && columns > 2;
      if (is_header) continue;
    }
    if (fields.size() != columns) {
      const bool missing = fields.size() < columns;
      return InvalidArgument(where(std::min(fields.size(), columns)), ": ", missing ? "missing" : "an extra value",
                             " (the row has ", fields.size(), " columns, line ", first_line, " has ", columns, ")");
    }
    for (size_t c = 0; c < columns; ++c) {
      const std::string_view f = fields[c];
      if (c == label_col) {
        int64_t label = 0;
        if (ParseWhole(f, &label) != std::errc()) {
          double d = 0;
          const std::errc ec = ParseWhole(f, &d);
          if (ec != std::errc() && ec != std::errc::result_out_of_range) {
            return InvalidArgument(where(c), ": ", Quoted(f), " is not a number");
          }
          // Integral values written as floats ("3.0", "1e2") are class indices too.
          if (ec != std::errc() || !std::isfinite(d) || d != std::trunc(d) || d < -9.2233720368547758e18 ||
              d >= 9.2233720368547758e18) {
            return InvalidArgument(where(c), ": the label ", Quoted(f), " is not an integer class index");
          }
          label = static_cast<int64_t>(d);
        }
        labels.push_back(label);
        continue;
      }
      float v = 0;
      const std::errc ec = ParseWhole(f, &v);
      if (ec == std::errc::result_out_of_range) {
        double d = 0;
        // Underflow (a denormal beyond float32) reads as the nearest float; overflow is an error.
        if (ParseWhole(f, &d) == std::errc() && std::fabs(d) < 1.0) {
          v = static_cast<float>(d);
        } else {
          return InvalidArgument(where(c), ": ", Quoted(f), " is beyond the range of float32");
        }
      } else if (ec != std::errc()) {
        return InvalidArgument(where(c), ": ", Quoted(f), " is not a number");
      }
      if (c == 0 && index_column) {
        int64_t index = -1;
        if (ParseWhole(f, &index) != std::errc() || index != static_cast<int64_t>(labels.size())) index_column = false;
      }
      features.push_back(v);
    }
  }
  if (columns == 0) return InvalidArgument(path, ": empty file (no rows)");
  if (labels.empty()) {
    return InvalidArgument(path, ": line ", first_line, " is a header row and no data rows follow it");
  }

  const auto rows = static_cast<int64_t>(labels.size());
  if (index_column) {  // every row's column 0 was its index: drop it
    size_t kept = 0;
    for (size_t i = 0; i < features.size(); ++i) {
      if (i % (columns - 1) != 0) features[kept++] = features[i];
    }
    features.resize(kept);
    --columns;
  }
  ir::Tensor x = ir::Tensor::Uninitialized(DType::kFloat32, {rows, static_cast<int64_t>(columns - 1)});
  std::memcpy(x.mutable_data(), features.data(), features.size() * sizeof(float));
  x.set_name(kCsvFeatures);
  ir::Tensor y = ir::Tensor::Uninitialized(DType::kInt64, {rows});
  std::memcpy(y.mutable_data(), labels.data(), labels.size() * sizeof(int64_t));
  y.set_name(kCsvLabel);
  std::vector<ir::Tensor> arrays;
  arrays.push_back(std::move(x));
  arrays.push_back(std::move(y));
  return arrays;
}

}  // namespace onnxamp::trainer
