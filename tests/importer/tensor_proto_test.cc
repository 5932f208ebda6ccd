// TensorProto <-> ir::Tensor for every ONNX dtype, typed fields and raw_data, and the checks on bad tensors.
#include <google/protobuf/util/message_differencer.h>

#include <cstring>
#include <limits>

#include "importer/onnx_proto.h"
#include "proto_builders.h"

namespace onnxamp::importer {
namespace {

using ::testing::HasSubstr;

const ExternalDataContext kNoExternal{};

// Little-endian bytes of the low `width` bytes of each value.
std::vector<std::byte> PackLE(const std::vector<int64_t>& values, size_t width) {
  std::vector<std::byte> out;
  for (int64_t v : values) {
    const uint64_t u = static_cast<uint64_t>(v);
    for (size_t b = 0; b < width; ++b) out.push_back(static_cast<std::byte>((u >> (8 * b)) & 0xff));
  }
  return out;
}

template <typename T>
std::vector<std::byte> AsBytes(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// One dtype's typed-field test case: the proto as ONNX writes it and the packed bytes it must become.
struct TypedCase {
  onnx::TensorProto proto;
  std::vector<std::byte> bytes;
};

TypedCase MakeTypedCase(DType dtype) {
  TypedCase c;
  onnx::TensorProto& p = c.proto;
  p.set_name("t");
  p.set_data_type(static_cast<int32_t>(dtype));
  switch (dtype) {
    case DType::kFloat32: {
      std::vector<float> v{1.5f, -2.0f, 0.0f};
      p.add_dims(3);
      for (float f : v) p.add_float_data(f);
      c.bytes = AsBytes(v);
      break;
    }
    case DType::kComplex64: {
      std::vector<float> v{1, 2, 3, 4};
      p.add_dims(2);
      for (float f : v) p.add_float_data(f);
      c.bytes = AsBytes(v);
      break;
    }
    case DType::kFloat64: {
      std::vector<double> v{1.25, -1e300, 0};
      p.add_dims(3);
      for (double d : v) p.add_double_data(d);
      c.bytes = AsBytes(v);
      break;
    }
    case DType::kComplex128: {
      std::vector<double> v{1, -2, 3.5, 4};
      p.add_dims(2);
      for (double d : v) p.add_double_data(d);
      c.bytes = AsBytes(v);
      break;
    }
    case DType::kInt64: {
      std::vector<int64_t> v{1, -2, std::numeric_limits<int64_t>::max()};
      p.add_dims(3);
      for (int64_t x : v) p.add_int64_data(x);
      c.bytes = AsBytes(v);
      break;
    }
    case DType::kUint64: {
      std::vector<uint64_t> v{0, std::numeric_limits<uint64_t>::max(), 5};
      p.add_dims(3);
      for (uint64_t x : v) p.add_uint64_data(x);
      c.bytes = AsBytes(v);
      break;
    }
    case DType::kUint32: {
      std::vector<uint32_t> v{0, 0xffffffffu, 7};
      p.add_dims(3);
      for (uint32_t x : v) p.add_uint64_data(x);
      c.bytes = AsBytes(v);
      break;
    }
    default: {  // int32_data types
      std::vector<int64_t> v;
      size_t width = static_cast<size_t>(DTypeBits(dtype) / 8);
      if (IsSubByte(dtype)) {
        // Packed bytes: two 4-bit or four 2-bit elements per int32_data entry.
        const int per_byte = 8 / DTypeBits(dtype);
        p.add_dims(per_byte + 1);  // needs two bytes, the second one partly used
        v = {0xa5, 0x01};
        width = 1;
      } else if (dtype == DType::kBool) {
        p.add_dims(3);
        v = {1, 0, 1};
      } else if (dtype == DType::kInt32) {
        p.add_dims(3);
        v = {std::numeric_limits<int32_t>::min(), -1, std::numeric_limits<int32_t>::max()};
      } else if (dtype == DType::kInt16) {
        p.add_dims(3);
        v = {-32768, -1, 32767};
      } else if (dtype == DType::kInt8) {
        p.add_dims(3);
        v = {-128, -1, 127};
      } else if (width == 2) {  // uint16, float16, bfloat16: the bit pattern as an unsigned number
        p.add_dims(3);
        v = {0, 0x3c00, 0xffff};
      } else {  // uint8 and the float8 types
        p.add_dims(3);
        v = {0, 0x7f, 0xff};
      }
      for (int64_t x : v) p.add_int32_data(static_cast<int32_t>(x));
      c.bytes = PackLE(v, width);
      break;
    }
  }
  return c;
}

std::vector<DType> AllFixedSizeDTypes() {
  std::vector<DType> out;
  for (int code = 1; code <= kMaxDTypeCode; ++code) {
    if (code != static_cast<int>(DType::kString)) out.push_back(static_cast<DType>(code));
  }
  return out;
}

std::string DTypeTestName(const ::testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); }

class TensorDTypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(TensorDTypeTest, TypedFieldsBecomePackedBytesAndExportTheSameProto) {
  TypedCase c = MakeTypedCase(GetParam());
  StatusOr<ir::Tensor> t = TensorFromProto(c.proto, kNoExternal, "tensor 't'");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->dtype(), GetParam());
  EXPECT_EQ(t->encoding(), ir::TensorEncoding::kTyped);
  ASSERT_EQ(t->nbytes(), c.bytes.size());
  EXPECT_EQ(std::memcmp(t->data(), c.bytes.data(), c.bytes.size()), 0);
  onnx::TensorProto back;
  TensorToProto(*t, &back);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(c.proto, back))
      << c.proto.ShortDebugString() << "\nvs\n"
      << back.ShortDebugString();
}

