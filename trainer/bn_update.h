// Recomputing BatchNormalization's running statistics for a model's weights with one pass over the training data, as
// torch.optim.swa_utils.update_bn does for the averaged weights of stochastic weight averaging: the statistics reset,
// the model run in training mode over every batch in order, each node's running statistics the cumulative average of
// the batches' means and unbiased variances (momentum None: batch n weighs 1 / n).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/session.h"
#include "runtime/ir/model.h"
#include "runtime/ir/tensor.h"
#include "trainer/data/dataset.h"

namespace onnxamp::trainer {

struct BnUpdateOptions {
  int64_t batch_size = 32;  // samples per forward pass (the last batch may be smaller, as a DataLoader's)
  bool drop_last = false;   // skip a last batch smaller than batch_size (DataLoader's drop_last; --last-batch drop)
  exec::SessionOptions session;  // where the passes run (device, threads)
};

// The running statistics of every BatchNormalization of `model` (inference, its weights as initializers) recomputed
// over `data` (bound to the model's inputs; labels unused), FP32, named after the statistics' initializers. Errors: no
// BatchNormalization statistics, no data, a batch whose channels hold a single value (no unbiased variance).
StatusOr<std::vector<ir::Tensor>> RecomputeBatchNormStatistics(const ir::Model& model, const Dataset& data,
                                                               const BnUpdateOptions& options);

}  // namespace onnxamp::trainer
