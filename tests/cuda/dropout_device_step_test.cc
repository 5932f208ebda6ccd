// Dropout and DropoutGrad with a device-resident RNG step (CudaContext::set_device_rng_step, what a replayed CUDA
// Graph of a training step uses): the masks of the step stored on the device equal the masks of the same step given
// by the host, change with the stored value, and a host rng_step beside a device one is refused. Skips without a
// CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/session.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/cuda/cuda_op_test_util.h"

namespace onnxamp::exec {
namespace {

// y = Dropout(x, ratio 0.5, training_mode true) with its mask, and dx = DropoutGrad(y), which recomputes the mask.
ir::Model DropoutModel(bool with_seed_attribute) {
  ir::Model m;
  m.opset_imports = {{"", 17}, {std::string(kInternalDomain), 1}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(64), ir::Dim::Value(33)}));
  g.AddInput(x);
  ir::Value* ratio = g.CreateValue("ratio");
  g.SetInitializer(ratio, testing::MakeTensor<float>({}, {0.5f}));
  ir::Value* training = g.CreateValue("training");
  ir::Tensor on(DType::kBool, {});
  on.mutable_values<bool>()[0] = true;
  g.SetInitializer(training, std::move(on));
  ir::Value* y = g.CreateValue("y");
  ir::Value* mask = g.CreateValue("mask");
  ir::Node* d = g.AddNode("Dropout", {x, ratio, training}, {y, mask}, "drop");
  if (with_seed_attribute) d->SetAttribute(ir::Attribute::Int("seed", 1234));
  ir::Value* dx = g.CreateValue("dx");
  // As the gradient builder emits it: seed_from names the forward's first output; its seed attribute is copied.
  ir::Node* grad = g.AddNode(ops::kDropoutGradOp, {y, ratio, training}, {dx}, "drop_grad", kInternalDomain);
  grad->SetAttribute(ir::Attribute::String("seed_from", "y"));
  if (with_seed_attribute) grad->SetAttribute(ir::Attribute::Int("seed", 1234));
  g.AddOutput(y);
  g.AddOutput(mask);
  g.AddOutput(dx);
  return m;
}

ir::Tensor Input() {
  std::vector<float> v(64 * 33);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i % 13) - 6) * 0.25f + 0.125f;
  ir::Tensor t = testing::MakeTensor<float>({64, 33}, v);
  t.set_name("x");
  return t;
}

bool SameBytes(const ir::Tensor& a, const ir::Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(CudaDropoutDeviceStep, MasksFollowTheStepStoredOnTheDevice) {
  ONNXAMP_REQUIRE_CUDA();
  for (bool seed_attribute : {false, true}) {
    const std::string what = seed_attribute ? "seed attribute" : "session seed";
    SessionOptions options;
    options.device = Device::kCuda;
    options.seed = 7;
    auto s = Session::Create(DropoutModel(seed_attribute), options);
    ASSERT_TRUE(s.ok()) << s.status().message();
    auto* cuda = dynamic_cast<cuda::CudaContext*>((*s)->device_context());
    ASSERT_NE(cuda, nullptr);
    ir::Tensor step(DType::kUint64, {});
    RunOptions host;
    RunOptions device;  // rng_step 0: the step comes from the device
    std::vector<std::vector<ir::Tensor>> by_device;
    for (uint64_t k : {uint64_t{0}, uint64_t{5}, uint64_t{6}, uint64_t{1} << 40}) {
      host.rng_step = k;
      auto want = (*s)->Run({Input()}, host);
      ASSERT_TRUE(want.ok()) << want.status().message();
      step.mutable_values<uint64_t>()[0] = k;
      StatusOr<ir::Tensor> on_device = (*s)->ToDevice(step);
      ASSERT_TRUE(on_device.ok()) << on_device.status().message();
      cuda->set_device_rng_step(reinterpret_cast<const uint64_t*>(on_device->data()));
      auto got = (*s)->Run({Input()}, device);
      cuda->set_device_rng_step(nullptr);
      ASSERT_TRUE(got.ok()) << got.status().message();
      for (size_t o = 0; o < want->size(); ++o) {
        EXPECT_TRUE(SameBytes((*got)[o], (*want)[o])) << what << " step " << k << " output " << (*want)[o].name();
      }
      by_device.push_back(std::move(got).value());
    }
    // Different steps drew different masks.
    for (size_t i = 1; i < by_device.size(); ++i) {
      EXPECT_FALSE(SameBytes(by_device[i][1], by_device[i - 1][1])) << what << " run " << i;
    }
    // A host step beside a device one is an error naming the node.
    step.mutable_values<uint64_t>()[0] = 3;
    StatusOr<ir::Tensor> on_device = (*s)->ToDevice(step);
    ASSERT_TRUE(on_device.ok());
    cuda->set_device_rng_step(reinterpret_cast<const uint64_t*>(on_device->data()));
    host.rng_step = 3;
    auto refused = (*s)->Run({Input()}, host);
    cuda->set_device_rng_step(nullptr);
    ASSERT_FALSE(refused.ok()) << what;
    EXPECT_NE(refused.status().message().find("given with a device-resident RNG step"), std::string::npos)
        << refused.status().message();
  }
}

}  // namespace
}  // namespace onnxamp::exec
