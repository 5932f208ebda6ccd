// Where the time of training steps goes (`onnxamp train --profile`): the train graph's nodes (forward or backward),
// summed per node and per op type, the batch preparation and the optimizer step, over the steps after a warm-up.
// The CPU trainer and the device trainers feed it the same way (RunStats::nodes of profiled runs: host time on the
// CPU, event-measured device time on a device), and one Format serves both.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/executor/profile.h"
#include "runtime/executor/session.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {

class StepProfile {
 public:
  // Per node of the train graph, summed over the profiled runs.
  struct NodeTotal {
    std::string node;  // Node::Describe(): "ConvGrad 'conv1_grad'"
    std::string op_type;
    bool backward = false;
    bool on_device = false;  // device time (CUDA events) rather than host time
    int64_t calls = 0;
    double seconds = 0;
  };

  // `graphs` tells backward nodes from forward ones: a node of the train graph that the evaluation graph does not
  // have (what the autodiff added: gradient ops and the values they stash) or a *Grad op is backward; the model's
  // own nodes and the loss are forward. The first `warmup_steps` steps are not profiled (plans, primitive caches).
  explicit StepProfile(const TrainingGraphs& graphs, int64_t warmup_steps = 1);

  // Called once at the start of every step: whether this step is to be profiled.
  bool BeginStep();
  // What a profiled step did: a run of the train graph (its RunStats::nodes and wall time; several per step with
  // gradient accumulation), the time spent making batches, and the optimizer step (gradient accumulation, unscaling
  // and the inf check, clipping, the update, the loss-scale update).
  void AddRun(const std::vector<exec::NodeTime>& nodes, double run_seconds);
  void AddData(double seconds) { data_seconds_ += seconds; }
  void AddOptimizer(double seconds) { optimizer_seconds_ += seconds; }
  // Ends a profiled step with its wall time.
  void EndStep(double step_seconds);

  // Whether a node of this op type and description counts as backward.
  bool IsBackward(const std::string& op_type, const std::string& node) const;

  int64_t steps() const { return steps_; }
  double step_seconds() const { return step_seconds_; }
  double run_seconds() const { return run_seconds_; }
  double data_seconds() const { return data_seconds_; }
  double optimizer_seconds() const { return optimizer_seconds_; }
  const std::vector<NodeTotal>& nodes() const { return nodes_; }  // in the order they first ran

  // The table: the step's parts (data, forward and backward nodes, the rest of the runs, optimizer, the rest), then
  // time per op type and pass, then the `top` nodes with the most time (calls, total ms, ms per step, share of the
  // profiled steps' time), then where the time of If, Loop and Scan nodes goes (their bodies' op types, each a share
  // of its enclosing node's time). A line saying so when no step was profiled.
  std::string Format(size_t top = 15) const;

 private:
  int64_t warmup_ = 1;
  int64_t begun_ = 0;  // steps begun
  int64_t steps_ = 0;  // steps profiled
  double step_seconds_ = 0, run_seconds_ = 0, data_seconds_ = 0, optimizer_seconds_ = 0;
  // The names (Describe() for unnamed ones) of the train graph's nodes that the evaluation graph does not have (a
  // training-mode rewrite keeps a node's name and changes its op: BatchNormalization -> BatchNormTraining stays
  // forward; a session's fusion names its node after the first node it absorbs, plus "_fused").
  std::unordered_set<std::string> backward_;
  std::vector<NodeTotal> nodes_;
  std::unordered_map<std::string, size_t> index_;  // Describe() -> nodes_ position
  exec::SubgraphProfile subgraphs_;                // the nodes of If, Loop and Scan bodies
};

}  // namespace onnxamp::trainer
