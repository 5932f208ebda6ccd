// InferShapes: the ranks and known dims of values the model declares no shape for, from the ops before them; and
// what they buy the gradients of transformer.onnx (whose intermediate values declare nothing): a 2-D weight's
// gradient is one GEMM over the flattened batch, with no Einsum transposes and no [batch, K, N] sum, and a Linear's
// bias Add passes the gradient to the product without a SumToShape.
#include "trainer/autodiff/shapes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/runtime/graph_builder_test_util.h"
#include "tests/trainer/train_test_util.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {
namespace {

using testing::GraphBuilder;

ir::Value* Constant(GraphBuilder& b, const std::string& name, ir::Tensor t) {
  ir::Value* v = b.g().CreateValue(name);
  ir::Node* n = b.g().AddNode("Constant", {}, {v}, name);
  n->SetAttribute(ir::Attribute::TensorValue("value", std::move(t)));
  return v;
}

ir::Tensor Int64s(const std::vector<int64_t>& values) {
  ir::Tensor t(DType::kInt64, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.mutable_values<int64_t>()[i] = values[i];
  return t;
}

// An untyped intermediate value: only the rules can tell its rank.
ir::Value* Op(GraphBuilder& b, const std::string& op, std::vector<ir::Value*> in, const std::string& out,
              std::vector<ir::Attribute> attrs = {}) {
  return b.Op(op, std::move(in), out, std::move(attrs));
}

TEST(InferShapes, FollowsTheOpsRankRules) {
  GraphBuilder b(DType::kFloat32, {{"", 18}});
  ir::Value* x = b.Input("x", {-1, 8, 16});  // rank 3
  ir::Value* w = b.Input("w", {16, 32});     // rank 2
  ir::Value* v = b.Input("v", {16});         // rank 1
  ir::Value* ids = b.Input("ids", {-1, 4}, DType::kInt64);
  ir::Value* mm = Op(b, "MatMul", {x, w}, "mm");    // 3
  ir::Value* mv = Op(b, "MatMul", {x, v}, "mv");    // 2
  ir::Value* vm = Op(b, "MatMul", {v, w}, "vm");    // 1
  ir::Value* vv = Op(b, "MatMul", {v, v}, "vv");    // 0
  ir::Value* relu = Op(b, "Relu", {mm}, "relu");    // 3
  ir::Value* add = Op(b, "Add", {relu, v}, "add");  // 3 (needs no shape match here, only ranks)
  ir::Value* tr = Op(b, "Transpose", {add}, "tr");  // 3
  ir::Value* shape = Constant(b, "shape", Int64s({-1, 32}));
  ir::Value* rs = Op(b, "Reshape", {tr, shape}, "rs");  // 2
  ir::Value* axes = Constant(b, "axes", Int64s({0, 2}));
  ir::Value* un = Op(b, "Unsqueeze", {rs, axes}, "un");      // 4
  ir::Value* sq = Op(b, "Squeeze", {un, axes}, "sq");        // 2
  ir::Value* sq_all = Op(b, "Squeeze", {un}, "sq_all");      // unknown: which dims are 1 is the shape's business
  ir::Value* gather = Op(b, "Gather", {w, ids}, "gather");   // 2 - 1 + 2 = 3
  ir::Value* keep = Op(b, "ReduceSum", {mm, axes}, "keep");  // keepdims 1: 3
  ir::Value* drop = Op(b, "ReduceMean", {mm}, "drop", {ir::Attribute::Int("keepdims", 0)});  // every axis: 0
  ir::Value* drop1 =
      Op(b, "ReduceMax", {mm}, "drop1", {ir::Attribute::Int("keepdims", 0), ir::Attribute::Ints("axes", {1})});  // 2
  ir::Value* flat = Op(b, "Flatten", {mm}, "flat");                                                              // 2
  ir::Value* shp = Op(b, "Shape", {mm}, "shp");                                                                  // 1
  ir::Value* computed = Op(b, "Reshape", {mm, shp}, "computed");  // not a constant, of a known length: 3
  // torch.onnx's x.view(x.size(0), -1) before opset 13 (axes an attribute): Shape, Gather, Unsqueeze, Concat.
  ir::Value* zero = Constant(b, "zero", ir::Tensor(DType::kInt64, {}));
  ir::Value* batch = Op(b, "Gather", {shp, zero}, "batch");                                       // 0
  ir::Value* batch1 = Op(b, "Unsqueeze", {batch}, "batch1", {ir::Attribute::Ints("axes", {0})});  // [1]
  ir::Value* target =
      Op(b, "Concat", {batch1, Constant(b, "rest", Int64s({-1}))}, "target", {ir::Attribute::Int("axis", 0)});  // [2]
  ir::Value* viewed = Op(b, "Reshape", {mm, target}, "viewed");                                                 // 2
  ir::Value* unknown_shape = Op(b, "Reshape", {mm, ids}, "unknown_shape");  // a 2-D "shape": unknown
  ir::Value* custom = b.Op("FusedMatMul", {x, w}, "custom", {}, "com.onnxamp");
  ir::Value* after_custom = Op(b, "Relu", {custom}, "after_custom");
  ir::Value* ln = b.g().CreateValue("ln");
  ir::Value* ln_mean = b.g().CreateValue("ln_mean");
  b.g().AddNode("LayerNormalization", {mm, v, v}, {ln, ln_mean}, "ln");
  for (ir::Value* o :
       {mm,    mv,   vm,  vv,       relu,   add,           tr,           rs, un,     sq, sq_all, gather, keep, drop,
        drop1, flat, shp, computed, viewed, unknown_shape, after_custom, ln, ln_mean}) {
    b.Output(o);
  }

  const Shapes shapes = InferShapes(b.g());
  auto rank = [&](const ir::Value* val) {
    auto it = shapes.find(val);
    return it == shapes.end() ? int64_t{-1} : static_cast<int64_t>(it->second.size());
  };
  EXPECT_EQ(rank(x), 3);
  EXPECT_EQ(rank(mm), 3);
  EXPECT_EQ(rank(mv), 2);
  EXPECT_EQ(rank(vm), 1);
  EXPECT_EQ(rank(vv), 0);
  EXPECT_EQ(rank(relu), 3);
  EXPECT_EQ(rank(add), 3);
  EXPECT_EQ(rank(tr), 3);
  EXPECT_EQ(rank(shape), 1);
  EXPECT_EQ(rank(rs), 2);
  EXPECT_EQ(rank(un), 4);
  EXPECT_EQ(rank(sq), 2);
  EXPECT_EQ(rank(sq_all), -1);
  EXPECT_EQ(rank(gather), 3);
  EXPECT_EQ(rank(keep), 3);
  EXPECT_EQ(rank(drop), 0);
  EXPECT_EQ(rank(drop1), 2);
  EXPECT_EQ(rank(flat), 2);
  EXPECT_EQ(rank(shp), 1);
  EXPECT_EQ(shapes.at(shp), (PartialShape{3}));
  EXPECT_EQ(rank(computed), 3);
  EXPECT_EQ(shapes.at(batch1), (PartialShape{1}));
  EXPECT_EQ(shapes.at(target), (PartialShape{2}));
  EXPECT_EQ(rank(viewed), 2);
  EXPECT_EQ(rank(unknown_shape), -1);
  EXPECT_EQ(rank(custom), -1);
  EXPECT_EQ(rank(after_custom), -1);
  EXPECT_EQ(rank(ln), 3);
  EXPECT_EQ(rank(ln_mean), 3);
}

TEST(InferShapes, DeclaredShapesComeFirst) {
  GraphBuilder b(DType::kFloat32, {{"", 18}});
  ir::Value* x = b.Input("x", {2, 3});
  ir::Value* y = Op(b, "Relu", {x}, "y");
  // A declared shape (value_info) wins over the rule.
  y->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(6)}));
  ir::Value* z = Op(b, "Relu", {y}, "z");
  b.Output(z);
  const Shapes shapes = InferShapes(b.g());
  EXPECT_EQ(shapes.at(y), PartialShape{6});
  EXPECT_EQ(shapes.at(z), PartialShape{6});
}

