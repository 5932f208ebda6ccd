// MakeBatchDimSymbolic: a model exported with batch 4 runs and trains at batch 3 and 5 (and a partial last batch)
// exactly as the same model with a symbolic batch; the refusals name the node, its op and why; the model is unchanged
// on error and when its batch is already symbolic.
#include "trainer/graph/batch_dim.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/executor/session.h"
#include "runtime/ir/verify.h"
#include "trainer/graph/training_graph.h"
#include "trainer/trainer.h"

namespace onnxamp::trainer {
namespace {

ir::Tensor Uniform(const std::string& name, std::vector<int64_t> dims, uint32_t seed) {
  ir::Tensor t(DType::kFloat32, std::move(dims));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (float& v : t.mutable_values<float>()) v = u(gen);
  t.set_name(name);
  return t;
}

ir::Tensor Ints(const std::string& name, std::vector<int64_t> v) {
  ir::Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.mutable_values<int64_t>().begin());
  t.set_name(name);
  return t;
}

// A small graph-building helper over the IR API.
struct Builder {
  ir::Model model;
  ir::Graph* g;
  Builder() {
    model.graph = std::make_unique<ir::Graph>("batch_dim_test");
    model.SetOpsetVersion("", 17);
    g = model.graph.get();
  }
  ir::Value* Input(const std::string& name, DType t, ir::Shape shape) {
    ir::Value* v = g->CreateValue(name);
    v->set_type(ir::ValueType::Tensor(t, std::move(shape)));
    g->AddInput(v);
    return v;
  }
  ir::Value* Init(ir::Tensor t) {
    ir::Value* v = g->CreateValue(t.name());
    v->set_type(ir::ValueType::Tensor(t.dtype(), [&] {
      ir::Shape s;
      for (int64_t d : t.dims()) s.push_back(ir::Dim::Value(d));
      return s;
    }()));
    g->SetInitializer(v, std::move(t));
    return v;
  }
  ir::Value* Const(ir::Tensor t) {
    ir::Value* v = g->CreateValue(t.name());
    ir::Node* n = g->AddNode("Constant", {}, {v}, t.name());
    n->SetAttribute(ir::Attribute::TensorValue("value", std::move(t)));
    return v;
  }
  // One output named `name`; `shape` (when given) becomes its value_info.
  ir::Value* Op(const std::string& op, const std::string& name, std::vector<ir::Value*> in,
                std::vector<ir::Attribute> attrs = {}, std::optional<ir::Shape> shape = std::nullopt) {
    ir::Value* v = g->CreateValue(name);
    if (shape) {
      v->set_type(ir::ValueType::Tensor(DType::kFloat32, *shape));
      g->AddValueInfo(v);
    }
    ir::Node* n = g->AddNode(op, std::move(in), {v}, name);
    for (ir::Attribute& a : attrs) n->SetAttribute(std::move(a));
    return v;
  }
  void Output(ir::Value* v, ir::Shape shape) {
    v->set_type(ir::ValueType::Tensor(DType::kFloat32, std::move(shape)));
    g->RemoveValueInfo(v);
    g->AddOutput(v);
  }
};

ir::Dim B(bool fixed) { return fixed ? ir::Dim::Value(4) : ir::Dim::Param("N"); }
ir::Dim D(int64_t v) { return ir::Dim::Value(v); }

// x [b,6] -> Gemm 6->12 -> h [b,12] -> Reshape by a shape computed from Shape(x) -> Reshape [b,3,4] (the exported
// constant [4,3,4] when fixed, [0,3,4] when symbolic) -> Relu -> Transpose [b,4,3] -> Flatten -> Gemm 12->5 -> y [b,5].
ir::Model Net(bool fixed) {
  Builder b;
  ir::Value* x = b.Input("x", DType::kFloat32, {B(fixed), D(6)});
  ir::Value* h = b.Op("Gemm", "fc1", {x, b.Init(Uniform("w1", {12, 6}, 1)), b.Init(Uniform("b1", {12}, 2))},
                      {ir::Attribute::Int("transB", 1)}, ir::Shape{B(fixed), D(12)});
  ir::Value* shape_x = b.g->CreateValue("shape_x");
  b.g->AddNode("Shape", {x}, {shape_x}, "shape_x");
  ir::Value* batch = b.g->CreateValue("batch_size");
  b.g->AddNode("Gather", {shape_x, b.Const(Ints("zero", {0}))}, {batch}, "gather_batch");
  ir::Value* dyn_shape = b.g->CreateValue("dyn_shape");
  b.g->AddNode("Concat", {batch, b.Const(Ints("twelve", {12}))}, {dyn_shape}, "concat_shape")
      ->SetAttribute(ir::Attribute::Int("axis", 0));
  ir::Value* h2 = b.Op("Reshape", "reshape_dyn", {h, dyn_shape}, {}, ir::Shape{B(fixed), D(12)});
  ir::Value* r = b.Op("Reshape", "split_features", {h2, b.Const(Ints("shape3", {fixed ? 4 : 0, 3, 4}))}, {},
                      ir::Shape{B(fixed), D(3), D(4)});
  ir::Value* a = b.Op("Relu", "relu", {r}, {}, ir::Shape{B(fixed), D(3), D(4)});
  ir::Value* t =
      b.Op("Transpose", "transpose", {a}, {ir::Attribute::Ints("perm", {0, 2, 1})}, ir::Shape{B(fixed), D(4), D(3)});
  ir::Value* f = b.Op("Flatten", "flatten", {t}, {}, ir::Shape{B(fixed), D(12)});
  ir::Value* y = b.Op("Gemm", "fc2", {f, b.Init(Uniform("w2", {5, 12}, 3)), b.Init(Uniform("b2", {5}, 4))},
                      {ir::Attribute::Int("transB", 1)});
  b.Output(y, {B(fixed), D(5)});
  return std::move(b.model);
}

ir::Tensor Rows(const ir::Tensor& x, int64_t begin, int64_t count) {
  std::vector<int64_t> dims = x.dims();
  const int64_t row = x.num_elements() / dims[0];
  dims[0] = count;
  ir::Tensor out(x.dtype(), dims);
  std::copy_n(x.values<float>().begin() + begin * row, count * row, out.mutable_values<float>().begin());
  out.set_name(x.name());
  return out;
}

std::vector<float> RunNet(const ir::Model& model, const ir::Tensor& x) {
  ir::Model copy = converter::CloneModel(model);
  StatusOr<std::unique_ptr<exec::Session>> s = exec::Session::Create(std::move(copy));
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return {};
  StatusOr<std::vector<ir::Tensor>> out = (*s)->Run({x});
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return {};
  const auto v = (*out)[0].values<float>();
  return {v.begin(), v.end()};
}

const ir::Shape& ShapeOf(const ir::Model& m, const std::string& name) {
  return *m.graph->FindValue(name)->type().shape();
}

TEST(BatchDim, FixedBatchBecomesSymbolicAndRunsAtAnyBatchSize) {
  const ir::Model fixed = Net(true);
  const ir::Model symbolic = Net(false);
  const ir::Tensor x = Uniform("x", {5, 6}, 7);
  // As exported, the model runs at batch 4 only.
  EXPECT_EQ(RunNet(fixed, Rows(x, 0, 4)), RunNet(symbolic, Rows(x, 0, 4)));
  {
    StatusOr<std::unique_ptr<exec::Session>> s = exec::Session::Create(converter::CloneModel(fixed));
    ASSERT_TRUE(s.ok());
    EXPECT_FALSE((*s)->Run({Rows(x, 0, 3)}).ok());
  }

  ir::Model made = Net(true);
  BatchDimReport report;
  Status st = MakeBatchDimSymbolic(made, GraphDataInputs(*made.graph), &report);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(ir::Verify(made).ok());
  EXPECT_EQ(report.exported, 4);
  EXPECT_EQ(report.symbol, "batch");
  EXPECT_EQ(report.inputs, 1);
  EXPECT_EQ(report.constants, 1);
  EXPECT_EQ(report.annotations, 7);  // six value_info entries and the output
  for (const char* v : {"x", "fc1", "reshape_dyn", "split_features", "relu", "transpose", "flatten", "fc2"}) {
    ASSERT_FALSE(ShapeOf(made, v).empty()) << v;
    EXPECT_EQ(ShapeOf(made, v)[0], ir::Dim::Param("batch")) << v;
  }
  EXPECT_EQ(ShapeOf(made, "transpose")[1], D(4));
  const ir::Node* reshape = made.graph->FindValue("split_features")->producer();
  const ir::Tensor* c = reshape->input(1)->initializer();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(std::vector<int64_t>(c->values<int64_t>().begin(), c->values<int64_t>().end()),
            (std::vector<int64_t>{0, 3, 4}));
  EXPECT_EQ(made.graph->FindValue("shape3"), nullptr) << "the replaced Constant is removed";

  for (int64_t n : {1, 3, 4, 5}) {
    const ir::Tensor xs = Rows(x, 0, n);
    const std::vector<float> got = RunNet(made, xs);
    EXPECT_EQ(got, RunNet(symbolic, xs)) << "batch " << n;
    // Per sample: row i at batch n is row i run alone (to rounding: the Gemm kernels block by batch size).
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<float> alone = RunNet(made, Rows(x, i, 1));
      ASSERT_EQ(alone.size(), 5u);
      for (int j = 0; j < 5; ++j) EXPECT_NEAR(got[i * 5 + j], alone[j], 1e-6f) << "batch " << n << " row " << i;
    }
  }

