// Einsum equation parsing and planning (see einsum_equation.h).
#include "runtime/ops/einsum/einsum_equation.h"

#include <algorithm>

#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/variadic_inputs.h"

namespace onnxamp::ops {
namespace {

constexpr int kNumLetters = 52;

int LetterId(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

StatusOr<EinsumTerm> ParseTerm(const std::string& text, const std::string& equation) {
  EinsumTerm t;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '.') {
      if (text.compare(i, 3, "...") != 0 || t.ellipsis_at >= 0) {
        return InvalidArgument("equation '", equation, "': term '", text,
                               "' has a '.' that is not part of a single '...'");
      }
      t.ellipsis_at = static_cast<int>(t.letters.size());
      i += 2;
      continue;
    }
    const int id = LetterId(text[i]);
    if (id < 0) {
      return InvalidArgument("equation '", equation, "': character '", text[i],
                             "' is not a letter, ',', '->' or '...'");
    }
    t.letters.push_back(id);
  }
  return t;
}

}  // namespace

std::string EinsumLabelName(int label) {
  if (label < 26) return std::string(1, static_cast<char>('a' + label));
  if (label < kNumLetters) return std::string(1, static_cast<char>('A' + label - 26));
  return "...";
}

StatusOr<EinsumEquation> ParseEinsum(const std::string& equation) {
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  EinsumEquation out;
  std::string lhs = eq;
  const size_t arrow = eq.find("->");
  if (arrow != std::string::npos) {
    lhs = eq.substr(0, arrow);
    const std::string rhs = eq.substr(arrow + 2);
    if (rhs.find("->") != std::string::npos) return InvalidArgument("equation '", equation, "' has two '->'");
    out.explicit_output = true;
    ONNXAMP_ASSIGN_OR_RETURN(out.output, ParseTerm(rhs, equation));
    std::vector<int> sorted = out.output.letters;
    std::sort(sorted.begin(), sorted.end());
    const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
    if (dup != sorted.end()) {
      return InvalidArgument("equation '", equation, "': output label '", EinsumLabelName(*dup), "' appears twice");
    }
  }
  size_t start = 0;
  for (;;) {
    const size_t comma = lhs.find(',', start);
    ONNXAMP_ASSIGN_OR_RETURN(EinsumTerm t, ParseTerm(lhs.substr(start, comma - start), equation));
    out.inputs.push_back(std::move(t));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

StatusOr<EinsumPlan> PlanEinsum(const EinsumEquation& eq, const std::vector<std::vector<int64_t>>& shapes) {
  if (shapes.size() != eq.inputs.size()) {
    return InvalidArgument("the equation has ", eq.inputs.size(), " input terms but the node has ", shapes.size(),
                           " inputs");
  }
  // The ellipsis of every input covers its dims not named by letters; they broadcast right-aligned.
  int64_t ellipsis_rank = 0;
  std::vector<int64_t> input_ellipsis(shapes.size(), 0);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const EinsumTerm& t = eq.inputs[i];
    const int64_t rank = static_cast<int64_t>(shapes[i].size());
    const int64_t letters = static_cast<int64_t>(t.letters.size());
    if (t.ellipsis_at < 0 ? rank != letters : rank < letters) {
      return InvalidArgument("input ", i, " has shape ", ShapeToString(shapes[i]), " (rank ", rank,
                             ") but its term has ", letters, " labels", t.ellipsis_at >= 0 ? " and '...'" : "");
    }
    input_ellipsis[i] = rank - letters;
    ellipsis_rank = std::max(ellipsis_rank, input_ellipsis[i]);
  }
  EinsumPlan plan;
  plan.num_labels = kNumLetters + static_cast<int>(ellipsis_rank);
  plan.size.assign(static_cast<size_t>(plan.num_labels), -1);
  std::vector<int> count(static_cast<size_t>(plan.num_labels), 0);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const EinsumTerm& t = eq.inputs[i];
    std::vector<int> labels;
    for (size_t j = 0; j <= t.letters.size(); ++j) {
      if (static_cast<int>(j) == t.ellipsis_at) {
        for (int64_t e = ellipsis_rank - input_ellipsis[i]; e < ellipsis_rank; ++e) {
          labels.push_back(kNumLetters + static_cast<int>(e));
        }
      }
      if (j < t.letters.size()) labels.push_back(t.letters[j]);
    }
    std::vector<int64_t> seen(static_cast<size_t>(plan.num_labels), -1);  // size within this input
    for (size_t d = 0; d < labels.size(); ++d) {
      const int l = labels[d];
      const int64_t dim = shapes[i][d];
      ++count[static_cast<size_t>(l)];
      if (seen[static_cast<size_t>(l)] >= 0 && seen[static_cast<size_t>(l)] != dim) {
        return InvalidArgument("input ", i, " ", ShapeToString(shapes[i]), ": label '", EinsumLabelName(l),
                               "' repeats with sizes ", seen[static_cast<size_t>(l)], " and ", dim);
      }
      seen[static_cast<size_t>(l)] = dim;
      int64_t& size = plan.size[static_cast<size_t>(l)];
      if (size < 0 || size == 1) {
        if (size == 1 && dim != 1) plan.broadcasts = true;
        size = dim;
      } else if (dim != size) {
        if (dim != 1) {
          return InvalidArgument("label '", EinsumLabelName(l), "' has size ", size, " in one input and ", dim,
                                 " in input ", i, " ", ShapeToString(shapes[i]));
        }
        plan.broadcasts = true;
      }
    }
    plan.in_labels.push_back(std::move(labels));
  }
  if (eq.explicit_output) {
    const EinsumTerm& t = eq.output;
    for (size_t j = 0; j <= t.letters.size(); ++j) {
      if (static_cast<int>(j) == t.ellipsis_at) {
        for (int64_t e = 0; e < ellipsis_rank; ++e) plan.out_labels.push_back(kNumLetters + static_cast<int>(e));
      }
      if (j < t.letters.size()) {
        const int l = t.letters[j];
        if (count[static_cast<size_t>(l)] == 0) {
          return InvalidArgument("output label '", EinsumLabelName(l), "' does not appear in any input");
        }
        plan.out_labels.push_back(l);
      }
    }
  } else {
    for (int64_t e = 0; e < ellipsis_rank; ++e) plan.out_labels.push_back(kNumLetters + static_cast<int>(e));
    // Letters used exactly once, in ASCII order (uppercase first).
    std::vector<std::pair<char, int>> once;
    for (int l = 0; l < kNumLetters; ++l) {
      if (count[static_cast<size_t>(l)] == 1) once.emplace_back(EinsumLabelName(l)[0], l);
    }
    std::sort(once.begin(), once.end());
    for (const auto& [c, l] : once) plan.out_labels.push_back(l);
  }
  for (int l : plan.out_labels) plan.out_dims.push_back(plan.size[static_cast<size_t>(l)]);
  return plan;
}

StatusOr<EinsumEquation> EinsumEquationOf(const ir::Node& node) {
  const ir::Attribute* a = node.FindAttribute("equation");
  if (!a || a->type() != ir::AttrType::kString) return InvalidArgument("attribute 'equation' (STRING) is required");
  return ParseEinsum(a->s);
}

Status EinsumInputs(const exec::KernelContext& ctx, DType* dtype, std::vector<std::vector<int64_t>>* shapes) {
  return SameTypeInputs(ctx, "at least one input is required", " (the type of input 0)", dtype, shapes);
}

}  // namespace onnxamp::ops
