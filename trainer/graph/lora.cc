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

// Why `w` cannot be adapted ("" when it can); sets `transposed` from its Gemm readers ([out, in] under transB) and
// `conv` when its readers are Conv nodes.
std::string Ineligible(const ir::Graph& g, const ir::Value* w, const std::set<const ir::Value*>& implicit,
                       bool* transposed, bool* conv) {
  const ir::Tensor& t = *w->initializer();
  if (t.dtype() != DType::kFloat32) return StrCat("stored as ", DTypeName(t.dtype()), ", not float32");
  if (t.num_elements() <= 1) return "a single value";
  if (implicit.count(w)) return "read inside a subgraph";
  for (const ir::Value* out : g.outputs()) {
    if (out == w) return "a graph output";
  }
  if (w->uses().empty()) return "not read by any node";
  std::optional<bool> layout, convolution;
  for (const ir::Use& u : w->uses()) {
    const ir::Node* n = u.node;
    bool trans = false, is_conv = false;
    if (n->domain().empty() && n->op_type() == "MatMul" && u.index == 1) {
      trans = false;
    } else if (n->domain().empty() && n->op_type() == "Gemm" && u.index == 1) {
      if (n->GetInt("transA", 0) != 0) return StrCat("read by ", n->Describe(), " with transA = 1");
      trans = n->GetInt("transB", 0) != 0;
    } else if (n->domain().empty() && n->op_type() == "Conv" && u.index == 1) {
      if (n->GetInt("group", 1) != 1) return StrCat("read by ", n->Describe(), " with group ", n->GetInt("group", 1));
      is_conv = true;
    } else {
      return StrCat("read by ", n->Describe(), " as its input ", u.index, ", not as a MatMul/Gemm/Conv weight");
    }
    if (convolution && *convolution != is_conv) return "read both by Conv and by MatMul/Gemm nodes";
    if (layout && *layout != trans) return "read both transposed and not by different Gemm nodes";
    layout = trans;
    convolution = is_conv;
  }
  if (*convolution && t.dims().size() < 3) return StrCat("rank ", t.dims().size(), ", not a convolution's weight");
  if (!*convolution && t.dims().size() != 2) return StrCat("rank ", t.dims().size(), ", not a 2-D weight");
  *transposed = *layout;
  *conv = *convolution;
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

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace

int64_t LoraAdapter::weight_elements() const { return in * out * Product(kernel); }

std::vector<int64_t> LoraAdapter::peft_a_dims(int64_t rank) const {
  std::vector<int64_t> d = {rank, in};
  d.insert(d.end(), kernel.begin(), kernel.end());
  return d;
}

std::vector<int64_t> LoraAdapter::peft_b_dims(int64_t rank) const {
  std::vector<int64_t> d = {out, rank};
  d.insert(d.end(), kernel.size(), 1);
  return d;
}

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
    bool transposed = false, conv = false;
    const std::string why = Ineligible(g, w, implicit, &transposed, &conv);
    // Without --lora-targets: MatMul/Gemm weights only, and only what looks like a linear layer's weight is worth a
    // word when it cannot be adapted.
    bool linear_weight = false;
    for (const ir::Use& u : w->uses()) {
      linear_weight |= u.index == 1 && (u.node->op_type() == "MatMul" || u.node->op_type() == "Gemm");
    }
    if (!why.empty()) {
      if (targets || linear_weight) plan.skipped.push_back(StrCat(w->name(), ": ", why));
      continue;
    }
    if (conv && !targets) continue;
    const std::vector<int64_t>& d = w->initializer()->dims();
    LoraAdapter a;
    a.weight = w->name();
    a.transposed = transposed;
    if (conv) {
      a.out = d[0];
      a.in = d[1];
      a.kernel.assign(d.begin() + 2, d.end());
    } else {
      a.in = transposed ? d[1] : d[0];
      a.out = transposed ? d[0] : d[1];
    }
    a.scale = scale;
    a.a = a.weight + kSuffixA;
    a.b = a.weight + kSuffixB;
    plan.adapters.push_back(std::move(a));
  }
  if (plan.adapters.empty()) {
    return InvalidArgument("LoRA: no weight to adapt", options.targets.empty() ? "" : " matches --lora-targets '",
                           options.targets, options.targets.empty() ? "" : "'",
                           " (float32 initializers read only as the second input of MatMul, Gemm or, when named by "
                           "--lora-targets, Conv)",
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
    const std::vector<int64_t> want = is_a ? a.peft_a_dims(options.rank) : a.peft_b_dims(options.rank);
    if (t.dtype() != DType::kFloat32 || t.dims() != want) {
      return InvalidArgument("--lora-init: '", t.name(), "' is ", DTypeName(t.dtype()), " ", DimsText(t.dims()),
                             ", expected float ", DimsText(want));
    }
  }
  return plan;
}

