#!/usr/bin/env python3
"""Loads each reference model in ONNX Runtime, runs it on random inputs and checks the outputs are finite.

Usage: scripts/check_models_ort.py [MODEL.onnx ...]   (default: every models/*.onnx)

Also runs the current `onnx` package's checker (full_check, which includes strict shape inference) when
`onnx` is importable. Exits 0 without checking anything when onnxruntime is not importable, 1 when a model
fails.
"""
import glob
import os
import sys

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:  # optional peer: never needed to build or test onnxamp
    print(f"skipped: onnxruntime/numpy not importable ({e})")
    sys.exit(0)

try:
    import onnx
except ImportError:
    onnx = None

BATCH = 2
INT_HIGH = 16  # integer inputs (token ids) are drawn from [0, INT_HIGH): below every model's vocabulary size

NUMPY_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
}


def make_input(rng, arg):
    shape = [d if isinstance(d, int) else BATCH for d in arg.shape]
    dtype = NUMPY_TYPES[arg.type]
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, INT_HIGH, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def check(path):
    if onnx is not None:
        onnx.checker.check_model(onnx.load(path), full_check=True)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {arg.name: make_input(rng, arg) for arg in session.get_inputs()}
    outputs = session.run(None, feeds)
    ok = True
    parts = []
    for arg, value in zip(session.get_outputs(), outputs):
        finite = bool(np.isfinite(value).all())
        ok = ok and finite
        parts.append(f"{arg.name} {list(value.shape)} {value.dtype} finite={finite} "
                     f"mean={float(value.mean()):.6g} std={float(value.std()):.6g}")
    ins = ", ".join(f"{name} {list(v.shape)}" for name, v in feeds.items())
    print(f"{'ok  ' if ok else 'FAIL'} {os.path.basename(path)}: in {ins} -> {'; '.join(parts)}")
    return ok


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = argv[1:] or sorted(glob.glob(os.path.join(root, "models", "*.onnx")))
    if not paths:
        print("no models found")
        return 1
    print(f"onnxruntime {ort.__version__}" + (f", onnx {onnx.__version__}" if onnx is not None else ""))
    failed = 0
    for path in paths:
        try:
            if not check(path):
                failed += 1
        except Exception as e:  # report every model, then fail
            print(f"FAIL {os.path.basename(path)}: {type(e).__name__}: {e}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
