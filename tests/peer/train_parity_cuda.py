#!/usr/bin/env python3
"""PyTorch-AMP parity of `onnxamp train --device cuda`: the same network, initial weights, data, batches, loss and
optimizer as PyTorch on the same GPU, step by step.

Data, models and batches are train_parity.py's (models/mlp.onnx, cnn.onnx, transformer.onnx; 92 seeded samples in
batches of 8 in file order, the partial batch of 4 included, cycling over epochs; cross-entropy, --class-axis -1 for
the transformer). PyTorch runs the same ONNX graph through bench/onnx_torch.py (trainable=True) on the device, with
TF32 off, torch.use_deterministic_algorithms(True, warn_only=True) and cudnn.benchmark off. onnxamp runs as
`onnxamp train MODEL --device cuda --data D.npz --labels labels --loss ce --no-shuffle --batch-size 8 --log-every 1
--seed 0 ...`; every step's loss, loss scale (the scale that step used) and skipped count are read from stderr.

Checks (one line each; `FAIL ...` lines and exit 1 on any failure):

  amp       --amp fp16 against torch.autocast("cuda", float16) + torch.amp.GradScaler() (defaults: init scale 65536,
            growth 2 every 2000 steps, backoff 0.5, as onnxamp's dynamic scaling), 100 steps (--amp-steps): every
            step's loss within 1e-2 relative, and the same steps skipped with the same loss scales. mlp and cnn with
            SGD(lr 0.05), the transformer with AdamW(lr 1e-3, weight decay 0.01): where the loss falls steeply under
            SGD(lr 0.1) (train_parity.py's rate) the transformer's per-step losses in two precisions drift apart by up
            to 6e-2 (onnxamp --amp fp16 against its own FP32 on the CPU, steps 55-75), so that rate would test the
            trajectory's sensitivity, not the kernels; at these rates onnxamp's CPU fp16 run stays within 5e-4 (mlp
            1.3e-3, cnn 5.9e-3) of its FP32 run over the 100 steps;
  overflow  mlp and cnn, --amp fp16, SGD(lr 0.05), 60 steps: batch 4 of every epoch (steps 4, 16, 28, ...) has its
            inputs multiplied by 1e6, finite in float32 and inf in float16, so that the FP16 forward overflows on
            both sides whatever the scale: both must skip exactly those steps and back off the scale at each (the
            scales of all steps equal), and the losses of the other steps agree within 1e-2;
  fp32      --amp off against torch FP32, SGD and AdamW, 20 steps: every step's loss within 1e-4 relative;
  loss      mlp and transformer: the fp32 check's SGD run with --label-smoothing 0.1 and --class-weights (class c
            weighs 0.5 + c / C) against CrossEntropyLoss(weight=..., label_smoothing=0.1) (the loss's extra nodes,
            on the device);
  pg        parameter groups: the fp32 check's AdamW run with --weight-decay 0.1 --no-decay-1d --lr-scale HEAD=5
            --beta2 0.98 --eps 1e-7
            against AdamW over torch param_groups (weight_decay 0 below 2 dims, lr * 5 for the output layer), every
            step's loss within 1e-4 relative (the fused optimizer's per-group scalar columns);
  opt       the other optimizers on the fused optimizer's kernels, FP32, 20 steps (RMSprop on the cnn: 10, before
            train_parity.py's branch flip at step 11, which RMSprop's loss shows at once), every step's loss within 1e-4
            relative: --optimizer rmsprop --alpha 0.9 --momentum 0.5 --weight-decay 1e-3 against torch.optim.RMSprop
            (not centered: centered RMSprop's float32 cancellation moves the cnn's losses by 7e-5 at step 11 in torch
            itself, float32 against float64; the GPU tests check the centered kernel against the CPU bit for bit) and
            --optimizer lion --weight-decay 0.1 against Lion in torch (tests/peer/lion_torch.py), --optimizer adagrad
            --lr-decay 0.01 --initial-accumulator 0.1 --weight-decay 1e-3 against torch.optim.Adagrad, --optimizer
            radam --weight-decay 1e-3 against torch.optim.RAdam, --optimizer nadam --weight-decay 1e-3
            --momentum-decay 0.01 against torch 2.x's NAdam (tests/peer/nadam_torch.py; torch 2.x has it as well);
  ema       the fp32 check's SGD run with --ema 0.9 --ema-warmup against torch keeping the average by hand
            (train_parity.py's ema check): every step's loss within 1e-4 relative, and the exported model (the
            averages of the parameters and BatchNorm statistics) within 1e-3 of torch's averages, per tensor
            max|onnxamp - torch| / max|torch|;
  digits    scripts/demo.sh's training step (tests/peer/train_digits.py's flags: FP16 AMP, AdamW, 20 epochs on the
            UCI digits, --val-split 0.2) on --device cuda and on the CPU: the GPU run's validation accuracy at least
            95% and within 0.5 points of the CPU run's. Skipped when the digits file is missing (--digits, default
            $ONNXAMP_DIGITS or build/data/digits.csv.gz, which scripts/get_digits.sh writes).

Usage: python3 tests/peer/train_parity_cuda.py [--onnxamp BIN] [--checks amp,overflow,fp32,loss,pg,opt,ema,digits]
                                               [--models mlp,cnn,transformer] [--amp-steps N] [--quick]
                                               [--digits FILE] [--device cuda|cpu] [--amp-dtype fp16|bf16]
                                               [--jobs N] [--keep DIR]
--device cpu runs both sides on the CPU (onnxamp without --device when its train command has none): a smoke test of
the script, with --amp-dtype bf16 where the local PyTorch has no float16 CPU autocast.
Exit status: 0 every check passed, 1 a failure, 2 usage error, 77 skipped (no torch/onnx/numpy, no CUDA device for
PyTorch, or an onnxamp whose train command has no --device).
"""
import argparse
import concurrent.futures
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

