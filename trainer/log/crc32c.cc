// CRC32C: a byte-wise table and, on x86-64 CPUs with SSE4.2, the crc32 instruction (8 bytes at a time).
#include "trainer/log/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace onnxamp::trainer {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // 0x1EDC6F41 bit-reversed

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = MakeTable();

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t HardwareCrc(std::string_view data, uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  uint64_t c = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

bool DetectHardware() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}
#endif

using CrcFunction = uint32_t (*)(std::string_view, uint32_t);

CrcFunction Choose() {
#if defined(__x86_64__)
  if (DetectHardware()) return &HardwareCrc;
#endif
  return &Crc32cPortable;
}

}  // namespace

uint32_t Crc32cPortable(std::string_view data, uint32_t crc) {
  uint32_t c = ~crc;
  for (unsigned char b : data) c = kTable[(c ^ b) & 0xffu] ^ (c >> 8);
  return ~c;
}

bool Crc32cHasHardware() {
#if defined(__x86_64__)
  static const bool has = DetectHardware();
  return has;
#else
  return false;
#endif
}

uint32_t Crc32cHardware(std::string_view data, uint32_t crc) {
#if defined(__x86_64__)
  return HardwareCrc(data, crc);
#else
  return Crc32cPortable(data, crc);
#endif
}

uint32_t Crc32c(std::string_view data, uint32_t crc) {
  static const CrcFunction function = Choose();
  return function(data, crc);
}

}  // namespace onnxamp::trainer
