#include "trainer/bn_update.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {

StatusOr<std::vector<ir::Tensor>> RecomputeBatchNormStatistics(const ir::Model& model, const Dataset& data,
                                                               const BnUpdateOptions& options) {
  if (options.batch_size < 1) return InvalidArgument("update_bn: the batch size must be >= 1");
  if (data.num_samples() < 1) return InvalidArgument("update_bn: no training data");
  ONNXAMP_ASSIGN_OR_RETURN(BatchStatisticsModel stats, MakeBatchStatisticsModel(model));
  const std::vector<std::string> names = stats.buffers;
  StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(std::move(stats.model), options.session);
  if (!session.ok()) return session.status().WithContext("update_bn");
  // torch: reset_running_stats() (mean 0, variance 1), then running = m * batch + (1 - m) * running with m = 1 / n for
  // the n-th batch, in double, stored in float32: the first batch's statistics, then the running mean of all.
  std::vector<ir::Tensor> running;
  int64_t batches = 0;
  for (int64_t begin = 0; begin < data.num_samples(); begin += options.batch_size) {
    const int64_t end = std::min(data.num_samples(), begin + options.batch_size);
    if (options.drop_last && end - begin < options.batch_size && begin > 0) break;
    std::vector<int64_t> rows;
    for (int64_t i = begin; i < end; ++i) rows.push_back(i);
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> batch, MakeBatch(data, rows));
    batch.resize(data.num_features());  // the model's inputs, not the labels
    StatusOr<std::vector<ir::Tensor>> out = (*session)->Run(batch);
    if (!out.ok()) return out.status().WithContext(StrCat("update_bn: the batch of samples ", begin, "-", end - 1));
    if (out->size() != names.size()) return Internal("update_bn: ", out->size(), " outputs for ", names.size());
    ++batches;
    const double m = 1.0 / static_cast<double>(batches);
    for (size_t k = 0; k < names.size(); ++k) {
      const ir::Tensor& b = (*out)[k];
      if (b.dtype() != DType::kFloat32) return Internal("update_bn: the statistic '", names[k], "' is not float32");
      if (running.size() <= k) {
        ir::Tensor r(DType::kFloat32, b.dims());
        r.set_name(names[k]);
        running.push_back(std::move(r));
      }
      if (running[k].dims() != b.dims()) return Internal("update_bn: the statistic '", names[k], "' changed shape");
      const auto src = b.values<float>();
      auto dst = running[k].mutable_values<float>();
      for (size_t i = 0; i < dst.size(); ++i) {
        dst[i] = static_cast<float>(m * src[i] + (1.0 - m) * static_cast<double>(batches == 1 ? 0.0f : dst[i]));
      }
    }
  }
  return running;
}

}  // namespace onnxamp::trainer
