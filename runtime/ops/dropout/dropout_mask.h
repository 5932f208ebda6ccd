// Dropout's random mask: a counter-based hash, so that every backend (and a test) computes the same mask for the
// same seed without sharing generator state, in any order and on any number of threads.
#pragma once

#include <cstdint>

#include "runtime/common/host_device.h"
#include "runtime/common/random.h"

namespace onnxamp::ops {

// A uniform number in [0, 1) with 24 random bits for element `index` under `seed` (splitmix64 of both). Dropout
// keeps element i when DropoutUniform(seed, i) >= ratio. Host and device code (the CUDA kernel uses it too).
ONNXAMP_HOST_DEVICE inline float DropoutUniform(uint64_t seed, uint64_t index) {
  return static_cast<float>(SplitMix64Mix(seed + kSplitMixGamma * (index + 1)) >> 40) * 0x1.0p-24f;
}

// SeedForStep (runtime/common/random.h) for host and device code: the CUDA kernels mix a device-resident RNG step
// into the node's base seed with it when a captured training step is replayed.
ONNXAMP_HOST_DEVICE inline uint64_t DropoutSeedForStep(uint64_t base, uint64_t step) {
  return step == 0 ? base : SplitMix64Mix(base ^ SplitMix64Mix(step * kSplitMixGamma));
}

}  // namespace onnxamp::ops
