#!/usr/bin/env python3
"""Quantization, detection, normalization and other ops of onnxamp's runtime against ONNX Runtime, on cases the ONNX
backend test suite (ONNX 1.12's data) has none of: QuantizeLinear on halfway values and beyond the range, per axis,
blocked (opset 21), int16/uint16, float16 data and scales (opset 19); DequantizeLinear per axis, from int32, blocked;
a QDQ convolution network as quantization tools write them; DynamicQuantizeLinear; NonMaxSuppression over several
batches and classes in both box formats with and without a score threshold; RoiAlign at opsets 10 and 16 in avg and
max mode with rois partly outside the image, in float and double; MeanVarianceNormalization over the default and
other axes (no constant slice: there ONNX Runtime's E[x^2] - E[x]^2 gives NaN where onnxamp gives 0); LpNormalization
with p 1 and 2 on three axes with zero vectors; MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv (per
tensor, per column, per channel with groups, int32 bias); Unique flattened and along axes, sorted and in order of
first occurrence; Det on a batch holding a singular matrix; TfIdfVectorizer in every mode, weighted and not, over
unigrams to trigrams with skips, on rows and batches; BitShift on uint8, uint32 and uint64; DFT real and complex,
cut and zero-padded, onesided, inverse, at opsets 17 (axis attribute) and 20 (axis input); STFT with a Hann window and
with frame_length only; the three windows periodic and symmetric; MelWeightMatrix.

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


def matmul_integer(signed_b, per_column):
    def make(rng):
        a = rng.integers(0, 256, (2, 5, 7)).astype(np.uint8)
        bt = np.int8 if signed_b else np.uint8
        b = (rng.integers(-128, 128, (7, 4)) if signed_b else rng.integers(0, 256, (7, 4))).astype(bt)
        bz = (rng.integers(-5, 5, (4,)) if per_column else np.array(3)).astype(bt)
        inits = [("b", b), ("az", np.uint8(128)), ("bz", bz)]
        node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
        return with_ort(model([node], {"a": a}, ["y"], inits, opset=10), {"a": a})
    return make


def qlinear_matmul(rng):
    a = rng.integers(0, 256, (3, 6, 8)).astype(np.uint8)
    b = rng.integers(-128, 128, (8, 5)).astype(np.int8)
    inits = [("as", np.float32(0.02)), ("az", np.uint8(120)), ("b", b), ("bs", np.float32(0.005)),
             ("bz", np.int8(0)), ("ys", np.float32(0.07)), ("yz", np.uint8(130))]
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    return with_ort(model([node], {"a": a}, ["y"], inits, opset=10), {"a": a})


def conv_integer(rng):
    x = rng.integers(0, 256, (2, 3, 9, 8)).astype(np.uint8)
    w = rng.integers(0, 256, (4, 3, 3, 2)).astype(np.uint8)
    inits = [("w", w), ("xz", np.uint8(100)), ("wz", np.uint8(128))]
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 0, 1, 1], strides=[2, 1])
    return with_ort(model([node], {"x": x}, ["y"], inits, opset=10), {"x": x})


def qlinear_conv(per_channel, group):
    def make(rng):
        x = rng.integers(0, 256, (2, 4, 10, 10)).astype(np.uint8)
        w = rng.integers(-127, 128, (6, 4 // group, 3, 3)).astype(np.int8)
        ws = rng.uniform(0.002, 0.01, (6,) if per_channel else ()).astype(np.float32)
        inits = [("xs", np.float32(0.01)), ("xz", np.uint8(128)), ("w", w), ("ws", ws),
                 ("wz", np.zeros((6,) if per_channel else (), np.int8)), ("ys", np.float32(0.05)),
                 ("yz", np.uint8(64)), ("bias", rng.integers(-3000, 3000, (6,)).astype(np.int32))]
        node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"], ["y"],
                                pads=[1, 1, 1, 1], group=group)
        return with_ort(model([node], {"x": x}, ["y"], inits, opset=10), {"x": x})
    return make


def unique(axis, sorted_):
    def make(rng):
        x = rng.integers(0, 4, (4, 6, 2)).astype(np.float32)
        x[2] = x[0]  # repeated slices along axis 0
        x[:, 3] = x[:, 1]
        attrs = {"sorted": sorted_}
        if axis is not None:
            attrs["axis"] = axis
        node = helper.make_node("Unique", ["x"], ["y", "idx", "inv", "cnt"], **attrs)
        return with_ort(model([node], {"x": x}, ["y", "idx", "inv", "cnt"], opset=11), {"x": x})
    return make


def det(rng):
    x = rng.uniform(-2, 2, (3, 2, 5, 5)).astype(np.float32)
    x[0, 1, 4] = x[0, 1, 2]  # singular
    return with_ort(model([helper.make_node("Det", ["x"], ["y"])], {"x": x}, ["y"], opset=11), {"x": x})


def bitshift(direction, dtype):
    def make(rng):
        bits = np.dtype(dtype).itemsize * 8
        x = rng.integers(0, np.iinfo(dtype).max, (3, 4), dtype=dtype)
        y = rng.integers(0, bits, (4,)).astype(dtype)
        node = helper.make_node("BitShift", ["x", "y"], ["z"], direction=direction)
        return with_ort(model([node], {"x": x, "y": y}, ["z"], opset=11), {"x": x, "y": y})
    return make


def dft(opset, shape, axis, length, inverse, onesided):
    def make(rng):
        x = rng.uniform(-1, 1, shape).astype(np.float32)
        inputs, inits, attrs = ["x"], [], {"inverse": inverse, "onesided": onesided}
        if length is not None:
            inputs.append("len")
            inits.append(("len", np.array(length, np.int64)))
        elif opset >= 20:
            inputs.append("")
        if opset >= 20:
            inputs.append("axis")
            inits.append(("axis", np.array(axis, np.int64)))
        else:
            attrs["axis"] = axis
        node = helper.make_node("DFT", inputs, ["y"], **attrs)
        return with_ort(model([node], {"x": x}, ["y"], inits, opset=opset), {"x": x})
    return make


def stft(window, onesided):
    def make(rng):
        x = rng.uniform(-1, 1, (2, 64, 1)).astype(np.float32)
        inputs = ["x", "step"] + (["w"] if window else ["", "len"])
        inits = [("step", np.array(8, np.int64))]
        nodes = []
        if window:
            nodes.append(helper.make_node("HannWindow", ["wlen"], ["w"], periodic=1))
            inits.append(("wlen", np.array(16, np.int64)))
        else:
            inits.append(("len", np.array(16, np.int64)))
        nodes.append(helper.make_node("STFT", inputs, ["y"], onesided=onesided))
        return with_ort(model(nodes, {"x": x}, ["y"], inits, opset=17), {"x": x})
    return make


def windows(rng):
    inits = [("n", np.array(10, np.int64))]
    nodes = [helper.make_node(op, ["n"], [op.lower() + str(p)], periodic=p)
             for op in ("HannWindow", "HammingWindow", "BlackmanWindow") for p in (0, 1)]
    outs = [n.output[0] for n in nodes]
    x = np.zeros((1,), np.float32)
    nodes.append(helper.make_node("Identity", ["x"], ["xo"]))
    return with_ort(model(nodes, {"x": x}, outs + ["xo"], inits, opset=17), {"x": x})


def mel(rng):
    x = np.zeros((1,), np.float32)
    inits = [("m", np.array(20, np.int64)), ("d", np.array(512, np.int64)), ("r", np.array(16000, np.int64)),
             ("lo", np.array(20.0, np.float32)), ("hi", np.array(7600.0, np.float32))]
    nodes = [helper.make_node("MelWeightMatrix", ["m", "d", "r", "lo", "hi"], ["w"]),
             helper.make_node("Identity", ["x"], ["xo"])]
    return with_ort(model(nodes, {"x": x}, ["w", "xo"], inits, opset=17), {"x": x})


def tfidf(mode, min_gram, max_gram, skip, weighted, batched):
    def make(rng):
        # A pool of 4 unigrams, 3 bigrams and 2 trigrams over the tokens 0..5; the input draws from 0..6.
        pool = [1, 2, 3, 4, 1, 2, 2, 3, 4, 1, 1, 2, 3, 2, 3, 4]
        attrs = {"mode": mode, "min_gram_length": min_gram, "max_gram_length": max_gram, "max_skip_count": skip,
                 "ngram_counts": [0, 4, 10], "ngram_indexes": [8, 0, 1, 2, 3, 4, 5, 6, 7], "pool_int64s": pool}
        if weighted:
            attrs["weights"] = [float(w) for w in rng.uniform(0.5, 2.0, 9)]
        x = rng.integers(0, 7, (3, 12) if batched else (15,)).astype(np.int64)
        node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
        return with_ort(model([node], {"x": x}, ["y"], opset=9), {"x": x})
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
    ("matmul_integer_uint8_per_tensor", matmul_integer(False, False)),
    ("matmul_integer_int8_b_per_column", matmul_integer(True, True)), ("qlinear_matmul_batched", qlinear_matmul),
    ("conv_integer_strided_padded", conv_integer), ("qlinear_conv_per_tensor", qlinear_conv(False, 1)),
    ("qlinear_conv_per_channel_grouped", qlinear_conv(True, 2)),
    ("unique_flat_sorted", unique(None, 1)), ("unique_flat_first_occurrence", unique(None, 0)),
    ("unique_axis0_sorted", unique(0, 1)), ("unique_axis1_unsorted", unique(1, 0)), ("unique_axis_last", unique(-1, 1)),
    ("det_batched_with_singular", det),
    ("bitshift_left_uint8", bitshift("LEFT", np.uint8)), ("bitshift_right_uint32", bitshift("RIGHT", np.uint32)),
    ("bitshift_left_uint64", bitshift("LEFT", np.uint64)),
    ("dft17_real", dft(17, (2, 16, 1), 1, None, 0, 0)), ("dft17_complex_padded", dft(17, (2, 12, 2), 1, 16, 0, 0)),
    ("dft17_real_onesided_cut", dft(17, (3, 20, 1), 1, 15, 0, 1)),
    ("dft20_complex_inverse_axis", dft(20, (4, 6, 3, 2), -3, None, 1, 0)),
    ("dft20_real_onesided_axis2", dft(20, (2, 3, 10, 1), 2, None, 0, 1)),
    ("stft_hann_window", stft(True, 1)), ("stft_frame_length_twosided", stft(False, 0)),
    ("windows_periodic_and_symmetric", windows), ("mel_weight_matrix", mel),
    ("tfidf_tf_uni_to_tri_skip2_batched", tfidf("TF", 1, 3, 2, False, True)),
    ("tfidf_idf_weighted_bigrams_skip1", tfidf("IDF", 2, 2, 1, True, False)),
    ("tfidf_idf_unweighted_uni_bi", tfidf("IDF", 1, 2, 0, False, True)),
    ("tfidf_tfidf_weighted_bi_tri_skip3", tfidf("TFIDF", 2, 3, 3, True, True)),
    ("tfidf_tfidf_unweighted_unigrams", tfidf("TFIDF", 1, 1, 2, False, False)),
]


def main():
    rng_cases = []
    for i, (name, make) in enumerate(CASES):
        rng_cases.append((name, lambda make=make, i=i: make(np.random.default_rng(100 + i))))
    return compare_main("more_ops_ort", __doc__.splitlines()[0], rng_cases, ATOL, RTOL, threads=2)


if __name__ == "__main__":
    sys.exit(main())
