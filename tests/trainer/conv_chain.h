// A chain of Conv-BatchNormalization-Relu blocks for the trainer's memory tests (training_memory_test.cc,
// recompute_test.cc): x [batch, 8, 16, 16] -> `blocks` x (Conv 3x3 -> BatchNormalization -> Relu [-> Dropout 0.25]
// [, an Add of the block's input after every second block]) -> GlobalAveragePool -> Flatten -> Gemm to 10 classes.
#pragma once

#include <cstdint>
#include <string>

#include "tools/gen_models/builder.h"

namespace onnxamp::trainer::test_util {

inline constexpr int64_t kChainChannels = 8, kChainSide = 16, kChainClasses = 10;

struct ConvChainOptions {
  bool dropout = false;
  bool residual = false;
};

inline ir::Model ConvChain(int blocks, ConvChainOptions options = {}) {
  using ir::Attribute;
  ir::Model model = gen::NewModel("conv_chain", "Conv-BatchNormalization-Relu blocks for the memory tests");
  gen::GraphBuilder b(*model.graph);
  ir::Value* h = b.Input("x", DType::kFloat32, gen::Dims("batch", kChainChannels, kChainSide, kChainSide));
  ir::Value* ratio = options.dropout ? b.ConstantScalar("ratio", 0.25f) : nullptr;
  for (int i = 0; i < blocks; ++i) {
    const std::string name = "block" + std::to_string(i);
    ir::Value* in = h;
    ir::Value* w =
        b.Param(name + ".conv.weight", {kChainChannels, kChainChannels, 3, 3}, gen::KaimingBound(kChainChannels * 9));
    h = b.Op("Conv", name + ".conv", {h, w},
             {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("pads", {1, 1, 1, 1})});
    ir::Value* scale = b.ParamRange(name + ".bn.weight", {kChainChannels}, 0.5, 1.5);
    ir::Value* bias = b.ParamRange(name + ".bn.bias", {kChainChannels}, -0.2, 0.2);
    ir::Value* mean = b.ParamRange(name + ".bn.running_mean", {kChainChannels}, -0.2, 0.2);
    ir::Value* var = b.ParamRange(name + ".bn.running_var", {kChainChannels}, 0.5, 1.5);
    h = b.Op("BatchNormalization", name + ".bn", {h, scale, bias, mean, var}, {Attribute::Float("epsilon", 1e-5f)});
    h = b.Op("Relu", name + ".relu", {h});
    if (options.dropout) h = b.Op("Dropout", name + ".dropout", {h, ratio});
    if (options.residual && i % 2 == 1) h = b.Op("Add", name + ".residual", {h, in});
  }
  h = b.Op("GlobalAveragePool", "pool", {h});
  h = b.Op("Flatten", "flatten", {h}, {Attribute::Int("axis", 1)});
  ir::Value* w = b.Param("fc.weight", {kChainClasses, kChainChannels}, gen::KaimingBound(kChainChannels));
  ir::Value* bias = b.Param("fc.bias", {kChainClasses}, gen::KaimingBound(kChainChannels));
  h = b.Op("Gemm", "fc", {h, w, bias}, {Attribute::Int("transB", 1)});
  b.Output(h, "logits", DType::kFloat32, gen::Dims("batch", kChainClasses));
  return model;
}

}  // namespace onnxamp::trainer::test_util
