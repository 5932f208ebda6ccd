// Helpers for the converter tests: a small graph builder, the ONNX 1.12 checker with strict shape inference,
// runs on the CPU runtime, and queries on converted graphs.
#pragma once

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "converter/convert.h"
#include "converter/passes/passes.h"
#include "importer/onnx_proto.h"
#include "runtime/common/half.h"
#include "runtime/executor/session.h"
#include "runtime/ir/model.h"
#include "runtime/ir/verify.h"

namespace onnxamp::converter::testing {

// Builds graphs by value name: the first mention of a name as an output creates it.
class Builder {
 public:
  explicit Builder(ir::Graph* g) : g_(g) {}

  ir::Value* Input(const std::string& name, DType t, std::vector<int64_t> dims) {
    ir::Value* v = g_->CreateValue(name);
    v->set_type(ir::ValueType::Tensor(t, ToShape(dims)));
    g_->AddInput(v);
    return v;
  }
  ir::Value* Init(const std::string& name, std::vector<int64_t> dims, const std::vector<float>& values) {
    ir::Tensor t(DType::kFloat32, dims);
    auto out = t.mutable_values<float>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = values.empty() ? 0.0f : values[i % values.size()];
    t.set_name(name);
    ir::Value* v = g_->CreateValue(name);
    v->set_type(ir::ValueType::Tensor(DType::kFloat32, ToShape(dims)));
    g_->SetInitializer(v, std::move(t));
    return v;
  }
  ir::Value* InitInt64(const std::string& name, const std::vector<int64_t>& values) {
    ir::Tensor t(DType::kInt64, {static_cast<int64_t>(values.size())});
    std::copy(values.begin(), values.end(), t.mutable_values<int64_t>().begin());
    t.set_name(name);
    ir::Value* v = g_->CreateValue(name);
    v->set_type(ir::ValueType::Tensor(DType::kInt64, ToShape({static_cast<int64_t>(values.size())})));
    g_->SetInitializer(v, std::move(t));
    return v;
  }
  // A node reading `inputs` ("" for an omitted one) and writing `outputs`.
  ir::Node* Node(const std::string& op, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                 std::vector<ir::Attribute> attrs = {}, const std::string& name = "") {
    std::vector<ir::Value*> in, out;
    for (const auto& n : inputs) {
      if (n.empty()) {
        in.push_back(nullptr);
        continue;
      }
      ir::Value* v = g_->FindValue(n);
      if (!v) v = g_->CreateOuterScopeValue(n);
      in.push_back(v);
    }
    for (const auto& n : outputs) out.push_back(g_->CreateValue(n));
    ir::Node* node = g_->AddNode(op, in, out, name.empty() ? outputs[0] + "_node" : name);
    for (auto& a : attrs) node->SetAttribute(std::move(a));
    return node;
  }
  void Output(const std::string& name, DType t, std::vector<int64_t> dims) {
    ir::Value* v = g_->FindValue(name);
    v->set_type(ir::ValueType::Tensor(t, ToShape(dims)));
    g_->AddOutput(v);
  }
  static ir::Shape ToShape(const std::vector<int64_t>& dims) {
    ir::Shape s;
    for (int64_t d : dims) s.push_back(ir::Dim::Value(d));
    return s;
  }

