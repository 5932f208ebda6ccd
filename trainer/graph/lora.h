// LoRA (low-rank adaptation, Hu et al. 2021), as Hugging Face peft's LoraConfig applies it to nn.Linear: beside a
// frozen weight W the training graphs learn two small matrices A and B, the layer computing
//   y = x·W + (dropout(x)·A·B) · scale,   scale = alpha / rank (rsLoRA: alpha / sqrt(rank)),
// with A initialised uniform in ±1/sqrt(in) (peft's kaiming_uniform_(a=sqrt 5)) and B zero, so that training starts
// from the model as it is. Only the adapters (and what `train` names) are parameters: the optimizer state is for
// rank·(in + out) values per weight instead of in·out. The export folds them back, W + scale·A·B, into a model of the
// original structure (MergeLora). Weights are the second input of MatMul and Gemm nodes (the ONNX form of a linear
// layer) and, when --lora-targets names them, of Conv nodes with group 1 (peft's Conv LoRA: A a convolution of the
// layer's kernel, stride, padding and dilation into `rank` channels, B a 1x1 convolution out of them); a weight that
// anything else reads too is left alone, since its merged value would change that reader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/model.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::trainer {

struct LoraOptions {
  int64_t rank = 0;     // > 0: adapters of this rank; 0: no LoRA
  double alpha = 8;     // peft's lora_alpha (its default 8)
  bool rslora = false;  // peft's use_rslora: scale = alpha / sqrt(rank)
  // ECMAScript regex searched in the weights' names; "": every MatMul/Gemm weight (Conv weights only when named)
  std::string targets;
  double dropout = 0;  // peft's lora_dropout: Dropout on the adapter's input, in [0, 1)
  std::string train;   // ECMAScript regex: other initializers that train as well (peft's modules_to_save); "": none
  uint64_t seed = 0;   // A's initial values
  // Initial adapters instead of the seeded ones, in peft's orientation: "<W>.lora_A" [rank, in] and "<W>.lora_B"
  // [out, rank] (FP32) for an adapted weight W (a Conv weight: [rank, in, k...] and [out, rank, 1...]); a weight
  // without them starts as above.
  std::vector<ir::Tensor> init;
  bool enabled() const { return rank > 0; }
  double scale() const;
};

// One adapted weight.
struct LoraAdapter {
  std::string weight;  // the frozen initializer
  // The adapters' parameter names: MatMul/Gemm: A [in, rank], B [rank, out] (the product's orientation); Conv: A
  // [rank, in, k...], B [out, rank, 1...] (peft's, the convolutions' own).
  std::string a, b;
  int64_t in = 0, out = 0;      // the layer's input and output features (channels)
  bool transposed = false;      // MatMul/Gemm: the weight is stored [out, in] (Gemm's transB = 1), else [in, out]
  std::vector<int64_t> kernel;  // Conv: the kernel's spatial dims; empty for MatMul/Gemm
  float scale = 0;              // what A·B is multiplied by in the weight
  bool conv() const { return !kernel.empty(); }
  // The weight's elements: in * out, times the kernel's for a Conv.
  int64_t weight_elements() const;
  // peft's dims of lora_A and lora_B for `rank` (what --lora-init reads and --lora-save writes).
  std::vector<int64_t> peft_a_dims(int64_t rank) const;
  std::vector<int64_t> peft_b_dims(int64_t rank) const;
};

struct LoraPlan {
  std::vector<LoraAdapter> adapters;
  // Weights that `targets` matched (or, without targets, 2-D FP32 MatMul/Gemm weights) but that get no adapter,
  // each as "NAME: why" (read by another node, a Gemm with transA, a grouped Conv, ...).
  std::vector<std::string> skipped;
};

// Validates the options and chooses the weights of `model` to adapt. Errors: a bad option, a bad regex, no weight
// chosen, init tensors that name no chosen weight or have the wrong dims.
StatusOr<LoraPlan> PlanLora(const ir::Model& model, const LoraOptions& options);

// The nodes AddLoraAdapters adds beside one reading node: `reader` (the MatMul/Gemm/Conv, in the model), the path's
// nodes (named after the reader: "<reader>_lora_a", ...), and among them the Mul by the scale.
struct LoraPath {
  const ir::Node* reader = nullptr;
  std::vector<std::string> nodes;
  std::string scale;
};

// Adds the plan's adapters to `model` (made by PlanLora from it, or from a model of the same graph): the two
// parameters of each weight as FP32 initializers, and for each node reading it, the low-rank path added to its output
// (its consumers and the graph outputs keep their value names). `paths` (may be null): what was added per reader.
Status AddLoraAdapters(ir::Model& model, const LoraOptions& options, const LoraPlan& plan,
                       std::vector<LoraPath>* paths = nullptr);

// The export's values: `values` (trained parameters and buffers by name) without the adapters, and with each adapted
// weight merged, W + scale·A·B (transposed for a weight stored [out, in]), FP32, W read from `original` (the model
// without adapters). An adapter missing from `values` is an error.
StatusOr<std::vector<ir::Tensor>> MergeLora(const ir::Model& original, const std::vector<LoraAdapter>& adapters,
                                            std::vector<ir::Tensor> values);

// The trained adapters among `values` in peft's orientation and names ("<W>.lora_A" [rank, in], "<W>.lora_B"
// [out, rank]), what LoraOptions::init reads back.
StatusOr<std::vector<ir::Tensor>> LoraAdapterTensors(const std::vector<LoraAdapter>& adapters,
                                                     const std::vector<ir::Tensor>& values);

}  // namespace onnxamp::trainer
