// Max pooling on the blocked channel layout with AVX2: BlockedMaxPool's fast path (blocked_cpu.cc). A blocked tensor
// [N, Cb, spatial..., b] keeps the b channels of a block side by side, so one window position is one (b = 8) or two
// (b = 16) AVX2 vectors and the whole pooling is a vertical maximum of vectors, with no reorder and no oneDNN call.
#pragma once

#include <cstdint>

#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/conv_geometry.h"

namespace onnxamp::ops {

// True when BlockedMaxPoolAvx2 runs `g` with block `block` on this CPU: the CPU has AVX2, the block is 8 or 16, there
// are 1 to 3 spatial dims, and every window holds at least one input position (a window that lies wholly in the
// padding is left to the general path, which keeps the blocked layout's padding lanes as it defines them).
bool BlockedMaxPoolAvx2Applies(const WindowGeometry& g, int64_t block);

// y [n, cb, g.out..., block] = the maximum of x [n, cb, g.in..., block] over each window, lane by lane, as the
// reference MaxPool computes it per channel: positions in the padding are skipped and NaN wins. Splits the output
// rows over `threads`. Only where BlockedMaxPoolAvx2Applies(g, block).
void BlockedMaxPoolAvx2(const WindowGeometry& g, int64_t n, int64_t cb, int64_t block, const float* x, float* y,
                        exec::ThreadPool& threads);

}  // namespace onnxamp::ops
