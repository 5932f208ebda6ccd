#!/usr/bin/env python3
"""`onnxamp train --log-dir` read back by TensorBoard: every scalar of the event file against DIR/metrics.jsonl.

  train    models/digits_mlp.onnx on 160 seeded random samples (64 features, labels 0..9), FP16 AMP (loss scaling),
           --clip-norm (grad norms), a cosine schedule with warm-up (a changing LR), 40 steps, --val-split 0.25,
           --eval-every 10, --log-format jsonl, --log-dir DIR;
  read     DIR with PyPI tensorboard's EventAccumulator (the loader `tensorboard --logdir DIR` uses);
  check    the event file's name and file version; the tags; for every record of DIR/metrics.jsonl, the event at its
           step holds each value as float32 (non-finite where the JSON has null), and nothing else is there; wall
           times agree to 1 s; the JSON lines on stdout are the every-5th-step, eval and done records of the file
           (samples/s aside, which covers the steps since the previous line);
  kill     a long run killed with SIGKILL after a few steps: the event file still parses and holds every step that
           metrics.jsonl holds, but for at most the last.

Usage: .venv/bin/python tests/peer/train_logs.py [--onnxamp BIN] [--keep DIR]
Exit status: 0 passed or skipped (tensorboard or numpy missing; the output says why), 1 a check failed, 2 usage.
"""
import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STEP_TAGS = {  # JSON key -> TensorBoard tag
    "loss": "train/loss",
    "loss_scale": "train/loss_scale",
    "lr": "train/lr",
    "grad_norm": "train/grad_norm",
    "skipped_steps": "train/skipped_steps",
    "samples_per_second": "train/samples_per_second",
}
EVAL_TAGS = {"val_loss": "val/loss", "val_accuracy": "val/accuracy"}


class CheckFailed(Exception):
    pass


def check(cond, message):
    if not cond:
        raise CheckFailed(message)


def make_data(path):
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 16, size=(160, 64)).astype(np.float32)
    y = rng.integers(0, 10, size=160).astype(np.int64)
    np.savez(path, input=x, label=y)


def train_cmd(onnxamp, data, out, logdir, steps):
    return [onnxamp, "train", os.path.join(ROOT, "models", "digits_mlp.onnx"), "--data", data, "--labels", "label",
            "--loss", "ce", "--amp", "fp16", "--optimizer", "adamw", "--lr", "1e-3", "--schedule", "cosine",
            "--warmup", "3", "--clip-norm", "5", "--batch-size", "16", "--steps", str(steps), "--val-split", "0.25",
            "--eval-every", "10", "--log-every", "5", "--log-format", "jsonl", "--log-dir", logdir, "--threads", "1",
            "-o", out]


