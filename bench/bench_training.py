#!/usr/bin/python3
"""Training on the CPU: `onnxamp train` vs ONNX Runtime Training vs PyTorch, on the same models, data and batches.

For models/mlp.onnx, models/digits_mlp.onnx and models/cnn.onnx (batch 64, 64 and 32), and models/transformer.onnx
(one GPT block over 32 tokens, logits [batch, 32, 128]; batch 16) with --models transformer, and mlp4096 (three
Linear 4096x4096 with ReLU between, the AMP recipe's network, written by onnxamp_gen_models into BUILD/bench_models;
cross-entropy over its 4096 outputs, batch 64, 10 timed steps after 5) with --models mlp4096:

  data       seeded float32 inputs and int64 labels (argmax of a fixed random projection of the input), 20 batches,
             written to a temporary .npz; step i (0-based) trains on batch i mod 20, in file order, on every side;
             transformer: token ids drawn uniformly from its 128, each token's label the token before it (cyclic);
  weights    the ONNX file's initializers; trained: the floating initializers with more than one element except
             BatchNormalization's running statistics (what `onnxamp train` trains; the rest frozen on every side);
  loss       cross-entropy, mean over the batch (transformer: over every token; onnxamp `--class-axis -1`, ORT's
             CrossEntropyLoss block on the logits transposed to [batch, 128, 32], torch's on [batch * 32, 128]);
  optimizer  AdamW(lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01, bias correction) with PyTorch's
             arithmetic on every side: ONNX Runtime's AdamWOptimizer is switched to adam_mode 0 (its default,
             mode 1, is Hugging Face's form: bias correction folded into the learning rate, eps added to sqrt(v)
             before the correction, and the decay applied after the update), or --optimizer sgd (lr 0.05, no
             momentum, no weight decay: w -= lr g everywhere).

Sides, each in its own process; its peak RSS is the VmHWM that process reports of itself (onnxamp train's done
record, the workers' results; not the child's ru_maxrss, which Linux carries over from the Python parent):

  onnxamp        `onnxamp train MODEL --data D.npz --labels labels --loss ce --no-shuffle --log-every 1 --log-format
                 jsonl --threads T`; the loss and the step time (Trainer::Step's wall time: batch gather, forward and
                 backward, optimizer) of every step are read from its JSON step records (full precision);
  onnxamp-bf16   the same with --amp bf16 (BF16 compute, FP32 master weights);
  onnxamp-recompute  `onnxamp` with --recompute auto (activation recomputation: the same losses bit for bit, less
                 memory, about one more forward pass);
  onnxamp-recompute-cheap  `onnxamp` with --recompute cheap (only what cheap ops make from values kept anyway);
  onnxamp-passive  `onnxamp` with OMP_WAIT_POLICY=passive (OpenMP threads sleep instead of spinning while they
                 wait: on a machine busy with other work, spinning threads lose their time slices);
  ort            ONNX Runtime Training (.venv-ort-training, scripts/setup_ort_training.sh): artifacts made by
                 `artifacts.generate_artifacts` in a separate process beforehand; a step is `module(x, y)`,
                 `optimizer.step()`, `module.lazy_reset_grad()`; intra-op threads T, inter-op 1;
  torch          PyTorch eager (Debian's python3-torch) on the same ONNX graph (bench/onnx_torch.py, trainable),
                 torch.set_num_threads(T); a step is zero_grad, forward, loss, backward, optimizer.step;
  torch-bf16     the same under torch.autocast("cpu", dtype=torch.bfloat16);
  torch-pypi     the same in PyPI's PyTorch (.venv-torch, scripts/setup_torch_peer.sh: 2.11 with MKL for its
                 GEMMs and oneDNN), what PyTorch users run; Debian's 1.13 multiplies FP32 matrices with a reference
                 BLAS. In the default sides when .venv-torch exists;
  torch-pypi-bf16  the same under torch.autocast("cpu", dtype=torch.bfloat16);
  torch-pypi-compile  torch-pypi with the module under torch.compile (Inductor's C++ code; compiled during the
                 untimed steps).

Each run trains --warmup + --steps steps (default: 20 + 300 for mlp and digits_mlp, 20 + 20 cnn, 20 + 50
transformer, 5 + 10 mlp4096); the losses of steps 1-20 are
compared (relative difference to ORT and to PyTorch FP32; above 1e-4 is flagged), the last --steps steps are timed
(model loading, artifact generation and session creation are outside the timed region on every side). Runs are
repeated --repeats times, the sides interleaved in a rotating order; the table shows medians.

The full-size case, --resnet50 MODEL (the ResNet-50 v1.5 that `onnxamp_gen_models DIR --only resnet50` writes):
fine-tunes it at batch 8 for --warmup 2 + --steps 5 steps by default on the sides onnxamp, onnxamp-bf16, ort and
torch (and torch-pypi), at os.cpu_count() threads, once (--threads, --sides, --repeats override); its data are 7 batches (one per
step) of standard normal images with uniformly drawn labels (the projection the small models' labels use would
take 600 MB), and every step's loss is compared. Given alone it runs only ResNet-50; --models adds others.

Memory budget (every model; what a trainer that keeps nothing else would need, FP32):

  parameters   4 bytes per trained value (the list above);
  gradients    the same again (one FP32 gradient per parameter);
  optimizer    AdamW: two FP32 moments per parameter (8 bytes per value); SGD without momentum: none;
  activations  the forward values the backward pass needs, each distinct value counted once, at the run's batch,
               shapes from ONNX shape inference: Conv's, BatchNormalization's (training mode) and MaxPool's input,
               Relu's output, Gemm's and MatMul's inputs that are not initializers, plus MaxPool's argmax (an int64
               per output element) and BatchNormalization's per-channel batch mean and inverse std; Add, Flatten,
               Reshape and GlobalAveragePool need nothing (what PyTorch's autograd saves for these ops). A model
               with another op, or a value whose shape inference leaves symbolic, gets no budget ("-").

`RSS / budget` is a side's median peak RSS over that sum. Beyond the budget every side holds its runtime (libraries,
thread stacks; Python and PyTorch for ort and torch), the data set (--resnet50: 32 MiB) and its copy of the model.

Usage: /usr/bin/python3 bench/bench_training.py [--build-dir DIR] [--models mlp,digits_mlp,cnn] [--threads 1,2]
                                                [--repeats 3] [--steps N] [--warmup W] [--optimizer adamw|sgd]
                                                [--sides onnxamp,ort,torch,torch-bf16,onnxamp-bf16,onnxamp-passive,
                                                         torch-pypi,torch-pypi-bf16,torch-pypi-compile,
                                                         onnxamp-recompute,onnxamp-recompute-cheap]
                                                [--resnet50 MODEL] [--markdown] [--json FILE] [--keep DIR]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no bench/__pycache__ in the source tree
import bench_util  # noqa: E402  (bench/bench_util.py)

BATCHES = {"mlp": 64, "digits_mlp": 64, "cnn": 32, "transformer": 16, "mlp4096": 64, "resnet50": 8}
PER_TOKEN = {"transformer"}  # logits [batch, tokens, classes]: the loss over every token
NUM_BATCHES = 20  # batches in the data set; the loss check covers the first 20 steps
LOSS_STEPS = 20
LOSS_TOL = 1e-4
SEED = 0
ADAMW = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}
SGD = {"lr": 0.05}
STEPS = {"mlp": 300, "digits_mlp": 300, "cnn": 20, "transformer": 50, "mlp4096": 10, "resnet50": 5}  # timed steps per model (--steps overrides)
WARMUP = {"mlp4096": 5, "resnet50": 2}  # untimed steps first (--warmup overrides; others LOSS_STEPS)
SIDES = ["onnxamp", "ort", "torch", "torch-bf16", "onnxamp-bf16", "onnxamp-passive"]
PYPI_SIDES = ["torch-pypi", "torch-pypi-bf16"]  # in the default sides when .venv-torch exists
ALL_SIDES = SIDES + PYPI_SIDES + ["torch-pypi-compile", "onnxamp-recompute", "onnxamp-recompute-cheap"]
RESNET50_SIDES = ["onnxamp", "onnxamp-bf16", "ort", "torch"]
ORT_PYTHON = os.path.join(ROOT, ".venv-ort-training", "bin", "python")
TORCH_PYTHON = "/usr/bin/python3"
TORCH_PYPI_PYTHON = os.path.join(ROOT, ".venv-torch", "bin", "python")  # scripts/setup_torch_peer.sh
# Each PyTorch side: (interpreter, worker, compiled); the reference side its time ratio is taken against.
TORCH_SIDES = {
    "torch": (TORCH_PYTHON, "torch", False),
    "torch-bf16": (TORCH_PYTHON, "torch-bf16", False),
    "torch-pypi": (TORCH_PYPI_PYTHON, "torch", False),
    "torch-pypi-bf16": (TORCH_PYPI_PYTHON, "torch-bf16", False),
    "torch-pypi-compile": (TORCH_PYPI_PYTHON, "torch", True),
}
PEER_REF = {"ort": "onnxamp", "torch": "onnxamp", "torch-bf16": "onnxamp-bf16", "torch-pypi": "onnxamp",
            "torch-pypi-bf16": "onnxamp-bf16", "torch-pypi-compile": "onnxamp"}


class Failure(Exception):
    pass


# ---------------------------------------------------------------- what every side shares


def trained_names(model):
    """(trained, frozen) initializer names, as `onnxamp train` chooses them: floating initializers with more than
    one element that a node reads, minus BatchNormalization's running statistics."""
    import numpy as np
    from onnx import numpy_helper
    g = model.graph
    read = {n for node in g.node for n in node.input if n}
    bn_stats = {node.input[i] for node in g.node if node.op_type == "BatchNormalization"
                for i in (3, 4) if i < len(node.input)}
    trained, frozen = [], []
    for t in g.initializer:
        a = numpy_helper.to_array(t)
        if t.name in read and t.name not in bn_stats and np.issubdtype(a.dtype, np.floating) and a.size > 1:
            trained.append(t.name)
        else:
            frozen.append(t.name)
    return trained, frozen