  // Running it again changes nothing.
  BatchDimReport again;
  ASSERT_TRUE(MakeBatchDimSymbolic(made, GraphDataInputs(*made.graph), &again).ok());
  EXPECT_EQ(again.exported, 0);
}

// As torch.onnx.export(do_constant_folding=False) writes a view without dynamic axes: the weight transposed by a node
// before its MatMul (no declared shapes), and the Reshape's shape a Concat of Unsqueezed scalar Constants holding the
// export's batch size. The shape is folded, rewritten, and the model runs at any batch size as the symbolic one does.
ir::Model UnfoldedNet(bool fixed) {
  Builder b;
  ir::Value* x = b.Input("x", DType::kFloat32, {B(fixed), D(6)});
  ir::Value* wt = b.g->CreateValue("w1_t");
  b.g->AddNode("Transpose", {b.Init(Uniform("w1", {12, 6}, 1))}, {wt}, "w1_transpose")
      ->SetAttribute(ir::Attribute::Ints("perm", {1, 0}));
  ir::Value* h = b.g->CreateValue("h");
  b.g->AddNode("MatMul", {x, wt}, {h}, "fc1");
  std::vector<ir::Value*> parts;
  const std::vector<int64_t> dims = {fixed ? 4 : 0, 3, 4};
  for (size_t i = 0; i < dims.size(); ++i) {
    ir::Tensor scalar(DType::kInt64, {});
    scalar.mutable_values<int64_t>()[0] = dims[i];
    scalar.set_name("dim" + std::to_string(i));
    ir::Value* u = b.g->CreateValue("dim" + std::to_string(i) + "_1d");
    b.g->AddNode("Unsqueeze", {b.Const(std::move(scalar)), b.Const(Ints("axes" + std::to_string(i), {0}))}, {u},
                 "unsqueeze" + std::to_string(i));
    parts.push_back(u);
  }
  ir::Value* shape = b.g->CreateValue("view_shape");
  b.g->AddNode("Concat", parts, {shape}, "concat")->SetAttribute(ir::Attribute::Int("axis", 0));
  ir::Value* r = b.g->CreateValue("view");
  b.g->AddNode("Reshape", {h, shape}, {r}, "view");
  ir::Value* y = b.g->CreateValue("y");
  b.g->AddNode("ReduceSum", {r, b.Const(Ints("last", {-1}))}, {y}, "sum")
      ->SetAttribute(ir::Attribute::Int("keepdims", 0));
  b.Output(y, {B(fixed), D(3)});
  return std::move(b.model);
}

