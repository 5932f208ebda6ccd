// A direct 2-D convolution on the blocked channel layout with AVX2: BlockedConv's fast path (blocked_cpu.cc) on CPUs
// whose channel block is 8. Each output position of a blocked Y holds 8 channels side by side, one AVX2 vector, so
// the register kernel keeps 2 x 6 accumulators (16 output channels at 6 positions of a row) and adds, for every input
// channel and kernel tap, 6 broadcast inputs times 16 weights: the same 12 FMAs per 8 loads as the AVX2 GEMM's
// kernel, without forming the im2col matrix. The fused bias, Z and ReLU are applied before the store.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/conv_onednn.h"

namespace onnxamp::ops {

// True when BlockedConvAvx2 runs `p` with `layouts` on this CPU: the CPU has AVX2 and FMA; 2 spatial dims; group 1;
// stride 1 or 2 along the width; X plain or in blocks of 8, Y in blocks of 8, Z (if any, `has_z`) in blocks of 8; and
// the problem is of the kind this kernel runs faster than oneDNN: a kernel of more than one tap, at most 128 input
// channels, and at least 64 multiply-adds per output (input channels, padded to the block, times taps).
bool BlockedConvAvx2Applies(const ConvProblem& p, const ConvLayouts& layouts, bool has_z);

// W [m, c, kh, kw] (and the bias [m], or none) rearranged for the kernel: for each pair of 8-channel output blocks,
// kernel tap and input channel (padded to a multiple of 8 when X is blocked), the pair's 16 weights side by side.
struct BlockedConvAvx2Weights {
  std::vector<float> w;
  std::vector<float> bias;  // 16 per pair of output blocks, zeros past m (and without a bias)
  int64_t c_padded = 0;     // input channels in the packing
};

BlockedConvAvx2Weights BlockedConvAvx2PackWeights(const ConvProblem& p, const ConvLayouts& layouts, const float* w,
                                                  const float* bias);

// y = relu?(conv(x, w) + bias + z) for BlockedConvAvx2Applies(p, layouts, z != nullptr), with the weights from
// BlockedConvAvx2PackWeights; x in layouts.x, y and z in blocks of 8 (lanes past m written as zeros). Splits the
// output rows over `threads`.
void BlockedConvAvx2(const ConvProblem& p, const ConvLayouts& layouts, const float* x,
                     const BlockedConvAvx2Weights& weights, const float* z, bool relu, float* y,
                     exec::ThreadPool& threads);

}  // namespace onnxamp::ops
