// Tests of ScatterElements, Scatter, ScatterND, GatherND and GatherNDGrad: every movable element type without a
// reduction, each reduction with repeated indices (combined in index order), batch_dims, negative indices, and the
// one-line errors (indices out of range, shapes of updates, reductions before their opset). The ONNX backend suite's
// scatter/gathernd cases run in tests/conformance.
#include <gtest/gtest.h>

#include <limits>

#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

class ScatterTest : public ::testing::TestWithParam<DType> {};

// Without a reduction the ops move elements: every type, data codes 0..5 and updates codes 6..
TEST_P(ScatterTest, MovesElementsOfEveryType) {
  const DType dt = GetParam();
  {
    // data [2,3], updates [2,2] along axis 1 at columns {2, 0} and {-1, 1}.
    OpTester t = Op("ScatterElements", 13);
    ir::Tensor up(dt, {2, 2});
    for (int64_t i = 0; i < 4; ++i) EncodeElement(up, i, 6 + i);
    t.Input(IotaTensor(dt, {2, 3})).Input(MakeTensor<int64_t>({2, 2}, {2, 0, -1, 1})).Input(up);
    t.Attr(ir::Attribute::Int("axis", 1));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectGathered((*out)[0], dt, {2, 3}, {7, 1, 6, 3, 9, 8}, nullptr, "ScatterElements");
  }
  {
    // data [3,2]; rows 2 and 0 replaced.
    OpTester t = Op("ScatterND", 13);
    ir::Tensor up(dt, {2, 2});
    for (int64_t i = 0; i < 4; ++i) EncodeElement(up, i, 6 + i);
    t.Input(IotaTensor(dt, {3, 2})).Input(MakeTensor<int64_t>({2, 1}, {2, -3})).Input(up);
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectGathered((*out)[0], dt, {3, 2}, {8, 9, 2, 3, 6, 7}, nullptr, "ScatterND");
  }
  {
    // data [2,2,3], batch_dims 1: per batch item, the element at (row, col).
    OpTester t = Op("GatherND", 13);
    t.Attr(ir::Attribute::Int("batch_dims", 1));
    t.Input(IotaTensor(dt, {2, 2, 3})).Input(MakeTensor<int64_t>({2, 2, 2}, {1, 2, 0, -3, 0, 1, 1, 0}));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectGathered((*out)[0], dt, {2, 2}, {5, 0, 7, 9}, nullptr, "GatherND");
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ScatterTest, ::testing::ValuesIn(MovableDTypes()), DTypeTestName);

TEST(ScatterOpTest, ReductionsCombineRepeatedIndicesInOrder) {
  const std::vector<float> data = {1, 2, 3, 4};
  const std::vector<float> updates = {5, -1, 0.5f};
  // Every update goes to element 1 or 3: 1 gets 5 then 0.5, 3 gets -1.
  const ir::Tensor idx = MakeTensor<int64_t>({3}, {1, 3, 1});
  struct Case {
    const char* reduction;
    int64_t opset;
    std::vector<float> want;
  };
  for (const Case& c :
       {Case{"none", 13, {1, 0.5f, 3, -1}}, Case{"add", 16, {1, 7.5f, 3, 3}}, Case{"mul", 16, {1, 5, 3, -4}},
        Case{"max", 18, {1, 5, 3, 4}}, Case{"min", 18, {1, 0.5f, 3, -1}}}) {
    OpTester t = Op("ScatterElements", c.opset);
    if (std::string(c.reduction) != "none") t.Attr(ir::Attribute::String("reduction", c.reduction));
    t.Input(MakeTensor<float>({4}, data)).Input(idx).Input(MakeTensor<float>({3}, updates));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << c.reduction << ": " << out.status().message();
    EXPECT_EQ(Values<float>((*out)[0]), c.want) << c.reduction;
    // ScatterND with one-coordinate tuples does the same.
    OpTester nd = Op("ScatterND", c.opset);
    if (std::string(c.reduction) != "none") nd.Attr(ir::Attribute::String("reduction", c.reduction));
    nd.Input(MakeTensor<float>({4}, data))
        .Input(MakeTensor<int64_t>({3, 1}, {1, 3, 1}))
        .Input(MakeTensor<float>({3}, updates));
    auto nd_out = nd.Run();
    ASSERT_TRUE(nd_out.ok()) << c.reduction << ": " << nd_out.status().message();
    EXPECT_EQ(Values<float>((*nd_out)[0]), Values<float>((*out)[0])) << c.reduction;
  }
  // NaN: one in data loses to the update, one in an update wins until a later update beats it (ONNX Runtime's
  // comparisons).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const char* reduction : {"max", "min"}) {
    OpTester t = Op("ScatterElements", 18);
    t.Attr(ir::Attribute::String("reduction", reduction));
    t.Input(MakeTensor<float>({4}, {nan, 1, 2, 3}))
        .Input(MakeTensor<int64_t>({3}, {0, 1, 1}))
        .Input(MakeTensor<float>({3}, {1, nan, 5}));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{1, 5, 2, 3})) << reduction;
  }
  // bool: add is OR, mul is AND.
  for (const char* reduction : {"add", "mul"}) {
    OpTester t = Op("ScatterND", 16);
    t.Attr(ir::Attribute::String("reduction", reduction));
    ir::Tensor d(DType::kBool, {3}), u(DType::kBool, {2});
    d.mutable_values<bool>()[0] = true, d.mutable_values<bool>()[1] = false, d.mutable_values<bool>()[2] = true;
    u.mutable_values<bool>()[0] = false, u.mutable_values<bool>()[1] = true;
    t.Input(d).Input(MakeTensor<int64_t>({2, 1}, {0, 1})).Input(u);
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    const auto v = (*out)[0].values<bool>();
    const bool add = std::string(reduction) == "add";
    EXPECT_EQ(std::vector<bool>(v.begin(), v.end()), (std::vector<bool>{add, add, true})) << reduction;
  }
  // uint16 products wrap in unsigned arithmetic.
  {
    OpTester t = Op("ScatterElements", 16);
    t.Attr(ir::Attribute::String("reduction", "mul"));
    ir::Tensor d(DType::kUint16, {1}), u(DType::kUint16, {1});
    d.mutable_values<uint16_t>()[0] = 65535;
    u.mutable_values<uint16_t>()[0] = 65535;
    t.Input(d).Input(MakeTensor<int64_t>({1}, {0})).Input(u);
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ((*out)[0].values<uint16_t>()[0], 1);
  }
  // Integers wrap instead of overflowing.
  OpTester t = Op("ScatterND", 16);
  t.Attr(ir::Attribute::String("reduction", "mul"));
  t.Input(Int64s({INT64_MAX})).Input(MakeTensor<int64_t>({1, 1}, {0})).Input(Int64s({2}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Int64Values((*out)[0]), (std::vector<int64_t>{-2}));
}

