// LowerSequences (runtime/executor/lower_sequences.h): lists with constant and run-time positions, splits (no split,
// a scalar chunk, 1-D lengths constant or read at run time), the append-in-a-loop pattern with every ConcatFromSequence
// form, a loop body reading the enclosing graph's split, and what is left for the session to refuse. Each case runs
// through a Session (which lowers the model) and is compared with values computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "runtime/executor/lower_sequences.h"
#include "runtime/executor/session.h"
#include "runtime/ops/common/broadcast.h"
#include "tests/runtime/op_tester.h"
#include "tests/runtime/subgraph_builder.h"

namespace onnxamp::testing {
namespace {

using G = SubgraphBuilder;

ir::Model NewModel(int64_t opset) {
  ir::Model m;
  m.opset_imports = {{"", opset}};
  return m;
}

ir::Attribute Value(ir::Tensor t) { return ir::Attribute::TensorValue("value", std::move(t)); }
ir::Tensor I64(int64_t v) { return MakeTensor<int64_t>({}, {v}); }
ir::Tensor Floats(std::vector<int64_t> dims, float first) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = first + static_cast<float>(i);
  return MakeTensor<float>(dims, v);
}

StatusOr<std::unique_ptr<exec::Session>> Create(const ir::Model& m) {
  ir::Model copy;
  copy.opset_imports = m.opset_imports;
  copy.graph = m.graph->Clone();
  return exec::Session::Create(std::move(copy), CpuSessionOptions(1));
}

void ExpectFloats(const ir::Tensor& t, const std::vector<int64_t>& dims, const std::vector<float>& want,
                  const std::string& what) {
  EXPECT_EQ(t.dtype(), DType::kFloat32) << what;
  EXPECT_EQ(t.dims(), dims) << what;
  const std::vector<float> got = Values<float>(t);
  ASSERT_EQ(got.size(), want.size()) << what;
  // The runtime's Tanh is not std::tanh to the last bit.
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6) << what << " [" << i << "]";
  }
}

void ExpectInt(const ir::Tensor& t, int64_t want, const std::string& what) {
  EXPECT_EQ(t.dtype(), DType::kInt64) << what;
  EXPECT_TRUE(t.dims().empty()) << what;
  ASSERT_EQ(t.num_elements(), 1) << what;
  EXPECT_EQ(t.values<int64_t>()[0], want) << what;
}

