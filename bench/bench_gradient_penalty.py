#!/usr/bin/python3
"""Gradient-penalty training on the CPU: `onnxamp train` vs PyTorch's double backward, same models, data and batches.

Two critics, each with a WGAN-GP penalty on the gradient of the sum of its logits with respect to its input:

  conv     Conv 3->32 3x3, Relu, Conv 32->64 3x3 stride 2, Relu, Conv 64->128 3x3 stride 2, Relu, Flatten, Gemm to
           10 logits, on 3x32x32 images, batch 32;
  ln_mlp   Gemm 784->512, LayerNormalization, Tanh, Gemm 512->512, LayerNormalization, Tanh, Gemm to 10 logits,
           batch 64;

  loss     CE(logits, labels) + 10 * mean over the batch of (||dx|| - 1)^2, dx = d(sum of logits)/d(input), ||.|| per
           sample: a Gradient node (ai.onnx.preview.training) in the ONNX model, trained by `onnxamp train MODEL
           --loss-output loss`; on the torch side torch.autograd.grad(logits.sum(), x, create_graph=True) and
           loss.backward() (the second derivative) through bench/onnx_torch.py's module of the same graph;
  optimizer SGD, lr 0.01, no momentum, on every side;
  data     seeded standard normal inputs and uniform labels, 10 batches, step i trains on batch i mod 10 in order.

Sides, each in its own process: `onnxamp` (FP32), `onnxamp-bf16` (--amp bf16: BF16 compute, FP32 master weights, the
penalty in FP32), `torch` (Debian's python3-torch, eager, FP32: a reference BLAS for its GEMMs), `torch-pypi` (the same
in PyPI's PyTorch, .venv-torch from scripts/setup_torch_peer.sh: MKL and oneDNN; in the default sides when it exists). The step time on the onnxamp side is Trainer::Step's
wall time from its JSON step records (batch gather, forward, both backward passes, optimizer); on the torch side the
time of zero_grad, forward, autograd.grad, loss, backward and step. --warmup steps are not timed. The first 10
losses of onnxamp (FP32) are compared with torch's (relative difference; above 1e-4 is flagged).

    /usr/bin/python3 bench/bench_gradient_penalty.py [--onnxamp build/tools/onnxamp] [--threads 1,2] [--markdown]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.dont_write_bytecode = True

try:
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper, TensorProto
except ImportError as e:
    print(f"skipped: needs numpy and onnx in {sys.executable} ({e})")
    sys.exit(0)

import bench_util  # noqa: E402

TORCH_PYPI_PYTHON = os.path.join(ROOT, ".venv-torch", "bin", "python")  # scripts/setup_torch_peer.sh
SEED = 0
LR = 0.01
GP_WEIGHT = 10.0
BATCHES = {"conv": 32, "ln_mlp": 64}
SHAPES = {"conv": (3, 32, 32), "ln_mlp": (784,)}
STEPS = {"conv": 20, "ln_mlp": 50}
LOSS_STEPS = 10
DATA_BATCHES = 10


def critic(kind):
    rng = np.random.default_rng(1)

    def init(name, shape, fan_in, offset=0.0):
        values = offset + rng.standard_normal(shape) / np.sqrt(fan_in)
        return numpy_helper.from_array(values.astype(np.float32), name)

    if kind == "conv":
        nodes = [helper.make_node("Conv", ["input", "c1.w", "c1.b"], ["c1"], pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["c1"], ["r1"]),
                 helper.make_node("Conv", ["r1", "c2.w", "c2.b"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
                 helper.make_node("Relu", ["c2"], ["r2"]),
                 helper.make_node("Conv", ["r2", "c3.w", "c3.b"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
                 helper.make_node("Relu", ["c3"], ["r3"]),
                 helper.make_node("Flatten", ["r3"], ["flat"]),
                 helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1)]
        inits = [init("c1.w", (32, 3, 3, 3), 27), init("c1.b", (32,), 27), init("c2.w", (64, 32, 3, 3), 288),
                 init("c2.b", (64,), 288), init("c3.w", (128, 64, 3, 3), 576), init("c3.b", (128,), 576),
                 init("fc.w", (10, 128 * 8 * 8), 128 * 64), init("fc.b", (10,), 128 * 64)]
    else:
        nodes = [helper.make_node("Gemm", ["input", "fc1.w", "fc1.b"], ["h1"], transB=1),
                 helper.make_node("LayerNormalization", ["h1", "ln1.w", "ln1.b"], ["n1"], axis=-1),
                 helper.make_node("Tanh", ["n1"], ["t1"]),
                 helper.make_node("Gemm", ["t1", "fc2.w", "fc2.b"], ["h2"], transB=1),
                 helper.make_node("LayerNormalization", ["h2", "ln2.w", "ln2.b"], ["n2"], axis=-1),
                 helper.make_node("Tanh", ["n2"], ["t2"]),
                 helper.make_node("Gemm", ["t2", "fc3.w", "fc3.b"], ["logits"], transB=1)]
        inits = [init("fc1.w", (512, 784), 784), init("fc1.b", (512,), 784), init("ln1.w", (512,), 64, 1.0),
                 init("ln1.b", (512,), 64), init("fc2.w", (512, 512), 512), init("fc2.b", (512,), 512),
                 init("ln2.w", (512,), 64, 1.0), init("ln2.b", (512,), 64), init("fc3.w", (10, 512), 512),
                 init("fc3.b", (10,), 512)]
    shape = ["batch", *SHAPES[kind]]
    g = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])], inits)
    return helper.make_model(g, ir_version=8, opset_imports=[helper.make_opsetid("", 17)])


def with_penalty(net, kind):
    """The critic, a Gradient node and loss = CE + GP_WEIGHT * mean((||dx|| - 1)^2)."""
    m = onnx.ModelProto()
    m.CopyFrom(net)
    m.opset_import.append(helper.make_opsetid("ai.onnx.preview.training", 1))
    g = m.graph
    g.input.append(helper.make_tensor_value_info("labels", TensorProto.INT64, ["batch"]))
    g.initializer.extend([numpy_helper.from_array(np.array(GP_WEIGHT, np.float32), "gp_weight"),
                          numpy_helper.from_array(np.array(1.0, np.float32), "one")])
    axes = list(range(1, 1 + len(SHAPES[kind])))
    g.node.extend([
        helper.make_node("Gradient", ["input"], ["dx"], domain="ai.onnx.preview.training", xs=["input"], y="logits"),
        helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["ce"]),
        helper.make_node("ReduceSumSquare", ["dx"], ["sq"], axes=axes, keepdims=0),
        helper.make_node("Sqrt", ["sq"], ["norm"]),
        helper.make_node("Sub", ["norm", "one"], ["gap"]),
        helper.make_node("Mul", ["gap", "gap"], ["gap2"]),
        helper.make_node("ReduceMean", ["gap2"], ["gp"], keepdims=0),
        helper.make_node("Mul", ["gp", "gp_weight"], ["weighted"]),
        helper.make_node("Add", ["ce", "weighted"], ["loss"]),
    ])
    g.output.append(helper.make_tensor_value_info("loss", TensorProto.FLOAT, []))
    return m


def write_data(kind, path):
    rng = np.random.default_rng(SEED)
    n = BATCHES[kind] * DATA_BATCHES
    np.savez(path, input=rng.standard_normal((n, *SHAPES[kind])).astype(np.float32),
             labels=rng.integers(0, 10, n).astype(np.int64))


# ---------------------------------------------------------------- the torch worker (a process of its own)


def torch_worker(a):
    import torch
    import torch.nn.functional as F
    import onnx_torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(SEED)
    module = onnx_torch.load(a.model, device="cpu", trainable=True)
    opt = torch.optim.SGD(list(module.params), lr=LR, momentum=0)
    data = np.load(a.npz)
    x_all, y_all = torch.from_numpy(data["input"]), torch.from_numpy(data["labels"])
    losses, times = [], []
    for step in range(a.warmup + a.steps):
        b = step % DATA_BATCHES
        xb = x_all[b * a.batch:(b + 1) * a.batch].clone().requires_grad_(True)
        yb = y_all[b * a.batch:(b + 1) * a.batch]
        start = time.perf_counter()
        opt.zero_grad()
        logits = module(xb)
        logits = logits[0] if isinstance(logits, (list, tuple)) else logits
        dx = torch.autograd.grad(logits.sum(), xb, create_graph=True)[0]
        norm = dx.flatten(1).pow(2).sum(1).sqrt()
        loss = F.cross_entropy(logits, yb) + GP_WEIGHT * ((norm - 1) ** 2).mean()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    print(json.dumps({"losses": losses, "times": times}))


# ---------------------------------------------------------------- the driver


def run_side(side, a, kind, model, npz, threads, work):
    batch = BATCHES[kind]
    steps = STEPS[kind]
    total = a.warmup + steps
    log = os.path.join(work, f"{side}.{kind}.t{threads}")
    if side.startswith("onnxamp"):
        cmd = [a.onnxamp, "train", model, "--loss-output", "loss", "--data", npz, "--steps", str(total),
               "--batch-size", str(batch), "--no-shuffle", "--threads", str(threads), "--log-every", "1",
               "--log-format", "jsonl", "--seed", str(SEED), "--optimizer", "sgd", "--lr", repr(LR),
               "-o", log + ".onnx"]
        if side == "onnxamp-bf16":
            cmd += ["--amp", "bf16"]
    else:
        python = TORCH_PYPI_PYTHON if side == "torch-pypi" else sys.executable
        cmd = [python, os.path.abspath(__file__), "--worker", "--model", model, "--npz", npz, "--batch",
               str(batch), "--steps", str(steps), "--warmup", str(a.warmup), "--threads", str(threads)]
    with open(log + ".out", "w") as out, open(log + ".err", "w") as err:
        p = subprocess.run(cmd, stdout=out, stderr=err, cwd=ROOT)
    with open(log + ".out") as f:
        stdout = f.read()
    if p.returncode != 0:
        with open(log + ".err") as f:
            last = (f.read().strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{side} {kind}: exit {p.returncode}: {last}")
    if side.startswith("onnxamp"):
        losses, times = bench_util.onnxamp_steps(stdout)
    else:
        r = json.loads(stdout.strip().splitlines()[-1])
        losses, times = r["losses"], r["times"]
    if len(losses) != total:
        raise RuntimeError(f"{side} {kind}: {len(losses)} steps reported, expected {total}")
    return {"losses": losses, "steps_per_s": steps / sum(times[a.warmup:])}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--onnxamp", default=None)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--models", default="conv,ln_mlp")
    parser.add_argument("--sides", help="default onnxamp,onnxamp-bf16,torch (and torch-pypi with .venv-torch)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--npz", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.worker:
        a.threads = int(a.threads)
        return torch_worker(a)
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(f"skipped: the torch side needs python3-torch in {sys.executable} ({e})")
        return 0
    a.onnxamp = a.onnxamp or os.path.join(bench_util.find_build_dir(None, "tools/onnxamp", "onnxamp"),
                                          "tools", "onnxamp")
    threads = [int(t) for t in a.threads.split(",")]
    a.sides = a.sides or "onnxamp,onnxamp-bf16,torch" + (",torch-pypi" if os.path.exists(TORCH_PYPI_PYTHON) else "")
    sides = a.sides.split(",")
    for s in sides:
        if s not in ("onnxamp", "onnxamp-bf16", "torch", "torch-pypi"):
            sys.exit(f"error: --sides: unknown side '{s}' (expected some of onnxamp,onnxamp-bf16,torch,torch-pypi)")
    if "torch-pypi" in sides and not os.path.exists(TORCH_PYPI_PYTHON):
        sys.exit(f"error: {TORCH_PYPI_PYTHON} not found: run bash scripts/setup_torch_peer.sh (or leave torch-pypi "
                 "out of --sides)")
    work = tempfile.mkdtemp(prefix="onnxamp_bench_gp_")
    rows, notes = [], []
    for kind in a.models.split(","):
        net = critic(kind)
        net_path = os.path.join(work, f"{kind}.onnx")
        onnx.save(net, net_path)
        model = os.path.join(work, f"{kind}_gp.onnx")
        onnx.save(with_penalty(net, kind), model)
        npz = os.path.join(work, f"{kind}.npz")
        write_data(kind, npz)
        for t in threads:
            results = {s: [] for s in sides}
            for rep in range(a.repeats):
                for s in sides[rep % len(sides):] + sides[:rep % len(sides)]:  # rotating order
                    r = run_side(s, a, kind, net_path if s.startswith("torch") else model, npz, t, work)
                    results[s].append(r)
                    print(f"  [{rep + 1}/{a.repeats}] {kind} {t} thread(s) {s}: {r['steps_per_s']:.3g} steps/s",
                          file=sys.stderr)
            med = {s: statistics.median(r["steps_per_s"] for r in results[s]) for s in sides}
            for peer in ("torch", "torch-pypi"):
                if "onnxamp" not in sides or peer not in sides:
                    continue
                got = np.array(results["onnxamp"][0]["losses"][:LOSS_STEPS])
                want = np.array(results[peer][0]["losses"][:LOSS_STEPS])
                diff = float(np.max(np.abs(got - want) / np.abs(want)))
                notes.append(f"{kind}, {t} thread(s): onnxamp FP32 losses of steps 1-{LOSS_STEPS} within {diff:.1e} "
                             f"of {peer}'s{' (above 1e-4!)' if diff > 1e-4 else ''}")
            for s in sides:
                speedups = [f"{med[s] / med[p]:.2f}" if p in med and not s.startswith("torch") else ""
                            for p in ("torch", "torch-pypi")]
                rows.append([kind, str(BATCHES[kind]), str(t), s, f"{med[s]:.3g}"] + speedups)
    print(f"CPU: {bench_util.cpu_name()}; {a.repeats} repeats, medians; speedup = steps/s over the peer's")
    bench_util.print_rows(["critic", "batch", "threads", "side", "steps/s", "speedup vs torch", "vs torch-pypi"], rows,
                          a.markdown,
                          notes=notes, right_from=4)
    return 0


if __name__ == "__main__":
    sys.exit(main())
