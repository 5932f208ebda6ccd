#!/usr/bin/env python3
"""If, Loop and Scan in onnxamp's runtime against ONNX Runtime, on models the ONNX backend test suite has no case
like: an If inside a Loop body that reads the iteration number and enclosing weights, an If whose branches give
different shapes, a Loop stopped early by its body with loop-carried values and scan outputs, a Loop whose carried
value grows, a Loop with neither trip count nor condition, an RNN written as a Scan (MatMul, Tanh), a Scan with two
states, two scan inputs and two scan outputs on other axes in both directions, a Scan inside a Loop, and opset 8's
batched Scan reversed within each item's sequence length; and sequences the runtime lowers to tensors (docs/runtime.md,
"Sequences"): a scripted loop appending to a list over an unbind, a Loop carrying two lists beside a tensor, a
list at run-time positions, and splits.

Each case is a float32 model with seeded inputs; `onnxamp run` and ONNX Runtime (CPU) run it and every output must
agree within |got - ort| <= 1e-5 + 1e-4 * |ort| and have the same shape.

Usage: .venv/bin/python tests/peer/control_flow_ort.py --onnxamp BIN [--filter REGEX] [--keep DIR] [--brief]
Exit status: 0 all agree, 1 a mismatch or failure, 2 usage error; 77 when numpy, onnx or onnxruntime is missing.
"""
import sys

try:
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    from run_compare import compare_main
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

ATOL, RTOL = 1e-5, 1e-4
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, elem, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def loop_with_if(rng):
    """v = Loop(M=6) { w_sel = If(i % 2 == 0) then MatMul(v, W) else Add(v, b); v_out = Tanh(w_sel); scan v_out }"""
    W = rng.uniform(-0.5, 0.5, (4, 4)).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, (4,)).astype(np.float32)
    then_g = helper.make_graph([helper.make_node("MatMul", ["v_in", "W"], ["t"])], "then", [], [vi("t", F)])
    else_g = helper.make_graph([helper.make_node("Add", ["v_in", "b"], ["e"])], "else", [], [vi("e", F)])
    body = helper.make_graph(
        [const("two", np.int64(2)), const("zero", np.int64(0)),
         helper.make_node("Mod", ["i", "two"], ["r"]), helper.make_node("Equal", ["r", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["sel"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Tanh", ["sel"], ["v_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["v_out"], ["scan"])],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, None)],
        [vi("cond_out", B, []), vi("v_out", F, None), vi("scan", F, None)])
    m = model([helper.make_node("Loop", ["M", "", "x"], ["v", "all"], body=body)],
              [vi("x", F, [3, 4]), vi("M", I64, [])], [vi("v", F, None), vi("all", F, None)],
              [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")])
    return m, {"x": rng.uniform(-1, 1, (3, 4)).astype(np.float32), "M": np.array(6, np.int64)}


def if_shapes(rng, cond):
    """y = If(c) then Concat(x, x) [6, 4] else ReduceMean(x, axis 1) [3, 1]; z = Relu(y)."""
    then_g = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["t"], axis=0)], "then", [], [vi("t", F)])
    else_g = helper.make_graph([helper.make_node("ReduceMean", ["x"], ["e"], axes=[1], keepdims=1)], "else", [],
                               [vi("e", F)])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
               helper.make_node("Relu", ["y"], ["z"])],
              [vi("x", F, [3, 4]), vi("c", B, [])], [vi("z", F, None)])
    return m, {"x": rng.uniform(-1, 1, (3, 4)).astype(np.float32), "c": np.array(cond)}


