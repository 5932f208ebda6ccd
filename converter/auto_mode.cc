// Auto mode: finds the fewest nodes to keep in FP32 so that the converted model stays within tolerance of the FP32
// model on sample inputs.
//
// The search, in runs of the CPU runtime:
//   1. reference: the FP32 model on every sample, with every intermediate value exposed as an output (sample 0);
//   2. the plain policy conversion; done when it is within tolerance;
//   3. sensitivity: one run of a "probe" model holding a copy of every candidate node (low or follow precision,
//      floating output) fed with its FP32 inputs rounded to the target type; a node's score is the largest error of
//      its output (rounded to the target type) relative to the largest magnitude of its FP32 output, and at least 1
//      when that whole output lies below fp16's smallest normal (it computes in subnormals or flushes to zero);
//   4. every candidate kept FP32: when even that fails, the tolerance cannot be met (within_tolerance = false);
//   5. bisection over the candidates ranked by score for the shortest prefix that passes (O(log n) runs);
//   6. descent within that prefix: groups of it (least sensitive first, halved when they fail) go back to low
//      precision while the model stays within tolerance, for about log2(n) + 4 more runs; this corrects the local
//      ranking where a node's effect on the outputs differs from its local error (a final classifier layer).
// Unnamed nodes are given names ("<OpType>_<i>") so that the policy can keep them by name. Every comparison with
// the FP32 outputs uses OutputError's rule: an output whose FP32 values all lie below atol is judged at its own
// scale, and one that comes out entirely zero where FP32 is not always fails.
#include "converter/auto_mode.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/common/half.h"
#include "runtime/executor/session.h"