// Known dims: through MatMul (N from the weight), broadcasting, Transpose, Reshape with 0 and -1, Flatten, Gemm.
TEST(InferShapes, FollowsTheOpsDimRules) {
  GraphBuilder b(DType::kFloat32, {{"", 18}});
  ir::Value* x = b.Input("x", {-1, 8, 16});
  ir::Value* w = b.Input("w", {16, 32});
  ir::Value* bias = b.Input("bias", {32});
  ir::Value* one = b.Input("one", {1, 32});
  ir::Value* mm = Op(b, "MatMul", {x, w}, "mm");                                               // [?, 8, 32]
  ir::Value* add = Op(b, "Add", {mm, bias}, "add");                                            // [?, 8, 32]
  ir::Value* add1 = Op(b, "Add", {one, bias}, "add1");                                         // [1, 32]
  ir::Value* gelu = Op(b, "Gelu", {add}, "gelu");                                              // [?, 8, 32]
  ir::Value* tr = Op(b, "Transpose", {gelu}, "tr", {ir::Attribute::Ints("perm", {0, 2, 1})});  // [?, 32, 8]
  ir::Value* rs = Op(b, "Reshape", {tr, Constant(b, "s", Int64s({0, 4, -1, 8}))}, "rs");       // [?, 4, ?, 8]
  ir::Value* fl = Op(b, "Flatten", {mm}, "fl", {ir::Attribute::Int("axis", -1)});              // [?, 32]
  ir::Value* fl1 = Op(b, "Flatten", {add1}, "fl1", {ir::Attribute::Int("axis", 1)});           // [1, 32]
  ir::Value* gemm = Op(b, "Gemm", {fl, w}, "gemm", {ir::Attribute::Int("transB", 1)});         // [?, 16]
  for (ir::Value* o : {add, add1, tr, rs, fl1, gemm}) b.Output(o);
  const Shapes shapes = InferShapes(b.g());
  EXPECT_EQ(shapes.at(mm), (PartialShape{-1, 8, 32}));
  EXPECT_EQ(shapes.at(add), (PartialShape{-1, 8, 32}));
  EXPECT_EQ(shapes.at(add1), (PartialShape{1, 32}));
  EXPECT_EQ(shapes.at(tr), (PartialShape{-1, 32, 8}));
  EXPECT_EQ(shapes.at(rs), (PartialShape{-1, 4, -1, 8}));
  EXPECT_EQ(shapes.at(fl), (PartialShape{-1, 32}));
  EXPECT_EQ(shapes.at(fl1), (PartialShape{1, 32}));
  EXPECT_EQ(shapes.at(gemm), (PartialShape{-1, 16}));

  // Add(mm, bias): bias [32] against mm's known last dim 32 does not broadcast mm; it does broadcast bias.
  const ir::Node* add_node = add->producer();
  EXPECT_TRUE(BroadcastKeepsShape(*add_node, mm, shapes));
  EXPECT_FALSE(BroadcastKeepsShape(*add_node, bias, shapes));
  // x [?, 8, 16] + a [16]-wide row of unknown length: unknown, so not known to keep x's shape.
  GraphBuilder c(DType::kFloat32, {{"", 18}});
  ir::Value* cx = c.Input("x", {-1, 8, -1});
  ir::Value* cb = c.Input("b", {16});
  ir::Value* cy = Op(c, "Add", {cx, cb}, "y");
  c.Output(cy);
  const Shapes cs = InferShapes(c.g());
  EXPECT_FALSE(BroadcastKeepsShape(*cy->producer(), cx, cs));
  EXPECT_EQ(cs.at(cy), (PartialShape{-1, 8, 16}));
}

