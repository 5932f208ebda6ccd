// Running one ONNX backend test case through the CPU runtime or a device backend (see runner.h).
#include "tests/conformance/runner.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <filesystem>
#include <regex>

#include "importer/model_io.h"
#include "importer/tensor_file.h"
#include "runtime/common/file_util.h"
#include "runtime/executor/session.h"
#include "runtime/executor/session_env.h"
#include "trainer/autodiff/gradient_op.h"
#ifdef ONNXAMP_WITH_CUDA
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/device.h"
#endif

namespace onnxamp::conformance {
namespace fs = std::filesystem;

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPassed:
      return "passed";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kUnsupported:
      return "unsupported";
  }
  return "?";
}

const std::set<std::string>& InScopeOps() {
  static const std::set<std::string> ops = {"Add",
                                            "Sub",
                                            "Mul",
                                            "Div",
                                            "Pow",
                                            "Sqrt",
                                            "Exp",
                                            "Log",
                                            "Neg",
                                            "Abs",
                                            "Reciprocal",
                                            "Relu",
                                            "LeakyRelu",
                                            "Elu",
                                            "Sigmoid",
                                            "Tanh",
                                            "Erf",
                                            "Gelu",
                                            "Softplus",
                                            "Clip",
                                            "Min",
                                            "Max",
                                            "Where",
                                            "Equal",
                                            "Less",
                                            "Greater",
                                            "Not",
                                            "And",
                                            "Or",
                                            "Cast",
                                            "CastLike",
                                            "Identity",
                                            "Dropout",
                                            "MatMul",
                                            "Gemm",
                                            "Conv",
                                            "ConvTranspose",
                                            "BatchNormalization",
                                            "LayerNormalization",
                                            "GroupNormalization",
                                            "InstanceNormalization",
                                            "MaxPool",
                                            "AveragePool",
                                            "GlobalAveragePool",
                                            "GlobalMaxPool",
                                            "Flatten",
                                            "Reshape",
                                            "Transpose",
                                            "Squeeze",
                                            "Unsqueeze",
                                            "Concat",
                                            "Split",
                                            "Slice",
                                            "Gather",
                                            "GatherElements",
                                            "Expand",
                                            "Tile",
                                            "Pad",
                                            "Shape",
                                            "Size",
                                            "Constant",
                                            "ConstantOfShape",
                                            "Range",
                                            "ReduceSum",
                                            "ReduceMean",
                                            "ReduceMax",
                                            "ReduceMin",
                                            "ReduceProd",
                                            "ReduceL2",
                                            "ReduceSumSquare",
                                            "ReduceLogSumExp",
                                            "Softmax",
                                            "LogSoftmax",
                                            "ArgMax",
                                            "TopK",
                                            "SoftmaxCrossEntropyLoss",
                                            "NegativeLogLikelihoodLoss",
                                            "Einsum",
                                            "Resize"};
  return ops;
}

