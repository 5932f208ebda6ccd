#!/usr/bin/env python3
"""The digits demo as a test: models/digits_mlp.onnx fine-tuned with FP16 AMP on the UCI handwritten digits, exported
as FP16 ONNX, and the export checked in onnxamp's runtime and in ONNX Runtime on the held-out 20%.

  data     scripts/get_digits.sh DATA_DIR (Debian's python3-sklearn copy of digits.csv.gz: 1797 rows of 64 features
           valued 0..16 and a label 0..9); when it cannot be had (no network, no apt-get), the test prints
           `skipped: ...` and exits 0;
  train    `onnxamp train models/digits_mlp.onnx --data digits.csv.gz --labels label --input-map input=features
           --loss ce --amp fp16 --optimizer adamw --lr 1e-3 --epochs 20 --batch-size 64 --val-split 0.2 --seed 0
           --export-precision fp16 --save-split DIR -o digits_mlp.fp16.trained.onnx` (the flags of scripts/demo.sh);
           the validation accuracy is read from its `done:` line, and --save-split writes the 359 held-out rows
           (Dataset::Split's, exactly) to DIR/val.npz;
  check    the export passes onnx.checker (full check) and stores its weights in float16; `onnxamp run --labels` and
           ONNX Runtime (CPU) score it on DIR/val.npz.

Asserts: training accuracy >= 95%; |ONNX Runtime - training| <= 0.5 and |onnxamp run - training| <= 0.5 percentage
points. Prints `digits: validation accuracy X% (onnxamp, FP16 AMP training), Y% (ONNX Runtime on the exported FP16
model); Z% (onnxamp run on the exported FP16 model)`.

Usage: .venv/bin/python tests/peer/train_digits.py [--onnxamp BIN] [--build-dir DIR] [--data-dir DIR] [--epochs N]
                                                    [--keep DIR]
       .venv/bin/python tests/peer/train_digits.py --ort-accuracy MODEL VAL.npz   (prints ONNX Runtime's accuracy in
                                                    percent on VAL.npz's 'input' and 'label' arrays; for demo.sh)
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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MIN_ACCURACY = 95.0  # percent, on the held-out 20%
MAX_DIFF = 0.5  # percentage points between the training run's evaluation and each runtime's on the export
VAL_SAMPLES = 359  # round(0.2 * 1797)


def train_flags(epochs):
    """The flags of scripts/demo.sh's training step (keep them in step)."""
    return ["--labels", "label", "--input-map", "input=features", "--loss", "ce", "--amp", "fp16", "--optimizer",
            "adamw", "--lr", "1e-3", "--epochs", str(epochs), "--batch-size", "64", "--val-split", "0.2", "--seed", "0",
            "--export-precision", "fp16", "--log-every", "100"]


def ort_accuracy(model, val_npz):
    """Top-1 accuracy (percent) of ONNX Runtime running `model` on val_npz's 'input', against its 'label'."""
    import numpy as np
    import onnxruntime as ort
    with np.load(val_npz) as d:
        x, y = d["input"], d["label"]
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    logits = session.run(None, {session.get_inputs()[0].name: x})[0]
    return 100.0 * float(np.mean(np.argmax(logits, axis=1) == y)), len(y)