def loop_early_exit(rng):
    """s, p, all = Loop(M=10, cond=true, s0, p0) { s_out = s + x; p_out = p * 0.5; cond = ReduceSum(s_out) < 4 }"""
    body = helper.make_graph(
        [const("half", np.float32(0.5)), const("limit", np.float32(4.0)),
         helper.make_node("Add", ["s_in", "x"], ["s_out"]), helper.make_node("Mul", ["p_in", "half"], ["p_out"]),
         helper.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["cond_out"]),
         helper.make_node("Mul", ["s_out", "p_out"], ["scan"])],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("s_in", F, [2]), vi("p_in", F, [])],
        [vi("cond_out", B, []), vi("s_out", F, [2]), vi("p_out", F, []), vi("scan", F, [2])])
    m = model([helper.make_node("Loop", ["M", "cond", "s0", "p0"], ["s", "p", "all"], body=body)],
              [vi("x", F, [2]), vi("M", I64, []), vi("cond", B, []), vi("s0", F, [2]), vi("p0", F, [])],
              [vi("s", F, None), vi("p", F, None), vi("all", F, None)])
    return m, {"x": np.array([0.3, 0.45], np.float32), "M": np.array(10, np.int64), "cond": np.array(True),
               "s0": rng.uniform(-0.2, 0.2, (2,)).astype(np.float32), "p0": np.array(1.5, np.float32)}


def loop_grows(rng):
    """v = Loop(M=4) { v_out = Concat(v, Sin(v[-1:])) along 0 } on v0 [1, 3]: v grows one row per iteration."""
    body = helper.make_graph(
        [const("starts", np.array([-1], np.int64)), const("ends", np.array([2**62], np.int64)),
         helper.make_node("Slice", ["v_in", "starts", "ends"], ["last"]), helper.make_node("Sin", ["last"], ["s"]),
         helper.make_node("Concat", ["v_in", "s"], ["v_out"], axis=0),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, None)],
        [vi("cond_out", B, []), vi("v_out", F, None)])
    m = model([helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body)],
              [vi("v0", F, [1, 3]), vi("M", I64, [])], [vi("v", F, None)])
    return m, {"v0": rng.uniform(-1, 1, (1, 3)).astype(np.float32), "M": np.array(4, np.int64)}


def loop_unbounded(rng):
    """Loop with neither M nor cond: runs until its body's condition (i < 6) turns false; scan output i * x."""
    body = helper.make_graph(
        [const("six", np.int64(6)), helper.make_node("Less", ["i", "six"], ["cond_out"]),
         helper.make_node("Cast", ["i"], ["fi"], to=F), helper.make_node("Mul", ["fi", "x"], ["scan"])],
        "body", [vi("i", I64, []), vi("cond_in", B, [])], [vi("cond_out", B, []), vi("scan", F, None)])
    m = model([helper.make_node("Loop", ["", ""], ["all"], body=body)], [vi("x", F, [3])], [vi("all", F, None)])
    return m, {"x": rng.uniform(-1, 1, (3,)).astype(np.float32)}


