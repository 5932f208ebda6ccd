// The safetensors writer and the strict reader: the byte layout of the format, round trips, and hostile input
// (lengths, offsets, JSON) refused with a one-line error.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/half.h"
#include "trainer/checkpoint/safetensors.h"

namespace onnxamp::trainer {
namespace {

ir::Tensor Floats(const std::string& name, std::vector<int64_t> dims, float first) {
  ir::Tensor t(DType::kFloat32, std::move(dims));
  float v = first;
  for (float& x : t.mutable_values<float>()) x = v++;
  t.set_name(name);
  return t;
}

// A file from a header written by hand and `data_bytes` bytes of data.
std::string File(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int b = 0; b < 8; ++b) out[b] = static_cast<char>((n >> (8 * b)) & 0xff);
  return out + header + std::string(data_bytes, '\x01');
}

std::string ParseError(const std::string& bytes) {
  StatusOr<SafetensorsFile> f = ParseSafetensors(bytes, "s.safetensors");
  EXPECT_FALSE(f.ok());
  if (f.ok()) return "";
  EXPECT_EQ(f.status().message().find('\n'), std::string::npos) << f.status().message();
  EXPECT_EQ(f.status().message().rfind("s.safetensors: ", 0), 0u) << f.status().message();
  return f.status().message();
}

TEST(Safetensors, LayoutAndRoundTrip) {
  ir::Tensor steps(DType::kInt64, {2});
  steps.mutable_values<int64_t>()[0] = -3;
  steps.mutable_values<int64_t>()[1] = int64_t{1} << 40;
  steps.set_name("optim.step");
  ir::Tensor half(DType::kBFloat16, {3});
  for (int i = 0; i < 3; ++i) half.mutable_values<BFloat16>()[i] = BFloat16(0.5f * static_cast<float>(i));
  half.set_name("h");
  ir::Tensor empty(DType::kFloat32, {0, 4});
  empty.set_name("empty");
  const std::vector<ir::Tensor> tensors = {Floats("fc.weight", {2, 3}, 1.5f), steps, half, empty};
  StatusOr<std::string> bytes = SerializeSafetensors(tensors, {{"format", "pt"}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  uint64_t n = 0;
  std::memcpy(&n, bytes->data(), 8);
  EXPECT_EQ(n % 8, 0u);  // padded with spaces, as the reference writer does
  EXPECT_EQ(bytes->size(), 8 + n + 6 * 4 + 2 * 8 + 3 * 2);
  const std::string header = bytes->substr(8, n);
  EXPECT_EQ(header.rfind("{\"__metadata__\":{\"format\":\"pt\"},\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                         "\"data_offsets\":[0,24]},\"optim.step\":{\"dtype\":\"I64\"",
                         0),
            0u)
      << header;
  float first = 0;
  std::memcpy(&first, bytes->data() + 8 + n, 4);
  EXPECT_EQ(first, 1.5f);

  StatusOr<SafetensorsFile> f = ParseSafetensors(*bytes, "x");
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->tensors.size(), 4u);
  EXPECT_EQ(f->metadata.at("format"), "pt");
  for (size_t i = 0; i < 4; ++i) {
    // The zero-byte tensor sorts by offset with the others; names identify them.
    const ir::Tensor* match = nullptr;
    for (const ir::Tensor& t : f->tensors) match = t.name() == tensors[i].name() ? &t : match;
    ASSERT_NE(match, nullptr) << tensors[i].name();
    EXPECT_TRUE(match->SameContents(tensors[i])) << tensors[i].name();
    EXPECT_EQ(match->dims(), tensors[i].dims());
  }
}

// The streamed writer hands out the same bytes; the data start 16-byte aligned; with a keep-alive the reader returns
// views of the bytes where they are 16-byte aligned (what ir::Buffer promises), copies elsewhere.
TEST(Safetensors, StreamedWriteAndViews) {
  ir::Tensor half(DType::kFloat16, {3});
  half.set_name("h");
  const std::vector<ir::Tensor> tensors = {Floats("a", {4}, 1.0f), half, Floats("b", {2, 2}, -3.0f),
                                           Floats("c", {4}, 7.0f)};
  StatusOr<std::string> whole = SerializeSafetensors(tensors, {{"k", "v"}});
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  std::string streamed;
  int pieces = 0;
  ASSERT_TRUE(WriteSafetensors(tensors, {{"k", "v"}}, [&](std::string_view piece) {
                streamed.append(piece);
                ++pieces;
                return Status::Ok();
              }).ok());
  EXPECT_EQ(streamed, *whole);
  EXPECT_EQ(pieces, 5);  // the header, then each tensor
  uint64_t n = 0;
  std::memcpy(&n, whole->data(), 8);
  EXPECT_EQ((8 + n) % 16, 0u);
  // A sink's error stops the write.
  int calls = 0;
  const Status failed = WriteSafetensors(tensors, {}, [&](std::string_view) {
    return ++calls == 2 ? IoError("f: write failed: No space left on device") : Status::Ok();
  });
  EXPECT_EQ(failed.message(), "f: write failed: No space left on device");
  EXPECT_EQ(calls, 2);

  // Views: the bytes in 16-byte aligned memory that a shared pointer owns.
  auto owner = std::make_shared<std::vector<std::byte>>(whole->size() + 16);
  auto* base = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(owner->data()) + 15) / 16 * 16);
  std::memcpy(base, whole->data(), whole->size());
  const std::string_view bytes(reinterpret_cast<const char*>(base), whole->size());
  StatusOr<SafetensorsFile> f = ParseSafetensors(bytes, "x", owner);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->tensors.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const ir::Tensor& t = f->tensors[i];
    EXPECT_TRUE(t.SameContents(tensors[i])) << t.name();
    const auto* p = reinterpret_cast<const char*>(t.data());
    const bool inside = p >= bytes.data() && p < bytes.data() + bytes.size();
    // "a" starts the data and "h" follows 16 bytes in: views; "b" at byte 22 and "c" at 38 are copied.
    EXPECT_EQ(inside, t.name() == "a" || t.name() == "h") << t.name();
  }
}

