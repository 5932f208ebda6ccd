// TfIdfVectorizer (CPU, opsets 9-25): X, int32/int64 tokens or strings, [C] or [B, C] -> Y, float [N] or [B, N] with
// N = max(ngram_indexes) + 1: how often each n-gram of the pool occurs in each row, weighted by `mode`.
//
// The pool (pool_int64s or pool_strings) lists the n-grams by size: ngram_counts[n - 1] is where the n-grams of n
// items start, each n consecutive items; the j-th n-gram of the pool (counting every size) lands at output column
// ngram_indexes[j] (columns may repeat: their values add up). Only sizes in [min_gram_length, max_gram_length] are
// counted. An n-gram may skip up to max_skip_count items between its items: with skip distance d (1 ..
// max_skip_count + 1) the n-gram starting at i is X[i], X[i + d], ..., X[i + (n - 1) d]; unigrams are counted once,
// not once per distance. mode TF gives the counts, IDF weights[j] (1 without weights) where n-gram j's count is not
// 0, TFIDF weights[j] * count (the count without weights). weights[j] belongs to the pool's j-th n-gram, as the
// operator's definition says and ONNX Runtime reads it (ONNX's Python reference indexes them by output column, which
// differs when ngram_indexes is not the identity). An n-gram listed twice in the pool is refused, as ONNX Runtime
// refuses it. Counting the same n-grams as both, by a map of whole n-grams instead of a trie.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

enum class Weighting { kTf, kIdf, kTfIdf };

