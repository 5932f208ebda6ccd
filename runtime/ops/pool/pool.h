// MaxPool's and AveragePool's attributes and the input checks of every pooling op, shared by the CPU kernel and
// device kernels (the same checks and messages on every backend).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/common/conv_geometry.h"

namespace onnxamp::ops {

struct PoolAttrs {
  WindowAttrs window;  // kernel_shape required
  bool max = true;
  bool ceil_mode = false;
  bool count_include_pad = false;  // AveragePool
  int64_t storage_order = 0;       // MaxPool's Indices: 0 row-major, 1 column-major
};

// Reads the attributes of a MaxPool (`max`) or AveragePool node; errors name the attribute.
Status ParsePoolAttrs(const ir::Node& node, bool max, PoolAttrs* out);

// Checks X (present, rank >= 3, as many spatial dims as kernel_shape) and resolves the window: the geometry and the
// output shape [N, C, out...].
Status ResolvePool(const PoolAttrs& attrs, const ir::Tensor* x, WindowGeometry* g, std::vector<int64_t>* out_dims);

// GlobalAveragePool / GlobalMaxPool: checks X (present, rank >= 2, spatial elements when there are planes) and
// gives the output shape [N, C, 1...], the number of planes N * C and the elements per plane.
Status ResolveGlobalPool(const ir::Tensor* x, std::vector<int64_t>* out_dims, int64_t* planes, int64_t* size);

}  // namespace onnxamp::ops