def make_data(model_path, batch, npz_path, num_batches=NUM_BATCHES):
    """Seeded inputs for the model's single data input and labels in [0, classes); written to npz_path. The labels
    are the argmax of a fixed random projection of the input, or uniform draws where that projection would exceed
    16M values (resnet50). A model of int64 token ids with logits [batch, tokens, classes]: ids in [0, classes),
    each token's label the one before it."""
    import numpy as np
    import onnx
    g = onnx.load(model_path, load_external_data=False).graph
    inits = {t.name for t in g.initializer}
    (vi,) = [i for i in g.input if i.name not in inits]
    dims = [d.dim_value for d in vi.type.tensor_type.shape.dim][1:]
    out_dims = g.output[0].type.tensor_type.shape.dim
    n = batch * num_batches
    rng = np.random.default_rng(SEED)
    if vi.type.tensor_type.elem_type == onnx.TensorProto.INT64:
        classes = out_dims[len(out_dims) - 1].dim_value
        x = rng.integers(0, classes, size=[n] + dims).astype(np.int64)
        labels = np.roll(x, 1, axis=1)
        np.savez(npz_path, **{vi.name: x, "labels": labels})
        return vi.name
    classes = out_dims[1].dim_value
    x = rng.standard_normal([n] + dims).astype(np.float32)
    if x[0].size * classes <= 1 << 24:
        proj = rng.standard_normal((x[0].size, classes)).astype(np.float32)
        labels = np.argmax(x.reshape(n, -1) @ proj, axis=1).astype(np.int64)
    else:
        labels = rng.integers(0, classes, size=n).astype(np.int64)
    np.savez(npz_path, **{vi.name: x, "labels": labels})
    return vi.name