TEST(BatchDim, UnfoldedShapeExpressionsAreFoldedAndRewritten) {
  ir::Model made = UnfoldedNet(true);
  BatchDimReport report;
  Status st = MakeBatchDimSymbolic(made, GraphDataInputs(*made.graph), &report);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(ir::Verify(made).ok());
  EXPECT_EQ(report.exported, 4);
  EXPECT_EQ(report.constants, 1);
  const ir::Tensor x = Uniform("x", {5, 6}, 8);
  for (int64_t n : {1, 3, 4, 5}) {
    const ir::Tensor xs = Rows(x, 0, n);
    EXPECT_EQ(RunNet(made, xs), RunNet(UnfoldedNet(false), xs)) << "batch " << n;
  }
}

TEST(BatchDim, SymbolicOrUnknownBatchIsLeftAlone) {
  for (bool unknown : {false, true}) {
    ir::Model m = Net(false);
    if (unknown) {
      ir::Value* x = m.graph->FindValue("x");
      x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Unknown(), D(6)}));
    }
    BatchDimReport report;
    ASSERT_TRUE(MakeBatchDimSymbolic(m, {"x"}, &report).ok());
    EXPECT_EQ(report.exported, 0);
    EXPECT_EQ(ShapeOf(m, "x")[0], unknown ? ir::Dim::Unknown() : ir::Dim::Param("N"));
    EXPECT_EQ(ShapeOf(m, "relu")[0], ir::Dim::Param("N"));
    EXPECT_NE(m.graph->FindValue("shape3"), nullptr);
  }
}

