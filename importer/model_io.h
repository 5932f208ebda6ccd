// Loading and saving ONNX model files (ModelProto <-> ir::Model), with external data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/ir/model.h"

namespace onnxamp::importer {

// IR versions we read: ONNX IR 3 (the opset-import era) through IR 14, what onnx 1.23's helpers write by default.
// IR 12 to 14 add element types (float8e8m0, int2/uint2, the float6 ones); a model using a type we do not read is
// refused naming the tensor, and the opset limit below still decides which op versions a model may use.
inline constexpr int64_t kMinIrVersion = 3;
inline constexpr int64_t kMaxIrVersion = 14;
// Default-domain opsets we read. The runtime supports a narrower range; the importer only refuses what
// no ONNX release defines.
inline constexpr int64_t kMaxDefaultOpset = 23;

struct LoadOptions {
  // Read external data files into the tensors (they remember where they came from). When false, tensors
  // with external data are left empty with their ExternalDataInfo set: enough for `inspect`. Either way every
  // reference is checked the same way (file present, inside the model folder with symlinks resolved, offset and
  // length within the file and agreeing with the tensor's dtype and dims); a bad one fails the load.
  bool load_external_data = true;
};

// Reads, parses, converts and verifies a model. Errors name the file and the offending node/value/tensor,
// e.g. "model.onnx: node 'n3' (Add): input 'x' is not produced by any node, graph input or initializer".
StatusOr<ir::Model> LoadModel(const std::string& path, const LoadOptions& options = {});

// Same from bytes in memory. `base_dir` is where external data files are looked for; empty refuses external
// data. `display_name` prefixes error messages.
StatusOr<ir::Model> LoadModelFromBytes(std::string_view bytes, const std::string& base_dir,
                                       const std::string& display_name, const LoadOptions& options = {});

enum class ExternalDataMode {
  kAuto,    // tensors that came from external data stay external; everything external when the model is over 2 GB
  kAlways,  // every tensor of at least `external_threshold_bytes` goes to the external file
  kNever,   // everything inline (fails for models over 2 GB)
};

struct SaveOptions {
  ExternalDataMode external_data = ExternalDataMode::kAuto;
  // External data file name, relative to the model's folder; default "<model file name>.data".
  std::string external_data_file;
  size_t external_threshold_bytes = 1024;
};

// Converts, serializes and writes a model (and its external data file) via temporary files and rename, so a
// failure leaves no partial output.
Status SaveModel(const ir::Model& model, const std::string& path, const SaveOptions& options = {});

}  // namespace onnxamp::importer