def batch_rows(step, batch, num_batches):
    i = step % num_batches
    return slice(i * batch, (i + 1) * batch)


# What autograd keeps for backward, per op: indices of the inputs ("i") and outputs ("o") it saves.
SAVED = {"Conv": [("i", 0)], "BatchNormalization": [("i", 0)], "MaxPool": [("i", 0)], "Relu": [("o", 0)],
         "Gemm": [("i", 0), ("i", 1)], "MatMul": [("i", 0), ("i", 1)]}
SAVES_NOTHING = {"Add", "Sub", "Flatten", "Reshape", "GlobalAveragePool", "Identity", "Constant", "Shape"}


def memory_budget(model_path, batch, optimizer):
    """{parameters, gradients, optimizer, activations: bytes, unknown_ops: [...]}: the FP32 training budget (module
    docstring) of the model at this batch size."""
    import numpy as np
    import onnx
    from onnx import numpy_helper, shape_inference
    model = onnx.load(model_path)
    trained, _ = trained_names(model)
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    params = sum(numpy_helper.to_array(inits[n]).size for n in trained) * 4
    for vi in g.input:
        if vi.name not in inits:
            vi.type.tensor_type.shape.dim[0].dim_value = batch
    g = shape_inference.infer_shapes(model).graph
    elem_bytes = {onnx.TensorProto.FLOAT: 4, onnx.TensorProto.INT64: 8, onnx.TensorProto.FLOAT16: 2,
                  onnx.TensorProto.BFLOAT16: 2, onnx.TensorProto.DOUBLE: 8, onnx.TensorProto.INT32: 4}
    sizes = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        if all(d.HasField("dim_value") for d in t.shape.dim):
            sizes[vi.name] = (int(np.prod([d.dim_value for d in t.shape.dim])), elem_bytes.get(t.elem_type, 4))
    kept, extra, unknown = {}, 0, []
    for node in g.node:
        if node.op_type in SAVES_NOTHING:
            continue
        if node.op_type in SAVED:
            names = [(node.input if io == "i" else node.output)[k] for io, k in SAVED[node.op_type]
                     if k < len(node.input if io == "i" else node.output)]
        else:
            unknown.append(node.op_type)
            continue
        names = [n for n in names if n and n not in inits]
        if any(n not in sizes for n in names) or (node.op_type in ("MaxPool", "BatchNormalization") and
                                                  node.output[0] not in sizes):
            unknown.append(f"{node.op_type} (shapes)")
            continue
        for n in names:
            kept[n] = sizes[n][0] * sizes[n][1]
        if node.op_type == "MaxPool":  # argmax indices
            extra += sizes[node.output[0]][0] * 8
        elif node.op_type == "BatchNormalization":  # batch mean and inverse std per channel
            extra += 2 * numpy_helper.to_array(inits[node.input[1]]).size * 4 if node.input[1] in inits else 0
    return {"parameters": params, "gradients": params, "optimizer": 2 * params if optimizer == "adamw" else 0,
            "activations": sum(kept.values()) + extra, "unknown_ops": sorted(set(unknown))}


