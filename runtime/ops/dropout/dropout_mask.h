// Dropout's random mask: a counter-based hash, so that every backend (and a test) computes the same mask for the
// same seed without sharing generator state, in any order and on any number of threads.
#pragma once

#include <cstdint>

#include "runtime/common/host_device.h"

namespace onnxamp::ops {

// A uniform number in [0, 1) with 24 random bits for element `index` under `seed` (splitmix64 of both). Dropout
// keeps element i when DropoutUniform(seed, i) >= ratio. Host and device code (the CUDA kernel uses it too).
ONNXAMP_HOST_DEVICE inline float DropoutUniform(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1.0p-24f;
}

}  // namespace onnxamp::ops
