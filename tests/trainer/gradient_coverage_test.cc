// Every op the CPU runtime runs on floating-point data has a gradient builder at every opset its kernel covers, a
// decomposition into ops that have builders, or a not-differentiable reason, in its OpInfo (runtime/ops/op_info.h). A
// new kernel without an OpInfo or a builder fails this test, so the autodiff's "op has no gradient" error can only come
// from ops whose OpInfo says why.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::trainer {
namespace {

bool TakesFloat(const exec::KernelDef& def) {
  if (def.dtypes.empty()) return true;
  return std::any_of(def.dtypes.begin(), def.dtypes.end(), [](DType t) {
    return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
  });
}

std::string Name(const std::string& domain, const std::string& op) { return domain.empty() ? op : domain + ":" + op; }

TEST(GradientCoverage, EveryFloatCpuKernelHasABuilderOrAReason) {
  // ONNX opsets before kOldestTrainedOpset are not trained: the autodiff names the op and opset it has no builder
  // for. PyTorch exports start at opset 7. The runtime's own ops (com.onnxamp) are checked at every opset.
  constexpr int64_t kNewestOpset = 23;
  const ops::OpInfoRegistry& infos = ops::OpInfoRegistry::Global();
  const ops::GradientRegistry& grads = ops::GradientRegistry::Global();
  std::set<std::string> missing;
  int checked = 0;
  for (const exec::KernelDef& def : exec::KernelRegistry::Global().defs()) {
    if (def.device != exec::Device::kCpu || !TakesFloat(def)) continue;
    const ops::OpInfo* info = infos.Find(def.domain, def.op_type);
    if (info == nullptr) {
      missing.insert(Name(def.domain, def.op_type) + " (no OpInfo)");
      continue;
    }
    if (!info->not_differentiable.empty() || info->decompose) continue;
    const int64_t last = std::min(def.end_version, kNewestOpset);
    int64_t floor = def.domain.empty() ? ops::kOldestTrainedOpset : 1;
    if (!info->gradient_floor_reason.empty()) {
      for (const ops::GradientDef& g : info->gradients) floor = std::max(floor, g.since);
    }
    for (int64_t opset = std::max(def.since_version, floor); opset <= last; ++opset) {
      ++checked;
      if (!grads.Find(def.op_type, def.domain, opset).ok()) {
        missing.insert(Name(def.domain, def.op_type) + "-" + std::to_string(opset));
      }
    }
  }
  EXPECT_GT(checked, 500);
  std::string list;
  for (const std::string& m : missing) list += " " + m;
  EXPECT_TRUE(missing.empty()) << "CPU kernels without a gradient builder (add one to the op's OpInfo, or give the "
                                  "OpInfo a not-differentiable reason):"
                               << list;
}

// Every CPU kernel op has an OpInfo, and every OpInfo names an op that has a CPU kernel unless it says it has none
// (then it must not have one: an op that gets a kernel moves to its folder), so the OpInfos cannot hide a typo.
TEST(GradientCoverage, OpInfosAndCpuKernelsNameTheSameOps) {
  std::set<std::string> cpu_ops;
  for (const exec::KernelDef& def : exec::KernelRegistry::Global().defs()) {
    if (def.device == exec::Device::kCpu) cpu_ops.insert(Name(def.domain, def.op_type));
  }
  const ops::OpInfoRegistry& infos = ops::OpInfoRegistry::Global();
  for (const std::string& op : cpu_ops) {
    const size_t colon = op.find(':');
    const std::string domain = colon == std::string::npos ? "" : op.substr(0, colon);
    EXPECT_NE(infos.Find(domain, colon == std::string::npos ? op : op.substr(colon + 1)), nullptr)
        << op << " has a CPU kernel but no OpInfo (register one in its folder)";
  }
  for (const ops::OpInfo& info : infos.ops()) {
    EXPECT_EQ(cpu_ops.count(info.Name()) == 1, info.cpu_kernel)
        << info.Name() << (info.cpu_kernel ? " has no CPU kernel" : " has a CPU kernel: move its OpInfo to its folder");
  }
}

// A not-differentiable reason and a builder exclude each other at every opset.
TEST(GradientCoverage, NotDifferentiableOpsHaveNoBuilder) {
  for (const ops::OpInfo& info : ops::OpInfoRegistry::Global().ops()) {
    if (info.not_differentiable.empty()) continue;
    for (int64_t opset : {1, 6, 13, 18, 23}) {
      EXPECT_FALSE(ops::GradientRegistry::Global().Find(info.op_type, info.domain, opset).ok())
          << info.Name() << " (" << info.not_differentiable << ") has a builder at opset " << opset;
    }
  }
}

}  // namespace
}  // namespace onnxamp::trainer
