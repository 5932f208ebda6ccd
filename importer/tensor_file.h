// Tensor files: ONNX TensorProto (.pb), NumPy .npy, and .npz archives of named arrays.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::importer {

// Reads one tensor from a .pb (TensorProto) or .npy file, chosen by extension (a file with neither is sniffed:
// the NumPy magic, else TensorProto). The tensor's name is the TensorProto name, or for .npy the file stem.
StatusOr<ir::Tensor> ReadTensorFile(const std::string& path);

// Reads every tensor of a file: all arrays of an .npz (named by their archive entry without ".npy"), or the
// one tensor of a .pb/.npy file.
StatusOr<std::vector<ir::Tensor>> ReadTensors(const std::string& path);

// Writes by extension: .pb (TensorProto, raw_data), .npy. Atomic (temporary file + rename).
Status WriteTensorFile(const ir::Tensor& tensor, const std::string& path);

// Writes an .npz archive with one entry per tensor, named after the tensor. Atomic.
Status WriteNpz(const std::vector<ir::Tensor>& tensors, const std::string& path);

}  // namespace onnxamp::importer