// The values of several tensors, one after the other.
std::vector<float> Cat(const std::vector<std::vector<float>>& parts) {
  std::vector<float> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(LowerSequencesTest, ListsWithConstantPositions) {
  ir::Model m = NewModel(17);
  G top(m.graph.get());
  top.In("a", DType::kFloat32, std::vector<int64_t>{2, 3});
  top.In("b", DType::kFloat32, std::vector<int64_t>{2, 3});
  top.In("c", DType::kFloat32, std::vector<int64_t>{1, 3});
  top.N("Constant", {}, {"zero"}, {Value(I64(0))});
  top.N("Constant", {}, {"minus1"}, {Value(I64(-1))});
  top.N("Constant", {}, {"minus2"}, {Value(I64(-2))});
  top.N("SequenceConstruct", {"a", "b"}, {"s0"});
  top.N("SequenceInsert", {"s0", "c", "zero"}, {"s1"});  // c a b
  top.N("SequenceInsert", {"s1", "a"}, {"s2"});          // c a b a
  top.N("SequenceErase", {"s2", "minus1"}, {"s3"});      // c a b
  top.N("SequenceErase", {"s3"}, {"s4"});                // c a
  top.N("Identity", {"s3"}, {"s3_copy"});
  top.N("SequenceAt", {"s3_copy", "minus2"}, {"at"});
  top.N("SequenceLength", {"s3"}, {"len3"});
  top.N("SequenceLength", {"s4"}, {"len4"});
  top.N("ConcatFromSequence", {"s3"}, {"rows"}, {ir::Attribute::Int("axis", 0)});
  top.N("ConcatFromSequence", {"s0"}, {"stacked"}, {ir::Attribute::Int("axis", -1), ir::Attribute::Int("new_axis", 1)});
  for (const char* out : {"at", "len3", "len4", "rows", "stacked"}) top.Out(out, DType::kUndefined);

  auto session = Create(m);
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_FALSE(exec::HasSequenceOps(*(*session)->model().graph));
  const ir::Tensor a = Named(Floats({2, 3}, 0), "a"), b = Named(Floats({2, 3}, 10), "b"),
                   c = Named(Floats({1, 3}, 20), "c");
  auto out = (*session)->Run({a, b, c});
  ASSERT_TRUE(out.ok()) << out.status().message();
  const std::vector<float> av = Values<float>(a), bv = Values<float>(b), cv = Values<float>(c);
  ExpectFloats((*out)[0], {2, 3}, av, "s3[-2]");
  ExpectInt((*out)[1], 3, "len(s3)");
  ExpectInt((*out)[2], 2, "len(s4)");
  ExpectFloats((*out)[3], {5, 3}, Cat({cv, av, bv}), "concat(s3)");
  std::vector<float> stacked;
  for (size_t i = 0; i < 6; ++i) {
    stacked.push_back(av[i]);
    stacked.push_back(bv[i]);
  }
  ExpectFloats((*out)[4], {2, 3, 2}, stacked, "stack(a, b, axis=-1)");
}

// SequenceInsert, SequenceErase and SequenceAt at positions that are graph inputs, on a list whose elements have one
// static shape (stacked first), at opsets 12 and 17, for positive and negative positions.
TEST(LowerSequencesTest, RunTimePositionsOnAListOfOneShape) {
  for (int64_t opset : {12, 17}) {
    ir::Model m = NewModel(opset);
    G top(m.graph.get());
    for (const char* x : {"a", "b", "c", "d"}) top.In(x, DType::kFloat32, std::vector<int64_t>{2, 3});
    for (const char* p : {"pi", "pe", "pa"}) top.In(p, DType::kInt64, std::vector<int64_t>{});
    top.N("SequenceConstruct", {"a", "b", "c"}, {"s0"});
    top.N("SequenceInsert", {"s0", "d", "pi"}, {"s1"});
    top.N("SequenceErase", {"s1", "pe"}, {"s2"});
    top.N("SequenceAt", {"s2", "pa"}, {"at"});
    top.N("SequenceLength", {"s2"}, {"len"});
    top.N("SequenceAt", {"s0", "pa"}, {"at0"});
    top.Out("at", DType::kFloat32);
    top.Out("len", DType::kInt64);
    top.Out("at0", DType::kFloat32);
    auto session = Create(m);
    ASSERT_TRUE(session.ok()) << session.status().message();
    EXPECT_FALSE(exec::HasSequenceOps(*(*session)->model().graph));
    std::vector<ir::Tensor> elems = {Named(Floats({2, 3}, 0), "a"), Named(Floats({2, 3}, 10), "b"),
                                     Named(Floats({2, 3}, 20), "c"), Named(Floats({2, 3}, 30), "d")};
    for (auto [pi, pe, pa] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {0, 0, 0}, {1, 2, 1}, {3, -1, -1}, {-1, 0, 2}, {-3, -4, -3}, {2, 3, 0}}) {
      std::vector<int> list = {0, 1, 2};
      const std::vector<int> original = list;
      list.insert(list.begin() + (pi < 0 ? pi + 3 : pi), 3);
      list.erase(list.begin() + (pe < 0 ? pe + 4 : pe));
      const std::string what = "opset " + std::to_string(opset) + " insert at " + std::to_string(pi) + ", erase " +
                               std::to_string(pe) + ", at " + std::to_string(pa);
      std::vector<ir::Tensor> inputs = elems;
      inputs.push_back(Named(I64(pi), "pi"));
      inputs.push_back(Named(I64(pe), "pe"));
      inputs.push_back(Named(I64(pa), "pa"));
      auto out = (*session)->Run(inputs);
      ASSERT_TRUE(out.ok()) << what << ": " << out.status().message();
      ExpectFloats((*out)[0], {2, 3}, Values<float>(elems[list[pa < 0 ? pa + 3 : pa]]), what);
      ExpectInt((*out)[1], 3, what);
      ExpectFloats((*out)[2], {2, 3}, Values<float>(elems[original[pa < 0 ? pa + 3 : pa]]), what);
    }
  }
}

