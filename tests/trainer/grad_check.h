// Finite-difference gradient checks for gradient builders: one node (an OpTester) in float64, a random projection
// loss L = sum_k sum(Y_k * R_k) over its float outputs, the backward pass built by trainer::BuildGradients, and each
// analytic gradient element compared with a central difference of L.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/ops/common/broadcast.h"
#include "tests/runtime/op_tester.h"

namespace onnxamp::testing {

struct GradCheckOptions {
  // The inputs to differentiate (indices into the OpTester's inputs); empty: every float64 input.
  std::vector<int> wrt;
  // Outputs left out of the loss (e.g. MaxPool's Indices are never float; a mask output).
  std::vector<int> skip_outputs;
  double step = 1e-6;  // central-difference step, relative to max(1, |x|)
  double rtol = 1e-5;
  double atol = 1e-7;
  uint32_t seed = 1;  // of the projection R_k
  // When set, every analytic gradient must have at least one element whose magnitude exceeds this (a check that
  // cannot pass with an all-zero gradient by accident).
  double min_abs = 1e-8;
  // The model's ONNX opset when the tested op is one of the runtime's own (the ops its gradient builder emits).
  int64_t onnx_opset = 17;
};

// Runs the check and reports every mismatching element (up to a few per input) with EXPECT failures; `what` names
// the case. The node's inputs must be float64 for the differentiated ones (others: any type, e.g. int64 indices).
void ExpectGradientsMatchFiniteDifferences(const OpTester& t, const std::string& what,
                                           const GradCheckOptions& options = {});

// Helpers the gradient tests share.
namespace gradtest {

using Dims = std::vector<int64_t>;

// Verifies `m`, makes a session of it and runs it on `feeds`, returning the outputs `fetch`; every failure is an
// EXPECT failure and an empty result.
std::vector<ir::Tensor> RunModel(ir::Model m, const std::vector<ir::Tensor>& feeds,
                                 const std::vector<std::string>& fetch);

// float64 values uniform in [lo, hi) from a fixed generator.
inline ir::Tensor Doubles(const Dims& dims, uint32_t seed, double lo = -2, double hi = 2) {
  ir::Tensor t(DType::kFloat64, dims);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (double& v : t.mutable_values<double>()) v = u(gen);
  return t;
}

// float64 values uniform in [lo, hi), each at least `gap` away from every value of `avoid` (the kinks).
inline ir::Tensor DoublesAway(const Dims& dims, uint32_t seed, double lo, double hi, const std::vector<double>& avoid,
                              double gap = 0.05) {
  ir::Tensor t(DType::kFloat64, dims);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (double& v : t.mutable_values<double>()) {
    bool near = true;
    while (near) {
      v = u(gen);
      near = false;
      for (double a : avoid) near = near || std::abs(v - a) < gap;
    }
  }
  return t;
}

inline ir::Tensor Int64s(const Dims& dims, const std::vector<int64_t>& values) {
  return MakeTensor<int64_t>(dims, values);
}

inline OpTester Op(const std::string& op, int64_t opset) {
  OpTester t;
  t.op_type = op;
  t.opset = opset;
  return t;
}

// "[2,3]", for test names.
inline std::string DimsName(const Dims& dims) { return ops::ShapeToString(dims); }

// The op types of the nodes BuildGradients adds for `t`'s node with respect to `wrt` (loss: the sum of its first
// output).
std::vector<std::string> EmittedOps(const OpTester& t, const std::vector<std::string>& wrt = {"in0"});

// t's model with a sum loss and BuildGradients' gradients of it for `wrt` (graph outputs, named in `gradients`).
ir::Model SumLossGradientModel(const OpTester& t, const std::vector<std::string>& wrt,
                               std::vector<std::string>* gradients);

// The gradient names BuildGradients gives for `wrt` on t's model with a sum loss ("" where no gradient flows).
std::vector<std::string> GradientNames(const OpTester& t, const std::vector<std::string>& wrt);

// The autodiff's error for `t`'s node with respect to `wrt` (loss: the sum of its first output); empty when it
// succeeds.
std::string GradientError(const OpTester& t, const std::vector<std::string>& wrt = {"in0"});

inline bool Contains(const std::vector<std::string>& ops, const std::string& op) {
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

}  // namespace gradtest

}  // namespace onnxamp::testing