# cuBLAS needs this before the CUDA context exists for deterministic GEMMs (use_deterministic_algorithms).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
    import torch
except ImportError as e:
    print(f"skipped: the GPU training parity needs torch, onnx and numpy in {sys.executable} ({e})")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import onnx_torch  # noqa: E402  (bench/onnx_torch.py)
import train_data  # noqa: E402  (tests/peer/train_data.py)
import train_digits  # noqa: E402  (tests/peer/train_digits.py: the demo's training flags)
from train_data import Failure  # noqa: E402
from lion_torch import Lion  # noqa: E402  (tests/peer/lion_torch.py)
from nadam_torch import NAdam  # noqa: E402  (tests/peer/nadam_torch.py)

warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

NUM_SAMPLES = 92  # as train_parity.py: 11 full batches of 8 and a partial one of 4 per epoch
BATCH = 8
SEED = 0
AMP_STEPS = 100
FP32_STEPS = 20
OVERFLOW_STEPS = 60
AMP_RUNS = {"mlp": ("sgd", 0.05), "cnn": ("sgd", 0.05), "transformer": ("adamw", 1e-3)}
FP32_LR = {"mlp": {"sgd": 0.05, "adamw": 1e-3}, "cnn": {"sgd": 0.05, "adamw": 1e-3},
           "transformer": {"sgd": 0.1, "adamw": 1e-3}}