// Gather: data's dims with the axis's replaced by the indices' (an embedding lookup); and the dims a caller gives
// graph inputs (the recompute estimates: the data's) in place of the declared ones, symbolic dims past the first too.
TEST(InferShapes, GatherDimsAndGivenInputDims) {
  GraphBuilder b(DType::kFloat32, {{"", 18}});
  ir::Value* table = b.Input("table", {50, 64});
  ir::Value* ids = b.Input("ids", {-1, -1}, DType::kInt64);
  ir::Value* emb = Op(b, "Gather", {table, ids}, "emb");                                      // [?, ?, 64]
  ir::Value* cols = Op(b, "Gather", {table, ids}, "cols", {ir::Attribute::Int("axis", -1)});  // [50, ?, ?]
  for (ir::Value* o : {emb, cols}) b.Output(o);
  const Shapes shapes = InferShapes(b.g());
  EXPECT_EQ(shapes.at(emb), (PartialShape{-1, -1, 64}));
  EXPECT_EQ(shapes.at(cols), (PartialShape{50, -1, -1}));
  const std::unordered_map<std::string, PartialShape> given = {{"ids", {8, 32}}};
  const Shapes sized = InferShapes(b.g(), false, &given);
  EXPECT_EQ(sized.at(ids), (PartialShape{8, 32}));
  EXPECT_EQ(sized.at(emb), (PartialShape{8, 32, 64}));
  EXPECT_EQ(sized.at(cols), (PartialShape{50, 8, 32}));
}

