#!/usr/bin/python3
"""PyTorch parity of `onnxamp train`: the same network, data, batches, loss and optimizer in both, step by step.

For models/mlp.onnx, models/cnn.onnx (BatchNormalization in training mode) and models/transformer.onnx (per-token
labels, --class-axis -1, ignore_index at position 0):

  data     seeded numpy data matching the model's graph inputs (the symbolic batch dim becomes N = 92 samples, cut
           into batches of 8: 11 full batches and a partial one of 4 per epoch; token ids in [0, vocab) where vocab
           is the dim of the embedding table the ids index), labels a learnable function of the inputs (argmax of a
           fixed random projection; for [batch, seq, vocab] outputs the previous token, -100 at position 0), in an
           .npz;
  onnxamp  `onnxamp train MODEL --data D.npz --labels labels --loss ce [--class-axis -1] --optimizer sgd|adamw
           --lr LR --steps 100 --batch-size 8 --no-shuffle --threads 1 --log-every 1 --seed 0 -o OUT.onnx`; every
           step's loss is read from stderr, the final weights from OUT.onnx;
  torch    the same ONNX graph through bench/onnx_torch.py (trainable=True: onnxamp's parameters as nn.Parameters,
           BatchNormalization's running statistics as buffers, BatchNormalization in training mode), float32,
           torch.set_num_threads(1), batch i = rows [i*B, (i+1)*B) in file order, cycling over epochs;
           CrossEntropyLoss (mean, ignore_index=-100), SGD(lr, momentum=0) or AdamW(lr, weight_decay=0.01).

Checks (exit 1 on any failure, one `FAIL ...` line each; tolerances and the measurements behind them below):

  fp32   onnxamp FP32 vs torch FP32, SGD and AdamW: the relative loss difference at steps 1-20 and at steps 1-100;
         every trained parameter and BatchNorm running statistic after 10 steps (a second onnxamp run) and after
         100 steps, per tensor max|onnxamp - torch| / max|torch|; every other initializer unchanged;
  bf16   onnxamp --amp bf16 vs torch CPU autocast(bfloat16), SGD: the relative difference of the epoch-mean losses;
  fp16   onnxamp --amp fp16 vs onnxamp --amp off (SGD): the relative difference of the epoch-mean losses;
  ls     onnxamp --label-smoothing 0.1 vs torch CrossEntropyLoss(label_smoothing=0.1), SGD, FP32: the loss
         differences and the final weights as for fp32;
  cw     the same with --class-weights (class c weighs 0.5 + c / C) and CrossEntropyLoss(weight=...), without label
         smoothing, and with it on mlp and transformer (cnn's [N, C] loss takes mlp's path; its 100-step losses move
         by the branch flips described below, which reach step 20 in that run: 6.4e-5, too close to 1e-4);
  pg     parameter groups: onnxamp --weight-decay 0.1 --no-decay-1d --lr-scale HEAD=5 --beta2 0.98 --eps 1e-7 vs
         torch AdamW(betas=(0.9, 0.98), eps=1e-7) over two or more param_groups (weight_decay 0 for parameters of fewer
         than 2 dims, lr * 5 for the output layer's), FP32: the loss differences and the final weights as for fp32.
         (With eps 1e-6 and beta2 0.98 together the mlp run agreed to 2.9e-6 over steps 1-20, then drifted: 3.3e-3
         at step 57, weights 2.4e-2 apart, where either setting alone agreed to 3e-6 over the 100 steps: a
         trajectory that amplifies rounding, like the cnn's branch flips below.)
  opt    the other optimizers, FP32: onnxamp --optimizer rmsprop --alpha 0.9 --momentum 0.5 --centered
         --weight-decay 1e-3 vs torch.optim.RMSprop with the same options, and onnxamp --optimizer lion --weight-decay
         0.1 vs Lion written in torch after its paper's Algorithm 2 (torch has none), and onnxamp --optimizer adagrad
         --lr-decay 0.01 --initial-accumulator 0.1 --weight-decay 1e-3 vs torch.optim.Adagrad, and --optimizer radam
         --weight-decay 1e-3 vs torch.optim.RAdam, and --optimizer nadam --weight-decay 1e-3 --momentum-decay 0.01
         vs NAdam as torch 2.x has it (tests/peer/nadam_torch.py: torch 1.13's counts mu twice in mu_product_next),
         and nadam / radam --weight-decay 0.1 --decoupled-weight-decay vs the same with torch 2.x's
         decoupled_weight_decay=True (NAdamW, RAdamW): the losses and the final weights
         as for fp32; and SGD with --clip-value 0.01 against torch.nn.utils.clip_grad_value_(params, 0.01) after
         each backward, the same way.
  lld    cnn (the one bundled model whose parameters name their blocks: layer1, layer2): onnxamp --layer-decay 0.5
         (AdamW) against AdamW over timm's layer-decay param_groups (stem at 0.125x, layer1 0.25x, layer2 0.5x, fc 1x
         the learning rate): the losses and the final weights as for fp32.
  reg    mlp and cnn, the regression losses against torch's, SGD, FP32, float targets (a fixed random projection of
         the input, standard deviation 2: beyond delta for most elements at first): --loss mse vs MSELoss, --loss huber --delta 0.5 vs HuberLoss(delta=0.5),
         --loss smooth_l1 --delta 0.5 vs SmoothL1Loss(beta=0.5): the losses and the final weights as for fp32.
  plateau  mlp and transformer: onnxamp --schedule plateau --eval-every 5 --patience 1 --gamma 0.5 --val-data V.npz
         (AdamW) against torch.optim.lr_scheduler.ReduceLROnPlateau(factor=0.5, patience=1) stepped with torch's
         validation loss (the model in eval mode over V's 40 samples, whose labels are shuffled across the samples, so
         that the loss rises as the model fits the training data) every 5 steps: every step's learning rate the
         same (so the same evaluations lowered it), and the losses as for fp32. (Not the cnn: its branch flips move
         its validation losses by 1e-3 late in the run, where two evaluations can be within the 1e-4 threshold.)
  ema    onnxamp --ema 0.9 --ema-warmup (SGD, FP32) against torch keeping the average by hand after each step,
         `avg.lerp_(value, 1 - min(0.9, (1 + n) / (10 + n)))` over the parameters and the BatchNorm running statistics
         (TensorFlow's warm-up form, n counting the updates before): the losses as for fp32 (the live model's) and the
         exported model (the averages) against torch's averages as for fp32's weights; and --swa-start 60 against the equal average of
         the last 40 steps' weights and BatchNorm statistics kept by hand as AveragedModel(use_buffers=True) does.
  lora   mlp, transformer and cnn (its Conv weights): onnxamp --lora-rank 4 --lora-alpha 8 --lora-targets REGEX --lora-init FILE (AdamW, FP32)
         against torch training the same adapters (random A and B, saved for --lora-init) in a copy of the model with
         LoRA written out by hand in ONNX (y = x.W + (x.A.B) * alpha / rank), every other weight frozen: per-step
         losses as fp32's, the exported (merged) weights against torch's W + scale * A.B, what training changed in
         them within WEIGHT_TOL, and every other initializer of the exported model unchanged.

Usage: /usr/bin/python3 tests/peer/train_parity.py [--onnxamp BIN] [--models mlp,cnn,transformer]
                                                   [--checks fp32,bf16,fp16,ls,cw,pg,opt,lld,reg,plateau,ema,lora] [--jobs N] [--keep DIR]
                                                   [--name-output]
Exit status: 0 every check passed (or skipped: torch/onnx/numpy are not importable), 1 a failure, 2 usage error.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

try:
    import numpy as np
    import onnx
    import torch
    from onnx import numpy_helper
except ImportError as e:  # Debian's python3-torch, python3-onnx, python3-numpy (optional: not in scripts/setup.sh)
    print(f"skipped: PyTorch training parity needs torch, onnx and numpy in {sys.executable} ({e}); "
          "apt-get install python3-torch python3-onnx python3-numpy")
    sys.exit(0)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.dont_write_bytecode = True  # no bench/__pycache__ in the source tree
import onnx_torch  # noqa: E402  (bench/onnx_torch.py)
import train_data  # noqa: E402  (tests/peer/train_data.py)
from train_data import Failure  # noqa: E402
from lion_torch import Lion  # noqa: E402  (tests/peer/lion_torch.py)
from nadam_torch import NAdam  # noqa: E402  (tests/peer/nadam_torch.py)

# onnx_torch wraps onnx's read-only numpy arrays (trainable=True copies them before training); torch warns once.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

NUM_SAMPLES = 92  # 11 full batches of 8 and a partial one of 4 per epoch
BATCH = 8
STEPS = 100
EARLY_STEPS = 20  # the strict loss window
EARLY_WEIGHT_STEPS = 10  # the second onnxamp run, whose weights are compared strictly
SEED = 0
# Per model and optimizer: learning rates (the losses fall clearly over 100 steps, without divergence), with two
# exceptions on the cnn. Adagrad at 1e-2: at 3e-2 its loss falls, but the step-11 branch flip below then reaches
# 8.9e-5 by step 18, too near the strict 1e-4; at 1e-2 it stays within 2.3e-6 while the loss drifts from 2.10 to 2.17.
# NAdam at 1e-3, not its default 2e-3: at 2e-3 torch float32 against torch float64 is already 2.5e-4 apart in loss by
# step 10 and 1.6e-3 at step 19, exactly where onnxamp against torch float32 is (1.6e-3, step 19); at 1e-3 torch's
# own spread is 1.3e-7 over steps 1-20 and onnxamp's 2.4e-6.
MODELS = {
    "mlp": {"sgd": 0.05, "adamw": 1e-3, "rmsprop": 1e-3, "adagrad": 3e-2, "radam": 1e-2, "lion": 3e-4, "nadam": 2e-3},
    "cnn": {"sgd": 0.05, "adamw": 1e-3, "rmsprop": 1e-3, "adagrad": 1e-2, "radam": 1e-2, "lion": 3e-4, "nadam": 1e-3},
    "transformer": {"sgd": 0.1, "adamw": 1e-3, "rmsprop": 1e-3, "adagrad": 3e-2, "radam": 1e-2, "lion": 3e-4,
                    "nadam": 2e-3},
}

# ---- Tolerances. Relative loss difference |onnxamp - torch| / |torch| per step; weights per tensor
# max|onnxamp - torch| / max|torch| (scale-free, so that elements near 0 do not turn ulps into large ratios).
#
# Both sides compute in float32 with different summation orders: a step's forward and gradients differ by ~3e-7
# relative (measured on the transformer: onnxamp and torch float32 are equally far from a float64 torch run, at the
# initial weights and at step 35's). onnxamp prints losses with 6 significant digits (up to 5e-6 relative). What
# 100 steps make of those differences depends on the model:
#   mlp          no amplification: losses agree to ~4e-6 (the printing), weights to ~4e-7;
#   transformer  smooth but sensitive: a float64 run from weights perturbed by 1e-7 (relative, random) drifts
#                3e-4..5e-4 from the unperturbed float64 run by steps 80-100, while the loss falls steeply; onnxamp
#                vs torch reaches 5.7e-4 (loss) and 5.9e-4 (weights) at lr 0.1; within 1e-3, with a margin of 2;
#   cnn          discrete: a pre-ReLU value within rounding of 0 takes the other branch in float32 than in float64
#                (step 11 here: one element of layer2.add), and BatchNormalization's backward spreads that one
#                element over its whole channel, changing every conv/BN gradient below by 2-8%. After 100 steps two
#                float32 torch runs that differ only in the conv implementation (mkldnn vs native) are 5.4e-3 apart
#                in loss and 5.3e-2..6.1e-2 in weights; onnxamp vs torch: 2.1e-3..3.3e-3 and 3.8e-2..6.1e-2.
# So: the brief's 1e-4 (steps 1-20) and 1e-3 (steps 1-100, final weights) where they hold, 3x the measured
# float32-vs-float32 spread for the CNN's 100-step figures, and a strict check of the weights after 10 steps
# (before any flip; it also pins the BatchNorm running statistics, e.g. the unbiased variance, to 1e-4).
LOSS_TOL_EARLY = 1e-4
LOSS_TOL = {"mlp": 1e-3, "transformer": 1e-3, "cnn": 2e-2}
CHECKS = ("fp32", "bf16", "fp16", "ls", "cw", "pg", "opt", "lld", "reg", "plateau", "ema", "lora")
# The lora check: the weights that get adapters (a regex, as --lora-targets), rank and alpha, and the standard
# deviations of the adapters both sides start from (--lora-init; B not zero, so that A trains from step 1).
LORA_TARGETS = {"mlp": r"weight$", "transformer": r"attn\.(q|v)\.weight|mlp\.fc1\.weight", "cnn": r"conv\d?\.weight$"}
LORA_RANK = 4
LORA_ALPHA = 8.0
LORA_STD = (0.1, 0.05)
# The lld check: layer-wise learning-rate decay on the models whose parameter names carry block indices, each
# parameter's factor (timm's layer_scales: 0.5 ** (3 - layer) with the stem 0, layer1 1, layer2 2, fc 3).
LLD_DECAY = 0.5
LLD_FACTORS = {"cnn": [(r"^stem\.", 0.125), (r"^layer1\.", 0.25), (r"^layer2\.", 0.5), (r"^fc\.", 1.0)]}
# The reg check: models with a [batch, classes] output, and the losses (onnxamp's arguments, torch's criterion).
REG_MODELS = ("mlp", "cnn")
REG_LOSSES = {"mse": (("--loss", "mse"), lambda: torch.nn.MSELoss()),
              "huber": (("--loss", "huber", "--delta", "0.5"), lambda: torch.nn.HuberLoss(delta=0.5)),
              "smooth_l1": (("--loss", "smooth_l1", "--delta", "0.5"), lambda: torch.nn.SmoothL1Loss(beta=0.5))}
# The plateau check: evaluations every PLATEAU_EVERY steps on PLATEAU_VAL samples of its own, ReduceLROnPlateau's
# factor and patience, and the models it runs on.
PLATEAU_EVERY = 5
PLATEAU_VAL = 40
PLATEAU_GAMMA = 0.5
PLATEAU_PATIENCE = 1
PLATEAU_MODELS = ("mlp", "transformer")
# The opt check's options, on the command line and for torch.
RMSPROP = {"alpha": 0.9, "momentum": 0.5, "centered": True, "weight_decay": 1e-3}
RMSPROP_ARGS = ("--alpha", "0.9", "--momentum", "0.5", "--centered", "--weight-decay", "1e-3")
RADAM_ARGS = ("--weight-decay", "1e-3")
ADAGRAD = {"lr_decay": 0.01, "initial_accumulator_value": 0.1, "weight_decay": 1e-3}
ADAGRAD_ARGS = ("--lr-decay", "0.01", "--initial-accumulator", "0.1", "--weight-decay", "1e-3")
LION_WEIGHT_DECAY = 0.1
LION_ARGS = ("--weight-decay", repr(LION_WEIGHT_DECAY))
NADAM = {"weight_decay": 1e-3, "momentum_decay": 0.01}
NADAM_ARGS = ("--weight-decay", "1e-3", "--momentum-decay", "0.01")
DECOUPLED_WEIGHT_DECAY = 0.1  # nadamw and radamw
DECOUPLED_ARGS = ("--weight-decay", repr(DECOUPLED_WEIGHT_DECAY), "--decoupled-weight-decay")
# The opt check's runs: (name, onnxamp's --optimizer, its arguments); the torch side is chosen by the name.
OPT_RUNS = (("rmsprop", "rmsprop", RMSPROP_ARGS), ("adagrad", "adagrad", ADAGRAD_ARGS), ("radam", "radam", RADAM_ARGS),
            ("lion", "lion", LION_ARGS), ("nadam", "nadam", NADAM_ARGS), ("nadamw", "nadam", DECOUPLED_ARGS),
            ("radamw", "radam", DECOUPLED_ARGS))
CLIP_VALUE = 0.01  # the opt check's SGD run clipped by value: 13-36% of the first step's gradient elements exceed it
# (model, optimizer): (100-step loss tolerance, 100-step weight tolerance, strict loss window, weight tolerance after
# 10 steps) where the defaults cannot hold. The cnn under centered RMSprop: sqrt(square_avg - grad_avg^2) cancels
# where a gradient element keeps its sign, and in float32 that turns the 3e-7 by which two implementations' gradients
# differ into percents: torch float32 against torch float64 is 2e-5 apart in loss at step 9, 7e-5 at step 11 (where
# the branch flip below adds to it), and 1.2e-2 in weights after 10 steps (layer2.conv2.weight), exactly where
# onnxamp vs torch float32 is (2.4e-5, 7e-5, 1.2e-2, the same tensor), while float64 from weights perturbed by 1e-7
# stays within 1e-7. After 100 steps torch against itself (mkldnn vs native convolutions) is 1.1e-2 apart in loss
# and 1.1e-1 in weights, onnxamp vs torch 1.9e-2 and 2.4e-1, and centered vs plain RMSprop only 3.8e-1: the strict
# checks are steps 1-8 and the weights after 10 steps at 4x float32's own spread; the 100-step bounds only catch a
# run gone wrong.
OPT_TOL = {("cnn", "rmsprop"): (6e-2, 6e-1, 8, 5e-2)}
EMA_DECAY = 0.9
SWA_START = 60  # the ema check's stochastic weight averaging: the equal average of the last 40 steps' weights
BN_MODELS = ("cnn",)  # and --update-bn on the models with BatchNormalization
# The pg check: the output layer of each model at PG_FACTOR times the learning rate, AdamW's decoupled weight decay
# PG_WEIGHT_DECAY on parameters of 2 or more dims.
PG_HEAD = {"mlp": r"^fc2\.", "cnn": r"^fc\.", "transformer": r"^lm_head\."}
PG_FACTOR = 5.0
PG_WEIGHT_DECAY = 0.1
PG_BETA2 = 0.98  # and eps 1e-7, through --beta2 and --eps (see the docstring)
PG_EPS = 1e-7
WEIGHT_TOL = {"mlp": 1e-3, "transformer": 1e-3, "cnn": 2e-1}
# After 10 steps: 1e-4 for SGD (measured 1.4e-7..4.3e-7). AdamW gets the brief's 1e-3: its first step normalises
# every gradient element by its own magnitude (m/(sqrt(v) + eps) = g/(|g| + eps)), so an element whose first
# gradient is tiny takes a step of up to lr whose size rounding decides; transformer attn.k.weight[56, 53] (first
# gradient -2.4e-8, 2e-6 of the tensor's largest) ends 9.7e-6 apart, 7.4e-5 of the tensor's largest value.
WEIGHT_TOL_EARLY = {"sgd": 1e-4, "adamw": 1e-3}
# A parameter whose gradient is rounding noise at every step (below NOISE_GRAD times the model's largest gradient
# element) has a true gradient of 0: the attention key bias (softmax is invariant to adding q.b_k to a whole row of
# scores; its float32 gradient is ~1e-9). SGD leaves it where it is; AdamW divides that noise by its own RMS and
# moves it by up to lr per step in a direction set by rounding, different in every implementation. Under AdamW such
# parameters are reported and not compared.
NOISE_GRAD = 1e-6
# Low precision: per step, the losses of two reduced-precision runs (or one and FP32) differ by up to 1.3e-1 on the
# transformer while its loss falls steeply (steps 55-75), and so does torch's own autocast(bfloat16) run vs torch
# FP32 (1.1e-1), so the per-step figure is printed, not checked. The mean loss of each complete epoch (the same 12
# batches every epoch) averages out that step-to-step jitter and is what these tolerances bound.
BF16_TOL = 2e-2  # onnxamp --amp bf16 vs torch autocast(bfloat16)
FP16_TOL = 1e-2  # onnxamp --amp fp16 vs onnxamp --amp off
LABEL_SMOOTHING = 0.1  # the ls check's epsilon

STEP_LINE = re.compile(r"^step (\d+)/(\d+)  epoch (\d+)  loss (\S+)  scale (\S+)  skipped (\d+)  lr (\S+)  "
                       r"(\S+) samples/s$")


# ---------------------------------------------------------------- data


def make_data(model_path, npz_path):
    """Writes seeded inputs and labels for the model; returns (class_axis, {array name: array})."""
    class_axis, arrays = train_data.make_data(model_path, NUM_SAMPLES, np.random.default_rng(SEED))
    np.savez(npz_path, **arrays)
    return class_axis, arrays


def batches_per_epoch():
    return -(-NUM_SAMPLES // BATCH)


def batch_rows(step):
    """Rows of step `step` (0-based): file order, partial last batch, cycling over epochs."""
    i = step % batches_per_epoch()
    return slice(i * BATCH, min((i + 1) * BATCH, NUM_SAMPLES))


def epoch_means(losses):
    """The mean loss of every complete epoch."""
    n = batches_per_epoch()
    return np.array([losses[i:i + n].mean() for i in range(0, len(losses) - n + 1, n)])


# ---------------------------------------------------------------- onnxamp


def class_weights(model_path, class_axis):
    """The cw check's weights: 0.5 + c / C for class c of the model's output."""
    dims = onnx.load(model_path).graph.output[0].type.tensor_type.shape.dim
    classes = dims[class_axis].dim_value
    return [0.5 + c / classes for c in range(classes)]


def run_onnxamp(binary, model_path, npz, class_axis, optimizer, lr, steps, amp, out_path, output=None,
                label_smoothing=0.0, weights=None, extra=()):
    """Runs `onnxamp train` (--loss ce unless `extra` names another); returns {losses, scales, skipped, header,
    done, weights, seconds}."""
    loss = [] if "--loss" in extra else ["--loss", "ce"]
    cmd = [binary, "train", model_path, "--data", npz, "--labels", "labels"] + loss + [
           "--optimizer", optimizer, "--lr", repr(lr), "--steps", str(steps), "--batch-size", str(BATCH),
           "--no-shuffle", "--threads", "1", "--log-every", "1", "--seed", str(SEED), "--amp", amp, "-o", out_path]
    if class_axis != 1:
        cmd += ["--class-axis", str(class_axis)]
    if output:
        cmd += ["--output", output]
    if label_smoothing:
        cmd += ["--label-smoothing", repr(label_smoothing)]
    if weights:
        cmd += ["--class-weights", ",".join(repr(w) for w in weights)]
    cmd += list(extra)
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.monotonic() - start
    with open(out_path + ".log", "w") as f:
        f.write(" ".join(cmd) + "\n" + proc.stderr + proc.stdout)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise Failure(f"onnxamp train exited {proc.returncode}: {last}")
    losses, scales, skipped, lrs = [], [], [], []
    header = done = ""
    for line in proc.stderr.splitlines():
        m = STEP_LINE.match(line)
        if m:
            if int(m.group(1)) != len(losses) + 1:
                raise Failure(f"onnxamp train: step line {m.group(1)} out of order: {line}")
            losses.append(float(m.group(4)))
            scales.append(float(m.group(5)))
            skipped.append(int(m.group(6)))
            lrs.append(float(m.group(7)))
        elif line.startswith("train: "):
            header = line
        elif line.startswith("done: "):
            done = line
    if len(losses) != steps:
        raise Failure(f"onnxamp train: {len(losses)} step lines, expected {steps}")
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(out_path).graph.initializer}
    return {"losses": np.array(losses), "scales": scales, "skipped": skipped, "lrs": np.array(lrs), "header": header,
            "done": done, "weights": weights, "seconds": seconds, "log": proc.stderr}


# ---------------------------------------------------------------- torch


def param_groups(module, lr, head):
    """The pg check's torch param_groups: lr * PG_FACTOR for names matching `head`, weight_decay 0 below 2 dims."""
    groups = {}
    for name, p in module.param_by_name.items():
        key = (PG_FACTOR if re.search(head, name) else 1.0, p.dim() >= 2)
        groups.setdefault(key, []).append(p)
    return [{"params": ps, "lr": lr * factor, "weight_decay": PG_WEIGHT_DECAY if decay else 0.0}
            for (factor, decay), ps in groups.items()]


