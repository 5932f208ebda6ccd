// Seeded sample order for training: splitmix64 + Fisher–Yates (the same order on every machine and compiler), and a
// sampler that cuts each epoch's order into batches and remembers where it is with a plain, serialisable cursor.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "runtime/common/random.h"
#include "runtime/common/status.h"

namespace onnxamp::trainer {

// splitmix64: the n-th number (1-based) from seed s is SplitMix64Mix(s + n * kSplitMixGamma).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    state_ += kSplitMixGamma;
    return SplitMix64Mix(state_);
  }

 private:
  uint64_t state_;
};

// A uniformly distributed integer in [0, bound) (bound > 0), without bias: Lemire's multiply-shift with rejection
// ("Fast Random Integer Generation in an Interval", 2019). Consumes one or (rarely) more numbers from `rng`.
uint64_t UniformBelow(SplitMix64& rng, uint64_t bound);

// A permutation of 0..n-1: Fisher–Yates from the back (for i = n-1 down to 1, swap a[i] with a[UniformBelow(i+1)])
// driven by SplitMix64(seed), starting from the identity.
std::vector<int64_t> ShuffledIndices(int64_t n, uint64_t seed);

// The shuffle seed of one epoch: SplitMix64Mix(seed ^ SplitMix64Mix((epoch + 1) * kSplitMixGamma)).
uint64_t EpochSeed(uint64_t seed, uint64_t epoch);

// What happens to the last batch of an epoch when the batch size does not divide the number of samples.
enum class LastBatch {
  kPartial,  // a smaller last batch (the default)
  kDrop,     // left out: every batch is full, the tail of each epoch's order is not seen that epoch
  kPad,      // filled up with the first samples of the same epoch's order (wrapping again if needed)
};

// "partial", "drop", "pad".
std::string_view LastBatchName(LastBatch policy);
std::optional<LastBatch> LastBatchFromName(std::string_view name);

// Where a sampler is: the epoch, and how many samples of that epoch's order were already handed out. A plain value,
// saved in checkpoints so that a resumed run sees the same batches it would have seen.
struct BatchCursor {
  uint64_t epoch = 0;
  int64_t position = 0;
  bool operator==(const BatchCursor&) const = default;
};

struct SamplerOptions {
  int64_t batch_size = 1;
  uint64_t seed = 0;
  bool shuffle = true;  // false: every epoch in file order (validation)
  LastBatch last_batch = LastBatch::kPartial;
};

// One batch: sample indices into the dataset, and where it sits.
struct Batch {
  std::vector<int64_t> indices;
  uint64_t epoch = 0;
  int64_t index_in_epoch = 0;  // 0-based batch number within its epoch
  bool ends_epoch = false;     // the epoch's last batch: the cursor now points at the next epoch
};

// Cuts each epoch's order (ShuffledIndices(n, EpochSeed(seed, epoch)), or 0..n-1 without shuffling) into batches.
// Runs across epochs without end: for `--steps N` call Next() N times; for `--epochs E` call it while
// cursor().epoch < E.
class Sampler {
 public:
  // Fails when num_samples or batch_size is not positive, or when kDrop leaves no batch (batch_size > num_samples).
  static StatusOr<Sampler> Create(int64_t num_samples, const SamplerOptions& options);

  // The next batch; advances the cursor (to the next epoch after the epoch's last batch).
  Batch Next();

  // Batches in each epoch: ceil(n / b), or floor(n / b) when dropping.
  int64_t BatchesPerEpoch() const;
  int64_t num_samples() const { return num_samples_; }
  const SamplerOptions& options() const { return options_; }

  const BatchCursor& cursor() const { return cursor_; }
  // Moves to a saved cursor; fails when its position is not the start of a batch of this sampler.
  Status Seek(const BatchCursor& cursor);

  // The sample order of `epoch` (the permutation the batches are cut from).
  std::vector<int64_t> EpochOrder(uint64_t epoch) const;

 private:
  Sampler(int64_t num_samples, const SamplerOptions& options) : num_samples_(num_samples), options_(options) {}
  const std::vector<int64_t>& CachedOrder(uint64_t epoch);

  int64_t num_samples_ = 0;
  SamplerOptions options_;
  BatchCursor cursor_;
  std::optional<uint64_t> order_epoch_;  // the epoch order_ belongs to
  std::vector<int64_t> order_;
};

}  // namespace onnxamp::trainer
