#!/usr/bin/env python3
"""QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, NonMaxSuppression, RoiAlign, MeanVarianceNormalization and
LpNormalization in onnxamp's runtime against ONNX Runtime, on cases the ONNX backend test suite (ONNX 1.12's data) has
none of: halfway values and
saturation, per-axis and blocked (opset 21) scales, int16/uint16 and int32, float16 data and scales (opset 19), a QDQ
convolution network as quantization tools write them, many boxes over several batches and classes in both box formats
with and without a score threshold, RoiAlign at opsets 10 and 16 in avg and max mode with rois partly outside the
image, in float and double; MeanVarianceNormalization over the default and other axes (no constant slice: there ONNX
Runtime's E[x^2] - E[x]^2 gives NaN where onnxamp gives 0), LpNormalization with p 1 and 2 on three axes with zero
vectors.

Each case is a model with seeded inputs; `onnxamp run` and ONNX Runtime (CPU) run it and every output must agree
within |got - ort| <= 1e-5 + 1e-4 * |ort| (integers: exactly) and have the same shape.

Usage: .venv/bin/python tests/peer/more_ops_ort.py --onnxamp BIN [--filter REGEX] [--keep DIR] [--brief]
Exit status: 0 all agree, 1 a mismatch or failure, 2 usage error; 77 when numpy, onnx or onnxruntime is missing.
"""
import sys

try:
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, ValueInfoProto, helper, numpy_helper
    from run_compare import compare_main
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

ATOL, RTOL = 1e-5, 1e-4


def vi(name, arr):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape))


def out(name):
    """An output without a declared type (ONNX Runtime infers it)."""
    v = ValueInfoProto()
    v.name = name
    return v


def model(nodes, feeds, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", [vi(k, v) for k, v in feeds.items()], [out(o) for o in outputs],
                              initializer=[numpy_helper.from_array(v, k) for k, v in initializers])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10 if opset >= 21 else 8
    return m


def with_ort(m, feeds):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return m, feeds, [np.asarray(o).astype(np.float64) for o in sess.run(None, feeds)]


def halfway_values(rng, shape, scale):
    """Values x / scale that fall on k + 0.5 (ties), well inside and beyond the int8 range, and arbitrary ones."""
    k = rng.integers(-300, 300, size=shape).astype(np.float32)
    x = (k + 0.5) * scale
    mask = rng.random(shape) < 0.5
    x[mask] = rng.uniform(-200 * scale, 200 * scale, size=int(mask.sum()))
    return x.astype(np.float32)


def q_per_tensor(rng):
    x = halfway_values(rng, (4, 9), 0.25)
    inits = [("s", np.float32(0.25)), ("z", np.uint8(128))]
    return with_ort(model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], {"x": x}, ["y"], inits,
                          opset=10), {"x": x})


def q_per_axis(rng):
    scale = np.array([0.1, 0.37, 2.0], np.float32)
    x = (rng.uniform(-60, 60, (2, 3, 5)) * scale[None, :, None]).astype(np.float32)
    inits = [("s", scale), ("z", np.array([0, -5, 17], np.int8))]
    return with_ort(model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)], {"x": x}, ["y"],
                          inits, opset=13), {"x": x})


def q_fp16(rng):
    x = halfway_values(rng, (3, 8), 0.5).astype(np.float16)
    inits = [("s", np.float16(0.5)), ("z", np.int8(-3))]
    return with_ort(model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], {"x": x}, ["y"], inits,
                          opset=19), {"x": x})


def q_blocked_int16(rng):
    scale = rng.uniform(0.001, 0.01, (2, 3, 4)).astype(np.float32)
    x = rng.uniform(-400, 400, (2, 5, 4)).astype(np.float32)
    zp = rng.integers(-100, 100, (2, 3, 4)).astype(np.int16)
    inits = [("s", scale), ("z", zp)]
    return with_ort(model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2)],
                          {"x": x}, ["y"], inits, opset=21), {"x": x})


def q_output_dtype(rng):
    x = rng.uniform(-3, 3, (4, 4)).astype(np.float32)
    inits = [("s", np.float32(0.001))]
    return with_ort(model([helper.make_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=TensorProto.UINT16)],
                          {"x": x}, ["y"], inits, opset=21), {"x": x})