def load_scalars(logdir):
    from tensorboard.backend.event_processing import event_accumulator
    acc = event_accumulator.EventAccumulator(logdir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return acc, {tag: acc.Scalars(tag) for tag in acc.Tags()["scalars"]}


def same_float32(json_value, tb_value):
    import numpy as np
    if json_value is None:
        return not math.isfinite(tb_value)
    return float(np.float32(json_value)) == tb_value or (math.isnan(json_value) and math.isnan(tb_value))


def event_files(logdir):
    return sorted(f for f in os.listdir(logdir) if "tfevents" in f)


def check_run(onnxamp, work):
    data = os.path.join(work, "data.npz")
    make_data(data)
    logdir = os.path.join(work, "logs")
    p = subprocess.run(train_cmd(onnxamp, data, os.path.join(work, "out.onnx"), logdir, 40), capture_output=True,
                       text=True)
    check(p.returncode == 0, f"onnxamp train failed (exit {p.returncode}):\n{p.stderr}")
    files = event_files(logdir)
    check(len(files) == 1 and files[0].startswith("events.out.tfevents."), f"event files in {logdir}: {files}")
    records = [json.loads(line) for line in open(os.path.join(logdir, "metrics.jsonl"))]
    steps = [r for r in records if r["type"] == "step"]
    evals = [r for r in records if r["type"] == "eval"]
    check([r["step"] for r in steps] == list(range(1, 41)), "metrics.jsonl: not one record per step 1..40")
    check([r["step"] for r in evals] == [10, 20, 30, 40], f"metrics.jsonl: eval steps {[r['step'] for r in evals]}")
    check(records[-1]["type"] == "done" and records[-1]["steps"] == 40, f"metrics.jsonl: last record {records[-1]}")
    check(any(r["lr"] != steps[0]["lr"] for r in steps), "the LR never changed (cosine with warm-up)")
    check(all("grad_norm" in r for r in steps if not r["skipped"]), "a taken step without grad_norm (--clip-norm)")

    acc, scalars = load_scalars(logdir)
    from tensorboard.backend.event_processing import event_file_loader
    raw = list(event_file_loader.EventFileLoader(os.path.join(logdir, files[0])).Load())
    check(raw[0].file_version == "brain.Event:2" and acc.file_version == 2.0,
          f"file_version {raw[0].file_version!r} ({acc.file_version!r})")
    check(len(raw) == 1 + len(steps) + len(evals), f"{len(raw)} events for {len(steps)} steps and {len(evals)} evals")
    expected_tags = {STEP_TAGS[k] for r in steps for k in STEP_TAGS if k in r}
    expected_tags |= {EVAL_TAGS[k] for r in evals for k in EVAL_TAGS if k in r}
    check(set(scalars) == expected_tags, f"tags {sorted(scalars)}, expected {sorted(expected_tags)}")
    compared = 0
    for kind, rows, tags in (("step", steps, STEP_TAGS), ("eval", evals, EVAL_TAGS)):
        for key, tag in tags.items():
            want = {r["step"]: r for r in rows if key in r}
            got = scalars.get(tag, [])
            check(sorted(e.step for e in got) == sorted(want), f"{tag}: steps {[e.step for e in got]} != {list(want)}")
            for e in got:
                r = want[e.step]
                check(same_float32(r[key], e.value), f"{tag} at step {e.step}: {e.value} != float32({r[key]})")
                check(abs(e.wall_time - r["wall_time"]) < 1.0, f"{tag} at step {e.step}: wall time {e.wall_time}")
                compared += 1

    console = [json.loads(line) for line in p.stdout.splitlines()]
    order = [(r["type"], r.get("step")) for r in console]
    check(order == [("step", 5), ("step", 10), ("eval", 10), ("step", 15), ("step", 20), ("eval", 20), ("step", 25),
                    ("step", 30), ("eval", 30), ("step", 35), ("step", 40), ("eval", 40), ("done", None)],
          f"stdout records: {order}")
    by_step = {r["step"]: r for r in steps}
    evals_by_step = {r["step"]: r for r in evals}
    for r in console:
        if r["type"] == "step":
            f = by_step[r["step"]]
            for k in r:
                if k not in ("samples_per_second", "wall_time"):
                    check(r[k] == f[k], f"stdout step {r['step']}: {k} {r[k]} != {f[k]} in metrics.jsonl")
        elif r["type"] == "eval":
            f = evals_by_step[r["step"]]
            check({k: v for k, v in r.items() if k != "wall_time"} == {k: v for k, v in f.items() if k != "wall_time"},
                  f"stdout eval {r} != {f}")
        else:
            check(r == records[-1], f"stdout done {r} != {records[-1]}")
    return compared, len(steps), len(evals), records[-1]


def check_killed_run(onnxamp, work):
    data = os.path.join(work, "data.npz")
    logdir = os.path.join(work, "killed")
    proc = subprocess.Popen(train_cmd(onnxamp, data, os.path.join(work, "killed.onnx"), logdir, 1000000),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics = os.path.join(logdir, "metrics.jsonl")
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            if os.path.exists(metrics) and sum(1 for _ in open(metrics)) >= 8:
                break
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    lines = [line for line in open(metrics) if line.endswith("\n")]
    json_steps = [json.loads(line)["step"] for line in lines if json.loads(line)["type"] == "step"]
    check(len(json_steps) >= 8, f"killed run: only {len(json_steps)} steps in metrics.jsonl after 60 s")
    _, scalars = load_scalars(logdir)
    tb_steps = sorted(e.step for e in scalars.get("train/loss", []))
    check(tb_steps[:len(json_steps) - 1] == json_steps[:len(json_steps) - 1] and len(tb_steps) >= len(json_steps) - 1,
          f"killed run: event file steps {tb_steps}, metrics.jsonl steps {json_steps}")
    return len(tb_steps)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--onnxamp", default=os.path.join(ROOT, os.environ.get("ONNXAMP_BUILD_DIR", "build"), "tools",
                                                      "onnxamp"))
    ap.add_argument("--keep", help="keep the data and logs in this folder instead of a temporary one")
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
        import tensorboard
        from tensorboard.backend.event_processing import event_accumulator  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e} (tests/peer/train_logs.py needs numpy and PyPI tensorboard; scripts/setup_python.sh)")
        return 0
    if not os.access(args.onnxamp, os.X_OK):
        print(f"no onnxamp binary at {args.onnxamp}", file=sys.stderr)
        return 2
    work = args.keep or tempfile.mkdtemp(prefix="onnxamp_train_logs_")
    os.makedirs(work, exist_ok=True)
    start = time.time()
    try:
        compared, n_steps, n_evals, done = check_run(args.onnxamp, work)
        killed_steps = check_killed_run(args.onnxamp, work)
    except CheckFailed as e:
        print(f"FAILED: {e}")
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"train logs: {compared} scalars of {n_steps} steps and {n_evals} evaluations equal in TensorBoard "
          f"{tensorboard.__version__} and metrics.jsonl ({done['skipped_steps']} skipped steps, final val loss "
          f"{done.get('val_loss')}); killed run: {killed_steps} steps readable; {time.time() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
