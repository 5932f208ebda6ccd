// The reference models (models/*.onnx and the large ones written on demand), built with the IR API and
// deterministic weights.
#include "tools/gen_models/models.h"

#include <cmath>
#include <string>
#include <vector>

#include "tools/gen_models/builder.h"

namespace onnxamp::gen {
namespace {

using ir::Attribute;
using ir::Value;

// ---- Layers, with PyTorch's parameter names and default initialisation bounds.

// y = x W^T + b with W stored [out, in] (PyTorch's Linear layout): Gemm transB=1.
Value* Linear(GraphBuilder& b, const std::string& name, Value* x, int64_t in, int64_t out) {
  const double bound = KaimingBound(in);
  Value* w = b.Param(name + ".weight", {out, in}, bound);
  Value* bias = b.Param(name + ".bias", {out}, bound);
  return b.Op("Gemm", name, {x, w, bias}, {Attribute::Int("transB", 1)});
}

// y = x W + b with W stored [in, out]: MatMul + Add, for inputs of rank > 2.
Value* MatMulLinear(GraphBuilder& b, const std::string& name, Value* x, int64_t in, int64_t out, bool bias = true) {
  const double bound = KaimingBound(in);
  Value* w = b.Param(name + ".weight", {in, out}, bound);
  Value* y = b.Op("MatMul", name + ".matmul", {x, w});
  if (!bias) return y;
  Value* bv = b.Param(name + ".bias", {out}, bound);
  return b.Op("Add", name + ".add", {y, bv});
}

// Conv without bias (a BatchNormalization follows), square kernel, PyTorch's default bound.
Value* Conv(GraphBuilder& b, const std::string& name, Value* x, int64_t cin, int64_t cout, int64_t k, int64_t stride,
            int64_t pad) {
  Value* w = b.Param(name + ".weight", {cout, cin, k, k}, KaimingBound(cin * k * k));
  return b.Op("Conv", name, {x, w},
              {Attribute::Ints("kernel_shape", {k, k}), Attribute::Ints("pads", {pad, pad, pad, pad}),
               Attribute::Ints("strides", {stride, stride})});
}

// Inference-mode BatchNormalization with non-trivial affine parameters and running statistics.
Value* BatchNorm(GraphBuilder& b, const std::string& name, Value* x, int64_t c) {
  Value* scale = b.ParamRange(name + ".weight", {c}, 0.5, 1.5);
  Value* bias = b.ParamRange(name + ".bias", {c}, -0.2, 0.2);
  Value* mean = b.ParamRange(name + ".running_mean", {c}, -0.2, 0.2);
  Value* var = b.ParamRange(name + ".running_var", {c}, 0.5, 1.5);
  return b.Op("BatchNormalization", name, {x, scale, bias, mean, var}, {Attribute::Float("epsilon", 1e-5f)});
}

Value* LayerNorm(GraphBuilder& b, const std::string& name, Value* x, int64_t d) {
  Value* scale = b.ParamRange(name + ".weight", {d}, 0.8, 1.2);
  Value* bias = b.ParamRange(name + ".bias", {d}, -0.1, 0.1);
  return b.Op("LayerNormalization", name, {x, scale, bias},
              {Attribute::Int("axis", -1), Attribute::Float("epsilon", 1e-5f)});
}

Value* Relu(GraphBuilder& b, const std::string& name, Value* x) { return b.Op("Relu", name, {x}); }

// conv-bn-relu-conv-bn (+ shortcut) -> add -> relu. A strided block gets a 1x1 conv + bn shortcut.
Value* ResidualBlock(GraphBuilder& b, const std::string& name, Value* x, int64_t cin, int64_t cout, int64_t stride) {
  Value* h = Conv(b, name + ".conv1", x, cin, cout, 3, stride, 1);
  h = Relu(b, name + ".relu1", BatchNorm(b, name + ".bn1", h, cout));
  h = BatchNorm(b, name + ".bn2", Conv(b, name + ".conv2", h, cout, cout, 3, 1, 1), cout);
  Value* shortcut = x;
  if (stride != 1 || cin != cout) {
    shortcut =
        BatchNorm(b, name + ".downsample.bn", Conv(b, name + ".downsample.conv", x, cin, cout, 1, stride, 0), cout);
  }
  return Relu(b, name + ".relu2", b.Op("Add", name + ".add", {h, shortcut}));
}

// ResNet v1.5 bottleneck: 1x1 reduce, 3x3 (strided here, not in the 1x1 as in v1), 1x1 expand (x4), with a 1x1
// conv + bn shortcut when the shape changes. PyTorch's torchvision names (downsample.0 / downsample.1).
Value* Bottleneck(GraphBuilder& b, const std::string& name, Value* x, int64_t cin, int64_t width, int64_t stride) {
  const int64_t cout = width * 4;
  Value* h =
      Relu(b, name + ".relu1", BatchNorm(b, name + ".bn1", Conv(b, name + ".conv1", x, cin, width, 1, 1, 0), width));
  h = Relu(b, name + ".relu2",
           BatchNorm(b, name + ".bn2", Conv(b, name + ".conv2", h, width, width, 3, stride, 1), width));
  h = BatchNorm(b, name + ".bn3", Conv(b, name + ".conv3", h, width, cout, 1, 1, 0), cout);
  Value* shortcut = x;
  if (stride != 1 || cin != cout) {
    shortcut = BatchNorm(b, name + ".downsample.1", Conv(b, name + ".downsample.0", x, cin, cout, 1, stride, 0), cout);
  }
  return Relu(b, name + ".relu3", b.Op("Add", name + ".add", {h, shortcut}));
}

ir::Model BuildMlp(const std::string& graph_name, int64_t in, int64_t hidden, int64_t out, const char* doc) {
  ir::Model model = NewModel(graph_name, doc);
  GraphBuilder b(*model.graph);
  Value* x = b.Input("input", DType::kFloat32, Dims("batch", in));
  Value* h = Relu(b, "relu1", Linear(b, "fc1", x, in, hidden));
  b.Output(Linear(b, "fc2", h, hidden, out), "logits", DType::kFloat32, Dims("batch", out));
  return model;
}

}  // namespace

ir::Model Mlp() { return BuildMlp("mlp", 256, 128, 10, "MLP 256-128-10 with ReLU (Gemm transB=1)"); }

ir::Model DigitsMlp() {
  return BuildMlp("digits_mlp", 64, 128, 10, "MLP 64-128-10 with ReLU for 8x8 digit images (Gemm transB=1)");
}

ir::Model Mlp4096() {
  constexpr int64_t kD = 4096;
  ir::Model model = NewModel("mlp4096", "Three Linear 4096x4096 layers with ReLU between (Gemm transB=1)");
  GraphBuilder b(*model.graph);
  Value* x = b.Input("input", DType::kFloat32, Dims("batch", kD));
  Value* h = Relu(b, "relu1", Linear(b, "fc1", x, kD, kD));
  h = Relu(b, "relu2", Linear(b, "fc2", h, kD, kD));
  b.Output(Linear(b, "fc3", h, kD, kD), "output", DType::kFloat32, Dims("batch", kD));
  return model;
}

ir::Model Cnn() {
  ir::Model model = NewModel("cnn",
                             "Small ResNet for 3x32x32 images: conv stem, max pool, two residual blocks (the second "
                             "strided, with a 1x1 conv shortcut), global average pool, linear classifier");
  GraphBuilder b(*model.graph);
  Value* x = b.Input("input", DType::kFloat32, Dims("batch", 3, 32, 32));
  Value* h = Relu(b, "stem.relu", BatchNorm(b, "stem.bn", Conv(b, "stem.conv", x, 3, 16, 3, 1, 1), 16));
  h = b.Op("MaxPool", "stem.pool", {h}, {Attribute::Ints("kernel_shape", {2, 2}), Attribute::Ints("strides", {2, 2})});
  h = ResidualBlock(b, "layer1", h, 16, 16, 1);  // [batch,16,16,16]
  h = ResidualBlock(b, "layer2", h, 16, 32, 2);  // [batch,32,8,8]
  h = b.Op("GlobalAveragePool", "pool", {h});    // [batch,32,1,1]
  h = b.Op("Flatten", "flatten", {h}, {Attribute::Int("axis", 1)});
  b.Output(Linear(b, "fc", h, 32, 10), "logits", DType::kFloat32, Dims("batch", 10));
  return model;
}

// One pre-LayerNorm GPT block with a token and a learned positional embedding and an LM head.
ir::Model Transformer() {
  constexpr int64_t kVocab = 128, kSeq = 32, kModel = 64, kHeads = 4, kHead = kModel / kHeads, kHidden = 4 * kModel;
  ir::Model model = NewModel("transformer",
                             "Tiny GPT block: vocab 128, sequence 32 (fixed), d_model 64, 4 heads, MLP 256 with "
                             "erf GELU, pre-LayerNorm, causal attention, LM head");
  GraphBuilder b(*model.graph);
  Value* ids = b.Input("input_ids", DType::kInt64, Dims("batch", kSeq));

  // Embeddings: uniform with standard deviation 0.02 (GPT-2's init), bound 0.02 * sqrt(3).
  const double emb_bound = 0.02 * std::sqrt(3.0);
  Value* tok_w = b.Param("tok_emb.weight", {kVocab, kModel}, emb_bound);
  Value* pos_w = b.Param("pos_emb.weight", {kSeq, kModel}, emb_bound);
  Value* tok = b.Op("Gather", "tok_emb", {tok_w, ids}, {Attribute::Int("axis", 0)});  // [batch,seq,d]
  Value* h0 = b.Op("Add", "pos_emb.add", {tok, pos_w});

  // Attention.
  Value* ln1 = LayerNorm(b, "ln1", h0, kModel);
  Value* q = MatMulLinear(b, "attn.q", ln1, kModel, kModel);
  Value* k = MatMulLinear(b, "attn.k", ln1, kModel, kModel);
  Value* v = MatMulLinear(b, "attn.v", ln1, kModel, kModel);
  Value* heads_shape = b.ConstantInts("attn.heads_shape", {0, kSeq, kHeads, kHead});
  auto split_heads = [&](const std::string& name, Value* t, std::vector<int64_t> perm) {
    Value* r = b.Op("Reshape", name + ".reshape", {t, heads_shape});
    return b.Op("Transpose", name + ".transpose", {r}, {Attribute::Ints("perm", std::move(perm))});
  };
  Value* qh = split_heads("attn.q_heads", q, {0, 2, 1, 3});  // [batch,heads,seq,head]
  Value* kt = split_heads("attn.k_heads", k, {0, 2, 3, 1});  // [batch,heads,head,seq]
  Value* vh = split_heads("attn.v_heads", v, {0, 2, 1, 3});  // [batch,heads,seq,head]
  Value* scores = b.Op("MatMul", "attn.scores", {qh, kt});   // [batch,heads,seq,seq]
  Value* scale = b.ConstantScalar("attn.scale_value", static_cast<float>(1.0 / std::sqrt(double{kHead})));
  scores = b.Op("Mul", "attn.scale", {scores, scale});
  // Causal mask: 0 on and below the diagonal, -1e9 above (large negative rather than -inf, so no inf anywhere).
  ir::Tensor mask(DType::kFloat32, {kSeq, kSeq});
  auto m = mask.mutable_values<float>();
  for (int64_t i = 0; i < kSeq; ++i) {
    for (int64_t j = 0; j < kSeq; ++j) m[i * kSeq + j] = j > i ? -1e9f : 0.0f;
  }
  Value* mask_v = b.Constant("attn.causal_mask", std::move(mask));
  scores = b.Op("Add", "attn.mask", {scores, mask_v});
  Value* probs = b.Op("Softmax", "attn.softmax", {scores}, {Attribute::Int("axis", -1)});
  Value* ctx = b.Op("MatMul", "attn.context", {probs, vh});  // [batch,heads,seq,head]
  ctx = b.Op("Transpose", "attn.merge.transpose", {ctx}, {Attribute::Ints("perm", {0, 2, 1, 3})});
  Value* merged_shape = b.ConstantInts("attn.merged_shape", {0, kSeq, kModel});
  ctx = b.Op("Reshape", "attn.merge.reshape", {ctx, merged_shape});  // [batch,seq,d]
  Value* h1 = b.Op("Add", "attn.residual", {h0, MatMulLinear(b, "attn.proj", ctx, kModel, kModel)});

  // MLP with GELU written with Erf: x * 0.5 * (1 + erf(x / sqrt(2))), in the order PyTorch exports it.
  Value* ln2 = LayerNorm(b, "ln2", h1, kModel);
  Value* f = MatMulLinear(b, "mlp.fc1", ln2, kModel, kHidden);
  Value* sqrt2 = b.ConstantScalar("mlp.gelu.sqrt2", static_cast<float>(std::sqrt(2.0)));
  Value* one = b.ConstantScalar("mlp.gelu.one", 1.0f);
  Value* half = b.ConstantScalar("mlp.gelu.half", 0.5f);
  Value* e = b.Op("Erf", "mlp.gelu.erf", {b.Op("Div", "mlp.gelu.div", {f, sqrt2})});
  Value* g = b.Op("Mul", "mlp.gelu.mul", {f, b.Op("Add", "mlp.gelu.add", {e, one})});
  g = b.Op("Mul", "mlp.gelu.mul_half", {g, half});
  Value* h2 = b.Op("Add", "mlp.residual", {h1, MatMulLinear(b, "mlp.fc2", g, kHidden, kModel)});

  Value* lnf = LayerNorm(b, "ln_f", h2, kModel);
  Value* logits = MatMulLinear(b, "lm_head", lnf, kModel, kVocab, /*bias=*/false);
  b.Output(logits, "logits", DType::kFloat32, Dims("batch", kSeq, kVocab));
  return model;
}

ir::Model ResNet50() {
  ir::Model model = NewModel("resnet50",
                             "ResNet-50 v1.5 (torchvision topology, stride in the 3x3 conv): 7x7 stem, max pool, "
                             "bottleneck stages of 3/4/6/3 blocks, global average pool, linear classifier to 1000 "
                             "classes; 25.6M parameters");
  GraphBuilder b(*model.graph);
  Value* x = b.Input("input", DType::kFloat32, Dims("batch", 3, 224, 224));
  Value* h = Relu(b, "relu", BatchNorm(b, "bn1", Conv(b, "conv1", x, 3, 64, 7, 2, 3), 64));
  h = b.Op("MaxPool", "maxpool", {h},
           {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("pads", {1, 1, 1, 1}),
            Attribute::Ints("strides", {2, 2})});  // [batch,64,56,56]
  struct Stage {
    int64_t width, blocks, stride;
  };
  int64_t cin = 64;
  const Stage stages[] = {{64, 3, 1}, {128, 4, 2}, {256, 6, 2}, {512, 3, 2}};
  for (int s = 0; s < 4; ++s) {
    for (int64_t i = 0; i < stages[s].blocks; ++i) {
      const std::string name = "layer" + std::to_string(s + 1) + "." + std::to_string(i);
      h = Bottleneck(b, name, h, cin, stages[s].width, i == 0 ? stages[s].stride : 1);
      cin = stages[s].width * 4;
    }
  }
  h = b.Op("GlobalAveragePool", "avgpool", {h});  // [batch,2048,1,1]
  h = b.Op("Flatten", "flatten", {h}, {Attribute::Int("axis", 1)});
  b.Output(Linear(b, "fc", h, 2048, 1000), "logits", DType::kFloat32, Dims("batch", 1000));
  return model;
}

ir::Model DeepMlp(const std::string& graph_name, int64_t width, int64_t layers, const std::string& doc) {
  ir::Model model = NewModel(graph_name, doc);
  GraphBuilder b(*model.graph);
  Value* h = b.Input("input", DType::kFloat32, Dims("batch", width));
  for (int64_t i = 1; i <= layers; ++i) {
    h = Linear(b, "fc" + std::to_string(i), h, width, width);
    if (i < layers) h = Relu(b, "relu" + std::to_string(i), h);
  }
  b.Output(h, "output", DType::kFloat32, Dims("batch", width));
  return model;
}

ir::Model Mlp100m() {
  return DeepMlp("mlp100m", 2048, 24,
                 "Deep MLP: 24 Linear 2048x2048 layers with ReLU between (Gemm transB=1); 100.7M parameters");
}

const std::vector<ModelSpec>& Specs() {
  static const std::vector<ModelSpec> specs = {
      {"mlp", false, Mlp},
      {"mlp4096", true, Mlp4096},
      {"cnn", false, Cnn},
      {"transformer", false, Transformer},
      {"digits_mlp", false, DigitsMlp},
      {"resnet50", true, ResNet50},
      {"mlp100m", true, Mlp100m},
  };
  return specs;
}

}  // namespace onnxamp::gen
