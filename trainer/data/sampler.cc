// Seeded shuffles (splitmix64, Lemire's bounded integers, Fisher–Yates) and the batch sampler.
#include "trainer/data/sampler.h"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <utility>

namespace onnxamp::trainer {
namespace {

// The full 128-bit product of two 64-bit numbers as (high, low), in portable C++.
std::pair<uint64_t, uint64_t> Mul64x64(uint64_t a, uint64_t b) {
  const uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32;
  const uint64_t b_lo = b & 0xffffffffu, b_hi = b >> 32;
  const uint64_t lo_lo = a_lo * b_lo;
  const uint64_t hi_lo = a_hi * b_lo;
  const uint64_t lo_hi = a_lo * b_hi;
  const uint64_t hi_hi = a_hi * b_hi;
  const uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffu) + lo_hi;
  const uint64_t high = hi_hi + (hi_lo >> 32) + (cross >> 32);
  const uint64_t low = (cross << 32) | (lo_lo & 0xffffffffu);
  return {high, low};
}

}  // namespace

uint64_t UniformBelow(SplitMix64& rng, uint64_t bound) {
  ONNXAMP_CHECK(bound > 0, "UniformBelow needs a positive bound");
  // x * bound / 2^64 maps [0, 2^64) onto [0, bound); the low word tells when x fell into one of the 2^64 mod bound
  // values that would make some results more likely than others, and those draws are rejected.
  auto [high, low] = Mul64x64(rng.Next(), bound);
  if (low < bound) {
    const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
    while (low < threshold) std::tie(high, low) = Mul64x64(rng.Next(), bound);
  }
  return high;
}

std::vector<int64_t> ShuffledIndices(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(order.begin(), order.end(), int64_t{0});
  SplitMix64 rng(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(UniformBelow(rng, static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

uint64_t EpochSeed(uint64_t seed, uint64_t epoch) {
  return SplitMix64Mix(seed ^ SplitMix64Mix((epoch + 1) * kSplitMixGamma));
}

std::string_view LastBatchName(LastBatch policy) {
  switch (policy) {
    case LastBatch::kPartial:
      return "partial";
    case LastBatch::kDrop:
      return "drop";
    case LastBatch::kPad:
      return "pad";
  }
  return "?";
}

std::optional<LastBatch> LastBatchFromName(std::string_view name) {
  for (LastBatch p : {LastBatch::kPartial, LastBatch::kDrop, LastBatch::kPad}) {
    if (LastBatchName(p) == name) return p;
  }
  return std::nullopt;
}

StatusOr<Sampler> Sampler::Create(int64_t num_samples, const SamplerOptions& options) {
  if (num_samples <= 0) return InvalidArgument("sampler: no samples to draw batches from");
  if (options.batch_size <= 0) return InvalidArgument("sampler: batch size ", options.batch_size, " is not positive");
  if (options.last_batch == LastBatch::kDrop && options.batch_size > num_samples) {
    return InvalidArgument("sampler: batch size ", options.batch_size, " is larger than the ", num_samples,
                           " samples, so the last-batch policy 'drop' leaves no batch");
  }
  return Sampler(num_samples, options);
}

int64_t Sampler::BatchesPerEpoch() const {
  const int64_t b = options_.batch_size;
  return options_.last_batch == LastBatch::kDrop ? num_samples_ / b : (num_samples_ + b - 1) / b;
}

std::vector<int64_t> Sampler::EpochOrder(uint64_t epoch) const {
  if (options_.shuffle) return ShuffledIndices(num_samples_, EpochSeed(options_.seed, epoch));
  std::vector<int64_t> order(static_cast<size_t>(num_samples_));
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

const std::vector<int64_t>& Sampler::CachedOrder(uint64_t epoch) {
  if (order_epoch_ != epoch) {
    order_ = EpochOrder(epoch);
    order_epoch_ = epoch;
  }
  return order_;
}

Batch Sampler::Next() {
  const std::vector<int64_t>& order = CachedOrder(cursor_.epoch);
  const int64_t b = options_.batch_size;
  const int64_t start = cursor_.position;
  const int64_t take = std::min(b, num_samples_ - start);
  Batch batch;
  batch.epoch = cursor_.epoch;
  batch.index_in_epoch = start / b;
  batch.indices.reserve(static_cast<size_t>(options_.last_batch == LastBatch::kPad ? b : take));
  batch.indices.assign(order.begin() + start, order.begin() + start + take);
  if (options_.last_batch == LastBatch::kPad) {
    for (int64_t k = 0; k < b - take; ++k) batch.indices.push_back(order[static_cast<size_t>(k % num_samples_)]);
  }
  cursor_.position = start + take;
  const int64_t left = num_samples_ - cursor_.position;
  if (left == 0 || (options_.last_batch == LastBatch::kDrop && left < b)) {
    batch.ends_epoch = true;
    ++cursor_.epoch;
    cursor_.position = 0;
  }
  return batch;
}

Status Sampler::Seek(const BatchCursor& cursor) {
  const int64_t b = options_.batch_size;
  if (cursor.position < 0 || cursor.position % b != 0 || cursor.position / b >= BatchesPerEpoch()) {
    return InvalidArgument("sampler: cursor position ", cursor.position, " is not the start of a batch (", num_samples_,
                           " samples, batch size ", b, ", last batch '", LastBatchName(options_.last_batch), "')");
  }
  cursor_ = cursor;
  return Status::Ok();
}

}  // namespace onnxamp::trainer
