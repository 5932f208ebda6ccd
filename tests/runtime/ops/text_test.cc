// StringNormalizer and TfIdfVectorizer beyond the backend suite (which checks TF counts and ASCII stopwords): the IDF
// and TFIDF weightings with and without weights (indexed by pool n-gram), int32 tokens, a scalar and an empty row,
// shared output columns, n-gram sizes below min_gram_length that the pool lists but that are not counted, Unicode
// case mapping and case-insensitive stopwords, and the one-line errors. tests/peer/more_ops_ort.py compares
// TfIdfVectorizer with ONNX Runtime.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

ir::Tensor Strings(std::vector<int64_t> dims, std::vector<std::string> v) {
  ir::Tensor t(DType::kString, std::move(dims));
  t.mutable_strings() = std::move(v);
  return t;
}

std::vector<std::string> RunStrings(const OpTester& t) {
  auto out = t.Run();
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? (*out)[0].strings() : std::vector<std::string>{};
}

std::vector<float> RunFloats(const OpTester& t, std::vector<int64_t>* dims = nullptr) {
  auto out = t.Run();
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return {};
  if (dims) *dims = (*out)[0].dims();
  auto v = (*out)[0].values<float>();
  return {v.begin(), v.end()};
}

TEST(StringNormalizerTest, UnicodeCaseAndCaseInsensitiveStopwords) {
  OpTester upper = Op("StringNormalizer", 10);
  upper.Attr(ir::Attribute::String("case_change_action", "UPPER"))
      .Attr(ir::Attribute::Strings("stopwords", {"STRASSE"}))
      .Input(Strings({4}, {"straße", "Ärger", "strasse", "éTé"}));
  // "strasse" matches the stopword case-insensitively; "straße" does not (no full case folding, as ONNX Runtime).
  EXPECT_EQ(RunStrings(upper), (std::vector<std::string>{"STRAßE", "ÄRGER", "ÉTÉ"}));
  OpTester lower = Op("StringNormalizer", 10);
  lower.Attr(ir::Attribute::String("case_change_action", "LOWER"))
      .Attr(ir::Attribute::Int("is_case_sensitive", 1))
      .Attr(ir::Attribute::Strings("stopwords", {"Ärger"}))
      .Input(Strings({1, 3}, {"ÄRGER", "Ärger", "ÉTÉ"}));
  EXPECT_EQ(RunStrings(lower), (std::vector<std::string>{"ärger", "été"}));
  // Everything dropped: one empty string, [1, 1] for a [1, C] input.
  OpTester all = Op("StringNormalizer", 10);
  all.Attr(ir::Attribute::Strings("stopwords", {"a"})).Input(Strings({1, 2}, {"A", "a"}));
  auto out = all.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ((*out)[0].strings(), (std::vector<std::string>{""}));
}

TEST(StringNormalizerTest, Errors) {
  OpTester action = Op("StringNormalizer", 10);
  action.Attr(ir::Attribute::String("case_change_action", "TITLE")).Input(Strings({1}, {"a"}));
  ExpectRunError(action, "attribute 'case_change_action' is 'TITLE', expected LOWER, UPPER or NONE");
  OpTester shape = Op("StringNormalizer", 10);
  shape.Input(Strings({2, 2}, {"a", "b", "c", "d"}));
  ExpectRunError(shape, "must be [C] or [1, C], got [2,2]");
  OpTester utf8 = Op("StringNormalizer", 10);
  utf8.Attr(ir::Attribute::String("case_change_action", "LOWER")).Input(Strings({2}, {"ok", std::string("\xc3(")}));
  ExpectRunError(utf8, "element 1 is not valid UTF-8");
}

// Pool: unigrams {2, 3, 5}, bigrams {(2, 3), (5, 2)}, columns 0..4 in pool order.
OpTester Tfidf(const std::string& mode, int64_t min_gram, int64_t max_gram, int64_t skip) {
  OpTester t = Op("TfIdfVectorizer", 9);
  t.Attr(ir::Attribute::String("mode", mode))
      .Attr(ir::Attribute::Int("min_gram_length", min_gram))
      .Attr(ir::Attribute::Int("max_gram_length", max_gram))
      .Attr(ir::Attribute::Int("max_skip_count", skip))
      .Attr(ir::Attribute::Ints("ngram_counts", {0, 3}))
      .Attr(ir::Attribute::Ints("ngram_indexes", {0, 1, 2, 3, 4}))
      .Attr(ir::Attribute::Ints("pool_int64s", {2, 3, 5, 2, 3, 5, 2}));
  return t;
}