 private:
  ir::Graph* g_;
};

inline ir::Model NewModel(int64_t opset = 17) {
  ir::Model m;
  m.opset_imports = {{"", opset}};
  m.graph->set_name("main");
  return m;
}

// The ONNX 1.12 checker (full check: strict shape and type inference). Empty when the model passes.
inline std::string OnnxCheck(const ir::Model& model) {
  onnx::ModelProto proto;
  importer::ModelToProto(model, &proto);
  try {
    onnx::checker::check_model(proto);
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(/*check_type=*/true, /*strict=*/1, false));
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The model as deterministic ModelProto bytes, to compare two models exactly.
inline std::string Serialize(const ir::Model& model) {
  onnx::ModelProto proto;
  importer::ModelToProto(model, &proto);
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  proto.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

// Nodes of a graph (not its subgraphs) with this op type.
inline std::vector<ir::Node*> NodesOf(const ir::Graph& g, const std::string& op) {
  std::vector<ir::Node*> out;
  for (ir::Node* n : g.nodes())
    if (n->op_type() == op) out.push_back(n);
  return out;
}

inline DType ElemType(const ir::Graph& g, const std::string& value) {
  const ir::Value* v = g.FindValue(value);
  return v && v->type().is_tensor() ? v->type().elem_type() : DType::kUndefined;
}

// The producer's op type of the value node `consumer` reads at input `index`.
inline std::string ProducerOp(const ir::Node* consumer, int index) {
  const ir::Value* v = consumer->input(index);
  return v && v->producer() ? v->producer()->op_type() : "";
}

inline ir::Node* NodeNamed(const ir::Graph& g, const std::string& name) {
  for (ir::Node* n : g.nodes())
    if (n->name() == name) return n;
  return nullptr;
}

// A float32 tensor of `dims` with uniform values in [lo, hi).
inline ir::Tensor RandomTensor(std::vector<int64_t> dims, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  ir::Tensor t(DType::kFloat32, std::move(dims));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& x : t.mutable_values<float>()) x = dist(rng);
  return t;
}

// Element values of a float tensor of any float width, as doubles.
inline std::vector<double> AsDoubles(const ir::Tensor& t) {
  std::vector<double> out;
  const int64_t n = t.num_elements();
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype()) {
      case DType::kFloat32:
        out.push_back(t.values<float>()[i]);
        break;
      case DType::kFloat16:
        out.push_back(HalfBitsToFloat(t.values<uint16_t>()[i]));
        break;
      case DType::kBFloat16:
        out.push_back(BFloat16BitsToFloat(t.values<uint16_t>()[i]));
        break;
      case DType::kFloat64:
        out.push_back(t.values<double>()[i]);
        break;
      case DType::kInt64:
        out.push_back(static_cast<double>(t.values<int64_t>()[i]));
        break;
      case DType::kInt32:
        out.push_back(t.values<int32_t>()[i]);
        break;
      case DType::kBool:
      case DType::kUint8:
        out.push_back(t.values<uint8_t>()[i]);
        break;
      case DType::kInt8:
        out.push_back(t.values<int8_t>()[i]);
        break;
      default:
        return {};
    }
  }
  return out;
}

// Converts a float32 tensor to `t` (fp16/bf16/fp32) so that it can feed a converted model.
inline ir::Tensor ToType(const ir::Tensor& src, DType t) {
  if (src.dtype() != DType::kFloat32 || t == DType::kFloat32) return src;
  ir::Tensor out(t, src.dims());
  out.set_name(src.name());
  auto in = src.values<float>();
  auto o = out.mutable_values<uint16_t>();
  for (size_t i = 0; i < in.size(); ++i)
    o[i] = t == DType::kFloat16 ? FloatToHalfBits(in[i]) : FloatToBFloat16Bits(in[i]);
  return out;
}

inline StatusOr<std::vector<ir::Tensor>> RunModel(const ir::Model& model, const std::vector<ir::Tensor>& inputs) {
  ir::Model copy;
  copy.ir_version = model.ir_version;
  copy.opset_imports = model.opset_imports;
  copy.graph = model.graph->Clone();
  exec::SessionOptions options;
  options.num_threads = 1;
  ONNXAMP_ASSIGN_OR_RETURN(auto session, exec::Session::Create(std::move(copy), options));
  // Feed each input in the type the model declares.
  std::vector<ir::Tensor> fed;
  for (const ir::Tensor& t : inputs) {
    const ir::Value* v = model.graph->FindValue(t.name());
    fed.push_back(v && v->type().is_tensor() ? ToType(t, v->type().elem_type()) : t);
  }
  return session->Run(fed);
}

// Runs the conversion passes (ConversionPasses) one by one, as ConvertModel does, with ir::Verify after each: a pass
// that leaves the graph invalid fails the test with its name.
inline void RunPassesVerified(ir::Model& m, const ConvertOptions& options, ConvertReport* report) {
  ConversionState state;
  state.options = options;
  state.report = report;
  state.model = &m;
  passes::PassContext ctx;
  ctx.verify = true;
  const Status st = ConversionPasses(state).Run(m, ctx);
  ASSERT_TRUE(st.ok()) << st.message();
}

}  // namespace onnxamp::converter::testing