TEST(LowerSequencesTest, Splits) {
  for (int64_t opset : {12, 17}) {
    ir::Model m = NewModel(opset);
    G top(m.graph.get());
    top.In("x", DType::kFloat32, std::vector<int64_t>{2, 5});
    top.In("p", DType::kInt64, std::vector<int64_t>{});
    top.In("lengths", DType::kInt64, std::vector<int64_t>{2});
    top.N("Constant", {}, {"two"}, {Value(I64(2))});
    top.N("Constant", {}, {"minus1"}, {Value(I64(-1))});
    top.N("Constant", {}, {"minus2"}, {Value(I64(-2))});
    top.N("Constant", {}, {"one_four"}, {Value(MakeTensor<int64_t>({2}, {1, 4}))});
    // Columns without the axis (unbind), with it, chunks of 2 (the last one shorter), and lengths [1, 4].
    top.N("SplitToSequence", {"x"}, {"cols"}, {ir::Attribute::Int("axis", 1), ir::Attribute::Int("keepdims", 0)});
    top.N("SplitToSequence", {"x"}, {"cols_kept"}, {ir::Attribute::Int("axis", -1)});
    top.N("SplitToSequence", {"x", "two"}, {"pairs"}, {ir::Attribute::Int("axis", 1)});
    top.N("SplitToSequence", {"x", "one_four"}, {"parts"}, {ir::Attribute::Int("axis", 1)});
    top.N("SplitToSequence", {"x", "lengths"}, {"dyn"}, {ir::Attribute::Int("axis", 1)});
    top.N("SequenceAt", {"cols", "p"}, {"col"});
    top.N("SequenceLength", {"cols"}, {"ncols"});
    top.N("SequenceAt", {"cols_kept", "minus1"}, {"last_col"});
    top.N("SequenceAt", {"pairs", "p"}, {"pair"});
    top.N("SequenceAt", {"pairs", "minus1"}, {"last_pair"});
    top.N("SequenceLength", {"pairs"}, {"npairs"});
    top.N("ConcatFromSequence", {"pairs"}, {"x_again"}, {ir::Attribute::Int("axis", 1)});
    top.N("ConcatFromSequence", {"cols"}, {"x_stacked"},
          {ir::Attribute::Int("axis", 1), ir::Attribute::Int("new_axis", 1)});
    top.N("SequenceAt", {"parts", "minus1"}, {"part"});
    top.N("SequenceLength", {"parts"}, {"nparts"});
    top.N("SequenceAt", {"dyn", "minus2"}, {"dyn0"});
    top.N("SequenceAt", {"dyn", "p"}, {"dynp"});
    top.N("SequenceLength", {"dyn"}, {"ndyn"});
    for (const char* out : {"col", "ncols", "last_col", "pair", "last_pair", "npairs", "x_again", "x_stacked", "part",
                            "nparts", "dyn0", "dynp", "ndyn"}) {
      top.Out(out, DType::kUndefined);
    }
    auto session = Create(m);
    ASSERT_TRUE(session.ok()) << "opset " << opset << ": " << session.status().message();
    EXPECT_FALSE(exec::HasSequenceOps(*(*session)->model().graph));
    const ir::Tensor x = Named(Floats({2, 5}, 0), "x");  // rows 0..4, 5..9
    auto out = (*session)->Run({x, Named(I64(1), "p"), Named(MakeTensor<int64_t>({2}, {3, 2}), "lengths")});
    ASSERT_TRUE(out.ok()) << out.status().message();
    const std::string at = "opset " + std::to_string(opset) + ": ";
    ExpectFloats((*out)[0], {2}, {1, 6}, at + "cols[1]");
    ExpectInt((*out)[1], 5, at + "len(cols)");
    ExpectFloats((*out)[2], {2, 1}, {4, 9}, at + "cols_kept[-1]");
    ExpectFloats((*out)[3], {2, 2}, {2, 3, 7, 8}, at + "pairs[1]");
    ExpectFloats((*out)[4], {2, 1}, {4, 9}, at + "pairs[-1]");
    ExpectInt((*out)[5], 3, at + "len(pairs)");
    ExpectFloats((*out)[6], {2, 5}, Values<float>(x), at + "concat(pairs)");
    ExpectFloats((*out)[7], {2, 5}, Values<float>(x), at + "stack(cols)");
    ExpectFloats((*out)[8], {2, 4}, {1, 2, 3, 4, 6, 7, 8, 9}, at + "parts[-1]");
    ExpectInt((*out)[9], 2, at + "len(parts)");
    ExpectFloats((*out)[10], {2, 3}, {0, 1, 2, 5, 6, 7}, at + "dyn[-2]");
    ExpectFloats((*out)[11], {2, 2}, {3, 4, 8, 9}, at + "dyn[1]");
    ExpectInt((*out)[12], 2, at + "len(dyn)");
  }
}

