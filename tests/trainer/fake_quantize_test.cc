// Quantization-aware training (trainer/graph/fake_quantize.h): com.onnxamp FakeQuantize computes a QuantizeLinear ->
// DequantizeLinear pair bit for bit (float, float16, bfloat16; the four integer types; per tensor and per axis; ties,
// saturation, NaN); FakeQuantizeGrad's straight-through and step-size gradients against their formulas (written out
// here in double, independently of the kernel); which pairs the training-graph rewrite takes; and a weight behind a
// pair training through it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "converter/model_clone.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/op_tester.h"
#include "tests/runtime/subgraph_builder.h"
#include "tests/trainer/grad_check.h"
#include "trainer/autodiff/autodiff.h"
#include "trainer/graph/fake_quantize.h"

namespace onnxamp::testing {
namespace {

using G = SubgraphBuilder;

OpTester Op(std::string op_type, int64_t opset) {
  OpTester t;
  t.op_type = std::move(op_type);
  t.opset = opset;
  return t;
}

struct Range {
  DType type;
  int64_t lo, hi;
};

constexpr Range kRanges[] = {
    {DType::kUint8, 0, 255}, {DType::kInt8, -128, 127}, {DType::kInt16, -32768, 32767}, {DType::kUint16, 0, 65535}};

// A zero point tensor of `type` holding `v` (dims `dims`).
ir::Tensor ZeroPoint(DType type, const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
  ir::Tensor t(type, dims);
  for (size_t k = 0; k < v.size(); ++k) {
    switch (type) {
      case DType::kUint8:
        t.mutable_values<uint8_t>()[k] = static_cast<uint8_t>(v[k]);
        break;
      case DType::kInt8:
        t.mutable_values<int8_t>()[k] = static_cast<int8_t>(v[k]);
        break;
      case DType::kInt16:
        t.mutable_values<int16_t>()[k] = static_cast<int16_t>(v[k]);
        break;
      default:
        t.mutable_values<uint16_t>()[k] = static_cast<uint16_t>(v[k]);
        break;
    }
  }
  return t;
}

// x [3, 4, 5] of `dtype` (values in compute type): multiples of scale / 2 (ties), values that saturate both ends, NaN.
template <typename T>
ir::Tensor QuantInput(double scale, int64_t lo, int64_t hi) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(static_cast<double>(lo) * scale * 1.3,
                                           static_cast<double>(hi) * scale * 1.3);
  std::vector<ops::ComputeType<T>> v(60);
  for (size_t k = 0; k < v.size(); ++k) {
    const double r = u(rng);
    v[k] = static_cast<ops::ComputeType<T>>(k % 3 == 0 ? std::round(r / scale * 2) * scale / 2 : r);
  }
  if constexpr (!std::is_same_v<T, double>) v[5] = NAN;
  return MakeTensor<T>({3, 4, 5}, v);
}

template <typename T>
void ExpectPairMatches(const Range& r, bool per_axis) {
  const DType dtype = ops::DTypeOf<T>();
  const double scale = 0.25;  // exact in every float type, so x / scale ties stay ties
  ir::Tensor x = QuantInput<T>(scale, r.lo, r.hi);
  ir::Tensor s = per_axis ? MakeTensor<T>({4}, {0.25f, 0.5f, 0.125f, 1.0f}) : MakeTensor<T>({}, {0.25f});
  const int64_t mid = (r.lo + r.hi) / 2;
  ir::Tensor z =
      per_axis ? ZeroPoint(r.type, {4}, {mid, r.lo, r.hi, 0 >= r.lo ? 0 : mid}) : ZeroPoint(r.type, {}, {mid});
  OpTester q = Op("QuantizeLinear", 21);
  q.Input(x).Input(s).Input(z);
  if (per_axis) q.Attr(ir::Attribute::Int("axis", 1));
  auto quantized = q.Run();
  ASSERT_TRUE(quantized.ok()) << quantized.status().message();
  OpTester d = Op("DequantizeLinear", 21);
  d.Input((*quantized)[0]).Input(s).Input(z);
  if (per_axis) d.Attr(ir::Attribute::Int("axis", 1));
  auto pair = d.Run();
  ASSERT_TRUE(pair.ok()) << pair.status().message();
  OpTester f = InternalOp(ops::kFakeQuantizeOp);
  f.Input(x).Input(s).Input(z);
  f.Attr(ir::Attribute::Int("axis", 1)).Attr(ir::Attribute::Int("qmin", r.lo)).Attr(ir::Attribute::Int("qmax", r.hi));
  auto fake = f.Run();
  ASSERT_TRUE(fake.ok()) << fake.status().message();
  ASSERT_EQ((*fake)[0].dtype(), dtype);
  ASSERT_EQ((*fake)[0].nbytes(), (*pair)[0].nbytes());
  EXPECT_EQ(std::memcmp((*fake)[0].data(), (*pair)[0].data(), (*pair)[0].nbytes()), 0)
      << DTypeName(dtype) << " " << DTypeName(r.type) << (per_axis ? " per axis" : " per tensor");
}

TEST(FakeQuantizeTest, MatchesQuantizeThenDequantizeBitForBit) {
  for (const Range& r : kRanges) {
    for (bool per_axis : {false, true}) {
      ExpectPairMatches<float>(r, per_axis);
      ExpectPairMatches<Float16>(r, per_axis);
      ExpectPairMatches<BFloat16>(r, per_axis);
    }
  }
}

TEST(FakeQuantizeTest, BadScalesAndRangesAreRefused) {
  OpTester zero = InternalOp(ops::kFakeQuantizeOp);
  zero.Input(MakeTensor<float>({2}, {1, 2})).Input(MakeTensor<float>({}, {0.0f}));
  auto got = zero.Run();
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("finite and non-zero"), std::string::npos) << got.status().message();
  OpTester range = InternalOp(ops::kFakeQuantizeOp);
  range.Input(MakeTensor<float>({2}, {1, 2})).Input(MakeTensor<float>({}, {0.5f}));
  range.Attr(ir::Attribute::Int("qmin", 5)).Attr(ir::Attribute::Int("qmax", 5));
  got = range.Run();
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("qmin 5 and qmax 5"), std::string::npos) << got.status().message();
  // Blocked scales: the forward would read them, the gradient's per-scale sums could not (refused by both).
  for (const char* op : {ops::kFakeQuantizeOp, ops::kFakeQuantizeGradOp}) {
    OpTester blocked = InternalOp(op);
    if (std::string(op) == ops::kFakeQuantizeGradOp) blocked.Input(MakeTensor<float>({2, 4}, std::vector<float>(8, 1)));
    blocked.Input(MakeTensor<float>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})).Input(MakeTensor<float>({2, 2}, {1, 1, 1, 1}));
    blocked.Attr(ir::Attribute::Int("axis", 1)).Attr(ir::Attribute::Int("block_size", 2));
    got = blocked.Run();
    ASSERT_FALSE(got.ok()) << op;
    EXPECT_NE(got.status().message().find("'block_size' is 2"), std::string::npos) << got.status().message();
  }
}

