// A trained model back to ONNX: the original inference graph with the trained parameters and the updated running
// statistics in place of the initial ones, in FP32 or as the converter's mixed-precision model of it.
#pragma once

#include <string>
#include <vector>

#include "converter/policy.h"
#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/ir/model.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::trainer {

struct InferenceModeReport;  // trainer/graph/training_graph.h

struct ExportOptions {
  // kFloat32: the model as trained (each initializer in the type the original model stored it in); kFloat16 or
  // kBFloat16: then converted as `onnxamp convert --keep-io-types` does, the precision training used.
  DType precision = DType::kFloat32;
  bool keep_io_types = true;
  // The model's input shapes are kept as they are unless this is set: then a batch dim fixed at export (dim 0 of the
  // graph inputs without an initializer) is made symbolic (MakeBatchDimSymbolic) before the precision conversion.
  bool dynamic_batch = false;
  // The conversion's policy: the one training used (TrainingGraphOptions::policy), so that the export computes in
  // the precision the model was trained in.
  converter::PrecisionPolicy policy = converter::PrecisionPolicy::Default();
  // BatchNormalization and Dropout nodes the model has in training mode (as a training-mode torch.onnx.export writes
  // them) written in inference mode (UseInferenceMode), for deployment; ExportTrainedModel's `inference_mode_report`
  // (when given) says how many.
  bool inference_mode = false;
};

// `original` with every tensor of `values` (named after an initializer: parameters and buffers, FP32) written into
// the initializer of that name, converted to the initializer's own type. An unknown name, or dims that differ from
// the initializer's, is an error naming the tensor.
StatusOr<ir::Model> ExportTrainedModel(const ir::Model& original, const std::vector<ir::Tensor>& values,
                                       const ExportOptions& options,
                                       InferenceModeReport* inference_mode_report = nullptr);

// `t`'s dtype, dims and name without its data (Tensor::WithoutData): what stands for a weight whose values live
// elsewhere (the trainer's store, a later export's trained values).
StatusOr<ir::Tensor> ShellOf(const ir::Tensor& t);

// Drops the data of the initializers of `model` named in `names`, keeping their dtype and dims
// (Tensor::WithoutData): ExportTrainedModel writes the trained values over them, so a caller that keeps the model
// for the export holds no second copy of the weights while it trains. Unknown names are skipped.
Status DropInitializerData(ir::Model& model, const std::vector<std::string>& names);

}  // namespace onnxamp::trainer
