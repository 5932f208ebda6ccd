// Training data: named arrays that share their first dimension (samples), loaded from .npz/.npy/.pb/.csv, bound to a
// model's inputs and labels with one-line errors, split into training and validation parts, and gathered into batches.
#pragma once

#include <cstdint>
#include <optional>
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
};

struct BindOptions {
  // Model input name → array name (--input-map NAME=ARRAY); inputs not listed read the array of their own name.
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
class Dataset {
 public:
  Dataset() = default;

  // Reads every array of an .npz (named by archive entry), or the one array of an .npy or .pb file (named by the
  // file stem, or the TensorProto's name), or a .csv/.csv.gz file as the arrays "features" (float32) and "label"
  // (int64) by ReadCsv with `csv` (csv.h). Fails on an unreadable or empty file, zero samples, scalars, arrays
  // whose first dims differ, duplicate names, and sub-byte dtypes. An .npy file is memory-mapped
  // (importer::MapNpyFile): batches are gathered from the mapping, so it may be larger than memory.
  static StatusOr<Dataset> Load(const std::string& path, const CsvOptions& csv = {});
  // The same checks over arrays already in memory; `source` names them in errors.
  static StatusOr<Dataset> FromTensors(std::vector<ir::Tensor> arrays, std::string source);

  // The dataset a model trains on: one array per model input, in `inputs` order and renamed to the input's name,
  // then the labels array (keeping its name) when options.labels.array is set. Checks that every array exists, fits
  // its input's type (dtype; every fixed dim but dim 0), holds only finite floats (unless allowed), and that labels
  // have the requested kind and range. Errors name the file, the array and what is wrong.
  StatusOr<Dataset> Bind(const std::vector<ModelInput>& inputs, const BindOptions& options) const;

  // Splits off a validation part of round(fraction * n) samples chosen by a seeded shuffle (independent of the epoch
  // shuffles); both parts keep file order. Fails unless 0 < fraction < 1 and both parts are non-empty.
  StatusOr<std::pair<Dataset, Dataset>> Split(double fraction, uint64_t seed) const;

  // Checks that `other` (a separate validation file bound the same way) has arrays of the same names, dtypes and
  // per-sample shapes; errors name other's source.
  Status CheckCompatible(const Dataset& other) const;

  const std::string& source() const { return source_; }
  int64_t num_samples() const { return num_samples_; }
  const std::vector<ir::Tensor>& arrays() const { return arrays_; }
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
  std::optional<size_t> labels_index_;  // set by Bind: the labels come last
};

// Gathers rows `indices` of every array into new tensors (first dim = indices.size(), same dtype and names: after
// Bind, the model input names and the labels name). Any dtype with whole-byte elements, and strings. Fails on an
// index outside [0, num_samples).
StatusOr<std::vector<ir::Tensor>> MakeBatch(const Dataset& data, const std::vector<int64_t>& indices);

}  // namespace onnxamp::trainer
