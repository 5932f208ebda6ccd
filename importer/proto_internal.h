// Helpers shared by the importer's proto conversion files (tensors, types, graphs) and model_io. Private.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <string_view>
#include <vector>

#include "importer/onnx_proto.h"
#include "runtime/common/status.h"
#include "runtime/ir/model.h"
#include "runtime/ir/tensor.h"
#include "runtime/ir/type.h"

namespace onnxamp::importer::internal {

// "<where>: <what>", or just "<what>" when `where` is empty.
inline std::string Join(const std::string& where, std::string_view what) {
  return where.empty() ? std::string(what) : where + ": " + std::string(what);
}

// Returns `s` with "<where>: " in front of its message (unchanged when OK or `where` is empty).
inline Status AddContext(const Status& s, const std::string& where) {
  if (s.ok() || where.empty()) return s;
  return Status(s.code(), where + ": " + s.message());
}

// TypeProto <-> ValueType. Element type codes must be ones ONNX defines (0 = left out).
StatusOr<ir::ValueType> TypeFromProto(const onnx::TypeProto& proto, const std::string& where);
void TypeToProto(const ir::ValueType& type, onnx::TypeProto* proto);

// SparseTensorProto -> SparseTensor (values rank 1, int64 indices [NNZ] or [NNZ, rank]).
StatusOr<ir::SparseTensor> SparseTensorFromProto(const onnx::SparseTensorProto& proto, const ExternalDataContext& ext,
                                                 const std::string& where);

// Checks an external data location as written in a model: relative, no "..", no NUL. `where` names the tensor.
Status CheckExternalLocation(const std::string& location, const std::string& where);

// TensorFromProto that takes the data out of `proto` instead of copying them: a large raw_data string becomes the
// tensor's storage (no copy), typed data fields are freed once copied. Leaves `proto` without its data; on failure
// `proto` is unchanged.
StatusOr<ir::Tensor> TensorFromProtoConsuming(onnx::TensorProto* proto, const ExternalDataContext& ext,
                                              const std::string& where);

// True when TensorToProto writes the tensor's bytes to raw_data (raw encoding, data present, not strings).
bool WritesRawData(const ir::Tensor& tensor);

// TensorToProto, leaving raw_data out when WritesRawData(tensor) (the caller writes those bytes itself).
void TensorToProtoWithoutRawData(const ir::Tensor& tensor, onnx::TensorProto* proto);

// A dense tensor written by ModelToProto, with the IR tensor it came from; SaveModel uses the list to move
// tensors to an external data file.
struct ExportedTensor {
  onnx::TensorProto* proto;
  const ir::Tensor* tensor;
  bool may_be_external;    // initializers and tensor(s) attributes; not the parts of sparse tensors
  bool raw_data_left_out;  // the proto lacks the raw_data the tensor holds (ModelToProtoCollect with defer)
};

// ModelToProto that also lists every non-string tensor it wrote (in subgraphs and function bodies too), in
// file order. With `defer_raw_data`, raw_data is left out of the protos (see ExportedTensor::raw_data_left_out),
// so that the caller can stream the bytes from the tensors instead of holding a second copy.
void ModelToProtoCollect(const ir::Model& model, onnx::ModelProto* proto, std::vector<ExportedTensor>* tensors,
                         bool defer_raw_data = false);

}  // namespace onnxamp::importer::internal