// Samples whose class is the argmax of a fixed projection.
Dataset Samples(int64_t n) {
  ir::Tensor x = Uniform("x", {n, 6}, 11);
  ir::Tensor y(DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x.values<float>().data() + i * 6;
    y.mutable_values<int64_t>()[i] = (row[0] + row[1] > 0 ? 1 : 0) + (row[2] > row[3] ? 2 : 0);
  }
  y.set_name("labels");
  StatusOr<Dataset> d = Dataset::FromTensors({x, y}, "samples");
  EXPECT_TRUE(d.ok()) << d.status().message();
  return std::move(d).value();
}

std::vector<ir::Tensor> Train(const ir::Model& model, int64_t batch, int64_t n, std::vector<double>* losses,
                              double* eval_loss) {
  TrainerOptions o;
  o.optimizer = OptimizerKind::kSgd;
  o.schedule.base_lr = 0.1;
  o.batch_size = batch;
  o.steps = 9;  // across epochs: partial last batches included
  o.shuffle = false;
  o.threads = 1;
  BindOptions bind;
  bind.labels.array = "labels";
  bind.labels.kind = LabelKind::kClassIndices;
  StatusOr<Dataset> data = Samples(n).Bind(DataInputs(*model.graph), bind);
  EXPECT_TRUE(data.ok()) << data.status().message();
  if (!data.ok()) return {};
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, *data);
  EXPECT_TRUE(t.ok()) << t.status().message();
  if (!t.ok()) return {};
  while (!(*t)->Done()) {
    StatusOr<StepRecord> r = (*t)->Step();
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return {};
    losses->push_back(r->loss);
  }
  StatusOr<EvalRecord> e = (*t)->Evaluate(*data);
  EXPECT_TRUE(e.ok()) << e.status().message();
  *eval_loss = e.ok() ? e->loss : -1;
  return (*t)->TrainedValues();
}

