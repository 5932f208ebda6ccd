// DepthToSpace, SpaceToDepth and DepthToSpaceGrad beyond the backend suite's cases: each inverts the other (DCR), the
// grad op inverts DepthToSpace in both modes, for every movable element type; and the one-line errors.
#include <gtest/gtest.h>

#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

ir::Tensor RunOne(OpTester t) {
  auto out = t.Run();
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? (*out)[0] : ir::Tensor();
}

class DepthSpaceTest : public ::testing::TestWithParam<DType> {};

TEST_P(DepthSpaceTest, EachInvertsTheOther) {
  const DType dt = GetParam();
  const ir::Tensor x = IotaTensor(dt, {2, 8, 3, 2});
  std::vector<int64_t> codes(static_cast<size_t>(x.num_elements()));
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<int64_t>(i);
  for (const char* mode : {"DCR", "CRD"}) {
    OpTester d2s = Op("DepthToSpace", 13);
    d2s.Attr(ir::Attribute::Int("blocksize", 2)).Attr(ir::Attribute::String("mode", mode)).Input(x);
    const ir::Tensor y = RunOne(d2s);
    ASSERT_EQ(y.dims(), (std::vector<int64_t>{2, 2, 6, 4})) << mode;
    OpTester back = Op(ops::kDepthToSpaceGradOp, 1);
    back.domain = exec::kInternalDomain;
    back.Attr(ir::Attribute::Int("blocksize", 2)).Attr(ir::Attribute::String("mode", mode)).Input(y);
    ExpectGathered(RunOne(back), dt, x.dims(), codes, nullptr, std::string("DepthToSpaceGrad ") + mode);
    if (std::string(mode) == "DCR") {
      OpTester s2d = Op("SpaceToDepth", 13);
      s2d.Attr(ir::Attribute::Int("blocksize", 2)).Input(y);
      ExpectGathered(RunOne(s2d), dt, x.dims(), codes, nullptr, "SpaceToDepth");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DepthSpaceTest, ::testing::ValuesIn(MovableDTypes()), DTypeTestName);

TEST(DepthSpaceOpTest, ErrorsNameWhatIsWrong) {
  OpTester t = Op("DepthToSpace", 13);
  t.Attr(ir::Attribute::Int("blocksize", 2)).Input(IotaTensor(DType::kFloat32, {1, 6, 2, 2}));
  ExpectRunError(t, "has 6 channels, not a multiple of blocksize^2 (2^2)");
  OpTester s = Op("SpaceToDepth", 13);
  s.Attr(ir::Attribute::Int("blocksize", 2)).Input(IotaTensor(DType::kFloat32, {1, 1, 3, 2}));
  ExpectRunError(s, "has height 3 and width 2, not multiples of blocksize 2");
  OpTester r = Op("SpaceToDepth", 13);
  r.Attr(ir::Attribute::Int("blocksize", 2)).Input(IotaTensor(DType::kFloat32, {4, 4}));
  ExpectRunError(r, "must be [N, C, H, W], got [4,4]");
  OpTester huge = Op("DepthToSpace", 13);
  huge.Attr(ir::Attribute::Int("blocksize", int64_t{1} << 32)).Input(IotaTensor(DType::kFloat32, {1, 4, 2, 2}));
  ExpectRunError(huge, "has 4 channels, not a multiple of blocksize^2");
  OpTester wide = Op("SpaceToDepth", 13);
  wide.Attr(ir::Attribute::Int("blocksize", (int64_t{1} << 31) + 1)).Input(IotaTensor(DType::kFloat32, {1, 3, 0, 0}));
  ExpectRunError(wide, "the output's dims overflow");
  OpTester none = Op("DepthToSpace", 13);
  none.Input(IotaTensor(DType::kFloat32, {1, 4, 1, 1}));
  auto session = exec::Session::Create(none.BuildModel(), none.options);
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("attribute 'blocksize' must be given and positive"), std::string::npos)
      << session.status().message();
}

}  // namespace
}  // namespace onnxamp::testing