class RAdamW(torch.optim.RAdam):
    """torch 2.x's RAdam(decoupled_weight_decay=True) on torch 1.13: param.mul_(1 - lr * weight_decay) before the
    update, which then runs without decay (the decay does not touch the gradient, so doing it first is the same)."""

    def __init__(self, params, lr, weight_decay):
        super().__init__(params, lr=lr, weight_decay=0.0)
        self.decoupled = weight_decay

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.mul_(1 - group["lr"] * self.decoupled)
        super().step()


def lora_model(model_path, pattern, out_path, init_path):
    """The lora check's torch side: `model_path` with LoRA written out in ONNX by hand (y = x.W + (x.A.B) * scale for
    the MatMul/Gemm weights matching `pattern`, A [in, r] and B [r, out] as initializers; for Conv weights y =
    Conv(x, W) + Conv(Conv(x, A), B) * scale, A [r, in, k...] with the layer's kernel, strides and pads, B [out, r,
    1...] 1x1; from random peft-oriented adapters, also saved to `init_path` for onnxamp's --lora-init). Returns
    {weight: (A name, B name, layout, scale)}, layout "transposed" (Gemm transB), "conv" or ""."""
    m = onnx.load(model_path)
    g = m.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    rng = np.random.default_rng(SEED + 3)
    adapters, init, nodes = {}, {}, []
    scale = LORA_ALPHA / LORA_RANK
    for node in g.node:
        nodes.append(node)
        w = node.input[1] if node.op_type in ("MatMul", "Gemm", "Conv") and len(node.input) > 1 else None
        if w is None or w not in inits or not re.search(pattern, w):
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        conv = node.op_type == "Conv"
        layout = "conv" if conv else ("transposed" if node.op_type == "Gemm" and attrs.get("transB", 0) == 1 else "")
        if conv:
            fan_out, fan_in, kernel = inits[w].shape[0], inits[w].shape[1], inits[w].shape[2:]
        else:
            fan_out, fan_in = inits[w].shape if layout == "transposed" else inits[w].shape[::-1]
            kernel = ()
        if w not in adapters:
            a_dims = (LORA_RANK, fan_in) + tuple(kernel)
            b_dims = (fan_out, LORA_RANK) + (1,) * len(kernel)
            init[w + ".lora_A"] = (rng.standard_normal(a_dims) * LORA_STD[0]).astype(np.float32)
            init[w + ".lora_B"] = (rng.standard_normal(b_dims) * LORA_STD[1]).astype(np.float32)
            stored = (lambda t: t) if conv else (lambda t: t.T.copy())
            g.initializer.append(numpy_helper.from_array(stored(init[w + ".lora_A"]), w + ".lora_A"))
            g.initializer.append(numpy_helper.from_array(stored(init[w + ".lora_B"]), w + ".lora_B"))
            adapters[w] = (w + ".lora_A", w + ".lora_B", layout, scale)
        y = node.output[0]
        factor = scale * (attrs.get("alpha", 1.0) if node.op_type == "Gemm" else 1.0)
        g.initializer.append(numpy_helper.from_array(np.array(factor, dtype=np.float32), y + "_lora_scale"))
        node.output[0] = y + "_lora_base"
        if conv:
            same = {k: v for k, v in attrs.items() if k in ("kernel_shape", "strides", "pads", "dilations")}
            nodes += [onnx.helper.make_node("Conv", [node.input[0], w + ".lora_A"], [y + "_lora_a"], **same),
                      onnx.helper.make_node("Conv", [y + "_lora_a", w + ".lora_B"], [y + "_lora_b"],
                                            kernel_shape=[1] * len(kernel))]
        else:
            nodes += [onnx.helper.make_node("MatMul", [node.input[0], w + ".lora_A"], [y + "_lora_a"]),
                      onnx.helper.make_node("MatMul", [y + "_lora_a", w + ".lora_B"], [y + "_lora_b"])]
        nodes += [onnx.helper.make_node("Mul", [y + "_lora_b", y + "_lora_scale"], [y + "_lora_scaled"]),
                  onnx.helper.make_node("Add", [y + "_lora_base", y + "_lora_scaled"], [y])]
    del g.node[:]
    g.node.extend(nodes)
    onnx.save(m, out_path)
    np.savez(init_path, **init)
    return adapters


