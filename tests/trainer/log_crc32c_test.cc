// CRC32C against the standard check vectors (the "123456789" check value, RFC 3720 B.4's 32-byte patterns), the
// table and SSE4.2 versions against each other, TensorFlow's mask, and TFRecord framing (bytes pinned from
// TensorBoard's own Python writer) read back with both checksums checked.
#include "trainer/log/crc32c.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/log/tfrecord.h"

namespace onnxamp::trainer {
namespace {

using ::testing::HasSubstr;

struct CheckVector {
  std::string data;
  uint32_t crc;
};

std::vector<CheckVector> CheckVectors() {
  std::string inc, dec;
  for (int i = 0; i < 32; ++i) {
    inc.push_back(static_cast<char>(i));
    dec.push_back(static_cast<char>(31 - i));
  }
  return {{"", 0u},
          {"123456789", 0xE3069283u},
          {std::string(32, '\0'), 0x8A9136AAu},
          {std::string(32, '\xff'), 0x62A8AB43u},
          {inc, 0x46DD794Eu},
          {dec, 0x113FDB5Cu}};
}

TEST(Crc32cTest, CheckVectors) {
  for (const CheckVector& v : CheckVectors()) {
    EXPECT_EQ(Crc32c(v.data), v.crc) << v.data.size() << " bytes";
    EXPECT_EQ(Crc32cPortable(v.data), v.crc) << v.data.size() << " bytes";
    if (Crc32cHasHardware()) {
      EXPECT_EQ(Crc32cHardware(v.data), v.crc) << v.data.size() << " bytes";
    }
  }
}

TEST(Crc32cTest, ExtendsAcrossPiecesAndAgreesAtEveryLengthAndAlignment) {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>((i * 131 + 7) & 0xff));
  const uint32_t whole = Crc32cPortable(data);
  for (size_t cut = 0; cut <= data.size(); cut += 13) {
    EXPECT_EQ(Crc32c(std::string_view(data).substr(cut), Crc32c(std::string_view(data).substr(0, cut))), whole)
        << "cut at " << cut;
  }
  if (!Crc32cHasHardware()) GTEST_SKIP() << "no SSE4.2 on this CPU: only the table version ran";
  for (size_t start = 0; start < 9; ++start) {
    for (size_t n = 0; n + start <= 40; ++n) {
      const std::string_view piece = std::string_view(data).substr(start, n);
      EXPECT_EQ(Crc32cHardware(piece), Crc32cPortable(piece)) << "start " << start << ", " << n << " bytes";
    }
  }
}

TEST(Crc32cTest, MaskRoundTrips) {
  EXPECT_EQ(MaskCrc32c(0u), 0xa282ead8u);
  EXPECT_EQ(MaskCrc32c(0xE3069283u), ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xffffffffu, 0x80000000u}) EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(crc)), crc);
}

TEST(TfRecordTest, FramingMatchesTensorBoardsWriter) {
  // tensorboard.summary.writer.record_writer framing of b"abc": struct.pack("<Q", 3), masked_crc32c of it
  // (0x0e4999b0), the data, masked_crc32c(b"abc") (0x21f1576e), all little-endian.
  const std::string expected(
      "\x03\0\0\0\0\0\0\0\xb0\x99\x49\x0e"
      "abc\x6e\x57\xf1\x21",
      19);
  EXPECT_EQ(FrameRecord("abc"), expected);
}

TEST(TfRecordTest, ParsesRecordsBack) {
  const std::vector<std::string> records = {"", "abc", std::string(1000, 'x'), std::string("\0\x01\x02", 3)};
  std::string file;
  for (const std::string& r : records) file += FrameRecord(r);
  StatusOr<std::vector<std::string>> parsed = ParseRecords(file, "f");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, records);
}

TEST(TfRecordTest, ChecksumsAndTruncationAreErrors) {
  const std::string file = FrameRecord("abc") + FrameRecord("hello");
  std::string bad_length = file;
  bad_length[19 + 1] ^= 1;  // the second record's length
  EXPECT_THAT(ParseRecords(bad_length, "f").status().message(),
              HasSubstr("f: record 1 at byte 19: the length checksum does not match"));
  std::string bad_data = file;
  bad_data[19 + 12] ^= 1;  // the second record's first data byte
  EXPECT_THAT(ParseRecords(bad_data, "f").status().message(),
              HasSubstr("f: record 1 at byte 19: the data checksum does not match"));
  EXPECT_THAT(ParseRecords(file.substr(0, file.size() - 1), "f").status().message(),
              HasSubstr("f: record 1 at byte 19: truncated (length 5, 8 bytes left)"));
  EXPECT_THAT(ParseRecords(file.substr(0, 25), "f").status().message(),
              HasSubstr("f: record 1 at byte 19: truncated header (6 of 12 bytes)"));
}

}  // namespace
}  // namespace onnxamp::trainer