OVERFLOW_MODELS = ("mlp", "cnn")
OVERFLOW_BATCH = 3  # 0-based batch of each epoch whose inputs overflow float16
OVERFLOW_FACTOR = 1e6
AMP_TOL = 1e-2
FP32_TOL = 1e-4
# The pg check (as train_parity.py's): the output layer at PG_FACTOR times the learning rate, AdamW's weight decay on
# parameters of 2 or more dims only.
PG_HEAD = {"mlp": r"^fc2\.", "cnn": r"^fc\.", "transformer": r"^lm_head\."}
PG_FACTOR = 5.0
PG_WEIGHT_DECAY = 0.1
PG_BETA2 = 0.98  # and eps 1e-7, through --beta2 and --eps
PG_EPS = 1e-7
# The opt check's optimizers: the learning rate and options of each, on the command line and for torch.
OPT_RUNS = {"rmsprop": (1e-3, ("--alpha", "0.9", "--momentum", "0.5", "--weight-decay", "1e-3"),
                        {"alpha": 0.9, "momentum": 0.5, "weight_decay": 1e-3}),
            "adagrad": (1e-2, ("--lr-decay", "0.01", "--initial-accumulator", "0.1", "--weight-decay", "1e-3"),
                        {"lr_decay": 0.01, "initial_accumulator_value": 0.1, "weight_decay": 1e-3}),
            "radam": (1e-3, ("--weight-decay", "1e-3"), {"weight_decay": 1e-3}),
            "lion": (3e-4, ("--weight-decay", "0.1"), {"weight_decay": 0.1}),
            "nadam": (1e-3, ("--weight-decay", "1e-3", "--momentum-decay", "0.01"),
                      {"weight_decay": 1e-3, "momentum_decay": 0.01})}
EMA_DECAY = 0.9
EMA_TOL = 1e-3
DIGITS_MIN = 95.0
DIGITS_DIFF = 0.5
STEP_LINE = re.compile(r"^step (\d+)/(\d+)  epoch (\d+)  loss (\S+)  scale (\S+)  skipped (\d+)  lr (\S+)  "
                       r"(\S+) samples/s$")


# ---------------------------------------------------------------- data


def batches_per_epoch():
    return -(-NUM_SAMPLES // BATCH)


def batch_rows(step):
    i = step % batches_per_epoch()
    return slice(i * BATCH, min((i + 1) * BATCH, NUM_SAMPLES))


def make_data(model_path, npz_path, overflow=False):
    """train_parity.py's data (the same seed); with overflow, the rows of batch OVERFLOW_BATCH scaled by
    OVERFLOW_FACTOR in every float input. Returns (class_axis, arrays)."""
    class_axis, arrays = train_data.make_data(model_path, NUM_SAMPLES, np.random.default_rng(SEED))
    if overflow:
        rows = slice(OVERFLOW_BATCH * BATCH, (OVERFLOW_BATCH + 1) * BATCH)
        floats = [n for n, a in arrays.items() if n != "labels" and a.dtype == np.float32]
        if not floats:
            raise Failure(f"{model_path}: no float input to make overflow")
        for n in floats:
            arrays[n][rows] *= np.float32(OVERFLOW_FACTOR)
    np.savez(npz_path, **arrays)
    return class_axis, arrays


# ---------------------------------------------------------------- onnxamp


def train_has_device(binary):
    p = subprocess.run([binary, "train", "--help"], capture_output=True, text=True)
    return "--device" in p.stdout + p.stderr


def class_weights(model_path, class_axis):
    """The loss check's weights: 0.5 + c / C for class c of the model's output."""
    classes = onnx.load(model_path).graph.output[0].type.tensor_type.shape.dim[class_axis].dim_value
    return [0.5 + c / classes for c in range(classes)]


def run_onnxamp(a, model_path, npz, class_axis, optimizer, lr, steps, amp, out_path, smoothing=0.0, weights=None,
                head=None, ema=None):
    """`onnxamp train` on a.device; returns {losses, scales, skipped (per step, bool), header}."""
    cmd = [a.onnxamp, "train", model_path, "--data", npz, "--labels", "labels", "--loss", "ce", "--optimizer",
           optimizer, "--lr", repr(lr), "--steps", str(steps), "--batch-size", str(BATCH), "--no-shuffle",
           "--log-every", "1", "--seed", str(SEED), "--amp", amp, "-o", out_path]
    if head is not None:
        cmd += ["--weight-decay", repr(PG_WEIGHT_DECAY), "--no-decay-1d", "--lr-scale", f"{head}={PG_FACTOR!r}",
                "--beta2", repr(PG_BETA2), "--eps", repr(PG_EPS)]
    elif optimizer == "adamw":
        cmd += ["--weight-decay", "0.01"]
    elif optimizer in OPT_RUNS:
        cmd += list(OPT_RUNS[optimizer][1])
    if ema is not None:
        cmd += ["--ema", repr(ema), "--ema-warmup"]
    if class_axis != 1:
        cmd += ["--class-axis", str(class_axis)]
    if smoothing:
        cmd += ["--label-smoothing", repr(smoothing)]
    if weights:
        cmd += ["--class-weights", ",".join(repr(w) for w in weights)]
    cmd += device_flags(a)
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, ONNXAMP_CUDA_TF32="0"))
    with open(out_path + ".log", "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stderr + p.stdout)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise Failure(f"onnxamp train exited {p.returncode}: {last} (log: {out_path}.log)")
    losses, scales, skipped, header = [], [], [], ""
    count = 0
    for line in p.stderr.splitlines():
        m = STEP_LINE.match(line)
        if m:
            if int(m.group(1)) != len(losses) + 1:
                raise Failure(f"onnxamp train: step line {m.group(1)} out of order: {line}")
            losses.append(float(m.group(4)))
            scales.append(float(m.group(5)) if amp == "fp16" else 1.0)
            skipped.append(int(m.group(6)) > count)
            count = int(m.group(6))
        elif line.startswith("train: ") and not header:
            header = line
    if len(losses) != steps:
        raise Failure(f"onnxamp train: {len(losses)} step lines, expected {steps} (log: {out_path}.log)")
    out = {"losses": np.array(losses), "scales": scales, "skipped": skipped, "header": header}
    if ema is not None:
        out["weights"] = {t.name: numpy_helper.to_array(t) for t in onnx.load(out_path).graph.initializer}
    return out


def device_flags(a):
    return ["--device", a.device] if a.pass_device else ["--threads", "1"]


# ---------------------------------------------------------------- torch


def grad_scaler(device, enabled):
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device, enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled and device == "cuda")  # PyTorch before 2.3


