// A subgraph of a node (an If branch, a Loop or Scan body) run as a session of its own: the kernels of If, Loop and
// Scan build one per graph attribute when they are created, so that an unsupported op or a bad attribute inside a
// body is reported by Session::Create, before anything runs.
//
// The session's graph is a copy of the body whose outer-scope reads are inputs after the body's own: a run binds the
// body's formal inputs (given by the kernel) and the enclosing values it reads (the kernel's implicit inputs, see
// exec::SubgraphReads). The session runs on the CPU, on the thread pool of the run that calls it, with the options of
// the enclosing session (graph optimization, training mode, memory limit, linalg implementation); its static memory
// plans make the iterations of a loop with unchanging shapes allocate nothing for the body's intermediate values.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/executor/session.h"

namespace onnxamp::ops {

class SubgraphSession {
 public:
  // The session of graph attribute `attribute` of info.node. The body's formal inputs keep their element types and
  // lose their shapes (the kernel checks what it binds: loop-carried values may change shape between iterations).
  static StatusOr<std::unique_ptr<SubgraphSession>> Create(const exec::KernelInfo& info, std::string_view attribute);

  const std::string& attribute() const { return attribute_; }
  size_t num_inputs() const { return formal_names_.size(); }
  size_t num_outputs() const { return output_types_.size(); }
  // The element type the body declares for output i (kUndefined when it declares none).
  DType output_type(size_t i) const { return output_types_[i]; }
  // The dims the body declares for output i (a dim it leaves unknown as 0); null when it declares no shape.
  const std::vector<int64_t>* output_dims(size_t i) const;

  // The enclosing session's memory limit (SessionOptions::memory_limit_bytes, else the machine's memory). A loop's
  // scan outputs, which it holds until the last iteration and then stacks (a second copy), must fit in half of it.
  uint64_t memory_limit() const { return memory_limit_; }

  // Runs the body with `formal` (one tensor per formal input, in order) and the enclosing values from `ctx`. The
  // outputs are the body's, in order. `rng_step` seeds the body's random ops (a loop passes one per iteration).
  StatusOr<std::vector<ir::Tensor>> Run(const exec::KernelContext& ctx, std::vector<ir::Tensor> formal,
                                        uint64_t rng_step) const;

 private:
  std::string attribute_;
  std::unique_ptr<exec::Session> session_;
  std::vector<std::string> formal_names_;
  // The enclosing values the body reads: their names and their index among the kernel's inputs.
  std::vector<std::pair<std::string, size_t>> outer_;
  std::vector<DType> output_types_;
  std::vector<std::optional<std::vector<int64_t>>> output_dims_;
  uint64_t memory_limit_ = 0;
  // Session::Run is not reentrant; a kernel's Compute may be called from two runs of one session at once.
  mutable std::mutex mu_;
};

// The rng_step a loop's body runs iteration `iteration` (0-based) with: the node's seed mixed with the iteration, so
// that every iteration's random ops draw their own numbers, reproducibly.
inline uint64_t IterationSeed(const exec::KernelContext& ctx, int64_t iteration) {
  return ctx.seed() ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(iteration + 1));
}

// Reads a bool tensor of one element (If's cond, Loop's cond); `label` names it in errors.
StatusOr<bool> ReadCondition(const ir::Tensor& t, std::string_view label);

// Checks output `i` of `body` against the type the node declares for output `node_output` (when both are known): a
// branch or body output of the wrong element type is an error naming both.
Status CheckOutputType(const exec::KernelContext& ctx, size_t node_output, const ir::Tensor& t, std::string_view what);

// ResourceExhausted when `held` bytes of scan-output slices (after `iteration`) exceed half of body's memory limit.
Status CheckHeldBytes(uint64_t held, const SubgraphSession& body, int64_t iteration);

// Sets output `i` to `slices` (one per iteration, of equal type and dims) stacked along the new axis `axis`
// (normalised, in [0, rank of a slice]): slice k at position k, or L-1-k when `reverse`. With no slices the output
// has `empty_dtype` (else the node's declared type) and dims `empty_dims` with 0 inserted at `axis` (else the node
// output's declared dims with 0 at `axis` and 0 for each unknown dim; else [0]).
// `what` names the output in errors.
Status SetStackedOutput(exec::KernelContext& ctx, size_t i, const std::vector<ir::Tensor>& slices, int64_t axis,
                        bool reverse, DType empty_dtype, const std::vector<int64_t>* empty_dims, std::string_view what);

// Writes `slices` (non-empty, of equal type and dims) stacked along the new axis `axis` into `y`, allocated with those
// dims and the slice count inserted at `axis` (for axis 0, a y with more entries there takes them in its first ones).
// `op` names the op in errors.
Status CopyStacked(const std::vector<ir::Tensor>& slices, int64_t axis, bool reverse, ir::Tensor& y,
                   std::string_view op);

// Position `index` of `x` along `axis` (normalised), with that axis removed.
StatusOr<ir::Tensor> SliceAlong(const ir::Tensor& x, int64_t axis, int64_t index);

}  // namespace onnxamp::ops
