// OptimizeGraphForCuda's channels-last layout for half-precision convolution chains. Pure graph code: runs without
// a GPU.
#include "runtime/cuda/graph_rewrite.h"

#include <gtest/gtest.h>

#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ir/model.h"
#include "runtime/ir/verify.h"
#include "tests/runtime/layout_test_util.h"

namespace onnxamp::cuda {
namespace {

class GraphRewriteTest : public ::testing::Test {};

// ---- channels-last layout --------------------------------------------------------------------------------------

// The session's passes for a CUDA session: the generic inference optimizer, then the CUDA rewrites.
ir::Model OptimizeForCudaSession(ir::Model model, bool channels_last = true) {
  exec::SessionOptions options;
  options.device = exec::Device::kCuda;
  options.channels_last = channels_last;
  EXPECT_TRUE(exec::OptimizeForInference(model, options).ok());
  EXPECT_TRUE(OptimizeGraphForCuda(model, options).ok());
  EXPECT_TRUE(ir::Verify(model).ok());
  return model;
}

TEST_F(GraphRewriteTest, HalfConvolutionChainsGoChannelsLast) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const ir::Model m = OptimizeForCudaSession(testing::ResNetLike(3, 16, 32, dtype));
    EXPECT_EQ(testing::Count(m, exec::kChannelsLastConvOp), 6) << DTypeName(dtype);
    EXPECT_EQ(testing::Count(m, exec::kChannelsLastMaxPoolOp), 1);
    EXPECT_EQ(testing::Count(m, exec::kChannelsLastGlobalAveragePoolOp), 1);
    EXPECT_EQ(testing::Count(m, "Transpose"), 1);  // the input, once
    EXPECT_EQ(m.OpsetVersion(exec::kInternalDomain), 1);
    EXPECT_EQ(testing::Count(m, exec::kBlockedConvOp), 0);  // the CPU's layout is not used on CUDA
  }
}

TEST_F(GraphRewriteTest, Float32ConvolutionsKeepThePlainLayout) {
  const ir::Model m = OptimizeForCudaSession(testing::ResNetLike(3, 16, 32, DType::kFloat32));
  EXPECT_EQ(testing::Count(m, exec::kChannelsLastConvOp), 0);
  EXPECT_EQ(testing::Count(m, exec::kBlockedConvOp), 0);
  EXPECT_EQ(testing::Count(m, exec::kFusedConvOp), 5);  // the 1x1 shortcut has no Relu or residual to fuse
  EXPECT_EQ(testing::Count(m, "Conv"), 1);
  EXPECT_EQ(testing::Count(m, "Transpose"), 0);
}

TEST_F(GraphRewriteTest, ChannelsLastCanBeTurnedOff) {
  const ir::Model m = OptimizeForCudaSession(testing::ResNetLike(3, 16, 32, DType::kFloat16), /*channels_last=*/false);
  EXPECT_EQ(testing::Count(m, exec::kChannelsLastConvOp), 0);
  EXPECT_EQ(testing::Count(m, exec::kFusedConvOp), 5);
}

}  // namespace
}  // namespace onnxamp::cuda