def scan_rnn(rng):
    """h_T, H = Scan(h0, X) { h = Tanh(MatMul(x_t, Wx) + MatMul(h, Wh) + b) } over X [T=7, B=5, 16], hidden 32."""
    Wx = rng.uniform(-0.3, 0.3, (16, 32)).astype(np.float32)
    Wh = rng.uniform(-0.2, 0.2, (32, 32)).astype(np.float32)
    b = rng.uniform(-0.1, 0.1, (32,)).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "Wx"], ["a"]), helper.make_node("MatMul", ["h_in", "Wh"], ["r"]),
         helper.make_node("Add", ["a", "r"], ["ar"]), helper.make_node("Add", ["ar", "b"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"]), helper.make_node("Identity", ["h_out"], ["y"])],
        "body", [vi("h_in", F, [5, 32]), vi("x_t", F, [5, 16])], [vi("h_out", F, [5, 32]), vi("y", F, [5, 32])])
    m = model([helper.make_node("Scan", ["h0", "X"], ["h", "H"], body=body, num_scan_inputs=1)],
              [vi("h0", F, [5, 32]), vi("X", F, [7, 5, 16])], [vi("h", F, None), vi("H", F, None)],
              [numpy_helper.from_array(Wx, "Wx"), numpy_helper.from_array(Wh, "Wh"), numpy_helper.from_array(b, "b")])
    return m, {"h0": np.zeros((5, 32), np.float32), "X": rng.uniform(-1, 1, (7, 5, 16)).astype(np.float32)}


def scan_axes(rng):
    """Two states, two scan inputs (axis 1 reversed; axis 0), two scan outputs (axis 1 reversed; axis -1)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s1_in", "a_t"], ["s1_out"]), helper.make_node("Mul", ["s2_in", "b_t"], ["s2_out"]),
         helper.make_node("Sub", ["s1_out", "s2_out"], ["o1"]), helper.make_node("Concat", ["a_t", "b_t"], ["o2"],
                                                                                     axis=0)],
        "body", [vi("s1_in", F, [3]), vi("s2_in", F, [3]), vi("a_t", F, [3]), vi("b_t", F, [3])],
        [vi("s1_out", F, [3]), vi("s2_out", F, [3]), vi("o1", F, [3]), vi("o2", F, [6])])
    node = helper.make_node("Scan", ["s1", "s2", "A", "Bm"], ["s1f", "s2f", "O1", "O2"], body=body,
                            num_scan_inputs=2, scan_input_axes=[1, 0], scan_input_directions=[1, 0],
                            scan_output_axes=[1, -1], scan_output_directions=[1, 0])
    m = model([node], [vi("s1", F, [3]), vi("s2", F, [3]), vi("A", F, [3, 4]), vi("Bm", F, [4, 3])],
              [vi(n, F, None) for n in ("s1f", "s2f", "O1", "O2")], opset=16)
    return m, {"s1": rng.uniform(-1, 1, (3,)).astype(np.float32), "s2": rng.uniform(0.5, 1.5, (3,)).astype(np.float32),
               "A": rng.uniform(-1, 1, (3, 4)).astype(np.float32), "Bm": rng.uniform(0.5, 1.2, (4, 3)).astype(np.float32)}


def scan_in_loop(rng):
    """Loop(M=3) { c = Scan(v, X) { s + x_t * k } where k (the loop's) scales by the iteration }."""
    inner = helper.make_graph(
        [helper.make_node("Mul", ["x_t", "k"], ["xk"]), helper.make_node("Add", ["s_in", "xk"], ["s_out"])],
        "inner", [vi("s_in", F, [4]), vi("x_t", F, [4])], [vi("s_out", F, [4])])
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F), const("one", np.float32(1.0)),
         helper.make_node("Add", ["fi", "one"], ["k"]),
         helper.make_node("Scan", ["v_in", "X"], ["v_out"], body=inner, num_scan_inputs=1),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, [4])],
        [vi("cond_out", B, []), vi("v_out", F, [4])])
    m = model([helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body)],
              [vi("v0", F, [4]), vi("X", F, [5, 4]), vi("M", I64, [])], [vi("v", F, None)])
    return m, {"v0": rng.uniform(-1, 1, (4,)).astype(np.float32), "X": rng.uniform(-1, 1, (5, 4)).astype(np.float32),
               "M": np.array(3, np.int64)}


