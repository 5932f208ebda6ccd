#include "trainer/graph/lora.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <unordered_map>
#include <utility>

#include "runtime/common/random.h"

namespace onnxamp::trainer {
namespace {

constexpr char kSuffixA[] = ".lora_A";
constexpr char kSuffixB[] = ".lora_B";

StatusOr<std::optional<std::regex>> Regex(const std::string& pattern, const char* flag) {
  if (pattern.empty()) return std::optional<std::regex>();
  try {
    return std::optional<std::regex>(std::regex(pattern, std::regex::ECMAScript));
  } catch (const std::regex_error& e) {
    return InvalidArgument(flag, " '", pattern, "': not a valid regular expression: ", e.what());
  }
}

// Why `w` cannot be adapted ("" when it can); sets `transposed` from its Gemm readers ([out, in] under transB).
std::string Ineligible(const ir::Graph& g, const ir::Value* w, const std::set<const ir::Value*>& implicit,
                       bool* transposed) {
  const ir::Tensor& t = *w->initializer();
  if (t.dtype() != DType::kFloat32) return StrCat("stored as ", DTypeName(t.dtype()), ", not float32");
  if (t.dims().size() != 2) return StrCat("rank ", t.dims().size(), ", not a 2-D weight");
  if (t.num_elements() <= 1) return "a single value";
  if (implicit.count(w)) return "read inside a subgraph";
  for (const ir::Value* out : g.outputs()) {
    if (out == w) return "a graph output";
  }
  if (w->uses().empty()) return "not read by any node";
  std::optional<bool> layout;
  for (const ir::Use& u : w->uses()) {
    const ir::Node* n = u.node;
    bool trans = false;
    if (n->domain().empty() && n->op_type() == "MatMul" && u.index == 1) {
      trans = false;
    } else if (n->domain().empty() && n->op_type() == "Gemm" && u.index == 1) {
      if (n->GetInt("transA", 0) != 0) return StrCat("read by ", n->Describe(), " with transA = 1");
      trans = n->GetInt("transB", 0) != 0;
    } else {
      return StrCat("read by ", n->Describe(), " as its input ", u.index, ", not as a MatMul/Gemm weight");
    }
    if (layout && *layout != trans) return "read both transposed and not by different Gemm nodes";
    layout = trans;
  }
  *transposed = *layout;
  return std::string();
}

const ir::Tensor* FindTensor(const std::vector<ir::Tensor>& list, const std::string& name) {
  for (const ir::Tensor& t : list) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

// `t` [rows, cols] transposed, named `name`.
std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += StrCat(i ? ", " : "", dims[i]);
  return s + "]";
}

ir::Tensor Transposed(const ir::Tensor& t, const std::string& name) {
  const int64_t rows = t.dims()[0], cols = t.dims()[1];
  ir::Tensor out(DType::kFloat32, {cols, rows});
  const float* src = t.values<float>().data();
  float* dst = out.mutable_values<float>().data();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
  }
  out.set_name(name);
  return out;
}

ir::Value* AddInitializer(ir::Graph& g, const std::string& base, ir::Tensor value) {
  ir::Value* v = g.CreateValue(g.UniqueName(base));
  ir::Shape shape;
  for (int64_t d : value.dims()) shape.push_back(ir::Dim::Value(d));
  v->set_type(ir::ValueType::Tensor(value.dtype(), shape));
  value.set_name(v->name());
  g.SetInitializer(v, std::move(value));
  return v;
}

ir::Value* Scalar(ir::Graph& g, const std::string& base, float x) {
  ir::Tensor t(DType::kFloat32, {});
  t.mutable_values<float>()[0] = x;
  return AddInitializer(g, base, std::move(t));
}

ir::Value* NewValue(ir::Graph& g, const std::string& base) {
  ir::Value* v = g.CreateValue(g.UniqueName(base));
  v->set_type(ir::ValueType::Tensor(DType::kFloat32));
  return v;
}

}  // namespace

double LoraOptions::scale() const {
  return rslora ? alpha / std::sqrt(static_cast<double>(rank)) : alpha / static_cast<double>(rank);
}

