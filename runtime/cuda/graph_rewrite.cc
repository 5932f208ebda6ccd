// The pipeline of CUDA passes (see graph_rewrite.h).
#include "runtime/cuda/graph_rewrite.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "runtime/executor/graph_match.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ir/verify.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::cuda {

passes::PassPipeline CudaPasses(const exec::SessionOptions& options) {
  passes::PassPipeline pipeline;
  if (options.graph_optimization == exec::GraphOptimization::kNone) return pipeline;
  const bool training = options.mode == exec::SessionMode::kTraining;
  // A training graph's parameters are bound on every run and its backward nodes read the forward activations: no
  // layout change there (the generic optimizer already fused the forward products with their bias and ReLU), but
  // the backward GEMMs write FP32 weight gradients and bias gradients themselves.
  if (training) {
    pipeline.Add("fuse_backward_gemms", [](ir::Model& m, const passes::PassContext&, bool* changed) {
      ONNXAMP_RETURN_IF_ERROR(FuseBackwardGemms(*m.graph, changed));
      if (*changed && m.OpsetVersion(kFusedMatMulDomain) == 0) m.SetOpsetVersion(kFusedMatMulDomain, 1);
      return Status::Ok();
    });
    pipeline.Add("fuse_activation_gradients", [](ir::Model& m, const passes::PassContext&, bool* changed) {
      ONNXAMP_RETURN_IF_ERROR(exec::FuseActivationGradients(*m.graph, changed));
      if (*changed && m.OpsetVersion(kFusedMatMulDomain) == 0) m.SetOpsetVersion(kFusedMatMulDomain, 1);
      return Status::Ok();
    });
    return pipeline;
  }
  // fp16/bf16 convolutions run on tensor cores, which want channels-last activations: chains of them switch layout
  // once at each end. fp32 convolutions (FMA unless TF32 is allowed) keep the plain layout.
  if (options.graph_optimization == exec::GraphOptimization::kAll && options.channels_last) {
    pipeline.Add("use_channels_last_layout", [](ir::Model& m, const passes::PassContext&, bool* changed) {
      ONNXAMP_RETURN_IF_ERROR(exec::UseChannelsLastLayout(*m.graph, {DType::kFloat16, DType::kBFloat16}, changed));
      if (*changed && m.OpsetVersion(exec::kInternalDomain) == 0) m.SetOpsetVersion(exec::kInternalDomain, 1);
      return Status::Ok();
    });
  }
  return pipeline;
}

Status OptimizeGraphForCuda(ir::Model& model, const exec::SessionOptions& options) {
  if (options.graph_optimization == exec::GraphOptimization::kNone || !model.graph) return Status::Ok();
  if (!ir::Verify(model).ok()) return Status::Ok();  // Session::Create reports the problem
  // Before opset 7, Gemm broadcasts C only with its `broadcast` attribute; such models are left as they are.
  if (model.OpsetVersion("") < 7) return Status::Ok();
  passes::PassContext ctx;
  ctx.device = exec::Device::kCuda;
  ctx.training = options.mode == exec::SessionMode::kTraining;
  return CudaPasses(options).Run(model, ctx);
}

}  // namespace onnxamp::cuda
