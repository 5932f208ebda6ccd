// The session's internals, shared by session.cc (building, binding, running) and session_device.cc (what only
// device sessions do: constant folding, placement, copies between host and device). Not a public header.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/executor/device_context.h"
#include "runtime/executor/session.h"

namespace onnxamp::exec::internal {

constexpr int kNever = std::numeric_limits<int>::max();
// Device arenas align values for the widest vector loads and library kernels.
constexpr uint64_t kDeviceAlignment = 256;

inline std::string DimsString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

struct Step {
  ir::Node* node = nullptr;
  const KernelDef* def = nullptr;
  std::unique_ptr<OpKernel> kernel;
  int64_t opset = 0;
  std::vector<int> inputs;   // slot per input, -1 for omitted
  std::vector<int> outputs;  // slot per output, -1 for omitted
  std::vector<int> release;  // slots whose last reader is this step
  // Device sessions only.
  bool on_device = false;                // the kernel is a device kernel
  std::vector<uint8_t> input_on_device;  // per input: wanted in device memory (device kernel, not a host input)
  std::vector<int> release_copies;       // graph-input slots whose last reader is this step: drop their copies
  uint64_t seed = 0;                     // the node's own seed (SessionOptions::seed and its first output's name)
};

// What Run computes for one fetch list: the output slots in fetch order and the steps they need.
struct FetchPlan {
  std::vector<int> output_slots;  // per fetched output
  std::vector<int> output_index;  // per fetched output: its index among the graph outputs
  std::vector<bool> needed;       // per step
  std::string key;                // part of the memory plans' key ("" for every output)
};

// Per-run record of what each slot needed, to build the plan for the next run with the same input shapes.
struct Recorded {
  uint64_t bytes = 0;
  int first_step = 0;
  bool recorded = false;  // the slot was allocated through the sink in this run
  bool from_heap = false;
  bool device = false;  // device memory
  // The slot whose host memory the value shares (a pass-through such as Reshape of a recorded value, following
  // chains to the value that owns the memory); -1 when it has its own.
  int alias_of = -1;
};

// Where the plan puts one value: its region of the arena, and a view of that region made with the plan. The view
// (the Buffer object a tensor needs) is lent to the value's tensor while the value is alive and taken back when it
// is released, so that a planned run allocates nothing for its intermediate values.
struct PlannedValue {
  bool planned = false;
  bool device = false;  // in the device arena
  uint64_t offset = 0;
  uint64_t bytes = 0;
  std::shared_ptr<ir::Buffer> view;  // null while lent out
  // A value that shares the region of slot `alias_of` (a pass-through), whose lifetime the plan extends over this
  // value's readers: its tensor keeps that view instead of a copy. -1 for every other value.
  int alias_of = -1;
};

struct Plan {
  std::vector<PlannedValue> values;  // per slot
  uint64_t arena_bytes = 0;
  std::shared_ptr<ir::Buffer> arena;
  uint64_t device_arena_bytes = 0;
  std::shared_ptr<ir::Buffer> device_arena;  // device sessions with device values
};

// What a device session's run did with the device, for RunStats.
struct DeviceRunCounters {
  uint64_t host_to_device_bytes = 0;
  uint64_t device_to_host_bytes = 0;
};

}  // namespace onnxamp::exec::internal

namespace onnxamp::exec {

using internal::DeviceRunCounters;
using internal::FetchPlan;
using internal::Plan;
using internal::PlannedValue;
using internal::Recorded;
using internal::Step;

class Session::Impl {
 public:
  ir::Model model;
  SessionOptions options;
  std::unique_ptr<ThreadPool> threads;
  std::vector<IoInfo> inputs, outputs;
  std::unordered_map<const ir::Value*, int> slot_of;
  std::vector<ir::Value*> slot_value;
  std::vector<Step> steps;
  std::vector<int> last_read;         // per slot: last step that reads it (kNever for graph outputs)
  std::vector<bool> is_output;        // per slot
  std::vector<int> input_slots;       // per graph input
  std::vector<int> input_index;       // per slot: its index among the graph inputs, -1 for other values
  std::vector<int> output_slots;      // per graph output
  std::vector<ir::Tensor> constants;  // per slot: initializer value (empty tensor when none)
  std::vector<bool> has_constant;
  std::map<std::string, Plan> plans;                          // by input-shape signature and fetch list
  std::map<std::vector<std::string>, FetchPlan> fetch_plans;  // by RunOptions::fetch
  uint64_t memory_limit = 0;
  Placement placement;
  // Device sessions only.
  DeviceBackend backend;
  std::unique_ptr<DeviceContext> device;
  std::vector<ir::Tensor> device_constants;  // per slot: the constant uploaded to the device (when a device kernel
                                             // reads it there)
  uint64_t device_limit = 0;                 // 0: no limit beyond what the device's allocator refuses
  // Host buffers that copies queued by runs without synchronize may still read; dropped at the next synchronisation.
  std::vector<std::shared_ptr<ir::Buffer>> in_flight;

  ~Impl();
  Status Build();
  // Device sessions: folds the nodes computable from constants into constants (`folded` per node index).
  Status FoldConstants(std::vector<bool>& folded);
  // Device sessions: chooses the device kernel for `node` when the backend has one that takes its types.
  StatusOr<bool> TryDeviceKernel(ir::Node* node, int64_t opset, Step& step);
  // Device sessions: moves shape computations to the host, sets each step's input locations, uploads constants.
  Status PlaceForDevice();
  Status BindInputs(const std::vector<ir::Tensor>& given, std::vector<ir::Tensor>& slots, std::vector<bool>& present,
                    std::string* signature);
  StatusOr<const FetchPlan*> PlanFetch(const std::vector<std::string>& fetch);
  StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>& given, const RunOptions& run, RunStats* stats);
  // Device sessions: waits for the device and drops `in_flight`.
  Status SynchronizeDevice();
  // Device sessions: a copy of `src` on the other side (host <-> device) into `dst`.
  Status CopyAcross(const ir::Tensor& src, bool to_device, ir::Tensor* dst, DeviceRunCounters& counters,
                    std::vector<std::shared_ptr<ir::Buffer>>& pinned);
  // Device sessions: builds the plan's device arena and its views.
  Status AllocateDeviceArena(Plan& plan);
};

}  // namespace onnxamp::exec
