// Sessions on CUDA end to end: placement, results equal to the CPU session's, steady-state runs without device
// allocations, statistics, and a missing device. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/executor/session.h"
#include "tests/cuda/cuda_op_test_util.h"

namespace onnxamp::exec {
namespace {

// x[4,5] + b[5] (initializer) -> Relu -> Sigmoid -> Reshape to [20] (shape from an initializer) -> y
ir::Model SmallModel() {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("n"), ir::Dim::Value(5)}));
  g.AddInput(x);
  ir::Value* b = g.CreateValue("b");
  g.SetInitializer(b, testing::MakeTensor<float>({5}, {0.5f, -1, 2, -3, 0}));
  ir::Value* shape = g.CreateValue("shape");
  g.SetInitializer(shape, testing::MakeTensor<int64_t>({1}, {-1}));
  ir::Value* s = g.CreateValue("s");
  ir::Value* r = g.CreateValue("r");
  ir::Value* sg = g.CreateValue("sg");
  ir::Value* y = g.CreateValue("y");
  g.AddNode("Add", {x, b}, {s}, "add");
  g.AddNode("Relu", {s}, {r}, "relu");
  g.AddNode("Sigmoid", {r}, {sg}, "sigmoid");
  g.AddNode("Reshape", {sg, shape}, {y}, "reshape");
  g.AddOutput(y);
  g.AddOutput(r);
  return m;
}

ir::Tensor Input(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n * 5));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i % 11) - 5) * 0.37f;
  ir::Tensor t = testing::MakeTensor<float>({n, 5}, v);
  t.set_name("x");
  return t;
}

TEST(CudaExecutorTest, SmallModelMatchesTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  auto cpu = Session::Create(SmallModel());
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  SessionOptions options;
  options.device = Device::kCuda;
  options.time_device = true;
  auto cuda = Session::Create(SmallModel(), options);
  ASSERT_TRUE(cuda.ok()) << cuda.status().message();
  EXPECT_EQ((*cuda)->DescribePlacement().rfind("cuda:0 ", 0), 0u) << (*cuda)->DescribePlacement();
  EXPECT_EQ((*cuda)->placement().device, Device::kCuda);
  for (int64_t n : {int64_t{4}, int64_t{1}, int64_t{0}, int64_t{4}}) {
    auto want = (*cpu)->Run({Input(n)});
    ASSERT_TRUE(want.ok()) << want.status().message();
    RunStats stats;
    auto got = (*cuda)->Run({Input(n)}, &stats);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ(got->size(), 2u);
    for (size_t i = 0; i < got->size(); ++i) {
      const ir::Tensor& g = (*got)[i];
      ASSERT_TRUE(g.on_host());
      EXPECT_EQ(g.name(), (*want)[i].name());
      ASSERT_EQ(g.dims(), (*want)[i].dims());
      testing::ExpectClose(g, testing::AsDoubles((*want)[i]), "output " + std::to_string(i),
                           testing::CudaToleranceFor(DType::kFloat32));
    }
    if ((*cuda)->placement().on_cpu.empty()) {
      EXPECT_EQ(stats.host_to_device_bytes, static_cast<uint64_t>(n * 5 * 4)) << n;  // x only
    }
    if (n > 0) {
      EXPECT_GT(stats.device_seconds, 0.0);
    }
  }
}

TEST(CudaExecutorTest, SteadyStateRunsMakeNoDeviceAllocation) {
  ONNXAMP_REQUIRE_CUDA();
  SessionOptions options;
  options.device = Device::kCuda;
  auto session = std::move(Session::Create(SmallModel(), options)).value();
  RunStats first, second, third;
  ASSERT_TRUE(session->Run({Input(64)}, &first).ok());
  auto out = session->Run({Input(64)}, &second);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_TRUE(session->Run({Input(64)}, &third).ok());
  EXPECT_TRUE(second.planned);
  EXPECT_EQ(second.device_allocations, 0u);
  EXPECT_EQ(third.device_allocations, 0u);
  EXPECT_GT(second.device_peak_bytes, 0u);
}

TEST(CudaExecutorTest, MissingDeviceIndexIsRefusedAtCreate) {
  ONNXAMP_REQUIRE_CUDA();
  SessionOptions options;
  options.device = Device::kCuda;
  options.device_index = 1000;
  auto session = Session::Create(SmallModel(), options);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(session.status().message().find("cuda:1000"), std::string::npos) << session.status().message();
}

TEST(CudaExecutorTest, ModelsRunOnCuda) {
  ONNXAMP_REQUIRE_CUDA();
  // The same op through the kernel-test helper: Relu on every float type, all on the device when a kernel exists.
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    testing::OpTester tester;
    tester.op_type = "Relu";
    ir::Tensor x = testing::MakeTensor<float>({3, 7}, std::vector<float>(21, -0.25f));
    if (t != DType::kFloat32) {
      testing::OpTester cast;
      cast.op_type = "Cast";
      cast.Attr(ir::Attribute::Int("to", static_cast<int64_t>(t))).Input(x);
      auto casted = cast.Run();
      ASSERT_TRUE(casted.ok()) << casted.status().message();
      x = (*casted)[0];
    }
    tester.Input(x);
    testing::ExpectCudaMatchesCpu(tester, std::string("Relu ") + std::string(DTypeName(t)), std::nullopt,
                                  /*allow_cpu_nodes=*/true);
  }
}

}  // namespace
}  // namespace onnxamp::exec
