// The random numbers of the Random* ops, Bernoulli and Multinomial: counter-based, so element i of a run is a pure
// function of (seed, i) and the result does not depend on the thread count or the order elements are computed in.
#pragma once

#include <cmath>
#include <cstdint>

#include "runtime/common/host_device.h"
#include "runtime/common/random.h"

namespace onnxamp::ops {

// A uniform double in [0, 1) with 53 random bits: number `index` of stream `seed`.
ONNXAMP_HOST_DEVICE inline double UniformDouble(uint64_t seed, uint64_t index) {
  return static_cast<double>(SplitMix64Mix(seed + kSplitMixGamma * (index + 1)) >> 11) * 0x1.0p-53;
}

// A standard normal number for element `index` (Box-Muller on the uniforms 2 * index and 2 * index + 1; the first is
// taken from (0, 1] so that its logarithm is finite).
ONNXAMP_HOST_DEVICE inline double NormalDouble(uint64_t seed, uint64_t index) {
  const double u1 = 1.0 - UniformDouble(seed, 2 * index);
  const double u2 = UniformDouble(seed, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// The bits of the largest float16 or bfloat16 value below the finite value with bits `b` (sign and magnitude: one unit
// toward -inf; below +-0 the smallest negative subnormal). A uniform's draw that rounds up to `high` moves there.
ONNXAMP_HOST_DEVICE inline uint16_t NextBelowHalfBits(uint16_t b) {
  if ((b & 0x7fff) == 0) return 0x8001;
  return static_cast<uint16_t>((b & 0x8000) ? b + 1 : b - 1);
}

}  // namespace onnxamp::ops
