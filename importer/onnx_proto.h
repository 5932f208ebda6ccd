// Conversion between ONNX protobuf messages and the IR. Used by model_io and tensor files.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "runtime/common/status.h"
#include "runtime/ir/model.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::importer {

// Where external tensor data are read from. Paths are confined to `base_dir`: absolute paths, "..", and
// symlinks that resolve outside it are refused, as are offset/length past the end of the file.
struct ExternalDataContext {
  std::string base_dir;  // empty: external data are refused
  // false: leave such tensors empty, with their ExternalDataInfo set. The references are checked all the same
  // (the file exists inside `base_dir`, is a regular file, and holds the tensor's bytes at the offset), only the
  // data are not read.
  bool load = true;
};

// TensorProto -> Tensor. Checks that the data size agrees with dtype and dims (typed fields or raw_data).
// `where` names the tensor in error messages ("initializer 'w'").
StatusOr<ir::Tensor> TensorFromProto(const onnx::TensorProto& proto, const ExternalDataContext& ext,
                                     const std::string& where);

// Tensor -> TensorProto with the data inline, in the tensor's encoding (raw_data or typed fields).
void TensorToProto(const ir::Tensor& tensor, onnx::TensorProto* proto);

// ModelProto -> Model. Validates everything the IR relies on; does not run ir::Verify.
StatusOr<ir::Model> ModelFromProto(const onnx::ModelProto& proto, const ExternalDataContext& ext);
// Same, moving the tensor data out of `proto` rather than copying them, so that a model's weights are held once,
// not twice, while it is converted: large raw_data buffers become the IR tensors' storage.
StatusOr<ir::Model> ModelFromProto(onnx::ModelProto&& proto, const ExternalDataContext& ext);

// Model -> ModelProto with every tensor inline (model_io moves tensors to external data when saving).
void ModelToProto(const ir::Model& model, onnx::ModelProto* proto);

}  // namespace onnxamp::importer