// dX = dY inside the range, 0 outside; dScale = sum of dY * (q - zp - x / s) inside, dY * (qmin|qmax - zp) outside.
TEST(FakeQuantizeTest, GradientIsTheStraightThroughAndStepSizeEstimator) {
  for (bool per_axis : {false, true}) {
    const ir::Tensor x = gradtest::Doubles({3, 4, 5}, 11, -4, 4), dy = gradtest::Doubles({3, 4, 5}, 12, -1, 1);
    const std::vector<double> scales =
        per_axis ? std::vector<double>{0.02, 0.05, 0.01, 0.03} : std::vector<double>{0.02};
    const std::vector<int64_t> zps = per_axis ? std::vector<int64_t>{0, 10, -20, 5} : std::vector<int64_t>{3};
    ir::Tensor s = per_axis ? MakeTensor<double>({4}, scales) : MakeTensor<double>({}, scales);
    ir::Tensor z = per_axis ? ZeroPoint(DType::kInt8, {4}, zps) : ZeroPoint(DType::kInt8, {}, zps);
    OpTester t = InternalOp(ops::kFakeQuantizeGradOp);
    t.num_outputs = 2;
    t.Input(dy).Input(x).Input(s).Input(z);
    t.Attr(ir::Attribute::Int("axis", 1)).Attr(ir::Attribute::Int("qmin", -128)).Attr(ir::Attribute::Int("qmax", 127));
    auto got = t.Run();
    ASSERT_TRUE(got.ok()) << got.status().message();
    std::vector<double> want_ds(scales.size(), 0.0);
    int inside = 0, outside = 0;
    for (int64_t k = 0; k < 60; ++k) {
      const size_t c = per_axis ? static_cast<size_t>((k / 5) % 4) : 0;
      const double xs = x.values<double>()[k] / scales[c];
      const double q = std::nearbyint(xs) + static_cast<double>(zps[c]);
      const double g = dy.values<double>()[k];
      const bool in = q >= -128 && q <= 127;
      inside += in;
      outside += !in;
      EXPECT_EQ((*got)[0].values<double>()[k], in ? g : 0.0) << k;
      want_ds[c] += in ? g * (q - static_cast<double>(zps[c]) - xs)
                       : g * ((q < -128 ? -128.0 : 127.0) - static_cast<double>(zps[c]));
    }
    EXPECT_GT(inside, 10);
    EXPECT_GT(outside, 10);
    ASSERT_EQ((*got)[1].dims(), s.dims());
    for (size_t c = 0; c < scales.size(); ++c) EXPECT_NEAR((*got)[1].values<double>()[c], want_ds[c], 1e-12) << c;
  }
}

