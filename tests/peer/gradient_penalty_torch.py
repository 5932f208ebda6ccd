#!/usr/bin/python3
"""ONNX's Gradient operator against PyTorch's double backward: a gradient penalty trained by `onnxamp train`.

For models/mlp.onnx (Gemm, Relu, Gemm), the same network with Tanh instead of Relu (whose backward pass is made of
ONNX ops, so its second derivative runs through Mul and Sub rather than ReluGrad), and a small convolutional critic
(Conv 3x3, Relu, MaxPool 2x2, Conv 3x3, Relu, AveragePool 2x2, Flatten, Gemm on 1x8x8 images: the second derivative
runs through ConvGrad, MaxPoolGrad and AveragePoolGrad, as a WGAN-GP penalty through a CNN does), and a critic with
a LayerNormalization (Gemm, LayerNormalization, Tanh, Gemm: the second derivative runs through the decomposition of
LayerNormalizationGrad) and one with a BatchNormalization (Conv, BatchNormalization, Relu, AveragePool, Flatten, Gemm:
trained in training mode on both sides, so through the batch statistics, BatchNormalizationGrad's decomposition; dx
of the untrained model in inference mode on both sides), one with an InstanceNormalization (Conv,
InstanceNormalization, Relu, AveragePool, Flatten, Gemm: GroupNormalizationGrad's decomposition); and input-gradient
regularisation (double backprop) of the
Tanh network, the Gradient node's y the CE loss itself (the second derivative runs through the decomposition of
SoftmaxCrossEntropyLossGrad), with weight INPUT_GRADIENT_LAMBDA:

  model    the network plus a Gradient node (ai.onnx.preview.training: xs = [input], y = logits) giving dx =
           d(sum of logits)/d(input), and the loss computed in the graph: SoftmaxCrossEntropyLoss(logits, labels) +
           LAMBDA * ReduceMean(dx * dx);
  onnxamp  `onnxamp train MODEL --loss-output loss --data D.npz --optimizer sgd --lr LR --steps STEPS --batch-size B
           --no-shuffle --threads 1 --log-every 1 -o OUT.onnx` (the losses from stderr, the weights from OUT.onnx),
           and `onnxamp run` of the untrained model for dx itself;
  torch    the network through bench/onnx_torch.py (trainable=True), float32, one thread, the same batches; dx =
           torch.autograd.grad(logits.sum(), x, create_graph=True), the same loss, loss.backward() (the second
           derivative), SGD(lr).

Checks (exit 1 on any failure, one `FAIL ...` line each): dx of the untrained model within 1e-5 of torch's
(relative to its largest element); every step's loss within 1e-4 relative; every weight after STEPS steps within
1e-4 of torch's (relative to the tensor's largest element), where torch trained without the penalty ends at least
10 times that away (so that the check sees the second derivative); and --amp fp16 against onnxamp's own FP32 run:
epoch-mean losses within 1e-2 relative.

Runs with Debian's /usr/bin/python3 (python3-torch, python3-onnx, python3-numpy) and prints `skipped: ...` with
exit 0 where they are missing.

    /usr/bin/python3 tests/peer/gradient_penalty_torch.py --onnxamp build/tools/onnxamp [--keep DIR]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings

try:
    import numpy as np
    import onnx
    import torch
    import torch.nn.functional as F
    from onnx import helper, numpy_helper, TensorProto
except ImportError as e:
    print(f"skipped: the gradient penalty check needs torch, onnx and numpy in {sys.executable} ({e}); "
          "apt-get install python3-torch python3-onnx python3-numpy")
    sys.exit(0)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.dont_write_bytecode = True
import onnx_torch  # noqa: E402  (bench/onnx_torch.py)

LAMBDA = 0.5
INPUT_GRADIENT_LAMBDA = 5000.0
SAMPLES = 64
BATCH = 16
STEPS = 40
LR = 0.05
LOSS_TOL = 1e-4
WEIGHT_TOL = 1e-4
DX_TOL = 1e-5
AMP_TOL = 1e-2
STEP_LINE = re.compile(r"^step (\d+)/\d+  epoch \d+  loss (\S+)  ")


class Failure(Exception):
    pass


def initializer(rng, name, shape, fan_in, offset=0.0):
    values = offset + rng.standard_normal(shape) / np.sqrt(fan_in)
    return numpy_helper.from_array(values.astype(np.float32), name)


def conv_critic():
    rng = np.random.default_rng(3)

    def init(name, shape, fan_in):
        return initializer(rng, name, shape, fan_in)

    g = helper.make_graph(
        [helper.make_node("Conv", ["input", "c1.weight", "c1.bias"], ["c1"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c1"], ["r1"]),
         helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Conv", ["p1", "c2.weight", "c2.bias"], ["c2"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c2"], ["r2"]),
         helper.make_node("AveragePool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Flatten", ["p2"], ["flat"]),
         helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], transB=1)],
        "conv_critic", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        [init("c1.weight", (4, 1, 3, 3), 9), init("c1.bias", (4,), 9), init("c2.weight", (8, 4, 3, 3), 36),
         init("c2.bias", (8,), 36), init("fc.weight", (10, 32), 32), init("fc.bias", (10,), 32)])
    return helper.make_model(g, ir_version=8, opset_imports=[helper.make_opsetid("", 17)])


def layer_norm_critic():
    """Gemm 256 -> 64, LayerNormalization, Tanh, Gemm 64 -> 10: the critic WGAN-GP recommends (layer normalization,
    not batch normalization, under a gradient penalty)."""
    rng = np.random.default_rng(5)

    def init(name, shape, fan_in, offset=0.0):
        return initializer(rng, name, shape, fan_in, offset)

    g = helper.make_graph(
        [helper.make_node("Gemm", ["input", "fc1.weight", "fc1.bias"], ["h"], transB=1),
         helper.make_node("LayerNormalization", ["h", "ln.weight", "ln.bias"], ["n"], axis=-1, epsilon=1e-5),
         helper.make_node("Tanh", ["n"], ["t"]),
         helper.make_node("Gemm", ["t", "fc2.weight", "fc2.bias"], ["logits"], transB=1)],
        "layer_norm_critic", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 256])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        [init("fc1.weight", (64, 256), 256), init("fc1.bias", (64,), 256), init("ln.weight", (64,), 16, 1.0),
         init("ln.bias", (64,), 16), init("fc2.weight", (10, 64), 64), init("fc2.bias", (10,), 64)])
    return helper.make_model(g, ir_version=8, opset_imports=[helper.make_opsetid("", 17)])


def batch_norm_critic():
    """Conv 3x3, BatchNormalization, Relu, AveragePool 2x2, Flatten, Gemm on 1x8x8 images: in training, the penalty's
    second derivative runs through the batch statistics (BatchNormalizationGrad's decomposition)."""
    rng = np.random.default_rng(9)

    def init(name, shape, fan_in, offset=0.0):
        return initializer(rng, name, shape, fan_in, offset)

    g = helper.make_graph(
        [helper.make_node("Conv", ["input", "c1.weight", "c1.bias"], ["c1"], pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c1", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                          ["b1"], epsilon=1e-5, momentum=0.9),
         helper.make_node("Relu", ["b1"], ["r1"]),
         helper.make_node("AveragePool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Flatten", ["p1"], ["flat"]),
         helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], transB=1)],
        "batch_norm_critic", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        [init("c1.weight", (4, 1, 3, 3), 9), init("c1.bias", (4,), 9), init("bn.weight", (4,), 16, 1.0),
         init("bn.bias", (4,), 16), numpy_helper.from_array(np.zeros(4, np.float32), "bn.running_mean"),
         numpy_helper.from_array(np.ones(4, np.float32), "bn.running_var"), init("fc.weight", (10, 64), 64),
         init("fc.bias", (10,), 64)])
    return helper.make_model(g, ir_version=8, opset_imports=[helper.make_opsetid("", 17)])


