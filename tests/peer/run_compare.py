"""Runs a model with `onnxamp run` on saved inputs and compares its outputs with expected arrays (ONNX Runtime's):
the shared step of rnn_ort.py, control_flow_ort.py and more_ops_ort.py."""
import os
import subprocess

import numpy as np
import onnx
from onnx import numpy_helper


def run_and_compare(onnxamp, work, name, model, feeds, want, atol, rtol, threads=1):
    """Saves `model` and `feeds` under `work`, runs `onnxamp run`, and compares each output with `want` (same shape,
    |got - want| <= atol + rtol |want|). Returns (None, max abs difference) or (what is wrong, 0)."""
    path = os.path.join(work, name + ".onnx")
    onnx.save(model, path)
    npz = os.path.join(work, name + ".npz")
    np.savez(npz, **feeds)
    out_dir = os.path.join(work, name + "_out")
    os.makedirs(out_dir, exist_ok=True)
    run = subprocess.run([onnxamp, "run", path, "-i", npz, "--output-dir", out_dir, "--threads", str(threads)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        return f"onnxamp run: {run.stderr.strip()}", 0.0
    worst = 0.0
    for i, w in enumerate(want):
        t = onnx.TensorProto()
        with open(os.path.join(out_dir, f"output_{i}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        got = numpy_helper.to_array(t)
        if got.shape != w.shape:
            return f"output {i}: shape {got.shape}, ONNX Runtime {w.shape}", 0.0
        err = np.abs(got.astype(np.float64) - w)
        tol = atol + rtol * np.abs(w)
        worst = max(worst, float(np.max(err)) if err.size else 0.0)
        if not np.all(err <= tol):
            j = int(np.argmax(err - tol))
            return f"output {i} element {j}: {got.flat[j]} vs ONNX Runtime {w.flat[j]}", 0.0
    return None, worst


def compare_main(prog, description, cases, atol, rtol, threads):
    """The command line both scripts share: --onnxamp BIN [--filter REGEX] [--keep DIR] [--brief]. `cases` lists
    (name, make) where make() returns (model, feeds, ONNX Runtime's outputs). Returns the exit status."""
    import argparse
    import re
    import shutil
    import tempfile

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--onnxamp", required=True)
    ap.add_argument("--filter", default="")
    ap.add_argument("--keep")
    ap.add_argument("--brief", action="store_true", help="print failures and the summary only")
    args = ap.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix=prog + "_")
    os.makedirs(work, exist_ok=True)
    failures, ran, worst_all = 0, 0, 0.0
    try:
        for name, make in cases:
            if args.filter and not re.search(args.filter, name):
                continue
            model, feeds, want = make()
            bad, worst = run_and_compare(args.onnxamp, work, name, model, feeds, want, atol, rtol, threads)
            ran += 1
            if bad:
                print(f"FAIL {name}: {bad}")
                failures += 1
            else:
                worst_all = max(worst_all, worst)
                if not args.brief:
                    print(f"ok   {name}: max abs difference {worst:.2e}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{prog}: {ran - failures} of {ran} cases agree with ONNX Runtime (max abs difference {worst_all:.2e})")
    return 1 if failures or ran == 0 else 0
