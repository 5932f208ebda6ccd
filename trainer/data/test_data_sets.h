// ONNX test-data folders as training data: DIR/test_data_set_*/input_N.pb (and output_N.pb), as the ONNX model zoo
// ships them, concatenated into one Dataset.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "trainer/data/dataset.h"

namespace onnxamp::trainer {

// True when `path` is a folder holding at least one test_data_set_* folder.
bool IsTestDataFolder(const std::string& path);

// Reads every DIR/test_data_set_K folder (in order of K, then name) and concatenates the sets along dim 0. In each
// set, input_N.pb is one array named by its TensorProto name, else by input_names[N] (the model's N-th data input);
// output_N.pb is an array named output_names[N] (the model's N-th output: usable as labels). Every set must hold the
// same files with the same array names, dtypes and per-sample shapes. Errors name the set and the file. The
// Dataset's source is DIR.
StatusOr<Dataset> LoadTestDataSets(const std::string& dir, const std::vector<std::string>& input_names,
                                   const std::vector<std::string>& output_names);

}  // namespace onnxamp::trainer
