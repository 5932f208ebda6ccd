#!/usr/bin/env python3
"""Writes a float16 copy of an ONNX model: weights and I/O in fp16.

Every float32 initializer, Constant/ConstantOfShape tensor, graph input/output and value_info becomes float16,
and Cast nodes to float32 cast to float16 instead. No op is kept in float32 and no Cast is inserted: this is
the crude "all fp16" model the inference benchmark runs, a stand-in until `onnxamp convert` exists. Values out
of fp16's range become +-inf (the transformer's -1e9 causal mask becomes -inf, which Softmax handles).

Usage: make_fp16.py IN.onnx OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, numpy_helper


def _tensor_to_fp16(t):
    if t.data_type != TensorProto.FLOAT:
        return
    with np.errstate(over="ignore"):
        arr = numpy_helper.to_array(t).astype(np.float16)
    t.CopyFrom(numpy_helper.from_array(arr, t.name))


def _value_info_to_fp16(vi):
    if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type == TensorProto.FLOAT:
        vi.type.tensor_type.elem_type = TensorProto.FLOAT16


def graph_to_fp16(g):
    for t in g.initializer:
        _tensor_to_fp16(t)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        _value_info_to_fp16(vi)
    for n in g.node:
        for a in n.attribute:
            if a.type == AttributeProto.TENSOR:
                _tensor_to_fp16(a.t)
            elif a.type == AttributeProto.GRAPH:
                graph_to_fp16(a.g)
            elif a.type == AttributeProto.GRAPHS:
                for sub in a.graphs:
                    graph_to_fp16(sub)
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    model = onnx.load(argv[1])
    graph_to_fp16(model.graph)
    onnx.checker.check_model(model)
    onnx.save(model, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
