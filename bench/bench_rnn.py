#!/usr/bin/python3
"""Training recurrent models on the CPU: `onnxamp train` vs PyTorch vs ONNX Runtime Training, on the same exported
model, initial weights, data and batches.

Models (PyTorch modules, seeded, exported by torch.onnx.export at opset 17 in training mode, no constant folding;
token ids -> Embedding -> recurrent layer(s) -> Linear, per-token logits [N, 10, T] so that every side's
cross-entropy takes the class axis 1):

  lstm      nn.LSTM(64, 128), T 32, batch 32;
  gru       nn.GRU(64, 128) (linear_before_reset, as PyTorch's GRU is), T 32, batch 32;
  lstm-bi   nn.LSTM(64, 128, num_layers=2, bidirectional=True), T 32, batch 32;
  loop      a tanh cell written as a Python loop over the T steps (h = tanh(Linear(e_t) + Linear(h))) and exported
            through torch.jit.script: an ONNX Loop whose body gathers the step's embeddings from the enclosing graph
            (onnxamp trains it through its Loop gradient); one label per sequence (the last step's), logits [N, 10];
  list      the same cell over `for e_t in e.unbind(1)`, each h appended to a Python list and the head applied to
            torch.stack(outs, 1): ONNX sequences (SplitToSequence, SequenceInsert in the Loop, ConcatFromSequence),
            which onnxamp lowers to tensors (docs/runtime.md, "Sequences"); the head on the mean over the steps, one
            label per sequence.

Sides, each in its own process (peak RSS is the VmHWM the child reports of itself; bench_training.run_child):

  onnxamp       `onnxamp train MODEL --data D.npz --labels labels --loss ce --optimizer sgd --lr 0.05 --no-shuffle
                --threads T --log-every 1 --log-format jsonl` (step time: Trainer::Step's wall time);
  onnxamp-bf16  the same with --amp bf16;
  torch         the module itself in PyTorch eager (Debian's python3-torch; nn.LSTM's CPU kernels), SGD, one
                CrossEntropyLoss, torch.set_num_threads(T);
  torch-pypi    the same in PyPI's PyTorch (.venv-torch, scripts/setup_torch_peer.sh: MKL and oneDNN); in the
                default sides when .venv-torch exists;
  ort           ONNX Runtime Training's on-device API (.venv-ort-training): artifacts from the exported model
                (its LSTMTraining/LSTMGrad, GRUTraining/GRUGrad ops), SGD. Where it cannot train a model (its
                LSTMGrad takes the forward direction only) the row says `fails` and a flag line says why.

Every side trains --warmup + --steps steps with SGD (lr 0.05) on batch i mod 10 of the data in file order; the
losses of the first 10 steps must agree with torch's within 1e-4 relative (flagged otherwise); the last --steps
steps are timed. Runs repeat --repeats times with the sides interleaved; the table shows medians and the ratio of
each side's steps/s to torch's and to ort's.

Usage: /usr/bin/python3 bench/bench_rnn.py [--build-dir DIR] [--models lstm,gru,lstm-bi] [--threads 2]
                                           [--sides onnxamp,onnxamp-bf16,torch,torch-pypi,ort] [--steps 20] [--warmup 5]
                                           [--repeats 3] [--markdown] [--keep DIR]
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True

import bench_training as bt  # noqa: E402  (run_child, the ONNX Runtime workers, SGD's learning rate)

MODELS = {  # name: (cell, layers, bidirectional)
    "lstm": ("LSTM", 1, False),
    "gru": ("GRU", 1, False),
    "lstm-bi": ("LSTM", 2, True),
    "loop": ("Loop", 1, False),
    "list": ("List", 1, False),
}
VOCAB, SEQ, EMB, HIDDEN, CLASSES, BATCH, NUM_BATCHES = 50, 32, 64, 128, 10, 32, 10
LOSS_STEPS, LOSS_TOL, SEED = 10, 1e-4, 0
SIDES = ["onnxamp", "onnxamp-bf16", "torch", "ort", "torch-pypi"]


def make_module(name):
    from typing import List
    import torch
    import torch.nn as nn
    cell, layers, bidirectional = MODELS[name]

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, EMB)
            rnn = nn.LSTM if cell == "LSTM" else nn.GRU
            self.rnn = rnn(EMB, HIDDEN, num_layers=layers, bidirectional=bidirectional, batch_first=True)
            self.head = nn.Linear(HIDDEN * (2 if bidirectional else 1), CLASSES)

        def forward(self, ids):
            out, _ = self.rnn(self.emb(ids))
            return self.head(out).transpose(1, 2)  # [N, classes, T]

    class LoopCell(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, EMB)
            self.cell_x = nn.Linear(EMB, HIDDEN)
            self.cell_h = nn.Linear(HIDDEN, HIDDEN, bias=False)
            self.head = nn.Linear(HIDDEN, CLASSES)
            self.hidden = HIDDEN  # an attribute: torch.jit.script does not read module globals

        def forward(self, ids):
            e = self.emb(ids)
            h = torch.zeros(e.shape[0], self.hidden)
            for t in range(e.shape[1]):
                h = torch.tanh(self.cell_x(e[:, t]) + self.cell_h(h))
            return self.head(h)

    class ListCell(LoopCell):  # the same weights; the steps from unbind, each state appended to a list
        def forward(self, ids):
            e = self.emb(ids)
            h = torch.zeros(e.shape[0], self.hidden)
            outs: List[torch.Tensor] = []
            for x in e.unbind(1):
                h = torch.tanh(self.cell_x(x) + self.cell_h(h))
                outs.append(h)
            # Pooled over the steps: torch.onnx (1.13) gives the stacked list rank 4 in a later Transpose's perm, as
            # if unbind kept the axis, which no runtime runs.
            return self.head(torch.stack(outs, 1).mean(1))

    torch.manual_seed(SEED)
    return {"Loop": LoopCell, "List": ListCell}.get(cell, Tagger)()


def worker_export(a):
    """Writes the model and the data (run with Debian's python3: torch, onnx, numpy)."""
    import warnings
    import numpy as np
    import torch
    warnings.filterwarnings("ignore")
    module = make_module(a.model_name)
    module.train()
    rng = np.random.default_rng(SEED)
    ids = rng.integers(0, VOCAB, (BATCH * NUM_BATCHES, SEQ)).astype(np.int64)
    labels = np.maximum.accumulate(ids % CLASSES, axis=1).astype(np.int64)
    if a.model_name in ("loop", "list"):
        labels = labels[:, -1].copy()
        module = torch.jit.script(module)
    torch.onnx.export(module, torch.from_numpy(ids[:BATCH]), a.model, opset_version=17, input_names=["ids"],
                      output_names=["logits"], dynamic_axes={"ids": {0: "batch"}, "logits": {0: "batch"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    np.savez(a.npz, ids=ids, labels=labels)


def worker_torch(a):
    import warnings
    import numpy as np
    import torch
    warnings.filterwarnings("ignore")
    torch.set_num_threads(int(a.threads))
    module = make_module(a.model_name)
    module.train()
    data = np.load(a.npz)
    x, y = torch.from_numpy(data["ids"]), torch.from_numpy(data["labels"])
    opt = torch.optim.SGD(module.parameters(), lr=bt.SGD["lr"])
    criterion = torch.nn.CrossEntropyLoss()
    losses, times = [], []
    for step in range(a.warmup + a.steps):
        rows = bt.batch_rows(step, BATCH, NUM_BATCHES)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = criterion(module(x[rows]), y[rows])
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    print(json.dumps({"losses": losses, "times": times, "peak_rss_bytes": bt.bench_util.status_bytes("VmHWM")}))


def run_side(side, a, name, model, npz, artifacts, threads, work, tag):
    total = a.warmup + a.steps
    log = os.path.join(work, f"{tag}.{side}.{name}.t{threads}")
    if side.startswith("onnxamp"):
        cmd = [a.onnxamp, "train", model, "--data", npz, "--labels", "labels", "--loss", "ce", "--optimizer", "sgd",
               "--lr", repr(bt.SGD["lr"]), "--steps", str(total), "--batch-size", str(BATCH), "--no-shuffle",
               "--threads", str(threads), "--log-every", "1", "--log-format", "jsonl", "-o", log + ".onnx"]
        if side == "onnxamp-bf16":
            cmd += ["--amp", "bf16"]
        stdout, _, rss = bt.run_child(cmd, log)
        steps = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
        steps = [s for s in steps if s.get("type") == "step"]
        losses = [s["loss"] for s in steps]
        times = [s["samples"] / s["samples_per_second"] if s["samples_per_second"] else 0.0 for s in steps]
    else:
        python = {"ort": bt.ORT_PYTHON, "torch": bt.TORCH_PYTHON, "torch-pypi": bt.TORCH_PYPI_PYTHON}[side]
        worker = "torch" if side.startswith("torch") else side
        cmd = [python, os.path.abspath(__file__), "--worker", worker, "--model", model, "--model-name", name, "--npz",
               npz, "--steps", str(a.steps), "--warmup", str(a.warmup), "--threads", str(threads), "--dir",
               artifacts or ""]
        stdout, _, rss = bt.run_child(cmd, log)
        r = json.loads(stdout.strip().splitlines()[-1])
        losses, times = r["losses"], r["times"]
    if len(losses) != total:
        raise bt.Failure(f"{side} {name}: {len(losses)} steps reported, expected {total} (log: {log}.err)")
    return {"losses": losses, "steps_per_s": a.steps / sum(times[a.warmup:]), "rss": rss}


def artifacts_failure(failure, log):
    """Why ONNX Runtime Training could not write its artifacts: its error or the assertion that aborted it (in the
    worker's logs), else the end of the failure's text."""
    for path in (log + ".err", log + ".out"):
        try:
            with open(path, errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            if " was false. " in line:
                return line.split(" was false. ", 1)[1].strip()
            if "Assertion" in line:
                return "aborted: " + line[line.index("Assertion"):].strip()
    return failure.split(" (log: ")[0][-160:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", choices=["export", "torch", "ort", "ort-artifacts"], help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--model-name", help=argparse.SUPPRESS)
    ap.add_argument("--npz", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--build-dir", help="build folder with tools/onnxamp (default: $ONNXAMP_BUILD_DIR or build)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", default="2", help="thread counts, comma-separated")
    ap.add_argument("--sides", help="default onnxamp,onnxamp-bf16,torch,ort (and torch-pypi with .venv-torch)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--keep", help="keep models, data, artifacts and logs in this folder")
    a = ap.parse_args()
    if a.worker == "export":
        return worker_export(a)
    if a.worker == "torch":
        return worker_torch(a)
    if a.worker in ("ort", "ort-artifacts"):
        ns = SimpleNamespace(model=a.model, npz=a.npz, input="ids", batch=BATCH, steps=a.steps, warmup=a.warmup,
                             threads=int(a.threads), optimizer="sgd", dir=a.dir)
        if a.worker == "ort":
            return bt.worker_ort(ns)
        try:
            bt.worker_ort_artifacts(ns)
        except Exception as e:  # noqa: BLE001  (the reason is the table's flag line)
            print(" ".join(str(e).split()), file=sys.stderr)  # the last line: what run_child reports
            return 1
        if a.model_name in ("loop", "list"):
            return None  # one label per sequence, as the artifacts declare
        # The artifacts declare labels [N, dim 1 of the logits]; per-token labels are [N, T].
        import onnx
        path = os.path.join(a.dir, "training_model.onnx")
        m = onnx.load(path)
        (labels,) = [i for i in m.graph.input if i.name == "labels"]
        dims = labels.type.tensor_type.shape.dim
        del dims[:]
        for d in ("batch", "time"):
            dims.add().dim_param = d
        onnx.save(m, path)
        return None

    import bench_util
    build = bench_util.find_build_dir(a.build_dir, "tools/onnxamp", "onnxamp")
    a.onnxamp = os.path.join(build, "tools", "onnxamp")
    models = a.models.split(",")
    sides = (a.sides or ",".join(s for s in SIDES if s != "torch-pypi" or os.path.exists(bt.TORCH_PYPI_PYTHON))).split(",")
    for m in models:
        if m not in MODELS:
            ap.error(f"unknown model {m}")
    for s in sides:
        if s not in SIDES:
            ap.error(f"unknown side {s}")
    if "torch-pypi" in sides and not os.path.exists(bt.TORCH_PYPI_PYTHON):
        ap.error(f"{bt.TORCH_PYPI_PYTHON} not found: run bash scripts/setup_torch_peer.sh")
    if "ort" in sides and not os.path.exists(bt.ORT_PYTHON):
        print(f"note: {bt.ORT_PYTHON} missing (scripts/setup_ort_training.sh): side ort skipped")
        sides.remove("ort")
    threads_list = [int(t) for t in a.threads.split(",")]
    work = a.keep or tempfile.mkdtemp(prefix="onnxamp_bench_rnn_")
    os.makedirs(work, exist_ok=True)
    rows, flags = [], []
    try:
        for name in models:
            model = os.path.join(work, f"{name}.onnx")
            npz = os.path.join(work, f"{name}.npz")
            bt.run_child([bt.TORCH_PYTHON, os.path.abspath(__file__), "--worker", "export", "--model", model,
                          "--model-name", name, "--npz", npz], os.path.join(work, f"export.{name}"))
            artifacts = None
            no_artifacts = None  # why ONNX Runtime Training could not make its training graph
            if "ort" in sides:
                artifacts = os.path.join(work, f"{name}.artifacts")
                os.makedirs(artifacts, exist_ok=True)
                try:
                    bt.run_child([bt.ORT_PYTHON, os.path.abspath(__file__), "--worker", "ort-artifacts", "--model",
                                  model, "--model-name", name, "--dir", artifacts],
                                 os.path.join(work, f"artifacts.{name}"))
                except bt.Failure as e:
                    no_artifacts = artifacts_failure(str(e), os.path.join(work, f"artifacts.{name}"))
            for threads in threads_list:
                runs = {s: [] for s in sides}
                failed = {}  # side: why it cannot train this model (ONNX Runtime: bidirectional LSTM, Loop)
                if no_artifacts:
                    failed["ort"] = no_artifacts.split(" (log: ")[0]
                for rep in range(a.repeats):
                    order = sides[rep % len(sides):] + sides[:rep % len(sides)]
                    for side in order:
                        if side in failed:
                            continue
                        try:
                            runs[side].append(run_side(side, a, name, model, npz, artifacts, threads, work, f"r{rep}"))
                        except bt.Failure as e:
                            if side != "ort":
                                raise
                            why = str(e)
                            why = why.split(" was false. ", 1)[1] if " was false. " in why else why[-160:]
                            failed[side] = why.split(" (log: ")[0]
                ok_sides = [s for s in sides if s not in failed]
                med = {s: statistics.median(r["steps_per_s"] for r in runs[s]) for s in ok_sides}
                for s, why in failed.items():
                    rows.append({"model": name, "threads": threads, "side": s, "failed": why})
                    flags.append(f"{name} {s}: cannot train it: {why}")
                for s in ok_sides:
                    row = {"model": name, "threads": threads, "side": s, "steps_per_s": med[s],
                           "ms_per_step": 1000.0 / med[s], "rss": statistics.median(r["rss"] for r in runs[s])}
                    for peer in ("torch", "torch-pypi", "ort"):
                        row["vs_" + peer] = med[s] / med[peer] if peer in med else None
                    rows.append(row)
                    if s != "torch" and "torch" in runs and not s.endswith("bf16"):
                        got, want = runs[s][0]["losses"][:LOSS_STEPS], runs["torch"][0]["losses"][:LOSS_STEPS]
                        diff = bt.rel_diff(got, want)
                        row["loss_diff"] = diff
                        if diff > LOSS_TOL:
                            flags.append(f"{name} {s}: first {LOSS_STEPS} losses differ from torch's by {diff:.2e}")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)

    print(f"CPU: {bench_util.cpu_name()}; batch {BATCH}, T {SEQ}, embedding {EMB}, hidden {HIDDEN}; SGD; "
          f"{a.warmup} + {a.steps} steps, median of {a.repeats}")
    header = ["model", "threads", "side", "steps/s", "ms/step", "vs torch", "vs torch-pypi", "vs ort", "loss vs torch",
              "peak RSS"]
    table = [[r["model"], str(r["threads"]), r["side"], "fails", "-", "-", "-", "-", "-", "-"] if "failed" in r else
             [r["model"], str(r["threads"]), r["side"], f"{r['steps_per_s']:.1f}", f"{r['ms_per_step']:.1f}",
              f"{r['vs_torch']:.2f}x" if r["vs_torch"] else "-",
              f"{r['vs_torch-pypi']:.2f}x" if r["vs_torch-pypi"] else "-", f"{r['vs_ort']:.2f}x" if r["vs_ort"] else "-",
              f"{r['loss_diff']:.1e}" if "loss_diff" in r else "-", bench_util.size(r["rss"])] for r in rows]
    bench_util.print_rows(header, table, a.markdown, notes=flags, note_label="flag", right_from=3)
    # A peer that cannot train a model is a finding, not a failure of this run; a loss mismatch is.
    return 1 if any("losses differ" in f for f in flags) else 0


if __name__ == "__main__":
    sys.exit(main())
