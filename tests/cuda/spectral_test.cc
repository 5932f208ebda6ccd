// CUDA DFT and STFT and their com.onnxamp gradients DFTGrad and STFTGrad against the CPU kernels, bit for bit: both
// run the sums of runtime/ops/spectral/spectral_transform.h in double over the CPU's table of roots of unity, and the
// CUDA file is built without FMA contraction. DFT at opsets 17 (axis attribute) and 20 (axis input), real and complex
// inputs, every signal axis, dft_length shorter and longer than the signal, inverse and onesided; STFT with and
// without a window (of another float type than the signal), onesided, complex signals, frame steps that overlap and
// that skip; every float type; and the CPU's errors. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/ops/gradient_ops.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/cuda/elementwise_test_util.h"

namespace onnxamp::testing {
namespace {

using cuda_ew::ExpectSameRunError;
using ir::Attribute;
using op_test::Op;
using op_test::RandomValues;
using op_test::TensorOf;

ir::Tensor Random(DType dtype, const std::vector<int64_t>& dims, uint32_t seed) {
  return TensorOf(dtype, dims, RandomValues(static_cast<size_t>(Count(dims)), seed, -1, 1));
}

struct DftCase {
  std::vector<int64_t> dims;  // the input, last dim 1 or 2
  int64_t axis;
  int64_t length;  // 0: none
  bool inverse, onesided;
};

// DFT (grad: DFTGrad fed dY of the forward's output shape) at `opset`.
OpTester DftNode(const DftCase& c, int64_t opset, bool grad, DType dtype, uint32_t seed) {
  OpTester t = grad ? InternalOp(ops::kDftGradOp) : Op("DFT", opset);
  if (c.inverse) t.Attr(Attribute::Int("inverse", 1));
  if (c.onesided) t.Attr(Attribute::Int("onesided", 1));
  if (opset < 20) t.Attr(Attribute::Int("axis", c.axis));
  if (grad) t.Attr(Attribute::Int("opset", opset));
  const int64_t rank = static_cast<int64_t>(c.dims.size());
  const int64_t axis = c.axis < 0 ? c.axis + rank : c.axis;
  if (grad) {
    std::vector<int64_t> out = c.dims;
    const int64_t l = c.length > 0 ? c.length : c.dims[static_cast<size_t>(axis)];
    out[static_cast<size_t>(axis)] = c.onesided ? l / 2 + 1 : l;
    out.back() = 2;
    t.Input(Random(dtype, out, seed + 1));
  }
  t.Input(Random(dtype, c.dims, seed));
  if (c.length > 0) {
    t.Input(MakeTensor<int64_t>({}, {c.length}));
  } else if (opset >= 20) {
    t.OmittedInput();
  }
  if (opset >= 20) t.Input(MakeTensor<int64_t>({}, {c.axis}));
  return t;
}

TEST(CudaSpectralTest, DftAndItsGradientAreTheCpusBits) {
  ONNXAMP_REQUIRE_CUDA();
  const std::vector<DftCase> cases = {{{2, 8, 1}, 1, 0, false, false},    {{2, 8, 2}, 1, 0, false, false},
                                      {{2, 8, 2}, 1, 0, true, false},     {{2, 9, 1}, 1, 0, false, true},
                                      {{3, 5, 4, 1}, 1, 8, false, false}, {{3, 5, 4, 2}, 2, 3, true, false},
                                      {{3, 5, 4, 1}, -2, 6, false, true}, {{1, 1, 1}, 1, 0, false, false},
                                      {{4, 33, 2}, -2, 40, false, false}, {{0, 6, 1}, 1, 0, false, false}};
  uint32_t seed = 1;
  for (bool grad : {false, true}) {
    for (const DftCase& c : cases) {
      for (int64_t opset : {17, 20}) {
        for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
          const std::string what = std::string(grad ? "DFTGrad" : "DFT") + " opset " + std::to_string(opset) + " " +
                                   std::string(DTypeName(t)) + " axis " + std::to_string(c.axis) + " length " +
                                   std::to_string(c.length) + (c.inverse ? " inverse" : "") +
                                   (c.onesided ? " onesided" : "");
          ExpectCudaMatchesCpu(DftNode(c, opset, grad, t, seed += 3), what, Tolerance{0, 0});
        }
      }
    }
  }
}

struct StftCase {
  std::vector<int64_t> signal;  // [batch, length, 1 or 2]
  int64_t step, frame;
  bool window, onesided;
};

// STFT (grad: STFTGrad fed dY; outputs dsignal and dwindow, the latter when there is a window).
OpTester StftNode(const StftCase& c, bool grad, DType dtype, DType window_type, uint32_t seed) {
  OpTester t = grad ? InternalOp(ops::kStftGradOp) : Op("STFT", 17);
  t.Attr(Attribute::Int("onesided", c.onesided ? 1 : 0));
  if (grad) {
    const int64_t frames = (c.signal[1] - c.frame) / c.step + 1;
    t.Input(Random(dtype, {c.signal[0], frames, c.onesided ? c.frame / 2 + 1 : c.frame, 2}, seed + 1));
  }
  t.Input(Random(dtype, c.signal, seed));
  t.Input(MakeTensor<int64_t>({}, {c.step}));
  if (c.window) {
    t.Input(TensorOf(window_type, {c.frame}, RandomValues(static_cast<size_t>(c.frame), seed + 2, 0, 1)));
  } else {
    t.OmittedInput();
    t.Input(MakeTensor<int64_t>({}, {c.frame}));
  }
  if (grad) {
    t.num_outputs = 3;
    t.omit_outputs = {false, true, !c.window};
  }
  return t;
}

TEST(CudaSpectralTest, StftAndItsGradientAreTheCpusBits) {
  ONNXAMP_REQUIRE_CUDA();
  const std::vector<StftCase> cases = {{{2, 32, 1}, 4, 8, true, true},   {{2, 32, 1}, 8, 8, false, true},
                                       {{1, 40, 2}, 5, 16, true, false}, {{3, 17, 1}, 3, 5, true, false},
                                       {{1, 12, 1}, 7, 4, true, true},   {{2, 9, 2}, 1, 9, false, false},
                                       {{0, 16, 1}, 4, 8, true, true}};
  uint32_t seed = 100;
  for (bool grad : {false, true}) {
    for (const StftCase& c : cases) {
      for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
        const DType window_type = t == DType::kFloat32 ? DType::kFloat64 : DType::kFloat32;
        const std::string what = std::string(grad ? "STFTGrad " : "STFT ") + std::string(DTypeName(t)) + " signal " +
                                 std::to_string(c.signal[1]) + " step " + std::to_string(c.step) + " frame " +
                                 std::to_string(c.frame) + (c.window ? " window" : "") +
                                 (c.onesided ? " onesided" : "");
        ExpectCudaMatchesCpu(StftNode(c, grad, t, window_type, seed += 3), what, Tolerance{0, 0});
      }
    }
  }
}

TEST(CudaSpectralTest, BadInputsAreTheCpuErrors) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectSameRunError(DftNode({{2, 8, 3}, 1, 0, false, false}, 20, false, DType::kFloat32, 1));  // last dim 3
  ExpectSameRunError(DftNode({{2, 8, 1}, 2, 0, false, false}, 20, false, DType::kFloat32, 1));  // axis on the parts
  ExpectSameRunError(DftNode({{2, 8, 2}, 1, 0, false, true}, 20, false, DType::kFloat32, 1));   // onesided complex
  ExpectSameRunError(StftNode({{1, 8, 1}, 2, 12, false, true}, false, DType::kFloat32, DType::kFloat32, 1));
  OpTester step = StftNode({{1, 8, 1}, 2, 4, true, true}, false, DType::kFloat32, DType::kFloat32, 1);
  step.inputs[1] = MakeTensor<int64_t>({}, {0});
  ExpectSameRunError(step);
}

}  // namespace
}  // namespace onnxamp::testing
