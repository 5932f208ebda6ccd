// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord framing: a table-driven version
// and an SSE4.2 one, picked at run time, with TensorFlow's mask for checksums stored next to the data.
#pragma once

#include <cstdint>
#include <string_view>

namespace onnxamp::trainer {

// The CRC32C of `data`, continuing `crc` (the CRC32C of the bytes before; 0 to start). Uses the SSE4.2 crc32
// instruction when the CPU has it, otherwise Crc32cPortable.
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

// The same value from a 256-entry table, one byte at a time.
uint32_t Crc32cPortable(std::string_view data, uint32_t crc = 0);

// Whether this CPU has SSE4.2's crc32 instruction (x86-64 only), i.e. whether Crc32cHardware may be called.
bool Crc32cHasHardware();
// The same value from SSE4.2's crc32 instruction; only when Crc32cHasHardware().
uint32_t Crc32cHardware(std::string_view data, uint32_t crc = 0);

// TensorFlow's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8, so that a CRC of data holding CRCs stays
// well-distributed. UnmaskCrc32c inverts it.
inline uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace onnxamp::trainer
