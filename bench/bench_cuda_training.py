#!/usr/bin/env python3
"""GPU training benchmark: `onnxamp train --device cuda` against PyTorch AMP on the same GPU, the same ONNX graph,
data, batches, loss and optimizer, in one invocation.

Workloads (the batch, loss and optimizer of each; --batch overrides the batch):

  mlp4096      onnxamp_gen_models --only mlp4096 (three Linear 4096x4096 with ReLU between), batch 512, MSE against
               random targets, SGD(lr 1e-3);
  cnn          models/cnn.onnx, batch 256, cross-entropy, SGD(lr 0.01, momentum 0.9);
  transformer  models/transformer.onnx, batch 64, per-token cross-entropy (--class-axis -1), AdamW(lr 1e-3,
               weight decay 0.01);
  resnet50     with --resnet50 MODEL only: batch 128, cross-entropy, SGD(lr 0.01, momentum 0.9).

Precisions (--precisions): fp32; fp16 = onnxamp --amp fp16 (FP32 master weights, dynamic loss scaling) against
torch.autocast(float16) + torch.amp.GradScaler(); bf16 = onnxamp --amp bf16 against torch.autocast(bfloat16) without
loss scaling. TF32 is off on both sides unless --tf32.

Data: seeded, --num-batches batches of the workload's batch (float inputs standard normal, token ids below the
table they index, labels uniform over the classes, MSE targets standard normal), in an .npz that both sides load;
step i trains on batch i mod --num-batches in file order (onnxamp --no-shuffle). Both sides keep the whole data set
on the device: PyTorch uploads it once before the first step, and onnxamp's CUDA trainer uploads a data set that fits
once at the start.

  onnxamp  `onnxamp train MODEL --device cuda --data D.npz --labels labels --loss ... --optimizer ... --no-shuffle
           --batch-size B --steps N --amp ... -o OUT.onnx`, run twice: with --steps W (--warmup-steps) and with
           --steps W + T (--steps, per workload by default). steps/s = T / (wall time of the long run - wall time of
           the short run): process start, model loading, graph building, the data upload, warm-up (and CUDA Graph
           capture) and writing the trained model cost the same in both runs and cancel (--repeats N: the median
           difference of N pairs). Peak device memory is read from the long run's `train: peak device memory A MiB
           allocated, R MiB reserved` line (shown as '-' when the trainer prints none): A is the most in use at once
           on the device (blocks at their allocated size, as torch counts), R the most held from it (in use +
           cached).
  torch    bench/onnx_torch.py (trainable=True: the same parameters, BatchNormalization in training mode) in a worker
           process per workload: eager, and torch.compile of the module (--compile-precisions, default fp16; skipped
           with --no-compile). A step is zero_grad(set_to_none=True), forward and loss under autocast,
           scaler.scale(loss).backward(), scaler.step(optimizer), scaler.update(); the optimizer is torch.optim's
           default (foreach) implementation. W warm-up steps (compilation included), then T timed steps between two
           torch.cuda.synchronize() calls (at most --max-seconds: a slower side is timed over the steps done).
           Peak = torch.cuda.max_memory_allocated() from the built module to the end of the run (weights, data,
           gradients, optimizer state, activations), reset between configurations; reserved =
           torch.cuda.max_memory_reserved(). The table's peaks are "allocated / reserved".

Both sides train W + T steps from the same initial weights on the same batches; the final losses are printed as a
sanity check (they agree to the precision's rounding, more loosely in low precision and after many steps).

`--recompute auto,cheap` (or any of auto, cheap, N): onnxamp again with `--recompute MODE` per mode (activation
recomputation: the same bits, less device memory), in a table of its own: steps/s and peak device memory against
onnxamp without it and PyTorch AMP eager at the same precision (the issue's memory target).

`graph steps/s`: onnxamp again with `--cuda-graph on` (the step captured as a CUDA Graph after warm-up and replayed;
the runs' `train: cuda graph:` counts go to the JSON), when the onnxamp has that option; --no-cuda-graph skips it.

Ratios: `ratio` = onnxamp steps/s / torch eager steps/s at the same precision (the fp16 row: against PyTorch AMP
eager), `ratio compile` the same against torch.compile; `AMP speedup` = fp16 steps/s / fp32 steps/s of the same
side. For mlp4096 the script measures, with torch on the same GPU, the cuBLAS FP16 GEMM rate (8192^3) and the device
copy bandwidth (read + write of 512 MiB), and prints the floor of one AMP step: the 8 GEMMs (3 forward, 3 weight
gradients, 2 input gradients) at that rate plus the optimizer's bytes (per parameter: FP32 master read and write,
FP32 gradient read, FP16 copy write = 14 bytes) at that bandwidth; and onnxamp's (and PyTorch's) fraction of it.

Usage: bench_cuda_training.py [--bin-dir DIR | --build-dir DIR] [--models mlp4096,cnn,transformer]
                              [--resnet50 MODEL] [--precisions fp32,fp16,bf16] [--no-compile]
                              [--compile-precisions fp16] [--steps N] [--warmup-steps W] [--repeats N] [--quick]
                              [--batch MODEL=B] [--num-batches N] [--device cuda|cpu] [--tf32] [--work-dir DIR]
                              [--no-cuda-graph] [--recompute MODES] [--markdown] [--json FILE]
--device cpu runs both sides on the CPU (a smoke test of the script with small --batch and --steps). Exit status:
0 done (failed configurations are reported in the table's notes), 77 skipped (no CUDA device for PyTorch, or an
onnxamp without `train --device`), 2 usage error. Run with a Python that has numpy, onnx and a CUDA build of PyTorch.
"""
import argparse
import contextlib
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no bench/__pycache__ in the source tree

