// Kernels and their registry: what an op implementation looks like to the executor.
//
// An op folder (runtime/ops/<op>/) registers one KernelDef per (op, domain, opset range, device) with the
// element types it accepts. When a session is created, each node's KernelDef is looked up and its factory
// builds an OpKernel: attributes are parsed and checked there, once, so that a bad model is refused before
// anything runs. Compute() then runs for every Session::Run.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/model.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::exec {

enum class Device { kCpu, kCuda };
const char* DeviceName(Device d);

// Which implementation the CPU linalg kernels (MatMul, Gemm, Conv, ConvTranspose, Einsum, pooling) use; see
// runtime/ops/common/gemm.h.
enum class LinalgImpl {
  kReference,  // plain loops: the ground truth, slow
  kPortable,   // blocked C++ (im2col + GemmPortable for convolutions)
  kOneDnn,     // oneDNN primitives; kPortable when onnxamp is built without oneDNN
};

// The session's choices that kernels read when they are created (SessionOptions::kernels). Kernels get them through
// KernelInfo, never from the environment or process-wide settings, so two sessions in one process may differ.
struct KernelOptions {
  LinalgImpl linalg = LinalgImpl::kOneDnn;
  // CUDA: fp32 GEMMs and convolutions may use TF32 tensor cores (off: true fp32, as the CPU reference computes).
  bool cuda_tf32 = false;
  // CUDA: convolutions always take the direct kernels instead of cuDNN (a reference path for tests).
  bool cuda_conv_direct = false;
};

struct SessionOptions;  // runtime/executor/session.h

// What a kernel factory sees: the node, the opset version its domain is imported at, the device, and the
// session's kernel options. Sessions also pass the model (its opset imports) and their options, which the kernels
// of ops with subgraphs (If, Loop, Scan) build sessions of their own with; other kernels ignore them.
struct KernelInfo {
  const ir::Node& node;
  int64_t opset;
  Device device;
  KernelOptions options = {};
  const ir::Model* model = nullptr;
  const SessionOptions* session = nullptr;
};

// The values of `node`'s graph that its subgraphs read from outer scope, in name order. The executor passes them to
// the node's kernel after its declared inputs: input node.inputs().size() + k is the value of SubgraphReads()[k].
std::vector<const ir::Value*> SubgraphReads(const ir::Node& node);

// The name the executor seeds `node`'s random numbers from: its seed_from attribute (a backward op, a recomputed
// copy, a backward If, seeded as the forward node they stand for), else its first output's name, else its own.
std::string SeedName(const ir::Node& node);

// Error messages from factories and kernels say what is wrong ("axis 3 is out of range for rank 2"); the
// executor prefixes them with the node ("node Softmax 'sm': ").

class KernelContext;
class DeviceContext;  // runtime/executor/device_context.h
struct NodeTime;      // runtime/executor/session.h

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual Status Compute(KernelContext& ctx) const = 0;
};

using KernelFactory = StatusOr<std::unique_ptr<OpKernel>> (*)(const KernelInfo& info);

struct KernelDef {
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  int64_t since_version = 1;
  int64_t end_version = std::numeric_limits<int64_t>::max();  // inclusive
  Device device = Device::kCpu;
  // Element types accepted for input `dtype_input` (the op's main type constraint); empty accepts any.
  std::vector<DType> dtypes;
  int dtype_input = 0;
  KernelFactory factory = nullptr;
  // Device kernels only: inputs the kernel reads on the host (shapes, axes, sizes, repeats, K...). The executor
  // hands these over in host memory (copying from the device when a device kernel produced them) and every other
  // input in device memory. (The `= {}` lets brace-initialised defs omit it without a missing-initializer warning.)
  std::vector<int> host_inputs = {};
  // Device kernels only: the kernel's outputs are host tensors (Shape and Size, which read no data).
  bool outputs_on_host = false;
};

// Builds a KernelFactory for a kernel class constructible as `K(const KernelInfo&, Status*)`: the constructor
// reports attribute errors through the Status.
template <typename K>
StatusOr<std::unique_ptr<OpKernel>> MakeKernel(const KernelInfo& info) {
  Status st;
  auto k = std::make_unique<K>(info, &st);
  if (!st.ok()) return st;
  return std::unique_ptr<OpKernel>(std::move(k));
}

class KernelRegistry {
 public:
  // The registry of all CPU kernels (built once, from runtime/ops/cpu_kernels.cc).
  static const KernelRegistry& Global();

