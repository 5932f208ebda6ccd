// Session: load a model once, bind inputs, run it, fetch outputs. The C++ API behind `onnxamp run`, the
// converter's auto mode and the trainer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/model.h"

namespace onnxamp::exec {

struct SessionOptions {
  Device device = Device::kCpu;
  int num_threads = 0;  // 0: one per hardware thread (CPU kernels, and CPU nodes of a device session)
  uint64_t seed = 0;    // for ops with randomness (Dropout in training mode)
  // Largest total a run may allocate; 0: the machine's physical memory.
  uint64_t memory_limit_bytes = 0;
  int device_index = 0;  // which CUDA device (Device::kCuda)
  // Device sessions: measure each run's device time with events (RunStats::device_seconds).
  bool time_device = false;
};

struct RunStats {
  double seconds = 0;
  uint64_t peak_bytes = 0;   // most memory held at once by intermediate values and outputs
  uint64_t arena_bytes = 0;  // size of the static plan's arena (0 on a run without a plan)
  bool planned = false;      // the run used a static memory plan made by an earlier run with these shapes
  int unplanned_values = 0;  // intermediate values allocated outside the plan (all of them on a first run)
  // Device sessions only.
  double device_seconds = 0;        // device time of the run (SessionOptions::time_device), else 0
  uint64_t device_peak_bytes = 0;   // most device memory held at once during the run (arena, values, scratch)
  uint64_t device_allocations = 0;  // calls into the device's allocator during the run (0 in steady state)
  uint64_t host_to_device_bytes = 0, device_to_host_bytes = 0;  // copies the run made (inputs, outputs, CPU nodes)
};

struct IoInfo {
  std::string name;
  ir::ValueType type;
  bool has_default = false;  // an initializer gives the value when the caller does not
};

// Which nodes of a device session run where (a CPU session has every node on the CPU and on_cpu empty).
struct Placement {
  Device device = Device::kCpu;
  int nodes = 0;
  // Nodes of a device session that run on the CPU: folded constants are not counted; shape computations kept on
  // the host and ops without a device kernel are.
  std::vector<std::string> on_cpu;  // node descriptions, "Shape 'a'"
};

class Session {
 public:
  // Verifies the model, orders it, and creates a kernel for every node. An unsupported op or opset, or an
  // attribute a kernel refuses, is reported here (naming the node, op and opset), before anything runs.
  static StatusOr<std::unique_ptr<Session>> Create(ir::Model model, const SessionOptions& options = {});
  ~Session();

  const ir::Model& model() const;
  const std::vector<IoInfo>& inputs() const;
  const std::vector<IoInfo>& outputs() const;
  // Where the nodes run: "cpu", or for a device session e.g. "cuda:0 NVIDIA H100 ... ; 2 of 45 nodes on the CPU
  // (Shape 'a', ...)".
  std::string DescribePlacement() const;
  const Placement& placement() const;

  // Runs the model. Inputs are matched to graph inputs by tensor name; a missing input, an unknown name, a
  // wrong dtype or rank, or a dim that contradicts the model (or another input's binding of the same
  // symbolic dim) is an error naming the input, what was expected and what was given. Returns the graph
  // outputs in order, each named after its graph output.
  StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>& inputs, RunStats* stats = nullptr);

 private:
  class Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace onnxamp::exec
