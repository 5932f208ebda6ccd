// The mixed-precision conversion: runs the converter's passes in order over a model and reports what changed.
//
//   1. classify            (classify_pass)       a Decision per node from the PrecisionPolicy
//   2. insert casts        (insert_casts_pass)   one Cast per (tensor, target type), shared by all consumers
//   3. convert initializers/Constants            clamp to the target's range, count flushes to zero
//   4. update dtypes       Cast `to`, ConstantOfShape, Random*/EyeLike/*Like `dtype`, value_info, graph I/O
//   5. pinned FP32 inputs  Resize scales/roi, index and shape inputs are never converted
//   6. fold casts          lossless pairs (low->FP32->low) and no-op casts only
//   7. subgraphs           If/Loop/Scan bodies converted with the same policy, outer-scope types consistent
// Each pass is `Status Run(ir::Graph&, bool* changed)`; ConvertModel either succeeds or leaves the model as
// it found it (it converts a clone and swaps it in).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "converter/policy.h"
#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/ir/model.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::converter {

struct ConvertOptions {
  DType target = DType::kFloat16;  // kFloat16 or kBFloat16
  PrecisionPolicy policy = PrecisionPolicy::Default();
  // Keep FP32 graph inputs/outputs: one Cast after each converted input, one before each converted output.
  bool keep_io_types = false;
  // BF16 needs opset 13 for most ops: raise the default-domain opset to 13 when lower (false: refuse instead).
  bool allow_opset_upgrade = true;
  // For graphs only onnxamp runs (the trainer's): bfloat16 also goes where ONNX added it in an opset after the
  // model's, up to this one (Conv, ConvTranspose, the pools and more at 22), as the runtime's kernels take it there.
  // 0: the model's opset decides, and the converted model is valid ONNX at its opset.
  int64_t bfloat16_types_opset = 0;
  // After raising the opset with ONNX's version converter: the model and the raised one run forward and an output that
  // differs refuses the conversion (CompareForward).
  struct UpgradeCheck {
    bool enabled = true;
    // The graph inputs by name (any error running them refuses), or empty: SyntheticInputs, where an error running
    // them is a warning of the report.
    std::vector<ir::Tensor> inputs;
    std::string inputs_are = "the first sample set";  // what `inputs` are, for the messages
    int threads = 1;
  } upgrade_check;
};

// Per-initializer (or Constant) numeric report.
struct TensorConversion {
  std::string name;
  int64_t elements = 0;
  int64_t clamped = 0;          // |x| > the target's max finite value, clamped to ±max (fp16: 65504)
  int64_t flushed_to_zero = 0;  // non-zero values that became ±0
  bool duplicated = false;      // used by FP32 and low-precision consumers: a low-precision copy was added
};

struct KeptNode {
  std::string name;  // node name (or its Describe() when unnamed)
  std::string op_type;
  std::string reason;  // Decision::reason
};

struct ConvertReport {
  DType target = DType::kFloat16;
  int64_t nodes_total = 0;  // all nodes, subgraphs included, Casts we inserted excluded
  int64_t nodes_low = 0;    // nodes computing in the target type after conversion
  int64_t casts_inserted = 0;
  int64_t casts_folded = 0;  // Casts removed by the fold pass (ours or pre-existing)
  int64_t casts_final = 0;   // Cast nodes in the converted model
  int64_t initializers_converted = 0;
  int64_t bytes_before = 0;  // initializer bytes
  int64_t bytes_after = 0;
  int64_t opset_before = 0;
  int64_t opset_after = 0;
  std::vector<TensorConversion> tensors;  // one entry per converted initializer/Constant
  std::vector<KeptNode> kept_fp32;        // nodes that stay FP32 where the policy's table alone would not say so
  std::vector<std::string> warnings;

  std::string ToJson() const;   // the --report file
  std::string Summary() const;  // the lines `onnxamp convert` prints
};

// Converts `model` in place. Errors (unsupported target, a graph the passes cannot type, an opset BF16 cannot
// use when allow_opset_upgrade is false) leave the model unchanged and name the node or value concerned.
Status ConvertModel(ir::Model& model, const ConvertOptions& options, ConvertReport* report = nullptr);

// The first default-domain node (subgraphs included) whose op changed between opsets `from` and `to`, or nullptr:
// raising a model without one only changes its opset import, with one UpgradeOpset rewrites the nodes.
const ir::Node* FirstChangedOp(const ir::Graph& g, int64_t from, int64_t to);

// `model` raised to default-domain `opset` by ONNX's version converter (onnx::version_conversion::ConvertVersion), with
// Softmax/LogSoftmax/Hardmax adapted by the converter itself (docs/converter.md, BF16). The graph's inputs and outputs
// keep their names and declared types, initializers their names and values. An error names what could not be raised.
StatusOr<ir::Model> UpgradeOpset(const ir::Model& model, int64_t opset);

// Runs `model` and `raised` (`model` raised to a newer opset by UpgradeOpset) forward on `inputs` (by name) on the CPU,
// inference mode: each output must have the same type, dims and values (float32 and double within 1e-5 + 1e-4 |x|,
// fp16 and bf16 within a few units of their precision, NaN for NaN; other types bit for bit). ONNX's version
// converter's adapters have been wrong before (docs/converter.md), and a wrong one computes another function without an
// error. Otherwise FailedPrecondition naming the output and the first element that differs `on` these inputs ("the
// first batch"); an error running either model is returned with context.
Status CompareForward(ir::Model model, ir::Model raised, const std::vector<ir::Tensor>& inputs, std::string_view on,
                      int threads = 1);

// Inputs for `model`'s graph inputs (those without an initializer): floats uniform in [-1, 1) from `seed`, integers
// and booleans 0 (a valid index), each symbolic or unknown dim 2 (a batch of one would hide a raise that mixes the
// batch's rows). Unimplemented for an input without a declared
// shape or of a type without a tensor.
StatusOr<std::vector<ir::Tensor>> SyntheticInputs(const ir::Model& model, uint32_t seed);

// True when every floating value of the model already has the type ConvertModel would give it: converting
// again changes nothing (the idempotence contract).
bool IsConverted(const ir::Model& model, const ConvertOptions& options);

}  // namespace onnxamp::converter