def instance_norm_critic():
    """Conv 3x3, InstanceNormalization, Relu, AveragePool 2x2, Flatten, Gemm on 1x8x8 images (the critic of
    image-to-image GANs): the second derivative runs through GroupNormalizationGrad's decomposition."""
    rng = np.random.default_rng(11)

    def init(name, shape, fan_in, offset=0.0):
        return initializer(rng, name, shape, fan_in, offset)

    g = helper.make_graph(
        [helper.make_node("Conv", ["input", "c1.weight", "c1.bias"], ["c1"], pads=[1, 1, 1, 1]),
         helper.make_node("InstanceNormalization", ["c1", "in.weight", "in.bias"], ["n1"], epsilon=1e-5),
         helper.make_node("Relu", ["n1"], ["r1"]),
         helper.make_node("AveragePool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Flatten", ["p1"], ["flat"]),
         helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], transB=1)],
        "instance_norm_critic", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        [init("c1.weight", (4, 1, 3, 3), 9), init("c1.bias", (4,), 9), init("in.weight", (4,), 16, 1.0),
         init("in.bias", (4,), 16), init("fc.weight", (10, 64), 64), init("fc.bias", (10,), 64)])
    return helper.make_model(g, ir_version=8, opset_imports=[helper.make_opsetid("", 17)])


