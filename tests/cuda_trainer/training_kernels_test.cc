// The training graphs of the bundled models run on CUDA: every node of their train and eval graphs, in FP32 and
// under FP16/BF16 AMP, with each loss that fits the model, has a CUDA kernel for its element type. The check reads
// the kernel registries only, so it needs no GPU and runs in every build with the CUDA backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "importer/model_io.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/executor/kernel.h"
#include "tests/trainer/train_test_util.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {
namespace {

std::string ModelPath(const std::string& name) { return test_util::ReferenceModelsDir() + "/" + name; }

// "Op (domain) dtype at opset N" for each node of `model` whose op has no CUDA kernel at the model's opset, or whose
// kernel does not take the node's element type.
std::set<std::string> MissingCudaKernels(const ir::Model& model) {
  std::set<std::string> missing;
  const exec::KernelRegistry& cuda = cuda::CudaKernelRegistry();
  for (const ir::Node* node : model.graph->nodes()) {
    int64_t opset = model.OpsetVersion(node->domain());
    StatusOr<const exec::KernelDef*> def = cuda.Find(node->op_type(), node->domain(), opset, exec::Device::kCuda);
    std::string what = node->op_type() + (node->domain().empty() ? "" : " (" + node->domain() + ")");
    if (!def.ok()) {
      missing.insert(what + " at opset " + std::to_string(opset));
      continue;
    }
    const std::vector<DType>& dtypes = (*def)->dtypes;
    size_t i = static_cast<size_t>((*def)->dtype_input);
    if (dtypes.empty() || i >= node->inputs().size() || node->inputs()[i] == nullptr) continue;
    DType t = node->inputs()[i]->type().elem_type();
    if (t == DType::kUndefined) continue;
    if (std::find(dtypes.begin(), dtypes.end(), t) == dtypes.end()) {
      missing.insert(what + " for " + std::string(DTypeName(t)));
    }
  }
  return missing;
}

struct Case {
  const char* model;
  LossKind loss;
  int64_t class_axis;
};

TEST(CudaTrainingKernelsTest, EveryNodeOfTheBundledTrainingGraphsHasACudaKernel) {
  const Case cases[] = {
      {"mlp.onnx", LossKind::kCrossEntropy, 1},
      {"mlp.onnx", LossKind::kMse, 1},
      {"mlp.onnx", LossKind::kL1, 1},
      {"mlp.onnx", LossKind::kBceWithLogits, 1},
      {"mlp.onnx", LossKind::kHuber, 1},
      {"mlp.onnx", LossKind::kSmoothL1, 1},
      {"digits_mlp.onnx", LossKind::kCrossEntropy, 1},
      {"cnn.onnx", LossKind::kCrossEntropy, 1},
      {"transformer.onnx", LossKind::kCrossEntropy, -1},
  };
  std::set<std::string> all;
  for (const Case& c : cases) {
    StatusOr<ir::Model> model = importer::LoadModel(ModelPath(c.model));
    ASSERT_TRUE(model.ok()) << model.status().message();
    for (DType amp : {DType::kUndefined, DType::kFloat16, DType::kBFloat16}) {
      TrainingGraphOptions options;
      options.loss.kind = c.loss;
      options.loss.class_axis = c.class_axis;
      options.amp = amp;
      // As Trainer::Create builds them for CUDA: BF16 convolutions and pools (ONNX's types of opset 22).
      options.bfloat16_types_opset = kBFloat16TypesOpset;
      StatusOr<TrainingGraphs> g = BuildTrainingGraphs(*model, options);
      ASSERT_TRUE(g.ok()) << c.model << ": " << g.status().message();
      for (const ir::Model* m : {&g->train, &g->eval}) {
        for (const std::string& s : MissingCudaKernels(*m)) {
          all.insert(std::string(c.model) + " " + LossKindName(c.loss) + " " +
                     (amp == DType::kUndefined ? std::string("fp32") : std::string(DTypeName(amp))) + ": " + s);
        }
      }
    }
  }
  std::string list;
  for (const std::string& s : all) list += "\n  " + s;
  EXPECT_TRUE(all.empty()) << all.size() << " nodes without a CUDA kernel:" << list;
}

}  // namespace
}  // namespace onnxamp::trainer