TEST(BatchDim, FixedBatchModelTrainsAtOtherBatchSizesAsTheSymbolicOne) {
  const ir::Model fixed = Net(true);
  const ir::Model symbolic = Net(false);
  {
    StatusOr<TrainingGraphs> g = BuildTrainingGraphs(fixed, {});
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ(g->batch_dim.exported, 4);
    EXPECT_EQ(g->batch_dim.constants, 1);
    for (const ir::Model* m : {&g->train, &g->eval}) {
      EXPECT_EQ(ShapeOf(*m, "x")[0], ir::Dim::Param("batch"));
      EXPECT_TRUE(ir::Verify(*m).ok());
    }
  }
  // 11 samples: batches of 3 end with 2, batches of 5 with 1; batch 4 is the exported size.
  for (int64_t batch : {3, 4, 5}) {
    std::vector<double> fixed_losses, symbolic_losses;
    double fixed_eval = 0, symbolic_eval = 0;
    const std::vector<ir::Tensor> a = Train(fixed, batch, 11, &fixed_losses, &fixed_eval);
    const std::vector<ir::Tensor> b = Train(symbolic, batch, 11, &symbolic_losses, &symbolic_eval);
    ASSERT_EQ(a.size(), 4u) << "batch " << batch;
    ASSERT_EQ(b.size(), 4u);
    EXPECT_EQ(fixed_losses, symbolic_losses) << "batch " << batch;
    EXPECT_EQ(fixed_eval, symbolic_eval) << "batch " << batch;
    EXPECT_LT(fixed_losses.back(), fixed_losses.front()) << "batch " << batch;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name(), b[i].name());
      const auto va = a[i].values<float>(), vb = b[i].values<float>();
      EXPECT_TRUE(std::equal(va.begin(), va.end(), vb.begin(), vb.end())) << a[i].name() << " batch " << batch;
    }
  }
}

// x [4,8] through `op` with the given operands and attributes, then the refusal of MakeBatchDimSymbolic; the model
// must be unchanged.
std::string Refusal(const std::function<ir::Value*(Builder&, ir::Value*)>& body, ir::Shape x_shape = {D(4), D(8)}) {
  Builder b;
  ir::Value* x = b.Input("x", DType::kFloat32, x_shape);
  ir::Value* y = body(b, x);
  b.Output(y, {});
  y->set_type(ir::ValueType::Tensor(DType::kFloat32));
  Status st = MakeBatchDimSymbolic(b.model, {"x"});
  EXPECT_EQ(ShapeOf(b.model, "x")[0], st.ok() ? ir::Dim::Param("batch") : D(4)) << "unchanged on error";
  return st.ok() ? "ok" : st.message();
}

