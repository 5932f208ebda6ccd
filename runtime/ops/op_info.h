// One place per op: the facts the runtime, the converter and the trainer need about an op beyond its kernels (whether
// it is random, the converter's default precision for it, its gradient builders or why it has none). Each op folder
// registers the OpInfos of its ops from one function (`runtime/ops/<op>/<op>_grad.cc` where the op has gradient
// builders, else `<op>_info.cc`); runtime/ops/op_infos.cc lists those functions explicitly (static registration
// objects would be dropped by the linker from a static library) and holds the ops the runtime has no kernel for.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ops/decompose.h"
#include "runtime/ops/gradient.h"

namespace onnxamp::ops {

// The converter's default precision class of an op (converter/policy.cc; DESIGN.md has the rules): computed in the
// low-precision type, kept in FP32, or following its inputs.
enum class DefaultPrecision { kFollow, kLow, kKeep };

// Opsets 1-5 (2017 and older; before the legacy consumed_inputs attribute went away) are not trained: an op's
// builders must cover every opset of its CPU kernel from this one on, unless the OpInfo says why they start later.
inline constexpr int64_t kOldestTrainedOpset = 6;

// The not-differentiable reason of the com.onnxamp ops the gradient builders emit.
inline constexpr char kBackwardOpReason[] = "a backward op: the autodiff differentiates forward graphs only";

struct OpInfo {
  std::string domain;  // "" for ONNX; exec::kInternalDomain ("com.onnxamp") for the runtime's own ops
  std::string op_type;
  // False for the ops the runtime has no CPU kernel for, known here for the converter and the placement only.
  bool cpu_kernel = true;
  // False for ops whose result changes from run to run (the Random* ops, Multinomial, Bernoulli, Dropout): never
  // folded into a constant.
  bool deterministic = true;
  // The converter's default for the op (ONNX ops only: the policy lets every other domain follow), and why.
  DefaultPrecision precision = DefaultPrecision::kFollow;
  std::string precision_reason;
  // A string attribute that, set to anything but "none", keeps an op the table lets follow in FP32 (ScatterND's and
  // ScatterElements' `reduction`: add, mul, max and min accumulate into their data). Empty for most ops.
  std::string keep_unless_none;
  // Why the op has no gradient (integer or bool results, shapes, backward ops); empty when it has builders.
  std::string not_differentiable;
  // The gradient builders, by opset range (ranges do not overlap).
  std::vector<GradientDef> gradients;
  // Instead of builders: the op rewritten as ops that have them (runtime/ops/decompose.h), which the autodiff does
  // when a gradient has to flow through the op (backward ops whose own gradient is a long formula).
  Decomposition decompose = nullptr;
  // Why the builders start after kOldestTrainedOpset although the CPU kernel covers earlier opsets; empty otherwise.
  std::string gradient_floor_reason;
  // Inputs of a differentiable op that take no gradient although they may be floating (Resize's roi, scales and sizes,
  // a loss's class weights), at every opset the op has them, and what they are. The autodiff lets no gradient flow
  // into them: a weight that reaches the loss only through such inputs is not trained (trainer::SelectParameters
  // leaves it out), as PyTorch leaves a registered buffer.
  std::vector<int> no_gradient_inputs;
  std::string no_gradient_inputs_reason;

  // Setters for the registration functions: r.Add("Exp").Keep("...").Gradient(6, INT64_MAX, &Exp).
  OpInfo& Low(std::string reason);
  OpInfo& Keep(std::string reason);
  OpInfo& KeepUnlessNone(std::string attribute);
  OpInfo& Random();
  OpInfo& NoCpuKernel();
  OpInfo& NotDifferentiable(std::string reason);
  OpInfo& Gradient(int64_t since, int64_t until, GradientBuilder build);
  OpInfo& GradientFloor(std::string reason);
  OpInfo& Decompose(Decomposition d);
  OpInfo& NoGradientInputs(std::vector<int> inputs, std::string what);

  // Whether input `i` takes no gradient (no_gradient_inputs).
  bool NoGradientInput(size_t i) const;

  // "Add", "com.onnxamp:ReluGrad".
  std::string Name() const;
};

class OpInfoRegistry {
 public:
  // Appends the OpInfo of `op_type` in `domain` and returns it to fill in (valid until the next Add).
  OpInfo& Add(std::string op_type, std::string domain = "");
  // The OpInfo of `op_type` in `domain` ("ai.onnx" is ""); null when no op folder registers one.
  const OpInfo* Find(std::string_view domain, std::string_view op_type) const;
  // Whether input `input` of `op_type` in `domain` may take a gradient: false for the op's no_gradient_inputs, true
  // otherwise (ops without an OpInfo included; whether the op has builders at all is the GradientRegistry's to say).
  bool TakesGradient(std::string_view domain, std::string_view op_type, size_t input) const;
  // Every OpInfo, in registration order.
  const std::vector<OpInfo>& ops() const { return ops_; }
  // The first inconsistency, naming the op: an op registered twice, a builder range that is empty or overlaps
  // another, builders beside a not-differentiable reason (or a decomposition beside either), a gradient floor reason
  // that no longer explains anything, a precision class without a reason (or on another domain than ONNX's).
  Status Check() const;

  // Every op of the runtime (runtime/ops/op_infos.cc).
  static const OpInfoRegistry& Global();

 private:
  std::vector<OpInfo> ops_;
  std::map<std::string, size_t, std::less<>> index_;  // Name() -> first OpInfo with it
};

}  // namespace onnxamp::ops