namespace {

// The issue's opset range starts at 7: models importing an older default-domain opset are out of scope.
constexpr int64_t kMinScopeOpset = 7;

// What a model uses, read from the proto directly so that it is known even when the importer refuses it.
struct Scope {
  std::set<std::string> ops;
  std::set<std::string> out_of_scope;
};

void AddTypeScope(const onnx::TypeProto& type, Scope& scope) {
  switch (type.value_case()) {
    case onnx::TypeProto::kTensorType: {
      const int32_t t = type.tensor_type().elem_type();
      if (t == onnx::TensorProto::STRING) scope.out_of_scope.insert("string tensors");
      if (t == onnx::TensorProto::COMPLEX64 || t == onnx::TensorProto::COMPLEX128) {
        scope.out_of_scope.insert("complex tensors");
      }
      break;
    }
    case onnx::TypeProto::kSequenceType:
      scope.out_of_scope.insert("sequence values");
      break;
    case onnx::TypeProto::kMapType:
      scope.out_of_scope.insert("map values");
      break;
    case onnx::TypeProto::kOptionalType:
      scope.out_of_scope.insert("optional values");
      break;
    case onnx::TypeProto::kSparseTensorType:
      scope.out_of_scope.insert("sparse tensors");
      break;
    default:
      break;
  }
}

void AddGraphScope(const onnx::GraphProto& g, Scope& scope) {
  for (const onnx::ValueInfoProto& v : g.input()) AddTypeScope(v.type(), scope);
  for (const onnx::ValueInfoProto& v : g.output()) AddTypeScope(v.type(), scope);
  for (const onnx::TensorProto& t : g.initializer()) {
    if (t.data_type() == onnx::TensorProto::STRING) scope.out_of_scope.insert("string tensors");
  }
  if (g.sparse_initializer_size() > 0) scope.out_of_scope.insert("sparse tensors");
  for (const onnx::NodeProto& n : g.node()) {
    const bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
    const std::string op = default_domain ? n.op_type() : n.domain() + ":" + n.op_type();
    scope.ops.insert(op);
    if (!default_domain || !InScopeOps().count(op)) scope.out_of_scope.insert(op);
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.has_g()) AddGraphScope(a.g(), scope);
      for (const onnx::GraphProto& sub : a.graphs()) AddGraphScope(sub, scope);
      if (a.has_t() && a.t().data_type() == onnx::TensorProto::STRING) scope.out_of_scope.insert("string tensors");
    }
  }
}

StatusOr<Scope> ReadScope(const std::string& model_path) {
  ONNXAMP_ASSIGN_OR_RETURN(std::string bytes, ReadFile(model_path, 1ull << 31));
  onnx::ModelProto proto;
  if (!proto.ParseFromString(bytes)) return InvalidArgument(model_path, ": not a valid ModelProto");
  Scope scope;
  AddGraphScope(proto.graph(), scope);
  for (const onnx::OperatorSetIdProto& o : proto.opset_import()) {
    if ((o.domain().empty() || o.domain() == "ai.onnx") && o.version() < kMinScopeOpset) {
      scope.out_of_scope.insert(StrCat("opset ", o.version(), " (before ", kMinScopeOpset, ")"));
    }
  }
  return scope;
}

// ONNX 1.12's test data store bfloat16 tensors as uint16 bit patterns (numpy has no bfloat16). A uint16 tensor
// given where the model declares bfloat16 is reinterpreted, bits unchanged.
ir::Tensor AsDeclared(ir::Tensor t, DType declared) {
  if (declared != DType::kBFloat16 || t.dtype() != DType::kUint16 || !t.buffer()) return t;
  ir::Tensor out = ir::Tensor::FromBuffer(DType::kBFloat16, t.dims(), t.buffer());
  out.set_name(t.name());
  return out;
}

std::string Join(const std::set<std::string>& items, const char* sep) {
  std::string s;
  for (const std::string& i : items) {
    if (!s.empty()) s += sep;
    s += i;
  }
  return s;
}

std::string CulpritFromOps(const std::vector<std::string>& op_list) {
  std::set<std::string> ops(op_list.begin(), op_list.end());
  if (ops.size() > 1) ops.erase("Constant");
  return ops.empty() ? "(no op)" : Join(ops, "+");
}

// The op a runtime error message names ("node Add 'n'", "node Add (unnamed", "node 'n' (Add)"), or "".
std::string OpNamedIn(const std::string& message) {
  static const std::regex executor_form(R"(node ([A-Za-z_][A-Za-z0-9_]*) ['(])");
  static const std::regex importer_form(R"(node '[^']*' \(([A-Za-z_][A-Za-z0-9_]*)\))");
  std::smatch m;
  if (std::regex_search(message, m, executor_form)) return m[1];
  if (std::regex_search(message, m, importer_form)) return m[1];
  return "";
}

// Files `prefix`0.pb, `prefix`1.pb, ... in `dir`, up to the first gap.
std::vector<std::string> NumberedFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> files;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    std::error_code ec;
    if (!fs::exists(p, ec)) break;
    files.push_back(p.string());
  }
  return files;
}

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  constexpr size_t kMax = 600;
  if (s.size() > kMax) s = s.substr(0, kMax) + "...";
  return s;
}

