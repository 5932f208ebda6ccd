// Which ops a CUDA session runs on the CPU: every op of the CPU kernel registry has a CUDA kernel at every opset the
// CPU kernel covers, or is listed below with the reason it stays on the CPU; an op that gains a CUDA kernel must leave
// the list. The check reads the kernel registries only, so it needs no GPU and runs in every build with the CUDA
// backend (unlike the rest of onnxamp_cuda_test, it does not skip without a device).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "runtime/cuda/cuda_context.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::cuda {
namespace {

std::string Name(const std::string& domain, const std::string& op) { return domain.empty() ? op : domain + "." + op; }

// The ops without a CUDA kernel, and why.
const std::map<std::string, std::string>& CpuOnlyOps() {
  static const std::map<std::string, std::string> ops = {
      // Control flow: the kernels run their bodies as nested sessions of the CPU executor.
      {"If", "control flow: the branches run as nested CPU sessions"},
      {"Loop", "control flow: the body runs as a nested CPU session"},
      {"Scan", "control flow: the body runs as a nested CPU session"},
      // Outputs whose shape depends on the data: the host must read the data to size them.
      {"Compress", "output size depends on the condition's values"},
      {"NonZero", "output size depends on the data"},
      {"Unique", "output size depends on the data"},
      {"NonMaxSuppression", "output size depends on the data"},
      // String tensors live on the host.
      {"StringNormalizer", "string tensors live on the host"},
      {"TfIdfVectorizer", "n-gram counting of a text pipeline (string or integer tokens), a host-side step"},
      // ONNX's own training ops: `onnxamp train` runs its fused optimizers instead (trainer/cuda/fused_optimizer.h).
      {"ai.onnx.preview.training.Adagrad", "an ONNX training op; the CUDA trainer has its fused optimizer step"},
      {"ai.onnx.preview.training.Momentum", "an ONNX training op; the CUDA trainer has its fused optimizer step"},
      {"ai.onnx.preview.training.Adam", "an ONNX training op; the CUDA trainer has its fused optimizer step"},
      // Not written yet: its errors for NaN rows would need a synchronisation on the device.
      {"Multinomial", "not written yet (per-row cumulative sums and a search)"},
      // Constant generators of audio front-ends.
      {"HannWindow", "a constant generator (folded or run once)"},
      {"HammingWindow", "a constant generator (folded or run once)"},
      {"BlackmanWindow", "a constant generator (folded or run once)"},
      {"MelWeightMatrix", "a constant generator (folded or run once)"},
      // The CPU's blocked (oneDNN) layout ops: CUDA sessions use their own channels-last layout instead.
      {"com.onnxamp.BlockedConv", "the CPU's blocked layout (CUDA sessions use channels-last)"},
      {"com.onnxamp.BlockedMaxPool", "the CPU's blocked layout"},
      {"com.onnxamp.BlockedAveragePool", "the CPU's blocked layout"},
      {"com.onnxamp.BlockedGlobalAveragePool", "the CPU's blocked layout"},
  };
  return ops;
}

TEST(CudaKernelCoverage, EveryCpuOpHasACudaKernelOrAReason) {
  const exec::KernelRegistry& cpu = exec::KernelRegistry::Global();
  const exec::KernelRegistry& cuda = CudaKernelRegistry();
  std::set<std::string> missing, covered_but_listed, seen;
  for (const exec::KernelDef& def : cpu.defs()) {
    if (def.device != exec::Device::kCpu) continue;
    const std::string name = Name(def.domain, def.op_type);
    seen.insert(name);
    const bool listed = CpuOnlyOps().count(name) > 0;
    bool any = false;
    for (int64_t opset : {def.since_version, def.end_version}) {
      const bool found = cuda.Find(def.op_type, def.domain, opset, exec::Device::kCuda).ok();
      any = any || found;
      if (!found && !listed) missing.insert(name + " at opset " + std::to_string(opset));
    }
    if (any && listed) covered_but_listed.insert(name);
  }
  for (const std::string& s : missing) ADD_FAILURE() << "no CUDA kernel and no reason listed: " << s;
  for (const std::string& s : covered_but_listed)
    ADD_FAILURE() << "has a CUDA kernel now, remove it from the list: " << s;
  for (const auto& [name, reason] : CpuOnlyOps()) {
    EXPECT_TRUE(seen.count(name)) << name << " is listed but the CPU has no kernel for it";
  }
}

}  // namespace
}  // namespace onnxamp::cuda
