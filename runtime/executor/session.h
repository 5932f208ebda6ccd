// Session: load a model once, bind inputs, run it, fetch outputs. The C++ API behind `onnxamp run`, the
// converter's auto mode and the trainer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/model.h"

namespace onnxamp::exec {

// How much Session::Create rewrites its copy of the graph (runtime/executor/graph_optimizer.h).
enum class GraphOptimization {
  kNone,   // run the model as given
  kBasic,  // fold BatchNormalization into Conv, fuse Conv [+ Add] [+ Relu]
  kAll,    // also the layout passes (blocked on the CPU, channels-last on CUDA) that blocked_layout and
           // channels_last allow
};

// kTraining: values bound as graph inputs (a training graph's parameters) change between runs, so no pass folds or
// fuses a node that reads one as a weight, and the graph keeps the plain layout its backward nodes read.
enum class SessionMode { kInference, kTraining };

class ThreadPool;

struct SessionOptions {
  Device device = Device::kCpu;
  int num_threads = 0;  // 0: one per hardware thread (CPU kernels, and CPU nodes of a device session)
  uint64_t seed = 0;    // for ops with randomness (Dropout in training mode)
  // Largest total a run may allocate; 0: the machine's physical memory.
  uint64_t memory_limit_bytes = 0;
  int device_index = 0;  // which CUDA device (Device::kCuda)
  // Device sessions: measure each run's device time with events (RunStats::device_seconds).
  bool time_device = false;
  GraphOptimization graph_optimization = GraphOptimization::kAll;
  SessionMode mode = SessionMode::kInference;
  bool blocked_layout = true;  // kAll on the CPU: oneDNN's blocked channel layout between convolutions
  bool channels_last = true;   // kAll on CUDA: the channels-last layout for fp16/bf16 convolutions
  KernelOptions kernels = {};  // linalg implementation, CUDA TF32 and convolution algorithm
  // Most static memory plans kept at once (one per input-shape signature and fetch list); 0: no limit. The sessions
  // of loop bodies keep a few, since a loop-carried value that grows gives every iteration new shapes.
  size_t max_memory_plans = 0;
  // A last rewrite of the graph as the session will run it (after every optimization, the device backend's too),
  // before the session is built; an error fails Create. The trainer's activation recomputation
  // (trainer/graph/recompute.h) copies forward nodes here, as the fusions left them.
  std::function<Status(ir::Model&)> finalize_graph;
};

// What one Run does besides binding inputs. The defaults give what Run(inputs) always did: every output, copied to
// the host, the device synchronised.
struct RunOptions {
  // The graph outputs to compute and return, by name and in this order; empty: every graph output in graph order.
  // Only the nodes these outputs need run (a training graph's forward part serves evaluation this way).
  std::vector<std::string> fetch;
  // Device sessions: return each output where it was computed (a device tensor stays in device memory) instead of
  // copying it to the host.
  bool outputs_on_device = false;
  // Device sessions: wait for the device before returning. false needs outputs_on_device: Run then returns as soon as
  // the work is queued, and an error a kernel raises on the device surfaces at the next synchronising call (a Run
  // with synchronize, Session::Synchronize or Session::ToHost).
  bool synchronize = true;
  // Mixed into the seed of every op with randomness (Dropout in training mode): runs with different rng_step values
  // draw different masks, runs with the same value the same masks. A training loop passes its step number.
  uint64_t rng_step = 0;
  // Host runs: caller memory for the fetched outputs, one tensor per fetched output in fetch order (empty: none; a
  // tensor without data: none for that output). When the kernel that makes an output allocates it with the given
  // tensor's dtype and dims, it is computed straight into that tensor's memory, and the returned output shares it
  // (compare data() to tell); otherwise the output gets memory of its own as usual (a kernel that passes another
  // tensor through, other dims). The memory must not be read or written by anyone else during the run. The trainer
  // has gradients written into its gradient buffer this way. Ignored for outputs computed on a device.
  std::vector<ir::Tensor> output_into;
  // Host runs: the pool the CPU kernels run on instead of the session's own (SessionOptions::num_threads). The kernels
  // of If, Loop and Scan run their subgraphs' sessions on the pool of the run that calls them.
  ThreadPool* threads = nullptr;
  // Time every node into RunStats::nodes: host time for nodes on the CPU, the device's own time (events on the
  // stream around each node) for device nodes. Costs a little per node; off by default. The nodes of the subgraphs
  // that If, Loop and Scan run are timed too (every call: one entry per iteration), after the session's own nodes,
  // with NodeTime::within naming the nodes that enclose them.
  bool profile = false;
};

// One node's time in a profiled run (RunOptions::profile).
struct NodeTime {
  std::string node;  // Node::Describe(): "MatMul 'fc1'"
  std::string op_type;
  bool on_device = false;  // the time is device time measured with events
  double seconds = 0;
  // For a node of a subgraph: the nodes that enclose it, outermost first, joined by " > " ("Loop '/Loop' > If 'b'").
  // Empty for the session's own nodes, whose times include those of their subgraphs' nodes.
  std::string within;
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
  std::vector<NodeTime> nodes;  // per node that ran, in run order (RunOptions::profile), else empty
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
  // The same with RunOptions: the outputs named in `run.fetch` (in that order), where they were computed when
  // `run.outputs_on_device`, a per-run seed, per-node times. An unknown or repeated fetch name is an error.
  StatusOr<std::vector<ir::Tensor>> Run(const std::vector<ir::Tensor>& inputs, const RunOptions& run,
                                        RunStats* stats = nullptr);

  // Device sessions: a copy of host tensor `t` (name kept) in this session's device memory, to bind as an input on
  // many runs without a copy per run (the executor reads a device tensor in place). The copy is complete when this
  // returns. A device tensor is returned as it is; CPU sessions return `t` itself.
  StatusOr<ir::Tensor> ToDevice(const ir::Tensor& t);
  // A host copy of `t` (name kept), after waiting for the work queued before; host tensors are returned as they are.
  StatusOr<ir::Tensor> ToHost(const ir::Tensor& t);
  // Device sessions: waits for every run queued with RunOptions::synchronize = false and reports a device error one of
  // them raised. Nothing to do for a CPU session.
  Status Synchronize();
  // Device sessions: the session's device context (its stream and memory), for code that queues its own device work
  // in order with the session's runs (the trainer's optimizer step). Null for CPU sessions.
  DeviceContext* device_context() const;
  // The session's pool of CPU threads (SessionOptions::num_threads), for code that runs between its runs with the
  // same threads (the CPU trainer's optimizer step). Not for use while a run is in progress.
  ThreadPool& threads() const;

 private:
  class Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace onnxamp::exec