# ---------------------------------------------------------------- workers (each in its own process)


def worker_ort_artifacts(a):
    """Writes ONNX Runtime Training's artifacts for the model into a.dir (run in .venv-ort-training)."""
    import onnx
    from onnxruntime.training import artifacts, onnxblock
    model = onnx.load(a.model)
    trained, frozen = trained_names(model)
    if a.optimizer == "adamw":
        block = onnxblock.optim.AdamW(bias_correction=True, betas=ADAMW["betas"], eps=ADAMW["eps"],
                                      weight_decay=ADAMW["weight_decay"])
    else:
        block = onnxblock.optim.SGD()
    # ORT's LayerNormalization gradient reads the mean and inverse standard deviation outputs, which exporters leave
    # out (its builder fails on the index otherwise): name them.
    for i, node in enumerate(n for n in model.graph.node if n.op_type == "LayerNormalization"):
        while len(node.output) < 3:
            node.output.append(f"{node.output[0]}_ort_stat{len(node.output)}_{i}")
    loss = artifacts.LossType.CrossEntropyLoss
    if getattr(a, "classes_last", False):  # logits [batch, tokens, classes]; [batch, classes, tokens] needs nothing
        loss = token_cross_entropy(onnx, onnxblock, model)
    artifacts.generate_artifacts(model, requires_grad=trained, frozen_params=frozen, loss=loss, optimizer=block,
                                 artifact_directory=a.dir)
    if a.optimizer == "adamw":  # PyTorch's AdamW arithmetic (adam_mode 0) instead of Hugging Face's (1)
        path = os.path.join(a.dir, "optimizer_model.onnx")
        opt = onnx.load(path)
        nodes = [n for n in opt.graph.node if n.op_type == "AdamWOptimizer"]
        if len(nodes) != 1:
            raise Failure(f"{path}: expected one AdamWOptimizer node, found {len(nodes)}")
        attrs = [at for at in nodes[0].attribute if at.name == "adam_mode"]
        if len(attrs) != 1:
            raise Failure(f"{path}: the AdamWOptimizer node has no adam_mode attribute")
        attrs[0].i = 0
        onnx.save(opt, path)


def token_cross_entropy(onnx, onnxblock, model):
    """ORT's loss block for logits [batch, tokens, classes]: SoftmaxCrossEntropyLoss (what its CrossEntropyLoss block
    writes, mean reduction) on the logits transposed to [batch, classes, tokens], since the op takes the classes at
    axis 1, with labels [batch, tokens] (the block itself would shape them as the logits less the last dim)."""
    dims = model.graph.output[0].type.tensor_type.shape.dim

    class TokenCrossEntropy(onnxblock.Block):
        def build(self, logits):
            g = self.base.graph
            moved, loss = logits + "_classes_second", "token_cross_entropy"
            g.input.append(onnx.helper.make_tensor_value_info(
                "labels", onnx.TensorProto.INT64, [d.dim_param or d.dim_value for d in list(dims)[:2]]))
            g.node.append(onnx.helper.make_node("Transpose", [logits], [moved], perm=[0, 2, 1]))
            # Its gradient builder reads the log-probabilities output.
            g.node.append(onnx.helper.make_node("SoftmaxCrossEntropyLoss", [moved, "labels"],
                                                [loss, "token_log_prob"], reduction="mean"))
            return loss

    return TokenCrossEntropy()


def worker_ort(a):
    """Trains with ONNX Runtime Training's on-device API; prints a JSON result."""
    import numpy as np
    import onnxruntime
    from onnxruntime.training import api
    data = np.load(a.npz)
    x, y = data[a.input], data["labels"]
    num_batches = len(y) // a.batch
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    state = api.CheckpointState.load_checkpoint(os.path.join(a.dir, "checkpoint"))
    module = api.Module(os.path.join(a.dir, "training_model.onnx"), state, os.path.join(a.dir, "eval_model.onnx"),
                        device="cpu", session_options=so)
    opt = api.Optimizer(os.path.join(a.dir, "optimizer_model.onnx"), module)
    opt.set_learning_rate(ADAMW["lr"] if a.optimizer == "adamw" else SGD["lr"])
    module.train()
    losses, times = [], []
    for step in range(a.warmup + a.steps):
        rows = batch_rows(step, a.batch, num_batches)
        t0 = time.perf_counter()
        loss = module(x[rows], y[rows])
        opt.step()
        module.lazy_reset_grad()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    print(json.dumps({"losses": losses, "times": times, "peak_rss_bytes": bench_util.status_bytes("VmHWM")}))