def dq_per_axis(rng):
    x = rng.integers(-128, 128, (3, 4, 2)).astype(np.int8)
    inits = [("s", np.array([0.5, 0.01, 3.0, 1e-4], np.float32)), ("z", np.array([1, -2, 0, 127], np.int8))]
    return with_ort(model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=-2)], {"x": x}, ["y"],
                          inits, opset=13), {"x": x})


def dq_int32(rng):
    x = rng.integers(-2**20, 2**20, (5, 6)).astype(np.int32)
    inits = [("s", np.float32(0.0123))]
    return with_ort(model([helper.make_node("DequantizeLinear", ["x", "s"], ["y"])], {"x": x}, ["y"], inits,
                          opset=13), {"x": x})


def dq_blocked_uint16(rng):
    x = rng.integers(0, 65536, (3, 7)).astype(np.uint16)
    scale = rng.uniform(1e-4, 1e-3, (3, 3)).astype(np.float32)
    zp = rng.integers(0, 65536, (3, 3)).astype(np.uint16)
    inits = [("s", scale), ("z", zp)]
    return with_ort(model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=3)],
                          {"x": x}, ["y"], inits, opset=21), {"x": x})


def dq_fp16(rng):
    x = rng.integers(0, 256, (4, 5)).astype(np.uint8)
    inits = [("s", np.float16(0.0625)), ("z", np.uint8(100))]
    return with_ort(model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"])], {"x": x}, ["y"], inits,
                          opset=19), {"x": x})


def qdq_conv(rng):
    """A QDQ network as ONNX Runtime's quantizer writes one: activations uint8 per tensor, weights int8 per output
    channel, an int32 bias, Conv and Relu between DequantizeLinear and QuantizeLinear pairs."""
    x = rng.uniform(-1, 1, (2, 3, 10, 10)).astype(np.float32)
    w_scale = rng.uniform(0.002, 0.01, (8,)).astype(np.float32)
    wq = rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8)
    x_scale = np.float32(2.0 / 255)
    inits = [("x_s", x_scale), ("x_z", np.uint8(128)), ("wq", wq), ("w_s", w_scale),
             ("w_z", np.zeros(8, np.int8)), ("bq", rng.integers(-5000, 5000, (8,)).astype(np.int32)),
             ("b_s", (x_scale * w_scale).astype(np.float32)), ("y_s", np.float32(0.02)), ("y_z", np.uint8(0))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_s", "x_z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "x_s", "x_z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "w_s", "w_z"], ["wd"], axis=0),
             helper.make_node("DequantizeLinear", ["bq", "b_s"], ["bd"], axis=0),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "y_s", "y_z"], ["rq"]),
             helper.make_node("DequantizeLinear", ["rq", "y_s", "y_z"], ["y"])]
    return with_ort(model(nodes, {"x": x}, ["y", "rq"], inits, opset=13), {"x": x})


def dynamic_quantize(rng):
    x = rng.uniform(-3, 7, (6, 11)).astype(np.float32)
    return with_ort(model([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])], {"x": x},
                          ["y", "s", "z"], opset=11), {"x": x})


def boxes(rng, batches, n, center):
    c = rng.uniform(0, 100, (batches, n, 2))
    size = rng.uniform(5, 40, (batches, n, 2))
    if center:
        return np.concatenate([c, size], axis=2).astype(np.float32)
    lo, hi = c - size / 2, c + size / 2
    b = np.concatenate([lo, hi], axis=2)
    flip = rng.random((batches, n)) < 0.3  # the other diagonal
    b[flip] = b[flip][:, [2, 3, 0, 1]]
    return b.astype(np.float32)