// h0 [2, 3] = 0; for t in 0..3: h = Tanh(h + x[:, t]) with x [2, 4, 3], each h appended to a list that starts empty
// (the list torch.jit.script makes of `outs.append(h)`). `from_split`: the body reads x[:, t] as SequenceAt of the
// enclosing graph's SplitToSequence(x, axis 1, keepdims 0) (`for xt in x.unbind(1)`) instead of a Gather.
// `rank_from_sequence_type`: the elements' rank comes from the list's declared type, not from the body's ops.
ir::Model LoopAppendModel(bool from_split, bool rank_from_sequence_type) {
  ir::Model m = NewModel(17);
  G top(m.graph.get());
  top.In("x", DType::kFloat32, std::vector<int64_t>{2, 4, 3});
  top.N("Constant", {}, {"trips"}, {Value(I64(4))});
  top.N("Constant", {}, {"h0"}, {Value(MakeTensor<float>({2, 3}, std::vector<float>(6, 0.0f)))});
  top.N("Constant", {}, {"minus1"}, {Value(I64(-1))});
  top.N("SequenceEmpty", {}, {"empty"}, {ir::Attribute::Int("dtype", static_cast<int64_t>(DType::kFloat32))});
  if (from_split) {
    top.N("SplitToSequence", {"x"}, {"steps"}, {ir::Attribute::Int("axis", 1), ir::Attribute::Int("keepdims", 0)});
  }
  auto body = Graph("body");
  G b(body.get());
  b.In("i", DType::kInt64, std::vector<int64_t>{});
  b.In("cond", DType::kBool, std::vector<int64_t>{});
  ir::Value* seq_in = body->CreateValue("outs");
  if (rank_from_sequence_type) {
    // The state untyped, so that only the list's declared element type [?, ?] tells the elements' rank.
    b.In("h", DType::kFloat32);
    ir::Shape two_dims = {ir::Dim::Param("n"), ir::Dim::Param("c")};
    seq_in->set_type(ir::ValueType::Sequence(ir::ValueType::Tensor(DType::kFloat32, two_dims)));
  } else {
    b.In("h", DType::kFloat32, std::vector<int64_t>{2, 3});
  }
  body->AddInput(seq_in);
  if (from_split) {
    b.N("SequenceAt", {"steps", "i"}, {"xt"});
  } else {
    b.N("Gather", {"x", "i"}, {"xt"}, {ir::Attribute::Int("axis", 1)});
  }
  b.N("Add", {"h", "xt"}, {"sum"});
  b.N("Tanh", {"sum"}, {"h_next"});
  b.N("SequenceInsert", {"outs", "h_next"}, {"outs_next"});
  b.N("Identity", {"cond"}, {"cond_out"});
  b.Out("cond_out", DType::kBool);
  b.Out("h_next", DType::kFloat32);
  body->AddOutput(body->FindValue("outs_next"));
  ir::Node* loop = top.N("Loop", {"trips", "", "h0", "empty"}, {"hT", "seq"});
  loop->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  top.N("ConcatFromSequence", {"seq"}, {"stack1"}, {ir::Attribute::Int("axis", 1), ir::Attribute::Int("new_axis", 1)});
  top.N("ConcatFromSequence", {"seq"}, {"stack0"}, {ir::Attribute::Int("axis", 0), ir::Attribute::Int("new_axis", 1)});
  top.N("ConcatFromSequence", {"seq"}, {"stack_last"},
        {ir::Attribute::Int("axis", -1), ir::Attribute::Int("new_axis", 1)});
  top.N("ConcatFromSequence", {"seq"}, {"cat1"}, {ir::Attribute::Int("axis", -1)});
  top.N("ConcatFromSequence", {"seq"}, {"cat0"}, {ir::Attribute::Int("axis", 0)});
  top.N("SequenceAt", {"seq", "minus1"}, {"last"});
  top.N("SequenceLength", {"seq"}, {"len"});
  for (const char* out : {"hT", "stack1", "stack0", "stack_last", "cat1", "cat0", "last", "len"}) {
    top.Out(out, DType::kUndefined);
  }
  return m;
}