class Runner {
 public:
  Runner(const TestCase& test, const RunOptions& options) : test_(test), options_(options) {}

  TestResult Run() {
    const auto start = std::chrono::steady_clock::now();
    const std::string model_path = (fs::path(test_.dir) / "model.onnx").string();
    StatusOr<Scope> scope = ReadScope(model_path);
    if (scope.ok()) {
      result_.ops.assign(scope->ops.begin(), scope->ops.end());
      result_.out_of_scope.assign(scope->out_of_scope.begin(), scope->out_of_scope.end());
    }
    Status st = scope.ok() ? Check(model_path) : scope.status();
    if (st.ok()) {
      result_.outcome = Outcome::kPassed;
    } else {
      const bool out_of_scope = !result_.out_of_scope.empty();
      if (out_of_scope && !mismatch_ && st.code() != StatusCode::kInternal) {
        result_.outcome = Outcome::kUnsupported;
        result_.reason = OneLine(StrCat("uses ", Join(scope->out_of_scope, ", "), ": ", st.message()));
      } else {
        result_.outcome = Outcome::kFailed;
        result_.reason = OneLine(StrCat(StatusCodeName(st.code()), ": ", st.message()));
      }
      if (result_.culprit.empty()) result_.culprit = OpNamedIn(st.message());
      if (result_.culprit.empty()) result_.culprit = CulpritFromOps(result_.ops);
    }
    result_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result_;
  }

 private:
  Status Check(const std::string& model_path) {
    ONNXAMP_ASSIGN_OR_RETURN(ir::Model model, importer::LoadModel(model_path));
    // As `onnxamp run` does: Gradient nodes (ai.onnx.preview.training) become the backward pass they stand for.
    ONNXAMP_RETURN_IF_ERROR(trainer::ExpandGradientOps(model).status());
    ONNXAMP_ASSIGN_OR_RETURN(exec::SessionOptions so, exec::CliSessionOptionsFromEnvironment());
    so.device = options_.device;
    so.device_index = options_.device_index;
    so.num_threads = options_.session_threads;
    so.memory_limit_bytes = options_.memory_limit_bytes;
    ONNXAMP_ASSIGN_OR_RETURN(std::unique_ptr<exec::Session> session, exec::Session::Create(std::move(model), so));
    if (options_.device != exec::Device::kCpu) result_.cpu_nodes = static_cast<int>(session->placement().on_cpu.size());

    // As ONNX's runner does: input files go to the graph inputs without an initializer, in order.
    std::vector<std::string> input_names;
    std::vector<DType> input_types;
    for (const exec::IoInfo& io : session->inputs()) {
      if (io.has_default) continue;
      input_names.push_back(io.name);
      input_types.push_back(io.type.is_tensor() ? io.type.elem_type() : DType::kUndefined);
    }
    std::vector<fs::path> data_sets;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(test_.dir, ec)) {
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) {
        data_sets.push_back(e.path());
      }
    }
    std::sort(data_sets.begin(), data_sets.end());
    if (data_sets.empty()) return NotFound(test_.dir, ": no test_data_set_* folder");

    for (const fs::path& ds : data_sets) {
      const std::string ds_name = ds.filename().string();
      std::vector<std::string> in_files = NumberedFiles(ds, "input_");
      if (in_files.size() > input_names.size()) {
        return InvalidArgument(ds_name, ": ", in_files.size(), " input files but the model has ", input_names.size(),
                               " inputs without an initializer");
      }
      std::vector<ir::Tensor> inputs;
      for (size_t i = 0; i < in_files.size(); ++i) {
        StatusOr<ir::Tensor> t = importer::ReadTensorFile(in_files[i]);
        if (!t.ok()) return t.status();
        t->set_name(input_names[i]);
        inputs.push_back(AsDeclared(std::move(t).value(), input_types[i]));
      }
      exec::RunStats stats;
      StatusOr<std::vector<ir::Tensor>> outputs = session->Run(inputs, &stats);
      if (!outputs.ok()) return outputs.status().WithContext(ds_name);
      std::vector<std::string> out_files = NumberedFiles(ds, "output_");
      if (outputs->size() != out_files.size()) {
        mismatch_ = true;
        return InvalidArgument(ds_name, ": the model produced ", outputs->size(), " outputs, the test data has ",
                               out_files.size());
      }
      for (size_t i = 0; i < out_files.size(); ++i) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor file_want, importer::ReadTensorFile(out_files[i]));
        const ir::Value* v = session->model().graph->outputs()[i];
        const ir::Tensor want =
            AsDeclared(std::move(file_want), v->type().is_tensor() ? v->type().elem_type() : DType::kUndefined);
        Status cmp = CompareTensors((*outputs)[i], want, options_.tolerance);
        if (!cmp.ok()) {
          mismatch_ = true;
          const std::string producer = v->producer() ? v->producer()->op_type() : "";
          result_.culprit = producer.empty() ? "(graph input)" : producer;
          return InvalidArgument(ds_name, ": output ", i, " '", v->name(), "'",
                                 producer.empty() ? "" : StrCat(" (from ", producer, ")"), ": ", cmp.message());
        }
      }
    }
    return Status::Ok();
  }

  const TestCase& test_;
  const RunOptions& options_;
  TestResult result_;
  bool mismatch_ = false;
};

}  // namespace