import numpy as np  # noqa: E402
from bench_util import ROOT, print_rows, size  # noqa: E402

SEED = 0
WORKLOADS = {
    "mlp4096": {"batch": 512, "loss": "mse", "optimizer": "sgd", "lr": 1e-3, "momentum": 0.0, "steps": 1500},
    "cnn": {"batch": 256, "loss": "ce", "optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "steps": 300},
    "transformer": {"batch": 64, "loss": "ce", "optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.01,
                    "steps": 500},
    "resnet50": {"batch": 128, "loss": "ce", "optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "steps": 40},
}
AMP = {"fp32": "off", "fp16": "fp16", "bf16": "bf16"}
GEMM_N = 8192  # the cuBLAS rate is measured on an N^3 FP16 GEMM
COPY_BYTES = 512 << 20
OPTIMIZER_BYTES_PER_PARAM = 14  # SGD AMP step: FP32 master read + write (8), FP32 gradient read (4), FP16 copy (2)
PEAK_LINE = re.compile(r"peak device memory ([0-9.]+) ?(B|KiB|MiB|GiB)(?: allocated, ([0-9.]+) ?(B|KiB|MiB|GiB) "
                       r"reserved)?")
STEP_LINE = re.compile(r"^step (\d+)/(\d+)  epoch (\d+)  loss (\S+)  scale (\S+)  skipped (\d+)  lr (\S+)  "
                       r"(\S+) samples/s$")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
GRAPH_LINE = re.compile(r"^train: cuda graph: (\d+) captured, (\d+) steps replayed, (\d+) eager, (\d+) failed")


class Failure(Exception):
    pass


# ---------------------------------------------------------------- the data both sides train on


def _dims(vi):
    return [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]


def _index_bound(graph, name):
    """The size of the axis an integer input indexes (Gather's data), or 16."""
    shapes = {t.name: list(t.dims) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == name and node.input[0] in shapes:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            return shapes[node.input[0]][axis]
    return 16


def make_data(model_path, workload, batch, num_batches, npz_path):
    """Writes the inputs and labels of num_batches batches; returns the class axis (1, or -1 for [batch, seq,
    classes] outputs)."""
    import onnx

    g = onnx.load(model_path, load_external_data=False).graph
    inits = {t.name for t in g.initializer}
    rng = np.random.default_rng(SEED)
    n = batch * num_batches
    arrays = {}
    for vi in g.input:
        if vi.name in inits:
            continue
        dims = [n] + _dims(vi)[1:]
        if any(d is None for d in dims):
            raise Failure(f"{model_path}: input {vi.name} has symbolic dims beyond the batch")
        elem = vi.type.tensor_type.elem_type
        if elem == onnx.TensorProto.FLOAT:
            arrays[vi.name] = rng.standard_normal(dims, dtype=np.float32)
        elif elem in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
            dt = np.int64 if elem == onnx.TensorProto.INT64 else np.int32
            arrays[vi.name] = rng.integers(0, _index_bound(g, vi.name), size=dims).astype(dt)
        else:
            raise Failure(f"{model_path}: input {vi.name} has element type {elem}")
    out = [n] + _dims(g.output[0])[1:]
    if WORKLOADS[workload]["loss"] == "mse":
        arrays["labels"] = rng.standard_normal(out, dtype=np.float32)
        class_axis = 1
    elif len(out) == 2:
        arrays["labels"] = rng.integers(0, out[1], size=n).astype(np.int64)
        class_axis = 1
    elif len(out) == 3:
        arrays["labels"] = rng.integers(0, out[2], size=out[:2]).astype(np.int64)
        class_axis = -1
    else:
        raise Failure(f"{model_path}: output dims {out}: no label rule")
    np.savez(npz_path, **arrays)
    return class_axis


def mlp_floor_terms(model_path, batch):
    """(GEMM FLOPs of one training step, parameter count) of an MLP of Gemm layers: 2*B*K*N per layer forward and
    for its weight gradient, and for its input gradient except in the first layer."""
    import onnx

    g = onnx.load(model_path, load_external_data=False).graph
    shapes = {t.name: list(t.dims) for t in g.initializer}
    flops = 0
    first = True
    for node in g.node:
        if node.op_type not in ("Gemm", "MatMul") or node.input[1] not in shapes:
            continue
        k, n = shapes[node.input[1]]
        layer = 2 * batch * k * n
        flops += 2 * layer + (0 if first else layer)
        first = False
    params = sum(int(np.prod(d)) for d in shapes.values() if len(d) > 0 and int(np.prod(d)) > 1)
    return flops, params


# ---------------------------------------------------------------- onnxamp


def train_has_cuda_graph(onnxamp):
    p = subprocess.run([onnxamp, "train", "--help"], capture_output=True, text=True)
    return "--cuda-graph" in p.stdout + p.stderr


def train_has_device(onnxamp):
    p = subprocess.run([onnxamp, "train", "--help"], capture_output=True, text=True)
    return "--device" in p.stdout + p.stderr


def onnxamp_cmd(a, model_path, workload, batch, class_axis, npz, precision, steps, out, graph=False, recompute=None):
    w = WORKLOADS[workload]
    cmd = [a.onnxamp, "train", model_path, "--data", npz, "--labels", "labels", "--loss", w["loss"],
           "--optimizer", w["optimizer"], "--lr", repr(w["lr"]), "--batch-size", str(batch), "--no-shuffle",
           "--steps", str(steps), "--log-every", str(steps), "--seed", str(SEED), "--amp", AMP[precision], "-o", out]
    if w.get("momentum"):
        cmd += ["--momentum", repr(w["momentum"])]
    if "weight_decay" in w:
        cmd += ["--weight-decay", repr(w["weight_decay"])]
    if class_axis != 1:
        cmd += ["--class-axis", str(class_axis)]
    if a.pass_device:
        cmd += ["--device", a.device]
    if graph:
        cmd += ["--cuda-graph", "on"]
    if recompute:
        cmd += ["--recompute", recompute]
    return cmd


def run_onnxamp(a, model_path, workload, batch, class_axis, npz, precision, steps, work, graph=False, recompute=None):
    """One `onnxamp train` run: {seconds, last_loss, peak_bytes}; with `graph`, --cuda-graph on and its counts; with
    `recompute`, --recompute MODE."""
    tag = (".graph" if graph else "") + (f".recompute-{recompute}" if recompute else "")
    out = os.path.join(work, f"{workload}.{precision}.{steps}{tag}.onnx")
    cmd = onnxamp_cmd(a, model_path, workload, batch, class_axis, npz, precision, steps, out, graph, recompute)
    env = dict(os.environ, ONNXAMP_CUDA_TF32="1" if a.tf32 else "0")
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a.run_timeout)
    except subprocess.TimeoutExpired:
        raise Failure(f"onnxamp train --steps {steps} ran past {a.run_timeout:.0f} s")
    seconds = time.monotonic() - start
    with open(out + ".log", "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stderr + p.stdout)
    if os.path.exists(out):
        os.remove(out)  # mlp4096's trained model is 200 MB
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise Failure(f"onnxamp train --steps {steps} exited {p.returncode}: {last}")
    last_loss = peak = reserved = graph_counts = None
    for line in p.stderr.splitlines():
        m = GRAPH_LINE.match(line)
        if m:
            graph_counts = dict(zip(("captured", "replayed", "eager", "failed"), map(int, m.groups())))
        m = STEP_LINE.match(line)
        if m and int(m.group(1)) == steps:
            last_loss = float(m.group(4))
        m = PEAK_LINE.search(line)
        if m and line.startswith("train:"):
            peak = int(float(m.group(1)) * UNITS[m.group(2)])
            if m.group(3):
                reserved = int(float(m.group(3)) * UNITS[m.group(4)])
    return {"seconds": seconds, "last_loss": last_loss, "peak_bytes": peak, "peak_reserved_bytes": reserved,
            "cuda_graph": graph_counts}


def bench_onnxamp(a, model_path, workload, batch, class_axis, npz, precision, timed, work, graph=False,
                  recompute=None):
    """--repeats pairs of runs (short, long); steps/s from the median difference of their wall times."""
    pairs = []
    for _ in range(a.repeats):
        short = run_onnxamp(a, model_path, workload, batch, class_axis, npz, precision, a.warmup_steps, work, graph,
                            recompute)
        long = run_onnxamp(a, model_path, workload, batch, class_axis, npz, precision, a.warmup_steps + timed, work,
                           graph, recompute)
        pairs.append((long["seconds"] - short["seconds"], short, long))
    pairs.sort(key=lambda p: p[0])
    delta, short, long = pairs[len(pairs) // 2]
    if delta <= 0:
        raise Failure(f"the run of {a.warmup_steps + timed} steps took no longer than the run of {a.warmup_steps} "
                      f"({long['seconds']:.3f} s vs {short['seconds']:.3f} s): raise --steps")
    return {"steps_per_s": timed / delta, "timed_steps": timed, "timed_s": delta, "short_s": short["seconds"],
            "long_s": long["seconds"], "deltas_s": [p[0] for p in pairs], "peak_bytes": long["peak_bytes"],
            "peak_reserved_bytes": long["peak_reserved_bytes"],
            "last_loss": long["last_loss"], "total_steps": a.warmup_steps + timed, "cuda_graph": long["cuda_graph"]}


# ---------------------------------------------------------------- torch worker (a separate process per workload)


def _emit(obj):
    print(json.dumps(obj), flush=True)


def _grad_scaler(torch, device, enabled):
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device, enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled and device == "cuda")  # PyTorch before 2.3


def measure_device(torch):
    """cuBLAS FP16 GEMM rate (TFLOP/s, N^3) and device copy bandwidth (bytes/s, read + write)."""
    a = torch.randn(GEMM_N, GEMM_N, device="cuda", dtype=torch.float16)
    b = torch.randn(GEMM_N, GEMM_N, device="cuda", dtype=torch.float16)
    for _ in range(5):
        torch.matmul(a, b)
    gemm = []
    for _ in range(3):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            torch.matmul(a, b)
        e.record()
        e.synchronize()
        gemm.append(s.elapsed_time(e) / 20)
    del a, b
    src = torch.empty(COPY_BYTES // 4, device="cuda", dtype=torch.float32).normal_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    copy = []
    for _ in range(3):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(10):
            dst.copy_(src)
        e.record()
        e.synchronize()
        copy.append(s.elapsed_time(e) / 10)
    del src, dst
    gemm_ms, copy_ms = float(np.median(gemm)), float(np.median(copy))
    return {"gemm_n": GEMM_N, "gemm_ms": gemm_ms, "gemm_tflops": 2.0 * GEMM_N ** 3 / gemm_ms / 1e9,
            "copy_bytes": COPY_BYTES, "copy_ms": copy_ms, "copy_bytes_per_s": 2.0 * COPY_BYTES / copy_ms * 1e3}


def torch_worker(a):
    """Trains the workload in every requested precision and mode; prints one JSON line each."""
    import warnings

    import onnx
    import torch

    import onnx_torch

    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    dev = a.device
    cuda = dev == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
        torch.backends.cudnn.benchmark = True
        _emit({"kind": "device", "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "cuda": torch.version.cuda})
        if a.floor:
            _emit({"kind": "floor", **measure_device(torch)})
    else:
        _emit({"kind": "device", "gpu": "cpu", "torch": torch.__version__, "cuda": None})
    w = WORKLOADS[a.workload]
    proto = onnx.load(a.model_path)
    data = np.load(a.npz)
    labels = torch.from_numpy(data["labels"]).to(dev)
    init_names = {t.name for t in proto.graph.initializer}
    inputs = [torch.from_numpy(data[i.name]).to(dev) for i in proto.graph.input if i.name not in init_names]
    n = labels.shape[0]
    starts = list(range(0, n - a.batch + 1, a.batch))
    batches = [([x[s:s + a.batch] for x in inputs], labels[s:s + a.batch]) for s in starts]
    if w["loss"] == "mse":
        criterion = torch.nn.MSELoss()
    else:
        criterion = torch.nn.CrossEntropyLoss(ignore_index=-100)

    for precision in a.precisions.split(","):
        for mode in ("eager", "compile"):
            if mode == "compile" and precision not in a.compile_precisions.split(","):
                continue
            row = {"kind": "run", "precision": precision, "mode": mode}
            try:
                row.update(torch_run(torch, onnx_torch, a, proto, w, batches, criterion, precision, mode))
            except Exception as e:  # noqa: BLE001 - a failure of one configuration is a result to report
                msg = str(e).strip().splitlines()
                row["error"] = f"{type(e).__name__}: {msg[0] if msg else ''}"[:300]
            _emit(row)
            if mode == "compile" and hasattr(torch, "compile"):
                import torch._dynamo

                torch._dynamo.reset()  # drop the compiled graphs and the module they hold
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
    return 0


def torch_run(torch, onnx_torch, a, proto, w, batches, criterion, precision, mode):
    dev = a.device
    cuda = dev == "cuda"
    torch.manual_seed(SEED)
    module = onnx_torch.OnnxTorchModule(proto, device=dev, trainable=True)
    module.train()
    gc.collect()
    if cuda:  # the peak from here on: not the initializers' transient copies while the module is built
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    params = list(module.params)
    if w["optimizer"] == "sgd":
        opt = torch.optim.SGD(params, lr=w["lr"], momentum=w.get("momentum", 0.0))
    else:
        opt = torch.optim.AdamW(params, lr=w["lr"], weight_decay=w.get("weight_decay", 0.01))
    amp_dtype = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    scaler = _grad_scaler(torch, dev, precision == "fp16")
    fwd = module
    if mode == "compile":
        fwd = torch.compile(module)
    class_axis = a.class_axis

    def step(xs, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev, dtype=amp_dtype) if amp_dtype is not None else contextlib.nullcontext():
            (out,) = fwd(*xs)
            if class_axis != 1:
                out = out.movedim(class_axis, 1)
            loss = criterion(out, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    nb = len(batches)
    t0 = time.perf_counter()
    loss = None
    for i in range(a.warmup_steps):
        loss = step(*batches[i % nb])
    if cuda:
        torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    done = 0
    t0 = time.perf_counter()
    for i in range(a.warmup_steps, a.warmup_steps + a.timed_steps):
        loss = step(*batches[i % nb])
        done += 1
        if done % 50 == 0 and time.perf_counter() - t0 > a.max_seconds:
            break
    if cuda:
        torch.cuda.synchronize()
    timed_s = time.perf_counter() - t0
    row = {"steps_per_s": done / timed_s, "timed_steps": done, "timed_s": timed_s, "warmup_s": warm_s,
           "total_steps": a.warmup_steps + done, "last_loss": float(loss.item()) if loss is not None else None,
           "peak_bytes": torch.cuda.max_memory_allocated() if cuda else None,
           "peak_reserved_bytes": torch.cuda.max_memory_reserved() if cuda else None,
           "loss_scale": float(scaler.get_scale()) if precision == "fp16" and scaler.is_enabled() else None}
    return row  # the module, optimizer and scaler go with this frame


def run_torch(a, workload, model_path, npz, batch, class_axis, timed):
    """Runs the worker for one workload; returns ([rows], error line)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", workload, "--model-path", model_path,
           "--npz", npz, "--batch-size", str(batch), "--class-axis", str(class_axis), "--timed-steps", str(timed),
           "--warmup-steps", str(a.warmup_steps), "--precisions", a.precisions, "--compile-precisions",
           "" if a.no_compile else a.compile_precisions, "--max-seconds", str(a.max_seconds), "--device", a.device]
    if a.tf32:
        cmd.append("--tf32")
    if workload == "mlp4096" and a.device == "cuda":
        cmd.append("--floor")
    err = None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.worker_timeout)
        out, rc, stderr = p.stdout, p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc, stderr = None, ""
        err = f"torch worker stopped after {a.worker_timeout:.0f} s"
    rows = []
    for line in out.splitlines():
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    if rc not in (0, None):
        lines = stderr.strip().splitlines()
        err = f"torch worker exit {rc}: {lines[-1] if lines else ''}"
    return rows, err


# ---------------------------------------------------------------- driver


def model_file(a, name, work):
    if name == "resnet50":
        return os.path.abspath(a.resnet50)
    if name == "mlp4096":
        path = os.path.join(work, "mlp4096.onnx")
        if not os.path.exists(path):
            subprocess.run([a.gen, work, "--only", "mlp4096"], check=True, stdout=subprocess.DEVNULL)
        return path
    return os.path.join(a.models_dir, name + ".onnx")


def find_binaries(a):
    if a.bin_dir:
        d = os.path.abspath(a.bin_dir)
        a.onnxamp, a.gen = os.path.join(d, "onnxamp"), os.path.join(d, "onnxamp_gen_models")
    else:
        from bench_util import find_build_dir

        d = find_build_dir(a.build_dir, "tools/onnxamp", "onnxamp")
        a.onnxamp, a.gen = os.path.join(d, "tools", "onnxamp"), os.path.join(d, "tools", "onnxamp_gen_models")
    for exe in (a.onnxamp, a.gen):
        if not os.access(exe, os.X_OK):
            sys.exit(f"error: {exe} not found (pass --bin-dir or --build-dir)")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", help="folder with onnxamp and onnxamp_gen_models (a GPU bundle's bin/)")
    ap.add_argument("--build-dir", help="build folder with tools/onnxamp (default: $ONNXAMP_BUILD_DIR or build)")
    ap.add_argument("--models-dir", default=os.environ.get("ONNXAMP_MODELS_DIR", os.path.join(ROOT, "models")))
    ap.add_argument("--models", default="mlp4096,cnn,transformer")
    ap.add_argument("--resnet50", help="an ResNet-50 ONNX model: adds the resnet50 workload (batch 128)")
    ap.add_argument("--precisions", default="fp32,fp16,bf16")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--compile-precisions", default="fp16", help="precisions that also run under torch.compile")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (default per workload: mlp4096 1500, cnn 300, "
                                                         "transformer 500, resnet50 40)")
    ap.add_argument("--warmup-steps", type=int, default=30, help="steps of the short onnxamp run and torch's warm-up")
    ap.add_argument("--repeats", type=int, default=1, help="onnxamp: pairs of runs; the median difference counts")
    ap.add_argument("--quick", action="store_true", help="a quarter of the timed steps, fp32 and fp16 only, no "
                                                         "torch.compile")
    ap.add_argument("--batch", action="append", default=[], help="MODEL=B: another batch size (repeatable)")
    ap.add_argument("--num-batches", type=int, default=4, help="batches in the data set")
    ap.add_argument("--max-seconds", type=float, default=10.0, help="torch: most seconds of one timed loop")
    ap.add_argument("--run-timeout", type=float, default=300.0, help="most seconds of one onnxamp run")
    ap.add_argument("--worker-timeout", type=float, default=240.0, help="most seconds of one torch worker")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--no-cuda-graph", action="store_true",
                    help="skip the onnxamp runs with --cuda-graph on (timed beside the eager ones by default)")
    ap.add_argument("--recompute", default="",
                    help="MODES: also run onnxamp with --recompute MODE for each (comma-separated: auto, cheap, N)")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 in FP32 GEMMs and convolutions on both sides")
    ap.add_argument("--work-dir", help="folder for the generated model, data and logs (default: a temporary one)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", help="also write every figure to this file")
    # Worker mode (internal).
    ap.add_argument("--torch-worker", dest="workload", help=argparse.SUPPRESS)
    ap.add_argument("--model-path", help=argparse.SUPPRESS)
    ap.add_argument("--npz", help=argparse.SUPPRESS)
    ap.add_argument("--batch-size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--class-axis", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--timed-steps", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--floor", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.batch_size_of = {}
    for spec in a.batch:
        name, _, value = spec.partition("=")
        if name not in WORKLOADS or not value.isdigit() or int(value) < 1:
            ap.error(f"--batch {spec}: expected MODEL=B with MODEL one of {','.join(WORKLOADS)}")
        a.batch_size_of[name] = int(value)
    for p in a.precisions.split(","):
        if p not in AMP:
            ap.error(f"--precisions: unknown '{p}' (fp32, fp16, bf16)")
    if a.quick:
        a.no_compile = True
        a.precisions = ",".join(p for p in a.precisions.split(",") if p in ("fp32", "fp16")) or "fp16"
    return a


def main(argv=None):
    a = parse_args(argv)
    if a.workload:
        a.batch = a.batch_size
        return torch_worker(a)
    try:
        import onnx  # noqa: F401
        import torch
    except ImportError as e:
        print(f"skipped: the training benchmark needs numpy, onnx and torch in {sys.executable} ({e})")
        return 77
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"skipped: torch {torch.__version__} sees no CUDA device")
        return 77
    find_binaries(a)
    a.pass_device = train_has_device(a.onnxamp)
    a.cuda_graph = a.device == "cuda" and not a.no_cuda_graph and train_has_cuda_graph(a.onnxamp)
    if a.device == "cuda" and not a.pass_device:
        print(f"skipped: {a.onnxamp} train has no --device option (no CUDA trainer in this build)")
        return 77
    models = [m for m in a.models.split(",") if m]
    if a.resnet50:
        models.append("resnet50")
    for m in models:
        if m not in WORKLOADS or (m == "resnet50" and not a.resnet50):
            sys.exit(f"error: --models: unknown workload '{m}' (mlp4096, cnn, transformer; resnet50 with --resnet50)")
    work = a.work_dir or tempfile.mkdtemp(prefix="onnxamp_bench_cuda_training.")
    os.makedirs(work, exist_ok=True)
    start = time.monotonic()
    print(f"onnxamp: {a.onnxamp}; device {a.device}; precisions {a.precisions}; torch.compile "
          f"{'off' if a.no_compile else 'for ' + a.compile_precisions}; files in {work}", file=sys.stderr)

    results = []
    gpu = {}
    floor = None
    for m in models:
        w = WORKLOADS[m]
        batch = a.batch_size_of.get(m, w["batch"])
        timed = a.steps or w["steps"]
        if a.quick and not a.steps:
            timed = max(10, timed // 4)
        entry = {"model": m, "batch": batch, "timed_steps": timed, "warmup_steps": a.warmup_steps, "rows": {},
                 "errors": []}
        results.append(entry)
        try:
            path = model_file(a, m, work)
            npz = os.path.join(work, f"{m}.b{batch}.npz")
            class_axis = make_data(path, m, batch, a.num_batches, npz)
        except (Failure, OSError, subprocess.CalledProcessError) as e:
            entry["errors"].append(f"data: {e}")
            write_json(a, gpu, results, complete=m == models[-1])
            continue
        for p in a.precisions.split(","):
            try:
                entry["rows"].setdefault(p, {})["onnxamp"] = bench_onnxamp(a, path, m, batch, class_axis, npz, p,
                                                                           timed, work)
            except Failure as e:
                entry["errors"].append(f"onnxamp {p}: {e}")
            ours = entry["rows"].get(p, {}).get("onnxamp")
            print(f"  {m} {p}: onnxamp {ours['steps_per_s']:.1f} steps/s" if ours else f"  {m} {p}: onnxamp failed",
                  file=sys.stderr, flush=True)
            if a.cuda_graph:
                try:
                    entry["rows"].setdefault(p, {})["onnxamp-graph"] = bench_onnxamp(
                        a, path, m, batch, class_axis, npz, p, timed, work, graph=True)
                    g = entry["rows"][p]["onnxamp-graph"]
                    print(f"  {m} {p}: onnxamp --cuda-graph on {g['steps_per_s']:.1f} steps/s ({g['cuda_graph']})",
                          file=sys.stderr, flush=True)
                except Failure as e:
                    entry["errors"].append(f"onnxamp --cuda-graph on {p}: {e}")
            for mode in filter(None, a.recompute.split(",")):
                try:
                    r = bench_onnxamp(a, path, m, batch, class_axis, npz, p, timed, work, recompute=mode)
                    entry["rows"].setdefault(p, {})["onnxamp-recompute-" + mode] = r
                    print(f"  {m} {p}: onnxamp --recompute {mode} {r['steps_per_s']:.1f} steps/s", file=sys.stderr,
                          flush=True)
                except Failure as e:
                    entry["errors"].append(f"onnxamp --recompute {mode} {p}: {e}")
        rows, err = run_torch(a, m, path, npz, batch, class_axis, timed)
        if err:
            entry["errors"].append(err)
        for r in rows:
            if r["kind"] == "device":
                gpu = r
            elif r["kind"] == "floor":
                floor = r
            elif r["kind"] == "run":
                entry["rows"].setdefault(r["precision"], {})["torch-" + r["mode"]] = r
                if "error" in r:
                    entry["errors"].append(f"torch {r['mode']} {r['precision']}: {r['error']}")
                else:
                    print(f"  {m} {r['precision']}: torch {r['mode']} {r['steps_per_s']:.1f} steps/s",
                          file=sys.stderr, flush=True)
        if m == "mlp4096" and floor:
            flops, params = mlp_floor_terms(path, batch)
            floor_ms = flops / (floor["gemm_tflops"] * 1e9) + params * OPTIMIZER_BYTES_PER_PARAM / \
                floor["copy_bytes_per_s"] * 1e3
            entry["floor"] = {**floor, "gemm_flops": flops, "params": params, "floor_ms": floor_ms,
                              "floor_steps_per_s": 1e3 / floor_ms}
        write_json(a, gpu, results, complete=m == models[-1])  # after each workload: a cut-off run keeps these
    report(a, results, gpu, time.monotonic() - start)
    return 0


def write_json(a, gpu, results, complete):
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": gpu, "warmup_steps": a.warmup_steps, "tf32": a.tf32, "complete": complete,
                       "results": results}, f, indent=1)


def _sps(row):
    if not row or "steps_per_s" not in row:
        return None
    return row["steps_per_s"]


def _fmt_sps(v):
    return "-" if v is None else (f"{v:.1f}" if v < 100 else f"{v:.0f}")


def _ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


def _peaks(row):
    """'allocated / reserved' of a side's row, '-' without one."""
    if not row or row.get("peak_bytes") is None:
        return "-"
    reserved = row.get("peak_reserved_bytes")
    return size(row["peak_bytes"]) + (f" / {size(reserved)}" if reserved is not None else "")


def report(a, results, gpu, seconds):
    print(f"GPU: {gpu.get('gpu', 'unknown')}; torch {gpu.get('torch', '?')} (CUDA {gpu.get('cuda')}); TF32 "
          f"{'on' if a.tf32 else 'off'}; {a.num_batches} batches on the device, cycled; {seconds:.0f} s")
    print(f"onnxamp steps/s = timed steps / (wall time of `train --steps W+T` - wall time of `train --steps W`), "
          f"W = {a.warmup_steps}: start-up, graph building, data upload and warm-up cancel; torch: T steps after W "
          f"warm-up steps between two synchronisations. fp16 = AMP (autocast + GradScaler; onnxamp --amp fp16)")
    header = ["model", "batch", "precision", "steps", "onnxamp steps/s", "graph steps/s", "torch steps/s",
              "compile steps/s",
              "ratio", "ratio compile", "AMP speedup onnxamp", "AMP speedup torch", "onnxamp peak alloc / resv",
              "torch peak alloc / resv", "compile peak alloc / resv", "final loss onnxamp / torch"]
    table, notes = [], []
    for e in results:
        rows = e["rows"]
        fp32 = rows.get("fp32", {})
        for p in a.precisions.split(","):
            r = rows.get(p, {})
            ours, eager, comp = r.get("onnxamp"), r.get("torch-eager"), r.get("torch-compile")
            speed_ours = speed_torch = "-"
            if p == "fp16":
                speed_ours = _ratio(_sps(ours), _sps(fp32.get("onnxamp")))
                speed_torch = _ratio(_sps(eager), _sps(fp32.get("torch-eager")))
            loss = "-"
            if ours and eager and ours.get("last_loss") is not None and eager.get("last_loss") is not None and \
                    ours["total_steps"] == eager.get("total_steps"):
                loss = f"{ours['last_loss']:.4g} / {eager['last_loss']:.4g}"
            table.append([e["model"], str(e["batch"]), p, str(e["timed_steps"]), _fmt_sps(_sps(ours)),
                          _fmt_sps(_sps(r.get("onnxamp-graph"))), _fmt_sps(_sps(eager)), _fmt_sps(_sps(comp)) if p in a.compile_precisions.split(",")
                          and not a.no_compile else "-", _ratio(_sps(ours), _sps(eager)),
                          _ratio(_sps(ours), _sps(comp)), speed_ours, speed_torch,
                          _peaks(ours), _peaks(eager), _peaks(comp), loss])
        fl = e.get("floor")
        if fl:
            ours = _sps(rows.get("fp16", {}).get("onnxamp"))
            theirs = _sps(rows.get("fp16", {}).get("torch-eager"))
            frac = f"onnxamp {ours / fl['floor_steps_per_s']:.0%} of it" if ours else "onnxamp: no fp16 run"
            if theirs:
                frac += f", torch AMP eager {theirs / fl['floor_steps_per_s']:.0%}"
            notes.append(
                f"{e['model']} floor of one AMP step: {fl['gemm_flops'] / 1e9:.0f} GFLOP of GEMMs at the cuBLAS FP16 "
                f"rate ({fl['gemm_n']}^3: {fl['gemm_tflops']:.0f} TFLOP/s) + {fl['params'] / 1e6:.1f}M parameters x "
                f"{OPTIMIZER_BYTES_PER_PARAM} B at the copy bandwidth ({fl['copy_bytes_per_s'] / 1e12:.2f} TB/s) = "
                f"{fl['floor_ms']:.3f} ms = {fl['floor_steps_per_s']:.0f} steps/s; {frac}")
        for err in e["errors"]:
            notes.append(f"{e['model']}: {err}")
        if a.device == "cuda" and any(r.get("onnxamp") and r["onnxamp"].get("peak_bytes") is None
                                      for r in rows.values()):
            notes.append(f"{e['model']}: onnxamp printed no `train: peak device memory` line")
    print_rows(header, table, a.markdown, notes, right_from=3)
    modes = list(filter(None, a.recompute.split(",")))
    if modes:
        print("\nActivation recomputation (onnxamp --recompute MODE): time ratio = the mode's step time over onnxamp's "
              "without it; peaks as above (allocated / reserved)")
        header = ["model", "batch", "precision", "--recompute", "steps/s", "time ratio", "peak alloc / resv",
                  "onnxamp without", "torch eager", "final loss"]
        table = []
        for e in results:
            for p in a.precisions.split(","):
                r = e["rows"].get(p, {})
                plain = r.get("onnxamp")
                for mode in modes:
                    ours = r.get("onnxamp-recompute-" + mode)
                    loss = "-" if not ours or ours.get("last_loss") is None else f"{ours['last_loss']:.6g}"
                    table.append([e["model"], str(e["batch"]), p, mode, _fmt_sps(_sps(ours)),
                                  _ratio(_sps(plain), _sps(ours)), _peaks(ours), _peaks(plain),
                                  _peaks(r.get("torch-eager")), loss])
        print_rows(header, table, a.markdown, [], right_from=4)


if __name__ == "__main__":
    sys.exit(main())