TEST(TfIdfVectorizerTest, CountsAndWeightings) {
  // Row: 2 3 5 2 7 3. Unigrams: 2 x2, 3 x2, 5 x1. Bigrams at distance 1: (2,3) x1, (5,2) x1; at distance 2 (skip 1):
  // (2,5), (3,2), (5,7), (2,3) x1 more.
  const std::vector<int64_t> row = {2, 3, 5, 2, 7, 3};
  OpTester tf = Tfidf("TF", 1, 2, 1);
  tf.Input(Int64s(row));
  EXPECT_EQ(RunFloats(tf), (std::vector<float>{2, 2, 1, 2, 1}));
  OpTester no_skip = Tfidf("TF", 1, 2, 0);
  no_skip.Input(Int32s({2, 3, 5, 2, 7, 3}));  // int32 tokens against the int64 pool
  EXPECT_EQ(RunFloats(no_skip), (std::vector<float>{2, 2, 1, 1, 1}));
  // Only bigrams: the unigram columns stay 0.
  OpTester bigrams = Tfidf("TF", 2, 2, 1);
  bigrams.Input(Int64s(row));
  EXPECT_EQ(RunFloats(bigrams), (std::vector<float>{0, 0, 0, 2, 1}));
  OpTester idf = Tfidf("IDF", 1, 2, 0);
  idf.Attr(ir::Attribute::Floats("weights", {0.5f, 1.5f, 2.0f, 3.0f, 4.0f})).Input(Int64s({3, 3, 9}));
  EXPECT_EQ(RunFloats(idf), (std::vector<float>{0, 1.5f, 0, 0, 0}));
  OpTester idf_plain = Tfidf("IDF", 1, 2, 0);
  idf_plain.Input(Int64s({3, 3, 9}));
  EXPECT_EQ(RunFloats(idf_plain), (std::vector<float>{0, 1, 0, 0, 0}));
  OpTester tfidf = Tfidf("TFIDF", 1, 2, 0);
  tfidf.Attr(ir::Attribute::Floats("weights", {0.5f, 1.5f, 2.0f, 3.0f, 4.0f})).Input(Int64s({3, 3, 2}));
  EXPECT_EQ(RunFloats(tfidf), (std::vector<float>{0.5f, 3.0f, 0, 0, 0}));
}

