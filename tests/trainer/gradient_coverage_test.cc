// Every ONNX op the CPU runtime runs on floating-point data has a gradient builder at every opset its kernel covers,
// or is listed here as not differentiable, with the reason. A new kernel without a builder fails this test, so the
// autodiff's "op has no gradient" error can only come from ops this list names.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/gradient.h"

namespace onnxamp::trainer {
namespace {

// Ops whose outputs carry no gradient to their float inputs (integer or bool results, shapes, constants), or whose
// derivative is zero almost everywhere.
const std::map<std::string, std::string>& NotDifferentiable() {
  static const std::map<std::string, std::string> ops = {
      {"ArgMax", "integer result"},
      {"ArgMin", "integer result"},
      {"Equal", "bool result"},
      {"Greater", "bool result"},
      {"GreaterOrEqual", "bool result"},
      {"Less", "bool result"},
      {"LessOrEqual", "bool result"},
      {"Constant", "no inputs"},
      {"ConstantOfShape", "its input is a shape"},
      {"Not", "bool"},
      {"Range", "integer-valued steps: a constant sequence"},
      {"Shape", "integer result"},
      {"Size", "integer result"},
  };
  return ops;
}

// Ops whose builders start later than kOldestOpset, with the reason (the autodiff names op and opset below these).
const std::map<std::string, std::pair<int64_t, std::string>>& LaterFloors() {
  static const std::map<std::string, std::pair<int64_t, std::string>> ops = {
      {"GlobalAveragePool", {8, "the gradient broadcasts dY back with Expand (opset 8)"}},
      {"GlobalMaxPool", {11, "the gradient finds the maxima with Equal on floats (opset 11)"}},
      {"Pow", {7, "Pow-1 broadcasts with the legacy broadcast attribute"}},
  };
  return ops;
}

bool TakesFloat(const exec::KernelDef& def) {
  if (def.dtypes.empty()) return true;
  return std::any_of(def.dtypes.begin(), def.dtypes.end(), [](DType t) {
    return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
  });
}

TEST(GradientCoverage, EveryFloatCpuKernelHasABuilderOrAReason) {
  // Opsets 1-5 (2017 and older; before the legacy consumed_inputs attribute went away) are not trained: the autodiff
  // names the op and opset it has no builder for. PyTorch exports start at opset 7.
  constexpr int64_t kOldestOpset = 6;
  constexpr int64_t kNewestOpset = 23;
  const ops::GradientRegistry& grads = ops::GradientRegistry::Global();
  std::set<std::string> missing;
  int checked = 0;
  for (const exec::KernelDef& def : exec::KernelRegistry::Global().defs()) {
    if (def.device != exec::Device::kCpu || !def.domain.empty() || !TakesFloat(def)) continue;
    if (NotDifferentiable().count(def.op_type)) continue;
    const int64_t last = std::min(def.end_version, kNewestOpset);
    const auto floor = LaterFloors().find(def.op_type);
    const int64_t first =
        std::max(def.since_version, floor == LaterFloors().end() ? kOldestOpset : floor->second.first);
    for (int64_t opset = first; opset <= last; ++opset) {
      ++checked;
      if (!grads.Find(def.op_type, "", opset).ok()) missing.insert(def.op_type + "-" + std::to_string(opset));
    }
  }
  EXPECT_GT(checked, 500);
  std::string list;
  for (const std::string& m : missing) list += " " + m;
  EXPECT_TRUE(missing.empty()) << "CPU kernels without a gradient builder (add one, or list the op in "
                                  "NotDifferentiable with the reason):"
                               << list;
}

// The list names only ops the runtime has, so it cannot hide a typo.
TEST(GradientCoverage, TheNotDifferentiableListNamesRealOps) {
  std::set<std::string> cpu_ops;
  for (const exec::KernelDef& def : exec::KernelRegistry::Global().defs()) {
    if (def.device == exec::Device::kCpu && def.domain.empty()) cpu_ops.insert(def.op_type);
  }
  for (const auto& [op, reason] : NotDifferentiable()) {
    EXPECT_TRUE(cpu_ops.count(op)) << op << " (" << reason << ") has no CPU kernel";
    EXPECT_FALSE(ops::GradientRegistry::Global().Find(op, "", 18).ok()) << op << " has a builder: remove it here";
  }
}

}  // namespace
}  // namespace onnxamp::trainer
