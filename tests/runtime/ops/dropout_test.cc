// Dropout: inference mode (identity, mask all true) at every opset variant, training mode with a seeded mask that
// is reproducible, independent of the thread count and kept at rate 1 - ratio, scaling, and errors.
#include <gtest/gtest.h>

#include "runtime/ops/dropout/dropout_mask.h"
#include "tests/runtime/ops/elementwise_test_util.h"

namespace onnxamp::testing::ew {
namespace {

ir::Tensor BoolScalar(bool v) { return MakeBool({}, {v}); }

class DropoutTest : public ::testing::TestWithParam<DType> {};

TEST_P(DropoutTest, InferenceIsIdentity) {
  const DType dtype = GetParam();
  ir::Tensor x = Make(dtype, {3, 5}, Random(15, 1));
  // Opset 13 without ratio/training_mode, and with training_mode false.
  for (bool explicit_false : {false, true}) {
    OpTester t = Tester("Dropout", 13);
    t.num_outputs = 2;
    t.Input(x);
    if (explicit_false) t.Input(Make(dtype, {}, {0.5})).Input(BoolScalar(false));
    auto r = t.Run();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_TRUE((*r)[0].SameContents(x));
    EXPECT_EQ((*r)[1].dtype(), DType::kBool);
    for (bool m : (*r)[1].values<bool>()) EXPECT_TRUE(m);
  }
  // Opset 7: mask of the data type, all ones. Opset 10: bool mask.
  OpTester t7 = Tester("Dropout", 7);
  t7.num_outputs = 2;
  t7.Attr(ir::Attribute::Float("ratio", 0.2f)).Input(x);
  auto r = t7.Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE((*r)[0].SameContents(x));
  EXPECT_EQ((*r)[1].dtype(), dtype);
  EXPECT_EQ(AsDoubles((*r)[1]), std::vector<double>(15, 1.0));
  OpTester t10 = Tester("Dropout", 10);
  t10.num_outputs = 2;
  t10.Input(x);
  r = t10.Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[1].dtype(), DType::kBool);
}

TEST_P(DropoutTest, TrainingMaskAndScale) {
  const DType dtype = GetParam();
  const int64_t n = 20000;
  ir::Tensor x = Make(dtype, {n}, Random(n, 2, 0.5, 2));
  OpTester t = Tester("Dropout", 13);
  t.num_outputs = 2;
  t.Attr(ir::Attribute::Int("seed", 42));
  t.Input(x).Input(Make(DType::kFloat32, {}, {0.25})).Input(BoolScalar(true));
  auto r = t.Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ir::Tensor& y = (*r)[0];
  const ir::Tensor& mask = (*r)[1];
  ASSERT_EQ(mask.dtype(), DType::kBool);
  const std::vector<double> xv = AsDoubles(x);
  std::vector<double> want(n);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = ops::DropoutUniform(42, i) >= 0.25f;
    ASSERT_EQ(mask.values<bool>()[i], keep) << i;
    kept += keep;
    want[i] = keep ? xv[i] / 0.75 : 0.0;
  }
  ExpectClose(y, want, "dropout output");
  // 20000 Bernoulli(0.75) draws: the kept fraction is within 5 standard deviations (0.0153) of 0.75.
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.75, 0.0153);
}

INSTANTIATE_TEST_SUITE_P(Types, DropoutTest, ::testing::ValuesIn(FloatDTypes()), DTypeParamName());

OpTester TrainingTester(const ir::Tensor& x, float ratio, std::optional<int64_t> seed_attr) {
  OpTester t = Tester("Dropout", 13);
  t.num_outputs = 2;
  if (seed_attr) t.Attr(ir::Attribute::Int("seed", *seed_attr));
  t.Input(x).Input(Make(DType::kFloat32, {}, {ratio})).Input(BoolScalar(true));
  return t;
}

TEST(Dropout, ReproducibleAndThreadIndependent) {
  ir::Tensor x = Make(DType::kFloat32, {300, 400}, Random(120000, 3));
  OpTester a = TrainingTester(x, 0.5f, 7);
  OpTester b = a;
  b.options.num_threads = 4;
  auto ra = a.Run(), rb = b.Run();
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_TRUE((*ra)[0].SameContents((*rb)[0]));
  EXPECT_TRUE((*ra)[1].SameContents((*rb)[1]));
  // Another seed attribute gives another mask.
  auto rc = TrainingTester(x, 0.5f, 8).Run();
  ASSERT_TRUE(rc.ok());
  EXPECT_FALSE((*ra)[1].SameContents((*rc)[1]));
  // Without the attribute the session seed decides: equal seeds agree, different seeds differ.
  OpTester s1 = TrainingTester(x, 0.5f, std::nullopt);
  OpTester s2 = s1;
  OpTester s3 = s1;
  s1.options.seed = s2.options.seed = 100;
  s3.options.seed = 101;
  auto r1 = s1.Run(), r2 = s2.Run(), r3 = s3.Run();
  ASSERT_TRUE(r1.ok() && r2.ok() && r3.ok());
  EXPECT_TRUE((*r1)[1].SameContents((*r2)[1]));
  EXPECT_FALSE((*r1)[1].SameContents((*r3)[1]));
}

