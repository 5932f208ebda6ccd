// Cast kernels on the GPU, bit for bit against runtime/common/half.h; argument checks run without a GPU too.
#include "runtime/cuda/cast_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/common/half.h"
#include "runtime/cuda/device.h"

namespace onnxamp::cuda {
namespace {

// Floats that exercise rounding: a strided sweep over all bit patterns, every fp16 tie and its neighbours, and
// deterministic random values.
std::vector<float> FloatSweep() {
  std::vector<float> values;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 509) values.push_back(BitsToFloat(static_cast<uint32_t>(u)));
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double lo = HalfBitsToFloat(static_cast<uint16_t>(h));
    const double hi = h + 1 < 0x7c00 ? HalfBitsToFloat(static_cast<uint16_t>(h + 1)) : 65536.0;
    const float mid = static_cast<float>((lo + hi) / 2);
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      values.push_back(f);
      values.push_back(-f);
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 1 << 20; ++i) values.push_back(BitsToFloat(static_cast<uint32_t>(rng())));
  return values;
}

std::vector<uint16_t> AllSixteenBitPatterns() {
  std::vector<uint16_t> v(1 << 16);
  for (uint32_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint16_t>(i);
  return v;
}

class CastKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    for (void* p : allocations_) cudaFree(p);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  void* DeviceAlloc(size_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    allocations_.push_back(p);
    return p;
  }

  // Runs `launch` on `input` copied to src + src_offset elements, writing dst + dst_offset, and checks every output
  // bit for bit against `expected`, and that the destination's surrounding elements were not touched.
  template <typename Src, typename Dst, typename Launch, typename Expect>
  void Check(const std::vector<Src>& input, size_t src_offset, size_t dst_offset, Launch launch, Expect expected) {
    SCOPED_TRACE(::testing::Message() << "n=" << input.size() << " src_offset=" << src_offset
                                      << " dst_offset=" << dst_offset);
    constexpr size_t kGuard = 16;
    const size_t n = input.size();
    auto* src = static_cast<Src*>(DeviceAlloc((n + src_offset) * sizeof(Src) + 16));
    auto* dst = static_cast<Dst*>(DeviceAlloc((n + dst_offset + kGuard) * sizeof(Dst)));
    ASSERT_EQ(cudaMemset(dst, 0xa5, (n + dst_offset + kGuard) * sizeof(Dst)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(src + src_offset, input.data(), n * sizeof(Src), cudaMemcpyHostToDevice), cudaSuccess);
    Status st = launch(src + src_offset, dst + dst_offset, n);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    std::vector<Dst> out(n + dst_offset + kGuard);
    ASSERT_EQ(cudaMemcpy(out.data(), dst, out.size() * sizeof(Dst), cudaMemcpyDeviceToHost), cudaSuccess);
    Dst canary;
    std::memset(&canary, 0xa5, sizeof(canary));
    for (size_t i = 0; i < out.size(); ++i) {
      if (i < dst_offset || i >= dst_offset + n) {
        ASSERT_EQ(out[i], canary) << "element " << i << " outside the destination was written";
        continue;
      }
      uint32_t got = 0;
      std::memcpy(&got, &out[i], sizeof(Dst));
      ASSERT_EQ(got, expected(input[i - dst_offset])) << "element " << i - dst_offset;
    }
  }

  // The four casts with raw-bit element types.
  auto ToHalf() {
    return [this](float* s, uint16_t* d, size_t n) {
      return CastFloatToHalf(s, reinterpret_cast<Float16*>(d), n, stream_);
    };
  }
  auto FromHalf() {
    return [this](uint16_t* s, float* d, size_t n) {
      return CastHalfToFloat(reinterpret_cast<const Float16*>(s), d, n, stream_);
    };
  }
  auto ToBFloat16() {
    return [this](float* s, uint16_t* d, size_t n) {
      return CastFloatToBFloat16(s, reinterpret_cast<BFloat16*>(d), n, stream_);
    };
  }
  auto FromBFloat16() {
    return [this](uint16_t* s, float* d, size_t n) {
      return CastBFloat16ToFloat(reinterpret_cast<const BFloat16*>(s), d, n, stream_);
    };
  }

  cudaStream_t stream_ = nullptr;
  std::vector<void*> allocations_;
};

const auto kHalfToFloat = [](uint16_t h) { return FloatBits(HalfBitsToFloat(h)); };
const auto kBf16ToFloat = [](uint16_t h) { return FloatBits(BFloat16BitsToFloat(h)); };
const auto kFloatToHalf = [](float f) { return static_cast<uint32_t>(FloatToHalfBits(f)); };
const auto kFloatToBf16 = [](float f) { return static_cast<uint32_t>(FloatToBFloat16Bits(f)); };

TEST_F(CastKernelsTest, AllSixteenBitPatternsToFloat) {
  const std::vector<uint16_t> all = AllSixteenBitPatterns();
  Check<uint16_t, float>(all, 0, 0, FromHalf(), kHalfToFloat);
  Check<uint16_t, float>(all, 0, 0, FromBFloat16(), kBf16ToFloat);
}

TEST_F(CastKernelsTest, FloatSweepToSixteenBit) {
  const std::vector<float> sweep = FloatSweep();
  Check<float, uint16_t>(sweep, 0, 0, ToHalf(), kFloatToHalf);
  Check<float, uint16_t>(sweep, 0, 0, ToBFloat16(), kFloatToBf16);
}

TEST_F(CastKernelsTest, OddLengthsAndMisalignedPointers) {
  const std::vector<float> sweep = FloatSweep();
  const std::vector<uint16_t> all = AllSixteenBitPatterns();
  for (size_t n : {1, 2, 7, 8, 9, 15, 17, 33, 1000, 4097, (1 << 16) - 5}) {
    const std::vector<float> floats(sweep.begin() + 12345, sweep.begin() + 12345 + n);
    const size_t start = (all.size() - n) / 2;  // centred on 0x8000: NaNs below, -0 and negatives above
    const std::vector<uint16_t> halves(all.begin() + start, all.begin() + start + n);
    for (size_t src_offset : {0, 1, 3, 5}) {
      for (size_t dst_offset : {0, 1, 4, 7}) {
        Check<float, uint16_t>(floats, src_offset, dst_offset, ToHalf(), kFloatToHalf);
        Check<float, uint16_t>(floats, src_offset, dst_offset, ToBFloat16(), kFloatToBf16);
        Check<uint16_t, float>(halves, src_offset, dst_offset, FromHalf(), kHalfToFloat);
        Check<uint16_t, float>(halves, src_offset, dst_offset, FromBFloat16(), kBf16ToFloat);
      }
    }
  }
}

// Argument checks happen before any CUDA call, so these need no GPU.
TEST(CastKernelArguments, RejectedBeforeLaunch) {
  alignas(16) static float floats[32];
  alignas(16) static Float16 halves[32];
  EXPECT_TRUE(CastFloatToHalf(nullptr, nullptr, 0, nullptr).ok());  // nothing to do
  EXPECT_EQ(CastFloatToHalf(nullptr, halves, 4, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CastHalfToFloat(halves, nullptr, 4, nullptr).code(), StatusCode::kInvalidArgument);
  const auto* odd = reinterpret_cast<const float*>(reinterpret_cast<const char*>(floats) + 1);
  Status st = CastFloatToBFloat16(odd, reinterpret_cast<BFloat16*>(halves), 4, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("CastFloatToBFloat16"), std::string::npos) << st.message();
  // The destination overlapping the source.
  EXPECT_EQ(CastBFloat16ToFloat(reinterpret_cast<const BFloat16*>(floats), floats + 1, 8, nullptr).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace onnxamp::cuda