TEST(BatchDim, RefusalsNameTheNodeTheOpAndWhy) {
  const std::string tail = " (4 at export); re-export with a dynamic batch axis";
  EXPECT_EQ(Refusal([](Builder& b, ir::Value* x) {
              return b.Op("Reshape", "r", {x, b.Const(Ints("s", {2, 2, 8}))});
            }),
            "node Reshape 'r': its shape constant [2, 2, 8] splits the batch dimension" + tail);
  EXPECT_EQ(Refusal([](Builder& b, ir::Value* x) {
              return b.Op("Reshape", "r", {x, b.Init(Ints("s", {1, 32}))});
            }),
            "node Reshape 'r': its shape constant [1, 32] merges the batch dimension with other dims" + tail);
  EXPECT_EQ(Refusal([](Builder& b, ir::Value* x) {
              return b.Op("Reshape", "r", {x, b.Const(Ints("s", {8, -1}))});
            }),
            "node Reshape 'r': its shape constant [8, -1] does not keep the batch dimension as dim 0" + tail);
  EXPECT_EQ(Refusal([](Builder& b, ir::Value* x) {
              ir::Value* t = b.Op("Transpose", "t", {x}, {ir::Attribute::Ints("perm", {1, 0})});
              return b.Op("Reshape", "r", {t, b.Const(Ints("s", {8, 4}))});
            }),
            "node Reshape 'r': its input's batch dimension is dim 1, and its shape constant [8, 4] does not copy it "
            "(0 at that position)" +
                tail);
  EXPECT_EQ(Refusal([](Builder& b, ir::Value* x) {
              ir::Value* one = b.Op("Slice", "col",
                                    {x, b.Const(Ints("st", {0})), b.Const(Ints("en", {1})), b.Const(Ints("ax", {1}))});
              return b.Op("Expand", "e", {one, b.Const(Ints("s", {4, 8}))});
            }),
            "node Expand 'e': its shape constant [4, 8] sets the batch dimension to 4, a constant that depends on the "
            "batch size" +
                tail);
  EXPECT_EQ(Refusal([](Builder& b, ir::Value* x) {
              return b.Op("Tile", "t", {x, b.Const(Ints("rep", {2, 1}))});
            }),
            "node Tile 't': its repeats [2, 1] tile the batch dimension 2 times, a constant that depends on the batch "
            "size" +
                tail);
  EXPECT_EQ(Refusal([](Builder& b, ir::Value* x) {
              ir::Value* c = b.Op("ConstantOfShape", "c", {b.Const(Ints("s", {4, 8}))});
              return b.Op("Add", "a", {x, c});
            }),
            "node ConstantOfShape 'c': its constants make 'c' [4, 8], whose dim 0 meets the batch dimension in node "
            "Add 'a' with the batch size" +
                tail);
  EXPECT_EQ(Refusal(
                [](Builder& b, ir::Value* x) {
                  ir::Tensor zero(DType::kInt64, {}), four(DType::kInt64, {}), one(DType::kInt64, {});
                  zero.mutable_values<int64_t>()[0] = 0;
                  four.mutable_values<int64_t>()[0] = 4;
                  one.mutable_values<int64_t>()[0] = 1;
                  zero.set_name("start");
                  four.set_name("limit");
                  one.set_name("delta");
                  ir::Value* r = b.Op("Range", "range", {b.Const(zero), b.Const(four), b.Const(one)});
                  ir::Value* xi = b.Op("Cast", "xi", {x}, {ir::Attribute::Int("to", 7)});
                  return b.Op("Add", "a", {xi, r});
                },
                {D(4)}),
            "node Range 'range': its constants make 'range' [4], whose dim 0 meets the batch dimension in node Add "
            "'a' with the batch size" +
                tail);
  EXPECT_EQ(
      Refusal([](Builder& b, ir::Value* x) {
        return b.Op("Slice", "s", {x, b.Const(Ints("st", {0})), b.Const(Ints("en", {2})), b.Const(Ints("ax", {0}))});
      }),
      "node Slice 's': it slices the batch dimension (starts 0, ends 2, step 1), constants that depend on the "
      "batch size" +
          tail);
  EXPECT_EQ(Refusal([](Builder& b, ir::Value* x) {
              return b.Op("Gemm", "g", {x, b.Init(Uniform("w", {8, 3}, 1)), b.Init(Uniform("bias", {4, 3}, 2))});
            }),
            "node Gemm 'g': its operand 'bias' [4, 3] has the batch size at dim 0, where it meets the batch dimension" +
                tail);
  EXPECT_EQ(Refusal(
                [](Builder& b, ir::Value* x) {
                  return b.Op("MatMul", "mm", {x, b.Init(Uniform("w", {4, 8, 2}, 1))});
                },
                {D(4), D(3), D(8)}),
            "node MatMul 'mm': its operand 'w' [4, 8, 2] has the batch size at dim 0, where it meets the batch "
            "dimension" +
                tail);
  EXPECT_EQ(Refusal([](Builder& b, ir::Value* x) {
              return b.Op("Pad", "p", {x, b.Const(Ints("pads", {1, 0, 0, 0}))});
            }),
            "node Pad 'p': its pads [1, 0, 0, 0] pad the batch dimension" + tail);
  // Constants that merely look like the batch size where they meet no batch dim are fine.
  EXPECT_EQ(Refusal([](Builder& b, ir::Value* x) {
              return b.Op("Gemm", "g", {x, b.Init(Uniform("w", {8, 4}, 1)), b.Init(Uniform("bias", {4}, 2))});
            }),
            "ok");
}