def nms(center, threshold):
    def make(rng):
        b = boxes(rng, 2, 60, center)
        s = rng.uniform(0, 1, (2, 3, 60)).astype(np.float32)
        s[0, 1, 5] = s[0, 1, 6]  # a tie: the lower index first
        inputs = ["b", "s", "m", "iou"] + (["st"] if threshold else [])
        inits = [("m", np.array([12], np.int64)), ("iou", np.array([0.45], np.float32))]
        if threshold:
            inits.append(("st", np.array([0.3], np.float32)))
        node = helper.make_node("NonMaxSuppression", inputs, ["sel"], center_point_box=int(center))
        return with_ort(model([node], {"b": b, "s": s}, ["sel"], inits, opset=11), {"b": b, "s": s})
    return make


def roialign(opset, mode, ratio, dtype, **attrs):
    def make(rng):
        x = rng.uniform(-1, 1, (2, 4, 12, 15)).astype(dtype)
        rois = np.array([[1.3, 2.2, 9.7, 8.1], [-3.0, -2.5, 5.2, 4.4], [10.1, 6.6, 17.0, 13.9], [4.0, 4.0, 4.3, 4.2],
                         [0.0, 0.0, 14.9, 11.9]], dtype)
        idx = np.array([0, 1, 1, 0, 1], np.int64)
        node = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], mode=mode, output_height=3, output_width=4,
                                sampling_ratio=ratio, spatial_scale=0.8, **attrs)
        return with_ort(model([node], {"x": x}, ["y"], [("rois", rois), ("idx", idx)], opset=opset), {"x": x})
    return make


def mvn(opset, axes):
    def make(rng):
        x = rng.uniform(-3, 3, (2, 3, 4, 5)).astype(np.float32)
        attrs = {} if axes is None else {"axes": axes}
        node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], **attrs)
        return with_ort(model([node], {"x": x}, ["y"], opset=opset), {"x": x})
    return make


def lpnorm(p, axis):
    def make(rng):
        x = rng.uniform(-3, 3, (3, 4, 5)).astype(np.float32)
        x[1, :, :] = 0.0 if axis in (1, -2) else x[1, :, :]
        x[0, 0, :] = 0.0 if axis in (2, -1) else x[0, 0, :]  # a zero vector stays 0
        node = helper.make_node("LpNormalization", ["x"], ["y"], p=p, axis=axis)
        return with_ort(model([node], {"x": x}, ["y"], opset=17), {"x": x})
    return make


CASES = [
    ("quantize_per_tensor_ties_saturation", q_per_tensor), ("quantize_per_axis_int8", q_per_axis),
    ("quantize_fp16_opset19", q_fp16), ("quantize_blocked_int16_opset21", q_blocked_int16),
    ("quantize_output_dtype_uint16", q_output_dtype), ("dequantize_per_axis_negative_axis", dq_per_axis),
    ("dequantize_int32", dq_int32), ("dequantize_blocked_uint16", dq_blocked_uint16),
    ("dequantize_fp16_scale_opset19", dq_fp16), ("qdq_conv_network", qdq_conv),
    ("dynamic_quantize", dynamic_quantize),
    ("nms_corners_score_threshold", nms(False, True)), ("nms_centers_no_threshold", nms(True, False)),
    ("roialign10_avg", roialign(10, "avg", 0, np.float32)), ("roialign16_avg_half_pixel", roialign(16, "avg", 0, np.float32)),
    ("roialign16_avg_output_half_pixel_ratio2",
     roialign(16, "avg", 2, np.float32, coordinate_transformation_mode="output_half_pixel")),
    ("roialign16_max", roialign(16, "max", 0, np.float32)), ("roialign16_avg_double", roialign(16, "avg", 0, np.float64)),
    ("mvn9_default_axes", mvn(9, None)), ("mvn13_axes_1_3", mvn(13, [1, 3])), ("mvn13_negative_axes", mvn(13, [-1])),
    ("lpnorm_p1_axis1", lpnorm(1, 1)), ("lpnorm_p2_last_axis", lpnorm(2, -1)), ("lpnorm_p2_axis0", lpnorm(2, 0)),
]


def main():
    rng_cases = []
    for i, (name, make) in enumerate(CASES):
        rng_cases.append((name, lambda make=make, i=i: make(np.random.default_rng(100 + i))))
    return compare_main("more_ops_ort", __doc__.splitlines()[0], rng_cases, ATOL, RTOL, threads=2)


if __name__ == "__main__":
    sys.exit(main())