def worker_torch(a, bf16):
    """Trains the ONNX graph in PyTorch eager mode; prints a JSON result."""
    import warnings
    import numpy as np
    import torch
    import onnx_torch
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    torch.set_num_threads(a.threads)
    torch.manual_seed(SEED)
    data = np.load(a.npz)
    x, y = torch.from_numpy(data[a.input]), torch.from_numpy(data["labels"])
    num_batches = len(y) // a.batch
    module = onnx_torch.load(a.model, device="cpu", trainable=True)
    module.train()
    params = list(module.params)
    forward = torch.compile(module) if a.compile else module  # compiled at the first (untimed) steps
    if a.optimizer == "adamw":
        opt = torch.optim.AdamW(params, lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"],
                                weight_decay=ADAMW["weight_decay"])
    else:
        opt = torch.optim.SGD(params, lr=SGD["lr"], momentum=0)
    criterion = torch.nn.CrossEntropyLoss()
    per_token = y.dim() == 2  # logits [batch, tokens, classes]
    losses, times = [], []
    for step in range(a.warmup + a.steps):
        rows = batch_rows(step, a.batch, num_batches)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            (logits,) = forward(x[rows])
            loss = criterion(logits.reshape(-1, logits.shape[-1]) if per_token else logits, y[rows].reshape(-1))
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    print(json.dumps({"losses": losses, "times": times, "peak_rss_bytes": bench_util.status_bytes("VmHWM")}))


# ---------------------------------------------------------------- the driver


def run_child(cmd, log_path, env=None):
    """Runs cmd with stdout and stderr to files; returns (stdout, stderr, peak RSS in bytes of that child)."""
    with open(log_path + ".out", "w") as out, open(log_path + ".err", "w") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    with open(log_path + ".out") as f:
        stdout = f.read()
    with open(log_path + ".err") as f:
        stderr = f.read()
    if p.returncode != 0:
        last = (stderr.strip().splitlines() or ["(no output)"])[-1]
        raise Failure(f"{os.path.basename(log_path)}: exit {p.returncode}: {last} (log: {log_path}.err)")
    return stdout, stderr, bench_util.child_peak_rss(stdout, usage.ru_maxrss * 1024)


def model_path_of(a, model):
    if model == "resnet50":
        return os.path.abspath(a.resnet50)
    if model == "mlp4096":  # 200 MB: written by onnxamp_gen_models into the build folder, not kept in models/
        path = os.path.join(a.build, "bench_models", "mlp4096.onnx")
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            subprocess.run([os.path.join(a.build, "tools", "onnxamp_gen_models"), os.path.dirname(path), "--only",
                            "mlp4096"], check=True, stdout=subprocess.DEVNULL)
        return path
    return os.path.join(ROOT, "models", model + ".onnx")


def warmup_of(a, model):
    return a.warmup if a.warmup is not None else WARMUP.get(model, LOSS_STEPS)


def run_side(side, a, model, npz, input_name, artifacts_dir, threads, work, tag):
    batch = BATCHES[model]
    model_path = model_path_of(a, model)
    steps = a.steps or STEPS[model]
    warmup = warmup_of(a, model)
    total = warmup + steps
    log = os.path.join(work, f"{tag}.{side}.{model}.t{threads}")
    if side.startswith("onnxamp"):
        cmd = [a.onnxamp, "train", model_path, "--data", npz, "--labels", "labels", "--loss", "ce",
               "--steps", str(total), "--batch-size", str(batch), "--no-shuffle", "--threads", str(threads),
               "--log-every", "1", "--log-format", "jsonl", "--seed", str(SEED), "-o", log + ".onnx"]
        if model in PER_TOKEN:
            cmd += ["--class-axis", "-1"]
        if a.optimizer == "adamw":
            cmd += ["--optimizer", "adamw", "--lr", repr(ADAMW["lr"]), "--weight-decay", repr(ADAMW["weight_decay"])]
        else:
            cmd += ["--optimizer", "sgd", "--lr", repr(SGD["lr"])]
        if side == "onnxamp-bf16":
            cmd += ["--amp", "bf16"]
        if side == "onnxamp-recompute":
            cmd += ["--recompute", "auto"]
        if side == "onnxamp-recompute-cheap":
            cmd += ["--recompute", "cheap"]
        env = dict(os.environ, OMP_WAIT_POLICY="passive") if side == "onnxamp-passive" else None
        stdout, _, rss = run_child(cmd, log, env)
        losses, times = bench_util.onnxamp_steps(stdout)
    else:
        python, worker, compiled = (ORT_PYTHON, "ort", False) if side == "ort" else TORCH_SIDES[side]
        cmd = [python, os.path.abspath(__file__), "--worker", worker, "--model", model_path, "--npz", npz,
               "--input", input_name, "--batch", str(batch), "--steps", str(steps), "--warmup", str(warmup),
               "--threads", str(threads), "--optimizer", a.optimizer, "--dir", artifacts_dir or ""]
        if compiled:
            cmd.append("--compile")
        stdout, _, rss = run_child(cmd, log)
        r = json.loads(stdout.strip().splitlines()[-1])
        losses, times = r["losses"], r["times"]
    if len(losses) != total:
        raise Failure(f"{side} {model}: {len(losses)} steps reported, expected {total} (log: {log}.err)")
    timed = sum(times[warmup:])
    return {"losses": losses, "steps_per_s": steps / timed, "samples_per_s": steps * batch / timed, "rss": rss}


