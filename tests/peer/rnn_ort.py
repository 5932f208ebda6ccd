#!/usr/bin/env python3
"""RNN, GRU and LSTM in onnxamp's runtime against ONNX Runtime, on the attributes the ONNX backend test suite leaves
out: reverse and bidirectional directions with sequence_lens shorter than X (and a length 0 row), layout 1, initial
states, LSTM peepholes, input_forget and clip, GRU's linear_before_reset both ways, and activation functions with
alpha and beta (HardSigmoid, LeakyRelu, ScaledTanh, Affine, Elu, Softsign, Softplus, ThresholdedRelu, Relu).

Each case is a one-node float32 model with seeded inputs; `onnxamp run` and ONNX Runtime (CPU) run it and every
output must agree within |got - ort| <= 1e-5 + 1e-4 * |ort| (both compute in float32, in different orders).

Usage: .venv/bin/python tests/peer/rnn_ort.py --onnxamp BIN [--filter REGEX] [--keep DIR] [--brief]
Exit status: 0 all agree, 1 a mismatch or failure, 2 usage error; 77 when numpy, onnx or onnxruntime is missing.
"""
import itertools
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper
    from run_compare import compare_main
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

ATOL, RTOL = 1e-5, 1e-4
S, B, I, H = 5, 4, 3, 4


def cases():
    """(name, op, attributes, inputs present) for every combination worth telling apart."""
    out = []
    acts = {
        "RNN": [["Relu"], ["LeakyRelu"], ["ThresholdedRelu"], ["Softplus"], ["Affine"]],
        "GRU": [["HardSigmoid", "Softsign"], ["Sigmoid", "ScaledTanh"], ["Sigmoid", "Elu"]],
        "LSTM": [["HardSigmoid", "Softsign", "Elu"], ["Sigmoid", "ScaledTanh", "Affine"], ["Sigmoid", "Relu", "Tanh"]],
    }
    for op in ("RNN", "GRU", "LSTM"):
        for direction, lengths, layout, initial in itertools.product(
                ("forward", "reverse", "bidirectional"), (False, True), (0, 1), (False, True)):
            attrs = {"direction": direction, "layout": layout}
            name = f"{op.lower()}_{direction}{'_lengths' if lengths else ''}_layout{layout}{'_initial' if initial else ''}"
            out.append((name, op, attrs, {"lengths": lengths, "initial": initial, "peepholes": op == "LSTM"}))
        if op == "GRU":
            for direction in ("forward", "bidirectional"):
                out.append((f"gru_lbr_{direction}", op, {"direction": direction, "linear_before_reset": 1},
                            {"lengths": True, "initial": True}))
        if op == "LSTM":
            out.append(("lstm_input_forget", op, {"input_forget": 1}, {"lengths": True, "initial": True,
                                                                           "peepholes": True}))
            out.append(("lstm_clip_bidirectional", op, {"clip": 0.6, "direction": "bidirectional"},
                        {"lengths": True, "initial": True, "peepholes": True}))
        out.append((f"{op.lower()}_clip", op, {"clip": 0.5}, {"initial": True}))
        # Without activation_alpha/beta: the defaults, where ONNX Runtime and the spec agree (LeakyRelu 0.01,
        # HardSigmoid 0.2/0.5, Elu 1; onnxamp takes the spec's for Affine and ThresholdedRelu, where ONNX Runtime
        # uses 0: docs/training.md).
        defaults = {"RNN": ["LeakyRelu"], "GRU": ["HardSigmoid", "Elu"], "LSTM": ["HardSigmoid", "Elu", "LeakyRelu"]}
        out.append((f"{op.lower()}_default_alphas", op, {"activations": defaults[op]}, {"initial": True}))
        for k, names in enumerate(acts[op]):
            n = len(names)
            attrs = {"activations": names * 2, "direction": "bidirectional",
                     "activation_alpha": [0.3, 1.3, 0.6, 0.9][:2 * n], "activation_beta": [0.4, 0.2, 0.1][:2 * n]}
            out.append((f"{op.lower()}_activations{k}", op, attrs, {"initial": True}))
    return out


def build(op, attrs, present, rng):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    layout = attrs.get("layout", 0)
    x = rng.uniform(-1.5, 1.5, (B, S, I) if layout else (S, B, I)).astype(np.float32)
    feeds = {
        "X": x,
        "W": rng.uniform(-0.7, 0.7, (dirs, gates * H, I)).astype(np.float32),
        "R": rng.uniform(-0.7, 0.7, (dirs, gates * H, H)).astype(np.float32),
        "B": rng.uniform(-0.5, 0.5, (dirs, 2 * gates * H)).astype(np.float32),
    }
    names = ["X", "W", "R", "B"]
    if present.get("lengths"):
        feeds["sequence_lens"] = np.array([S, 2, 0, 3][:B], dtype=np.int32)
        names.append("sequence_lens")
    else:
        names.append("")
    state = (B, dirs, H) if layout else (dirs, B, H)
    if present.get("initial"):
        feeds["initial_h"] = rng.uniform(-0.8, 0.8, state).astype(np.float32)
        names.append("initial_h")
    else:
        names.append("")
    if op == "LSTM":
        if present.get("initial"):
            feeds["initial_c"] = rng.uniform(-0.8, 0.8, state).astype(np.float32)
            names.append("initial_c")
        else:
            names.append("")
        if present.get("peepholes"):
            feeds["P"] = rng.uniform(-0.6, 0.6, (dirs, 3 * H)).astype(np.float32)
            names.append("P")
    while names and not names[-1]:
        names.pop()
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outputs, hidden_size=H, **attrs)
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "sequence_lens" else TensorProto.FLOAT,
                                            feeds[n].shape) for n in names if n]
    graph = helper.make_graph([node], "rnn", inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, [None] * (4 if o == "Y" else 3))
                               for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, feeds


def ort_outputs(op, attrs, present, model, feeds):
    """ONNX Runtime's outputs. Its CPU kernels refuse layout 1, so a layout-1 case runs as its layout-0 twin on
    transposed inputs, and the outputs are transposed back."""
    if attrs.get("layout", 0) == 0:
        return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    twin_attrs = dict(attrs, layout=0)
    twin, _ = build(op, twin_attrs, present, np.random.default_rng(0))
    twin_feeds = dict(feeds)
    twin_feeds["X"] = feeds["X"].transpose(1, 0, 2)
    for k in ("initial_h", "initial_c"):
        if k in feeds:
            twin_feeds[k] = feeds[k].transpose(1, 0, 2)
    got = ort.InferenceSession(twin.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, twin_feeds)
    return [got[0].transpose(2, 0, 1, 3)] + [g.transpose(1, 0, 2) for g in got[1:]]


def main():
    def make(k, op, attrs, present):
        def build_case():
            model, feeds = build(op, attrs, present, np.random.default_rng(1000 + k))
            onnx.checker.check_model(model)
            return model, feeds, ort_outputs(op, attrs, present, model, feeds)
        return build_case

    listed = [(name, make(k, op, attrs, present)) for k, (name, op, attrs, present) in enumerate(cases())]
    return compare_main("rnn_ort", __doc__.splitlines()[0], listed, ATOL, RTOL, threads=1)


if __name__ == "__main__":
    sys.exit(main())
