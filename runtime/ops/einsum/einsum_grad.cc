// Einsum's gradient builder. For operand k with term t_k, dX_k is an Einsum of dY (with the output term) and the
// other operands onto t_k: "out,t_1,..,t_k-1,t_k+1,..->t_k". Labels of t_k that appear nowhere else (summed within
// operand k alone) cannot be einsum outputs: they are left out, put back as size-1 dims (Unsqueeze) and broadcast to
// X_k's shape (Expand). Broadcasting (size-1 labels, ellipsis dims of smaller rank or size 1) is undone by summing
// the result to X_k's shape (SumToShape; when the ellipsis does not lead the term, the extra leading ellipsis dims
// are summed first, which needs the inputs' ranks to be known; a term without an ellipsis among terms with one gets
// the ellipsis dims in front, summed away likewise). Refused at build time, naming the term: a label
// repeated within one term (a diagonal), and an ellipsis in an input term that the explicit output drops.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "runtime/ops/einsum/einsum_equation.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

std::string TermString(const EinsumTerm& t) {
  std::string s;
  for (size_t j = 0; j <= t.letters.size(); ++j) {
    if (static_cast<int>(j) == t.ellipsis_at) s += "...";
    if (j < t.letters.size()) s += EinsumLabelName(t.letters[j]);
  }
  return s;
}

// The output term: explicit, or the implicit one (ellipsis, then the letters used exactly once in ASCII order).
EinsumTerm OutputTerm(const EinsumEquation& eq) {
  if (eq.explicit_output) return eq.output;
  EinsumTerm out;
  std::vector<int> count(52, 0);
  for (const EinsumTerm& t : eq.inputs) {
    if (t.ellipsis_at >= 0) out.ellipsis_at = 0;
    for (int l : t.letters) ++count[static_cast<size_t>(l)];
  }
  std::vector<std::pair<char, int>> once;
  for (int l = 0; l < 52; ++l) {
    if (count[static_cast<size_t>(l)] == 1) once.emplace_back(EinsumLabelName(l)[0], l);
  }
  std::sort(once.begin(), once.end());
  for (const auto& [c, l] : once) out.letters.push_back(l);
  return out;
}

Status EinsumGradient(GradContext& ctx) {
  const ir::Node& node = ctx.node();
  ONNXAMP_ASSIGN_OR_RETURN(const EinsumEquation eq, EinsumEquationOf(node));
  const size_t n = eq.inputs.size();
  if (n != node.inputs().size()) {
    return InvalidArgument("equation has ", n, " input terms, the node ", node.inputs().size(), " inputs");
  }
  for (const EinsumTerm& t : eq.inputs) {
    std::vector<bool> seen(52, false);
    for (int l : t.letters) {
      if (seen[static_cast<size_t>(l)]) {
        return Unimplemented("Einsum term '", TermString(t), "' repeats label '", EinsumLabelName(l),
                             "' (a diagonal): no gradient");
      }
      seen[static_cast<size_t>(l)] = true;
    }
  }
  const EinsumTerm out = OutputTerm(eq);
  if (!ctx.dY(0)) return Status::Ok();
  for (size_t k = 0; k < n; ++k) {
    if (!ctx.NeedsDX(k)) continue;
    EinsumTerm tk = eq.inputs[k];
    if (tk.ellipsis_at >= 0 && out.ellipsis_at < 0) {
      return Unimplemented("Einsum term '", TermString(tk), "' has an ellipsis that the output drops: no gradient");
    }
    // A term without an ellipsis among terms with one: the gradient gets the ellipsis dims in front (an einsum
    // output must keep them), which SumToShape sums away.
    bool ellipsis_elsewhere = out.ellipsis_at >= 0;
    for (size_t j = 0; j < n; ++j) ellipsis_elsewhere = ellipsis_elsewhere || (j != k && eq.inputs[j].ellipsis_at >= 0);
    if (tk.ellipsis_at < 0 && ellipsis_elsewhere) tk.ellipsis_at = 0;
    // The gradient equation and its inputs: dY, then the other operands.
    std::string equation = TermString(out);
    std::vector<ir::Value*> inputs = {ctx.dY(0)};
    std::vector<bool> elsewhere(52, false);
    for (int l : out.letters) elsewhere[static_cast<size_t>(l)] = true;
    for (size_t j = 0; j < n; ++j) {
      if (j == k) continue;
      equation += ',';
      equation += TermString(eq.inputs[j]);
      inputs.push_back(ctx.X(j));
      for (int l : eq.inputs[j].letters) elsewhere[static_cast<size_t>(l)] = true;
    }
    EinsumTerm kept;               // t_k without the labels found nowhere else
    std::vector<int64_t> dropped;  // their axes in t_k with the ellipsis expanded (negative after the ellipsis)
    const int64_t after = tk.ellipsis_at < 0 ? 0 : static_cast<int64_t>(tk.letters.size()) - tk.ellipsis_at;
    for (size_t j = 0; j < tk.letters.size(); ++j) {
      if (static_cast<int>(j) == tk.ellipsis_at) kept.ellipsis_at = static_cast<int>(kept.letters.size());
      if (elsewhere[static_cast<size_t>(tk.letters[j])]) {
        kept.letters.push_back(tk.letters[j]);
      } else {
        const int64_t jj = static_cast<int64_t>(j);
        dropped.push_back(tk.ellipsis_at >= 0 && jj >= tk.ellipsis_at ? jj - tk.ellipsis_at - after : jj);
      }
    }
    if (tk.ellipsis_at == static_cast<int>(tk.letters.size())) kept.ellipsis_at = static_cast<int>(kept.letters.size());
    equation += "->";
    equation += TermString(kept);
    ir::Value* grad =
        ctx.Emit("Einsum", inputs, 1, {ir::Attribute::String("equation", equation)}, "", ctx.TypeOf(ctx.X(k)))[0];
    if (tk.ellipsis_at > 0) {
      // The ellipsis dims of the result are those of the widest operand: sum the leading ones X_k lacks.
      int64_t widest = 0, own = 0;
      for (size_t j = 0; j < n; ++j) {
        if (eq.inputs[j].ellipsis_at < 0) continue;
        const int64_t rank = ctx.RankOf(ctx.X(j));
        if (rank < 0) {
          return Unimplemented("Einsum term '", TermString(tk), "' has an ellipsis after a label and input ", j,
                               " has no known rank: no gradient");
        }
        const int64_t e = rank - static_cast<int64_t>(eq.inputs[j].letters.size());
        widest = std::max(widest, e);
        if (j == k) own = e;
      }
      if (widest > own) {
        std::vector<int64_t> axes;
        for (int64_t e = 0; e < widest - own; ++e) axes.push_back(kept.ellipsis_at + e);
        grad = ctx.EmitReduceSum(grad, axes, /*keepdims=*/false);
      }
    }
    if (!dropped.empty()) {
      grad = ctx.EmitUnsqueeze(grad, dropped);
      grad = ctx.Emit1("Expand", {grad, ctx.ShapeOf(ctx.X(k))});
    }
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(k, ctx.SumToShape(grad, ctx.X(k))));
  }
  return Status::Ok();
}

}  // namespace

void RegisterEinsumOpInfos(OpInfoRegistry& r) {
  r.Add("Einsum")
      .Low("compute-bound; the fp16/bf16 kernels accumulate in FP32")
      .Gradient(12, INT64_MAX, &EinsumGradient);
}

}  // namespace onnxamp::ops