TEST_P(TensorDTypeTest, RawDataRoundTrips) {
  TypedCase c = MakeTypedCase(GetParam());
  onnx::TensorProto raw;
  raw.set_name("r");
  raw.set_data_type(c.proto.data_type());
  raw.mutable_dims()->CopyFrom(c.proto.dims());
  raw.set_raw_data(std::string(reinterpret_cast<const char*>(c.bytes.data()), c.bytes.size()));
  StatusOr<ir::Tensor> t = TensorFromProto(raw, kNoExternal, "tensor 'r'");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->encoding(), ir::TensorEncoding::kRaw);
  ASSERT_EQ(t->nbytes(), c.bytes.size());
  EXPECT_EQ(std::memcmp(t->data(), c.bytes.data(), c.bytes.size()), 0);
  onnx::TensorProto back;
  TensorToProto(*t, &back);
  EXPECT_EQ(testing::Serialize(raw), testing::Serialize(back));

  // The same bytes decoded from the typed case and from raw_data are the same tensor.
  StatusOr<ir::Tensor> typed = TensorFromProto(c.proto, kNoExternal, "tensor 't'");
  ASSERT_TRUE(typed.ok());
  EXPECT_TRUE(typed->SameContents(*t));
}

TEST_P(TensorDTypeTest, RawDataOfTheWrongSizeIsRefused) {
  TypedCase c = MakeTypedCase(GetParam());
  onnx::TensorProto raw;
  raw.set_data_type(c.proto.data_type());
  raw.mutable_dims()->CopyFrom(c.proto.dims());
  raw.set_raw_data(std::string(c.bytes.size() + 1, '\0'));
  StatusOr<ir::Tensor> t = TensorFromProto(raw, kNoExternal, "initializer 'bad'");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("initializer 'bad'"));
  EXPECT_THAT(t.status().message(), HasSubstr("raw_data has " + std::to_string(c.bytes.size() + 1) + " bytes"));
}

TEST_P(TensorDTypeTest, TypedFieldWithTooFewValuesIsRefused) {
  TypedCase c = MakeTypedCase(GetParam());
  c.proto.add_dims(2);  // twice the elements, same values
  StatusOr<ir::Tensor> t = TensorFromProto(c.proto, kNoExternal, "initializer 'short'");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("initializer 'short'"));
  EXPECT_THAT(t.status().message(), HasSubstr("values, expected"));
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, TensorDTypeTest, ::testing::ValuesIn(AllFixedSizeDTypes()), DTypeTestName);

