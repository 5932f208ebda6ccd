#!/usr/bin/env python3
"""Every model `onnxamp train` exports, checked against ONNX Runtime: models/mlp.onnx, cnn.onnx, transformer.onnx and
digits_mlp.onnx are trained for a few steps on small seeded data, each trained model is exported with
`onnxamp export --precision fp32|fp16|bf16`, and every export

  - passes onnx.checker.check_model(full_check=True);
  - runs in ONNX Runtime (CPU provider) and in `onnxamp run` on the same inputs (a batch size the training did not
    use), and the outputs agree within the precision's tolerance (printed with the measured difference);
  - is also compared with the float32 reference (ONNX Runtime on the fp32 export), within the precision's tolerance
    against float32.

Where ONNX Runtime's CPU provider has no kernel for an op in the bfloat16 export (it has few bfloat16 kernels), the
session cannot be created: the output names the op and node as an expected limitation (`limitation: ...`), and the
bfloat16 export is still compared, as run by onnxamp, with the float32 reference. Any other ONNX Runtime failure is a
test failure.

  data   N_TRAIN samples per model (seeded): float inputs standard normal, integer inputs (token ids) below the
         embedding's size; labels the argmax of a fixed random projection ([batch, classes] outputs) or the previous
         token ([batch, seq, vocab], --class-axis -1, ignore_index at position 0); N_EVAL other samples to compare on;
  train  `onnxamp train MODEL --data train.npz --labels labels --loss ce --optimizer sgd --lr 0.05 --steps 3
         --batch-size 4 --no-shuffle --threads 1 -o trained.onnx`.

Usage: .venv/bin/python tests/peer/train_export_peer.py [--onnxamp BIN] [--models mlp,cnn,...] [--keep DIR]
Exit status: 0 passed or skipped (the output says which and why), 1 a check failed, 2 usage error.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
try:
    from train_data import Failure, make_data  # tests/peer/train_data.py (numpy, onnx)
except ImportError as e:
    print(f"skipped: {e} (run with the peers' virtual environment, .venv/bin/python)")
    sys.exit(0)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = ["mlp", "cnn", "transformer", "digits_mlp"]
PRECISIONS = ["fp32", "fp16", "bf16"]
N_TRAIN = 12
N_EVAL = 5
SEED = 0

# Tolerances: max |a - b| / max |reference| over each output.
PEER_TOL = {"fp32": 1e-5, "fp16": 5e-3, "bf16": 2e-2}  # onnxamp run vs ONNX Runtime, the same export
FP32_TOL = {"fp32": 1e-5, "fp16": 5e-3, "bf16": 3e-2}  # the export (onnxamp run) vs the fp32 reference

NO_KERNEL = re.compile(r"Could not find an implementation for (\S+?)\((\d+)\) node with name '([^']*)'")


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise Failure(f"{' '.join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd))} exited "
                      f"{p.returncode}: {last}")
    return p.stdout + p.stderr


def rel_diff(np, got, want):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise Failure(f"shapes differ: {got.shape} vs {want.shape}")
    if not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def onnxamp_outputs(onnx, numpy_helper, binary, model_path, inputs_npz, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    run([binary, "run", model_path, "--input", inputs_npz, "--output-dir", out_dir, "--threads", "1"])
    n = len(onnx.load(model_path, load_external_data=False).graph.output)
    return [numpy_helper.to_array(onnx.load_tensor(os.path.join(out_dir, f"output_{i}.pb"))) for i in range(n)]


def check_model(name, args, work, modules):
    """Trains, exports and checks one model; returns (lines, failures)."""
    onnx, numpy_helper, np, ort = modules
    model_path = os.path.join(ROOT, "models", f"{name}.onnx")
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    class_axis, train = make_data(model_path, N_TRAIN, np.random.default_rng(SEED),
                                  proj_rng=np.random.default_rng(SEED + 100))
    _, feeds = make_data(model_path, N_EVAL, np.random.default_rng(SEED + 1),
                         proj_rng=np.random.default_rng(SEED + 100), with_labels=False)
    train_npz, eval_npz = os.path.join(d, "train.npz"), os.path.join(d, "eval.npz")
    np.savez(train_npz, **train)
    np.savez(eval_npz, **feeds)
    trained = os.path.join(d, "trained.onnx")
    cmd = [args.onnxamp, "train", model_path, "--data", train_npz, "--labels", "labels", "--loss", "ce",
           "--optimizer", "sgd", "--lr", "0.05", "--steps", "3", "--batch-size", "4", "--no-shuffle", "--threads",
           "1", "-o", trained]
    if class_axis != 1:
        cmd += ["--class-axis", str(class_axis)]
    run(cmd)

    lines, failures = [], []
    reference = None  # ONNX Runtime on the fp32 export
    for precision in PRECISIONS:
        exported = os.path.join(d, f"{name}.{precision}.onnx")
        run([args.onnxamp, "export", trained, "--precision", precision, "-o", exported])
        what = f"{name} {precision}"
        try:
            onnx.checker.check_model(onnx.load(exported), full_check=True)
        except Exception as e:  # noqa: BLE001 - the checker raises several types
            failures.append(f"{what}: onnx.checker: {str(e).splitlines()[0]}")
            continue
        ours = onnxamp_outputs(onnx, numpy_helper, args.onnxamp, exported, eval_npz, os.path.join(d, precision))
        peer, limitation = None, None
        try:
            so = ort.SessionOptions()
            so.intra_op_num_threads = 1
            session = ort.InferenceSession(exported, so, providers=["CPUExecutionProvider"])
            peer = session.run(None, feeds)
        except Exception as e:  # noqa: BLE001 - onnxruntime's exceptions are not importable by a stable name
            m = NO_KERNEL.search(str(e))
            if precision != "bf16" or not m:
                failures.append(f"{what}: ONNX Runtime: {str(e).splitlines()[0]}")
                continue
            limitation = (f"ONNX Runtime's CPU provider has no bfloat16 kernel for {m.group(1)} (opset {m.group(2)}, "
                          f"node '{m.group(3)}')")
        if precision == "fp32":
            reference = peer
        parts = []
        for i, out in enumerate(ours):
            checks = []
            if peer is not None:
                checks.append(("ONNX Runtime", peer[i], PEER_TOL[precision]))
            if reference is not None and precision != "fp32":
                checks.append(("the fp32 reference", reference[i], FP32_TOL[precision]))
            if not checks:
                failures.append(f"{what}: output {i}: nothing to compare with (no fp32 reference)")
            seg = []
            for against, want, tol in checks:
                diff = rel_diff(np, out, want)
                seg.append(f"vs {against} {diff:.2e} (limit {tol:g})")
                if diff > tol:
                    failures.append(f"{what}: output {i} differs from {against} by {diff:.3e} (limit {tol:g})")
            parts.append(f"output {i} " + ", ".join(seg))
        lines.append(f"{what}: checker ok; " + "; ".join(parts))
        if limitation:
            lines.append(f"{what}: limitation (expected): {limitation}; compared onnxamp's run with the fp32 "
                         "reference only")
    return lines, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    build_dir = os.path.join(ROOT, os.environ.get("ONNXAMP_BUILD_DIR", "build"))
    ap.add_argument("--onnxamp", default=os.path.join(build_dir, "tools", "onnxamp"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--keep", help="write the data, trained models and exports here instead of a temporary folder")
    args = ap.parse_args()
    models = [m for m in args.models.split(",") if m]
    if not models or any(m not in MODELS for m in models):
        ap.error(f"--models from {','.join(MODELS)}")
    try:
        import numpy as np
        import onnx
        import onnxruntime as ort
        from onnx import numpy_helper
    except ImportError as e:
        print(f"skipped: {e} (run with the peers' virtual environment, .venv/bin/python)")
        return 0
    args.onnxamp = os.path.abspath(args.onnxamp)
    if not os.access(args.onnxamp, os.X_OK):
        print(f"FAIL: no onnxamp binary at {args.onnxamp} (build it, or pass --onnxamp)")
        return 1
    work = args.keep or tempfile.mkdtemp(prefix="onnxamp-export-peer-")
    start = time.monotonic()
    failures = []
    try:
        for name in models:
            try:
                lines, fails = check_model(name, args, work, (onnx, numpy_helper, np, ort))
            except Failure as e:
                lines, fails = [], [f"{name}: {e}"]
            for line in lines:
                print(line)
            failures += fails
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    seconds = time.monotonic() - start
    print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}; {len(models)} models x {len(PRECISIONS)} "
          f"precisions in {seconds:.1f} s")
    for f in failures:
        print(f"FAIL: {f}")
    if failures:
        return 1
    print("PASS: every export passes the checker and agrees with ONNX Runtime (or, where its CPU provider lacks a "
          "bfloat16 kernel, with the fp32 reference)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
