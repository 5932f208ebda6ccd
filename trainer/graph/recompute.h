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
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/model.h"

namespace onnxamp::trainer {

inline constexpr int kRecomputeAuto = -1;

struct RecomputeOptions {
  // 0: off. kRecomputeAuto: the segments whose estimated peak of held activations is smallest (when that saves a
  // quarter at least). N >= 2: of the plans that save anything, the one with the number of segments closest to N
  // (`onnxamp train --recompute off|auto|N`).
  int segments = 0;
  // The size the estimates give the symbolic dims (the batch size of `onnxamp train`); only the choice of segments
  // depends on it.
  int64_t batch = 1;
};

struct RecomputeReport {
  int segments = 0;                      // segments of the forward pass (0: nothing recomputed)
  int nodes = 0;                         // forward nodes copied into the backward pass
  std::vector<std::string> checkpoints;  // the values kept at the boundaries, in forward order
  // Estimated activations the backward pass holds at its peak (forward values it reads, at RecomputeOptions::batch),
  // without and with the recomputation.
  uint64_t bytes_before = 0, bytes_after = 0;
  std::string why_not;  // why nothing was recomputed when it was asked for
};

// Rewrites the train graph `model` (the gradients built, BuildGradients' `forward_nodes` giving where its backward pass
// starts) as described above, and reports what it did. When no plan holds less than the graph as it is, the graph is
// left as it is and `why_not` says so. Fails only on an inconsistent graph (a forward node reading a backward value).
Status RecomputeSegments(ir::Model& model, int forward_nodes, const RecomputeOptions& options, RecomputeReport* report);

// "auto", "off" or an integer N >= 2 as RecomputeOptions::segments; an error naming the text otherwise.
StatusOr<int> ParseRecompute(const std::string& text);
std::string RecomputeName(int segments);  // "off", "auto" or N

}  // namespace onnxamp::trainer
