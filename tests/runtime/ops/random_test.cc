// RandomUniform, RandomNormal, their *Like forms, Bernoulli and Multinomial: the distributions' moments and
// frequencies (bounds of five standard errors, so a correct kernel fails about once in a million runs, and the
// numbers are fixed by the seed anyway), reproducibility across sessions and thread counts, new numbers at every
// RunOptions::rng_step, types and shapes, and the one-line errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

std::vector<double> AsDoubles(const ir::Tensor& t) {
  std::vector<double> out;
  Status st = ops::DispatchNumeric(t.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    for (T v : t.values<T>()) out.push_back(static_cast<double>(ops::Load<T>(v)));
    return Status::Ok();
  });
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double Variance(const std::vector<double>& v) {
  const double m = Mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

ir::Tensor RunOne(const OpTester& t, uint64_t rng_step = 0) {
  auto session = exec::Session::Create(t.BuildModel(), t.options);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return {};
  exec::RunOptions run;
  run.rng_step = rng_step;
  auto out = (*session)->Run(t.Feeds(), run);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? (*out)[0] : ir::Tensor();
}

TEST(RandomOpTest, UniformRangeAndMoments) {
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    OpTester t = Op("RandomUniform", 22);
    t.Attr(ir::Attribute::Int("dtype", static_cast<int64_t>(dt)))
        .Attr(ir::Attribute::Float("low", -1.0f))
        .Attr(ir::Attribute::Float("high", 3.0f))
        .Attr(ir::Attribute::Ints("shape", {200, 500}));
    const ir::Tensor y = RunOne(t);
    ASSERT_EQ(y.dtype(), dt);
    ASSERT_EQ(y.dims(), (std::vector<int64_t>{200, 500}));
    const std::vector<double> v = AsDoubles(y);
    // Half-open in every type: float16 and bfloat16 would round values just below 3 up to 3 (bfloat16: about 1 in 500
    // of these draws).
    for (double x : v) ASSERT_TRUE(x >= -1.0 && x < 3.0) << x << " " << DTypeName(dt);
    const double n = static_cast<double>(v.size());
    // Uniform on [-1, 3): mean 1, variance 16 / 12.
    EXPECT_NEAR(Mean(v), 1.0, 5 * std::sqrt(16.0 / 12.0 / n)) << DTypeName(dt);
    EXPECT_NEAR(Variance(v), 16.0 / 12.0, 0.02) << DTypeName(dt);
  }
}

TEST(RandomOpTest, NormalMomentsAndTails) {
  OpTester t = Op("RandomNormal", 1);
  t.Attr(ir::Attribute::Float("mean", 2.0f))
      .Attr(ir::Attribute::Float("scale", 0.5f))
      .Attr(ir::Attribute::Ints("shape", {100000}));
  const std::vector<double> v = AsDoubles(RunOne(t));
  ASSERT_EQ(v.size(), 100000u);
  EXPECT_NEAR(Mean(v), 2.0, 5 * 0.5 / std::sqrt(1e5));
  // The variance's standard error is sigma^2 * sqrt(2 / (n - 1)).
  EXPECT_NEAR(Variance(v), 0.25, 5 * 0.25 * std::sqrt(2.0 / 1e5));
  // Tails: P(|z| > 2) = 4.55%; P(|z| > 3) = 0.27%.
  int beyond2 = 0, beyond3 = 0;
  for (double x : v) {
    const double z = std::fabs(x - 2.0) / 0.5;
    beyond2 += z > 2;
    beyond3 += z > 3;
  }
  EXPECT_NEAR(beyond2 / 1e5, 0.0455, 5 * std::sqrt(0.0455 * 0.9545 / 1e5));
  EXPECT_NEAR(beyond3 / 1e5, 0.0027, 5 * std::sqrt(0.0027 * 0.9973 / 1e5));
}

TEST(RandomOpTest, LikeFormsTakeTheInputsShapeAndType) {
  OpTester t = Op("RandomNormalLike", 17);
  t.Input(MakeTensor<Float16>({3, 4}, std::vector<float>(12, 7.0f)));
  ir::Tensor y = RunOne(t);
  EXPECT_EQ(y.dtype(), DType::kFloat16);
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{3, 4}));
  OpTester u = Op("RandomUniformLike", 17);
  u.Attr(ir::Attribute::Int("dtype", 11)).Input(Int64s({1, 2, 3, 4, 5}));
  y = RunOne(u);
  EXPECT_EQ(y.dtype(), DType::kFloat64);
  for (double x : AsDoubles(y)) EXPECT_TRUE(x >= 0.0 && x < 1.0) << x;
  OpTester bad = Op("RandomUniformLike", 17);
  bad.Input(Int64s({1, 2}));
  ExpectRunError(bad, "without attribute 'dtype' the output takes its type, which must be a float type");
}