def scan8(rng, lengths):
    """Scan-8 (batched): states [B, 3], scan input [B, 4, 3] reversed within each item's length; running sums and
    products as scan outputs [B, 4, 3] (zero past an item's length)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Mul", ["s_out", "x_t"], ["p"])],
        "body", [vi("s_in", F, [3]), vi("x_t", F, [3])], [vi("s_out", F, [3]), vi("p", F, [3])])
    inputs = ["lens" if lengths else "", "s0", "X"]
    m = model([helper.make_node("Scan", inputs, ["s", "P"], body=body, num_scan_inputs=1, directions=[1])],
              ([vi("lens", I64, [3])] if lengths else []) + [vi("s0", F, [3, 3]), vi("X", F, [3, 4, 3])],
              [vi("s", F, None), vi("P", F, None)], opset=8)
    feeds = {"s0": rng.uniform(-1, 1, (3, 3)).astype(np.float32), "X": rng.uniform(-1, 1, (3, 4, 3)).astype(np.float32)}
    if lengths:
        feeds["lens"] = np.array([4, 2, 1], np.int64)
    return m, feeds


def seq_loop_append(rng):
    """The graph torch.jit.script writes for `for xt in x.unbind(1): h = tanh(xt W + h); outs.append(h)`:
    SplitToSequence(x, split=1, keepdims=0), a Loop over its length whose body reads SequenceAt(steps, i) and appends h
    to the list it carries; then torch.stack(outs, 1), torch.cat(outs, -1), outs[-1] and len(outs)."""
    W = rng.uniform(-0.5, 0.5, (4, 4)).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("SequenceAt", ["steps", "i"], ["xt"]), helper.make_node("MatMul", ["xt", "W"], ["p"]),
         helper.make_node("Add", ["p", "h"], ["a"]), helper.make_node("Tanh", ["a"], ["h_out"]),
         helper.make_node("SequenceInsert", ["outs", "h_out"], ["outs_out"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body", [vi("i", I64, []), vi("cond", B, []), vi("h", F, [3, 4]),
                 helper.make_tensor_sequence_value_info("outs", F, None)],
        [vi("cond_out", B, []), vi("h_out", F, [3, 4]), helper.make_tensor_sequence_value_info("outs_out", F, None)])
    nodes = [const("one", np.array(1, np.int64)), const("minus1", np.array(-1, np.int64)),
             const("h0", np.zeros((3, 4), np.float32)),
             helper.make_node("SplitToSequence", ["x", "one"], ["steps"], axis=1, keepdims=0),
             helper.make_node("SequenceLength", ["steps"], ["T"]),
             helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
             helper.make_node("Loop", ["T", "", "h0", "empty"], ["hT", "outs"], body=body),
             helper.make_node("ConcatFromSequence", ["outs"], ["stacked"], axis=1, new_axis=1),
             helper.make_node("ConcatFromSequence", ["outs"], ["cat"], axis=-1),
             helper.make_node("SequenceAt", ["outs", "minus1"], ["last"]),
             helper.make_node("SequenceLength", ["outs"], ["n"])]
    m = model(nodes, [vi("x", F, [3, 5, 4])], [vi("hT", F), vi("stacked", F), vi("cat", F), vi("last", F),
                                               vi("n", I64)], [numpy_helper.from_array(W, "W")])
    return m, {"x": rng.uniform(-1, 1, (3, 5, 4)).astype(np.float32)}


def seq_loop_two_lists(rng):
    """A Loop carrying a list, a tensor and a second list, with a scan output of its own: both lists become scan
    outputs after it (the states and outputs renumbered); the first list is stacked on axis -1, the second read at
    -2 and counted."""
    seq = helper.make_tensor_sequence_value_info
    body = helper.make_graph(
        [helper.make_node("Gather", ["x", "i"], ["xt"], axis=0), helper.make_node("Add", ["h", "xt"], ["a"]),
         helper.make_node("Sin", ["a"], ["h_out"]), helper.make_node("SequenceInsert", ["l1", "h_out"], ["l1_out"]),
         helper.make_node("SequenceInsert", ["l2", "xt"], ["l2_out"]),
         helper.make_node("Mul", ["h_out", "two"], ["y"]), helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body", [vi("i", I64, []), vi("cond", B, []), seq("l1", F, None), vi("h", F, [2, 3]), seq("l2", F, None)],
        [vi("cond_out", B, []), seq("l1_out", F, None), vi("h_out", F, [2, 3]), seq("l2_out", F, None),
         vi("y", F, [2, 3])])
    nodes = [const("M", np.array(4, np.int64)), const("two", np.array(2.0, np.float32)),
             const("minus2", np.array(-2, np.int64)), const("h0", np.zeros((2, 3), np.float32)),
             helper.make_node("SequenceEmpty", [], ["e1"], dtype=F), helper.make_node("SequenceEmpty", [], ["e2"]),
             helper.make_node("Loop", ["M", "", "e1", "h0", "e2"], ["l1", "hT", "l2", "Y"], body=body),
             helper.make_node("ConcatFromSequence", ["l1"], ["s1"], axis=-1, new_axis=1),
             helper.make_node("SequenceAt", ["l2", "minus2"], ["x2"]),
             helper.make_node("SequenceLength", ["l2"], ["n2"])]
    m = model(nodes, [vi("x", F, [4, 2, 3])], [vi("hT", F), vi("Y", F), vi("s1", F), vi("x2", F), vi("n2", I64)])
    return m, {"x": rng.uniform(-1, 1, (4, 2, 3)).astype(np.float32)}


def seq_list_positions(rng):
    """A list of three [2, 3] tensors: SequenceInsert, SequenceErase and SequenceAt at positions the inputs give
    (negative ones), SequenceLength, and ConcatFromSequence of the result along axis 1."""
    nodes = [helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s0"]),
             helper.make_node("SequenceInsert", ["s0", "d", "pi"], ["s1"]),
             helper.make_node("SequenceErase", ["s1", "pe"], ["s2"]),
             helper.make_node("SequenceAt", ["s2", "pa"], ["at"]),
             helper.make_node("SequenceLength", ["s2"], ["n"]),
             helper.make_node("ConcatFromSequence", ["s2"], ["cat"], axis=1)]
    feeds = {k: rng.uniform(-1, 1, (2, 3)).astype(np.float32) for k in "abcd"}
    feeds.update(pi=np.array(-2, np.int64), pe=np.array(0, np.int64), pa=np.array(-1, np.int64))
    m = model(nodes, [vi(k, F, [2, 3]) for k in "abcd"] + [vi(k, I64, []) for k in ("pi", "pe", "pa")],
              [vi("at", F), vi("n", I64), vi("cat", F)])
    return m, feeds


def seq_splits(rng):
    """torch.split(x, 3, 1) (SplitToSequence with a scalar split: chunks 3, 3, 1), chunk p and the last chunk, its
    length and the chunks concatenated again; and a split of lengths given at run time."""
    nodes = [const("three", np.array(3, np.int64)), const("minus1", np.array(-1, np.int64)),
             helper.make_node("SplitToSequence", ["x", "three"], ["chunks"], axis=1),
             helper.make_node("SequenceAt", ["chunks", "p"], ["chunk"]),
             helper.make_node("SequenceAt", ["chunks", "minus1"], ["last"]),
             helper.make_node("SequenceLength", ["chunks"], ["n"]),
             helper.make_node("ConcatFromSequence", ["chunks"], ["again"], axis=1),
             helper.make_node("SplitToSequence", ["x", "lengths"], ["parts"], axis=-1),
             helper.make_node("SequenceAt", ["parts", "p"], ["part"]),
             helper.make_node("SequenceLength", ["parts"], ["nparts"])]
    m = model(nodes, [vi("x", F, [2, 7]), vi("p", I64, []), vi("lengths", I64, [3])],
              [vi(k, F) for k in ("chunk", "last")] + [vi("n", I64), vi("again", F), vi("part", F), vi("nparts", I64)])
    return m, {"x": rng.uniform(-1, 1, (2, 7)).astype(np.float32), "p": np.array(1, np.int64),
               "lengths": np.array([2, 4, 1], np.int64)}


CASES = [
    ("loop_with_if", loop_with_if),
    ("if_shapes_then", lambda rng: if_shapes(rng, True)),
    ("if_shapes_else", lambda rng: if_shapes(rng, False)),
    ("loop_early_exit", loop_early_exit),
    ("loop_grows", loop_grows),
    ("loop_unbounded", loop_unbounded),
    ("scan_rnn", scan_rnn),
    ("scan_axes", scan_axes),
    ("scan_in_loop", scan_in_loop),
    ("scan8_reverse", lambda rng: scan8(rng, False)),
    ("scan8_lengths", lambda rng: scan8(rng, True)),
    ("seq_loop_append", seq_loop_append),
    ("seq_loop_two_lists", seq_loop_two_lists),
    ("seq_list_positions", seq_list_positions),
    ("seq_splits", seq_splits),
]


def main():
    def make(k, build):
        def build_case():
            m, feeds = build(np.random.default_rng(2000 + k))
            want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
            return m, feeds, want
        return build_case

    cases = [(name, make(k, build)) for k, (name, build) in enumerate(CASES)]
    return compare_main("control_flow_ort", __doc__.splitlines()[0], cases, ATOL, RTOL, threads=2)


if __name__ == "__main__":
    sys.exit(main())