// x -> Q -> DQ; the pair with the given DQ scale ("s" or another constant) and, optionally, a second DQ and the Q
// output as a graph output.
ir::Model PairModel(bool same_scale, bool second_reader, bool q_is_output) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("x", DType::kFloat32, std::vector<int64_t>{2, 3});
  top.Init("s", MakeTensor<float>({}, {0.1f}));
  top.Init("s_copy", MakeTensor<float>({}, {0.1f}));  // equal contents: the same scale
  top.Init("s_other", MakeTensor<float>({}, {0.2f}));
  top.Init("zp", ZeroPoint(DType::kInt8, {}, {0}));
  top.N("QuantizeLinear", {"x", "s", "zp"}, {"q"});
  top.N("DequantizeLinear", {"q", same_scale ? "s_copy" : "s_other", "zp"}, {"y"});
  top.Out("y", DType::kFloat32);
  if (second_reader) {
    top.N("DequantizeLinear", {"q", "s", "zp"}, {"y2"});
    top.Out("y2", DType::kFloat32);
  }
  if (q_is_output) top.Out("q", DType::kInt8);
  return m;
}

int Count(const ir::Model& m, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : m.graph->nodes()) n += node->op_type() == op;
  return n;
}

TEST(FakeQuantizeTest, TheRewriteTakesPairsWithTheSameScaleAndZeroPoint) {
  ir::Model m = PairModel(true, false, false);
  EXPECT_EQ(trainer::UseFakeQuantize(m), 1);
  EXPECT_EQ(Count(m, ops::kFakeQuantizeOp), 1);
  EXPECT_EQ(Count(m, "QuantizeLinear"), 0);
  EXPECT_EQ(m.OpsetVersion(exec::kInternalDomain), 1);
  const ir::Node* fq = m.graph->FindValue("y")->producer();
  EXPECT_EQ(fq->GetInt("qmin", 0), -128);
  EXPECT_EQ(fq->GetInt("qmax", 0), 127);

  ir::Model other = PairModel(false, false, false);
  EXPECT_EQ(trainer::UseFakeQuantize(other), 0);  // a requantization to another scale stays as it is

  ir::Model shared = PairModel(true, true, true);
  EXPECT_EQ(trainer::UseFakeQuantize(shared), 2);
  EXPECT_EQ(Count(shared, "QuantizeLinear"), 1);  // its output is a graph output
  EXPECT_EQ(Count(shared, "DequantizeLinear"), 0);
}

