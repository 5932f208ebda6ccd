// ScatterElements, Scatter and ScatterND: the `reduction` attribute and the check of updates, shared by the CPU
// kernel (scatter_cpu.cc) and the CUDA kernels (runtime/cuda/ops/tensor/scatter_cuda.cc): same checks, same messages.
// See scatter_cpu.cc for the semantics.
#pragma once

#include <string>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

enum class ScatterReduction { kNone = 0, kAdd = 1, kMul = 2, kMax = 3, kMin = 4 };

// The attribute `reduction` at the node's opset: none; add and mul from 16; max and min from 18 (InvalidArgument
// otherwise).
inline StatusOr<ScatterReduction> ParseScatterReduction(const exec::KernelInfo& info) {
  const std::string r = info.node.GetString("reduction", "none");
  if (r == "none") return ScatterReduction::kNone;
  if (r == "add" && info.opset >= 16) return ScatterReduction::kAdd;
  if (r == "mul" && info.opset >= 16) return ScatterReduction::kMul;
  if (r == "max" && info.opset >= 18) return ScatterReduction::kMax;
  if (r == "min" && info.opset >= 18) return ScatterReduction::kMin;
  return InvalidArgument("attribute 'reduction' '", r, "' is not defined at opset ", info.opset,
                         " (none; add and mul from 16; max and min from 18)");
}

// Updates (input 2) must have data's type and the dims `want`.
inline Status CheckScatterUpdates(const exec::KernelContext& ctx, const ir::Tensor& data, const ir::Tensor& updates,
                                  const std::vector<int64_t>& want) {
  if (updates.dtype() != data.dtype()) {
    return InvalidArgument(InputLabel(ctx, 2, "updates"), " has element type ", DTypeName(updates.dtype()),
                           ", expected ", DTypeName(data.dtype()), " (the type of data)");
  }
  if (updates.dims() != want) {
    return InvalidArgument(InputLabel(ctx, 2, "updates"), " has shape ", ShapeToString(updates.dims()), ", expected ",
                           ShapeToString(want));
  }
  return Status::Ok();
}

}  // namespace onnxamp::ops