def torch_update_bn(model_path, arrays, weights):
    """torch.optim.swa_utils.update_bn on the model with `weights` (by ONNX name): reset, then one pass over the
    samples in batches of BATCH in order, in training mode, each BatchNormalization's momentum 1 / n for the n-th batch
    (update_bn's momentum=None). Returns the running statistics by ONNX name."""
    module = onnx_torch.load(model_path, device="cpu", trainable=True)
    with torch.no_grad():
        for n, p in module.param_by_name.items():
            p.copy_(torch.from_numpy(weights[n]))
        for n, b in module.buffer_by_name.items():
            b.fill_(1.0 if "var" in n else 0.0)  # reset_running_stats() (the first batch's momentum 1 replaces it)
        module.train()
        inputs = [torch.from_numpy(arrays[n]) for n in module.input_names]
        for k, start in enumerate(range(0, NUM_SAMPLES, BATCH), 1):
            module.bn_momentum = 1.0 / k
            module(*[x[start:start + BATCH] for x in inputs])
    return {n: b.numpy().copy() for n, b in module.buffer_by_name.items()}


def merged_lora(weights, adapters):
    """The lora check: torch's trained adapters folded into their weights, W + scale * (A.B) (transposed for a Gemm
    transB weight; for a Conv weight B [out, r] times A [r, in, k...])."""
    out = dict(weights)
    for w, (a, b, layout, scale) in adapters.items():
        wa, wb = weights[a].astype(np.float64), weights[b].astype(np.float64)
        if layout == "conv":
            delta = scale * np.tensordot(wb.reshape(wb.shape[0], wb.shape[1]), wa, axes=1)
        else:
            delta = scale * (wa @ wb)
            delta = delta.T if layout == "transposed" else delta
        out[w] = (weights[w] + delta).astype(np.float32)
        del out[a], out[b]
    return out