// The states h_t [2, 3] (hs[t][r * 3 + c]) of LoopAppendModel for x [2, 4, 3].
std::vector<std::vector<float>> LoopStates(const std::vector<float>& xv) {
  std::vector<std::vector<float>> hs;
  std::vector<float> h(6, 0.0f);
  for (int t = 0; t < 4; ++t) {
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 3; ++c) h[r * 3 + c] = std::tanh(h[r * 3 + c] + xv[(r * 4 + t) * 3 + c]);
    hs.push_back(h);
  }
  return hs;
}

TEST(LowerSequencesTest, LoopAppendsBecomeAScanOutput) {
  const ir::Tensor x = Named(Floats({2, 4, 3}, 0), "x");
  const std::vector<float> xv = Values<float>(x);
  for (int from_split = 0; from_split < 2; ++from_split) {
    for (int declare = 0; declare < 2; ++declare) {
      const std::string what =
          std::string(from_split ? "unbind" : "gather") + (declare ? ", rank from the list type" : "");
      const ir::Model m = LoopAppendModel(from_split, declare);
      auto session = Create(m);
      ASSERT_TRUE(session.ok()) << what << ": " << session.status().message();
      EXPECT_FALSE(exec::HasSequenceOps(*(*session)->model().graph)) << what;
      auto out = (*session)->Run({x});
      ASSERT_TRUE(out.ok()) << what << ": " << out.status().message();
      const std::vector<std::vector<float>> hs = LoopStates(xv);
      std::vector<float> stack1, stack0, stack_last, cat1, cat0;
      for (int r = 0; r < 2; ++r)
        for (int t = 0; t < 4; ++t)
          for (int c = 0; c < 3; ++c) stack1.push_back(hs[t][r * 3 + c]);
      for (int t = 0; t < 4; ++t) stack0.insert(stack0.end(), hs[t].begin(), hs[t].end());
      for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 3; ++c)
          for (int t = 0; t < 4; ++t) stack_last.push_back(hs[t][r * 3 + c]);
      for (int r = 0; r < 2; ++r)
        for (int t = 0; t < 4; ++t)
          for (int c = 0; c < 3; ++c) cat1.push_back(hs[t][r * 3 + c]);
      cat0 = stack0;
      // Loop outputs are computed with the same float ops in the same order: exact.
      ExpectFloats((*out)[0], {2, 3}, hs[3], what + ": hT");
      ExpectFloats((*out)[1], {2, 4, 3}, stack1, what + ": stack axis 1");
      ExpectFloats((*out)[2], {4, 2, 3}, stack0, what + ": stack axis 0");
      ExpectFloats((*out)[3], {2, 3, 4}, stack_last, what + ": stack axis -1");
      ExpectFloats((*out)[4], {2, 12}, cat1, what + ": cat axis -1");
      ExpectFloats((*out)[5], {8, 3}, cat0, what + ": cat axis 0");
      ExpectFloats((*out)[6], {2, 3}, hs[3], what + ": seq[-1]");
      ExpectInt((*out)[7], 4, what + ": len(seq)");
    }
  }
}

