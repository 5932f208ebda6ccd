"""Synthetic training data for the training peer tests (train_parity.py, train_export_peer.py): seeded inputs for a
model's data inputs and labels a model can learn. Imports numpy and onnx, which every peer environment has."""

import numpy as np
import onnx


class Failure(Exception):
    """A check failed; the message says which and why."""


def dims_of(value_info):
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in value_info.type.tensor_type.shape.dim]


def index_bound(graph, input_name):
    """The size of the axis an integer input indexes (Gather's data dim), or 16."""
    inits = {t.name: list(t.dims) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == input_name:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            if node.input[0] in inits:
                return inits[node.input[0]][axis]
    return 16


def make_data(model_path, n, rng, proj_rng=None, with_labels=True):
    """n samples of seeded inputs (float: standard normal; int64/int32: indices below the table they index) and
    labels: for [batch, classes] outputs the argmax of a fixed random projection (drawn from proj_rng, or rng) of the
    first input, for [batch, seq, vocab] outputs the previous token (-100 at position 0). Returns
    (class_axis, {array name: array}); the labels are "labels"."""
    g = onnx.load(model_path).graph
    init_names = {t.name for t in g.initializer}
    arrays = {}
    for vi in g.input:
        if vi.name in init_names:
            continue
        dims = [n if i == 0 else d for i, d in enumerate(dims_of(vi))]
        if any(not isinstance(d, int) for d in dims[1:]):
            raise Failure(f"{model_path}: input {vi.name} has symbolic dims beyond the batch: {dims}")
        elem = vi.type.tensor_type.elem_type
        if elem == onnx.TensorProto.FLOAT:
            arrays[vi.name] = rng.standard_normal(dims).astype(np.float32)
        elif elem in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
            dtype = np.int64 if elem == onnx.TensorProto.INT64 else np.int32
            arrays[vi.name] = rng.integers(0, index_bound(g, vi.name), size=dims).astype(dtype)
        else:
            raise Failure(f"{model_path}: input {vi.name} has element type {elem}")
    out = dims_of(g.output[0])
    first = arrays[next(iter(arrays))]
    if len(out) == 2:  # [batch, classes]
        class_axis = 1
        flat = first.reshape(n, -1).astype(np.float32)
        proj = (proj_rng or rng).standard_normal((flat.shape[1], out[1])).astype(np.float32)
        labels = np.argmax(flat @ proj, axis=1).astype(np.int64)
    elif len(out) == 3 and np.issubdtype(first.dtype, np.integer):  # [batch, seq, vocab]
        class_axis = -1
        labels = np.full(first.shape, -100, dtype=np.int64)
        labels[:, 1:] = first[:, :-1]
    else:
        raise Failure(f"{model_path}: output shape {out}: no label rule")
    if with_labels:
        arrays["labels"] = labels
    return class_axis, arrays
