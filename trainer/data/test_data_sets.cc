// ONNX test-data folders (test_data_set_*/input_N.pb, output_N.pb) read and concatenated into a Dataset.
#include "trainer/data/test_data_sets.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <system_error>
#include <tuple>
#include <utility>

#include "importer/tensor_file.h"
#include "runtime/ops/common/broadcast.h"

namespace onnxamp::trainer {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSetPrefix = "test_data_set_";

// The number after `prefix` in `name` (all digits, then `suffix`), or nullopt.
std::optional<int64_t> NumberIn(std::string_view name, std::string_view prefix, std::string_view suffix) {
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix)) {
    return std::nullopt;
  }
  const std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size() || n < 0) return std::nullopt;
  return n;
}

// The test_data_set_* folders of `dir`, ordered by their number (sets without one last, by name).
StatusOr<std::vector<fs::path>> SetFolders(const std::string& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return NotFound(dir, ": cannot list the folder: ", ec.message());
  std::vector<std::pair<std::pair<int64_t, std::string>, fs::path>> sets;
  for (const fs::directory_entry& e : it) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(kSetPrefix) || !e.is_directory(ec)) continue;
    const int64_t n = NumberIn(name, kSetPrefix, "").value_or(INT64_MAX);
    sets.push_back({{n, name}, e.path()});
  }
  std::sort(sets.begin(), sets.end());
  std::vector<fs::path> out;
  for (auto& s : sets) out.push_back(std::move(s.second));
  return out;
}

// One file of a set: its role and index.
struct SetFile {
  bool output = false;
  int64_t index = 0;
  fs::path path;
  bool operator<(const SetFile& o) const { return std::tie(output, index) < std::tie(o.output, o.index); }
};

// input_N.pb and output_N.pb of one set, inputs first, by index; other files are ignored.
StatusOr<std::vector<SetFile>> FilesOfSet(const fs::path& set) {
  std::error_code ec;
  fs::directory_iterator it(set, ec);
  if (ec) return NotFound(set.string(), ": cannot list the folder: ", ec.message());
  std::vector<SetFile> files;
  for (const fs::directory_entry& e : it) {
    const std::string name = e.path().filename().string();
    if (std::optional<int64_t> n = NumberIn(name, "input_", ".pb")) {
      files.push_back({false, *n, e.path()});
    } else if (std::optional<int64_t> m = NumberIn(name, "output_", ".pb")) {
      files.push_back({true, *m, e.path()});
    }
  }
  std::sort(files.begin(), files.end());
  if (std::none_of(files.begin(), files.end(), [](const SetFile& f) { return !f.output; })) {
    return InvalidArgument(set.string(), ": no input_N.pb files");
  }
  return files;
}

std::string SampleShape(const ir::Tensor& t) {
  return ops::ShapeToString(std::span<const int64_t>(t.dims()).subspan(t.dims().empty() ? 0 : 1));
}

// Concatenates `parts` (same dtype and per-sample shape) along dim 0.
ir::Tensor Concat(const std::vector<ir::Tensor>& parts) {
  std::vector<int64_t> dims = parts[0].dims();
  dims[0] = 0;
  for (const ir::Tensor& p : parts) dims[0] += p.dims()[0];
  if (parts[0].dtype() == DType::kString) {
    ir::Tensor out(DType::kString, dims);
    out.mutable_strings().clear();
    for (const ir::Tensor& p : parts) {
      out.mutable_strings().insert(out.mutable_strings().end(), p.strings().begin(), p.strings().end());
    }
    out.set_name(parts[0].name());
    return out;
  }
  ir::Tensor out = ir::Tensor::Uninitialized(parts[0].dtype(), dims);
  out.set_name(parts[0].name());
  std::byte* dst = out.mutable_data();
  for (const ir::Tensor& p : parts) {
    if (p.nbytes() > 0) std::memcpy(dst, p.data(), p.nbytes());
    dst += p.nbytes();
  }
  return out;
}

}  // namespace

bool IsTestDataFolder(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return false;
  StatusOr<std::vector<fs::path>> sets = SetFolders(path);
  return sets.ok() && !sets->empty();
}

StatusOr<Dataset> LoadTestDataSets(const std::string& dir, const std::vector<std::string>& input_names,
                                   const std::vector<std::string>& output_names) {
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<fs::path> sets, SetFolders(dir));
  if (sets.empty()) return InvalidArgument(dir, ": no test_data_set_* folders");
  std::vector<std::vector<ir::Tensor>> columns;  // per array, its part from each set
  std::vector<fs::path> first_files;             // the files of the first set, for errors
  for (size_t s = 0; s < sets.size(); ++s) {
    const std::string set_name = sets[s].filename().string();
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<SetFile> files, FilesOfSet(sets[s]));
    if (s > 0 && files.size() != columns.size()) {
      return InvalidArgument(sets[s].string(), ": ", files.size(), " input/output files where ",
                             sets[0].filename().string(), " has ", columns.size());
    }
    for (size_t f = 0; f < files.size(); ++f) {
      const SetFile& file = files[f];
      const std::string where = file.path.string();
      if (s > 0 && file.path.filename() != first_files[f].filename()) {
        return InvalidArgument(where, ": ", sets[0].filename().string(), " has ", first_files[f].filename().string(),
                               " here; every set must hold the same files");
      }
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor t, importer::ReadTensorFile(where));
      const std::vector<std::string>& names = file.output ? output_names : input_names;
      if (file.output || t.name().empty()) {
        if (file.index >= static_cast<int64_t>(names.size())) {
          return InvalidArgument(where, ": the model has ", names.size(), file.output ? " outputs" : " data inputs",
                                 ", so this file has no ", file.output ? "output" : "input", " to name it after");
        }
        t.set_name(names[static_cast<size_t>(file.index)]);
      }
      if (t.rank() == 0) {
        return InvalidArgument(where, ": array '", t.name(), "' is a scalar; sets are concatenated along dim 0");
      }
      if (s == 0) {
        first_files.push_back(file.path);
        columns.push_back({std::move(t)});
        continue;
      }
      const ir::Tensor& first = columns[f][0];
      if (t.name() != first.name() || t.dtype() != first.dtype() || SampleShape(t) != SampleShape(first)) {
        return InvalidArgument(where, ": array '", t.name(), "' (", DTypeName(t.dtype()), ", per-sample shape ",
                               SampleShape(t), ") does not match '", first.name(), "' (", DTypeName(first.dtype()),
                               ", ", SampleShape(first), ") in ", first_files[f].string());
      }
      columns[f].push_back(std::move(t));
    }
  }
  std::vector<ir::Tensor> arrays;
  for (const std::vector<ir::Tensor>& parts : columns) arrays.push_back(Concat(parts));
  return Dataset::FromTensors(std::move(arrays), dir);
}

}  // namespace onnxamp::trainer