// Pairs the rewrite leaves as they are: two per-axis scales of equal contents (two parameters, which may train apart),
// a double x (QuantizeLinear takes none), a scale of another type than x; and a QuantizeLinear whose output an If
// branch reads stays.
TEST(FakeQuantizeTest, TheRewriteLeavesPairsItCannotTake) {
  auto pair = [](DType x_type, const ir::Tensor& s, const ir::Tensor& s2, int64_t axis) {
    ir::Model m;
    m.opset_imports = {{"", 21}};
    G top(m.graph.get());
    top.In("x", x_type, std::vector<int64_t>{2, 3});
    top.Init("s", s);
    top.Init("s2", s2);
    top.Init("zp", ZeroPoint(DType::kInt8, s.dims(), std::vector<int64_t>(static_cast<size_t>(s.num_elements()), 0)));
    top.N("QuantizeLinear", {"x", "s", "zp"}, {"q"}, {ir::Attribute::Int("axis", axis)});
    top.N("DequantizeLinear", {"q", "s2", "zp"}, {"y"}, {ir::Attribute::Int("axis", axis)});
    top.Out("y", x_type);
    return m;
  };
  ir::Model per_axis =
      pair(DType::kFloat32, MakeTensor<float>({3}, {0.1f, 0.2f, 0.3f}), MakeTensor<float>({3}, {0.1f, 0.2f, 0.3f}), 1);
  EXPECT_EQ(trainer::UseFakeQuantize(per_axis), 0);
  ir::Model doubles = pair(DType::kFloat64, MakeTensor<double>({}, {0.1}), MakeTensor<double>({}, {0.1}), 1);
  EXPECT_EQ(trainer::UseFakeQuantize(doubles), 0);
  ir::Model mixed = pair(DType::kFloat32, MakeTensor<Float16>({}, {0.5f}), MakeTensor<Float16>({}, {0.5f}), 1);
  EXPECT_EQ(trainer::UseFakeQuantize(mixed), 0);

  ir::Model branch = PairModel(true, false, false);
  G top(branch.graph.get());
  top.In("c", DType::kBool, std::vector<int64_t>{});
  auto then_g = Graph("then");
  G t(then_g.get());
  t.N("Identity", {"q"}, {"tq"});
  t.Out("tq", DType::kInt8);
  auto else_g = Graph("else");
  G e(else_g.get());
  e.N("Identity", {"q"}, {"eq"});
  e.Out("eq", DType::kInt8);
  ir::Node* n = top.N("If", {"c"}, {"picked"});
  n->SetAttribute(ir::Attribute::GraphValue("then_branch", std::move(then_g)));
  n->SetAttribute(ir::Attribute::GraphValue("else_branch", std::move(else_g)));
  top.Out("picked", DType::kInt8);
  EXPECT_EQ(trainer::UseFakeQuantize(branch), 1);
  EXPECT_EQ(Count(branch, "QuantizeLinear"), 1);          // the branches read its output
  EXPECT_EQ(branch.graph->FindValue("s_copy"), nullptr);  // the DequantizeLinear's own copy of the scale: gone
}

// loss = sum(DQ(Q(w)) * R): after the rewrite dL/dw is R where w / s rounds into [qmin, qmax], 0 elsewhere (w is
// uint8-quantized with zero point 0, so every negative weight is clipped).
TEST(FakeQuantizeTest, AWeightBehindAPairGetsTheStraightThroughGradient) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("w", DType::kFloat32, std::vector<int64_t>{16});
  top.Init("s", MakeTensor<float>({}, {0.01f}));
  top.Init("zp", ZeroPoint(DType::kUint8, {}, {0}));
  top.N("QuantizeLinear", {"w", "s", "zp"}, {"q"});
  top.N("DequantizeLinear", {"q", "s", "zp"}, {"dq"});
  std::vector<float> r(16);
  for (int k = 0; k < 16; ++k) r[static_cast<size_t>(k)] = 0.5f + static_cast<float>(k);
  top.Init("R", MakeTensor<float>({16}, r));
  top.N("Mul", {"dq", "R"}, {"p"});
  top.N("ReduceSum", {"p"}, {"loss"}, {ir::Attribute::Int("keepdims", 0)});
  top.Out("loss", DType::kFloat32);
  {
    // Without the rewrite the integer middle stops the gradient.
    ir::Model plain = converter::CloneModel(m);
    auto before = trainer::BuildGradients(plain, {.loss = "loss", .wrt = {"w"}});
    ASSERT_TRUE(before.ok()) << before.status().message();
    EXPECT_TRUE(before->gradients[0].empty());
  }
  ASSERT_EQ(trainer::UseFakeQuantize(m), 1);
  auto grads = trainer::BuildGradients(m, {.loss = "loss", .wrt = {"w"}});
  ASSERT_TRUE(grads.ok()) << grads.status().message();
  ASSERT_FALSE(grads->gradients[0].empty());
  std::vector<float> w(16);
  for (int k = 0; k < 16; ++k) w[static_cast<size_t>(k)] = -1.0f + 0.25f * static_cast<float>(k);  // -1 .. 2.75
  auto s = exec::Session::Create(std::move(m), CpuSessionOptions(1));
  ASSERT_TRUE(s.ok()) << s.status().message();
  exec::RunOptions run;
  run.fetch = grads->gradients;
  auto got = (*s)->Run({Named(MakeTensor<float>({16}, w), "w")}, run);
  ASSERT_TRUE(got.ok()) << got.status().message();
  for (size_t k = 0; k < 16; ++k) {
    const bool inside = w[k] >= 0.0f && w[k] <= 2.55f;
    EXPECT_EQ((*got)[0].values<float>()[k], inside ? r[k] : 0.0f) << "w " << w[k];
  }
}

}  // namespace
}  // namespace onnxamp::testing