Status AddLoraAdapters(ir::Model& model, const LoraOptions& options, const LoraPlan& plan,
                       std::vector<LoraPath>* paths) {
  ir::Graph& g = *model.graph;
  // The adapters' Dropout: its ratio an input from opset 12, an attribute before (training mode: UseTrainingMode).
  const bool ratio_input = model.OpsetVersion("") >= 12;
  ir::Value* ratio = nullptr;
  if (options.dropout > 0 && ratio_input) ratio = Scalar(g, "lora_dropout_ratio", static_cast<float>(options.dropout));
  for (const LoraAdapter& a : plan.adapters) {
    ir::Value* w = g.FindValue(a.weight);
    if (!w || !w->initializer()) return Internal("LoRA: the weight '", a.weight, "' is not an initializer");
    const int64_t r = options.rank;
    // peft's lora_A [rank, fan_in] (fan_in = in, times the kernel for a Conv) uniform in ±1/sqrt(fan_in)
    // (kaiming_uniform_ with a = sqrt 5), B zero; or the given. MatMul/Gemm adapters are stored transposed.
    const int64_t fan_in = a.in * Product(a.kernel);
    ir::Tensor peft_a(DType::kFloat32, a.peft_a_dims(r));
    ir::Tensor peft_b(DType::kFloat32, a.peft_b_dims(r));
    if (const ir::Tensor* init = FindTensor(options.init, a.a)) {
      peft_a = *init;
    } else {
      const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
      const uint64_t base = SplitMix64Mix(options.seed ^ Fnv1a64(a.a));
      float* p = peft_a.mutable_values<float>().data();
      for (int64_t k = 0; k < r * fan_in; ++k) {
        const uint64_t n = static_cast<uint64_t>(k) + 1;
        const float u = static_cast<float>(SplitMix64Mix(base + n * kSplitMixGamma) >> 40) * 0x1.0p-24f;
        p[k] = (2.0f * u - 1.0f) * bound;
      }
    }
    if (const ir::Tensor* init = FindTensor(options.init, a.b)) peft_b = *init;
    ir::Tensor ta = a.conv() ? peft_a : Transposed(peft_a, a.a);
    ir::Tensor tb = a.conv() ? peft_b : Transposed(peft_b, a.b);
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
      // Values after the layer's output, nodes after the layer (so that --keep-node patterns of it reach them).
      const std::string base = y->name();
      const std::string node_base = n->name().empty() ? base : n->name();
      LoraPath path;
      path.reader = n;
      auto add = [&](const std::string& op, std::vector<ir::Value*> inputs, ir::Value* out, const char* suffix) {
        ir::Node* added = g.AddNode(op, std::move(inputs), {out}, g.UniqueName(node_base + suffix));
        path.nodes.push_back(added->name());
        return added;
      };
      ir::Value* in = x;
      if (options.dropout > 0) {
        in = NewValue(g, base + "_lora_dropout");
        ir::Node* drop = add("Dropout", ratio_input ? std::vector<ir::Value*>{x, ratio} : std::vector<ir::Value*>{x},
                             in, "_lora_dropout");
        if (!ratio_input) drop->SetAttribute(ir::Attribute::Float("ratio", static_cast<float>(options.dropout)));
      }
      ir::Value* low = NewValue(g, base + "_lora_a");
      ir::Value* up = NewValue(g, base + "_lora_b");
      if (a.conv()) {
        // A: the layer's own convolution (kernel, strides, pads, dilations) into `rank` channels; B: 1x1 out of them.
        ir::Node* conv_a = add("Conv", {in, va}, low, "_lora_a");
        for (const char* attr : {"kernel_shape", "strides", "pads", "dilations", "auto_pad"}) {
          if (const ir::Attribute* at = n->FindAttribute(attr)) conv_a->SetAttribute(*at);
        }
        ir::Node* conv_b = add("Conv", {low, vb}, up, "_lora_b");
        conv_b->SetAttribute(ir::Attribute::Ints("kernel_shape", std::vector<int64_t>(a.kernel.size(), 1)));
      } else {
        add("MatMul", {in, va}, low, "_lora_a");
        add("MatMul", {low, vb}, up, "_lora_b");
      }
      const float gemm_alpha = n->op_type() == "Gemm" ? n->GetFloat("alpha", 1.0f) : 1.0f;
      ir::Value* factor = Scalar(g, base + "_lora_scale", a.scale * gemm_alpha);
      ir::Value* scaled = NewValue(g, base + "_lora_scaled");
      path.scale = add("Mul", {up, factor}, scaled, "_lora_scaled")->name();
      // The layer's own product under a new name; the sum takes over its value (its readers, a graph output).
      ir::Value* plain = g.CreateValue(g.UniqueName(base + "_lora_base"));
      plain->set_type(y->type());
      n->SetOutput(0, plain);
      add("Add", {plain, scaled}, y, "_lora_add");
      if (paths) paths->push_back(std::move(path));
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
    const int64_t r = a.conv() ? (ta.dims().empty() ? -1 : ta.dims()[0]) : (ta.dims().size() == 2 ? ta.dims()[1] : -1);
    const std::vector<int64_t> want_a = a.conv() ? a.peft_a_dims(r) : std::vector<int64_t>{a.in, r};
    const std::vector<int64_t> want_b = a.conv() ? a.peft_b_dims(r) : std::vector<int64_t>{r, a.out};
    if (tw.dtype() != DType::kFloat32 || ta.dtype() != DType::kFloat32 || tb.dtype() != DType::kFloat32 ||
        ta.dims() != want_a || tb.dims() != want_b || tw.num_elements() != a.weight_elements()) {
      return InvalidArgument("LoRA: the adapters of '", a.weight, "' do not fit it");
    }
    ir::Tensor out(DType::kFloat32, tw.dims());
    const float* pw = tw.values<float>().data();
    const float* pa = ta.values<float>().data();
    const float* pb = tb.values<float>().data();
    float* po = out.mutable_values<float>().data();
    // W's rows += scale * sum over k = 0..r-1 of left[row][k] right[k][...], summed in double in that order and
    // rounded once, a row of the stored weight at a time as R contiguous axpys. MatMul/Gemm: delta[i][o] = A[i][k]
    // B[k][o] (left A, right B; for a weight stored [out, in], left B^T, right A^T); Conv: delta[o][i, k...] =
    // B[o][k] A[k][i, k...] (left B [out, r], right A [r, in * kernel]).
    const int64_t rows = a.conv() || a.transposed ? a.out : a.in;
    const int64_t cols = a.weight_elements() / rows;
    std::vector<double> left(static_cast<size_t>(rows * r)), right(static_cast<size_t>(r * cols));
    if (a.conv()) {
      for (int64_t k = 0; k < rows * r; ++k) left[k] = pb[k];
      for (int64_t k = 0; k < r * cols; ++k) right[k] = pa[k];
    } else {
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
      if (!t || t->dtype() != DType::kFloat32 || (!a.conv() && t->dims().size() != 2)) {
        return InvalidArgument("LoRA: the trained values have no float32 '", name, "' of the adapter's rank");
      }
      out.push_back(a.conv() ? *t : Transposed(*t, name));
    }
  }
  return out;
}

}  // namespace onnxamp::trainer
