// Activation recomputation (gradient checkpointing) for a train graph: the forward pass is cut into segments at
// values that alone carry it from one segment to the next; the backward pass keeps only those boundary values and,
// before it needs a segment's activations, runs that segment's forward nodes again from them. The activations held
// at once fall from every stashed value of the forward pass to the boundaries plus one segment's, for about one more
// forward pass of compute (the last segment, whose backward comes first, is not recomputed). What
// torch.utils.checkpoint does per module, chosen here from the graph.
//
// The copies compute what the originals computed, bit for bit: the same ops on the same inputs, a copied Dropout
// drawing its original's mask (attribute `seed_from`, runtime/executor/session.cc), a copied BatchNormTraining the same
// batch statistics (its running-statistic outputs are left unread: the original's update the buffers once). Nodes
// that draw random numbers otherwise (RandomNormal, Bernoulli, ...) are not copied; their outputs are kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/model.h"

namespace onnxamp::trainer {

inline constexpr int kRecomputeAuto = -1;
inline constexpr int kRecomputeCheap = -2;

struct RecomputeOptions {
  // 0: off. kRecomputeAuto: the segments whose estimated peak of held activations is smallest (when that saves a
  // quarter at least). N >= 2: of the plans that save anything, the one with the number of segments closest to N.
  // kRecomputeCheap: no segments; only the values that cheap ops (elementwise, normalisations) make from values the
  // backward pass keeps anyway, recomputed from those (Megatron's selective recomputation; a few percent of compute).
  // `onnxamp train --recompute off|auto|cheap|N`.
  int segments = 0;
  // The size the estimates give the symbolic dims (the batch size of `onnxamp train`); only the choice of segments
  // depends on it.
  int64_t batch = 1;
  // Dims of graph inputs by name, in place of their declared shapes (`onnxamp train`: each data input's, the batch
  // size then a sample's dims), so that a symbolic dim past the first (a sequence length) is sized too.
  std::unordered_map<std::string, std::vector<int64_t>> input_dims;
};

struct RecomputeReport {
  int segments = 0;                      // segments of the forward pass (0: none, nothing recomputed or cheap)
  int nodes = 0;                         // forward nodes copied into the backward pass (0: nothing recomputed)
  int values = 0;                        // cheap: the stashed values recomputed
  std::vector<std::string> checkpoints;  // the values kept at the boundaries, in forward order
  // Estimated activations the backward pass holds at its peak (forward values it reads, at RecomputeOptions::batch),
  // without and with the recomputation (cheap: those it keeps from the forward pass).
  uint64_t bytes_before = 0, bytes_after = 0;
  std::string why_not;  // why nothing was recomputed when it was asked for
};

// Estimated bytes of the values of `model`'s graph by name, the symbolic dim 0 at `batch`: partial shapes
// (InferShapes with its spatial rules) times the element size; a value whose dims the rules cannot tell gets its
// largest input's estimate; shapes and a parameter's low-precision Cast count nothing. `input_dims` as
// RecomputeOptions::input_dims.
using ValueSizes = std::unordered_map<std::string, uint64_t>;
ValueSizes EstimateValueSizes(const ir::Model& model, int64_t batch,
                              const std::unordered_map<std::string, std::vector<int64_t>>& input_dims = {});

// Rewrites the train graph `model` as described above (the forward pass: the nodes before the first one that reads
// `seed`, the loss-scale input every backward node descends from), and reports what it did. `sizes` (by value name)
// take precedence over the estimates it makes itself. When no plan holds less than the graph as it is, the graph is
// left as it is and `why_not` says so. Fails only on an inconsistent graph (no `seed`, a forward node reading a
// backward value).
Status RecomputeSegments(ir::Model& model, const std::string& seed, const RecomputeOptions& options,
                         RecomputeReport* report, const ValueSizes* sizes = nullptr);

// The training session's exec::SessionOptions::finalize_graph: RecomputeSegments on the graph as the session will run
// it, after its own rewrites, so that each copy is the node its original became (a product fused with its bias and
// activation, a fused convolution): which rewrites fire depends on how many nodes read a value, which the copies
// change. Sizes come from `train` (the train graph before those rewrites; EstimateValueSizes at options.batch).
// `report` must outlive the sessions made with the hook. Empty when options.segments is 0.
std::function<Status(ir::Model&)> RecomputeHook(const ir::Model& train, const std::string& seed,
                                                const RecomputeOptions& options, RecomputeReport* report);

// "off", "auto", "cheap" or an integer N >= 2 as RecomputeOptions::segments; an error naming the text otherwise.
StatusOr<int> ParseRecompute(const std::string& text);
std::string RecomputeName(int segments);  // "off", "auto", "cheap" or N

}  // namespace onnxamp::trainer