def run_torch(model_path, arrays, class_axis, optimizer, lr, steps, autocast_bf16=False, snapshots=(),
              label_smoothing=0.0, weights=None, head=None, ema=None, plateau_val=None, clip_value=None,
              criterion=None, lld=None, swa=None, train_only=None):
    """Trains the ONNX graph in torch; returns {losses, lrs (each step's), weights (params and buffers by ONNX name,
    after `steps`), snapshots {step: weights}, params, buffers, max_grad {param: max |grad| over the steps}, seconds}.
    `head`: AdamW over the pg check's param_groups. `ema`: the decay of the ema check's averages, returned as "ema" (by
    ONNX name). `plateau_val`: the plateau check's validation arrays: ReduceLROnPlateau stepped with their loss (the
    model in eval mode) every PLATEAU_EVERY steps. `clip_value`: clip_grad_value_ after each backward. `criterion`:
    the loss instead of CrossEntropyLoss (arrays["labels"] then holds its float targets). `lld`: AdamW over the lld
    check's param_groups, (name pattern, factor) pairs. `swa`: the steps after which the equal average starts
    (returned as "ema", as `ema`'s). `train_only`: the names of the parameters that train (the others frozen)."""
    torch.manual_seed(SEED)
    module = onnx_torch.load(model_path, device="cpu", trainable=True)
    module.train()
    params = list(module.params)
    if train_only is not None:
        for n, p in module.param_by_name.items():
            p.requires_grad_(n in train_only)
        params = [p for n, p in module.param_by_name.items() if n in train_only]
    if lld is not None:
        groups = {}
        for name, p in module.param_by_name.items():
            factor = next(f for pattern, f in lld if re.search(pattern, name))
            groups.setdefault(factor, []).append(p)
        opt = torch.optim.AdamW([{"params": ps, "lr": lr * f} for f, ps in groups.items()], lr=lr, weight_decay=0.01)
    elif head is not None:
        opt = torch.optim.AdamW(param_groups(module, lr, head), lr=lr, weight_decay=PG_WEIGHT_DECAY,
                                betas=(0.9, PG_BETA2), eps=PG_EPS)
    elif optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=lr, momentum=0)
    elif optimizer == "adamw":
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    elif optimizer == "rmsprop":
        opt = torch.optim.RMSprop(params, lr=lr, **RMSPROP)
    elif optimizer == "adagrad":
        opt = torch.optim.Adagrad(params, lr=lr, **ADAGRAD)
    elif optimizer == "radam":
        opt = torch.optim.RAdam(params, lr=lr, weight_decay=1e-3)
    elif optimizer == "lion":
        opt = Lion(params, lr=lr, weight_decay=LION_WEIGHT_DECAY)
    elif optimizer == "nadam":
        opt = NAdam(params, lr=lr, **NADAM)
    elif optimizer == "nadamw":
        opt = NAdam(params, lr=lr, weight_decay=DECOUPLED_WEIGHT_DECAY, decoupled_weight_decay=True)
    elif optimizer == "radamw":
        opt = RAdamW(params, lr=lr, weight_decay=DECOUPLED_WEIGHT_DECAY)
    else:
        raise ValueError(optimizer)
    if criterion is None:
        criterion = torch.nn.CrossEntropyLoss(
            weight=None if weights is None else torch.tensor(weights, dtype=torch.float32), reduction="mean",
            ignore_index=-100, label_smoothing=label_smoothing)
    inputs = [torch.from_numpy(arrays[n]) for n in module.input_names]
    labels = torch.from_numpy(arrays["labels"])
    max_grad = {n: 0.0 for n in module.param_by_name}

    def weights():
        w = {n: p.detach().numpy().copy() for n, p in module.param_by_name.items()}
        w.update({n: b.numpy().copy() for n, b in module.buffer_by_name.items()})
        return w

    losses, lrs, snaps = [], [], {}
    scheduler = None
    if plateau_val is not None:
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=PLATEAU_GAMMA, patience=PLATEAU_PATIENCE)
        val_inputs = [torch.from_numpy(plateau_val[n]) for n in module.input_names]
        val_labels = torch.from_numpy(plateau_val["labels"])
    tracked = list(module.param_by_name.items()) + list(module.buffer_by_name.items())
    averages = {n: t.detach().clone() for n, t in tracked} if ema or swa is not None else None
    start = time.monotonic()
    for step in range(steps):
        rows = batch_rows(step)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast_bf16):
            (logits,) = module(*[x[rows] for x in inputs])
            if class_axis != 1:
                logits = logits.movedim(class_axis, 1)
            loss = criterion(logits, labels[rows])
        loss.backward()
        for n, p in module.param_by_name.items():
            if p.grad is not None:
                max_grad[n] = max(max_grad[n], float(p.grad.abs().max()))
        if clip_value is not None:
            torch.nn.utils.clip_grad_value_(params, clip_value)
        opt.step()
        if averages is not None and swa is not None and step >= swa:
            # AveragedModel's equal average (its default avg_fn, use_buffers=True): the first update copies.
            k = step - swa
            with torch.no_grad():
                for n, t in tracked:
                    if k == 0:
                        averages[n].copy_(t.detach())
                    else:
                        averages[n].add_((t.detach() - averages[n]) / (k + 1))
        elif averages is not None and swa is None:
            decay = min(ema, (1 + step) / (10 + step))
            with torch.no_grad():
                for n, t in tracked:
                    averages[n].lerp_(t.detach(), 1 - decay)
        losses.append(loss.item())
        lrs.append(opt.param_groups[0]["lr"])
        if scheduler is not None and (step + 1) % PLATEAU_EVERY == 0:
            module.eval()
            with torch.no_grad():
                (logits,) = module(*val_inputs)
                if class_axis != 1:
                    logits = logits.movedim(class_axis, 1)
                scheduler.step(criterion(logits, val_labels).item())
            module.train()
        if step + 1 in snapshots:
            snaps[step + 1] = weights()
    return {"losses": np.array(losses), "lrs": np.array(lrs), "weights": weights(), "snapshots": snaps,
            "max_grad": max_grad,
            "params": set(module.param_by_name), "buffers": set(module.buffer_by_name),
            "ema": {n: a.numpy().copy() for n, a in averages.items()} if averages is not None else None,
            "seconds": time.monotonic() - start}