// No iteration: an empty list, of length 0 (the scan output is typed from the list's SequenceEmpty).
TEST(LowerSequencesTest, ALoopThatRunsNoIterationGivesAnEmptyList) {
  ir::Model m = LoopAppendModel(false, true);
  m.graph->FindValue("trips")->producer()->SetAttribute(Value(I64(0)));
  while (m.graph->outputs().back()->name() != "len") m.graph->RemoveOutput(m.graph->outputs().size() - 1);
  while (m.graph->outputs().front()->name() != "len") m.graph->RemoveOutput(0);
  // seq[-1] of an empty list is an error (Gather's index out of range); the stacked forms are empty tensors.
  ir::Value* last = m.graph->FindValue("last");
  m.graph->RemoveNode(last->producer());
  m.graph->RemoveValue(last);
  auto session = Create(m);
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_FALSE(exec::HasSequenceOps(*(*session)->model().graph));
  auto out = (*session)->Run({Named(Floats({2, 4, 3}, 0), "x")});
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectInt((*out)[0], 0, "len(empty list)");
}

// Leaves `keep` the only graph output, and removes the nodes that made the others (not the Loop).
void KeepOnlyOutput(ir::Model& m, const std::string& keep) {
  for (size_t i = m.graph->outputs().size(); i-- > 0;) {
    if (m.graph->outputs()[i]->name() != keep) m.graph->RemoveOutput(i);
  }
  std::vector<ir::Node*> dead;
  for (ir::Node* n : m.graph->nodes()) {
    if (n->op_type() != "Loop" && n->outputs().size() == 1 && n->output(0)->uses().empty() &&
        n->output(0)->name() != keep) {
      dead.push_back(n);
    }
  }
  for (ir::Node* n : dead) {
    ir::Value* v = n->output(0);
    m.graph->RemoveNode(n);
    m.graph->RemoveValue(v);
  }
}

// Only the list's declared element type gives the elements' rank. An axis counted from the back that this rank makes
// 0 (cat on -1, stack on -2 of elements of rank 2) would stack or merge along the wrong axis if the rank were wrong:
// with the right rank the values are right; with a wrong one (rank 1) the lowering's run-time rank check fails the run.
TEST(LowerSequencesTest, AWrongDeclaredRankFailsAtRunTimeInsteadOfGivingWrongShapes) {
  const ir::Tensor x = Named(Floats({2, 4, 3}, 0), "x");
  const std::vector<std::vector<float>> hs = LoopStates(Values<float>(x));
  std::vector<float> along1;  // the states stacked (or concatenated) along axis 1
  for (int r = 0; r < 2; ++r)
    for (int t = 0; t < 4; ++t)
      for (int c = 0; c < 3; ++c) along1.push_back(hs[t][r * 3 + c]);
  for (const char* kept : {"cat1", "stack_m2"}) {
    for (int wrong = 0; wrong < 2; ++wrong) {
      const std::string what = std::string(kept) + (wrong ? ", declared rank 1" : ", declared rank 2");
      ir::Model m = LoopAppendModel(false, true);
      G top(m.graph.get());
      top.N("ConcatFromSequence", {"seq"}, {"stack_m2"},
            {ir::Attribute::Int("axis", -2), ir::Attribute::Int("new_axis", 1)});
      top.Out("stack_m2", DType::kUndefined);
      KeepOnlyOutput(m, kept);
      if (wrong) {
        ir::Graph* body = m.graph->FindValue("hT")->producer()->subgraphs()[0];
        body->inputs()[3]->set_type(
            ir::ValueType::Sequence(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("n")})));
      }
      auto session = Create(m);
      ASSERT_TRUE(session.ok()) << what << ": " << session.status().message();
      EXPECT_FALSE(exec::HasSequenceOps(*(*session)->model().graph)) << what;
      auto out = (*session)->Run({x});
      if (wrong) {
        ASSERT_FALSE(out.ok()) << what << ": gave " << ops::ShapeToString((*out)[0].dims());
        EXPECT_NE(out.status().message().find("Transpose"), std::string::npos)
            << what << ": " << out.status().message();
        continue;
      }
      ASSERT_TRUE(out.ok()) << what << ": " << out.status().message();
      ExpectFloats((*out)[0], std::string(kept) == "cat1" ? std::vector<int64_t>{2, 12} : std::vector<int64_t>{2, 4, 3},
                   along1, what);
    }
  }
}