def run_torch(a, model_path, arrays, class_axis, optimizer, lr, steps, amp, smoothing=0.0, weights=None,
              head=None, ema=None):
    """Trains the ONNX graph on a.device; returns {losses, scales (each step's), skipped (per step)}. `head`: AdamW
    over the pg check's param_groups. `ema`: the decay of the ema check's averages, returned as "ema" by ONNX name."""
    dev = a.device
    torch.manual_seed(SEED)
    module = onnx_torch.load(model_path, device=dev, trainable=True)
    module.train()
    params = list(module.params)
    if head is not None:
        groups = {}
        for n, p in module.param_by_name.items():
            groups.setdefault((PG_FACTOR if re.search(head, n) else 1.0, p.dim() >= 2), []).append(p)
        opt = torch.optim.AdamW([{"params": ps, "lr": lr * f, "weight_decay": PG_WEIGHT_DECAY if d else 0.0}
                                 for (f, d), ps in groups.items()], lr=lr, weight_decay=PG_WEIGHT_DECAY,
                                betas=(0.9, PG_BETA2), eps=PG_EPS)
    elif optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=lr, momentum=0)
    elif optimizer == "rmsprop":
        opt = torch.optim.RMSprop(params, lr=lr, **OPT_RUNS["rmsprop"][2])
    elif optimizer == "adagrad":
        opt = torch.optim.Adagrad(params, lr=lr, **OPT_RUNS["adagrad"][2])
    elif optimizer == "radam":
        opt = torch.optim.RAdam(params, lr=lr, **OPT_RUNS["radam"][2])
    elif optimizer == "lion":
        opt = Lion(params, lr=lr, **OPT_RUNS["lion"][2])
    elif optimizer == "nadam":
        opt = NAdam(params, lr=lr, **OPT_RUNS["nadam"][2])
    else:
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    w = None if weights is None else torch.tensor(weights, dtype=torch.float32, device=dev)
    criterion = torch.nn.CrossEntropyLoss(weight=w, reduction="mean", ignore_index=-100, label_smoothing=smoothing)
    inputs = [torch.from_numpy(arrays[n]).to(dev) for n in module.input_names]
    labels = torch.from_numpy(arrays["labels"]).to(dev)
    amp_dtype = {"off": None, "fp16": torch.float16, "bf16": torch.bfloat16}[amp]
    scaler = grad_scaler(dev, amp == "fp16")
    losses, scales, skipped = [], [], []
    tracked = list(module.param_by_name.items()) + list(module.buffer_by_name.items())
    averages = {n: t.detach().clone() for n, t in tracked} if ema is not None else None
    for step in range(steps):
        rows = batch_rows(step)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev, dtype=amp_dtype) if amp_dtype is not None else contextlib.nullcontext():
            (logits,) = module(*[x[rows] for x in inputs])
            if class_axis != 1:
                logits = logits.movedim(class_axis, 1)
            loss = criterion(logits, labels[rows])
        before = float(scaler.get_scale()) if scaler.is_enabled() else 1.0
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        after = float(scaler.get_scale()) if scaler.is_enabled() else 1.0
        if averages is not None and after >= before:  # a taken step (train_parity.py's average)
            decay = min(ema, (1 + step) / (10 + step))
            with torch.no_grad():
                for n, t in tracked:
                    averages[n].lerp_(t.detach(), 1 - decay)
        losses.append(loss.item())
        scales.append(before)
        skipped.append(after < before)  # a backoff; growth needs 2000 clean steps, more than any run here
    out = {"losses": np.array(losses), "scales": scales, "skipped": skipped}
    if averages is not None:
        out["ema"] = {n: v.cpu().numpy() for n, v in averages.items()}
    return out