TEST(ScatterOpTest, ScatterIsScatterElementsBeforeOpset11) {
  OpTester t = Op("Scatter", 9);
  t.Attr(ir::Attribute::Int("axis", 0));
  t.Input(MakeTensor<float>({3}, {1, 2, 3}))
      .Input(MakeTensor<int64_t>({2}, {2, 0}))
      .Input(MakeTensor<float>({2}, {7, 8}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{8, 2, 7}));
}

TEST(ScatterOpTest, GatherNDGradSumsRepeatedTuples) {
  // data [3,2]: rows 2, 0, 2 gathered; their gradients add into rows 2 and 0.
  OpTester t = Op(ops::kGatherNDGradOp, 1);
  t.domain = exec::kInternalDomain;
  t.Input(MakeTensor<float>({3, 2}, {1, 2, 3, 4, 5, 6}))
      .Input(MakeTensor<int64_t>({3, 1}, {2, 0, -1}))
      .Input(Int64s({3, 2}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{3, 4, 0, 0, 6, 8}));
}

TEST(ScatterOpTest, ErrorsNameWhatIsWrong) {
  {
    OpTester t = Op("ScatterND", 13);
    t.Input(MakeTensor<float>({3}, {1, 2, 3}))
        .Input(MakeTensor<int64_t>({1, 1}, {3}))
        .Input(MakeTensor<float>({1}, {0}));
    ExpectRunError(t, "index 3 (element 0 of input 'in1' (indices) [1,1]) is out of range for dim 0 of size 3");
  }
  {
    OpTester t = Op("ScatterND", 13);
    t.Input(MakeTensor<float>({3, 2}, {1, 2, 3, 4, 5, 6}))
        .Input(MakeTensor<int64_t>({1, 1}, {0}))
        .Input(MakeTensor<float>({3}, {0, 0, 0}));
    ExpectRunError(t, "input 'in2' (updates) has shape [3], expected [1,2]");
  }
  {
    OpTester t = Op("ScatterND", 13);
    t.Input(MakeTensor<float>({3}, {1, 2, 3}))
        .Input(MakeTensor<int64_t>({1, 2}, {0, 0}))
        .Input(MakeTensor<float>({1}, {0}));
    ExpectRunError(t, "the last dim of input 'in1' (indices) [1,2] must be in [1, 1]");
  }
  {
    OpTester t = Op("ScatterElements", 15);
    t.Attr(ir::Attribute::String("reduction", "add"));
    t.Input(MakeTensor<float>({3}, {1, 2, 3})).Input(MakeTensor<int64_t>({1}, {0})).Input(MakeTensor<float>({1}, {0}));
    auto session = exec::Session::Create(t.BuildModel(), t.options);
    ASSERT_FALSE(session.ok());
    EXPECT_NE(session.status().message().find("attribute 'reduction' 'add' is not defined at opset 15"),
              std::string::npos)
        << session.status().message();
  }
  {
    OpTester t = Op("GatherND", 13);
    t.Attr(ir::Attribute::Int("batch_dims", 1));
    t.Input(MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6})).Input(MakeTensor<int64_t>({3, 1}, {0, 1, 2}));
    ExpectRunError(t, "differ in batch dim 0");
  }
}

}  // namespace
}  // namespace onnxamp::testing
