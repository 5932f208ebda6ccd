// Seeds and counter-based random numbers shared by every backend and the trainer: splitmix64's mixing function
// (the same numbers on every machine and compiler, unlike std:: distributions), and the per-node, per-run seeds.
#pragma once

#include <cstdint>
#include <string_view>

#include "runtime/common/host_device.h"

namespace onnxamp {

// The golden-ratio increment of splitmix64.
constexpr uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ull;

// splitmix64's output function: a bijective 64-bit mix. splitmix64's n-th number (1-based) from state s is
// SplitMix64Mix(s + n * kSplitMixGamma).
ONNXAMP_HOST_DEVICE inline uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// FNV-1a over the bytes of `s` (names to seeds).
inline uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// The seed of one run of a random op: `base` itself for run step 0 (so a model run once gives what it always gave),
// a new well-mixed seed for every other step.
inline uint64_t SeedForStep(uint64_t base, uint64_t step) {
  return step == 0 ? base : SplitMix64Mix(base ^ SplitMix64Mix(step * kSplitMixGamma));
}

}  // namespace onnxamp