# ---------------------------------------------------------------- comparisons


def rel_diff(a, b):
    with np.errstate(invalid="ignore"):
        d = np.abs(a - b) / np.maximum(np.abs(b), 1e-12)
    both_nonfinite = ~np.isfinite(a) & ~np.isfinite(b)
    d[both_nonfinite] = 0.0  # a skipped step: compared by the skipped flags, not by its loss
    d[np.isnan(d)] = np.inf
    return d


def worst(rel, limit=None):
    r = rel if limit is None else rel[:limit]
    i = int(np.argmax(r))
    return float(r[i]), i + 1


def compare_losses(got, want, tol, what):
    """[problem] for the losses of `got` against `want`; and a summary string."""
    rel = rel_diff(got["losses"], want["losses"])
    m, at = worst(rel)
    line = f"max rel loss diff {m:.1e} (step {at}: {got['losses'][at - 1]:.6g} vs {want['losses'][at - 1]:.6g})"
    problems = []
    if not m < tol:
        problems.append(f"{what}: step {at}: loss {got['losses'][at - 1]:.6g}, torch {want['losses'][at - 1]:.6g} "
                        f"(relative {m:.3g} >= {tol:g})")
    return problems, line


def compare_scaling(got, want, what):
    problems = []
    ours = [i + 1 for i, s in enumerate(got["skipped"]) if s]
    theirs = [i + 1 for i, s in enumerate(want["skipped"]) if s]
    if ours != theirs:
        problems.append(f"{what}: skipped steps {ours}, torch {theirs}")
    diff = [i + 1 for i, (x, y) in enumerate(zip(got["scales"], want["scales"])) if x != y]
    if diff:
        i = diff[0]
        problems.append(f"{what}: loss scale differs at {len(diff)} steps, first at step {i}: {got['scales'][i - 1]:g}"
                        f", torch {want['scales'][i - 1]:g}")
    return problems, ours


# ---------------------------------------------------------------- digits


