// StepProfile: node times of the profiled training steps summed per node and per op type, and the table.
#include "trainer/step_profile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "runtime/executor/profile.h"

namespace onnxamp::trainer {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

const char* PassName(bool backward) { return backward ? "backward" : "forward"; }

// A node's key: its name, or Describe() for an unnamed one.
std::string KeyOf(const ir::Node* n) { return n->name().empty() ? n->Describe() : n->name(); }

// The same key from a Describe() string: the name of "Op 'name'", else the whole string (unnamed nodes).
std::string KeyOf(const std::string& description) {
  const size_t quote = description.find(" '");
  if (quote == std::string::npos || description.size() < quote + 3 || description.back() != '\'') return description;
  return description.substr(quote + 2, description.size() - quote - 3);
}

// The keys of the nodes of `g` and of the graphs inside them: a session moves loop-invariant body nodes in front of
// their loops (runtime/executor/hoist_loop_invariants.h), so a backward Loop's transposed weight runs in the main
// graph.
void AddKeys(const ir::Graph& g, std::unordered_set<std::string>* keys) {
  for (const ir::Node* n : g.nodes()) {
    keys->insert(KeyOf(n));
    for (const ir::Graph* sub : n->subgraphs()) AddKeys(*sub, keys);
  }
}

}  // namespace

StepProfile::StepProfile(const TrainingGraphs& graphs, int64_t warmup_steps) : warmup_(warmup_steps) {
  std::unordered_set<std::string> forward, train;
  if (graphs.eval.graph) AddKeys(*graphs.eval.graph, &forward);
  if (graphs.train.graph) AddKeys(*graphs.train.graph, &train);
  for (const std::string& key : train) {
    if (!forward.count(key)) backward_.insert(key);
  }
}

bool StepProfile::BeginStep() { return ++begun_ > warmup_; }

bool StepProfile::IsBackward(const std::string& op_type, const std::string& node) const {
  const std::string key = KeyOf(node);
  if (EndsWith(op_type, "Grad") || backward_.count(key)) return true;
  // A forward node that --recompute copied into the backward pass (trainer/graph/recompute.h): `name`_recompute or
  // `name`_recompute_K.
  const size_t copy = key.rfind("_recompute");
  if (copy != std::string::npos && copy > 0) {
    const std::string_view rest = std::string_view(key).substr(copy + 10);
    bool digits = rest.size() > 1 && rest[0] == '_';
    for (size_t i = 1; digits && i < rest.size(); ++i) digits = rest[i] >= '0' && rest[i] <= '9';
    if (rest.empty() || digits) return true;
  }
  // A session's fused node, named `name`_fused: the pass of the node named `name`.
  const std::string fused = "_fused";
  if (EndsWith(key, fused)) return backward_.count(key.substr(0, key.size() - fused.size())) > 0;
  return false;  // the model's nodes, the loss, and nodes a session made of forward nodes
}

void StepProfile::AddRun(const std::vector<exec::NodeTime>& nodes, double run_seconds) {
  run_seconds_ += run_seconds;
  subgraphs_.Add(nodes);
  for (const exec::NodeTime& t : nodes) {
    if (!t.within.empty()) continue;  // in its enclosing node's time; subgraphs_ has it
    auto [it, inserted] = index_.emplace(t.node, nodes_.size());
    if (inserted) nodes_.push_back({t.node, t.op_type, IsBackward(t.op_type, t.node), t.on_device, 0, 0});
    NodeTotal& total = nodes_[it->second];
    ++total.calls;
    total.seconds += t.seconds;
  }
}

void StepProfile::EndStep(double step_seconds) {
  ++steps_;
  step_seconds_ += step_seconds;
}