# ---------------------------------------------------------------- comparisons


def rel_diff(a, b):
    return np.abs(a - b) / np.maximum(np.abs(b), 1e-12)


def worst(rel, limit=None):
    """(max, 1-based index) of rel[:limit]."""
    r = rel if limit is None else rel[:limit]
    i = int(np.argmax(r))
    return float(r[i]), i + 1


def compare_weights(initial, got, want, params, buffers, tol, skip=()):
    """{"param": (max rel diff, name), "buffer": (...)}, problems. `skip`: trained tensors not compared."""
    problems = []
    result = {"param": (0.0, "-"), "buffer": (0.0, "-")}
    for name, init in initial.items():
        if name not in got:
            problems.append(f"initializer {name} missing from the trained model")
            continue
        if name in skip:
            continue
        if name in want:
            kind = "buffer" if name in buffers else "param"
            a, b = got[name].astype(np.float64), want[name].astype(np.float64)
            if a.shape != b.shape:
                problems.append(f"{name}: shape {a.shape}, torch {b.shape}")
                continue
            d = float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))
            if not np.isfinite(d):
                d = float("inf")
            if d > result[kind][0] or result[kind][1] == "-":
                result[kind] = (d, name)
            if not d < tol:
                problems.append(f"{kind} {name}: max|onnxamp - torch| / max|torch| = {d:.3g} >= {tol:g}")
        elif not np.array_equal(got[name], init):
            problems.append(f"initializer {name} is not trained but changed")
    return result, problems


def rounding_noise(ref):
    """The parameters whose torch gradient stayed below NOISE_GRAD of the largest (AdamW moves them by rounding)."""
    top = max(ref["max_grad"].values())
    return sorted(n for n, g in ref["max_grad"].items() if g < NOISE_GRAD * top)


def loss_checks(got, ref, m, early_steps=EARLY_STEPS, tol=None):
    """The per-step losses against torch: (problems, (early max, step), (max, step)); steps 1-`early_steps` within
    LOSS_TOL_EARLY, all within `tol` (default LOSS_TOL[m])."""
    tol = LOSS_TOL[m] if tol is None else tol
    problems = []
    rel = rel_diff(got["losses"], ref["losses"])
    early, early_at = worst(rel, early_steps)
    late, late_at = worst(rel)
    if not early < LOSS_TOL_EARLY:
        problems.append(loss_problem(got["losses"], ref["losses"], rel, early_at, LOSS_TOL_EARLY, "torch") +
                        f" in steps 1-{early_steps}")
    if not late < tol:
        problems.append(loss_problem(got["losses"], ref["losses"], rel, late_at, tol, "torch"))
    return problems, (early, early_at), (late, late_at)


def losses_and_weights(m, label, what, got, ref, initial):
    """The loss and final-weight checks of one run against torch (LOSS_TOL / WEIGHT_TOL of the model), printed as one
    line; returns the failures."""
    problems, (early, early_at), (late, late_at) = loss_checks(got, ref, m)
    w_late, p_late = compare_weights(initial, got["weights"], ref["weights"], ref["params"], ref["buffers"],
                                     WEIGHT_TOL[m])
    problems += [f"after {STEPS} steps: {p}" for p in p_late]
    print(f"{m:<12} {label:<11} {what}: loss {ref['losses'][0]:.3f} -> {ref['losses'][-1]:.3f}; max rel loss diff: "
          f"steps 1-{EARLY_STEPS} {early:.1e} (step {early_at}), 1-{STEPS} {late:.1e} (step {late_at}); weights after "
          f"{STEPS} steps {w_late['param'][0]:.1e} ({w_late['param'][1]})  {'ok' if not problems else 'FAIL'}")
    return [f"{m} {label}: {p}" for p in problems]


def loss_problem(got, want, rel, at, tol, what):
    i = at - 1
    return f"step {at}: loss {got[i]:.6g}, {what} {want[i]:.6g} (relative {rel[i]:.3g} >= {tol:g})"