TEST(RandomOpTest, SeedsAreReproducibleAndStepsDiffer) {
  auto make = [](std::optional<float> seed, int threads, uint64_t session_seed) {
    OpTester t = Op("RandomUniform", 17);
    t.Attr(ir::Attribute::Ints("shape", {50000}));
    if (seed) t.Attr(ir::Attribute::Float("seed", *seed));
    t.options = CpuSessionOptions(threads, session_seed);
    return t;
  };
  // The seed attribute fixes the numbers whatever the session's seed and thread count.
  const ir::Tensor a = RunOne(make(3.0f, 1, 1));
  EXPECT_TRUE(a.SameContents(RunOne(make(3.0f, 4, 99))));
  EXPECT_FALSE(a.SameContents(RunOne(make(4.0f, 1, 1))));
  // A later training step draws new numbers; step 0 gives the model's numbers again.
  EXPECT_FALSE(a.SameContents(RunOne(make(3.0f, 1, 1), 1)));
  EXPECT_TRUE(a.SameContents(RunOne(make(3.0f, 2, 1), 0)));
  // Without the attribute the session's seed decides.
  const ir::Tensor b = RunOne(make(std::nullopt, 1, 5));
  EXPECT_TRUE(b.SameContents(RunOne(make(std::nullopt, 3, 5))));
  EXPECT_FALSE(b.SameContents(RunOne(make(std::nullopt, 1, 6))));
}

TEST(RandomOpTest, BernoulliFrequenciesAndTypes) {
  const int64_t n = 60000;
  std::vector<double> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i % 3 == 0 ? 0.0 : i % 3 == 1 ? 1.0 : 0.3;
  OpTester t = Op("Bernoulli", 15);
  t.Attr(ir::Attribute::Int("dtype", 9)).Input(MakeTensor<double>({n}, p));
  const ir::Tensor y = RunOne(t);
  ASSERT_EQ(y.dtype(), DType::kBool);
  const auto v = y.values<bool>();
  int64_t ones = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool got = v[static_cast<size_t>(i)];
    if (i % 3 == 2) {
      ones += got;
    } else {
      ASSERT_EQ(got, i % 3 == 1) << i;
    }
  }
  EXPECT_NEAR(static_cast<double>(ones) / (n / 3), 0.3, 5 * std::sqrt(0.3 * 0.7 / (n / 3)));
  OpTester f = Op("Bernoulli", 15);
  f.Input(MakeTensor<float>({4}, {0, 1, 1, 0}));
  const ir::Tensor yf = RunOne(f);
  EXPECT_EQ(yf.dtype(), DType::kFloat32);
  EXPECT_EQ(AsDoubles(yf), (std::vector<double>{0, 1, 1, 0}));
  OpTester bad = Op("Bernoulli", 15);
  bad.Input(Int64s({1}));
  ExpectRunError(bad, "must be a float tensor of probabilities, got int64");
}

TEST(RandomOpTest, MultinomialFrequencies) {
  const float inf = std::numeric_limits<float>::infinity();
  // Row 0: probabilities 0.2, 0.8, 0 (log-probabilities, unnormalised by +5); row 1: one class only.
  OpTester t = Op("Multinomial", 7);
  t.Attr(ir::Attribute::Int("sample_size", 20000))
      .Attr(ir::Attribute::Int("dtype", 7))
      .Input(MakeTensor<float>({2, 3}, {std::log(0.2f) + 5, std::log(0.8f) + 5, -inf, -inf, -inf, 1.0f}));
  const ir::Tensor y = RunOne(t);
  ASSERT_EQ(y.dtype(), DType::kInt64);
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{2, 20000}));
  const std::vector<int64_t> v = Int64Values(y);
  int64_t zeros = 0;
  for (int64_t i = 0; i < 20000; ++i) {
    ASSERT_TRUE(v[static_cast<size_t>(i)] == 0 || v[static_cast<size_t>(i)] == 1) << v[static_cast<size_t>(i)];
    zeros += v[static_cast<size_t>(i)] == 0;
    ASSERT_EQ(v[static_cast<size_t>(20000 + i)], 2);
  }
  EXPECT_NEAR(zeros / 20000.0, 0.2, 5 * std::sqrt(0.2 * 0.8 / 20000));
  OpTester nan = Op("Multinomial", 7);
  nan.Input(MakeTensor<float>({1, 2}, {0.0f, std::nanf("")}));
  ExpectRunError(nan, "row 0 holds NaN at class 1");
  OpTester none = Op("Multinomial", 7);
  none.Input(MakeTensor<float>({1, 2}, {-inf, -inf}));
  ExpectRunError(none, "row 0 has no finite largest log-probability");
}

TEST(RandomOpTest, AttributeErrors) {
  OpTester no_shape = Op("RandomNormal", 17);
  ExpectRunError(no_shape, "attribute 'shape' (ints) is required");
  OpTester neg = Op("RandomUniform", 17);
  neg.Attr(ir::Attribute::Ints("shape", {2, -1}));
  ExpectRunError(neg, "attribute 'shape' has a negative dim");
  OpTester int_type = Op("RandomUniform", 17);
  int_type.Attr(ir::Attribute::Ints("shape", {2})).Attr(ir::Attribute::Int("dtype", 7));
  ExpectRunError(int_type, "attribute 'dtype' is 7, expected float16, float, double or bfloat16");
  OpTester samples = Op("Multinomial", 7);
  samples.Attr(ir::Attribute::Int("sample_size", 0)).Input(MakeTensor<float>({1, 2}, {0, 0}));
  ExpectRunError(samples, "attribute 'sample_size' is 0, expected at least 1");
}

}  // namespace
}  // namespace onnxamp::testing
