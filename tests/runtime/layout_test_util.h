// Graph builders and helpers for the layout-pass tests (blocked and channels-last): resnet-like graphs of
// Conv/BatchNormalization/Relu/Add, poolings and a classifier head, with random constant weights.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/ir/model.h"
#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::testing {

using Dims = std::vector<int64_t>;

// Builds graphs of `dtype` (float32 by default) from X [N, C, H, W] (N, H, W symbolic) with random constant weights
// (BatchNormalization parameters in float32, as the converter keeps them); intermediate values get no types, as in
// a model written without shape inference.
class Builder {
 public:
  explicit Builder(int64_t c, DType dtype = DType::kFloat32) : dtype_(dtype) {
    model_.opset_imports = {{"", 17}};
    x_ = g().CreateValue("X");
    x_->set_type(ir::ValueType::Tensor(
        dtype, ir::Shape{ir::Dim::Param("N"), ir::Dim::Value(c), ir::Dim::Param("H"), ir::Dim::Param("W")}));
    g().AddInput(x_);
    channels_[x_] = c;
  }

  ir::Graph& g() { return *model_.graph; }
  ir::Value* x() const { return x_; }

  // Conv (k x k, pads k / 2) -> BatchNormalization [-> Add(z)] [-> Relu].
  ir::Value* Conv(ir::Value* in, int64_t m, int64_t k = 3, int64_t stride = 1, ir::Value* z = nullptr,
                  bool relu = true) {
    const int64_t c = channels_.at(in);
    ir::Value* y = Node("Conv", {in, Constant({m, c, k, k}, dtype_), Constant({m}, dtype_)});
    ir::Node* conv = y->producer();
    conv->SetAttribute(ir::Attribute::Ints("kernel_shape", {k, k}));
    conv->SetAttribute(ir::Attribute::Ints("pads", {k / 2, k / 2, k / 2, k / 2}));
    conv->SetAttribute(ir::Attribute::Ints("strides", {stride, stride}));
    y = Node("BatchNormalization", {y, Constant({m}, DType::kFloat32, 0.5, 1.5), Constant({m}, DType::kFloat32),
                                    Constant({m}, DType::kFloat32), Constant({m}, DType::kFloat32, 0.25, 2.0)});
    if (z) y = Node("Add", {y, z});
    if (relu) y = Node("Relu", {y});
    channels_[y] = m;
    return y;
  }

  ir::Value* Pool(const char* op, ir::Value* in, int64_t k, int64_t stride) {
    ir::Value* y = Node(op, {in});
    y->producer()->SetAttribute(ir::Attribute::Ints("kernel_shape", {k, k}));
    y->producer()->SetAttribute(ir::Attribute::Ints("strides", {stride, stride}));
    channels_[y] = channels_.at(in);
    return y;
  }

  ir::Value* Node(const std::string& op, std::vector<ir::Value*> inputs) {
    ir::Value* y = g().CreateValue(g().UniqueName(op + "_out"));
    g().AddNode(op, inputs, {y}, g().UniqueName(op));
    if (!inputs.empty() && channels_.count(inputs[0])) channels_[y] = channels_.at(inputs[0]);
    return y;
  }

  // GlobalAveragePool -> Flatten -> Gemm to 10 outputs.
  ir::Value* Head(ir::Value* in) {
    const int64_t c = channels_.at(in);
    ir::Value* y = Node("GlobalAveragePool", {in});
    y = Node("Flatten", {y});
    ir::Value* out = Node("Gemm", {y, Constant({10, c}, dtype_), Constant({10}, dtype_)});
    out->producer()->SetAttribute(ir::Attribute::Int("transB", 1));
    return out;
  }

  void Output(ir::Value* v) {
    v->set_type(ir::ValueType::Tensor(dtype_));
    g().AddOutput(v);
  }

  ir::Model Take() { return std::move(model_); }

 private:
  ir::Value* Constant(Dims dims, DType dtype, double lo = -0.5, double hi = 0.5) {
    ir::Value* v = g().CreateValue(g().UniqueName("w"));
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    v->set_type(ir::ValueType::Tensor(dtype));
    g().SetInitializer(v, TensorOf(dtype, dims, RandomValues(dtype, n, ++seed_ * 7919u, lo, hi)));
    return v;
  }

  DType dtype_;
  ir::Model model_;
  ir::Value* x_;
  std::map<const ir::Value*, int64_t> channels_;
  uint32_t seed_ = 0;
};

inline ir::Model CopyModel(const ir::Model& m) {
  ir::Model c;
  c.opset_imports = m.opset_imports;
  c.graph = m.graph->Clone();
  return c;
}

inline int Count(const ir::Model& m, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : m.graph->nodes()) n += node->op_type() == op;
  return n;
}

// cnn.onnx's shape: conv, max pool, a residual block, a strided block with a 1x1 shortcut, global pool, Gemm.
inline ir::Model ResNetLike(int64_t c0, int64_t c1, int64_t c2, DType dtype = DType::kFloat32) {
  Builder b(c0, dtype);
  ir::Value* a = b.Conv(b.x(), c1);
  ir::Value* p = b.Pool("MaxPool", a, 2, 2);
  ir::Value* r = b.Conv(b.Conv(p, c1), c1, 3, 1, p);
  ir::Value* s = b.Conv(r, c2, 1, 2, nullptr, false);
  ir::Value* t = b.Conv(b.Conv(r, c2, 3, 2), c2, 3, 1, s);
  b.Output(b.Head(t));
  return b.Take();
}

}  // namespace onnxamp::testing