StatusOr<LoraPlan> PlanLora(const ir::Model& model, const LoraOptions& options) {
  if (options.rank <= 0) return InvalidArgument("--lora-rank must be >= 1, got ", options.rank);
  if (!std::isfinite(options.alpha) || options.alpha <= 0) {
    return InvalidArgument("--lora-alpha must be finite and > 0, got ", options.alpha);
  }
  if (!(options.dropout >= 0 && options.dropout < 1)) {
    return InvalidArgument("--lora-dropout must be in [0, 1), got ", options.dropout);
  }
  if (options.dropout > 0 && model.OpsetVersion("") < 12) {
    return InvalidArgument("--lora-dropout needs a model of opset 12 or later (Dropout's training mode); this one is ",
                           model.OpsetVersion(""));
  }
  if (!model.graph) return InvalidArgument("the model has no graph");
  ONNXAMP_ASSIGN_OR_RETURN(std::optional<std::regex> targets, Regex(options.targets, "--lora-targets"));
  ONNXAMP_ASSIGN_OR_RETURN(std::optional<std::regex> train, Regex(options.train, "--lora-train"));
  (void)train;
  const ir::Graph& g = *model.graph;
  std::set<const ir::Value*> implicit;
  for (const ir::Node* n : g.nodes()) {
    if (n->subgraphs().empty()) continue;
    for (const ir::Value* v : g.ImplicitInputs(n)) {
      if (std::find(n->inputs().begin(), n->inputs().end(), v) == n->inputs().end()) implicit.insert(v);
    }
  }
  const float scale = static_cast<float>(options.scale());
  LoraPlan plan;
  for (const ir::Value* w : g.initializers()) {
    if (targets && !std::regex_search(w->name(), *targets)) continue;
    bool transposed = false;
    const std::string why = Ineligible(g, w, implicit, &transposed);
    if (!why.empty()) {
      // Without --lora-targets only what looks like a linear layer's weight is worth a word.
      bool linear_weight = false;
      for (const ir::Use& u : w->uses()) {
        linear_weight |= u.index == 1 && (u.node->op_type() == "MatMul" || u.node->op_type() == "Gemm");
      }
      if (targets || linear_weight) plan.skipped.push_back(StrCat(w->name(), ": ", why));
      continue;
    }
    const std::vector<int64_t>& d = w->initializer()->dims();
    LoraAdapter a;
    a.weight = w->name();
    a.transposed = transposed;
    a.in = transposed ? d[1] : d[0];
    a.out = transposed ? d[0] : d[1];
    a.scale = scale;
    a.a = a.weight + kSuffixA;
    a.b = a.weight + kSuffixB;
    plan.adapters.push_back(std::move(a));
  }
  if (plan.adapters.empty()) {
    return InvalidArgument("LoRA: no weight to adapt", options.targets.empty() ? "" : " matches --lora-targets '",
                           options.targets, options.targets.empty() ? "" : "'",
                           " (2-D float32 initializers read only as the second input of MatMul or Gemm)",
                           plan.skipped.empty() ? "" : StrCat("; skipped ", plan.skipped.front()));
  }
  // Initial adapters: each must belong to an adapted weight and have its dims.
  std::map<std::string, const LoraAdapter*> by_name;
  for (const LoraAdapter& a : plan.adapters) {
    by_name[a.a] = &a;
    by_name[a.b] = &a;
  }
  for (const ir::Tensor& t : options.init) {
    const auto it = by_name.find(t.name());
    if (it == by_name.end()) {
      return InvalidArgument("--lora-init: '", t.name(), "' is not the lora_A or lora_B of an adapted weight");
    }
    const LoraAdapter& a = *it->second;
    const bool is_a = t.name() == a.a;
    const std::vector<int64_t> want =
        is_a ? std::vector<int64_t>{options.rank, a.in} : std::vector<int64_t>{a.out, options.rank};
    if (t.dtype() != DType::kFloat32 || t.dims() != want) {
      return InvalidArgument("--lora-init: '", t.name(), "' is ", DTypeName(t.dtype()), " ", DimsText(t.dims()),
                             ", expected float ", DimsText(want));
    }
  }
  return plan;
}