// transformer.onnx declares no intermediate shapes. With the ranks inferred, every MatMul of a batched activation
// and a 2-D weight gets its weight gradient as one Gemm over the flattened batch: no Einsum transposes.
TEST(InferShapes, TransformerWeightGradientsAreFlatGemms) {
  const ir::Model model = test_util::LoadReference("transformer.onnx");
  TrainingGraphOptions options;
  options.loss.class_axis = -1;
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, options);
  ASSERT_TRUE(g.ok()) << g.status().message();
  int einsums = 0, gemms = 0, weight_matmuls = 0;
  for (const ir::Node* n : g->train.graph->nodes()) {
    einsums += n->op_type() == "Einsum";
    gemms += n->op_type() == "Gemm" && n->GetInt("transA", 0) == 1;
  }
  for (const ir::Node* n : model.graph->nodes()) {
    weight_matmuls += n->op_type() == "MatMul" && n->input(1) && n->input(1)->initializer();
  }
  ASSERT_GT(weight_matmuls, 0);
  EXPECT_EQ(einsums, 0);
  EXPECT_EQ(gemms, weight_matmuls);
  // The SumToShapes left: each bias gradient and the attention's broadcasts, none toward a bias Add's product.
  int sums = 0, linear_biases = 0;
  for (const ir::Node* n : g->train.graph->nodes()) sums += n->op_type() == "SumToShape";
  for (const ir::Node* n : model.graph->nodes()) {
    const ir::Node* p = n->op_type() == "Add" && n->input(0) ? n->input(0)->producer() : nullptr;
    linear_biases += p && p->op_type() == "MatMul" && n->input(1) && n->input(1)->initializer();
  }
  ASSERT_GT(linear_biases, 0);
  for (const ir::Node* n : g->train.graph->nodes()) {
    if (n->op_type() != "SumToShape") continue;
    const ir::Node* shape = n->input(1) ? n->input(1)->producer() : nullptr;
    const ir::Node* of = shape && shape->input(0) ? shape->input(0)->producer() : nullptr;
    EXPECT_FALSE(of && of->op_type() == "MatMul") << n->Describe() << " sums toward a product's shape";
  }
  EXPECT_GE(sums, linear_biases);
}

// With spatial_dims (the recompute pass's estimates): Conv, MaxPool/AveragePool and the global pools know their
// output dims from the attributes, and Relu after them follows; without, the default rules know the rank only.
TEST(InferShapes, SpatialDimsOfConvolutionsAndPools) {
  GraphBuilder b(DType::kFloat32, {{"", 18}});
  ir::Value* x = b.Input("x", {-1, 3, 32, 30});
  ir::Value* w = b.Input("w", {16, 3, 3, 3});
  ir::Value* conv = Op(b, "Conv", {x, w}, "conv",
                       {ir::Attribute::Ints("pads", {1, 1, 1, 1}), ir::Attribute::Ints("strides", {2, 2})});
  ir::Value* relu = Op(b, "Relu", {conv}, "relu");
  ir::Value* same = Op(b, "Conv", {x, w}, "same", {ir::Attribute::String("auto_pad", "SAME_UPPER")});
  ir::Value* dil = Op(b, "Conv", {x, w}, "dil", {ir::Attribute::Ints("dilations", {2, 3})});
  ir::Value* pool = Op(b, "MaxPool", {relu}, "pool",
                       {ir::Attribute::Ints("kernel_shape", {3, 3}), ir::Attribute::Ints("strides", {2, 2}),
                        ir::Attribute::Int("ceil_mode", 1)});
  ir::Value* avg = Op(b, "AveragePool", {relu}, "avg", {ir::Attribute::Ints("kernel_shape", {2, 2})});
  ir::Value* gap = Op(b, "GlobalAveragePool", {pool}, "gap");
  const Shapes plain = InferShapes(b.g());
  EXPECT_EQ(plain.at(conv), (PartialShape{-1, -1, -1, -1}));
  const Shapes s = InferShapes(b.g(), /*spatial_dims=*/true);
  EXPECT_EQ(s.at(conv), (PartialShape{-1, 16, 16, 15}));  // (32 + 2 - 3) / 2 + 1, (30 + 2 - 3) / 2 + 1
  EXPECT_EQ(s.at(relu), (PartialShape{-1, 16, 16, 15}));
  EXPECT_EQ(s.at(same), (PartialShape{-1, 16, 32, 30}));
  EXPECT_EQ(s.at(dil), (PartialShape{-1, 16, 28, 24}));  // spans 5 and 7
  EXPECT_EQ(s.at(pool), (PartialShape{-1, 16, 8, 7}));   // ceil((16 - 3) / 2) + 1, ceil((15 - 3) / 2) + 1
  EXPECT_EQ(s.at(avg), (PartialShape{-1, 16, 15, 14}));
  EXPECT_EQ(s.at(gap), (PartialShape{-1, 16, 1, 1}));
}

}  // namespace
}  // namespace onnxamp::trainer