def digits_run(a, data, work, device):
    out = os.path.join(work, f"digits.{device}.onnx")
    flags = ["--device", device] if a.pass_device else []
    cmd = [a.onnxamp, "train", os.path.join(a.models_dir, "digits_mlp.onnx"), "--data", data] + \
        train_digits.train_flags(a.digits_epochs) + flags + ["-o", out]
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.monotonic() - start
    with open(out + ".log", "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stderr + p.stdout)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise Failure(f"digits on {device}: onnxamp train exited {p.returncode}: {last}")
    done = [line for line in (p.stderr + p.stdout).splitlines() if line.startswith("done:")]
    m = re.search(r"accuracy ([0-9.]+)%", done[-1]) if done else None
    if not m:
        raise Failure(f"digits on {device}: no accuracy on a `done:` line (log: {out}.log)")
    return float(m.group(1)), seconds


# ---------------------------------------------------------------- driver


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--onnxamp", default=os.environ.get("ONNXAMP_CLI", os.path.join(ROOT, "build", "tools", "onnxamp")))
    ap.add_argument("--models-dir", default=os.environ.get("ONNXAMP_MODELS_DIR", os.path.join(ROOT, "models")))
    ap.add_argument("--checks", default="amp,overflow,fp32,loss,pg,opt,ema,digits")
    ap.add_argument("--models", default="mlp,cnn,transformer")
    ap.add_argument("--amp-steps", type=int, default=AMP_STEPS)
    ap.add_argument("--quick", action="store_true", help="40 AMP steps, 30 overflow steps")
    ap.add_argument("--digits", default=os.environ.get("ONNXAMP_DIGITS",
                                                       os.path.join(ROOT, "build", "data", "digits.csv.gz")))
    ap.add_argument("--digits-epochs", type=int, default=20)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--amp-dtype", choices=["fp16", "bf16"], default="fp16",
                    help="the amp check's precision (bf16: a CPU smoke test where torch has no float16 autocast)")
    ap.add_argument("--jobs", type=int, default=4, help="parallel onnxamp runs")
    ap.add_argument("--keep", help="keep data, trained models and onnxamp logs in this folder")
    a = ap.parse_args()
    checks = [c for c in a.checks.split(",") if c]
    models = [m for m in a.models.split(",") if m]
    if any(c not in ("amp", "overflow", "fp32", "loss", "pg", "opt", "ema", "digits") for c in checks) or \
            any(m not in AMP_RUNS for m in models):
        ap.error("--checks from amp,overflow,fp32,loss,pg,opt,ema,digits; --models from mlp,cnn,transformer")
    if a.quick:
        a.amp_steps = min(a.amp_steps, 40)
    overflow_steps = 30 if a.quick else OVERFLOW_STEPS
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"skipped: torch {torch.__version__} sees no CUDA device")
        return 77
    if not os.access(a.onnxamp, os.X_OK):
        print(f"FAIL: no onnxamp binary at {a.onnxamp} (pass --onnxamp)")
        return 1
    a.pass_device = train_has_device(a.onnxamp)
    if a.device == "cuda" and not a.pass_device:
        print(f"skipped: {a.onnxamp} train has no --device option (no CUDA trainer in this build)")
        return 77
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    if a.device == "cpu":
        torch.set_num_threads(1)
    work = a.keep or tempfile.mkdtemp(prefix="onnxamp-train-parity-cuda-")
    os.makedirs(work, exist_ok=True)
    start = time.monotonic()
    gpu = torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu"
    print(f"train parity ({a.device}: {gpu}): {a.onnxamp} vs torch {torch.__version__}; {NUM_SAMPLES} samples, "
          f"batch {BATCH}; files in {work}")

    data = {}  # (model, overflow) -> (path, npz, class_axis, arrays)
    for m in models:
        path = os.path.join(a.models_dir, m + ".onnx")
        for overflow in (False, True) if "overflow" in checks and m in OVERFLOW_MODELS else (False,):
            npz = os.path.join(work, f"{m}{'.overflow' if overflow else ''}.npz")
            data[(m, overflow)] = (path, npz) + make_data(path, npz, overflow)

    # (key, model, overflow, optimizer, lr, steps, amp, label smoothing, class weights, pg head, ema decay)
    runs = []
    amp = a.amp_dtype
    for m in models:
        if "amp" in checks:
            opt, lr = AMP_RUNS[m]
            runs.append(((m, "amp"), m, False, opt, lr, a.amp_steps, amp, 0.0, None, None, None))
        if "overflow" in checks and m in OVERFLOW_MODELS and amp == "fp16":
            runs.append(((m, "overflow"), m, True, "sgd", 0.05, overflow_steps, "fp16", 0.0, None, None, None))
        if "fp32" in checks:
            for opt in ("sgd", "adamw"):
                runs.append(((m, f"fp32-{opt}"), m, False, opt, FP32_LR[m][opt], FP32_STEPS, "off", 0.0, None, None, None))
        if "loss" in checks and m != "cnn":  # cnn: a branch flip reaches step 20 (train_parity.py's cw check)
            weights = class_weights(data[(m, False)][0], data[(m, False)][2])
            runs.append(((m, "loss"), m, False, "sgd", FP32_LR[m]["sgd"], FP32_STEPS, "off", 0.1, weights, None, None))
        if "pg" in checks:
            runs.append(((m, "pg"), m, False, "adamw", FP32_LR[m]["adamw"], FP32_STEPS, "off", 0.0, None, PG_HEAD[m], None))
        for opt in OPT_RUNS if "opt" in checks else ():
            # cnn: the branch flip at step 11 reaches RMSprop's loss at once (train_parity.py's opt check).
            steps = 10 if (m, opt) == ("cnn", "rmsprop") else FP32_STEPS
            runs.append(((m, opt), m, False, opt, OPT_RUNS[opt][0], steps, "off", 0.0, None, None, None))
        if "ema" in checks:
            runs.append(((m, "ema"), m, False, "sgd", FP32_LR[m]["sgd"], FP32_STEPS, "off", 0.0, None, None, EMA_DECAY))
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs))
    futures = {}
    for key, m, overflow, opt, lr, steps, amp_kind, smoothing, weights, head, ema in runs:
        path, npz, class_axis, _ = data[(m, overflow)]
        futures[key] = pool.submit(run_onnxamp, a, path, npz, class_axis, opt, lr, steps, amp_kind,
                                   os.path.join(work, f"{key[0]}-{key[1]}.onnx"), smoothing, weights, head, ema)
    digits_future = None
    if "digits" in checks and os.path.exists(a.digits):
        digits_future = {d: pool.submit(digits_run, a, a.digits, work, d) for d in (a.device, "cpu")}

    failures, skips = [], []
    for key, m, overflow, opt, lr, steps, amp_kind, smoothing, weights, head, ema in runs:
        path, npz, class_axis, arrays = data[(m, overflow)]
        name = f"{m:<12} {key[1] + ' ' + opt if key[1] == 'amp' else key[1]:<12}"
        try:
            got = futures[key].result()
            want = run_torch(a, path, arrays, class_axis, opt, lr, steps, amp_kind, smoothing, weights, head, ema)
        except Failure as e:
            failures.append(f"{m} {key[1]}: {e}")
            print(f"{name} FAIL: {e}")
            continue
        what = f"{m} {key[1]} ({opt}, lr {lr:g}, {steps} steps)"
        if key[1] == "amp":
            problems, line = compare_losses(got, want, AMP_TOL, what)
            extra = ""
            if amp_kind == "fp16":
                p2, ours = compare_scaling(got, want, what)
                problems += p2
                extra = f"; skipped steps {ours or 'none'}, final scale {got['scales'][-1]:g} (torch " \
                        f"{want['scales'][-1]:g})"
            converted = re.search(r"\((\d+) nodes? in low precision\)", got["header"])
            print(f"{name} onnxamp --amp {amp_kind} ({converted.group(1) if converted else '?'} nodes) vs torch "
                  f"autocast({amp_kind}){' + GradScaler' if amp_kind == 'fp16' else ''}: {line}{extra}  "
                  f"{'ok' if not problems else 'FAIL'}")
        elif key[1] == "overflow":
            p1, ours = compare_scaling(got, want, what)
            expected = [s + 1 for s in range(steps) if s % batches_per_epoch() == OVERFLOW_BATCH]
            if ours != expected:
                p1.append(f"{what}: onnxamp skipped steps {ours}, expected the overflowing batches' {expected}")
            p2, line = compare_losses(got, want, AMP_TOL, what)
            problems = p1 + p2
            print(f"{name} inputs x{OVERFLOW_FACTOR:g} in batch {OVERFLOW_BATCH + 1} of each epoch: skipped {ours} "
                  f"(torch {[i + 1 for i, s in enumerate(want['skipped']) if s]}), scale {got['scales'][0]:g} -> "
                  f"{got['scales'][-1]:g} (torch {want['scales'][-1]:g}); other steps: {line}  "
                  f"{'ok' if not problems else 'FAIL'}")
        else:
            problems, line = compare_losses(got, want, FP32_TOL, what)
            loss = f", label smoothing {smoothing:g} and class weights" if key[1] == "loss" else ""
            if head is not None:
                loss = f", no weight decay below 2 dims, {head} at {PG_FACTOR:g}x the learning rate"
            if ema is not None:
                worst_name, worst_diff = "-", 0.0
                for n, ref in want["ema"].items():
                    d = float(np.max(np.abs(got["weights"][n].astype(np.float64) - ref)) /
                              max(float(np.max(np.abs(ref))), 1e-30)) if n in got["weights"] else float("inf")
                    if not d <= worst_diff:
                        worst_name, worst_diff = n, d
                    if not d < EMA_TOL:
                        problems.append(f"{what}: the exported average {n}: max|onnxamp - torch| / max|torch| = "
                                        f"{d:.3g} >= {EMA_TOL:g}")
                loss = f", --ema {ema:g} with warm-up: exported averages {worst_diff:.1e} ({worst_name})"
            print(f"{name} onnxamp FP32 vs torch FP32 ({opt}, lr {lr:g}{loss}): {line}  "
                  f"{'ok' if not problems else 'FAIL'}")
        failures += problems

    if "digits" in checks:
        if digits_future is None:
            skips.append(f"digits: no data at {a.digits} (scripts/get_digits.sh writes it; or pass --digits)")
            print(f"{'digits':<25} skipped: no data at {a.digits}")
        else:
            try:
                dev_acc, dev_s = digits_future[a.device].result()
                cpu_acc, cpu_s = digits_future["cpu"].result()
                problems = []
                if dev_acc < DIGITS_MIN:
                    problems.append(f"digits: {a.device} validation accuracy {dev_acc}% is below {DIGITS_MIN}%")
                if abs(dev_acc - cpu_acc) > DIGITS_DIFF:
                    problems.append(f"digits: {a.device} validation accuracy {dev_acc}% is more than {DIGITS_DIFF} "
                                    f"points from the CPU's {cpu_acc}%")
                print(f"{'digits':<25} validation accuracy {dev_acc:.6g}% on {a.device} ({dev_s:.1f} s), "
                      f"{cpu_acc:.6g}% on the CPU ({cpu_s:.1f} s)  {'ok' if not problems else 'FAIL'}")
                failures += problems
            except Failure as e:
                failures.append(str(e))
                print(f"{'digits':<25} FAIL: {e}")
    pool.shutdown()
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(f"train parity ({a.device}): {len(failures)} failures, {len(skips)} skipped in "
          f"{time.monotonic() - start:.0f} s")
    for f in failures:
        print(f"FAIL {f}")
    for s in skips:
        print(f"skipped: {s}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