# ---------------------------------------------------------------- driver


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--onnxamp", default=os.path.join(ROOT, "build", "tools", "onnxamp"))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--checks", default=",".join(CHECKS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel onnxamp runs")
    parser.add_argument("--keep", help="keep data, trained models and onnxamp logs in this folder")
    parser.add_argument("--name-output", action="store_true",
                        help="pass --output (the model's first output) to onnxamp train instead of relying on the "
                             "default for a one-output model")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    checks = [c for c in args.checks.split(",") if c]
    if any(m not in MODELS for m in models) or any(c not in CHECKS for c in checks):
        parser.error(f"--models from {','.join(MODELS)}, --checks from {','.join(CHECKS)}")
    if not os.access(args.onnxamp, os.X_OK):
        print(f"FAIL: no onnxamp binary at {args.onnxamp} (build it, or pass --onnxamp)")
        return 1
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    work = args.keep or tempfile.mkdtemp(prefix="onnxamp-train-parity-")
    os.makedirs(work, exist_ok=True)
    start = time.monotonic()
    print(f"train parity: {args.onnxamp} vs torch {torch.__version__} (onnx {onnx.__version__}); {NUM_SAMPLES} "
          f"samples, batch {BATCH}, {STEPS} steps, 1 thread; files in {work}")

    data = {}
    reg_arrays = {}  # the reg check's inputs and float targets (in WORK/MODEL.reg.npz)
    for m in models:
        path = os.path.join(ROOT, "models", m + ".onnx")
        npz = os.path.join(work, m + ".npz")
        data[m] = (path, npz) + make_data(path, npz)
        if "reg" in checks and m in REG_MODELS:
            reg = dict(data[m][3])
            classes = onnx.load(path).graph.output[0].type.tensor_type.shape.dim[1].dim_value
            # A learnable function of the input: a fixed random projection, scaled to a standard deviation of 2.
            flat = reg[next(iter(reg))].reshape(NUM_SAMPLES, -1).astype(np.float64)
            target = flat @ np.random.default_rng(SEED + 2).standard_normal((flat.shape[1], classes))
            reg["labels"] = (2 * target / target.std()).astype(np.float32)
            np.savez(os.path.join(work, m + ".reg.npz"), **reg)
            reg_arrays[m] = reg
        if "plateau" in checks and m in PLATEAU_MODELS:
            rng = np.random.default_rng(SEED + 1)
            _, val = train_data.make_data(path, PLATEAU_VAL, rng)
            val["labels"] = val["labels"][rng.permutation(PLATEAU_VAL)]
            np.savez(os.path.join(work, m + ".val.npz"), **val)
            data[m] += (val,)

    # The onnxamp runs (each its own process, 1 thread) go to a pool while the torch runs use this process.
    runs = []  # (model, run name, amp, optimizer, steps, label smoothing, class weights, extra arguments)
    for m in models:
        if "fp32" in checks or "fp16" in checks:
            runs.append((m, "sgd-fp32", "off", "sgd", STEPS, 0.0, None, ()))
        if "fp32" in checks:
            runs += [(m, "adamw-fp32", "off", "adamw", STEPS, 0.0, None, ()),
                     (m, "sgd-fp32-early", "off", "sgd", EARLY_WEIGHT_STEPS, 0.0, None, ()),
                     (m, "adamw-fp32-early", "off", "adamw", EARLY_WEIGHT_STEPS, 0.0, None, ())]
        if "bf16" in checks:
            runs.append((m, "sgd-bf16", "bf16", "sgd", STEPS, 0.0, None, ()))
        if "fp16" in checks:
            runs.append((m, "sgd-fp16", "fp16", "sgd", STEPS, 0.0, None, ()))
        if "ls" in checks:
            runs.append((m, "sgd-ls", "off", "sgd", STEPS, LABEL_SMOOTHING, None, ()))
        if "cw" in checks:
            weights = class_weights(os.path.join(ROOT, "models", m + ".onnx"), data[m][2])
            runs.append((m, "sgd-cw", "off", "sgd", STEPS, 0.0, weights, ()))
            if m != "cnn":
                runs.append((m, "sgd-cw-ls", "off", "sgd", STEPS, LABEL_SMOOTHING, weights, ()))
        if "pg" in checks:
            runs.append((m, "adamw-pg", "off", "adamw", STEPS, 0.0, None,
                         ("--weight-decay", repr(PG_WEIGHT_DECAY), "--no-decay-1d", "--lr-scale",
                          f"{PG_HEAD[m]}={PG_FACTOR!r}", "--beta2", repr(PG_BETA2), "--eps", repr(PG_EPS))))
        if "opt" in checks:
            for name, optimizer, extra in OPT_RUNS:
                runs += [(m, f"{name}-fp32", "off", optimizer, STEPS, 0.0, None, extra),
                         (m, f"{name}-fp32-early", "off", optimizer, EARLY_WEIGHT_STEPS, 0.0, None, extra)]
            runs.append((m, "sgd-cv", "off", "sgd", STEPS, 0.0, None, ("--clip-value", repr(CLIP_VALUE))))
        if "lld" in checks and m in LLD_FACTORS:
            runs.append((m, "adamw-lld", "off", "adamw", STEPS, 0.0, None, ("--layer-decay", repr(LLD_DECAY))))
        if "reg" in checks and m in REG_MODELS:
            runs += [(m, f"reg-{loss}", "off", "sgd", STEPS, 0.0, None, args_) for loss, (args_, _) in REG_LOSSES.items()]
        if "plateau" in checks and m in PLATEAU_MODELS:
            runs.append((m, "adamw-plateau", "off", "adamw", STEPS, 0.0, None,
                         ("--schedule", "plateau", "--eval-every", str(PLATEAU_EVERY), "--patience",
                          str(PLATEAU_PATIENCE), "--gamma", repr(PLATEAU_GAMMA), "--val-data",
                          os.path.join(work, m + ".val.npz"))))
        if "ema" in checks:
            runs.append((m, "sgd-ema", "off", "sgd", STEPS, 0.0, None, ("--ema", repr(EMA_DECAY), "--ema-warmup")))
            runs.append((m, "sgd-swa", "off", "sgd", STEPS, 0.0, None, ("--swa-start", str(SWA_START))))
            if m in BN_MODELS:
                runs.append((m, "sgd-swa-bn", "off", "sgd", STEPS, 0.0, None,
                             ("--swa-start", str(SWA_START), "--update-bn")))
        if "lora" in checks and m in LORA_TARGETS:
            path = data[m][0]
            init = os.path.join(work, m + ".lora_init.npz")
            data[m] += ({"adapters": lora_model(path, LORA_TARGETS[m], os.path.join(work, m + ".lora.onnx"), init),
                         "model": os.path.join(work, m + ".lora.onnx")},)
            runs.append((m, "adamw-lora", "off", "adamw", STEPS, 0.0, None,
                         ("--lora-rank", str(LORA_RANK), "--lora-alpha", repr(LORA_ALPHA), "--lora-targets",
                          LORA_TARGETS[m], "--lora-init", init)))
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs - 1))
    futures = {}
    for m, name, amp, optimizer, steps, smoothing, weights, extra in runs:
        path, npz, class_axis = data[m][:3]
        if name.startswith("reg-"):
            npz = os.path.join(work, m + ".reg.npz")
        output = onnx.load(path).graph.output[0].name if args.name_output else None
        futures[(m, name)] = pool.submit(run_onnxamp, args.onnxamp, path, npz, class_axis, optimizer,
                                         MODELS[m][optimizer], steps, amp, os.path.join(work, f"{m}-{name}.onnx"),
                                         output, smoothing, weights, extra)
    failures = []
    reported = set()

    def onnxamp_result(m, name):
        try:
            return futures[(m, name)].result()
        except Failure as e:
            if (m, name) not in reported:  # a run that serves two checks is reported once
                reported.add((m, name))
                failures.append(f"{m} {name}: {e}")
                print(f"{m:<12} {name:<11} FAIL: {e}")
            return None

    for m in models:
        path, npz, class_axis, arrays = data[m][:4]
        initial = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
        torch_fp32 = {}
        onnxamp_fp32 = {}
        for optimizer in ("sgd", "adamw") if "fp32" in checks else ():
            got = onnxamp_result(m, f"{optimizer}-fp32")
            early_run = onnxamp_result(m, f"{optimizer}-fp32-early")
            onnxamp_fp32[optimizer] = got
            if got is None or early_run is None:
                continue
            ref = run_torch(path, arrays, class_axis, optimizer, MODELS[m][optimizer], STEPS,
                            snapshots=(EARLY_WEIGHT_STEPS,))
            torch_fp32[optimizer] = ref
            problems, (early, early_at), (late, late_at) = loss_checks(got, ref, m)
            noise = rounding_noise(ref) if optimizer == "adamw" else []
            w_early, p_early = compare_weights(initial, early_run["weights"], ref["snapshots"][EARLY_WEIGHT_STEPS],
                                               ref["params"], ref["buffers"], WEIGHT_TOL_EARLY[optimizer], noise)
            w_late, p_late = compare_weights(initial, got["weights"], ref["weights"], ref["params"], ref["buffers"],
                                             WEIGHT_TOL[m], noise)
            problems += [f"after {EARLY_WEIGHT_STEPS} steps: {p}" for p in p_early]
            problems += [f"after {STEPS} steps: {p}" for p in p_late]

            def fmt(w):
                s = f"{w['param'][0]:.1e} ({w['param'][1]})"
                return s + (f", bn stats {w['buffer'][0]:.1e} ({w['buffer'][1]})" if ref["buffers"] else "")
            skipped = f"; not compared (gradient is rounding noise): {', '.join(noise)}" if noise else ""
            print(f"{m:<12} {optimizer + ' fp32':<11} loss {ref['losses'][0]:.3f} -> {ref['losses'][-1]:.3f}; max rel "
                  f"loss diff: steps 1-{EARLY_STEPS} {early:.1e} (step {early_at}), 1-{STEPS} {late:.1e} (step "
                  f"{late_at}); weights after {EARLY_WEIGHT_STEPS} steps {fmt(w_early)}, after {STEPS} "
                  f"{fmt(w_late)}{skipped}  {'ok' if not problems else 'FAIL'}")
            failures += [f"{m} {optimizer} fp32: {p}" for p in problems]

        if "bf16" in checks:
            got = onnxamp_result(m, "sgd-bf16")
            if got is not None:
                ref = run_torch(path, arrays, class_axis, "sgd", MODELS[m]["sgd"], STEPS, autocast_bf16=True)
                step_max, step_at = worst(rel_diff(got["losses"], ref["losses"]))
                rel = rel_diff(epoch_means(got["losses"]), epoch_means(ref["losses"]))
                ep, ep_at = worst(rel)
                control = ""
                if "sgd" in torch_fp32:
                    c_step, c_at = worst(rel_diff(ref["losses"], torch_fp32["sgd"]["losses"]))
                    c_ep, _ = worst(rel_diff(epoch_means(ref["losses"]), epoch_means(torch_fp32["sgd"]["losses"])))
                    control = f"; torch autocast vs torch FP32: epochs {c_ep:.1e}, steps {c_step:.1e} (step {c_at})"
                if onnxamp_fp32.get("sgd") is not None:
                    o_ep, _ = worst(rel_diff(epoch_means(got["losses"]), epoch_means(onnxamp_fp32["sgd"]["losses"])))
                    control += f"; onnxamp bf16 vs onnxamp FP32: epochs {o_ep:.1e}"
                converted = re.search(r"\((\d+) nodes? in low precision\)", got["header"])
                ok = ep < BF16_TOL
                print(f"{m:<12} {'sgd bf16':<11} onnxamp bf16 ({converted.group(1) if converted else '?'} nodes) vs "
                      f"torch autocast(bf16): max rel diff of epoch-mean losses {ep:.1e} (epoch {ep_at}), per step "
                      f"{step_max:.1e} (step {step_at}: {got['losses'][step_at - 1]:.5g} vs "
                      f"{ref['losses'][step_at - 1]:.5g}){control}  {'ok' if ok else 'FAIL'}")
                if not ok:
                    ours, theirs = epoch_means(got["losses"])[ep_at - 1], epoch_means(ref["losses"])[ep_at - 1]
                    failures.append(f"{m} sgd bf16: epoch {ep_at} mean loss {ours:.6g}, torch autocast {theirs:.6g} "
                                    f"(relative {ep:.3g} >= {BF16_TOL:g})")

        if "fp16" in checks:
            off = onnxamp_result(m, "sgd-fp32")
            half = onnxamp_result(m, "sgd-fp16")
            if off is not None and half is not None:
                step_max, step_at = worst(rel_diff(half["losses"], off["losses"]))
                rel = rel_diff(epoch_means(half["losses"]), epoch_means(off["losses"]))
                ep, ep_at = worst(rel)
                converted = re.search(r"\((\d+) nodes? in low precision\)", half["header"])
                ok = ep < FP16_TOL
                print(f"{m:<12} {'sgd fp16':<11} onnxamp fp16 ({converted.group(1) if converted else '?'} nodes) vs "
                      f"onnxamp FP32: max rel diff of epoch-mean losses {ep:.1e} (epoch {ep_at}), per step "
                      f"{step_max:.1e} (step {step_at}: {half['losses'][step_at - 1]:.5g} vs "
                      f"{off['losses'][step_at - 1]:.5g}); {half['skipped'][-1]} steps skipped, final loss scale "
                      f"{half['scales'][-1]:g}  {'ok' if ok else 'FAIL'}")
                if not ok:
                    ours, theirs = epoch_means(half["losses"])[ep_at - 1], epoch_means(off["losses"])[ep_at - 1]
                    failures.append(f"{m} sgd fp16: epoch {ep_at} mean loss {ours:.6g}, FP32 {theirs:.6g} (relative "
                                    f"{ep:.3g} >= {FP16_TOL:g})")
        smoothed = [("sgd-ls", "sgd ls", LABEL_SMOOTHING, None)] if "ls" in checks else []
        if "cw" in checks:
            weights = class_weights(path, class_axis)
            smoothed.append(("sgd-cw", "sgd cw", 0.0, weights))
            if m != "cnn":
                smoothed.append(("sgd-cw-ls", "sgd cw ls", LABEL_SMOOTHING, weights))
        for name, label, smoothing, weights in smoothed:
            got = onnxamp_result(m, name)
            if got is None:
                continue
            ref = run_torch(path, arrays, class_axis, "sgd", MODELS[m]["sgd"], STEPS, label_smoothing=smoothing,
                            weights=weights)
            failures += losses_and_weights(m, label, f"label smoothing {smoothing}, "
                                           f"{'class weights' if weights else 'no weights'}", got, ref, initial)

        if "pg" in checks:
            got = onnxamp_result(m, "adamw-pg")
            if got is not None:
                ref = run_torch(path, arrays, class_axis, "adamw", MODELS[m]["adamw"], STEPS, head=PG_HEAD[m])
                problems, (early, early_at), (late, late_at) = loss_checks(got, ref, m)
                noise = rounding_noise(ref)
                w_late, p_late = compare_weights(initial, got["weights"], ref["weights"], ref["params"],
                                                 ref["buffers"], WEIGHT_TOL[m], noise)
                problems += [f"after {STEPS} steps: {p}" for p in p_late]
                groups = re.search(r"train: (\d+) parameter groups", got["log"])
                if not groups:
                    problems.append("onnxamp printed no 'parameter groups' line")
                print(f"{m:<12} {'adamw pg':<11} {groups.group(1) if groups else '?'} groups (no decay below 2 dims, "
                      f"{PG_HEAD[m]} at {PG_FACTOR:g}x): loss {ref['losses'][0]:.3f} -> {ref['losses'][-1]:.3f}; max "
                      f"rel loss diff: steps 1-{EARLY_STEPS} {early:.1e} (step {early_at}), 1-{STEPS} {late:.1e} (step "
                      f"{late_at}); weights after {STEPS} steps {w_late['param'][0]:.1e} ({w_late['param'][1]})  "
                      f"{'ok' if not problems else 'FAIL'}")
                failures += [f"{m} adamw pg: {p}" for p in problems]

        for optimizer, onnxamp_optimizer, _ in OPT_RUNS if "opt" in checks else ():
            got = onnxamp_result(m, f"{optimizer}-fp32")
            early_run = onnxamp_result(m, f"{optimizer}-fp32-early")
            if got is None or early_run is None:
                continue
            ref = run_torch(path, arrays, class_axis, optimizer, MODELS[m][onnxamp_optimizer], STEPS,
                            snapshots=(EARLY_WEIGHT_STEPS,))
            loss_tol, weight_tol, early_steps, early_weight_tol = OPT_TOL.get(
                (m, optimizer), (LOSS_TOL[m], WEIGHT_TOL[m], EARLY_STEPS, WEIGHT_TOL_EARLY["adamw"]))
            problems, (early, early_at), (late, late_at) = loss_checks(got, ref, m, early_steps, loss_tol)
            noise = rounding_noise(ref)  # both divide a gradient by its own size (Lion: its sign)
            w_early, p_early = compare_weights(initial, early_run["weights"], ref["snapshots"][EARLY_WEIGHT_STEPS],
                                               ref["params"], ref["buffers"], early_weight_tol, noise)
            w_late, p_late = compare_weights(initial, got["weights"], ref["weights"], ref["params"], ref["buffers"],
                                             weight_tol, noise)
            problems += [f"after {EARLY_WEIGHT_STEPS} steps: {p}" for p in p_early]
            problems += [f"after {STEPS} steps: {p}" for p in p_late]
            skipped = f"; not compared (gradient is rounding noise): {', '.join(noise)}" if noise else ""
            print(f"{m:<12} {optimizer + ' fp32':<11} loss {ref['losses'][0]:.3f} -> {ref['losses'][-1]:.3f}; max rel "
                  f"loss diff: steps 1-{early_steps} {early:.1e} (step {early_at}), 1-{STEPS} {late:.1e} (step "
                  f"{late_at}); weights after {EARLY_WEIGHT_STEPS} steps {w_early['param'][0]:.1e} "
                  f"({w_early['param'][1]}), after {STEPS} {w_late['param'][0]:.1e} ({w_late['param'][1]}){skipped}  "
                  f"{'ok' if not problems else 'FAIL'}")
            failures += [f"{m} {optimizer} fp32: {p}" for p in problems]

        got = onnxamp_result(m, "adamw-lld") if "lld" in checks and m in LLD_FACTORS else None
        if got is not None:
            ref = run_torch(path, arrays, class_axis, "adamw", MODELS[m]["adamw"], STEPS, lld=LLD_FACTORS[m])
            groups = re.search(r"train: (\d+) parameter groups", got["log"])
            failures += losses_and_weights(m, "adamw lld", f"--layer-decay {LLD_DECAY:g} "
                                           f"({groups.group(1) if groups else '?'} groups)", got, ref, initial)
            if not groups or groups.group(1) != str(len(LLD_FACTORS[m])):
                failures.append(f"{m} adamw lld: onnxamp printed no line of {len(LLD_FACTORS[m])} parameter groups")

        for loss, (_, criterion) in REG_LOSSES.items() if "reg" in checks and m in REG_MODELS else ():
            got = onnxamp_result(m, f"reg-{loss}")
            if got is None:
                continue
            ref = run_torch(path, reg_arrays[m], class_axis, "sgd", MODELS[m]["sgd"], STEPS, criterion=criterion())
            failures += losses_and_weights(m, loss, " ".join(REG_LOSSES[loss][0]), got, ref, initial)

        got = onnxamp_result(m, "sgd-cv") if "opt" in checks else None
        if got is not None:
            ref = run_torch(path, arrays, class_axis, "sgd", MODELS[m]["sgd"], STEPS, clip_value=CLIP_VALUE)
            failures += losses_and_weights(m, "sgd cv", f"--clip-value {CLIP_VALUE:g}", got, ref, initial)

        if "plateau" in checks and m in PLATEAU_MODELS:
            got = onnxamp_result(m, "adamw-plateau")
            if got is not None:
                ref = run_torch(path, arrays, class_axis, "adamw", MODELS[m]["adamw"], STEPS, plateau_val=data[m][4])
                problems, (early, early_at), (late, late_at) = loss_checks(got, ref, m)
                lr_rel = rel_diff(got["lrs"], ref["lrs"])
                if not lr_rel.max() < 1e-5:  # the log prints 6 digits
                    at = int(np.argmax(lr_rel))
                    problems.append(f"step {at + 1}: learning rate {got['lrs'][at]:g}, torch {ref['lrs'][at]:g}")
                drops = [i + 1 for i in range(1, STEPS) if ref["lrs"][i] < ref["lrs"][i - 1]]
                if not drops:
                    problems.append("torch never lowered the rate: the check tests nothing")
                print(f"{m:<12} {'plateau':<11} rate lowered before steps {drops} (torch; onnxamp the same: "
                      f"{'yes' if lr_rel.max() < 1e-5 else 'no'}), final {ref['lrs'][-1]:g}; max rel loss diff: "
                      f"steps 1-{EARLY_STEPS} {early:.1e} (step {early_at}), 1-{STEPS} {late:.1e} (step {late_at})  "
                      f"{'ok' if not problems else 'FAIL'}")
                failures += [f"{m} plateau: {p}" for p in problems]

        if "ema" in checks:
            got = onnxamp_result(m, "sgd-ema")
            if got is not None:
                ref = run_torch(path, arrays, class_axis, "sgd", MODELS[m]["sgd"], STEPS, ema=EMA_DECAY)
                problems, (early, early_at), (late, late_at) = loss_checks(got, ref, m)
                w_ema, p_ema = compare_weights(initial, got["weights"], ref["ema"], ref["params"], ref["buffers"],
                                               WEIGHT_TOL[m])
                live, _ = compare_weights(initial, got["weights"], ref["weights"], ref["params"], ref["buffers"],
                                          float("inf"))
                problems += [f"the averages after {STEPS} steps: {p}" for p in p_ema]
                stats = f", bn stats {w_ema['buffer'][0]:.1e} ({w_ema['buffer'][1]})" if ref["buffers"] else ""
                print(f"{m:<12} {'sgd ema':<11} decay {EMA_DECAY:g} with warm-up: max rel loss diff: steps "
                      f"1-{EARLY_STEPS} {early:.1e} (step {early_at}), 1-{STEPS} {late:.1e} (step {late_at}); exported "
                      f"averages vs torch's {w_ema['param'][0]:.1e} ({w_ema['param'][1]}){stats} (vs torch's live "
                      f"weights: {live['param'][0]:.1e})  {'ok' if not problems else 'FAIL'}")
                failures += [f"{m} sgd ema: {p}" for p in problems]
            got = onnxamp_result(m, "sgd-swa")
            if got is not None:
                ref = run_torch(path, arrays, class_axis, "sgd", MODELS[m]["sgd"], STEPS, swa=SWA_START)
                problems, _, _ = loss_checks(got, ref, m)
                w_swa, p_swa = compare_weights(initial, got["weights"], ref["ema"], ref["params"], ref["buffers"],
                                               WEIGHT_TOL[m])
                live, _ = compare_weights(initial, got["weights"], ref["weights"], ref["params"], ref["buffers"],
                                          float("inf"))
                problems += [f"the averages after {STEPS} steps: {p}" for p in p_swa]
                print(f"{m:<12} {'sgd swa':<11} --swa-start {SWA_START}: exported averages vs torch's "
                      f"{w_swa['param'][0]:.1e} ({w_swa['param'][1]}) (vs torch's live weights: "
                      f"{live['param'][0]:.1e})  {'ok' if not problems else 'FAIL'}")
                failures += [f"{m} sgd swa: {p}" for p in problems]
            bn_run = onnxamp_result(m, "sgd-swa-bn") if m in BN_MODELS else None
            if bn_run is not None and got is not None:
                # update_bn in torch on onnxamp's own averaged weights: the recomputation alone is compared.
                want = torch_update_bn(path, arrays, bn_run["weights"])
                problems = []
                worst_bn, moved = (0.0, "-"), float("inf")
                for n, w in want.items():
                    d = float(np.abs(bn_run["weights"][n] - w).max() / max(float(np.abs(w).max()), 1e-30))
                    if d > worst_bn[0] or worst_bn[1] == "-":
                        worst_bn = (d, n)
                    moved = min(moved, float(np.abs(got["weights"][n] - w).max() / max(float(np.abs(w).max()), 1e-30)))
                    if not d < 1e-5:
                        problems.append(f"{n}: max|onnxamp - torch| / max|torch| = {d:.3g} >= 1e-5")
                same_params = all(np.array_equal(bn_run["weights"][n], got["weights"][n]) for n in ref["params"])
                if not same_params:
                    problems.append("--update-bn changed the averaged parameters")
                if not moved > 1e-3:
                    problems.append(f"the recomputed statistics are within {moved:.1e} of the averaged ones: the check "
                                    "tests little")
                print(f"{m:<12} {'swa bn':<11} --update-bn vs torch's update_bn on the same averaged weights: "
                      f"{worst_bn[0]:.1e} ({worst_bn[1]}); the averaged statistics were {moved:.1e} away; parameters "
                      f"unchanged: {'yes' if same_params else 'no'}  {'ok' if not problems else 'FAIL'}")
                failures += [f"{m} swa bn: {p}" for p in problems]

        got = onnxamp_result(m, "adamw-lora") if "lora" in checks and m in LORA_TARGETS else None
        if got is not None:
            lora = data[m][-1]
            adapters = lora["adapters"]
            names = {n for a, b, _, _ in adapters.values() for n in (a, b)}
            ref = run_torch(lora["model"], arrays, class_axis, "adamw", MODELS[m]["adamw"], STEPS, train_only=names)
            ref["weights"] = merged_lora(ref["weights"], adapters)
            ref["params"] = ref["params"] - names
            problems, (early, early_at), (late, late_at) = loss_checks(got, ref, m)
            w_rel, p_w = compare_weights(initial, got["weights"], ref["weights"], ref["params"], ref["buffers"],
                                         WEIGHT_TOL[m])
            problems += [f"the merged weights after {STEPS} steps: {p}" for p in p_w]
            frozen = [n for n in initial if n not in adapters and n not in ref["buffers"] and
                      not np.array_equal(got["weights"][n], initial[n])]
            problems += [f"{n} is not an adapted weight but changed" for n in frozen]
            # What training changed in each adapted weight, onnxamp's against torch's (relative to torch's largest).
            delta, moved = (0.0, "-"), float("inf")
            for w in adapters:
                d_got = got["weights"][w].astype(np.float64) - initial[w]
                d_ref = ref["weights"][w].astype(np.float64) - initial[w]
                scale = float(np.abs(d_ref).max())
                moved = min(moved, scale / float(np.abs(initial[w]).max()))
                d = float(np.abs(d_got - d_ref).max()) / max(scale, 1e-30)
                if d > delta[0] or delta[1] == "-":
                    delta = (d, w)
            if not delta[0] < WEIGHT_TOL[m]:
                problems.append(f"{delta[1]}: the change training made differs from torch's by {delta[0]:.3g}")
            if not moved > 1e-3:
                problems.append(f"an adapted weight moved by {moved:.1e} of its largest value: the check tests little")
            print(f"{m:<12} {'adamw lora':<11} rank {LORA_RANK}, {len(adapters)} weights: max rel loss diff: steps "
                  f"1-{EARLY_STEPS} {early:.1e} (step {early_at}), 1-{STEPS} {late:.1e} (step {late_at}); merged "
                  f"weights {w_rel['param'][0]:.1e} ({w_rel['param'][1]}), their change {delta[0]:.1e} "
                  f"({delta[1]}); the others unchanged: {'yes' if not frozen else 'no'}  "
                  f"{'ok' if not problems else 'FAIL'}")
            failures += [f"{m} adamw lora: {p}" for p in problems]
    pool.shutdown()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(f"train parity: {len(failures)} failures in {time.monotonic() - start:.0f} s")
    for f in failures:
        print(f"FAIL {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