// A training loop passes its step as RunOptions::rng_step: every step draws a new mask (with or without a seed
// attribute), the same step the same mask, and step 0 what a plain Run gives.
TEST(Dropout, EachRunStepDrawsANewMask) {
  ir::Tensor x = Make(DType::kFloat32, {4096}, Random(4096, 6));
  for (std::optional<int64_t> seed_attr : {std::optional<int64_t>(), std::optional<int64_t>(3)}) {
    OpTester t = TrainingTester(x, 0.5f, seed_attr);
    auto session = exec::Session::Create(t.BuildModel(), t.options);
    ASSERT_TRUE(session.ok()) << session.status().message();
    auto mask = [&](uint64_t step) {
      exec::RunOptions run;
      run.rng_step = step;
      StatusOr<std::vector<ir::Tensor>> r = (*session)->Run(t.Feeds(), run);
      EXPECT_TRUE(r.ok()) << r.status().message();
      return r.ok() ? (*r)[1] : ir::Tensor();
    };
    auto plain = (*session)->Run(t.Feeds());
    ASSERT_TRUE(plain.ok());
    EXPECT_TRUE(mask(0).SameContents((*plain)[1]));
    EXPECT_TRUE(mask(5).SameContents(mask(5)));
    EXPECT_FALSE(mask(1).SameContents(mask(2)));
    EXPECT_FALSE(mask(0).SameContents(mask(1)));
    int kept = 0;
    for (double m : AsDoubles(mask(7))) kept += m != 0.0;
    EXPECT_GT(kept, 1800);  // about half of 4096
    EXPECT_LT(kept, 2300);
  }
}

TEST(Dropout, RatioEdgesAndOldOpsets) {
  ir::Tensor x = Make(DType::kFloat32, {64}, Random(64, 4));
  // Ratio 0 in training: identity.
  auto r = TrainingTester(x, 0.0f, 1).Run();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)[0].SameContents(x));
  // Ratio 1: everything dropped, no inf or NaN.
  r = TrainingTester(x, 1.0f, 1).Run();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(AsDoubles((*r)[0]), std::vector<double>(64, 0.0));
  // Opset 6 with is_test = 0 trains (mask of the data type); is_test = 1 is the identity.
  OpTester t6 = Tester("Dropout", 6);
  t6.num_outputs = 2;
  t6.options.seed = 5;
  t6.Attr(ir::Attribute::Float("ratio", 0.5f)).Input(x);
  r = t6.Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  int zeros = 0;
  for (double m : AsDoubles((*r)[1])) zeros += m == 0.0;
  EXPECT_GT(zeros, 10);
  EXPECT_LT(zeros, 54);
  t6.Attr(ir::Attribute::Int("is_test", 1));
  r = t6.Run();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)[0].SameContents(x));
  // The mask output may be omitted.
  OpTester one = Tester("Dropout", 13);
  one.Input(x).Input(Make(DType::kFloat32, {}, {0.5})).Input(BoolScalar(true));
  EXPECT_EQ(RunOne(one).dims(), x.dims());
}

TEST(Dropout, Errors) {
  ir::Tensor x = Make(DType::kFloat32, {4}, {1, 2, 3, 4});
  OpTester ratio = TrainingTester(x, 1.5f, 1);
  ExpectRunError(ratio, "input 1 (ratio) must be in [0, 1], got 1.5");
  OpTester mode = Tester("Dropout", 13);
  mode.Input(x).Input(Make(DType::kFloat32, {}, {0.5})).Input(Make(DType::kFloat32, {}, {1}));
  ExpectRunError(mode, "input 2 (training_mode) must be a bool scalar, got float []");
  OpTester vec = Tester("Dropout", 13);
  vec.Input(x).Input(Make(DType::kFloat32, {2}, {0.5, 0.5}));
  ExpectRunError(vec, "input 1 (ratio) must be a scalar, got shape [2]");
  OpTester attr = Tester("Dropout", 10);
  attr.Attr(ir::Attribute::Float("ratio", -0.1f)).Input(x);
  ExpectCreateError(attr, "attribute 'ratio' must be in [0, 1], got -0.1");
}

}  // namespace
}  // namespace onnxamp::testing::ew