TEST(TensorProto, StringsRoundTrip) {
  onnx::TensorProto p;
  p.set_name("s");
  p.set_data_type(onnx::TensorProto::STRING);
  p.add_dims(3);
  p.add_string_data("a");
  p.add_string_data(std::string("\0\xff", 2));
  p.add_string_data("");
  StatusOr<ir::Tensor> t = TensorFromProto(p, kNoExternal, "s");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->strings().size(), 3u);
  EXPECT_EQ(t->strings()[1], std::string("\0\xff", 2));
  onnx::TensorProto back;
  TensorToProto(*t, &back);
  EXPECT_EQ(testing::Serialize(p), testing::Serialize(back));
}

TEST(TensorProto, NameDocStringAndSegmentAreKept) {
  onnx::TensorProto p = testing::FloatTensor("w", {2}, {1, 2});
  p.set_doc_string("weights");
  p.mutable_segment()->set_begin(0);
  p.mutable_segment()->set_end(2);
  StatusOr<ir::Tensor> t = TensorFromProto(p, kNoExternal, "w");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->doc_string(), "weights");
  ASSERT_TRUE(t->segment().has_value());
  onnx::TensorProto back;
  TensorToProto(*t, &back);
  EXPECT_EQ(testing::Serialize(p), testing::Serialize(back));
}

TEST(TensorProto, EmptyTensorsKeepTheirEncoding) {
  onnx::TensorProto typed;
  typed.set_data_type(onnx::TensorProto::FLOAT);
  typed.add_dims(0);
  onnx::TensorProto raw = typed;
  raw.set_raw_data("");
  for (const onnx::TensorProto& p : {typed, raw}) {
    StatusOr<ir::Tensor> t = TensorFromProto(p, kNoExternal, "empty");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->nbytes(), 0u);
    onnx::TensorProto back;
    TensorToProto(*t, &back);
    EXPECT_EQ(testing::Serialize(p), testing::Serialize(back));
  }
}

struct OutOfRangeCase {
  DType dtype;
  int32_t value;
};

class TypedValueRangeTest : public ::testing::TestWithParam<OutOfRangeCase> {};

TEST_P(TypedValueRangeTest, ValueThatDoesNotFitIsRefused) {
  onnx::TensorProto p;
  p.set_data_type(static_cast<int32_t>(GetParam().dtype));
  p.add_dims(IsSubByte(GetParam().dtype) ? 8 / DTypeBits(GetParam().dtype) : 1);
  p.add_int32_data(GetParam().value);
  StatusOr<ir::Tensor> t = TensorFromProto(p, kNoExternal, "initializer 'q'");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("initializer 'q'"));
  EXPECT_THAT(t.status().message(), HasSubstr("int32_data[0] = " + std::to_string(GetParam().value)));
  EXPECT_THAT(t.status().message(), HasSubstr(std::string(DTypeName(GetParam().dtype))));
}

INSTANTIATE_TEST_SUITE_P(Int32Data, TypedValueRangeTest,
                         ::testing::Values(OutOfRangeCase{DType::kUint8, 256}, OutOfRangeCase{DType::kUint8, -1},
                                           OutOfRangeCase{DType::kInt8, 128}, OutOfRangeCase{DType::kInt8, -129},
                                           OutOfRangeCase{DType::kInt16, 32768}, OutOfRangeCase{DType::kUint16, 65536},
                                           OutOfRangeCase{DType::kFloat16, 65536}, OutOfRangeCase{DType::kBool, 2},
                                           OutOfRangeCase{DType::kFloat8E4M3FN, 256}, OutOfRangeCase{DType::kInt4, 256},
                                           OutOfRangeCase{DType::kUint2, -1}),
                         [](const ::testing::TestParamInfo<OutOfRangeCase>& info) {
                           return std::string(DTypeName(info.param.dtype)) + "_" +
                                  (info.param.value < 0 ? "minus" + std::to_string(-info.param.value)
                                                        : std::to_string(info.param.value));
                         });

