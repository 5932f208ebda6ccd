#!/usr/bin/python3
"""A GPT-2-style language model on the CPU: `onnxamp train` vs PyTorch training the same module, and onnxamp's
inference vs ONNX Runtime's, in one invocation.

The model: 2 pre-norm transformer blocks of width 256 (4 heads, causal attention, an MLP of width 1024 whose GELU is
written out as GPT-2 implementations write it, `gelu_new`: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))),
learned token and position embeddings, a vocabulary of 512, 64 tokens. It is exported by torch.onnx.export at opset
17 (Debian's python3-torch) from a seeded module whose weights are also saved for the PyTorch sides, so every side
starts from the same weights. Data: 512 sequences of uniform token ids, each token's label the next one (cyclic);
step i trains on batch i mod 32 in file order on every side.

Training sides (each in its own process; peak RSS is the VmHWM it reports of itself):
  onnxamp         `onnxamp train gpt2.onnx --loss ce --class-axis -1 --optimizer adamw --lr 1e-3 --weight-decay 0.01
                  --no-shuffle --log-every 1 --log-format jsonl --threads T`; step times from its JSON step records;
  onnxamp-bf16    the same with --amp bf16;
  onnxamp-fp16    the same with --amp fp16 (dynamic loss scaling);
  baseline, baseline-bf16, baseline-fp16   the same with the binary given by --baseline (another build: the
                  before of a change);
  torch           the nn.Module itself in Debian's PyTorch: zero_grad, forward, cross-entropy over every token,
                  backward, AdamW(lr 1e-3, weight decay 0.01) step; torch.set_num_threads(T);
  torch-bf16      the same under torch.autocast("cpu", dtype=torch.bfloat16);
  torch-pypi, torch-pypi-bf16  the same in PyPI's PyTorch (.venv-torch, scripts/setup_torch_peer.sh), what PyTorch
                  users run (Debian's 1.13 multiplies FP32 matrices with a reference BLAS); the default PyTorch sides
                  when .venv-torch exists, else torch and torch-bf16.
Each run trains --warmup + --steps steps (default 5 + 40); the last --steps are timed; the losses of the first 10
steps of the FP32 sides are compared with PyPI's PyTorch's (else Debian's; above 1e-4 relative is flagged), and each
side's steps/s with the PyTorch side of its precision (FP16 against PyTorch's FP32: PyTorch has no FP16 autocast on
the CPU worth timing). Runs are repeated --repeats
times with the sides interleaved; the table shows medians.

Inference (--inference, default on): `onnxamp_bench gpt2.onnx -i ids=IDS --threads T` (median of 100 runs after 5)
against ONNX Runtime's InferenceSession.run on the same 16 sequences (.venv's onnxruntime; intra-op threads T,
median of 100 after 5), and the baseline's onnxamp_bench when --baseline-bench is given.

Usage: /usr/bin/python3 bench/bench_gpt2.py [--build-dir DIR] [--threads 1,2] [--sides S,...] [--steps 40]
                                         [--warmup 5] [--repeats 3] [--baseline ONNXAMP] [--baseline-bench BENCH]
                                         [--no-inference] [--markdown] [--keep DIR]
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import bench_util

ROOT = bench_util.ROOT
VOCAB, SEQ, DIM, HEADS, LAYERS = 512, 64, 256, 4, 2
SAMPLES, BATCH, LR, WEIGHT_DECAY = 512, 16, 1e-3, 0.01
LOSS_STEPS = 10
TORCH_PYPI_PYTHON = os.path.join(ROOT, ".venv-torch", "bin", "python")
ORT_PYTHON = os.path.join(ROOT, ".venv", "bin", "python")
ONNXAMP_SIDES = {"onnxamp": "off", "onnxamp-bf16": "bf16", "onnxamp-fp16": "fp16"}
BASELINE_SIDES = {"baseline": "off", "baseline-bf16": "bf16", "baseline-fp16": "fp16"}
TORCH_SIDES = {"torch": ("/usr/bin/python3", False), "torch-bf16": ("/usr/bin/python3", True),
               "torch-pypi": (TORCH_PYPI_PYTHON, False), "torch-pypi-bf16": (TORCH_PYPI_PYTHON, True)}


def make_module():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def gelu_new(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
            self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
            self.fc, self.out = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)
            self.register_buffer("mask", torch.tril(torch.ones(SEQ, SEQ)).view(1, 1, SEQ, SEQ))

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, HEADS, d // HEADS).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // HEADS))
            att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
            y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, d)
            x = x + self.proj(y)
            return x + self.out(gelu_new(self.fc(self.ln2(x))))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, DIM), nn.Embedding(SEQ, DIM)
            self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
            self.ln, self.head = nn.LayerNorm(DIM), nn.Linear(DIM, VOCAB, bias=False)

        def forward(self, ids):
            pos = torch.arange(0, ids.shape[1], dtype=torch.long).unsqueeze(0)
            x = self.wte(ids) + self.wpe(pos)
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    return Gpt()


def prepare(work):
    """The model, its weights for the torch sides, the data set and the inference input, in `work`."""
    import numpy as np
    import torch
    import warnings
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    module = make_module()
    torch.save(module.state_dict(), os.path.join(work, "gpt2.pt"))
    torch.onnx.export(module, torch.randint(0, VOCAB, (2, SEQ)), os.path.join(work, "gpt2.onnx"),
                      input_names=["ids"], output_names=["logits"],
                      dynamic_axes={"ids": {0: "batch"}, "logits": {0: "batch"}}, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING)  # an eval export merges the LayerNorms' equal weights
    rng = np.random.default_rng(0)
    ids = rng.integers(0, VOCAB, (SAMPLES, SEQ)).astype(np.int64)
    np.savez(os.path.join(work, "data.npz"), ids=ids, labels=np.roll(ids, -1, axis=1))
    np.save(os.path.join(work, "ids16.npy"), ids[:16])


def torch_worker(a):
    import numpy as np
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    module = make_module()
    module.load_state_dict(torch.load(os.path.join(a.work, "gpt2.pt")))
    module.train()
    data = np.load(os.path.join(a.work, "data.npz"))
    ids, labels = torch.from_numpy(data["ids"]), torch.from_numpy(data["labels"])
    opt = torch.optim.AdamW(module.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    losses, times = [], []
    for step in range(a.warmup + a.steps):
        start = (step * BATCH) % SAMPLES
        x, y = ids[start:start + BATCH], labels[start:start + BATCH]
        t0 = time.perf_counter()
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = module(x)
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    print(json.dumps({"losses": losses, "times": times, "peak_rss_bytes": bench_util.status_bytes("VmHWM")}))


def ort_worker(a):
    import numpy as np
    import onnxruntime as ort
    ids = np.load(os.path.join(a.work, "ids16.npy"))
    o = ort.SessionOptions()
    o.intra_op_num_threads, o.inter_op_num_threads = a.threads, 1
    s = ort.InferenceSession(os.path.join(a.work, "gpt2.onnx"), o, providers=["CPUExecutionProvider"])
    for _ in range(5):
        s.run(None, {"ids": ids})
    ms = []
    for _ in range(100):
        t0 = time.perf_counter()
        s.run(None, {"ids": ids})
        ms.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"median_ms": statistics.median(ms), "version": ort.__version__}))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-800:]}")
    return r.stdout


def train_side(side, a, threads):
    """(losses, timed seconds, peak RSS bytes) of one run."""
    if side in ONNXAMP_SIDES or side in BASELINE_SIDES:
        exe, amp = (a.onnxamp, ONNXAMP_SIDES[side]) if side in ONNXAMP_SIDES else (a.baseline, BASELINE_SIDES[side])
        out = run([exe, "train", os.path.join(a.work, "gpt2.onnx"), "--data", os.path.join(a.work, "data.npz"),
                   "--labels", "labels", "--loss", "ce", "--class-axis", "-1", "--optimizer", "adamw", "--lr",
                   repr(LR), "--weight-decay", repr(WEIGHT_DECAY), "--steps", str(a.warmup + a.steps),
                   "--batch-size", str(BATCH), "--no-shuffle", "--threads", str(threads), "--log-every", "1",
                   "--log-format", "jsonl", "--amp", amp, "-o", os.path.join(a.work, f"{side}.onnx")])
        losses, times = bench_util.onnxamp_steps(out)
        rss = bench_util.child_peak_rss(out, 0)
    else:
        python, bf16 = TORCH_SIDES[side]
        cmd = [python, os.path.abspath(__file__), "--worker", "torch", "--work", a.work, "--threads", str(threads),
               "--steps", str(a.steps), "--warmup", str(a.warmup)] + (["--bf16"] if bf16 else [])
        r = json.loads(run(cmd).strip().splitlines()[-1])
        losses, times, rss = r["losses"], r["times"], r["peak_rss_bytes"]
    if len(losses) != a.warmup + a.steps:
        sys.exit(f"error: {side}: {len(losses)} steps reported, expected {a.warmup + a.steps}")
    return losses, sum(times[a.warmup:]), rss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", choices=["torch", "ort"], help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--bf16", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--build-dir")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--sides", help="default onnxamp,onnxamp-bf16,onnxamp-fp16,torch,torch-bf16 (+ torch-pypi, "
                    "torch-pypi-bf16 when .venv-torch exists; + baseline sides with --baseline)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline", help="another onnxamp binary: adds the sides baseline, baseline-bf16, baseline-fp16")
    ap.add_argument("--baseline-bench", help="another onnxamp_bench binary for the inference table")
    ap.add_argument("--no-inference", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--keep", help="write the model and data into this folder and keep them")
    a = ap.parse_args()
    if a.worker == "torch":
        a.threads = int(a.threads)
        return torch_worker(a)
    if a.worker == "ort":
        a.threads = int(a.threads)
        return ort_worker(a)

    build = bench_util.find_build_dir(a.build_dir, "tools/onnxamp", "onnxamp")
    a.onnxamp = os.path.join(build, "tools", "onnxamp")
    bench = os.path.join(build, "bench", "onnxamp_bench")
    sides = a.sides.split(",") if a.sides else (
        list(ONNXAMP_SIDES) + (["torch-pypi", "torch-pypi-bf16"] if os.path.exists(TORCH_PYPI_PYTHON) else
                               ["torch", "torch-bf16"]) + (list(BASELINE_SIDES) if a.baseline else []))
    threads = [int(t) for t in a.threads.split(",")]
    a.work = a.keep or tempfile.mkdtemp(prefix="bench_gpt2.")
    os.makedirs(a.work, exist_ok=True)
    try:
        prepare(a.work)
        print(f"CPU: {bench_util.cpu_name()}, {os.cpu_count()} logical CPUs; onnxamp {a.onnxamp}")
        rows, notes = [], []
        for t in threads:
            results = {s: [] for s in sides}
            for rep in range(a.repeats):
                order = sides[rep % len(sides):] + sides[:rep % len(sides)]
                for s in order:
                    results[s].append(train_side(s, a, t))
            # The FP32 losses against PyPI's PyTorch (else Debian's); the time ratio against the PyTorch side of
            # the same precision.
            ref_side = next((r for r in ("torch-pypi", "torch") if r in sides), None)
            ref = results[ref_side][0][0] if ref_side else None
            speed = {s: a.steps / statistics.median(r[1] for r in results[s]) for s in sides}
            for s in sides:
                losses = results[s][0][0]
                rss = statistics.median(r[2] for r in results[s])
                diff = "-"
                if ref and s in ("onnxamp", "baseline", "torch", "torch-pypi") and s != ref_side:
                    d = max(abs(x - y) / abs(y) for x, y in zip(losses[:LOSS_STEPS], ref[:LOSS_STEPS]))
                    diff = f"{d:.1e}"
                    if d > 1e-4:
                        notes.append(f"{s} at {t} threads: losses of steps 1-{LOSS_STEPS} {d:.1e} from {ref_side}'s")
                peer = ref_side + ("-bf16" if s.endswith("bf16") else "") if ref_side else None
                ratio = f"{speed[s] / speed[peer]:.2f}" if peer in speed and not s.startswith("torch") else "-"
                rows.append([str(t), s, f"{speed[s]:.1f}", bench_util.size(rss), ratio, diff])
        bench_util.print_rows(["threads", "side", "steps/s", "peak RSS", "steps/s ratio to PyTorch",
                               "FP32 loss diff (steps 1-10)"], rows, a.markdown, notes, right_from=2)
        if not a.no_inference:
            rows = []
            for t in threads:
                row = [str(t)]
                for exe in [bench] + ([a.baseline_bench] if a.baseline_bench else []):
                    out = run([exe, os.path.join(a.work, "gpt2.onnx"), "-i", "ids=" + os.path.join(a.work, "ids16.npy"),
                               "--threads", str(t), "--warmup", "5", "--iters", "100"])
                    row.append(f"{json.loads(out.strip().splitlines()[-1])['median_ms']:.3f}")
                r = json.loads(run([ORT_PYTHON, os.path.abspath(__file__), "--worker", "ort", "--work", a.work,
                                    "--threads", str(t)]).strip().splitlines()[-1])
                row += [f"{r['median_ms']:.3f}", f"{float(row[1]) / r['median_ms']:.2f}"]
                rows.append(row)
            header = ["threads", "onnxamp (ms)"] + (["baseline (ms)"] if a.baseline_bench else []) + [
                "ONNX Runtime (ms)", "onnxamp / ORT (time)"]
            bench_util.print_rows(header, rows, a.markdown, right_from=1)
    finally:
        if not a.keep:
            shutil.rmtree(a.work, ignore_errors=True)


if __name__ == "__main__":
    main()
