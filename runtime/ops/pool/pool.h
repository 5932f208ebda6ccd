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

// ---- MaxPoolGrad / AveragePoolGrad (com.onnxamp, runtime/ops/gradient_ops.h) ----------------------------------------

// The dims an int64 shape input (a host tensor) holds (input `index`, named `what`): 1-D, every dim >= 0.
StatusOr<std::vector<int64_t>> ReadPoolShapeInput(const ir::Tensor* t, int index, const char* what);

// dY (input 0) of a pooling gradient: present and of a float type.
Status CheckPoolGradInput(const ir::Tensor* dy);

// MaxPoolGrad's Indices (input 1): an int64 tensor of dY's shape.
Status CheckMaxPoolGradIndices(const ir::Tensor* dy, const ir::Tensor* indices);

// AveragePoolGrad: X_shape `x_dims` must be [N, C] and one spatial dim per kernel_shape dim, and dY AveragePool's
// output for it; gives the forward's window geometry.
Status ResolveAveragePoolGrad(const PoolAttrs& attrs, const ir::Tensor* dy, const std::vector<int64_t>& x_dims,
                              WindowGeometry* g);

}  // namespace onnxamp::ops
