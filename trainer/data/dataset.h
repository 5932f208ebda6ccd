// Training data: named arrays that share their first dimension (samples), loaded from .npz/.npy/.pb/.csv, bound to a
// model's inputs and labels with one-line errors, split into training and validation parts, and gathered into batches.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/tensor.h"
#include "runtime/ir/type.h"
#include "trainer/data/csv.h"

namespace onnxamp::trainer {

// A model input that data must feed: its name and declared type (dim 0 of the shape is the batch).
struct ModelInput {
  std::string name;
  ir::ValueType type;
};

// The inputs of `graph` that data must feed: graph inputs without an initializer, in graph order.
std::vector<ModelInput> DataInputs(const ir::Graph& graph);

// What the labels must be.
enum class LabelKind {
  kClassIndices,  // integer class indices (cross-entropy, NLL)
  kFloatTargets,  // floating-point targets (MSE, L1, ...)
};

struct LabelSpec {
  std::string array;  // the labels array (--labels); empty: no labels
  LabelKind kind = LabelKind::kClassIndices;
  int64_t num_classes = 0;              // kClassIndices, > 0: every label must lie in [0, num_classes) ...
  std::optional<int64_t> ignore_index;  // ... or equal this
  // The labels' dims per sample that the loss takes, when the model declares them (the prediction's dims without
  // the batch dim, and for class indices without the class dim). Labels whose per-sample shape differs from it in
  // size-1 dims only ([N, 1] for [N]) are viewed in this shape; other differences are left to the loss (declared
  // shapes can be wrong).
  std::optional<std::vector<int64_t>> sample_dims;
};

struct BindOptions {
  // Model input name → array name (--input-map NAME=ARRAY); inputs not listed read the array of their own name, and
  // the one input of a model that has one, where there is no such array, reads the only array besides the labels.
  std::vector<std::pair<std::string, std::string>> input_map;
  LabelSpec labels;
  // Accept NaN and ±inf in floating-point feature arrays (and float targets); refused by default.
  bool allow_non_finite = false;
};

// Parses --input-map values "NAME=ARRAY" (split at the first '='); fails on a missing '=', an empty side, or a
// model input named twice.
StatusOr<std::vector<std::pair<std::string, std::string>>> ParseInputMap(const std::vector<std::string>& specs);

// A set of named arrays sharing their first dimension, the sample dimension. Copies share the arrays' bytes.
// Errors name source(): the file the arrays came from.
//
// A dataset may be a view (the parts Split makes): its samples are rows rows() of the arrays, which stay whole and
// shared with the dataset it was split from; num_samples() counts the view's rows. Read samples through MakeBatch
// (or ForEachRun), which go through the row list. The bytes of a memory-mapped array (an .npy file, a stored .npz
// entry) may not be aligned to the element size: read them with memcpy, as MakeBatch does, never through values<T>().
class Dataset {
 public:
  Dataset() = default;

  // Reads every array of an .npz (named by archive entry), or the one array of an .npy or .pb file (named by the
  // file stem, or the TensorProto's name), or a .csv/.csv.gz file as the arrays "features" (float32) and "label"
  // (int64) by ReadCsv with `csv` (csv.h). Fails on an unreadable or empty file, zero samples, scalars, arrays
  // whose first dims differ, duplicate names, and sub-byte dtypes. An .npy file, and the stored entries of an .npz
  // (what numpy.savez writes), are memory-mapped (importer::MapNpyFile, MapNpzFile): batches are gathered from the
  // mapping, so the file may be larger than memory. Deflated .npz entries (numpy.savez_compressed) are decompressed
  // into memory.
  static StatusOr<Dataset> Load(const std::string& path, const CsvOptions& csv = {});
  // The same checks over arrays already in memory; `source` names them in errors.
  static StatusOr<Dataset> FromTensors(std::vector<ir::Tensor> arrays, std::string source);

