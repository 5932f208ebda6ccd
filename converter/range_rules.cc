// Range rules (range_rules.h).
#include "converter/range_rules.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "converter/auto_mode.h"
#include "runtime/common/half.h"

namespace onnxamp::converter {
namespace {

bool IsFloatType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
}

// The largest magnitude among the floating tensor's elements (inf when one is infinite; NaNs are skipped).
double MaxAbs(const ir::Tensor& t) {
  double m = 0;
  auto take = [&m](double v) {
    if (!std::isnan(v)) m = std::fmax(m, std::fabs(v));
  };
  const int64_t n = t.num_elements();
  switch (t.dtype()) {
    case DType::kFloat32:
      for (int64_t i = 0; i < n; ++i) take(t.values<float>()[i]);
      break;
    case DType::kFloat64:
      for (int64_t i = 0; i < n; ++i) take(t.values<double>()[i]);
      break;
    case DType::kFloat16:
      for (int64_t i = 0; i < n; ++i) take(HalfBitsToFloat(t.values<uint16_t>()[i]));
      break;
    case DType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) take(BFloat16BitsToFloat(t.values<uint16_t>()[i]));
      break;
    default:
      break;
  }
  return m;
}

std::string Sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// The constant tensor `v` holds: an initializer, or a Constant node's `value`; null for anything else.
const ir::Tensor* ConstantOf(const ir::Value* v) {
  if (v->initializer()) return v->initializer();
  const ir::Node* p = v->producer();
  if (!p || p->op_type() != "Constant" || !ir::IsDefaultDomain(p->domain())) return nullptr;
  const ir::Attribute* a = p->FindAttribute("value");
  return a && a->type() == ir::AttrType::kTensor ? &a->t : nullptr;
}

// Products summed per output of a MatMul, Gemm or Conv with inputs of `dims` (0 when unknown or another op).
int64_t ReductionDepth(const ir::Node& node, const std::vector<std::optional<std::vector<int64_t>>>& dims) {
  const std::string& op = node.op_type();
  if (!ir::IsDefaultDomain(node.domain()) || dims.size() < 2) return 0;
  const auto& a = dims[0];
  const auto& b = dims[1];
  if (op == "MatMul") {
    if (a && !a->empty()) return a->back();
    if (b && !b->empty()) return b->size() == 1 ? (*b)[0] : (*b)[b->size() - 2];
    return 0;
  }
  if (op == "Gemm") {
    if (a && a->size() == 2) return node.GetInt("transA", 0) ? (*a)[0] : (*a)[1];
    if (b && b->size() == 2) return node.GetInt("transB", 0) ? (*b)[1] : (*b)[0];
    return 0;
  }
  if (op == "Conv" && b && b->size() >= 3) {
    int64_t depth = 1;
    for (size_t d = 1; d < b->size(); ++d) depth *= (*b)[d];
    return depth;
  }
  return 0;
}

}  // namespace

StatusOr<std::vector<KeptNode>> ApplyRangeRules(ir::Model& model, const PrecisionPolicy& policy,
                                                const std::vector<std::vector<ir::Tensor>>& samples,
                                                const RangeRuleOptions& options) {
  if (!(options.init_max >= 0) || !(options.data_max >= 0) || options.max_reduction_depth < 0) {
    return InvalidArgument("range rules: --init-max, --data-max and --max-reduction-depth must be >= 0, got ",
                           options.init_max, ", ", options.data_max, " and ", options.max_reduction_depth);
  }
  if (options.data_max > 0 && samples.empty()) return InvalidArgument("--data-max needs sample inputs (--data FILE)");
  if (!model.graph) return InvalidArgument("range rules: the model has no graph");
  NameUnnamedNodes(*model.graph);

  // What the samples show of every value: its largest magnitude over all sample sets, and its dims in the first.
  std::unordered_map<std::string, double> max_abs;
  std::unordered_map<std::string, std::vector<int64_t>> seen_dims;
  if (!samples.empty() && (options.data_max > 0 || options.max_reduction_depth > 0)) {
    exec::SessionOptions so = options.session;
    so.num_threads = options.num_threads;
    ONNXAMP_ASSIGN_OR_RETURN(std::unique_ptr<exec::Session> session,
                             exec::Session::Create(WithIntermediateOutputs(model), so));
    for (size_t s = 0; s < samples.size(); ++s) {
      StatusOr<std::vector<ir::Tensor>> out = session->Run(samples[s]);
      if (!out.ok()) return out.status().WithContext(StrCat("range rules: sample set ", s + 1));
      auto note = [&](const ir::Tensor& t) {
        if (IsFloatType(t.dtype())) {
          const double m = MaxAbs(t);
          auto [it, fresh] = max_abs.emplace(t.name(), m);
          if (!fresh) it->second = std::fmax(it->second, m);
        }
        if (s == 0) seen_dims.emplace(t.name(), t.dims());
      };
      for (const ir::Tensor& t : samples[s]) note(t);
      for (const ir::Tensor& t : *out) note(t);
    }
  }
  auto dims_of = [&](const ir::Value* v) -> std::optional<std::vector<int64_t>> {
    if (auto it = seen_dims.find(v->name()); it != seen_dims.end()) return it->second;
    if (const ir::Tensor* c = ConstantOf(v)) return c->dims();
    const std::optional<ir::Shape>& shape = v->type().shape();
    if (!shape) return std::nullopt;
    std::vector<int64_t> d;
    for (const ir::Dim& dim : *shape) {
      if (!dim.is_value()) return std::nullopt;
      d.push_back(dim.value);
    }
    return d;
  };

  std::vector<KeptNode> kept;
  for (const ir::Node* node : model.graph->nodes()) {
    if (policy.Decide(*node).precision == Precision::kKeep) continue;
    std::string reason;
    if (options.init_max > 0) {
      for (const ir::Value* v : node->inputs()) {
        const ir::Tensor* c = v ? ConstantOf(v) : nullptr;
        if (!c || !IsFloatType(c->dtype())) continue;
        const double m = MaxAbs(*c);
        if (m > options.init_max) {
          reason = StrCat("--init-max ", Sci(options.init_max), ": constant '", v->name(), "' holds |x| = ", Sci(m));
          break;
        }
      }
    }
    if (reason.empty() && options.data_max > 0) {
      auto check = [&](const ir::Value* v, const char* what) {
        if (!v || !reason.empty()) return;
        auto it = max_abs.find(v->name());
        if (it == max_abs.end() || !(it->second > options.data_max)) return;
        reason = StrCat("--data-max ", Sci(options.data_max), ": ", what, " '", v->name(),
                        "' reaches |x| = ", Sci(it->second), " on the samples");
      };
      for (const ir::Value* v : node->inputs()) {
        if (v && !ConstantOf(v)) check(v, "input");
      }
      for (const ir::Value* v : node->outputs()) check(v, "output");
    }
    if (reason.empty() && options.max_reduction_depth > 0) {
      std::vector<std::optional<std::vector<int64_t>>> dims;
      for (const ir::Value* v : node->inputs()) dims.push_back(v ? dims_of(v) : std::nullopt);
      const int64_t depth = ReductionDepth(*node, dims);
      if (depth > options.max_reduction_depth) {
        reason =
            StrCat("--max-reduction-depth ", options.max_reduction_depth, ": sums ", depth, " products per output");
      }
    }
    if (!reason.empty()) kept.push_back({node->name(), node->op_type(), std::move(reason)});
  }
  return kept;
}

}  // namespace onnxamp::converter
