// The reference models: the small ones checked in under models/ and the large ones written on demand.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/ir/model.h"

namespace onnxamp::gen {

// Each builder returns a complete model (IR 8, opset 17) with deterministic weights.
ir::Model Mlp();          // MLP 256-128-10
ir::Model DigitsMlp();    // MLP 64-128-10 for 8x8 digits
ir::Model Mlp4096();      // three 4096x4096 Linear layers (large)
ir::Model Cnn();          // small ResNet for 3x32x32 images
ir::Model Transformer();  // one GPT block, vocab 128, sequence 32
// ResNet-50 v1.5 (torchvision's topology and parameter names), input [batch,3,224,224], 25,557,032 parameters
// plus BatchNormalization running statistics (large).
ir::Model ResNet50();
// `layers` Linear width x width layers (Gemm transB=1) with ReLU between, input and output [batch,width].
ir::Model DeepMlp(const std::string& graph_name, int64_t width, int64_t layers, const std::string& doc);
// DeepMlp with 24 layers of 2048: 100,712,448 parameters, for the conversion speed/memory benchmark (large).
ir::Model Mlp100m();

struct ModelSpec {
  const char* name;
  bool large;  // not checked in; written with --only NAME or --all
  std::function<ir::Model()> build;
};

// Every model the generator knows, in --list order.
const std::vector<ModelSpec>& Specs();

}  // namespace onnxamp::gen
