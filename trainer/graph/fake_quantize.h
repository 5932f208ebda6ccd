// Quantization-aware training: the training graphs' QuantizeLinear -> DequantizeLinear pairs become one com.onnxamp
// FakeQuantize (runtime/ops/gradient_ops.h), which computes the pair's values bit for bit in float and whose gradient
// is the straight-through estimator (PyTorch's fake_quantize backward) with the learned-step-size gradient for the
// scale. Without it the pair's integer middle stops the gradient: the float weights of a QAT model exported from
// PyTorch (weight -> QuantizeLinear -> DequantizeLinear -> Conv) would get none. The eval graph and the exported
// model keep the pairs as they are.
#pragma once

#include "runtime/ir/model.h"

namespace onnxamp::trainer {

// Rewrites each DequantizeLinear of `model`'s main graph whose input is the output of a QuantizeLinear of a float
// value, with the same scale and zero point (the same values, or constants of equal contents), the same axis and no
// blocks, into FakeQuantize of the QuantizeLinear's input; a QuantizeLinear nothing else reads is removed. Imports
// com.onnxamp when it rewrites. Returns the number of pairs rewritten.
int UseFakeQuantize(ir::Model& model);

}  // namespace onnxamp::trainer