def network(kind, path):
    """models/mlp.onnx with its Relu replaced by `kind` (Relu, Tanh), the convolutional critic (Conv), or the critic
    with a LayerNormalization (LayerNorm), a BatchNormalization (BatchNorm) or an InstanceNormalization
    (InstanceNorm)."""
    if kind == "Conv":
        m = conv_critic()
    elif kind == "LayerNorm":
        m = layer_norm_critic()
    elif kind == "BatchNorm":
        m = batch_norm_critic()
    elif kind == "InstanceNorm":
        m = instance_norm_critic()
    else:
        m = onnx.load(os.path.join(ROOT, "models", "mlp.onnx"))
        for n in m.graph.node:
            if n.op_type == "Relu":
                n.op_type = kind
    onnx.save(m, path)
    return m


def penalty_model(net, path, of_loss=False, lam=LAMBDA):
    """The network, a Gradient node and the loss: CE(logits, labels) + lam * mean(dx^2), dx the gradient of the sum of
    the logits, or (`of_loss`) of the CE loss itself."""
    m = onnx.ModelProto()
    m.CopyFrom(net)
    m.opset_import.append(helper.make_opsetid("ai.onnx.preview.training", 1))
    g = m.graph
    g.input.append(helper.make_tensor_value_info("labels", TensorProto.INT64, ["batch"]))
    g.initializer.append(numpy_helper.from_array(np.array(lam, dtype=np.float32), "lambda"))
    g.node.extend([
        helper.make_node("Gradient", ["input"], ["dx"], name="input_gradient", domain="ai.onnx.preview.training",
                         xs=["input"], y="ce" if of_loss else "logits"),
        helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["ce"], reduction="mean"),
        helper.make_node("Mul", ["dx", "dx"], ["dx2"]),
        helper.make_node("ReduceMean", ["dx2"], ["penalty"], keepdims=0),
        helper.make_node("Mul", ["penalty", "lambda"], ["scaled_penalty"]),
        helper.make_node("Add", ["ce", "scaled_penalty"], ["loss"]),
    ])
    del g.output[:]
    dx = onnx.ValueInfoProto()
    dx.CopyFrom(g.input[0])
    dx.name = "dx"
    g.output.extend([helper.make_tensor_value_info("loss", TensorProto.FLOAT, []), dx])
    onnx.save(m, path)


def make_data(path, sample_dims):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((SAMPLES,) + sample_dims).astype(np.float32)
    flat = x.reshape(SAMPLES, -1)
    labels = np.argmax(flat @ rng.standard_normal((flat.shape[1], 10)).astype(np.float32), axis=1).astype(np.int64)
    np.savez(path, input=x, labels=labels)
    return x, labels


def run_onnxamp(binary, model, npz, out, amp="off"):
    cmd = [binary, "train", model, "--loss-output", "loss", "--data", npz, "--optimizer", "sgd", "--lr", repr(LR),
           "--steps", str(STEPS), "--batch-size", str(BATCH), "--no-shuffle", "--threads", "1", "--log-every", "1",
           "--seed", "0", "--amp", amp, "-o", out]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    with open(out + ".log", "w") as f:
        f.write(" ".join(cmd) + "\n" + proc.stderr + proc.stdout)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise Failure(f"onnxamp train exited {proc.returncode}: {last}")
    losses = [float(m.group(2)) for m in map(STEP_LINE.match, proc.stderr.splitlines()) if m]
    if len(losses) != STEPS:
        raise Failure(f"onnxamp train: {len(losses)} step lines, expected {STEPS}")
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(out).graph.initializer}
    return np.array(losses), weights


