// ExportTrainedModel: trained values into the original initializers, then the optional precision conversion.
#include "trainer/export.h"

#include "converter/convert.h"
#include "converter/model_clone.h"
#include "runtime/common/half.h"
#include "runtime/ops/common/broadcast.h"
#include "trainer/graph/batch_dim.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {
namespace {

// An FP32 tensor in storage type `to` (round to nearest even for fp16/bf16).
StatusOr<ir::Tensor> FromFloat32(const ir::Tensor& t, DType to) {
  if (to == DType::kFloat32) return t;
  ir::Tensor out(to, t.dims());
  const auto src = t.values<float>();
  switch (to) {
    case DType::kFloat16:
      for (size_t i = 0; i < src.size(); ++i) out.mutable_values<Float16>()[i] = Float16(src[i]);
      break;
    case DType::kBFloat16:
      for (size_t i = 0; i < src.size(); ++i) out.mutable_values<BFloat16>()[i] = BFloat16(src[i]);
      break;
    case DType::kFloat64:
      for (size_t i = 0; i < src.size(); ++i) out.mutable_values<double>()[i] = src[i];
      break;
    default:
      return InvalidArgument("initializer type ", DTypeName(to), " is not a float type");
  }
  return out;
}

}  // namespace

StatusOr<ir::Model> ExportTrainedModel(const ir::Model& original, const std::vector<ir::Tensor>& values,
                                       const ExportOptions& options, InferenceModeReport* inference_mode_report) {
  if (!original.graph) return InvalidArgument("the model has no graph");
  ir::Model model = converter::CloneModel(original);
  ir::Graph& g = *model.graph;
  for (const ir::Tensor& t : values) {
    ir::Value* v = g.FindValue(t.name());
    if (!v || !v->initializer()) return NotFound("trained tensor '", t.name(), "' is not an initializer of the model");
    const ir::Tensor& old = *v->initializer();
    if (old.dims() != t.dims()) {
      return InvalidArgument("trained tensor '", t.name(), "' has dims ", ops::ShapeToString(t.dims()),
                             ", the model's ", ops::ShapeToString(old.dims()));
    }
    if (t.dtype() != DType::kFloat32) return InvalidArgument("trained tensor '", t.name(), "' is not float32");
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor stored, FromFloat32(t, old.dtype()));
    stored.set_name(t.name());
    g.SetInitializer(v, std::move(stored));
  }
  if (options.inference_mode) {
    const InferenceModeReport r = UseInferenceMode(g, model.OpsetVersion(""));
    if (inference_mode_report) *inference_mode_report = r;
  }
  if (options.dynamic_batch) {
    Status st = MakeBatchDimSymbolic(model, GraphDataInputs(*model.graph));
    if (!st.ok()) return st.WithContext("making the batch dimension symbolic");
  }
  if (options.precision == DType::kFloat16 || options.precision == DType::kBFloat16) {
    converter::ConvertOptions convert;
    convert.target = options.precision;
    convert.policy = options.policy;
    convert.keep_io_types = options.keep_io_types;
    Status st = converter::ConvertModel(model, convert);
    if (!st.ok()) return st.WithContext(StrCat("converting the trained model to ", DTypeName(options.precision)));
  } else if (options.precision != DType::kFloat32) {
    return InvalidArgument("export precision must be float32, float16 or bfloat16");
  }
  return model;
}

StatusOr<ir::Tensor> ShellOf(const ir::Tensor& t) {
  ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor shell, ir::Tensor::WithoutData(t.dtype(), t.dims()));
  shell.set_name(t.name());
  return shell;
}

Status DropInitializerData(ir::Model& model, const std::vector<std::string>& names) {
  if (!model.graph) return Status::Ok();
  for (const std::string& name : names) {
    ir::Value* v = model.graph->FindValue(name);
    if (!v || !v->initializer()) continue;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor shell, ShellOf(*v->initializer()));
    model.graph->SetInitializer(v, std::move(shell));
  }
  return Status::Ok();
}

}  // namespace onnxamp::trainer