  void Register(KernelDef def);

  // The kernel for `op` of `domain` at `opset` on `device`; NotFound naming what exists otherwise.
  StatusOr<const KernelDef*> Find(std::string_view op, std::string_view domain, int64_t opset, Device device) const;

  const std::vector<KernelDef>& defs() const { return defs_; }

 private:
  std::vector<KernelDef> defs_;
};

// The executor's side of a kernel call: inputs, output allocation, threads.
class KernelContext {
 public:
  // Where outputs go; implemented by the executor (static memory plan or heap).
  class Sink {
   public:
    virtual ~Sink() = default;
    virtual bool requested(size_t i) const = 0;
    virtual StatusOr<ir::Tensor*> Allocate(size_t i, DType dtype, std::vector<int64_t> dims) = 0;
    virtual Status Set(size_t i, ir::Tensor t) = 0;
  };

  // `inputs` is read in place: the caller keeps it alive and unchanged while the context is used (the executor
  // reuses one vector for every step of a run).
  KernelContext(const ir::Node& node, int64_t opset, std::span<const ir::Tensor* const> inputs, size_t num_outputs,
                ThreadPool& threads, uint64_t seed, Sink& sink, DeviceContext* device = nullptr)
      : node_(&node),
        opset_(opset),
        inputs_(inputs),
        num_outputs_(num_outputs),
        threads_(&threads),
        seed_(seed),
        sink_(&sink),
        device_(device) {}

  const ir::Node& node() const { return *node_; }
  int64_t opset() const { return opset_; }

  size_t num_inputs() const { return inputs_.size(); }
  // Input i, or null when it is omitted (optional inputs) or i is past the end.
  const ir::Tensor* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  size_t num_outputs() const { return num_outputs_; }
  // False for an omitted optional output: the kernel may skip computing it.
  bool output_requested(size_t i) const;

  // Allocates output i (contents uninitialised). Fails with ResourceExhausted when the size is absurd.
  StatusOr<ir::Tensor*> AllocateOutput(size_t i, DType dtype, std::vector<int64_t> dims);
  // Sets output i to a tensor the kernel built itself (Constant, Shape, and other small results).
  Status SetOutput(size_t i, ir::Tensor t);

  ThreadPool& threads() const { return *threads_; }
  // A seed for ops with randomness (Dropout): a function of the session's seed, the node and the run's
  // RunOptions::rng_step, so that runs are reproducible and steps of a training loop draw different numbers.
  uint64_t seed() const { return seed_; }
  // The run's RunOptions::rng_step (already mixed into seed(); kernels with a seed attribute mix it in themselves).
  uint64_t rng_step() const { return rng_step_; }
  void set_rng_step(uint64_t step) { rng_step_ = step; }
  // The session's device context when this kernel is a device kernel (null for CPU kernels). AllocateOutput then
  // allocates device memory, and inputs other than the KernelDef's host_inputs are device tensors.
  DeviceContext* device_context() const { return device_; }
  // In a profiled run (RunOptions::profile): where a kernel that runs subgraphs (If, Loop, Scan) adds the times of
  // their nodes, `within` relative to this node (empty for a body's own nodes). Null when the run is not profiled.
  std::vector<NodeTime>* subgraph_profile() const { return subgraph_profile_; }
  void set_subgraph_profile(std::vector<NodeTime>* profile) { subgraph_profile_ = profile; }

 private:
  const ir::Node* node_;
  int64_t opset_;
  std::span<const ir::Tensor* const> inputs_;
  size_t num_outputs_;
  ThreadPool* threads_;
  uint64_t seed_;
  uint64_t rng_step_ = 0;
  Sink* sink_;
  DeviceContext* device_;
  std::vector<NodeTime>* subgraph_profile_ = nullptr;
};

// Runs `kernel` (a CPU kernel of `node` at `opset`) on host `inputs` and returns its outputs in host tensors, one
// per output of `outer` (an output it did not produce is an empty Tensor). The thread pool, the seed and which
// outputs are requested are those of `outer`: the context of a kernel that delegates its work to another one.
StatusOr<std::vector<ir::Tensor>> RunOnHost(const OpKernel& kernel, const ir::Node& node, int64_t opset,
                                            std::vector<const ir::Tensor*> inputs, const KernelContext& outer);

}  // namespace onnxamp::exec