def onnxamp_dx(binary, model, npz, out_dir):
    cmd = [binary, "run", model, "--input", npz, "--output-dir", out_dir]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise Failure(f"onnxamp run exited {proc.returncode}: {proc.stderr.strip()}")
    t = onnx.TensorProto()
    with open(os.path.join(out_dir, "output_1.pb"), "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def torch_side(net_path, x, labels, lam=LAMBDA, of_loss=False):
    """dx of the untrained network, every step's loss and the trained weights (by ONNX name), with penalty weight
    `lam` (dx of the CE loss itself with `of_loss`)."""
    torch.manual_seed(0)
    module = onnx_torch.load(net_path, device="cpu", trainable=True)
    opt = torch.optim.SGD(list(module.params), lr=LR, momentum=0)

    def loss_of(xb, yb):
        xb = xb.clone().requires_grad_(True)
        logits = module(xb)
        logits = logits[0] if isinstance(logits, (list, tuple)) else logits
        ce = F.cross_entropy(logits, yb)
        dx = torch.autograd.grad(ce if of_loss else logits.sum(), xb, create_graph=True)[0]
        return ce + lam * (dx * dx).mean(), dx

    module.eval()  # as `onnxamp run` computes dx: BatchNormalization with its running statistics
    _, dx0 = loss_of(torch.from_numpy(x), torch.from_numpy(labels))
    dx0 = dx0.detach().numpy().copy()
    module.train()
    losses = []
    batches = SAMPLES // BATCH
    for step in range(STEPS):
        b = step % batches
        xb = torch.from_numpy(x[b * BATCH:(b + 1) * BATCH])
        yb = torch.from_numpy(labels[b * BATCH:(b + 1) * BATCH])
        opt.zero_grad()
        loss, _ = loss_of(xb, yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    weights = {n: p.detach().numpy().copy() for n, p in module.param_by_name.items()}
    return dx0, np.array(losses), weights


def check(activation, binary, work):
    failures = []
    net_path = os.path.join(work, f"{activation}.onnx")
    # InputGradient: the Tanh network, penalised by the gradient of its CE loss (double backprop); the CE's mean over
    # the batch makes that gradient small, hence the larger weight.
    of_loss = activation == "InputGradient"
    lam = INPUT_GRADIENT_LAMBDA if of_loss else LAMBDA
    net = network("Tanh" if of_loss else activation, net_path)
    model = os.path.join(work, f"{activation}_penalty.onnx")
    penalty_model(net, model, of_loss, lam)
    npz = os.path.join(work, f"{activation}_data.npz")
    x, labels = make_data(npz, (1, 8, 8) if activation in ("Conv", "BatchNorm", "InstanceNorm") else (256,))
    dx_dir = os.path.join(work, f"{activation}_run")
    os.makedirs(dx_dir, exist_ok=True)
    dx = onnxamp_dx(binary, model, npz, dx_dir)
    ref_dx, ref_losses, ref_weights = torch_side(net_path, x, labels, lam, of_loss)
    err = float(np.max(np.abs(dx - ref_dx)) / np.max(np.abs(ref_dx)))
    if not err <= DX_TOL:
        failures.append(f"{activation}: dx {err:.2e} from torch's (tolerance {DX_TOL:.0e})")
    losses, weights = run_onnxamp(binary, model, npz, os.path.join(work, f"{activation}_out.onnx"))
    rel = np.abs(losses - ref_losses) / np.abs(ref_losses)
    if not float(rel.max()) <= LOSS_TOL:
        at = int(np.argmax(rel))
        failures.append(f"{activation}: step {at + 1} loss {losses[at]:.7g} vs torch {ref_losses[at]:.7g} "
                        f"(relative {rel[at]:.2e}, tolerance {LOSS_TOL:.0e})")
    _, _, plain_weights = torch_side(net_path, x, labels, 0.0, of_loss)
    worst_w = 0.0
    effect = 0.0  # how far the penalty's second derivative moved torch's weights
    for name, want in ref_weights.items():
        scale = float(np.max(np.abs(want)))
        worst_w = max(worst_w, float(np.max(np.abs(weights[name] - want))) / scale)
        effect = max(effect, float(np.max(np.abs(plain_weights[name] - want))) / scale)
    if not worst_w <= WEIGHT_TOL:
        failures.append(f"{activation}: weights after {STEPS} steps {worst_w:.2e} from torch's "
                        f"(tolerance {WEIGHT_TOL:.0e})")
    if not effect > 10 * WEIGHT_TOL:
        failures.append(f"{activation}: the penalty moved torch's weights by only {effect:.2e}: the check cannot "
                        "tell a missing second derivative")
    amp_losses, _ = run_onnxamp(binary, model, npz, os.path.join(work, f"{activation}_fp16.onnx"), amp="fp16")
    epochs = STEPS * BATCH // SAMPLES
    mean = losses.reshape(epochs, -1).mean(axis=1)
    amp_mean = amp_losses.reshape(epochs, -1).mean(axis=1)
    amp_rel = float(np.max(np.abs(amp_mean - mean) / np.abs(mean)))
    if not amp_rel <= AMP_TOL:
        failures.append(f"{activation}: --amp fp16 epoch-mean losses {amp_rel:.2e} from FP32 (tolerance {AMP_TOL:.0e})")
    print(f"{activation}: dx {err:.1e}; losses {float(rel.max()):.1e} (steps 1-{STEPS}: {losses[0]:.5f} -> "
          f"{losses[-1]:.5f}); weights {worst_w:.1e} (the penalty's effect {effect:.1e}); fp16 epoch means {amp_rel:.1e}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--onnxamp", default=os.path.join(ROOT, "build", "tools", "onnxamp"))
    parser.add_argument("--keep", help="keep the models, data and logs in this folder")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    work = args.keep or tempfile.mkdtemp(prefix="onnxamp_gp_")
    os.makedirs(work, exist_ok=True)
    failures = []
    try:
        for activation in ("Relu", "Tanh", "Conv", "LayerNorm", "BatchNorm", "InstanceNorm", "InputGradient"):
            try:
                failures += check(activation, args.onnxamp, work)
            except Failure as e:
                failures.append(f"{activation}: {e}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print("FAIL " + f)
    print(f"gradient penalty vs torch: {'FAILED' if failures else 'passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