  // The dataset a model trains on: one array per model input, in `inputs` order and renamed to the input's name,
  // then the labels array (keeping its name) when options.labels.array is set. Checks that every array exists, fits
  // its input's type (dtype; every fixed dim but dim 0), holds only finite floats (unless allowed), and that labels
  // have the requested kind and range. Errors name the file, the array and what is wrong (the row: in the file). A
  // view stays a view of the same rows; only its rows are checked.
  StatusOr<Dataset> Bind(const std::vector<ModelInput>& inputs, const BindOptions& options) const;

  // Splits off a validation part of round(fraction * n) samples chosen by a seeded shuffle (independent of the epoch
  // shuffles); both parts keep file order. Both are views over this dataset's arrays (nothing is copied). Fails unless
  // 0 < fraction < 1 and both parts are non-empty.
  StatusOr<std::pair<Dataset, Dataset>> Split(double fraction, uint64_t seed) const;

  // Checks that `other` (a separate validation file bound the same way) has arrays of the same names, dtypes and
  // per-sample shapes; errors name other's source.
  Status CheckCompatible(const Dataset& other) const;

  const std::string& source() const { return source_; }
  int64_t num_samples() const { return num_samples_; }
  // The whole arrays: for a view, more rows than num_samples() (see rows()).
  const std::vector<ir::Tensor>& arrays() const { return arrays_; }
  // A view's rows of the arrays, ascending (sample i is row rows()[i]); empty when the dataset is every row.
  std::span<const int64_t> rows() const {
    return rows_ ? std::span<const int64_t>(*rows_) : std::span<const int64_t>();
  }
  // The array rows of samples `indices` (each in [0, num_samples()), unchecked).
  std::vector<int64_t> ArrayRows(const std::vector<int64_t>& indices) const;
  // Calls visit(bytes) over the bytes of array `k`'s samples in order, in runs of consecutive rows of at most a few
  // MiB; the pages of a mapped array leave the resident set after each run. Nothing for string arrays.
  void ForEachRun(size_t k, const std::function<void(std::span<const std::byte>)>& visit) const;
  // Memory-mapped arrays (see Load): once batches have read about `bytes` of them since the last release, MakeBatch
  // releases their pages from the resident set (madvise; the page cache keeps them). Each row read maps the pages
  // around it too (the kernel's fault-around, 64 KiB), so shuffled batches would otherwise map a large file into the
  // resident set bit by bit; rows read again after a release fault back in from the page cache (microseconds each).
  // Shared by copies, bound datasets and views of this one. Default kMappedResidentBudget.
  static constexpr uint64_t kMappedResidentBudget = uint64_t{256} << 20;
  void set_mapped_resident_budget(uint64_t bytes) const { mapped_reads_->budget = bytes; }
  // For MakeBatch: counts `bytes` read from mapped arrays, releasing their pages when the budget is reached.
  void NoteMappedReads(uint64_t bytes) const;
  // Array names in order, joined by ", " (what error messages list).
  std::string NamesList() const;
  // The first array named `name`, or null.
  const ir::Tensor* Find(const std::string& name) const;
  // After Bind: the labels array, or null when there are none; the number of feature (model input) arrays.
  const ir::Tensor* labels() const { return labels_index_ ? &arrays_[*labels_index_] : nullptr; }
  size_t num_features() const { return labels_index_ ? *labels_index_ : arrays_.size(); }

 private:
  std::string source_;
  int64_t num_samples_ = 0;
  std::vector<ir::Tensor> arrays_;
  std::optional<size_t> labels_index_;                // set by Bind: the labels come last
  std::shared_ptr<const std::vector<int64_t>> rows_;  // a view's rows; null: every row
  struct MappedReads {
    std::atomic<uint64_t> bytes{0};  // read from mapped arrays since the last release
    std::atomic<uint64_t> budget{kMappedResidentBudget};
  };
  std::shared_ptr<MappedReads> mapped_reads_ = std::make_shared<MappedReads>();
};

// Gathers samples `indices` of every array into new tensors (first dim = indices.size(), same dtype and names: after
// Bind, the model input names and the labels name), through a view's rows. Any dtype with whole-byte elements, and
// strings. Fails on an index outside [0, num_samples).
StatusOr<std::vector<ir::Tensor>> MakeBatch(const Dataset& data, const std::vector<int64_t>& indices);

}  // namespace onnxamp::trainer