Status AddLoraAdapters(ir::Model& model, const LoraOptions& options, const LoraPlan& plan) {
  ir::Graph& g = *model.graph;
  ir::Value* ratio = nullptr;
  if (options.dropout > 0) ratio = Scalar(g, "lora_dropout_ratio", static_cast<float>(options.dropout));
  for (const LoraAdapter& a : plan.adapters) {
    ir::Value* w = g.FindValue(a.weight);
    if (!w || !w->initializer()) return Internal("LoRA: the weight '", a.weight, "' is not an initializer");
    const int64_t r = options.rank;
    // A uniform in ±1/sqrt(in) (kaiming_uniform_ with a = sqrt 5 on peft's [rank, in] lora_A), B zero; or the given.
    ir::Tensor ta(DType::kFloat32, {a.in, r});
    ir::Tensor tb(DType::kFloat32, {r, a.out});
    if (const ir::Tensor* init = FindTensor(options.init, a.a)) {
      ta = Transposed(*init, a.a);
    } else {
      const float bound = 1.0f / std::sqrt(static_cast<float>(a.in));
      const uint64_t base = SplitMix64Mix(options.seed ^ Fnv1a64(a.a));
      float* p = ta.mutable_values<float>().data();
      // Drawn in peft's [rank, in] order, stored transposed.
      for (int64_t i = 0; i < r; ++i) {
        for (int64_t j = 0; j < a.in; ++j) {
          const uint64_t n = static_cast<uint64_t>(i * a.in + j) + 1;
          const float u = static_cast<float>(SplitMix64Mix(base + n * kSplitMixGamma) >> 40) * 0x1.0p-24f;
          p[j * r + i] = (2.0f * u - 1.0f) * bound;
        }
      }
    }
    if (const ir::Tensor* init = FindTensor(options.init, a.b)) tb = Transposed(*init, a.b);
    ir::Value* va = AddInitializer(g, a.a, std::move(ta));
    ir::Value* vb = AddInitializer(g, a.b, std::move(tb));
    if (va->name() != a.a || vb->name() != a.b) {
      return InvalidArgument("LoRA: the model already has a value named '", va->name() != a.a ? a.a : a.b, "'");
    }
    const std::vector<ir::Use> uses = w->uses();
    for (const ir::Use& u : uses) {
      ir::Node* n = u.node;
      ir::Value* x = n->input(0);
      ir::Value* y = n->output(0);
      if (!x || !y) return Internal("LoRA: ", n->Describe(), " has no input or output");
      const std::string base = y->name();
      ir::Value* in = x;
      if (ratio) {
        in = NewValue(g, base + "_lora_dropout");
        g.AddNode("Dropout", {x, ratio}, {in}, g.UniqueName(base + "_lora_dropout"));
      }
      ir::Value* low = NewValue(g, base + "_lora_a");
      g.AddNode("MatMul", {in, va}, {low}, g.UniqueName(base + "_lora_a"));
      ir::Value* up = NewValue(g, base + "_lora_b");
      g.AddNode("MatMul", {low, vb}, {up}, g.UniqueName(base + "_lora_b"));
      const float gemm_alpha = n->op_type() == "Gemm" ? n->GetFloat("alpha", 1.0f) : 1.0f;
      ir::Value* factor = Scalar(g, base + "_lora_scale", a.scale * gemm_alpha);
      ir::Value* scaled = NewValue(g, base + "_lora_scaled");
      g.AddNode("Mul", {up, factor}, {scaled}, g.UniqueName(base + "_lora_scaled"));
      // The layer's own product under a new name; the sum takes over its value (its readers, a graph output).
      ir::Value* plain = g.CreateValue(g.UniqueName(base + "_lora_base"));
      plain->set_type(y->type());
      n->SetOutput(0, plain);
      g.AddNode("Add", {plain, scaled}, {y}, g.UniqueName(base + "_lora_add"));
    }
  }
  return g.SortTopologically();
}