TEST(Safetensors, WriterRefusesWhatTheFormatCannotHold) {
  ir::Tensor s(DType::kString, {1});
  s.set_name("s");
  EXPECT_NE(SerializeSafetensors({s}).status().message().find("cannot store"), std::string::npos);
  EXPECT_NE(SerializeSafetensors({Floats("a", {1}, 0), Floats("a", {1}, 0)}).status().message().find("twice"),
            std::string::npos);
  EXPECT_FALSE(SerializeSafetensors({Floats("__metadata__", {1}, 0)}).ok());
  EXPECT_FALSE(SerializeSafetensors({Floats("", {1}, 0)}).ok());
}

TEST(Safetensors, HostileInputIsRefused) {
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  ASSERT_TRUE(ParseSafetensors(File("{" + ok_entry + "}", 8), "s").ok());

  EXPECT_NE(ParseError("1234").find("too short"), std::string::npos);
  std::string huge(8, '\xff');
  EXPECT_NE(ParseError(huge + "{}").find("exceeds the limit"), std::string::npos);
  std::string past = File("{}", 0);
  past[0] = 100;
  EXPECT_NE(ParseError(past).find("runs past the end"), std::string::npos);
  EXPECT_NE(ParseError(File("[1, 2]", 0)).find("not a JSON object"), std::string::npos);
  EXPECT_NE(ParseError(File("{\"a\": ", 0)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(ParseError(File("{" + ok_entry + "," + ok_entry + "}", 8)).find("names 'a' twice"), std::string::npos);
  // Offsets: overlapping, a gap, past the data, data left over, a count that disagrees with dtype and shape.
  const std::string b_overlap = R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]})";
  EXPECT_NE(ParseError(File("{" + ok_entry + "," + b_overlap + "}", 12)).find("overlapping"), std::string::npos);
  const std::string b_gap = R"("b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]})";
  EXPECT_NE(ParseError(File("{" + ok_entry + "," + b_gap + "}", 16)).find("a gap"), std::string::npos);
  EXPECT_NE(ParseError(File("{" + ok_entry + "}", 7)).find("truncated"), std::string::npos);
  EXPECT_NE(ParseError(File("{" + ok_entry + "}", 9)).find("cover 8 of the 9"), std::string::npos);
  EXPECT_NE(ParseError(File(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8))
                .find("span 8 bytes, the dtype and shape 12"),
            std::string::npos);
  EXPECT_NE(ParseError(File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8)).find("begin <= end"),
            std::string::npos);
  EXPECT_NE(ParseError(File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})", 8))
                .find("span 18446744073709551615 bytes"),
            std::string::npos);
  // Shapes, dtypes and keys.
  EXPECT_NE(ParseError(File(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", 8))
                .find("too large"),
            std::string::npos);
  EXPECT_NE(ParseError(File(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8)).find("not a dim"),
            std::string::npos);
  EXPECT_NE(ParseError(File(R"({"a":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", 8)).find("'Q7'"),
            std::string::npos);
  EXPECT_NE(ParseError(File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8)).find("exactly"),
            std::string::npos);
  EXPECT_NE(ParseError(File(R"({"a":{"dtype":"F32","shape":[2]}})", 8)).find("exactly"), std::string::npos);
  EXPECT_NE(ParseError(File(R"({"a":7})", 0)).find("not an object"), std::string::npos);
  EXPECT_NE(ParseError(File(R"({"__metadata__":{"k":1}})", 0)).find("not a string"), std::string::npos);

  // Every truncation of a valid file is refused.
  StatusOr<std::string> bytes = SerializeSafetensors({Floats("w", {4, 4}, 0), Floats("b", {4}, 0)});
  ASSERT_TRUE(bytes.ok());
  for (size_t len = 0; len < bytes->size(); ++len) {
    EXPECT_FALSE(ParseSafetensors(std::string_view(*bytes).substr(0, len), "t").ok()) << len;
  }
}

}  // namespace
}  // namespace onnxamp::trainer
