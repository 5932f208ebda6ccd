// CSV training data: rows of numbers separated by commas (optionally gzip-compressed), read into a float32
// "features" array of every column but the label column and an int64 "label" array of the label column.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::trainer {

struct CsvOptions {
  // The label column (--label-column): empty for the last column; a name from the header row; or a column index,
  // 0-based, negative counting from the end (-1 is the last). A header name wins over an index.
  std::string label_column;
};

// The array names ReadCsv gives.
inline constexpr char kCsvFeatures[] = "features";
inline constexpr char kCsvLabel[] = "label";

// True for paths ending in ".csv" or ".csv.gz" (any case).
bool IsCsvPath(std::string_view path);

// Reads a .csv or .csv.gz file (gzip is recognised by its magic bytes, whatever the name): rows of comma-separated
// numbers (spaces around a value and one pair of double quotes are ignored, "\r\n" line ends accepted, empty lines
// skipped). The first row is a header when any of its fields is not a number; its fields then name the columns.
// Returns {features float32 [rows, columns - 1], label int64 [rows]}. A first column that the header leaves unnamed
// and whose values are 0, 1, 2, ... in row order is a row index (what pandas' DataFrame.to_csv writes by default), not
// a feature: it is left out. Errors are one line naming the file, the line
// and the column: an empty file, a header without data rows, fewer than 2 columns, ragged rows, a value that is not
// a number or beyond float32's range, a label that is not an integer, an unknown --label-column.
StatusOr<std::vector<ir::Tensor>> ReadCsv(const std::string& path, const CsvOptions& options = {});

}  // namespace onnxamp::trainer
