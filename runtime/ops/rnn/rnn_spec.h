// The attributes of RNN, GRU and LSTM (parsed by rnn::ParseSpec, rnn.h) and their activation functions with the
// derivatives, for host and device code: the CPU kernels (rnn_core.cc) and the CUDA ones (runtime/cuda/ops/rnn/) run
// the very same scalar functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/common/host_device.h"

namespace onnxamp::ops::rnn {

// The activation functions the ONNX recurrent ops name (case-insensitive), with their alpha and beta.
enum class Fn {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus
};
struct Activation {
  Fn fn = Fn::kTanh;
  double alpha = 0, beta = 0;
  bool operator==(const Activation&) const = default;
};

template <typename A>
ONNXAMP_HOST_DEVICE A Sigmoid(A x) {
  if (x >= 0) return A(1) / (A(1) + std::exp(-x));
  const A e = std::exp(x);
  return e / (A(1) + e);
}

template <typename A>
ONNXAMP_HOST_DEVICE A Apply(const Activation& f, A x) {
  const A alpha = static_cast<A>(f.alpha), beta = static_cast<A>(f.beta);
  switch (f.fn) {
    case Fn::kRelu:
      return x < 0 ? A(0) : x;  // NaN stays NaN, as Relu and torch.nn.RNN keep it
    case Fn::kTanh:
      return std::tanh(x);
    case Fn::kSigmoid:
      return Sigmoid(x);
    case Fn::kAffine:
      return alpha * x + beta;
    case Fn::kLeakyRelu:
      return x >= 0 ? x : alpha * x;
    case Fn::kThresholdedRelu:
      return x > alpha ? x : A(0);
    case Fn::kScaledTanh:
      return alpha * std::tanh(beta * x);
    case Fn::kHardSigmoid:
      return std::min(std::max(alpha * x + beta, A(0)), A(1));
    case Fn::kElu:
      return x >= 0 ? x : alpha * (std::exp(x) - A(1));
    case Fn::kSoftsign:
      return x / (A(1) + std::abs(x));
    case Fn::kSoftplus:
      return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
  return x;
}

// d Apply(f, x) / dx (at the kinks, the side PyTorch's functions take: 0 for Relu at 0).
template <typename A>
ONNXAMP_HOST_DEVICE A Derivative(const Activation& f, A x) {
  const A alpha = static_cast<A>(f.alpha), beta = static_cast<A>(f.beta);
  switch (f.fn) {
    case Fn::kRelu:
      return x > 0 ? A(1) : A(0);
    case Fn::kTanh: {
      const A t = std::tanh(x);
      return A(1) - t * t;
    }
    case Fn::kSigmoid: {
      const A s = Sigmoid(x);
      return s * (A(1) - s);
    }
    case Fn::kAffine:
      return alpha;
    case Fn::kLeakyRelu:
      return x > 0 ? A(1) : alpha;
    case Fn::kThresholdedRelu:
      return x > alpha ? A(1) : A(0);
    case Fn::kScaledTanh: {
      const A t = std::tanh(beta * x);
      return alpha * beta * (A(1) - t * t);
    }
    case Fn::kHardSigmoid: {
      const A v = alpha * x + beta;
      return v > 0 && v < 1 ? alpha : A(0);
    }
    case Fn::kElu:
      return x > 0 ? A(1) : alpha * std::exp(x);
    case Fn::kSoftsign: {
      const A d = A(1) + std::abs(x);
      return A(1) / (d * d);
    }
    case Fn::kSoftplus:
      return Sigmoid(x);
  }
  return A(1);
}

// A gate's function of its input clipped to [-clip, clip] (clip 0: none), and the derivative of that composition (0
// where the input is clipped), for host and device code (the CPU's Gate uses it
// where it has no array function).
template <typename A>
struct GateFn {
  Activation f;
  A clip = 0;

  ONNXAMP_HOST_DEVICE A Value(A z) const { return Apply(f, clip > 0 ? std::min(std::max(z, -clip), clip) : z); }
  ONNXAMP_HOST_DEVICE A Grad(A z) const { return clip > 0 && std::abs(z) > clip ? A(0) : Derivative(f, z); }
};

enum class Cell { kRnn, kGru, kLstm };

// The forward op's attributes.
struct Spec {
  Cell cell = Cell::kLstm;
  int64_t hidden = 0;                // hidden_size
  int directions = 1;                // 2 for "bidirectional"
  bool reverse = false;              // "reverse": the one direction runs backwards in time
  std::vector<Activation> acts;      // ActsPerDirection() per direction, direction 0 first
  double clip = 0;                   // 0: no clip; else gate inputs are clipped to [-clip, clip]
  bool input_forget = false;         // LSTM: the forget gate is 1 - the input gate
  bool linear_before_reset = false;  // GRU
  bool batch_major = false;          // layout 1: X [batch, seq, input], Y [batch, seq, dirs, hidden]
  bool operator==(const Spec&) const = default;

  int Gates() const { return cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 3 : 4; }
  int ActsPerDirection() const { return cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 2 : 3; }
  const char* Name() const { return cell == Cell::kRnn ? "RNN" : cell == Cell::kGru ? "GRU" : "LSTM"; }
  // Whether direction d runs backwards in time.
  bool Backwards(int d) const { return directions == 2 ? d == 1 : reverse; }
};

}  // namespace onnxamp::ops::rnn