std::vector<TestCase> FindTests(const std::string& root, const std::vector<std::string>& suites) {
  std::vector<TestCase> tests;
  std::error_code ec;
  auto add_suite = [&](const fs::path& dir, const std::string& suite) {
    std::vector<TestCase> found;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_directory() && fs::exists(e.path() / "model.onnx")) {
        found.push_back({suite, e.path().filename().string(), e.path().string()});
      }
    }
    std::sort(found.begin(), found.end(), [](const TestCase& a, const TestCase& b) { return a.name < b.name; });
    tests.insert(tests.end(), found.begin(), found.end());
  };
  bool any_suite = false;
  for (const std::string& s : suites) {
    if (fs::is_directory(fs::path(root) / s, ec)) {
      add_suite(fs::path(root) / s, s);
      any_suite = true;
    }
  }
  if (!any_suite) add_suite(fs::path(root), fs::path(root).filename().string());
  return tests;
}

void DescribeModel(const TestCase& test, TestResult* result) {
  StatusOr<Scope> scope = ReadScope((fs::path(test.dir) / "model.onnx").string());
  if (!scope.ok()) return;
  result->ops.assign(scope->ops.begin(), scope->ops.end());
  result->out_of_scope.assign(scope->out_of_scope.begin(), scope->out_of_scope.end());
  if (result->culprit.empty()) result->culprit = CulpritFromOps(result->ops);
}

Status PrepareDevice(exec::Device device) {
  if (device == exec::Device::kCpu) return Status::Ok();
#ifdef ONNXAMP_WITH_CUDA
  // Registers once per process; RegisterCudaBackend is cheap to call again but queries the driver each time.
  static const bool registered = cuda::RegisterCudaBackend();
  if (registered) return Status::Ok();
  return FailedPrecondition("--device cuda: ", cuda::DescribeCudaDevices());
#else
  return FailedPrecondition("--device cuda: this build has no CUDA backend");
#endif
}

std::string DescribeDevices() {
#ifdef ONNXAMP_WITH_CUDA
  return cuda::DescribeCudaDevices();
#else
  return "";
#endif
}

TestResult RunTest(const TestCase& test, const RunOptions& options) {
  try {
    if (Status st = PrepareDevice(options.device); !st.ok()) {
      TestResult r;
      r.reason = OneLine(st.message());
      DescribeModel(test, &r);
      return r;
    }
    return Runner(test, options).Run();
  } catch (const std::exception& e) {
    TestResult r;
    r.reason = OneLine(StrCat("exception: ", e.what()));
    DescribeModel(test, &r);
    return r;
  } catch (...) {
    TestResult r;
    r.reason = "exception of unknown type";
    DescribeModel(test, &r);
    return r;
  }
}

}  // namespace onnxamp::conformance
