// CUDA MaxUnpool and its com.onnxamp gradient MaxUnpoolGrad against the CPU kernel, exactly (element moves): 1-D, 2-D
// and 3-D windows with strides and pads, output_shape padding, repeated indices (the last element wins, as on the
// CPU), every float type, empty tensors; indices outside the unpooled shape, which the CPU refuses and the device
// ignores; and the CPU's shape errors. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/ops/common/shape_util.h"
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

struct Case {
  std::vector<int64_t> x_dims;  // [N, C, spatial...]
  std::vector<int64_t> kernel, strides, pads;
  std::vector<int64_t> output_shape;  // empty: none
};

// The unpooled shape MaxPool's indices address.
std::vector<int64_t> Inferred(const Case& c) {
  std::vector<int64_t> dims = {c.x_dims[0], c.x_dims[1]};
  const size_t k = c.kernel.size();
  for (size_t d = 0; d < k; ++d) {
    const int64_t pads = c.pads.empty() ? 0 : c.pads[d] + c.pads[k + d];
    dims.push_back((c.x_dims[d + 2] - 1) * c.strides[d] + c.kernel[d] - pads);
  }
  return dims;
}

OpTester Node(const Case& c, bool grad, DType dtype, uint32_t seed, const std::vector<int64_t>* indices = nullptr) {
  OpTester t = grad ? InternalOp(ops::kMaxUnpoolGradOp) : Op("MaxUnpool", 11);
  t.Attr(Attribute::Ints("kernel_shape", c.kernel)).Attr(Attribute::Ints("strides", c.strides));
  if (!c.pads.empty()) t.Attr(Attribute::Ints("pads", c.pads));
  const std::vector<int64_t> inferred = Inferred(c);
  const int64_t size = Count(inferred), count = Count(c.x_dims);
  // Random positions in the unpooled shape, a few of them repeated.
  std::vector<int64_t> idx(static_cast<size_t>(count));
  const std::vector<double> r = RandomValues(idx.size(), seed, 0, 1);
  for (size_t e = 0; e < idx.size(); ++e) {
    idx[e] =
        e % 5 == 4 ? idx[e - 3] : std::min<int64_t>(static_cast<int64_t>(r[e] * static_cast<double>(size)), size - 1);
  }
  if (indices) idx = *indices;
  const std::vector<int64_t> out = c.output_shape.empty() ? inferred : c.output_shape;
  if (grad) {
    t.Input(TensorOf(dtype, out, RandomValues(static_cast<size_t>(Count(out)), seed + 1, -2, 2)));
  } else {
    t.Input(TensorOf(dtype, c.x_dims, RandomValues(static_cast<size_t>(count), seed + 1, -2, 2)));
  }
  t.Input(MakeTensor<int64_t>(c.x_dims, idx));
  if (grad) t.Input(MakeTensor<int64_t>({static_cast<int64_t>(c.x_dims.size())}, c.x_dims));
  if (!c.output_shape.empty()) t.Input(MakeTensor<int64_t>({static_cast<int64_t>(out.size())}, out));
  return t;
}

std::vector<Case> Cases() {
  return {
      {{2, 3, 4, 5}, {2, 2}, {2, 2}, {}, {}},
      {{1, 2, 3, 3}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}},
      {{2, 2, 4, 4}, {2, 2}, {2, 2}, {}, {2, 2, 9, 10}},
      {{1, 3, 7}, {3}, {2}, {}, {}},
      {{1, 2, 2, 3, 2}, {2, 2, 2}, {2, 2, 2}, {}, {}},
      {{0, 3, 2, 2}, {2, 2}, {2, 2}, {}, {}},
      {{2, 64, 16, 16}, {2, 2}, {2, 2}, {}, {}},
  };
}

TEST(CudaUnpoolTest, MaxUnpoolAndItsGradientAreTheCpus) {
  ONNXAMP_REQUIRE_CUDA();
  uint32_t seed = 1;
  for (bool grad : {false, true}) {
    for (const Case& c : Cases()) {
      for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
        const std::string what = std::string(grad ? "MaxUnpoolGrad " : "MaxUnpool ") + ops::ShapeToString(c.x_dims) +
                                 " " + std::string(DTypeName(t));
        ExpectCudaMatchesCpu(Node(c, grad, t, seed += 3), what, Tolerance{0, 0});
      }
    }
  }
}

// Indices outside the unpooled shape: the CPU refuses them (OutOfRange); the device, which cannot raise without a
// synchronisation, drops those elements (MaxUnpool) and gives them a zero gradient.
TEST(CudaUnpoolTest, IndicesOutsideTheShapeAreIgnored) {
  ONNXAMP_REQUIRE_CUDA();
  const Case c = {{1, 1, 2, 2}, {2, 2}, {2, 2}, {}, {}};  // unpooled [1, 1, 4, 4]
  const std::vector<int64_t> idx = {0, 99, 10, -1};
  for (bool grad : {false, true}) {
    OpTester t = Node(c, grad, DType::kFloat32, 5, &idx);
    EXPECT_FALSE(OpTester(t).Run().ok());
    StatusOr<std::vector<ir::Tensor>> got = RunOnCuda(t);
    ASSERT_TRUE(got.ok()) << got.status().message();
    const std::vector<double> in = AsDoubles(*t.inputs[0]);
    std::vector<double> want;
    if (grad) {
      want = {in[0], 0, in[10], 0};
    } else {
      want.assign(16, 0.0);
      want[0] = in[0];
      want[10] = in[2];
    }
    ExpectClose((*got)[0], want, grad ? "MaxUnpoolGrad" : "MaxUnpool", Tolerance{0, 0});
  }
}

TEST(CudaUnpoolTest, BadShapesAreTheCpuErrors) {
  ONNXAMP_REQUIRE_CUDA();
  Case c = {{1, 1, 2, 2}, {2, 2}, {2, 2}, {}, {1, 1, 3, 3}};  // output_shape below the unpooled [1, 1, 4, 4]
  ExpectSameRunError(Node(c, false, DType::kFloat32, 1));
  c.output_shape = {};
  OpTester grad = Node(c, true, DType::kFloat32, 1);
  grad.inputs[0] = TensorOf(DType::kFloat32, {1, 1, 4, 3}, std::vector<double>(12, 1.0));  // dY of the wrong shape
  ExpectSameRunError(grad);
}

}  // namespace
}  // namespace onnxamp::testing
