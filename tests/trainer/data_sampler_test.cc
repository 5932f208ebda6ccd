// The sampler: splitmix64 reference values, pinned shuffles, unbiased bounded integers, last-batch policies, cursors.
#include "trainer/data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <set>
#include <vector>

namespace onnxamp::trainer {
namespace {

bool IsPermutation(std::vector<int64_t> v, int64_t n) {
  if (static_cast<int64_t>(v.size()) != n) return false;
  std::sort(v.begin(), v.end());
  for (int64_t i = 0; i < n; ++i) {
    if (v[static_cast<size_t>(i)] != i) return false;
  }
  return true;
}

Sampler MakeSampler(int64_t n, int64_t batch, LastBatch policy, uint64_t seed = 7, bool shuffle = true) {
  StatusOr<Sampler> s = Sampler::Create(n, SamplerOptions{batch, seed, shuffle, policy});
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

std::vector<size_t> EpochBatchSizes(Sampler& s) {
  std::vector<size_t> sizes;
  const uint64_t epoch = s.cursor().epoch;
  while (s.cursor().epoch == epoch) sizes.push_back(s.Next().indices.size());
  return sizes;
}

TEST(DataSampler, SplitMix64MatchesReference) {
  // The first outputs of splitmix64 seeded with 0 (Vigna's reference implementation).
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(rng.Next(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(rng.Next(), 0x06c45d188009454full);
}

TEST(DataSampler, ShuffleIsPinned) {
  // Pinned values, derived once with an independent Python transcription of the documented algorithm (docs/training.md
  // "Data"). A change here changes the sample order of every seeded run on every machine.
  EXPECT_EQ(ShuffledIndices(10, 42), (std::vector<int64_t>{8, 3, 6, 5, 4, 0, 9, 2, 1, 7}));
  Sampler s = MakeSampler(10, 10, LastBatch::kPartial, /*seed=*/1234);
  EXPECT_EQ(s.EpochOrder(0), (std::vector<int64_t>{3, 4, 0, 8, 7, 2, 6, 1, 5, 9}));
  EXPECT_EQ(s.EpochOrder(1), (std::vector<int64_t>{9, 1, 6, 4, 7, 5, 3, 0, 8, 2}));
  EXPECT_EQ(s.Next().indices, s.EpochOrder(0));
}

TEST(DataSampler, ShuffleIsAPermutationAndDiffersAcrossEpochsAndSeeds) {
  for (int64_t n : {0, 1, 2, 3, 17, 1000}) {
    EXPECT_TRUE(IsPermutation(ShuffledIndices(n, 99), n)) << n;
  }
  Sampler s = MakeSampler(1000, 100, LastBatch::kPartial);
  std::set<std::vector<int64_t>> orders;
  for (uint64_t e = 0; e < 5; ++e) {
    EXPECT_TRUE(IsPermutation(s.EpochOrder(e), 1000));
    orders.insert(s.EpochOrder(e));
  }
  EXPECT_EQ(orders.size(), 5u);
  EXPECT_EQ(s.EpochOrder(3), s.EpochOrder(3));  // a pure function of (seed, epoch)
  EXPECT_NE(ShuffledIndices(1000, 1), ShuffledIndices(1000, 2));
}

TEST(DataSampler, NoShuffleIsFileOrder) {
  Sampler s = MakeSampler(5, 2, LastBatch::kPartial, 7, /*shuffle=*/false);
  EXPECT_EQ(s.EpochOrder(3), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(s.Next().indices, (std::vector<int64_t>{0, 1}));
}

TEST(DataSampler, UniformBelowIsUnbiasedForSmallBounds) {
  SplitMix64 rng(5);
  constexpr int kDraws = 600000;
  std::array<int, 6> counts{};
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t v = UniformBelow(rng, 6);
    ASSERT_LT(v, 6u);
    ++counts[v];
  }
  for (int c : counts) {  // expected 100000, standard deviation ~289
    EXPECT_GT(c, 98000);
    EXPECT_LT(c, 102000);
  }
}

TEST(DataSampler, UniformBelowIsUnbiasedForHugeBounds) {
  // For bound = 3 * 2^62, `x % bound` would put half the draws in the lowest third; an unbiased draw puts a third.
  const uint64_t bound = 3ull << 62;
  SplitMix64 rng(11);
  constexpr int kDraws = 90000;
  std::array<int, 3> thirds{};
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t v = UniformBelow(rng, bound);
    ASSERT_LT(v, bound);
    ++thirds[v >> 62];
  }
  for (int c : thirds) {  // expected 30000, standard deviation ~141
    EXPECT_GT(c, 29000);
    EXPECT_LT(c, 31000);
  }
  // 2^63 + 1 rejects almost half the products: results stay below the bound and average half of it.
  const uint64_t odd = (1ull << 63) + 1;
  double mean = 0;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t v = UniformBelow(rng, odd);
    ASSERT_LT(v, odd);
    mean += static_cast<double>(v) / static_cast<double>(odd) / 20000;
  }
  EXPECT_NEAR(mean, 0.5, 0.02);
  EXPECT_EQ(UniformBelow(rng, 1), 0u);
}

TEST(DataSampler, PartialPolicy) {
  Sampler s = MakeSampler(10, 4, LastBatch::kPartial);
  EXPECT_EQ(s.BatchesPerEpoch(), 3);
  const std::vector<int64_t> order = s.EpochOrder(0);
  std::vector<int64_t> seen;
  for (int i = 0; i < 3; ++i) {
    Batch b = s.Next();
    EXPECT_EQ(b.epoch, 0u);
    EXPECT_EQ(b.index_in_epoch, i);
    EXPECT_EQ(b.ends_epoch, i == 2);
    seen.insert(seen.end(), b.indices.begin(), b.indices.end());
  }
  EXPECT_EQ(seen, order);
  EXPECT_EQ(s.cursor(), (BatchCursor{1, 0}));
  EXPECT_EQ(EpochBatchSizes(s), (std::vector<size_t>{4, 4, 2}));
}

TEST(DataSampler, DropPolicy) {
  Sampler s = MakeSampler(10, 4, LastBatch::kDrop);
  EXPECT_EQ(s.BatchesPerEpoch(), 2);
  const std::vector<int64_t> order = s.EpochOrder(0);
  EXPECT_EQ(s.Next().indices, std::vector<int64_t>(order.begin(), order.begin() + 4));
  Batch last = s.Next();
  EXPECT_EQ(last.indices, std::vector<int64_t>(order.begin() + 4, order.begin() + 8));
  EXPECT_TRUE(last.ends_epoch);
  EXPECT_EQ(s.cursor(), (BatchCursor{1, 0}));
  EXPECT_EQ(EpochBatchSizes(s), (std::vector<size_t>{4, 4}));
}

TEST(DataSampler, PadPolicyWrapsToTheStart) {
  Sampler s = MakeSampler(10, 4, LastBatch::kPad);
  EXPECT_EQ(s.BatchesPerEpoch(), 3);
  const std::vector<int64_t> order = s.EpochOrder(0);
  s.Next();
  s.Next();
  Batch last = s.Next();
  EXPECT_EQ(last.indices, (std::vector<int64_t>{order[8], order[9], order[0], order[1]}));
  EXPECT_TRUE(last.ends_epoch);
  EXPECT_EQ(EpochBatchSizes(s), (std::vector<size_t>{4, 4, 4}));

  // Fewer samples than the batch: the order repeats as often as needed.
  Sampler tiny = MakeSampler(3, 8, LastBatch::kPad);
  const std::vector<int64_t> o = tiny.EpochOrder(0);
  EXPECT_EQ(tiny.Next().indices, (std::vector<int64_t>{o[0], o[1], o[2], o[0], o[1], o[2], o[0], o[1]}));
  EXPECT_EQ(tiny.cursor(), (BatchCursor{1, 0}));
}

TEST(DataSampler, StepsRunAcrossEpochsAndEpochsStopAtTheEnd) {
  Sampler s = MakeSampler(10, 4, LastBatch::kPartial);
  std::vector<uint64_t> epochs;
  for (int step = 0; step < 7; ++step) epochs.push_back(s.Next().epoch);  // --steps 7
  EXPECT_EQ(epochs, (std::vector<uint64_t>{0, 0, 0, 1, 1, 1, 2}));
  EXPECT_EQ(s.cursor(), (BatchCursor{2, 4}));
  // The second epoch's batches come from the second epoch's order.
  Sampler t = MakeSampler(10, 4, LastBatch::kPartial);
  int steps = 0;
  std::vector<int64_t> epoch1;
  while (t.cursor().epoch < 2) {  // --epochs 2
    Batch b = t.Next();
    if (b.epoch == 1) epoch1.insert(epoch1.end(), b.indices.begin(), b.indices.end());
    ++steps;
  }
  EXPECT_EQ(steps, 6);
  EXPECT_EQ(epoch1, t.EpochOrder(1));
}

TEST(DataSampler, SeekResumesTheSameBatches) {
  Sampler a = MakeSampler(10, 4, LastBatch::kPartial);
  for (int i = 0; i < 4; ++i) a.Next();
  const BatchCursor saved = a.cursor();
  EXPECT_EQ(saved, (BatchCursor{1, 4}));
  Sampler b = MakeSampler(10, 4, LastBatch::kPartial);
  ASSERT_TRUE(b.Seek(saved).ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.Next().indices, b.Next().indices);

  Status bad = b.Seek(BatchCursor{0, 3});
  EXPECT_EQ(bad.message(),
            "sampler: cursor position 3 is not the start of a batch (10 samples, batch size 4, last batch 'partial')");
  EXPECT_FALSE(MakeSampler(10, 4, LastBatch::kDrop).Seek(BatchCursor{0, 8}).ok());
}

TEST(DataSampler, CreateErrors) {
  StatusOr<Sampler> drop = Sampler::Create(10, SamplerOptions{16, 0, true, LastBatch::kDrop});
  ASSERT_FALSE(drop.ok());
  EXPECT_EQ(drop.status().message(),
            "sampler: batch size 16 is larger than the 10 samples, so the last-batch policy 'drop' leaves no batch");
  EXPECT_EQ(Sampler::Create(10, SamplerOptions{0}).status().message(), "sampler: batch size 0 is not positive");
  EXPECT_EQ(Sampler::Create(0, SamplerOptions{4}).status().message(), "sampler: no samples to draw batches from");
  EXPECT_TRUE(Sampler::Create(10, SamplerOptions{16, 0, true, LastBatch::kPartial}).ok());
}

TEST(DataSampler, LastBatchNames) {
  for (LastBatch p : {LastBatch::kPartial, LastBatch::kDrop, LastBatch::kPad}) {
    EXPECT_EQ(LastBatchFromName(LastBatchName(p)), p);
  }
  EXPECT_EQ(LastBatchFromName("wrap"), std::nullopt);
}

}  // namespace
}  // namespace onnxamp::trainer