TEST(TfIdfVectorizerTest, BatchesScalarsEmptyRowsAndRepeatedPoolEntries) {
  ir::Tensor batch(DType::kInt64, {2, 3});
  const std::vector<int64_t> v = {2, 3, 3, 5, 2, 9};
  std::copy(v.begin(), v.end(), batch.mutable_values<int64_t>().begin());
  OpTester b = Tfidf("TF", 1, 2, 0);
  b.Input(batch);
  std::vector<int64_t> dims;
  EXPECT_EQ(RunFloats(b, &dims), (std::vector<float>{1, 2, 0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(dims, (std::vector<int64_t>{2, 5}));
  ir::Tensor scalar(DType::kInt64, {});
  scalar.mutable_values<int64_t>()[0] = 5;
  OpTester s = Tfidf("TF", 1, 1, 0);
  s.Input(scalar);
  EXPECT_EQ(RunFloats(s, &dims), (std::vector<float>{0, 0, 1, 0, 0}));
  EXPECT_EQ(dims, (std::vector<int64_t>{5}));
  OpTester empty = Tfidf("TF", 1, 2, 3);
  empty.Input(ir::Tensor(DType::kInt64, {1, 0}));
  EXPECT_EQ(RunFloats(empty, &dims), (std::vector<float>{0, 0, 0, 0, 0}));
  EXPECT_EQ(dims, (std::vector<int64_t>{1, 5}));
  // Strings; tokens outside the pool count nowhere.
  OpTester strs = Op("TfIdfVectorizer", 9);
  strs.Attr(ir::Attribute::String("mode", "TF"))
      .Attr(ir::Attribute::Int("min_gram_length", 1))
      .Attr(ir::Attribute::Int("max_gram_length", 1))
      .Attr(ir::Attribute::Int("max_skip_count", 0))
      .Attr(ir::Attribute::Ints("ngram_counts", {0}))
      .Attr(ir::Attribute::Ints("ngram_indexes", {1, 0}))
      .Attr(ir::Attribute::Strings("pool_strings", {"a", "b"}))
      .Input(Strings({4}, {"a", "c", "b", "a"}));
  EXPECT_EQ(RunFloats(strs), (std::vector<float>{1, 2}));
}

// weights[j] belongs to the pool's j-th n-gram, whatever its column; n-grams sharing a column add up (the values ONNX
// Runtime 1.19 gives).
OpTester Unigrams(const std::string& mode, std::vector<int64_t> indexes, std::vector<float> weights) {
  OpTester t = Op("TfIdfVectorizer", 9);
  t.Attr(ir::Attribute::String("mode", mode))
      .Attr(ir::Attribute::Int("min_gram_length", 1))
      .Attr(ir::Attribute::Int("max_gram_length", 1))
      .Attr(ir::Attribute::Int("max_skip_count", 0))
      .Attr(ir::Attribute::Ints("ngram_counts", {0}))
      .Attr(ir::Attribute::Ints("ngram_indexes", std::move(indexes)))
      .Attr(ir::Attribute::Ints("pool_int64s", {1, 2, 3}));
  if (!weights.empty()) t.Attr(ir::Attribute::Floats("weights", std::move(weights)));
  t.Input(Int64s({1, 2, 1, 3}));
  return t;
}

TEST(TfIdfVectorizerTest, WeightsFollowThePoolAndSharedColumnsAdd) {
  EXPECT_EQ(RunFloats(Unigrams("TF", {0, 0, 1}, {})), (std::vector<float>{3, 1}));
  EXPECT_EQ(RunFloats(Unigrams("TFIDF", {0, 0, 1}, {10, 100, 1000})), (std::vector<float>{120, 1000}));
  EXPECT_EQ(RunFloats(Unigrams("IDF", {2, 1, 0}, {10, 100, 1000})), (std::vector<float>{1000, 100, 10}));
  EXPECT_EQ(RunFloats(Unigrams("TFIDF", {2, 1, 0}, {10, 100, 1000})), (std::vector<float>{1000, 100, 20}));
}

TEST(TfIdfVectorizerTest, Errors) {
  OpTester mode = Tfidf("COUNT", 1, 2, 0);
  mode.Input(Int64s({1}));
  ExpectRunError(mode, "attribute 'mode' is 'COUNT', expected TF, IDF or TFIDF");
  OpTester grams = Tfidf("TF", 2, 1, 0);
  grams.Input(Int64s({1}));
  ExpectRunError(grams, "must satisfy 1 <= min <= max and skip >= 0");
  OpTester type = Tfidf("TF", 1, 2, 0);
  type.Input(Strings({1}, {"a"}));
  ExpectRunError(type, "expected int32 or int64 (the pool is pool_int64s)");
  OpTester rank = Tfidf("TF", 1, 2, 0);
  rank.Input(ir::Tensor(DType::kInt64, {1, 1, 1}));
  ExpectRunError(rank, "must be [C] or [B, C] with B >= 1");
  OpTester few = Op("TfIdfVectorizer", 9);
  few.Attr(ir::Attribute::String("mode", "TF"))
      .Attr(ir::Attribute::Int("min_gram_length", 1))
      .Attr(ir::Attribute::Int("max_gram_length", 2))
      .Attr(ir::Attribute::Ints("ngram_counts", {0, 3}))
      .Attr(ir::Attribute::Ints("ngram_indexes", {0, 1}))
      .Attr(ir::Attribute::Ints("pool_int64s", {2, 3, 5, 2, 3, 5, 2}))
      .Input(Int64s({1}));
  ExpectRunError(few, "fewer than the pool's n-grams");
  OpTester weights = Tfidf("TFIDF", 1, 2, 0);
  weights.Attr(ir::Attribute::Floats("weights", {1, 2})).Input(Int64s({1}));
  ExpectRunError(weights, "attribute 'weights' has 2 values, expected 5 (one per n-gram of the pool)");
  OpTester twice = Op("TfIdfVectorizer", 9);
  twice.Attr(ir::Attribute::String("mode", "TF"))
      .Attr(ir::Attribute::Int("min_gram_length", 1))
      .Attr(ir::Attribute::Int("max_gram_length", 1))
      .Attr(ir::Attribute::Ints("ngram_counts", {0}))
      .Attr(ir::Attribute::Ints("ngram_indexes", {0, 1, 2}))
      .Attr(ir::Attribute::Strings("pool_strings", {"a", "b", "a"}))
      .Input(Strings({1}, {"a"}));
  ExpectRunError(twice, "the pool lists an n-gram of 1 items twice (n-grams 0 and 2)");
}

}  // namespace
}  // namespace onnxamp::testing
