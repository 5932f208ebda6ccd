// Registration of CUDA kernels that cover exactly what the CPU kernel of their op covers.
#pragma once

#include <string_view>
#include <vector>

#include "runtime/executor/kernel.h"

namespace onnxamp::cuda {

// Registers `factory` as the CUDA kernel of `op` (of `domain`) for every opset range the CPU registry has that op
// with, with the CPU kernel's element types and type input, and `host_inputs` (see KernelDef). A CUDA kernel that
// takes what its CPU kernel takes says so here once instead of restating the CPU's table. The CPU must register the
// op (ONNXAMP_CHECK).
void RegisterLikeCpu(exec::KernelRegistry& r, std::string_view op, exec::KernelFactory factory,
                     std::vector<int> host_inputs = {}, std::string_view domain = "");

}  // namespace onnxamp::cuda
