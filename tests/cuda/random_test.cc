// CUDA RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike and Bernoulli against the CPU kernels: the
// same counter-based numbers for the same session seed or seed attribute, in every output type, the half-open range
// of a uniform in fp16/bf16, the *Like forms' types, the CPU's errors; and the numbers of a step stored on the device
// (a replayed CUDA Graph) equal the numbers of the same step given by the host. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/executor/session.h"
#include "tests/cuda/elementwise_test_util.h"

namespace onnxamp::testing::cuda_ew {
namespace {

const std::vector<DType> kFloat = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};

int64_t Code(DType t) { return static_cast<int64_t>(t); }

std::string Name(DType t) { return std::string(DTypeName(t)); }

TEST(CudaRandom, UniformAndNormalMatchTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (const char* op : {"RandomUniform", "RandomNormal"}) {
    const bool uniform = std::string(op) == "RandomUniform";
    for (DType t : kFloat) {
      for (bool seeded : {false, true}) {
        for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{}, {7}, {33, 65}, {0, 4}}) {
          OpTester r = Tester(op, 22);
          r.Attr(ir::Attribute::Int("dtype", Code(t))).Attr(ir::Attribute::Ints("shape", shape));
          r.Attr(ir::Attribute::Float(uniform ? "low" : "mean", uniform ? -2.0f : 1.5f));
          r.Attr(ir::Attribute::Float(uniform ? "high" : "scale", uniform ? 3.0f : 0.5f));
          if (seeded) r.Attr(ir::Attribute::Float("seed", 17.0f));
          r.options.seed = 99;
          ExpectCudaMatchesCpu(r, std::string(op) + " " + Name(t) + (seeded ? " seeded " : " ") + ShapeName(shape));
        }
      }
    }
  }
}

// [0, 1) in fp16 and bf16: draws just below 1 round up to 1 and must come back below it, as on the CPU (exactly).
TEST(CudaRandom, UniformStaysBelowHighInEveryType) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType t : kFloat) {
    OpTester r = Tester("RandomUniform", 22);
    r.Attr(ir::Attribute::Int("dtype", Code(t))).Attr(ir::Attribute::Ints("shape", {1 << 16}));
    r.Attr(ir::Attribute::Float("seed", 3.0f));
    ExpectCudaMatchesCpu(r, "RandomUniform [0, 1) " + Name(t), Tolerance{0, 0});
    // A range narrower than one unit of the type: everything is low.
    OpTester narrow = Tester("RandomUniform", 22);
    narrow.Attr(ir::Attribute::Int("dtype", Code(t))).Attr(ir::Attribute::Ints("shape", {257}));
    narrow.Attr(ir::Attribute::Float("low", 1.0f)).Attr(ir::Attribute::Float("high", 1.0001f));
    ExpectCudaMatchesCpu(narrow, "RandomUniform narrow " + Name(t), Tolerance{0, 0});
  }
}

TEST(CudaRandom, LikeFormsTakeTheInputsShapeAndType) {
  ONNXAMP_REQUIRE_CUDA();
  for (const char* op : {"RandomUniformLike", "RandomNormalLike"}) {
    for (DType t : kFloat) {
      ExpectCudaMatchesCpu(Tester(op, 22).Input(Input(t, {5, 9}, 1, -1, 1)), std::string(op) + " " + Name(t));
    }
    // An integer input with a float dtype attribute.
    OpTester typed = Tester(op, 22);
    typed.Attr(ir::Attribute::Int("dtype", Code(DType::kFloat16)));
    typed.Input(Input(DType::kInt64, {3, 0, 2}, 2, 0, 5));
    ExpectCudaMatchesCpu(typed, std::string(op) + " int64 input, fp16 output");
    typed.inputs.clear();
    typed.Input(Input(DType::kInt32, {6, 7}, 3, 0, 5));
    ExpectCudaMatchesCpu(typed, std::string(op) + " int32 input, fp16 output");
  }
}