namespace onnxamp::converter {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool IsSmallFloat(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
}

// The elements of a numeric tensor as doubles (empty for strings and types we do not compare).
std::vector<double> ToDoubles(const ir::Tensor& t) {
  const int64_t n = t.num_elements();
  std::vector<double> out;
  auto fill = [&](auto convert) {
    out.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out[i] = convert(i);
  };
  switch (t.dtype()) {
    case DType::kFloat32:
      fill([&](int64_t i) { return double{t.values<float>()[i]}; });
      break;
    case DType::kFloat64:
      fill([&](int64_t i) { return t.values<double>()[i]; });
      break;
    case DType::kFloat16:
      fill([&](int64_t i) { return double{HalfBitsToFloat(t.values<uint16_t>()[i])}; });
      break;
    case DType::kBFloat16:
      fill([&](int64_t i) { return double{BFloat16BitsToFloat(t.values<uint16_t>()[i])}; });
      break;
    case DType::kInt64:
      fill([&](int64_t i) { return static_cast<double>(t.values<int64_t>()[i]); });
      break;
    case DType::kInt32:
      fill([&](int64_t i) { return static_cast<double>(t.values<int32_t>()[i]); });
      break;
    case DType::kInt16:
      fill([&](int64_t i) { return static_cast<double>(t.values<int16_t>()[i]); });
      break;
    case DType::kInt8:
      fill([&](int64_t i) { return static_cast<double>(t.values<int8_t>()[i]); });
      break;
    case DType::kUint8:
    case DType::kBool:
      fill([&](int64_t i) { return static_cast<double>(t.values<uint8_t>()[i]); });
      break;
    case DType::kUint16:
      fill([&](int64_t i) { return static_cast<double>(t.values<uint16_t>()[i]); });
      break;
    case DType::kUint32:
      fill([&](int64_t i) { return static_cast<double>(t.values<uint32_t>()[i]); });
      break;
    case DType::kUint64:
      fill([&](int64_t i) { return static_cast<double>(t.values<uint64_t>()[i]); });
      break;
    default:
      break;
  }
  return out;
}

// `t` (fp32, fp16, bf16 or fp64) as a tensor of type `to`, rounding to nearest even.
ir::Tensor CastFloat(const ir::Tensor& t, DType to) {
  if (t.dtype() == to) return t;
  ir::Tensor out = ir::Tensor::Uninitialized(to, t.dims());
  out.set_name(t.name());
  const std::vector<double> v = ToDoubles(t);
  const size_t n = v.size();
  switch (to) {
    case DType::kFloat32: {
      auto o = out.mutable_values<float>();
      for (size_t i = 0; i < n; ++i) o[i] = static_cast<float>(v[i]);
      break;
    }
    case DType::kFloat64: {
      auto o = out.mutable_values<double>();
      for (size_t i = 0; i < n; ++i) o[i] = v[i];
      break;
    }
    case DType::kFloat16: {
      auto o = out.mutable_values<uint16_t>();
      for (size_t i = 0; i < n; ++i) o[i] = FloatToHalfBits(static_cast<float>(v[i]));
      break;
    }
    case DType::kBFloat16: {
      auto o = out.mutable_values<uint16_t>();
      for (size_t i = 0; i < n; ++i) o[i] = FloatToBFloat16Bits(static_cast<float>(v[i]));
      break;
    }
    default:
      ONNXAMP_CHECK(false, "CastFloat to ", DTypeName(to));
  }
  return out;
}

constexpr float kHalfMax = 65504.0f;
// fp16's smallest normal value, 2^-14: below it fp16 has fewer than 11 significant bits, and below 2^-25 none.
constexpr double kHalfMinNormal = 6.103515625e-05;

// `x` rounded to `target` (fp16/bf16) and back. `clamp`: as the converter stores constants, finite values beyond
// fp16's range become +-65504 rather than inf.
float RoundValue(float x, DType target, bool clamp) {
  if (target != DType::kFloat16) return BFloat16BitsToFloat(FloatToBFloat16Bits(x));
  if (clamp && std::isfinite(x)) x = std::clamp(x, -kHalfMax, kHalfMax);
  return HalfBitsToFloat(FloatToHalfBits(x));
}

// An fp32 tensor whose values went through `target` and back.
ir::Tensor RoundThrough(const ir::Tensor& t, DType target, bool clamp) {
  ir::Tensor out = t;
  for (float& x : out.mutable_values<float>()) x = RoundValue(x, target, clamp);
  return out;
}

// Folds the comparison of one output tensor into `e`, with `e.atol_used` as the absolute tolerance. Reference
// NaN/inf must be matched exactly; a non-finite candidate value where the reference is finite sets `nonfinite`; a
// floating candidate that is entirely zero where the reference is not sets `all_zero`.
Status CompareInto(const ir::Tensor& ref, const ir::Tensor& got, double rtol, OutputError& e) {
  const double atol = e.atol_used;
  if (ref.dims() != got.dims()) {
    return Internal("auto mode: output '", e.name, "' has ", got.num_elements(), " elements after conversion and ",
                    ref.num_elements(), " in FP32");
  }
  const std::vector<double> r = ToDoubles(ref);
  const std::vector<double> c = ToDoubles(got);
  if (r.size() != c.size()) return Status::Ok();  // strings or types we do not compare
  bool ref_nonzero = false, got_all_zero = true;
  for (size_t i = 0; i < r.size(); ++i) {
    ref_nonzero = ref_nonzero || (std::isfinite(r[i]) && r[i] != 0);
    got_all_zero = got_all_zero && c[i] == 0;
    if (!std::isfinite(r[i])) {
      const bool same = std::isnan(r[i]) ? std::isnan(c[i]) : c[i] == r[i];
      if (!same) e.worst_excess = kInf;
      continue;
    }
    if (!std::isfinite(c[i])) {
      e.nonfinite = true;
      e.worst_excess = kInf;
      e.max_abs = kInf;
      continue;
    }
    const double d = std::fabs(c[i] - r[i]);
    e.max_abs = std::max(e.max_abs, d);
    if (std::fabs(r[i]) > atol) e.max_rel = std::max(e.max_rel, d / std::fabs(r[i]));
    e.worst_excess = std::max(e.worst_excess, d - (atol + rtol * std::fabs(r[i])));
  }
  // All zeros where FP32 is not: values flushed to zero somewhere upstream. Wrong whatever atol and rtol say.
  if (IsSmallFloat(ref.dtype()) && ref_nonzero && got_all_zero) e.all_zero = true;
  return Status::Ok();
}

bool WithinTolerance(const std::vector<OutputError>& errors) {
  for (const OutputError& e : errors) {
    if (e.nonfinite || e.all_zero || !(e.worst_excess <= 0)) return false;
  }
  return true;
}

std::string Sci(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// The output furthest out of tolerance, as "output 'y' max abs 1.2 (max rel 0.3)", "output 'y' non-finite" or
// "output 'y' all zero".
std::string WorstOutput(const std::vector<OutputError>& errors) {
  const OutputError* worst = nullptr;
  auto badness = [](const OutputError& e) { return std::make_tuple(e.nonfinite, e.all_zero, e.worst_excess); };
  for (const OutputError& e : errors) {
    if (!worst || badness(e) > badness(*worst)) worst = &e;
  }
  if (!worst) return "no output";
  if (worst->nonfinite) return StrCat("output '", worst->name, "' has NaN/inf where FP32 is finite");
  if (worst->all_zero) {
    return StrCat("output '", worst->name, "' is all zero where FP32 is not (max |FP32| ", Sci(worst->scale), ")");
  }
  return StrCat("output '", worst->name, "' max abs error ", Sci(worst->max_abs), ", max rel ", Sci(worst->max_rel),
                worst->below_atol ? StrCat(" (atol scaled to ", Sci(worst->atol_used), ")") : std::string());
}

// The comparison of each output before any candidate runs: its scale over every sample and the absolute tolerance
// it is judged with (atol, or atol * scale for a floating output whose every value lies below atol).
std::vector<OutputError> OutputTolerances(const std::vector<std::vector<ir::Tensor>>& refs, double atol) {
  std::vector<OutputError> out;
  for (size_t o = 0; o < refs[0].size(); ++o) {
    OutputError e;
    e.name = refs[0][o].name();
    bool floating = true;
    for (const std::vector<ir::Tensor>& sample : refs) {
      floating = floating && IsSmallFloat(sample[o].dtype());
      for (double v : ToDoubles(sample[o])) {
        if (std::isfinite(v)) e.scale = std::max(e.scale, std::fabs(v));
      }
    }
    e.below_atol = floating && e.scale > 0 && e.scale < atol;
    e.atol_used = e.below_atol ? atol * e.scale : atol;
    out.push_back(e);
  }
  return out;
}

// One unit of the search: the nodes sharing one name (the policy keeps nodes by name).
struct Candidate {
  std::string name;
  std::string op_type;
  std::vector<ir::Node*> nodes;
  double score = 0;
  std::string why;        // the failing run that shows it is needed
  std::string underflow;  // set when the probe found its FP32 output below fp16's smallest normal: what it saw
};

struct Trial {
  bool pass = false;
  std::vector<OutputError> errors;
};

class Searcher {
 public:
  Searcher(const ir::Model& base, const std::vector<std::vector<ir::Tensor>>& samples,
           const std::vector<std::vector<ir::Tensor>>& refs, const ConvertOptions& options,
           const AutoOptions& auto_opts)
      : base_(base),
        samples_(samples),
        refs_(refs),
        options_(options),
        auto_(auto_opts),
        tolerances_(OutputTolerances(refs, auto_opts.atol)) {}

  // Converts the base model with the named nodes kept FP32 and compares it with the FP32 model on every sample.
  StatusOr<Trial> Try(const std::vector<std::string>& keep) {
    ++runs_;
    ConvertOptions options = options_;
    for (const std::string& name : keep) options.policy.AddKeepNodeName(name);
    ir::Model model = CloneModel(base_);
    if (Status s = ConvertModel(model, options); !s.ok()) {
      return s.WithContext(StrCat("auto mode, converting with ", keep.size(), " nodes kept FP32"));
    }
    exec::SessionOptions so = auto_.session;
    so.num_threads = auto_.num_threads;
    StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(std::move(model), so);
    if (!session.ok()) {
      return session.status().WithContext("auto mode: the converted model does not run on the CPU runtime");
    }
    std::map<std::string, DType> input_types;
    for (const exec::IoInfo& io : (*session)->inputs()) input_types[io.name] = io.type.elem_type();
    Trial trial;
    for (const OutputError& tolerance : tolerances_) {
      OutputError e = tolerance;
      e.worst_excess = -kInf;
      trial.errors.push_back(e);
    }
    for (size_t s = 0; s < samples_.size(); ++s) {
      std::vector<ir::Tensor> inputs;
      for (const ir::Tensor& t : samples_[s]) {
        auto it = input_types.find(t.name());
        const bool cast = it != input_types.end() && IsSmallFloat(it->second) && IsSmallFloat(t.dtype());
        inputs.push_back(cast ? CastFloat(t, it->second) : t);
      }
      StatusOr<std::vector<ir::Tensor>> out = (*session)->Run(inputs);
      if (!out.ok()) return out.status().WithContext(StrCat("auto mode: converted model, sample ", s));
      if (out->size() != refs_[s].size()) {
        return Internal("auto mode: the converted model has ", out->size(), " outputs, the FP32 model ",
                        refs_[s].size());
      }
      for (size_t o = 0; o < out->size(); ++o) {
        ONNXAMP_RETURN_IF_ERROR(CompareInto(refs_[s][o], (*out)[o], auto_.rtol, trial.errors[o]));
      }
    }
    for (OutputError& e : trial.errors) {
      if (e.worst_excess == -kInf) e.worst_excess = 0;
    }
    trial.pass = WithinTolerance(trial.errors);
    return trial;
  }

  int runs() const { return runs_; }
  const std::vector<OutputError>& tolerances() const { return tolerances_; }

 private:
  const ir::Model& base_;
  const std::vector<std::vector<ir::Tensor>>& samples_;
  const std::vector<std::vector<ir::Tensor>>& refs_;
  const ConvertOptions& options_;
  const AutoOptions& auto_;
  const std::vector<OutputError> tolerances_;
  int runs_ = 0;
};

// The user's --force-low-node patterns (the policy's "low_nodes"), which the search leaves low.
std::vector<std::regex> LowNodePatterns(const PrecisionPolicy& policy) {
  std::vector<std::regex> out;
  nlohmann::json j = nlohmann::json::parse(policy.ToJson(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("low_nodes") || !j["low_nodes"].is_array()) return out;
  for (const auto& p : j["low_nodes"]) {
    if (!p.is_string()) continue;
    try {
      out.emplace_back(p.get<std::string>(), std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      // The policy validated its patterns; an unparsable one here is simply not honoured.
    }
  }
  return out;
}

// Scores every candidate from one run of a probe model: a copy of each candidate node fed with its FP32 inputs
// rounded to the target type. For fp16, a node whose whole FP32 output lies below fp16's smallest normal scores at
// least 1, as if its output were lost: fp16 holds such values as subnormals, with an absolute rather than a
// relative precision, or flushes them to zero, and what the node computes is then only as good as that (an output
// of ~1e-9 comes out as all zeros). Returns false (scores untouched) when the probe cannot run.
bool ScoreCandidates(const ir::Model& base, const std::unordered_map<std::string, ir::Tensor>& values, DType target,
                     const exec::SessionOptions& session_options, std::vector<Candidate>& candidates) {
  ir::Model probe;
  probe.ir_version = base.ir_version;
  probe.opset_imports = base.opset_imports;
  probe.graph = std::make_unique<ir::Graph>("auto_probe");
  ir::Graph& g = *probe.graph;
  std::vector<ir::Tensor> feeds;
  struct Probe {
    size_t candidate;
    std::string out;  // probe output value name
    const ir::Tensor* fp32;
    bool constant;  // a Constant node's output, which the converter clamps
  };
  std::vector<Probe> probes;
  int counter = 0;
  for (size_t c = 0; c < candidates.size(); ++c) {
    for (const ir::Node* node : candidates[c].nodes) {
      const int id = counter++;
      std::vector<ir::Value*> ins;
      bool ok = true;
      for (size_t i = 0; i < node->inputs().size(); ++i) {
        const ir::Value* v = node->inputs()[i];
        if (!v) {
          ins.push_back(nullptr);
          continue;
        }
        const ir::Tensor* src = v->initializer();
        if (auto it = values.find(v->name()); it != values.end()) src = &it->second;
        if (!src || !src->has_data()) {
          ok = false;
          break;
        }
        const bool constant = v->initializer() || (v->producer() && v->producer()->op_type() == "Constant");
        ir::Tensor feed = src->dtype() == DType::kFloat32 ? RoundThrough(*src, target, constant) : *src;
        const std::string name = StrCat("p", id, "_in", i);
        feed.set_name(name);
        ir::Value* pv = g.CreateValue(name);
        ir::Shape shape;
        for (int64_t d : feed.dims()) shape.push_back(ir::Dim::Value(d));
        pv->set_type(ir::ValueType::Tensor(feed.dtype(), shape));
        g.AddInput(pv);
        ins.push_back(pv);
        feeds.push_back(std::move(feed));
      }
      if (!ok) continue;
      std::vector<ir::Value*> outs;
      for (size_t i = 0; i < node->outputs().size(); ++i) {
        const ir::Value* v = node->outputs()[i];
        if (!v) {
          outs.push_back(nullptr);
          continue;
        }
        ir::Value* pv = g.CreateValue(StrCat("p", id, "_out", i));
        outs.push_back(pv);
        auto it = values.find(v->name());
        if (it != values.end() && it->second.dtype() == DType::kFloat32) {
          g.AddOutput(pv);
          probes.push_back({c, pv->name(), &it->second, node->op_type() == "Constant"});
        }
      }
      ir::Node* copy = g.AddNode(node->op_type(), ins, outs, StrCat("p", id), node->domain());
      for (const ir::Attribute& a : node->attributes()) copy->SetAttribute(a);
    }
  }
  const exec::SessionOptions& so = session_options;
  StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(std::move(probe), so);
  if (!session.ok()) return false;
  StatusOr<std::vector<ir::Tensor>> out = (*session)->Run(feeds);
  if (!out.ok()) return false;
  std::unordered_map<std::string, const ir::Tensor*> by_name;
  for (const ir::Tensor& t : *out) by_name[t.name()] = &t;
  for (const Probe& p : probes) {
    auto it = by_name.find(p.out);
    if (it == by_name.end() || it->second->dtype() != DType::kFloat32 || it->second->dims() != p.fp32->dims()) continue;
    const auto got = it->second->values<float>();
    const auto ref = p.fp32->values<float>();
    double max_ref = 0, max_diff = 0;
    bool nonfinite = false;
    int64_t nonzero = 0, flushed = 0;  // FP32 values that are not zero; of those, the ones the target rounds to 0
    for (size_t i = 0; i < ref.size(); ++i) {
      if (!std::isfinite(ref[i])) continue;
      const float r = RoundValue(got[i], target, p.constant);
      if (!std::isfinite(r)) {
        nonfinite = true;
        break;
      }
      max_ref = std::max(max_ref, std::fabs(double{ref[i]}));
      max_diff = std::max(max_diff, std::fabs(double{r} - double{ref[i]}));
      if (ref[i] != 0) {
        ++nonzero;
        if (r == 0) ++flushed;
      }
    }
    double score = nonfinite ? kInf : max_diff / std::max(max_ref, 1e-30);
    Candidate& candidate = candidates[p.candidate];
    if (target == DType::kFloat16 && max_ref > 0 && max_ref < kHalfMinNormal) {
      score = std::max(score, 1.0);
      candidate.underflow = StrCat("FP32 output below fp16's smallest normal (max |x| ", Sci(max_ref), ", ", flushed,
                                   " of ", nonzero, " non-zero values flush to 0)");
    }
    candidate.score = std::max(candidate.score, score);
  }
  return true;
}

std::vector<std::string> Names(const std::vector<Candidate>& ranked, const std::vector<size_t>& indices) {
  std::vector<std::string> out;
  for (size_t i : indices) out.push_back(ranked[i].name);
  return out;
}

std::vector<size_t> AllOf(size_t k) {
  std::vector<size_t> out(k);
  for (size_t i = 0; i < k; ++i) out[i] = i;
  return out;
}

}  // namespace

void NameUnnamedNodes(ir::Graph& graph) {
  std::set<std::string> names;
  for (const ir::Node* n : graph.nodes()) names.insert(n->name());
  int next = 0;
  for (ir::Node* n : graph.nodes()) {
    if (!n->name().empty()) continue;
    std::string name;
    do {
      name = StrCat(n->op_type(), "_", next++);
    } while (names.count(name));
    names.insert(name);
    n->set_name(name);
  }
}

ir::Model WithIntermediateOutputs(const ir::Model& model) {
  ir::Model copy = CloneModel(model);
  ir::Graph& g = *copy.graph;
  std::vector<ir::Value*> exposed;
  for (ir::Node* n : g.nodes()) {
    for (ir::Value* v : n->outputs()) {
      if (v && !v->is_graph_output()) exposed.push_back(v);
    }
  }
  for (ir::Value* v : exposed) g.AddOutput(v);
  return copy;
}

Status AutoConvert(ir::Model& model, const std::vector<std::vector<ir::Tensor>>& samples, ConvertOptions& options,
                   const AutoOptions& auto_options, AutoResult* result, ConvertReport* report) {
  const auto start = std::chrono::steady_clock::now();
  if (!model.graph) return InvalidArgument("auto mode: the model has no graph");
  if (samples.empty()) return InvalidArgument("auto mode needs at least one set of sample inputs");
  if (!(auto_options.rtol >= 0) || !(auto_options.atol >= 0)) {
    return InvalidArgument("auto mode: rtol and atol must be >= 0, got rtol ", auto_options.rtol, ", atol ",
                           auto_options.atol);
  }
  if (options.target != DType::kFloat16 && options.target != DType::kBFloat16) {
    return InvalidArgument("auto mode: target must be float16 or bfloat16, got ", DTypeName(options.target));
  }
  AutoResult local;
  AutoResult& res = result ? *result : local;
  res = AutoResult{};

  ir::Model base = CloneModel(model);
  NameUnnamedNodes(*base.graph);
  exec::SessionOptions so = auto_options.session;
  so.num_threads = auto_options.num_threads;

  // 1. Reference outputs; every intermediate of sample 0.
  const size_t num_outputs = base.graph->outputs().size();
  std::vector<std::vector<ir::Tensor>> refs;
  std::unordered_map<std::string, ir::Tensor> values;
  {
    ONNXAMP_ASSIGN_OR_RETURN(std::unique_ptr<exec::Session> session,
                             exec::Session::Create(WithIntermediateOutputs(base), so));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> out, session->Run(samples[0]));
    for (size_t i = num_outputs; i < out.size(); ++i) {
      std::string name = out[i].name();
      values.emplace(std::move(name), std::move(out[i]));
    }
    out.resize(num_outputs);
    for (const ir::Tensor& t : out) values.emplace(t.name(), t);
    for (const ir::Tensor& t : samples[0]) values.emplace(t.name(), t);
    refs.push_back(std::move(out));
  }
  if (samples.size() > 1) {
    ONNXAMP_ASSIGN_OR_RETURN(std::unique_ptr<exec::Session> session, exec::Session::Create(CloneModel(base), so));
    for (size_t s = 1; s < samples.size(); ++s) {
      StatusOr<std::vector<ir::Tensor>> out = session->Run(samples[s]);
      if (!out.ok()) return out.status().WithContext(StrCat("sample set ", s + 1));
      refs.push_back(std::move(out).value());
    }
  }
  res.candidate_runs = 1;
  // An output with no finite FP32 value (NaN samples, or a model that overflows on them) holds the conversion to
  // nothing: every candidate would match it or fail it whatever it kept.
  for (size_t o = 0; o < num_outputs; ++o) {
    if (!IsFloatingPoint(refs[0][o].dtype())) continue;
    int64_t values_seen = 0;
    bool finite = false;
    for (const std::vector<ir::Tensor>& sample : refs) {
      for (double v : ToDoubles(sample[o])) {
        ++values_seen;
        finite = finite || std::isfinite(v);
      }
    }
    if (values_seen > 0 && !finite) {
      return InvalidArgument("auto mode: the FP32 model's output '", refs[0][o].name(), "' has no finite value on the ",
                             samples.size(), " sample set", samples.size() == 1 ? "" : "s", " (", values_seen,
                             " values, all NaN or infinite): nothing to hold the conversion to; give samples on "
                             "which the FP32 model computes numbers");
    }
  }

  Searcher searcher(base, samples, refs, options, auto_options);
  for (const OutputError& e : searcher.tolerances()) {
    if (!e.below_atol) continue;
    res.warnings.push_back(StrCat("output '", e.name, "': every |FP32 value| is below atol ", Sci(auto_options.atol),
                                  " (max ", Sci(e.scale),
                                  "), where atol alone would pass any result, all zeros "
                                  "included; judged at its own scale, with atol x max|FP32| = ",
                                  Sci(e.atol_used), " instead"));
  }
  std::vector<std::string> keep;
  auto finish = [&](const std::vector<std::string>& kept_names, std::vector<OutputError> errors) -> Status {
    ConvertOptions final_options = options;
    for (const std::string& name : kept_names) final_options.policy.AddKeepNodeName(name);
    ConvertReport final_report;
    ONNXAMP_RETURN_IF_ERROR(ConvertModel(base, final_options, &final_report));
    std::map<std::string, std::string> reasons;
    for (const KeptNode& k : res.kept) reasons[k.name] = k.reason;
    for (KeptNode& k : final_report.kept_fp32) {
      if (auto it = reasons.find(k.name); it != reasons.end()) k.reason = it->second;
    }
    model = std::move(base);
    options = std::move(final_options);
    res.errors = std::move(errors);
    res.candidate_runs += searcher.runs();
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (report) *report = std::move(final_report);
    return Status::Ok();
  };

  // 2. The policy's conversion as it is.
  ONNXAMP_ASSIGN_OR_RETURN(Trial plain, searcher.Try({}));
  if (plain.pass) {
    res.within_tolerance = true;
    return finish({}, std::move(plain.errors));
  }

  // Candidates: top-level nodes the policy runs in low precision or lets follow, with a floating output, that the
  // user did not force low by name.
  const std::vector<std::regex> forced_low = LowNodePatterns(options.policy);
  std::vector<Candidate> candidates;
  std::map<std::string, size_t> by_name;
  for (ir::Node* n : base.graph->nodes()) {
    if (!n->subgraphs().empty()) continue;
    const Precision p = options.policy.Decide(*n).precision;
    if (p == Precision::kKeep) continue;
    bool floating = false;
    for (const ir::Value* v : n->outputs()) {
      auto it = v ? values.find(v->name()) : values.end();
      floating = floating || (it != values.end() && it->second.dtype() == DType::kFloat32);
    }
    if (!floating) continue;
    bool forced = false;
    for (const std::regex& re : forced_low) forced = forced || std::regex_match(n->name(), re);
    if (forced) continue;
    auto [it, inserted] = by_name.emplace(n->name(), candidates.size());
    if (inserted) candidates.push_back({n->name(), n->op_type(), {}, 0, "", ""});
    candidates[it->second].nodes.push_back(n);
  }

  // 3. Rank by sensitivity (ties keep graph order).
  const bool scored = ScoreCandidates(base, values, options.target, so, candidates);
  res.candidate_runs += 1;
  values.clear();
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  const size_t n = candidates.size();
  auto rank_text = [&](size_t i) {
    const Candidate& c = candidates[i];
    return scored ? StrCat("local error ", Sci(c.score), c.underflow.empty() ? "" : StrCat(" (", c.underflow, ")"),
                           ", rank ", i + 1, " of ", n)
                  : StrCat("rank ", i + 1, " of ", n, " (no sensitivity probe)");
  };

  // 4. Everything kept.
  ONNXAMP_ASSIGN_OR_RETURN(Trial all, searcher.Try(Names(candidates, AllOf(n))));
  if (!all.pass || n == 0) {
    for (size_t i = 0; i < n; ++i) {
      res.kept.push_back({candidates[i].name, candidates[i].op_type,
                          StrCat("auto: tolerance not met even with every candidate node FP32 (", rank_text(i), ")")});
    }
    res.within_tolerance = false;
    return finish(Names(candidates, AllOf(n)), std::move(all.errors));
  }

  // 5. Bisection over the ranked list for the shortest passing prefix: prefix `lo` fails, prefix `hi` passes.
  size_t lo = 0, hi = n;
  std::vector<OutputError> pass_errors = std::move(all.errors);
  std::string lo_failure = WorstOutput(plain.errors);
  while (hi - lo > 1 && searcher.runs() < auto_options.max_runs) {
    const size_t mid = lo + (hi - lo) / 2;
    ONNXAMP_ASSIGN_OR_RETURN(Trial t, searcher.Try(Names(candidates, AllOf(mid))));
    if (t.pass) {
      hi = mid;
      pass_errors = std::move(t.errors);
    } else {
      lo = mid;
      lo_failure = WorstOutput(t.errors);
    }
  }
  candidates[hi - 1].why = StrCat("without it: ", lo_failure);

  // 6. Descent within the prefix, least sensitive first: a group whose return to low precision keeps the model
  // within tolerance goes low as a whole; a failing group is split in halves, each tried in turn (depth first),
  // down to single nodes, which are then known to be needed. The ranking is only a local measure, so this undoes
  // its mistakes; it is bounded to about log2(n) + 4 runs, after which what is left untried stays FP32.
  std::vector<bool> is_kept(n, false);
  for (size_t i = 0; i < hi; ++i) is_kept[i] = true;
  auto kept_except = [&](size_t begin, size_t end) {
    std::vector<size_t> out;
    for (size_t i = 0; i < n; ++i) {
      if (is_kept[i] && (i < begin || i >= end)) out.push_back(i);
    }
    return out;
  };
  const int budget = searcher.runs() + static_cast<int>(std::ceil(std::log2(static_cast<double>(n) + 1))) + 4;
  // Groups are ranges of `candidates` (most sensitive first); the stack pops the less sensitive range first. The
  // prefix's last node is known to be needed given the others, so it is left out.
  std::vector<std::pair<size_t, size_t>> stack = {{0, hi - 1}};
  bool budget_left = true;
  while (!stack.empty()) {
    const auto [begin, end] = stack.back();
    stack.pop_back();
    size_t in_group = 0;
    for (size_t i = begin; i < end; ++i) in_group += is_kept[i] ? 1 : 0;
    if (in_group == 0) continue;
    if (searcher.runs() >= std::min(budget, auto_options.max_runs)) {
      budget_left = false;
      continue;
    }
    ONNXAMP_ASSIGN_OR_RETURN(Trial t, searcher.Try(Names(candidates, kept_except(begin, end))));
    if (t.pass) {
      for (size_t i = begin; i < end; ++i) is_kept[i] = false;
      pass_errors = std::move(t.errors);
      continue;
    }
    if (end - begin == 1) {
      candidates[begin].why = StrCat("without it: ", WorstOutput(t.errors));
      continue;
    }
    const size_t mid = begin + (end - begin + 1) / 2;
    stack.push_back({begin, mid});  // the more sensitive half, tried after
    stack.push_back({mid, end});
  }

  for (size_t i = 0; i < n; ++i) {
    if (!is_kept[i]) continue;
    const std::string why =
        candidates[i].why.empty()
            ? std::string(budget_left ? "kept with its group" : "search budget spent before it was tried alone")
            : candidates[i].why;
    res.kept.push_back({candidates[i].name, candidates[i].op_type, StrCat("auto: ", rank_text(i), "; ", why)});
  }
  std::vector<std::string> kept_names;
  for (const KeptNode& k : res.kept) kept_names.push_back(k.name);
  res.within_tolerance = true;
  return finish(kept_names, std::move(pass_errors));
}

}  // namespace onnxamp::converter