TEST(TensorProto, Uint32ValueOver32BitsIsRefused) {
  onnx::TensorProto p;
  p.set_data_type(onnx::TensorProto::UINT32);
  p.add_dims(1);
  p.add_uint64_data(uint64_t{1} << 32);
  StatusOr<ir::Tensor> t = TensorFromProto(p, kNoExternal, "initializer 'u'");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("initializer 'u': uint64_data[0] = 4294967296"));
}

TEST(TensorProto, ValuesInTheWrongTypedFieldAreRefused) {
  onnx::TensorProto p;
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(1);
  p.add_int32_data(1);
  StatusOr<ir::Tensor> t = TensorFromProto(p, kNoExternal, "initializer 'f'");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("initializer 'f': float tensor has values in int32_data"));
}

TEST(TensorProto, RawAndTypedDataTogetherAreRefused) {
  onnx::TensorProto p = testing::FloatTensor("w", {1}, {1});
  p.add_float_data(1);
  StatusOr<ir::Tensor> t = TensorFromProto(p, kNoExternal, "initializer 'w'");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("initializer 'w': tensor has both raw_data and typed data"));
}

TEST(TensorProto, UnknownAndMissingDataTypesAreRefused) {
  onnx::TensorProto p;
  p.add_dims(1);
  p.set_raw_data("abcd");
  p.set_data_type(27);
  StatusOr<ir::Tensor> t = TensorFromProto(p, kNoExternal, "initializer 'x'");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("initializer 'x': unknown data_type code 27"));
  p.set_data_type(-3);
  EXPECT_THAT(TensorFromProto(p, kNoExternal, "x").status().message(), HasSubstr("unknown data_type code -3"));
  p.clear_data_type();
  EXPECT_THAT(TensorFromProto(p, kNoExternal, "x").status().message(), HasSubstr("no data_type"));
}

TEST(TensorProto, NegativeDimIsRefused) {
  onnx::TensorProto p = testing::FloatTensor("w", {-1, 2}, {1, 2});
  StatusOr<ir::Tensor> t = TensorFromProto(p, kNoExternal, "initializer 'w'");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("initializer 'w'"));
  EXPECT_THAT(t.status().message(), HasSubstr("negative"));
}

TEST(TensorProto, AbsurdDimsAreRefusedWithoutAllocating) {
  // 2^80 elements overflow; 2^40 elements do not, but the 4 bytes present cannot hold them. Either way the
  // importer must answer from the sizes alone (an allocation of 4 TiB would fail or take the machine down).
  for (std::vector<int64_t> dims :
       {std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 40}, std::vector<int64_t>{int64_t{1} << 40}}) {
    onnx::TensorProto p = testing::FloatTensor("huge", {}, {1});
    for (int64_t d : dims) p.add_dims(d);
    StatusOr<ir::Tensor> t = TensorFromProto(p, kNoExternal, "initializer 'huge'");
    ASSERT_FALSE(t.ok());
    EXPECT_THAT(t.status().message(), HasSubstr("initializer 'huge'"));
    p.clear_raw_data();
    p.add_float_data(1);
    t = TensorFromProto(p, kNoExternal, "initializer 'huge'");
    ASSERT_FALSE(t.ok());
    EXPECT_THAT(t.status().message(), HasSubstr("initializer 'huge'"));
    // Strings too: no vector of 2^40 strings may be made for one string_data entry.
    p.clear_float_data();
    p.set_data_type(onnx::TensorProto::STRING);
    p.add_string_data("x");
    t = TensorFromProto(p, kNoExternal, "initializer 'huge'");
    ASSERT_FALSE(t.ok());
    EXPECT_THAT(t.status().message(), HasSubstr("initializer 'huge'"));
  }
}

TEST(TensorProto, ExternalDataIsRefusedWithoutAFolder) {
  onnx::TensorProto p;
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(1);
  p.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = p.add_external_data();
  kv->set_key("location");
  kv->set_value("w.bin");
  StatusOr<ir::Tensor> t = TensorFromProto(p, kNoExternal, "initializer 'w'");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("initializer 'w': external data 'w.bin' refused"));
}

}  // namespace
}  // namespace onnxamp::importer