// A split concatenated again along the same axis, given from the front for the split and from the back for the
// concat: the two are the same axis only through X's rank, which only a declared type gives here. With the rank right
// X comes back; with X of rank 3 where rank 2 is declared the run fails instead of returning X.
TEST(LowerSequencesTest, SplitAndConcatAgainMeetThroughADeclaredRank) {
  ir::Model m = NewModel(17);
  G top(m.graph.get());
  top.In("x", DType::kFloat32);
  top.N("Identity", {"x"}, {"xi"});
  m.graph->FindValue("xi")->set_type(
      ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("r"), ir::Dim::Param("c")}));
  top.N("SplitToSequence", {"xi"}, {"cols"}, {ir::Attribute::Int("axis", 1)});
  top.N("ConcatFromSequence", {"cols"}, {"y"}, {ir::Attribute::Int("axis", -1)});
  top.Out("y", DType::kUndefined);
  auto session = Create(m);
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_FALSE(exec::HasSequenceOps(*(*session)->model().graph));
  const ir::Tensor x = Named(Floats({2, 5}, 0), "x");
  auto out = (*session)->Run({x});
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectFloats((*out)[0], {2, 5}, Values<float>(x), "concat(split(x, axis 1), axis -1)");
  auto wrong = (*session)->Run({Named(Floats({2, 5, 1}, 0), "x")});
  ASSERT_FALSE(wrong.ok()) << "x of rank 3 gave " << ops::ShapeToString((*wrong)[0].dims());
  EXPECT_NE(wrong.status().message().find("Transpose"), std::string::npos) << wrong.status().message();
}

// A loop appending an empty tensor [2, 0, 3] three times, concatenated along axis 1: the merging Reshape's 0 is the
// elements' dim (allowzero), not "copy the input's dim", so the result is the empty [2, 0, 3].
TEST(LowerSequencesTest, ConcatenatingEmptyElementsGivesAnEmptyTensor) {
  ir::Model m = NewModel(17);
  G top(m.graph.get());
  top.In("e", DType::kFloat32, std::vector<int64_t>{2, 0, 3});
  top.N("Constant", {}, {"trips"}, {Value(I64(3))});
  top.N("SequenceEmpty", {}, {"empty"}, {ir::Attribute::Int("dtype", static_cast<int64_t>(DType::kFloat32))});
  auto body = Graph("body");
  G b(body.get());
  b.In("i", DType::kInt64, std::vector<int64_t>{});
  b.In("cond", DType::kBool, std::vector<int64_t>{});
  body->AddInput(body->CreateValue("outs"));
  b.N("Relu", {"e"}, {"r"});
  b.N("SequenceInsert", {"outs", "r"}, {"outs_next"});
  b.N("Identity", {"cond"}, {"cond_out"});
  b.Out("cond_out", DType::kBool);
  body->AddOutput(body->FindValue("outs_next"));
  ir::Node* loop = top.N("Loop", {"trips", "", "empty"}, {"seq"});
  loop->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  top.N("ConcatFromSequence", {"seq"}, {"cat"}, {ir::Attribute::Int("axis", 1)});
  top.Out("cat", DType::kUndefined);
  auto session = Create(m);
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_FALSE(exec::HasSequenceOps(*(*session)->model().graph));
  auto out = (*session)->Run({Named(Floats({2, 0, 3}, 0), "e")});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{2, 0, 3}));
}

