// Small builders for ONNX protos and scratch folders used by the importer tests.
#pragma once

#include <gmock/gmock.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "runtime/common/file_util.h"

namespace onnxamp::importer::testing {

// A model with one default-domain opset import and an empty graph named "main".
inline onnx::ModelProto MakeModel(int64_t opset = 17, int64_t ir_version = 8) {
  onnx::ModelProto m;
  m.set_ir_version(ir_version);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name("main");
  return m;
}

inline void SetTensorType(onnx::TypeProto* t, int32_t elem, std::initializer_list<int64_t> dims) {
  auto* tt = t->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

inline onnx::ValueInfoProto* AddInput(onnx::GraphProto* g, const std::string& name, int32_t elem = 1,
                                      std::initializer_list<int64_t> dims = {2}) {
  auto* vi = g->add_input();
  vi->set_name(name);
  SetTensorType(vi->mutable_type(), elem, dims);
  return vi;
}

inline onnx::ValueInfoProto* AddOutput(onnx::GraphProto* g, const std::string& name, int32_t elem = 1,
                                       std::initializer_list<int64_t> dims = {2}) {
  auto* vi = g->add_output();
  vi->set_name(name);
  SetTensorType(vi->mutable_type(), elem, dims);
  return vi;
}

inline onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, std::vector<std::string> inputs,
                                std::vector<std::string> outputs, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  if (!name.empty()) n->set_name(name);
  return n;
}

// A float tensor with raw_data.
inline onnx::TensorProto FloatTensor(const std::string& name, std::vector<int64_t> dims, std::vector<float> values) {
  onnx::TensorProto t;
  if (!name.empty()) t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return t;
}

// x -> Relu -> y, the smallest valid model.
inline onnx::ModelProto MakeReluModel() {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x");
  AddNode(g, "Relu", {"x"}, {"y"}, "relu");
  AddOutput(g, "y");
  return m;
}

// y = x + w with `w` an initializer of `n` floats.
inline onnx::ModelProto MakeAddModel(int64_t n = 4) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", 1, {n});
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) w[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i);
  *g->add_initializer() = FloatTensor("w", {n}, w);
  AddNode(g, "Add", {"x", "w"}, {"y"}, "add");
  AddOutput(g, "y", 1, {n});
  return m;
}

inline std::string Serialize(const google::protobuf::MessageLite& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

// The bytes SaveModel writes for `m`: protobuf's deterministic serialization.
inline std::string SerializeDeterministic(const google::protobuf::MessageLite& m) {
  std::string s;
  {
    google::protobuf::io::StringOutputStream stream(&s);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return s;
}

// A fresh folder under the system temporary folder, removed with everything in it at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "onnxamp_importer_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed: " << std::strerror(errno);
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Writes `data` to `name` inside the folder and returns its path.
  std::string Write(const std::string& name, const std::string& data) const {
    const std::string p = File(name);
    EXPECT_TRUE(WriteFileAtomic(p, data).ok()) << p;
    return p;
  }
  // Names of the entries in the folder, sorted.
  std::vector<std::string> List() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::string path_;
};

}  // namespace onnxamp::importer::testing
