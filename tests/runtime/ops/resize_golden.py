#!/usr/bin/env python3
"""Writes the golden cases of tests/runtime/ops/resize_test.cc (the kResizeGolden table) to stdout.

Expected outputs come from ONNX's reference implementation (onnx.reference, onnx >= 1.16 for Resize-19):
    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install onnx numpy
    /tmp/venv/bin/python tests/runtime/ops/resize_golden.py > /tmp/golden.inc
then paste the printed entries into kResizeGolden.
"""
import numpy as np
from onnx import helper, TensorProto
from onnx.reference import ReferenceEvaluator


def data(dims):
    n = int(np.prod(dims))
    return ((np.arange(n) * 7 % 11) - 3.5).astype(np.float32).reshape(dims) * np.float32(0.5)


# name, opset, attributes, input dims, scales, sizes, roi
CASES = [
    ("nearest_floor_asymmetric", 13, dict(mode="nearest", nearest_mode="floor",
                                          coordinate_transformation_mode="asymmetric"), [1, 1, 4, 5], [1, 1, 1.7, 0.6], None, None),
    ("nearest_ceil_half_pixel", 13, dict(mode="nearest", nearest_mode="ceil"), [1, 1, 4, 5], [1, 1, 1.7, 0.6], None, None),
    ("nearest_prefer_ceil_align_corners", 13, dict(mode="nearest", nearest_mode="round_prefer_ceil",
                                                   coordinate_transformation_mode="align_corners"), [1, 1, 4, 5], None, [1, 1, 7, 3], None),
    ("nearest_prefer_floor_half_pixel", 13, dict(mode="nearest"), [1, 1, 4, 5], [1, 1, 0.5, 1.5], None, None),
    ("linear_align_corners_sizes", 13, dict(mode="linear", coordinate_transformation_mode="align_corners"), [1, 1, 4, 5], None, [1, 1, 3, 7], None),
    ("linear_pytorch_half_pixel_to_one", 13, dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"), [1, 1, 4, 5], None, [1, 1, 1, 3], None),
    ("cubic_exclude_outside", 13, dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1), [1, 1, 4, 5], [1, 1, 0.8, 1.6], None, None),
    ("cubic_asymmetric", 11, dict(mode="cubic", coordinate_transformation_mode="asymmetric"), [1, 1, 4, 5], [1, 1, 1.5, 0.75], None, None),
    ("linear_antialias_down", 18, dict(mode="linear", antialias=1), [1, 1, 4, 5], None, [1, 1, 2, 3], None),
    ("cubic_antialias_down", 18, dict(mode="cubic", antialias=1), [1, 1, 4, 5], [1, 1, 0.5, 0.6], None, None),
    ("linear_tf_crop_and_resize", 13, dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
                                           extrapolation_value=10.0), [1, 1, 4, 5], None, [1, 1, 3, 3], [0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7]),
    ("nearest_tf_crop_and_resize", 13, dict(mode="nearest", coordinate_transformation_mode="tf_crop_and_resize",
                                            extrapolation_value=-1.0), [1, 1, 4, 5], None, [1, 1, 3, 4], [0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3]),
    ("linear_axes_not_larger", 18, dict(mode="linear", axes=[3, 2], keep_aspect_ratio_policy="not_larger"), [1, 1, 4, 5], None, [7, 3], None),
    ("nearest_axes_not_smaller", 18, dict(mode="nearest", axes=[2, 3], keep_aspect_ratio_policy="not_smaller"), [1, 1, 4, 5], None, [7, 3], None),
    ("linear_half_pixel_symmetric", 19, dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric"), [1, 1, 4, 5], [1, 1, 1.3, 0.7], None, None),
    ("cubic_half_pixel_symmetric", 19, dict(mode="cubic", coordinate_transformation_mode="half_pixel_symmetric"), [1, 1, 4, 5], [1, 1, 2.6, 0.7], None, None),
    ("trilinear_asymmetric", 13, dict(mode="linear", coordinate_transformation_mode="asymmetric"), [1, 3, 4, 2], [1, 1.5, 0.5, 2], None, None),
    ("linear_axes_scales", 18, dict(mode="linear", axes=[2]), [2, 3, 4], [1.75], None, None),
]


def run(opset, attrs, dims, scales, sizes, roi):
    x = data(dims)
    inputs = ["X", "roi" if roi is not None else "", "scales" if scales is not None else "", "sizes" if sizes is not None else ""]
    while inputs and inputs[-1] == "":
        inputs.pop()
    node = helper.make_node("Resize", inputs, ["Y"], **attrs)
    inits = []
    if roi is not None:
        inits.append(helper.make_tensor("roi", TensorProto.FLOAT, [len(roi)], roi))
    if scales is not None:
        inits.append(helper.make_tensor("scales", TensorProto.FLOAT, [len(scales)], scales))
    if sizes is not None:
        inits.append(helper.make_tensor("sizes", TensorProto.INT64, [len(sizes)], sizes))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, {"X": x})[0]


def cpp_list(v, fmt="{}"):
    return "{" + ", ".join(fmt.format(e) for e in v) + "}"


for name, opset, attrs, dims, scales, sizes, roi in CASES:
    y = run(opset, attrs, dims, scales, sizes, roi)
    a = attrs
    print(f'    {{"{name}", {opset}, "{a.get("mode", "nearest")}", "{a.get("coordinate_transformation_mode", "half_pixel")}", '
          f'"{a.get("nearest_mode", "round_prefer_floor")}", {a.get("cubic_coeff_a", -0.75)}, {a.get("exclude_outside", 0)}, '
          f'{a.get("antialias", 0)}, {a.get("extrapolation_value", 0.0)}, "{a.get("keep_aspect_ratio_policy", "stretch")}",')
    print(f'     {cpp_list(a.get("axes", []))}, {cpp_list(dims)}, {cpp_list(scales or [], "{:.9g}")}, '
          f'{cpp_list(sizes or [])}, {cpp_list(roi or [], "{:.9g}")}, {cpp_list(y.shape)},')
    print(f'     {cpp_list(y.ravel().tolist(), "{:.7g}")}}},')