// Sequence ops that nothing reads are removed, and that is a change (Session::Create verifies the graph after one).
TEST(LowerSequencesTest, RemovingUnreadSequenceOpsIsAChange) {
  ir::Model m = NewModel(17);
  G top(m.graph.get());
  top.In("a", DType::kFloat32, std::vector<int64_t>{2});
  top.N("SequenceConstruct", {"a", "a"}, {"s"});
  top.N("Relu", {"a"}, {"y"});
  top.Out("y", DType::kFloat32);
  bool changed = false;
  ASSERT_TRUE(exec::LowerSequences(m, &changed).ok());
  EXPECT_TRUE(changed);
  EXPECT_FALSE(exec::HasSequenceOps(*m.graph));
}

TEST(LowerSequencesTest, WhatCannotBeLoweredIsLeftForTheSessionToRefuse) {
  {  // A sequence graph output.
    ir::Model m = NewModel(17);
    G top(m.graph.get());
    top.In("a", DType::kFloat32, std::vector<int64_t>{2});
    top.N("SequenceConstruct", {"a", "a"}, {"s"});
    m.graph->FindValue("s")->set_type(ir::ValueType::Sequence(ir::ValueType::Tensor(DType::kFloat32)));
    m.graph->AddOutput(m.graph->FindValue("s"));
    bool changed = true;
    ASSERT_TRUE(exec::LowerSequences(m, &changed).ok());
    EXPECT_FALSE(changed);
    auto s = Create(m);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find("output 's' is seq(tensor(float)"), std::string::npos) << s.status().message();
  }
  {  // A sequence graph input.
    ir::Model m = NewModel(17);
    G top(m.graph.get());
    top.In("a", DType::kFloat32, std::vector<int64_t>{2});
    ir::Value* seq = m.graph->CreateValue("s");
    seq->set_type(ir::ValueType::Sequence(ir::ValueType::Tensor(DType::kFloat32)));
    m.graph->AddInput(seq);
    top.N("ConcatFromSequence", {"s"}, {"c"}, {ir::Attribute::Int("axis", 0)});
    top.N("Add", {"c", "a"}, {"y"});
    top.Out("y", DType::kFloat32);
    auto s = Create(m);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find("input 's' is seq(tensor(float)"), std::string::npos) << s.status().message();
  }
  {  // A run-time position on a list whose elements differ in shape.
    ir::Model m = NewModel(17);
    G top(m.graph.get());
    top.In("a", DType::kFloat32, std::vector<int64_t>{2});
    top.In("b", DType::kFloat32, std::vector<int64_t>{3});
    top.In("p", DType::kInt64, std::vector<int64_t>{});
    top.N("SequenceConstruct", {"a", "b"}, {"s"});
    top.N("SequenceAt", {"s", "p"}, {"y"});
    top.Out("y", DType::kFloat32);
    auto s = Create(m);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find("is not supported"), std::string::npos) << s.status().message();
  }
  {  // A loop whose list is a graph output: the Loop stays as it was.
    ir::Model m = LoopAppendModel(false, true);
    ir::Value* seq = m.graph->FindValue("seq");
    seq->set_type(ir::ValueType::Sequence(ir::ValueType::Tensor(DType::kFloat32)));
    m.graph->AddOutput(seq);
    bool changed = false;
    ASSERT_TRUE(exec::LowerSequences(m, &changed).ok());
    bool body_inserts = false;
    for (const ir::Node* n : m.graph->nodes()) {
      for (const ir::Graph* sub : n->subgraphs()) body_inserts |= exec::HasSequenceOps(*sub);
    }
    EXPECT_TRUE(body_inserts);
    EXPECT_FALSE(Create(m).ok());
  }
  {  // No sequences: nothing changes.
    ir::Model m = NewModel(17);
    G top(m.graph.get());
    top.In("a", DType::kFloat32, std::vector<int64_t>{2});
    top.N("Relu", {"a"}, {"y"});
    top.Out("y", DType::kFloat32);
    bool changed = true;
    ASSERT_TRUE(exec::LowerSequences(m, &changed).ok());
    EXPECT_FALSE(changed);
  }
}

}  // namespace
}  // namespace onnxamp::testing
