"""A small ONNX-to-PyTorch interpreter: runs the nodes of an ONNX graph as torch functions, so that PyTorch can
run exactly the graph onnxamp runs (bench_cuda.py compares the two on the same GPU).

It covers the ops of the benchmark models (models/mlp4096, cnn, transformer, their FP16 variants, and what
`onnxamp convert` inserts): Gemm, MatMul, Add, Sub, Mul, Div, Relu, Erf, Sqrt, Pow, Tanh, Sigmoid, Conv,
BatchNormalization (inference), MaxPool, AveragePool, GlobalAveragePool, Flatten, LayerNormalization,
InstanceNormalization, Softmax,
Reshape, Transpose, Gather, Constant, Cast, Identity, Unsqueeze, Squeeze, Concat, Shape. Weights come from the
initializers, moved to the device once. Shape-like inputs (Reshape's shape, Unsqueeze's axes, ...) must be
constants (initializers or Constant outputs): they are read on the host when the interpreter is built, so the
forward pass is plain tensor code that torch.compile can trace without graph breaks.

    model = OnnxTorchModule(onnx.load(path), device="cuda")
    outputs = model(*inputs)               # torch tensors, in graph-input order (inputs with initializers skipped)
    compiled = torch.compile(model)        # the same graph, compiled

Training (tests/peer/train_parity.py): `OnnxTorchModule(model, device="cpu", trainable=True)` makes the
initializers `onnxamp train` trains into nn.Parameters (`module.param_by_name`) and BatchNormalization's running
statistics into buffers (`module.buffer_by_name`), by onnxamp's rule (docs/training.md, "Parameters"): a floating
initializer with more than one element that some node reads is a parameter, except BatchNormalization's inputs 3
and 4 (running mean and variance), which are buffers; everything else stays a constant. In training mode
(`module.train()`, the default of a new module) BatchNormalization normalises with the batch statistics and
updates the running statistics in place as torch.nn.BatchNorm does (`F.batch_norm(training=True, momentum=1 -
onnx_momentum)`: unbiased batch variance); `module.eval()` uses the running statistics; `module.bn_momentum`, when set,
is every BatchNormalization's torch momentum instead (torch.optim.swa_utils.update_bn's cumulative average: 1 / n for
the n-th batch). With trainable=False (the default) nothing changes: BatchNormalization always runs in inference mode.
"""
import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

ONNX_TO_TORCH_DTYPE = {
    onnx.TensorProto.FLOAT: torch.float32,
    onnx.TensorProto.FLOAT16: torch.float16,
    onnx.TensorProto.BFLOAT16: torch.bfloat16,
    onnx.TensorProto.DOUBLE: torch.float64,
    onnx.TensorProto.INT64: torch.int64,
    onnx.TensorProto.INT32: torch.int32,
    onnx.TensorProto.INT8: torch.int8,
    onnx.TensorProto.UINT8: torch.uint8,
    onnx.TensorProto.BOOL: torch.bool,
}


class UnsupportedOnnx(Exception):
    """The graph uses an op or attribute this interpreter does not implement."""


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _to_torch(arr, device):
    """A numpy array as a torch tensor on `device` (bfloat16 arrives from onnx as float32 or uint16 bits)."""
    return torch.from_numpy(np.ascontiguousarray(arr)).to(device)


def _tensor_from_proto(t, device):
    if t.data_type == onnx.TensorProto.BFLOAT16:
        arr = numpy_helper.to_array(t)  # onnx returns float32 (or ml_dtypes.bfloat16) values
        return torch.from_numpy(np.asarray(arr, dtype=np.float32)).to(device=device, dtype=torch.bfloat16)
    return _to_torch(numpy_helper.to_array(t), device)


def _symmetric_pads(pads, rank):
    """ONNX pads [b1, b2, ..., e1, e2, ...] as torch padding when begin == end, else None."""
    if not pads:
        return [0] * rank
    begin, end = list(pads[:rank]), list(pads[rank:])
    return begin if begin == end else None


def _torch_pad_arg(pads, rank):
    """ONNX pads for the last `rank` dims as F.pad's argument (last dim first)."""
    out = []
    for d in reversed(range(rank)):
        out += [pads[d], pads[d + rank]]
    return out