std::string StepProfile::Format(size_t top) const {
  if (steps_ == 0) {
    return StrCat("profile: no step profiled (the first ", warmup_, " step", warmup_ == 1 ? " warms" : "s warm",
                  " up; train longer)\n");
  }
  const double per = 1.0 / static_cast<double>(steps_);
  const double whole = step_seconds_;
  double forward = 0, backward = 0;
  bool any_device = false;
  for (const NodeTotal& n : nodes_) {
    (n.backward ? backward : forward) += n.seconds;
    any_device = any_device || n.on_device;
  }
  char line[512];
  std::string s = StrCat("profile: ", steps_, " step", steps_ == 1 ? "" : "s", " after ", warmup_, " warm-up step",
                         warmup_ == 1 ? "" : "s", ", ", exec::FormatMs(whole * per), " ms per step",
                         any_device ? " (node times are device time, measured with events)" : "", "\n");
  std::snprintf(line, sizeof line, "  %-44s %10s %9s %7s\n", "part of the step", "total ms", "ms/step", "share");
  s += line;
  // On the CPU the nodes run inside the train graph's runs, so the runs' remainder is the executor's own time.
  const double run_rest = any_device ? 0 : std::max(0.0, run_seconds_ - forward - backward);
  const double rest = std::max(
      0.0, whole - data_seconds_ - (any_device ? run_seconds_ : forward + backward + run_rest) - optimizer_seconds_);
  std::vector<std::pair<std::string, double>> parts = {
      {"data (batches)", data_seconds_}, {"forward nodes", forward}, {"backward nodes", backward}};
  if (any_device) {
    parts.push_back({"train graph runs (wall)", run_seconds_});
  } else {
    parts.push_back({"train graph runs outside nodes", run_rest});
  }
  parts.push_back({"optimizer step", optimizer_seconds_});
  parts.push_back({"rest of the step", rest});
  for (const auto& [name, seconds] : parts) {
    std::snprintf(line, sizeof line, "  %-44s %10s %9s %7s\n", name.c_str(), exec::FormatMs(seconds).c_str(),
                  exec::FormatMs(seconds * per).c_str(), exec::FormatShare(seconds, whole).c_str());
    s += line;
  }

  struct OpTotal {
    int64_t nodes = 0, calls = 0;
    double seconds = 0;
  };
  std::map<std::pair<std::string, bool>, OpTotal> by_op;
  for (const NodeTotal& n : nodes_) {
    OpTotal& t = by_op[{n.op_type, n.backward}];
    ++t.nodes;
    t.calls += n.calls;
    t.seconds += n.seconds;
  }
  std::vector<std::pair<std::pair<std::string, bool>, OpTotal>> ops(by_op.begin(), by_op.end());
  std::stable_sort(ops.begin(), ops.end(),
                   [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  std::snprintf(line, sizeof line, "  %-32s %-8s %6s %7s %10s %9s %7s\n", "op type", "pass", "nodes", "calls",
                "total ms", "ms/step", "share");
  s += line;
  for (const auto& [key, t] : ops) {
    std::snprintf(line, sizeof line, "  %-32s %-8s %6lld %7lld %10s %9s %7s\n", key.first.c_str(), PassName(key.second),
                  static_cast<long long>(t.nodes), static_cast<long long>(t.calls), exec::FormatMs(t.seconds).c_str(),
                  exec::FormatMs(t.seconds * per).c_str(), exec::FormatShare(t.seconds, whole).c_str());
    s += line;
  }

  std::vector<const NodeTotal*> slowest;
  for (const NodeTotal& n : nodes_) slowest.push_back(&n);
  std::stable_sort(slowest.begin(), slowest.end(),
                   [](const NodeTotal* a, const NodeTotal* b) { return a->seconds > b->seconds; });
  if (slowest.size() > top) slowest.resize(top);
  std::snprintf(line, sizeof line, "  %-48s %-8s %7s %10s %9s %7s\n", StrCat("top ", slowest.size(), " nodes").c_str(),
                "pass", "calls", "total ms", "ms/step", "share");
  s += line;
  for (const NodeTotal* n : slowest) {
    std::string name = n->node;
    if (n->on_device != any_device) name += n->on_device ? " (device)" : " (cpu)";
    std::snprintf(line, sizeof line, "  %-48s %-8s %7lld %10s %9s %7s\n", name.c_str(), PassName(n->backward),
                  static_cast<long long>(n->calls), exec::FormatMs(n->seconds).c_str(),
                  exec::FormatMs(n->seconds * per).c_str(), exec::FormatShare(n->seconds, whole).c_str());
    s += line;
  }
  s += subgraphs_.Format(steps_);
  return s;
}

}  // namespace onnxamp::trainer