def rel_diff(got, want):
    return max(abs(g - w) / max(abs(w), 1e-12) for g, w in zip(got, want))


def first_above(got, want, tol):
    for i, (g, w) in enumerate(zip(got, want)):
        if abs(g - w) / max(abs(w), 1e-12) > tol:
            return i + 1
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", choices=["ort-artifacts", "ort", "torch", "torch-bf16"], help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--classes-last", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--npz", help=argparse.SUPPRESS)
    ap.add_argument("--input", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--build-dir", help="build folder with tools/onnxamp (default: $ONNXAMP_BUILD_DIR or build)")
    ap.add_argument("--models", help="default mlp,digits_mlp,cnn (also transformer, mlp4096); resnet50 alone with --resnet50")
    ap.add_argument("--resnet50", help="a ResNet-50 ONNX model (onnxamp_gen_models DIR --only resnet50): adds the "
                    "resnet50 case (batch 8)")
    ap.add_argument("--threads", help="thread counts, comma-separated (default 1,2; resnet50 alone: all)")
    ap.add_argument("--sides", help="default " + ",".join(SIDES) + " (and " + ",".join(PYPI_SIDES) + " with "
                    ".venv-torch); resnet50 alone: " + ",".join(RESNET50_SIDES) + " (and torch-pypi); also "
                    "torch-pypi-compile, onnxamp-recompute, onnxamp-recompute-cheap")
    ap.add_argument("--repeats", type=int, help="default 3; resnet50 alone: 1")
    ap.add_argument("--steps", type=int, default=0,
                    help="timed steps after the warm-up (default: mlp 300, digits_mlp 300, cnn 20, transformer 50, "
                    "resnet50 5)")
    ap.add_argument("--warmup", type=int,
                    help="untimed steps first (default 20, at least 20 for mlp, digits_mlp, cnn; resnet50 2)")
    ap.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", help="also write every run's figures to this file")
    ap.add_argument("--keep", help="keep the data, artifacts and logs in this folder")
    a = ap.parse_args()
    if a.worker in ("ort", "torch", "torch-bf16"):
        a.threads = int(a.threads)
    if a.worker == "ort-artifacts":
        return worker_ort_artifacts(a)
    if a.worker == "ort":
        return worker_ort(a)
    if a.worker in ("torch", "torch-bf16"):
        return worker_torch(a, a.worker == "torch-bf16")

    alone = a.resnet50 and not a.models  # the full-size case by itself: its own defaults
    models = (a.models or ("resnet50" if a.resnet50 else "mlp,digits_mlp,cnn")).split(",")
    if a.resnet50 and "resnet50" not in models:
        models.append("resnet50")
    if "resnet50" in models and not a.resnet50:
        sys.exit("error: --models resnet50 needs --resnet50 MODEL (onnxamp_gen_models DIR --only resnet50)")
    if a.warmup is not None and a.warmup < LOSS_STEPS and any(m != "resnet50" for m in models):
        sys.exit(f"error: --warmup {a.warmup}: at least {LOSS_STEPS} for {','.join(m for m in models if m != 'resnet50')}"
                 " (the loss check's steps are not timed)")
    a.threads = a.threads or (str(os.cpu_count()) if alone else "1,2")
    if not a.sides:
        default = RESNET50_SIDES if alone else SIDES
        if os.path.exists(TORCH_PYPI_PYTHON):
            default = default + (PYPI_SIDES[:1] if alone else PYPI_SIDES)
        else:
            print(f"note: {TORCH_PYPI_PYTHON} missing (bash scripts/setup_torch_peer.sh): sides "
                  f"{','.join(PYPI_SIDES)} (PyPI's PyTorch, MKL and oneDNN) left out", file=sys.stderr)
        a.sides = ",".join(default)
    a.repeats = a.repeats or (1 if alone else 3)
    a.build = bench_util.find_build_dir(a.build_dir, "tools/onnxamp", "onnxamp")
    a.onnxamp = os.path.join(a.build, "tools/onnxamp")
    threads = [int(t) for t in a.threads.split(",")]
    sides = a.sides.split(",")
    for s in sides:
        if s not in ALL_SIDES:
            sys.exit(f"error: --sides: unknown side '{s}' (expected some of {','.join(ALL_SIDES)})")
    for m in models:
        if m not in BATCHES:
            sys.exit(f"error: --models: unknown model '{m}' (expected some of {','.join(BATCHES)})")
    if "ort" in sides and not os.path.exists(ORT_PYTHON):
        sys.exit(f"error: {ORT_PYTHON} not found: run bash scripts/setup_ort_training.sh (or leave 'ort' out of "
                 "--sides)")
    if any(s.startswith("torch-pypi") for s in sides) and not os.path.exists(TORCH_PYPI_PYTHON):
        sys.exit(f"error: {TORCH_PYPI_PYTHON} not found: run bash scripts/setup_torch_peer.sh (or leave the "
                 "torch-pypi sides out of --sides)")
    work = a.keep or tempfile.mkdtemp(prefix="onnxamp_bench_training.")
    os.makedirs(work, exist_ok=True)
    try:
        runs = {}  # (model, threads, side) -> [result per repeat]
        setup = {}
        for m in models:
            npz = os.path.join(work, f"{m}.npz")
            num_batches = NUM_BATCHES if m != "resnet50" else warmup_of(a, m) + (a.steps or STEPS[m])
            input_name = make_data(model_path_of(a, m), BATCHES[m], npz, min(num_batches, NUM_BATCHES))
            art = None
            if "ort" in sides:
                art = os.path.join(work, f"{m}.ort_artifacts")
                os.makedirs(art, exist_ok=True)
                t0 = time.perf_counter()
                _, _, rss = run_child([ORT_PYTHON, os.path.abspath(__file__), "--worker", "ort-artifacts", "--model",
                                       model_path_of(a, m), "--optimizer", a.optimizer, "--dir", art] +
                                      (["--classes-last"] if m in PER_TOKEN else []),
                                      os.path.join(work, f"{m}.ort_artifacts"))
                print(f"  {m}: ORT Training artifacts in {time.perf_counter() - t0:.1f} s, peak RSS "
                      f"{bench_util.size(rss)}", file=sys.stderr, flush=True)
            setup[m] = (npz, input_name, art)
        k = 0
        for rep in range(a.repeats):
            for m in models:
                for t in threads:
                    order = sides[k % len(sides):] + sides[:k % len(sides)]  # rotate which side goes first
                    k += 1
                    for s in order:
                        npz, input_name, art = setup[m]
                        r = run_side(s, a, m, npz, input_name, art, t, work, f"r{rep}")
                        runs.setdefault((m, t, s), []).append(r)
                        print(f"  [{rep + 1}/{a.repeats}] {m} {t} thread(s) {s}: {r['steps_per_s']:.3g} steps/s, "
                              f"RSS {bench_util.size(r['rss'])}", file=sys.stderr, flush=True)
        report(a, models, threads, sides, runs, bench_util)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


def report(a, models, threads, sides, runs, bench_util):
    opt = (f"AdamW(lr {ADAMW['lr']}, betas {ADAMW['betas']}, eps {ADAMW['eps']}, weight decay "
           f"{ADAMW['weight_decay']}; PyTorch's form everywhere)" if a.optimizer == "adamw" else
           f"SGD(lr {SGD['lr']}, no momentum)")
    print(f"CPU: {bench_util.cpu_name()}, {os.cpu_count()} hardware threads; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {opt}; timed steps after untimed ones: "
          f"{', '.join(f'{m} {a.steps or STEPS[m]} after {warmup_of(a, m)}' for m in models)}; median of {a.repeats}")
    budgets = {m: memory_budget(model_path_of(a, m), BATCHES[m], a.optimizer) for m in models}

    # Loss agreement: steps 1-20, FP32, from the first repeat at the first thread count (every repeat and thread
    # count trains the same steps; the worst over all of them is what is shown).
    header = ["model", "onnxamp vs ORT", "first step > 1e-4", "onnxamp vs torch", "first step > 1e-4",
              "onnxamp vs torch-pypi", "first step > 1e-4", "ORT vs torch"]
    table, notes = [], []
    for m in models:
        row = [m]
        pairs = [("onnxamp", "ort"), ("onnxamp", "torch"), ("onnxamp", "torch-pypi"), ("ort", "torch")]
        for got, want in pairs:
            if got not in sides or want not in sides:
                row += ["-", "-"] if got == "onnxamp" else ["-"]
                continue
            worst, first = 0.0, None
            for t in threads:
                for rg, rw in zip(runs[(m, t, got)], runs[(m, t, want)]):
                    lg, lw = rg["losses"][:LOSS_STEPS], rw["losses"][:LOSS_STEPS]
                    worst = max(worst, rel_diff(lg, lw))
                    f = first_above(lg, lw, LOSS_TOL)
                    if f is not None and (first is None or f < first):
                        first = f
            cell = f"{worst:.1e}" + (" FLAG" if worst > LOSS_TOL else "")
            row += [cell, "-" if first is None else str(first)] if got == "onnxamp" else [cell]
            if worst > LOSS_TOL:
                notes.append(f"{m}: {got} vs {want}: loss differs by {worst:.1e} (> {LOSS_TOL:g}) first at step "
                             f"{first}")
        table.append(row)
    print("\nPer-step FP32 loss, steps 1-20 (or every step when fewer): max relative difference")
    bench_util.print_rows(header, table, a.markdown, notes, note_label="FLAG")

    header = ["model", "batch", "threads", "side", "steps/s", "samples/s", "peak RSS", "time ratio", "RSS ratio",
              "RSS / budget"]
    table = []
    for m in models:
        for t in threads:
            med = {}
            for s in sides:
                rs = runs[(m, t, s)]
                med[s] = (statistics.median(r["steps_per_s"] for r in rs), statistics.median(r["rss"] for r in rs))
            for s in sides:
                sps, rss = med[s]
                # Peers: onnxamp's step time over theirs (torch-bf16 against onnxamp-bf16); onnxamp's variants:
                # their step time over onnxamp FP32's.
                ref = PEER_REF.get(s)
                ratio = rss_ratio = "-"
                if ref in med:
                    ratio = f"{sps / med[ref][0]:.2f} ({ref}/{s})"
                    rss_ratio = f"{med[ref][1] / rss:.2f}"
                elif s in ("onnxamp-bf16", "onnxamp-passive", "onnxamp-recompute", "onnxamp-recompute-cheap") and \
                        "onnxamp" in med:
                    ratio = f"{med['onnxamp'][0] / sps:.2f} ({s}/onnxamp)"
                    rss_ratio = f"{rss / med['onnxamp'][1]:.2f} ({s}/onnxamp)"
                b = budgets[m]
                budget = b["parameters"] + b["gradients"] + b["optimizer"] + b["activations"]
                table.append([m, str(BATCHES[m]), str(t), s, f"{sps:.3g}" if sps < 100 else f"{sps:.0f}",
                              f"{sps * BATCHES[m]:.3g}" if sps * BATCHES[m] < 100 else f"{sps * BATCHES[m]:.0f}",
                              bench_util.size(rss), ratio, rss_ratio,
                              "-" if b["unknown_ops"] else f"{rss / budget:.2f}"])
    print("\nThroughput (median) and peak RSS; time ratio = step time of the first named over the second's (below 1: "
          "the first is faster); RSS ratio = onnxamp's (onnxamp-bf16's) peak RSS over a peer's, a variant's over "
          "onnxamp's")
    bench_util.print_rows(header, table, a.markdown, right_from=4)

    header = ["model", "batch", "parameters", "gradients", "optimizer state", "activations kept", "budget"]
    table, notes = [], []
    for m in models:
        b = budgets[m]
        total = b["parameters"] + b["gradients"] + b["optimizer"] + b["activations"]
        table.append([m, str(BATCHES[m])] + [bench_util.size(b[k]) for k in ("parameters", "gradients", "optimizer",
                                                                             "activations")] +
                     ["-" if b["unknown_ops"] else bench_util.size(total)])
        if b["unknown_ops"]:
            notes.append(f"{m}: no budget: ops without a rule: {', '.join(b['unknown_ops'])}")
    print("\nMemory budget (FP32; module docstring): parameters + gradients + optimizer state + the activations the "
          "backward pass keeps")
    bench_util.print_rows(header, table, a.markdown, notes, right_from=2)

    if "resnet50" in models:
        b = budgets["resnet50"]
        budget = b["parameters"] + b["gradients"] + b["optimizer"] + b["activations"]
        header = ["threads", "side", "s/step", "images/s", "peak RSS", "budget", "RSS / budget", "losses (first 3)"]
        table = []
        for t in threads:
            for s in sides:
                rs = runs[("resnet50", t, s)]
                sps = statistics.median(r["steps_per_s"] for r in rs)
                rss = statistics.median(r["rss"] for r in rs)
                table.append([str(t), s, f"{1 / sps:.2f}", f"{sps * BATCHES['resnet50']:.2f}", bench_util.size(rss),
                              bench_util.size(budget), f"{rss / budget:.2f}",
                              " ".join(f"{x:.5f}" for x in rs[0]["losses"][:3])])
        print(f"\nResNet-50 fine-tuning, batch {BATCHES['resnet50']}, {a.steps or STEPS['resnet50']} timed steps after "
              f"{warmup_of(a, 'resnet50')} (median of {a.repeats})")
        bench_util.print_rows(header, table, a.markdown, right_from=2)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({f"{m}/{t}/{s}": rs for (m, t, s), rs in runs.items()}, f)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as e:
        sys.exit(f"error: {e}")