TEST(BatchDim, DataInputsWithDifferentFixedBatchSizes) {
  Builder b;
  ir::Value* x = b.Input("x", DType::kFloat32, {D(4), D(8)});
  ir::Value* z = b.Input("z", DType::kFloat32, {D(5), D(8)});
  b.Output(b.Op("Add", "a", {x, z}), {D(4), D(8)});
  Status st = MakeBatchDimSymbolic(b.model, {"x", "z"});
  EXPECT_EQ(st.message(), "data inputs 'x' and 'z' fix different batch sizes (4 and 5 in dim 0)");
}

// x [b, 5, 3] -> LSTM (layout 1, hidden 2) -> Y [b, 5, 1, 2] -> Reshape by the exported constant [4, 10] -> Gemm -> y.
// The LSTM carries the batch from X's dim 0 to Y's dim 0, so the Reshape constant is rewritten; an initial state with
// the export's batch size is refused, naming the LSTM.
ir::Model LstmNet(bool fixed_initial_h) {
  Builder b;
  ir::Value* x = b.Input("x", DType::kFloat32, {D(4), D(5), D(3)});
  std::vector<ir::Value*> in = {x, b.Init(Uniform("w", {1, 8, 3}, 1)), b.Init(Uniform("r", {1, 8, 2}, 2))};
  if (fixed_initial_h) {
    in.push_back(nullptr);
    in.push_back(nullptr);
    in.push_back(b.Init(Uniform("h0", {4, 1, 2}, 3)));
  }
  ir::Value* y = b.Op("LSTM", "lstm", in, {ir::Attribute::Int("hidden_size", 2), ir::Attribute::Int("layout", 1)},
                      ir::Shape{D(4), D(5), D(1), D(2)});
  ir::Value* flat = b.Op("Reshape", "flat", {y, b.Const(Ints("shape2", {4, 10}))}, {}, ir::Shape{D(4), D(10)});
  ir::Value* out = b.Op("Gemm", "fc", {flat, b.Init(Uniform("w2", {3, 10}, 4))}, {ir::Attribute::Int("transB", 1)});
  b.Output(out, {D(4), D(3)});
  b.model.SetOpsetVersion("", 14);
  return std::move(b.model);
}

TEST(BatchDim, RecurrentOpsCarryTheBatch) {
  ir::Model made = LstmNet(false);
  BatchDimReport report;
  Status st = MakeBatchDimSymbolic(made, GraphDataInputs(*made.graph), &report);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(report.constants, 1);
  EXPECT_EQ(ShapeOf(made, "lstm")[0], ir::Dim::Param("batch"));
  EXPECT_EQ(ShapeOf(made, "lstm")[1], D(5));
  const ir::Tensor x = Uniform("x", {3, 5, 3}, 9);
  const std::vector<float> got = RunNet(made, x);
  ASSERT_EQ(got.size(), 9u);
  for (int64_t i = 0; i < 3; ++i) {
    const std::vector<float> alone = RunNet(made, Rows(x, i, 1));
    ASSERT_EQ(alone.size(), 3u);
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(got[i * 3 + j], alone[j], 1e-6f) << "row " << i;
  }

  ir::Model refused = LstmNet(true);
  st = MakeBatchDimSymbolic(refused, GraphDataInputs(*refused.graph));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("LSTM 'lstm'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'h0' [4, 1, 2] has the batch size at dim 0"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace onnxamp::trainer
