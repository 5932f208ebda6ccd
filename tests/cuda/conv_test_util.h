// What the CUDA convolution tests share (dnn_test.cc, channels_last_test.cc): random inputs, the convolution
// tolerance, a scoped environment variable, and reruns of one session with new input shapes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/ops/common/broadcast.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/runtime/ops/tolerance.h"

namespace onnxamp::testing {

// Values uniform in [lo, hi), rounded to `dtype`, from a fixed seed.
inline ir::Tensor Random(DType dtype, const std::vector<int64_t>& dims, uint32_t seed, double lo = -1, double hi = 1) {
  return op_test::TensorOf(dtype, dims, op_test::RandomValues(static_cast<size_t>(Count(dims)), seed, lo, hi));
}

inline double MaxAbs(const ir::Tensor& t) {
  double m = 0;
  for (double v : AsDoubles(t)) m = std::max(m, std::abs(v));
  return m;
}

// cuDNN sums in another order than the CPU and, for a bias, a residual or a ReLU that it does not fuse, rounds the
// convolution to the storage type before the epilogue adds them (the CPU rounds once). The error then scales with
// the largest intermediate (|conv|, |B|, |Z|), not with the result, which cancellation can make small: the absolute
// part of the tolerance grows with that magnitude by the dtype's relative tolerance. `want` is the CPU's output of
// `t`'s convolution.
inline Tolerance ConvTolerance(const OpTester& t, const ir::Tensor& want) {
  double magnitude = MaxAbs(want);
  for (size_t i = 2; i < t.inputs.size(); ++i) {
    if (t.inputs[i]) magnitude += MaxAbs(*t.inputs[i]);
  }
  Tolerance tol = CudaToleranceFor(t.inputs[0]->dtype());
  tol.atol += tol.rtol * magnitude;
  return tol;
}

// A convolution problem: X's logical dims [N, C, spatial...], M output channels, the kernel's spatial dims and the
// attributes (empty: ONNX's defaults).
struct ConvCase {
  std::string name;
  std::vector<int64_t> x;
  int64_t m;
  std::vector<int64_t> kernel;
  int64_t group = 1;
  std::vector<int64_t> strides = {}, dilations = {}, pads = {};
  std::string auto_pad = {};
  bool bias = true;
};

// `t` with its sessions' convolutions forced onto the direct kernels (KernelOptions::cuda_conv_direct).
inline OpTester DirectConv(OpTester t) {
  t.options.kernels.cuda_conv_direct = true;
  return t;
}

// One CUDA session of `t`'s node, its input 0 declared as `x_shape` (dims left open), run once per tensor of `xs`
// as input 0: each result against the CPU run of `t` with the same inputs (a kernel's cached plan must follow the
// shapes).
inline void ExpectConvRerunsMatchCpu(const OpTester& t, const ir::Shape& x_shape, const std::vector<ir::Tensor>& xs) {
  OpTester gpu = t;
  gpu.options.device = exec::Device::kCuda;
  ir::Model model = gpu.BuildModel();
  model.graph->inputs()[0]->set_type(ir::ValueType::Tensor(t.inputs[0]->dtype(), x_shape));
  auto session = exec::Session::Create(std::move(model), gpu.options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  for (const ir::Tensor& x : xs) {
    OpTester cpu = t;
    cpu.options.device = exec::Device::kCpu;
    cpu.inputs[0] = x;
    StatusOr<std::vector<ir::Tensor>> want = cpu.Run();
    ASSERT_TRUE(want.ok()) << want.status().message();
    StatusOr<std::vector<ir::Tensor>> got = (*session)->Run(cpu.Feeds());
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ((*got)[0].dims(), (*want)[0].dims());
    ExpectClose((*got)[0], AsDoubles((*want)[0]), "rerun " + ops::ShapeToString(x.dims()),
                ConvTolerance(cpu, (*want)[0]));
  }
}

}  // namespace onnxamp::testing