def accuracy_in(text, what):
    m = re.search(r"accuracy ([0-9.]+)%", text)
    if not m:
        raise RuntimeError(f"no accuracy in the output of {what}:\n{text}")
    return float(m.group(1))


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {p.returncode}):\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--onnxamp", help="the onnxamp binary (default: <build-dir>/tools/onnxamp)")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, os.environ.get("ONNXAMP_BUILD_DIR", "build")))
    ap.add_argument("--data-dir", help="where scripts/get_digits.sh keeps the data (default: <build-dir>/data)")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--keep", help="write the split, the model and the logs here instead of a temporary folder")
    ap.add_argument("--ort-accuracy", nargs=2, metavar=("MODEL", "VAL_NPZ"))
    args = ap.parse_args()

    try:
        import numpy as np  # noqa: F401
        import onnx
        import onnxruntime  # noqa: F401
    except ImportError as e:
        print(f"skipped: the digits check needs numpy, onnx and onnxruntime in {sys.executable} ({e}); "
              "make .venv with scripts/setup_python.sh")
        return 0

    if args.ort_accuracy:
        acc, _ = ort_accuracy(*args.ort_accuracy)
        print(f"{acc:.6g}")
        return 0

    build_dir = os.path.abspath(args.build_dir)
    onnxamp = args.onnxamp or os.path.join(build_dir, "tools", "onnxamp")
    if not (os.path.isfile(onnxamp) and os.access(onnxamp, os.X_OK)):
        print(f"error: {onnxamp}: not an executable (build the onnxamp target or pass --onnxamp)", file=sys.stderr)
        return 2
    data_dir = args.data_dir or os.path.join(build_dir, "data")
    got = subprocess.run(["bash", os.path.join(ROOT, "scripts", "get_digits.sh"), data_dir], capture_output=True,
                         text=True)
    if got.returncode != 0:
        why = [line for line in got.stderr.splitlines() if line.startswith("error:")] or got.stderr.splitlines()[-1:]
        print(f"skipped: the digits data cannot be obtained: {why[0] if why else 'scripts/get_digits.sh failed'}")
        return 0
    data = got.stdout.strip().splitlines()[-1]

    work = args.keep or tempfile.mkdtemp(prefix="onnxamp_digits_")
    os.makedirs(work, exist_ok=True)
    try:
        start = time.monotonic()
        model = os.path.join(work, "digits_mlp.fp16.trained.onnx")
        split = os.path.join(work, "split")
        log = run([onnxamp, "train", os.path.join(ROOT, "models", "digits_mlp.onnx"), "--data", data] +
                  train_flags(args.epochs) + ["--save-split", split, "-o", model])
        done = [line for line in log.splitlines() if line.startswith("done:")]
        if not done:
            raise RuntimeError(f"onnxamp train printed no 'done:' line:\n{log}")
        trained = accuracy_in(done[-1], "onnxamp train's done: line")
        train_seconds = time.monotonic() - start
        val = os.path.join(split, "val.npz")

        failures = []
        m = onnx.load(model)
        onnx.checker.check_model(m, full_check=True)
        not_fp16 = [t.name for t in m.graph.initializer if t.data_type != onnx.TensorProto.FLOAT16]
        if not_fp16:
            failures.append(f"the export keeps initializers that are not float16: {', '.join(not_fp16)}")

        out_dir = os.path.join(work, "run")
        os.makedirs(out_dir, exist_ok=True)
        ours = accuracy_in(run([onnxamp, "run", model, "--input", f"input={val}", "--labels", f"label={val}",
                                "--output-dir", out_dir]), "onnxamp run --labels")
        theirs, n = ort_accuracy(model, val)
        if n != VAL_SAMPLES:
            failures.append(f"val.npz holds {n} samples, expected {VAL_SAMPLES}")
        if trained < MIN_ACCURACY:
            failures.append(f"validation accuracy {trained}% after training is below {MIN_ACCURACY}%")
        if abs(theirs - trained) > MAX_DIFF:
            failures.append(f"ONNX Runtime's {theirs:.6g}% on the export is more than {MAX_DIFF} points from "
                            f"training's {trained}%")
        if abs(ours - trained) > MAX_DIFF:
            failures.append(f"onnxamp run's {ours}% on the export is more than {MAX_DIFF} points from training's "
                            f"{trained}%")
        print(f"digits: validation accuracy {trained:.6g}% (onnxamp, FP16 AMP training), {theirs:.6g}% (ONNX Runtime "
              f"on the exported FP16 model); {ours:.6g}% (onnxamp run on the exported FP16 model); {n} held-out "
              f"samples, {args.epochs} epochs, training {train_seconds:.1f} s, total {time.monotonic() - start:.1f} s")
        for f in failures:
            print(f"FAIL digits: {f}")
        return 1 if failures else 0
    except (RuntimeError, onnx.checker.ValidationError) as e:
        print(f"FAIL digits: {e}")
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