StatusOr<std::vector<ir::Tensor>> MergeLora(const ir::Model& original, const std::vector<LoraAdapter>& adapters,
                                            std::vector<ir::Tensor> values) {
  if (adapters.empty()) return values;
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < values.size(); ++i) index[values[i].name()] = i;
  std::set<size_t> drop;
  std::vector<ir::Tensor> merged;
  for (const LoraAdapter& a : adapters) {
    const auto ia = index.find(a.a), ib = index.find(a.b);
    if (ia == index.end() || ib == index.end()) {
      return InvalidArgument("LoRA: the trained values have no '", ia == index.end() ? a.a : a.b, "'");
    }
    const ir::Tensor& ta = values[ia->second];
    const ir::Tensor& tb = values[ib->second];
    const ir::Value* w = original.graph ? original.graph->FindValue(a.weight) : nullptr;
    if (!w || !w->initializer() || !w->initializer()->has_data()) {
      return InvalidArgument("LoRA: the model has no data for the adapted weight '", a.weight, "'");
    }
    const ir::Tensor& tw = *w->initializer();
    const int64_t r = ta.dims().size() == 2 ? ta.dims()[1] : -1;
    if (tw.dtype() != DType::kFloat32 || ta.dtype() != DType::kFloat32 || tb.dtype() != DType::kFloat32 ||
        ta.dims() != std::vector<int64_t>{a.in, r} || tb.dims() != std::vector<int64_t>{r, a.out} ||
        tw.num_elements() != a.in * a.out) {
      return InvalidArgument("LoRA: the adapters of '", a.weight, "' do not fit it");
    }
    ir::Tensor out(DType::kFloat32, tw.dims());
    const float* pw = tw.values<float>().data();
    const float* pa = ta.values<float>().data();
    const float* pb = tb.values<float>().data();
    float* po = out.mutable_values<float>().data();
    // delta[i][o] = sum over k = 0..r-1 of A[i][k] B[k][o], summed in double in that order and rounded once, a row
    // of the stored weight at a time (rows of W: i, or o when it is stored [out, in]) as R contiguous axpys.
    const int64_t rows = a.transposed ? a.out : a.in, cols = a.transposed ? a.in : a.out;
    // left[row][k] and right[k][col]: A and B, or B^T and A^T.
    std::vector<double> left(static_cast<size_t>(rows * r)), right(static_cast<size_t>(r * cols));
    for (int64_t i = 0; i < a.in; ++i) {
      for (int64_t k = 0; k < r; ++k) {
        (a.transposed ? right[k * cols + i] : left[i * r + k]) = pa[i * r + k];
      }
    }
    for (int64_t k = 0; k < r; ++k) {
      for (int64_t o = 0; o < a.out; ++o) {
        (a.transposed ? left[o * r + k] : right[k * cols + o]) = pb[k * a.out + o];
      }
    }
    std::vector<double> acc(static_cast<size_t>(cols));
    const double scale = a.scale;
    for (int64_t row = 0; row < rows; ++row) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t k = 0; k < r; ++k) {
        const double x = left[row * r + k];
        const double* y = right.data() + k * cols;
        for (int64_t c = 0; c < cols; ++c) acc[c] += x * y[c];
      }
      const float* w_row = pw + row * cols;
      float* o_row = po + row * cols;
      for (int64_t c = 0; c < cols; ++c) o_row[c] = static_cast<float>(w_row[c] + scale * acc[c]);
    }
    out.set_name(a.weight);
    merged.push_back(std::move(out));
    drop.insert(ia->second);
    drop.insert(ib->second);
  }
  std::vector<ir::Tensor> result;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!drop.count(i)) result.push_back(std::move(values[i]));
  }
  for (ir::Tensor& t : merged) result.push_back(std::move(t));
  return result;
}

StatusOr<std::vector<ir::Tensor>> LoraAdapterTensors(const std::vector<LoraAdapter>& adapters,
                                                     const std::vector<ir::Tensor>& values) {
  std::vector<ir::Tensor> out;
  for (const LoraAdapter& a : adapters) {
    for (const std::string& name : {a.a, a.b}) {
      const ir::Tensor* t = FindTensor(values, name);
      if (!t || t->dtype() != DType::kFloat32 || t->dims().size() != 2) {
        return InvalidArgument("LoRA: the trained values have no 2-D float32 '", name, "'");
      }
      out.push_back(Transposed(*t, name));
    }
  }
  return out;
}

}  // namespace onnxamp::trainer