TEST(CudaRandom, BernoulliInEveryOutputType) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType p : kFloat) {
    ExpectCudaMatchesCpu(Tester("Bernoulli", 22).Input(Input(p, {33, 65}, 4, 0, 1)), "Bernoulli " + Name(p),
                         Tolerance{0, 0});
    for (DType out : {DType::kFloat32, DType::kInt32, DType::kUint8, DType::kBool, DType::kFloat64}) {
      OpTester b = Tester("Bernoulli", 22);
      b.Attr(ir::Attribute::Int("dtype", Code(out))).Attr(ir::Attribute::Float("seed", 5.0f));
      b.Input(Make(p, {6}, {0, 1, 0.5, 0.25, 1, 0}));
      ExpectCudaMatchesCpu(b, "Bernoulli " + Name(p) + " -> " + Name(out), Tolerance{0, 0});
    }
  }
}

TEST(CudaRandom, ErrorsMatchTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester no_shape = Tester("RandomNormal", 22);
  ExpectSameCreateError(no_shape);
  OpTester bad_dtype = Tester("RandomUniform", 22);
  bad_dtype.Attr(ir::Attribute::Int("dtype", Code(DType::kInt32))).Attr(ir::Attribute::Ints("shape", {2}));
  ExpectSameCreateError(bad_dtype);
  OpTester infinite = Tester("RandomUniform", 22);
  infinite.Attr(ir::Attribute::Float("high", std::numeric_limits<float>::infinity()))
      .Attr(ir::Attribute::Ints("shape", {2}));
  ExpectSameCreateError(infinite);
  ExpectSameRunError(Tester("RandomNormalLike", 22).Input(Make(DType::kInt32, {2}, {1, 2})));
  ExpectSameRunError(Tester("Bernoulli", 22).Input(Make(DType::kInt32, {2}, {0, 1})));
}

// y = RandomNormalLike(x), b = Bernoulli(p): the step stored on the device gives the numbers the host gives for it.
ir::Model DeviceStepModel() {
  ir::Model m;
  m.opset_imports = {{"", 22}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(64), ir::Dim::Value(33)}));
  g.AddInput(x);
  ir::Value* y = g.CreateValue("y");
  g.AddNode("RandomNormalLike", {x}, {y}, "noise");
  ir::Value* b = g.CreateValue("b");
  ir::Node* bern = g.AddNode("Bernoulli", {x}, {b}, "coin");
  bern->SetAttribute(ir::Attribute::Float("seed", 11.0f));
  g.AddOutput(y);
  g.AddOutput(b);
  return m;
}

TEST(CudaRandom, NumbersFollowTheStepStoredOnTheDevice) {
  ONNXAMP_REQUIRE_CUDA();
  exec::SessionOptions options;
  options.device = exec::Device::kCuda;
  options.seed = 7;
  auto s = exec::Session::Create(DeviceStepModel(), options);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto* cuda = dynamic_cast<cuda::CudaContext*>((*s)->device_context());
  ASSERT_NE(cuda, nullptr);
  ir::Tensor x = Input(DType::kFloat32, {64, 33}, 8, 0, 1);
  x.set_name("x");
  ir::Tensor step(DType::kUint64, {});
  exec::RunOptions host;
  exec::RunOptions device;
  std::vector<ir::Tensor> previous;
  for (uint64_t k : {uint64_t{0}, uint64_t{5}, uint64_t{1} << 40}) {
    host.rng_step = k;
    auto want = (*s)->Run({x}, host);
    ASSERT_TRUE(want.ok()) << want.status().message();
    step.mutable_values<uint64_t>()[0] = k;
    StatusOr<ir::Tensor> on_device = (*s)->ToDevice(step);
    ASSERT_TRUE(on_device.ok()) << on_device.status().message();
    cuda->set_device_rng_step(reinterpret_cast<const uint64_t*>(on_device->data()));
    auto got = (*s)->Run({x}, device);
    cuda->set_device_rng_step(nullptr);
    ASSERT_TRUE(got.ok()) << got.status().message();
    for (size_t o = 0; o < want->size(); ++o) {
      const ir::Tensor& g = (*got)[o];
      const ir::Tensor& w = (*want)[o];
      EXPECT_TRUE(g.nbytes() == w.nbytes() && std::memcmp(g.data(), w.data(), w.nbytes()) == 0)
          << "step " << k << " output " << o;
    }
    if (!previous.empty()) {
      EXPECT_NE(std::memcmp(previous[0].data(), (*got)[0].data(), previous[0].nbytes()), 0) << "step " << k;
    }
    previous = std::move(got).value();
  }
}

}  // namespace
}  // namespace onnxamp::testing::cuda_ew