class OnnxTorchModule(torch.nn.Module):
    """Runs an ONNX graph node by node with torch functions. Inputs are the graph inputs that have no initializer,
    in graph order; outputs are the graph outputs, as a tuple."""

    def __init__(self, model, device="cuda", trainable=False):
        super().__init__()
        self.device = torch.device(device)
        self.trainable = trainable
        self.bn_momentum = None  # trainable: the torch momentum of every BatchNormalization instead of its own
        g = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
        init_names = {t.name for t in g.initializer}
        self.input_names = [i.name for i in g.input if i.name not in init_names]
        self.output_names = [o.name for o in g.output]
        # Values known on the host when the graph is built: initializers and Constant outputs (numpy), used for
        # shape-like inputs; and the same on the device for ordinary use.
        self.host_consts = {}
        self.consts = {}
        for t in g.initializer:
            self.host_consts[t.name] = numpy_helper.to_array(t) if t.data_type != onnx.TensorProto.BFLOAT16 else None
            self.consts[t.name] = _tensor_from_proto(t, self.device)
        # trainable: parameters (nn.Parameter, registered in order of the initializers) and buffers (BN running
        # statistics, registered with register_buffer so that .to() and state_dict see them), both by ONNX name.
        self.param_by_name = {}
        self.buffer_by_name = {}
        if trainable:
            self._make_trainable(g)
        self.steps = []  # (fn, input names, output names)
        for node in g.node:
            if node.domain not in ("", "ai.onnx"):
                raise UnsupportedOnnx(f"node {node.name or node.op_type}: domain '{node.domain}'")
            if node.op_type == "Constant":
                self._add_constant(node)
                continue
            build = getattr(self, "_op_" + node.op_type, None)
            if build is None:
                raise UnsupportedOnnx(f"node {node.name or node.op_type}: op {node.op_type} is not implemented")
            fn = build(node, _attrs(node))
            self.steps.append((fn, list(node.input), list(node.output)))

    def _make_trainable(self, g):
        read = {n for node in g.node for n in node.input if n}
        bn_stats = {node.input[i] for node in g.node if node.op_type == "BatchNormalization" and node.domain in
                    ("", "ai.onnx") for i in (3, 4) if i < len(node.input) and node.input[i]}
        floating = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
        params = []
        for t in g.initializer:
            value = self.consts[t.name]
            if t.name not in read or value.dtype not in floating:
                continue
            if t.name in bn_stats:
                buf = value.clone()
                self.register_buffer(f"buffer{len(self.buffer_by_name)}", buf)
                self.buffer_by_name[t.name] = buf
                del self.consts[t.name]
            elif value.numel() > 1:
                p = torch.nn.Parameter(value.clone())
                params.append(p)
                self.param_by_name[t.name] = p
                del self.consts[t.name]
        self.params = torch.nn.ParameterList(params)

    def _apply(self, fn, *args, **kwargs):
        # .to()/.double() replace registered buffers (parameters keep their objects): keep the by-name view current.
        result = super()._apply(fn, *args, **kwargs)
        for i, name in enumerate(self.buffer_by_name):
            self.buffer_by_name[name] = getattr(self, f"buffer{i}")
        return result

    def named_onnx_parameters(self):
        """[(ONNX initializer name, nn.Parameter)] in initializer order (trainable=True)."""
        return list(self.param_by_name.items())

    # ------------------------------------------------------------------ running

    def forward(self, *inputs):
        env = dict(self.consts)
        env.update(self.param_by_name)
        env.update(self.buffer_by_name)
        for name, x in zip(self.input_names, inputs):
            env[name] = x
        for fn, ins, outs in self.steps:
            args = [env[n] if n else None for n in ins]
            result = fn(*args)
            if len(outs) == 1:
                env[outs[0]] = result
            else:
                for n, r in zip(outs, result):
                    if n:
                        env[n] = r
        return tuple(env[n] for n in self.output_names)

    # ------------------------------------------------------------------ helpers

    def _host(self, node, index):
        """Input `index` of `node` as a numpy array known when the graph is built (a constant), or an error."""
        if index >= len(node.input) or not node.input[index]:
            return None
        name = node.input[index]
        if name not in self.host_consts or self.host_consts[name] is None:
            raise UnsupportedOnnx(f"node {node.name or node.op_type}: input '{name}' must be a constant")
        return self.host_consts[name]

    def _add_constant(self, node):
        a = _attrs(node)
        if "value" in a:
            t = a["value"]
            arr = numpy_helper.to_array(t) if t.data_type != onnx.TensorProto.BFLOAT16 else None
            dev = _tensor_from_proto(t, self.device)
        elif "value_float" in a:
            arr = np.array(a["value_float"], dtype=np.float32)
            dev = _to_torch(arr, self.device)
        elif "value_floats" in a:
            arr = np.array(a["value_floats"], dtype=np.float32)
            dev = _to_torch(arr, self.device)
        elif "value_int" in a:
            arr = np.array(a["value_int"], dtype=np.int64)
            dev = _to_torch(arr, self.device)
        elif "value_ints" in a:
            arr = np.array(a["value_ints"], dtype=np.int64)
            dev = _to_torch(arr, self.device)
        else:
            raise UnsupportedOnnx(f"Constant {node.name}: attributes {sorted(a)}")
        self.host_consts[node.output[0]] = arr
        self.consts[node.output[0]] = dev

    # ------------------------------------------------------------------ ops (each returns fn(*inputs))

    def _op_Identity(self, node, a):
        return lambda x: x

    def _op_Add(self, node, a):
        return torch.add

    def _op_Sub(self, node, a):
        return torch.sub

    def _op_Mul(self, node, a):
        return torch.mul

    def _op_Div(self, node, a):
        def div(x, y):
            if torch.is_floating_point(x):
                return torch.div(x, y)
            return torch.div(x, y, rounding_mode="trunc")
        return div

    def _op_Pow(self, node, a):
        return torch.pow

    def _op_Sqrt(self, node, a):
        return torch.sqrt

    def _op_Relu(self, node, a):
        return torch.relu

    def _op_Erf(self, node, a):
        return torch.erf

    def _op_Tanh(self, node, a):
        return torch.tanh

    def _op_Sigmoid(self, node, a):
        return torch.sigmoid

    def _op_Cast(self, node, a):
        to = ONNX_TO_TORCH_DTYPE.get(a["to"])
        if to is None:
            raise UnsupportedOnnx(f"Cast {node.name}: to {a['to']}")
        return lambda x: x.to(to)

    def _op_MatMul(self, node, a):
        return torch.matmul

    def _op_Gemm(self, node, a):
        alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
        trans_a, trans_b = a.get("transA", 0), a.get("transB", 0)

        def gemm(x, w, c=None):
            x = x.t() if trans_a else x
            w = w.t() if trans_b else w
            if c is not None and alpha == 1.0 and beta == 1.0 and c.dim() <= 2:
                return torch.addmm(c, x, w)  # one cuBLAS call with the bias as C, as frameworks run Linear
            y = torch.matmul(x, w)
            if alpha != 1.0:
                y = y * alpha
            if c is not None:
                y = y + (c * beta if beta != 1.0 else c)
            return y
        return gemm

    def _op_Conv(self, node, a):
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise UnsupportedOnnx(f"Conv {node.name}: auto_pad {a['auto_pad']}")
        w = self._host_shape(node, 1)
        rank = len(w) - 2
        conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[rank]
        strides = a.get("strides", [1] * rank)
        dilations = a.get("dilations", [1] * rank)
        groups = a.get("group", 1)
        pads = a.get("pads", [0] * (2 * rank))
        sym = _symmetric_pads(pads, rank)

        def run(x, w, b=None):
            if sym is None:
                x = F.pad(x, _torch_pad_arg(pads, rank))
                return conv(x, w, b, strides, 0, dilations, groups)
            return conv(x, w, b, strides, sym, dilations, groups)
        return run

    def _host_shape(self, node, index):
        name = node.input[index]
        for known in (self.consts, self.param_by_name):
            if name in known:
                return list(known[name].shape)
        raise UnsupportedOnnx(f"node {node.name or node.op_type}: input '{name}' must be an initializer")

    def _op_BatchNormalization(self, node, a):
        if a.get("training_mode", 0):
            raise UnsupportedOnnx(f"BatchNormalization {node.name}: training_mode")
        eps = a.get("epsilon", 1e-5)
        if not self.trainable:
            return lambda x, scale, bias, mean, var: F.batch_norm(x, mean, var, scale, bias, False, 0.0, eps)
        if len(node.output) > 1 and any(node.output[1:]):
            raise UnsupportedOnnx(f"BatchNormalization {node.name}: running mean/var outputs")
        # ONNX: running = momentum * running + (1 - momentum) * batch; torch: (1 - m) * running + m * batch.
        torch_momentum = 1.0 - a.get("momentum", 0.9)

        def bn(x, scale, bias, mean, var):
            momentum = torch_momentum if self.bn_momentum is None else self.bn_momentum
            return F.batch_norm(x, mean, var, scale, bias, self.training, momentum, eps)
        return bn

    def _pool_args(self, node, a):
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise UnsupportedOnnx(f"{node.op_type} {node.name}: auto_pad")
        k = a["kernel_shape"]
        rank = len(k)
        pads = a.get("pads", [0] * (2 * rank))
        sym = _symmetric_pads(pads, rank)
        if sym is None:
            raise UnsupportedOnnx(f"{node.op_type} {node.name}: asymmetric pads")
        return k, rank, a.get("strides", [1] * rank), sym, bool(a.get("ceil_mode", 0)), a.get("dilations", [1] * rank)

    def _op_MaxPool(self, node, a):
        if len(node.output) > 1 and node.output[1]:
            raise UnsupportedOnnx(f"MaxPool {node.name}: Indices output")
        k, rank, strides, pads, ceil, dil = self._pool_args(node, a)
        pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[rank]
        return lambda x: pool(x, k, strides, pads, dil, ceil)

    def _op_AveragePool(self, node, a):
        k, rank, strides, pads, ceil, dil = self._pool_args(node, a)
        if any(d != 1 for d in dil):
            raise UnsupportedOnnx(f"AveragePool {node.name}: dilations")
        pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[rank]
        include_pad = bool(a.get("count_include_pad", 0))
        return lambda x: pool(x, k, strides, pads, ceil, include_pad)

    def _op_GlobalAveragePool(self, node, a):
        return lambda x: x.mean(dim=tuple(range(2, x.dim())), keepdim=True)

    def _op_GlobalMaxPool(self, node, a):
        return lambda x: x.amax(dim=tuple(range(2, x.dim())), keepdim=True)

    def _op_Flatten(self, node, a):
        axis = a.get("axis", 1)

        def flatten(x):
            ax = axis + x.dim() if axis < 0 else axis
            lead = 1
            for d in x.shape[:ax]:
                lead *= d
            return x.reshape(lead, -1)
        return flatten

    def _op_LayerNormalization(self, node, a):
        axis = a.get("axis", -1)
        eps = a.get("epsilon", 1e-5)
        if len(node.output) > 1 and any(node.output[1:]):
            raise UnsupportedOnnx(f"LayerNormalization {node.name}: Mean/InvStdDev outputs")

        def ln(x, scale, bias=None):
            ax = axis + x.dim() if axis < 0 else axis
            return F.layer_norm(x, tuple(x.shape[ax:]), scale, bias, eps)
        return ln

    def _op_InstanceNormalization(self, node, a):
        eps = a.get("epsilon", 1e-5)
        return lambda x, scale, bias: F.instance_norm(x, weight=scale, bias=bias, eps=eps)

    def _op_Softmax(self, node, a):
        if self.opset >= 13:
            axis = a.get("axis", -1)
            return lambda x: torch.softmax(x, dim=axis)
        axis = a.get("axis", 1)

        def softmax_2d(x):  # before opset 13: over the flattened dims from `axis` on
            ax = axis + x.dim() if axis < 0 else axis
            shape = x.shape
            return torch.softmax(x.reshape(int(np.prod(shape[:ax])), -1), dim=1).reshape(shape)
        return softmax_2d

    def _op_Reshape(self, node, a):
        shape = [int(v) for v in self._host(node, 1)]
        allowzero = a.get("allowzero", 0)

        def reshape(x, _shape=None):
            s = list(shape)
            if not allowzero:
                s = [x.shape[i] if v == 0 else v for i, v in enumerate(s)]
            return x.reshape(s)
        return reshape

    def _op_Transpose(self, node, a):
        perm = a.get("perm")
        return lambda x: x.permute(*(perm if perm is not None else reversed(range(x.dim()))))

    def _op_Gather(self, node, a):
        axis = a.get("axis", 0)

        def gather(data, idx):
            ax = axis + data.dim() if axis < 0 else axis
            idx = torch.where(idx < 0, idx + data.shape[ax], idx)
            flat = data.index_select(ax, idx.reshape(-1))
            return flat.reshape(*data.shape[:ax], *idx.shape, *data.shape[ax + 1:])
        return gather

    def _op_Unsqueeze(self, node, a):
        axes = [int(v) for v in self._host(node, 1)] if self.opset >= 13 else list(a["axes"])

        def unsqueeze(x, _axes=None):
            out_rank = x.dim() + len(axes)
            for ax in sorted(v + out_rank if v < 0 else v for v in axes):
                x = x.unsqueeze(ax)
            return x
        return unsqueeze

    def _op_Squeeze(self, node, a):
        if self.opset >= 13:
            axes = self._host(node, 1)
            axes = None if axes is None else [int(v) for v in axes]
        else:
            axes = a.get("axes")

        def squeeze(x, _axes=None):
            if axes is None:
                return x.squeeze()
            return x.squeeze(tuple(v + x.dim() if v < 0 else v for v in axes))
        return squeeze

    def _op_Concat(self, node, a):
        axis = a["axis"]
        return lambda *xs: torch.cat(xs, dim=axis)

    def _op_Shape(self, node, a):
        return lambda x: torch.tensor(list(x.shape), dtype=torch.int64, device=x.device)


def load(path, device="cuda", trainable=False):
    """The interpreter for the ONNX model at `path` (weights on `device`; trainable: see the module docstring)."""
    return OnnxTorchModule(onnx.load(path), device=device, trainable=trainable)
