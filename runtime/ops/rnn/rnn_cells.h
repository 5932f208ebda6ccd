// The default LSTM cell (gate functions Sigmoid, Tanh, Tanh; no clip; input_forget 0) and the default GRU cell with
// linear_before_reset (Sigmoid, Tanh; no clip: what torch.onnx exports nn.GRU as) in float, one batch row at a time:
// the forward step and its backward step, each a single loop over the hidden units with the activation functions
// inlined (elementwise_math.h's FastSigmoid and FastTanh, those of the Sigmoid and Tanh kernels), compiled for
// AVX-512, AVX2 with FMA and the baseline and chosen at run time. rnn_core.cc runs them in place of its general path,
// which takes a row stage by stage (a call per activation and several passes over the row) on every CPU, in code
// built for the baseline ISA.
#pragma once

#include <cstdint>

namespace onnxamp::ops::rnn {

// One row of one forward step. Gates in W's order: i, o, f, c.
struct LstmRowForward {
  const float* xg;  // [4H] the input products, with the biases
  const float* hg;  // [4H] H_{t-1} * R^T
  const float* p;   // [3H] peepholes i, o, f (zeros when the node has none)
  float* c;         // [H] C_{t-1} in, C_t out
  float* h;         // [H] H_t out
  float* z;         // [4H] the gate inputs out (the trace's; the output gate's includes its peephole term)
};
void LstmCellForward(const LstmRowForward& row, int64_t hidden);

// One row of one backward step.
struct LstmRowBackward {
  const float* z;   // [4H] the gate inputs of the step
  const float* c;   // [H] C_t
  const float* cp;  // [H] C_{t-1}
  const float* p;   // [3H] peepholes
  const float* dh;  // [H] the gradient of H_t (from Y, Y_h and the next step)
  float* dc;        // [H] the gradient of C_t in, of C_{t-1} out
  float* dz;        // [4H] the gate inputs' gradients out (the peepholes' gradients are sums of them, taken later)
};
void LstmCellBackward(const LstmRowBackward& row, int64_t hidden);

// One row of one GRU forward step (linear_before_reset). Gates in W's order: update, reset, candidate.
struct GruRowForward {
  const float* xg;  // [3H] the input products, with Wb and (update, reset) Rb
  const float* hg;  // [3H] H_{t-1} * R^T
  const float* rb;  // [3H] Rb (its candidate third is added to H_{t-1} * Rh^T inside the reset product)
  float* h;         // [H] H_{t-1} in, H_t out
  float* z;         // [3H] the gate inputs out
  float* q;         // [H] H_{t-1} * Rh^T + Rbh out (the trace's)
};
void GruCellForward(const GruRowForward& row, int64_t hidden);

// One row of one GRU backward step (linear_before_reset).
struct GruRowBackward {
  const float* z;   // [3H] the gate inputs of the step
  const float* q;   // [H] H_{t-1} * Rh^T + Rbh
  const float* hp;  // [H] H_{t-1}
  const float* dh;  // [H] the gradient of H_t
  float* dz;        // [3H] out: the gradients of the update and reset gate inputs, and of H_{t-1} * Rh^T + Rbh
  float* direct;    // [H] out: the share of H_{t-1}'s gradient that does not pass through R
  float* dxh;       // [H] out: the gradient of the candidate's input product (X * Wh^T + Wbh)
};
void GruCellBackward(const GruRowBackward& row, int64_t hidden);

}  // namespace onnxamp::ops::rnn
