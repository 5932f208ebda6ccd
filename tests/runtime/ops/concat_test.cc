// Tests of Concat: every element type, every axis (negative too), empty inputs, the opset 1 default axis, and
// mismatched shapes or types.
#include <gtest/gtest.h>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

class ConcatTest : public ::testing::TestWithParam<DType> {};

TEST_P(ConcatTest, JoinsAlongEachAxis) {
  const DType dt = GetParam();
  // a: [2,2] codes 0..3; b: codes 0..5 as [2,3] or [3,2]; b's codes are offset by 100 in the expectation.
  ir::Tensor a = IotaTensor(dt, {2, 2});
  ir::Tensor b(dt, {2, 3});
  for (int64_t i = 0; i < 6; ++i) EncodeElement(b, i, 100 + i);
  {
    OpTester t = Op("Concat", 13);
    t.Input(a).Input(b).Attr(ir::Attribute::Int("axis", -1));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectGathered((*out)[0], dt, {2, 5}, {0, 1, 100, 101, 102, 2, 3, 103, 104, 105}, nullptr, "axis 1");
  }
  ir::Tensor c(dt, {3, 2});
  for (int64_t i = 0; i < 6; ++i) EncodeElement(c, i, 100 + i);
  {
    OpTester t = Op("Concat", 13);
    t.Input(a).Input(c).Input(ir::Tensor(dt, {0, 2})).Attr(ir::Attribute::Int("axis", 0));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectGathered((*out)[0], dt, {5, 2}, {0, 1, 2, 3, 100, 101, 102, 103, 104, 105}, nullptr, "axis 0");
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ConcatTest, ::testing::ValuesIn(MovableDTypes()), DTypeTestName);

TEST(ConcatOpTest, LargeInputsMatchAPlainLoop) {
  // Big enough for the threaded path: [3, 40000] ++ [3, 1] along axis 1, as float.
  std::vector<float> av(3 * 40000), bv = {-1, -2, -3};
  for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i);
  OpTester t = Op("Concat", 13);
  t.options.num_threads = 4;
  t.Input(MakeTensor<float>({3, 40000}, av)).Input(MakeTensor<float>({3, 1}, bv));
  t.Attr(ir::Attribute::Int("axis", 1));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  std::vector<float> want;
  for (int r = 0; r < 3; ++r) {
    for (int j = 0; j < 40000; ++j) want.push_back(av[r * 40000 + j]);
    want.push_back(bv[r]);
  }
  EXPECT_EQ(Values<float>((*out)[0]), want);
}

TEST(ConcatOpTest, Opset1DefaultsToAxis1AndLaterOpsetsNeedIt) {
  OpTester t = Op("Concat", 1);
  t.Input(ir::Tensor(DType::kFloat32, {2, 2})).Input(ir::Tensor(DType::kFloat32, {2, 3}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{2, 5}));
  OpTester no_axis = Op("Concat", 13);
  no_axis.Input(ir::Tensor(DType::kFloat32, {2, 2}));
  auto session = exec::Session::Create(no_axis.BuildModel());
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("attribute 'axis' is required"), std::string::npos);
}

TEST(ConcatOpTest, MismatchesNameTheInput) {
  OpTester shape = Op("Concat", 13);
  shape.Input(ir::Tensor(DType::kFloat32, {2, 2})).Input(ir::Tensor(DType::kFloat32, {3, 3}));
  shape.Attr(ir::Attribute::Int("axis", 1));
  ExpectRunError(shape, "input 'in1' (inputs) has shape [3,3], which does not match input 0's shape [2,2]");
  OpTester rank = Op("Concat", 13);
  rank.Input(ir::Tensor(DType::kFloat32, {2, 2})).Input(ir::Tensor(DType::kFloat32, {2}));
  rank.Attr(ir::Attribute::Int("axis", 0));
  ExpectRunError(rank, "has shape [2]");
  OpTester axis = Op("Concat", 13);
  axis.Input(ir::Tensor(DType::kFloat32, {2, 2})).Attr(ir::Attribute::Int("axis", 2));
  ExpectRunError(axis, "axis 2 is out of range for rank 2");
}

}  // namespace
}  // namespace onnxamp::testing