class TfIdfVectorizerCpu : public exec::OpKernel {
 public:
  TfIdfVectorizerCpu(const exec::KernelInfo& info, Status* st) { *st = Init(info.node); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "X"));
    const std::string label = InputLabel(ctx, 0, "X");
    const bool strings = x->dtype() == DType::kString;
    if (strings != strings_pool_ || (!strings && x->dtype() != DType::kInt32 && x->dtype() != DType::kInt64)) {
      return InvalidArgument(
          label, " is ", DTypeName(x->dtype()), ", expected ",
          strings_pool_ ? "string (the pool is pool_strings)" : "int32 or int64 (the pool is pool_int64s)");
    }
    if (x->rank() > 2 || (x->rank() == 2 && x->dims()[0] < 1)) {
      return InvalidArgument(label, " must be [C] or [B, C] with B >= 1, got ", ShapeToString(x->dims()));
    }
    const int64_t rows = x->rank() == 2 ? x->dims()[0] : 1;
    const int64_t cols = x->rank() == 0 ? 1 : x->dims().back();
    // The tokens as ids: int values as they are; strings as their index among the pool's strings, or -1.
    std::vector<int64_t> tokens(static_cast<size_t>(x->num_elements()));
    if (strings) {
      const std::vector<std::string>& in = x->strings();
      for (size_t k = 0; k < tokens.size(); ++k) {
        auto it = string_ids_.find(in[k]);
        tokens[k] = it == string_ids_.end() ? -1 : it->second;
      }
    } else if (x->dtype() == DType::kInt32) {
      auto v = x->values<int32_t>();
      std::copy(v.begin(), v.end(), tokens.begin());
    } else {
      auto v = x->values<int64_t>();
      std::copy(v.begin(), v.end(), tokens.begin());
    }
    const int64_t grams = static_cast<int64_t>(columns_.size());
    std::vector<int64_t> counts(static_cast<size_t>(rows * grams), 0);  // per row and pool n-gram
    std::vector<int64_t> gram;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t* row = tokens.data() + r * cols;
      int64_t* row_counts = counts.data() + r * grams;
      int64_t first_size = min_gram_;
      for (int64_t d = 1; d <= max_skip_ + 1 && first_size <= max_gram_; ++d) {
        for (int64_t start = 0; start + d * (first_size - 1) < cols; ++start) {
          gram.clear();
          for (int64_t n = 1; n <= max_gram_ && start + (n - 1) * d < cols; ++n) {
            gram.push_back(row[start + (n - 1) * d]);
            if (n < first_size) continue;
            auto it = pool_.find(gram);
            if (it != pool_.end()) ++row_counts[it->second];
          }
        }
        if (first_size == 1) first_size = 2;  // unigrams do not depend on the skip distance
      }
    }
    const std::vector<int64_t> dims =
        x->rank() == 2 ? std::vector<int64_t>{rows, out_size_} : std::vector<int64_t>{out_size_};
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kFloat32, dims));
    float* out = y->mutable_values<float>().data();
    std::fill(out, out + rows * out_size_, 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < grams; ++j) {
        const int64_t c = counts[static_cast<size_t>(r * grams + j)];
        if (c == 0) continue;
        const float w = weights_.empty() ? 1.0f : weights_[static_cast<size_t>(j)];
        float v = static_cast<float>(c);
        if (weighting_ == Weighting::kIdf) v = w;
        if (weighting_ == Weighting::kTfIdf && !weights_.empty()) v = w * static_cast<float>(c);
        out[r * out_size_ + columns_[static_cast<size_t>(j)]] += v;
      }
    }
    return Status::Ok();
  }

 private:
  Status Init(const ir::Node& node) {
    const std::string mode = node.GetString("mode", "");
    if (mode == "TF") {
      weighting_ = Weighting::kTf;
    } else if (mode == "IDF") {
      weighting_ = Weighting::kIdf;
    } else if (mode == "TFIDF") {
      weighting_ = Weighting::kTfIdf;
    } else {
      return InvalidArgument("attribute 'mode' is '", mode, "', expected TF, IDF or TFIDF");
    }
    min_gram_ = node.GetInt("min_gram_length", 0);
    max_gram_ = node.GetInt("max_gram_length", 0);
    max_skip_ = node.GetInt("max_skip_count", 0);
    if (min_gram_ < 1 || max_gram_ < min_gram_ || max_skip_ < 0) {
      return InvalidArgument("attributes min_gram_length ", min_gram_, ", max_gram_length ", max_gram_,
                             " and max_skip_count ", max_skip_, " must satisfy 1 <= min <= max and skip >= 0");
    }
    const ir::Attribute* ints = node.FindAttribute("pool_int64s");
    const ir::Attribute* strs = node.FindAttribute("pool_strings");
    if ((ints != nullptr) == (strs != nullptr)) {
      return InvalidArgument("exactly one of the attributes pool_int64s and pool_strings must be given");
    }
    strings_pool_ = strs != nullptr;
    std::vector<int64_t> items;
    if (strings_pool_) {
      for (const std::string& s : strs->strings) {
        auto [it, added] = string_ids_.emplace(s, static_cast<int64_t>(string_ids_.size()));
        items.push_back(it->second);
      }
    } else {
      items = ints->ints;
    }
    const std::vector<int64_t> starts = node.GetInts("ngram_counts");
    const std::vector<int64_t> indexes = node.GetInts("ngram_indexes");
    if (indexes.empty()) return InvalidArgument("attribute 'ngram_indexes' is required");
    size_t j = 0;  // the pool's n-gram number, across every size
    for (int64_t i : indexes) {
      if (i < 0) return InvalidArgument("attribute 'ngram_indexes' holds ", i, ", expected indexes >= 0");
    }
    out_size_ = *std::max_element(indexes.begin(), indexes.end()) + 1;
    const int64_t total = static_cast<int64_t>(items.size());
    for (size_t k = 0; k < starts.size(); ++k) {
      const int64_t n = static_cast<int64_t>(k) + 1;
      const int64_t begin = starts[k], end = k + 1 < starts.size() ? starts[k + 1] : total;
      if (begin < 0 || end < begin || end > total) {
        return InvalidArgument("attribute 'ngram_counts' ", ShapeToString(starts),
                               " must be non-decreasing starts within the pool of ", total, " items");
      }
      for (int64_t p = begin; p + n <= end; p += n, ++j) {
        if (j >= indexes.size()) {
          return InvalidArgument("attribute 'ngram_indexes' has ", indexes.size(),
                                 " entries, fewer than the pool's n-grams");
        }
        if (n < min_gram_ || n > max_gram_) continue;
        auto [it, added] =
            pool_.emplace(std::vector<int64_t>(items.begin() + p, items.begin() + p + n), static_cast<int64_t>(j));
        if (!added) {
          return InvalidArgument("the pool lists an n-gram of ", n, " items twice (n-grams ", it->second, " and ", j,
                                 ")");
        }
      }
    }
    columns_.assign(indexes.begin(), indexes.begin() + static_cast<std::ptrdiff_t>(j));
    weights_ = node.FindAttribute("weights") ? node.FindAttribute("weights")->floats : std::vector<float>{};
    if (!weights_.empty() && weights_.size() < j) {
      return InvalidArgument("attribute 'weights' has ", weights_.size(), " values, expected ", j,
                             " (one per n-gram of the pool)");
    }
    return Status::Ok();
  }

  Weighting weighting_ = Weighting::kTf;
  int64_t min_gram_ = 1, max_gram_ = 1, max_skip_ = 0, out_size_ = 0;
  bool strings_pool_ = false;
  std::unordered_map<std::string, int64_t> string_ids_;
  std::map<std::vector<int64_t>, int64_t> pool_;  // n-gram (token ids) -> its number j in the pool
  std::vector<int64_t> columns_;                  // the output column of pool n-gram j
  std::vector<float> weights_;
};

}  // namespace

void RegisterTfIdfVectorizerKernels(exec::KernelRegistry& r) {
  r.Register({"TfIdfVectorizer",
              "",
              9,
              25,
              exec::Device::kCpu,
              {DType::kString, DType::kInt32, DType::kInt64},
              0,
              &exec::MakeKernel<TfIdfVectorizerCpu>});
}

}  // namespace onnxamp::ops
