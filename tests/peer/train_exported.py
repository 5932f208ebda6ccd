#!/usr/bin/python3
"""PyTorch parity of `onnxamp train` on models that torch.onnx.export wrote: the exporter's graphs as users bring
them (Shape/Gather/Concat/Reshape chains, Constant nodes, the ops exporters emit for torch functions), trained by
onnxamp from the .onnx file and by PyTorch from the module that was exported, on the same data and batches.

Models (small, seeded, exported at opset 17 in training mode with do_constant_folding=False):

  mobilenet  a MobileNetV3-style network: Conv + BatchNorm + Hardswish, a depthwise Conv, squeeze-and-excitation
             (AdaptiveAvgPool, 1x1 Convs, ReLU, Hardsigmoid, Mul), PReLU, Mish, a Linear head; input [N, 3, 16, 16];
  fire       SqueezeNet 1.1 in small: MaxPool with ceil_mode, Fire modules (1x1 squeeze, 1x1 and 3x3 expands joined
             by Concat), a 1x1 Conv classifier and a global average pool;
  rope       a one-block causal language model with rotary position embeddings: Embedding, positions from a cumsum of
             ones (CumSum), Sin/Cos of position * frequency, a causal mask from torch.triu (Trilu), attention with
             Softmax, LayerNorm, GELU; per-token logits [N, 12, 50], labels [N, 12] (--class-axis -1);
  encoder    torch.nn.TransformerEncoder (2 pre-norm layers, nn.MultiheadAttention, GELU) over token embeddings
             (padding_idx 0: --padding-idx), mean-pooled into a Linear head;
  lstm       a tagger: nn.LSTM (2 layers, bidirectional, batch_first) over token embeddings, per-token logits from
             its outputs plus the top layer's final states (Y and Y_h); labels the running maximum of ids % 6;
  gru        a tagger: nn.GRU (linear_before_reset) with a learned initial state expanded over the batch;
  scatter    index assignment `h[:, 0] = param` (ScatterND), scatter_add into slots (ScatterElements with
             reduction add) and gather back (GatherElements);
  warp       a learned flow (Conv2d, Tanh) added to a base grid, the input warped by grid_sample (GridSample,
             bilinear, border padding): the gradient reaches both the image and the grid;
  gated      a data-dependent branch exported through torch.jit.script (an ONNX If whose branches hold Gemm + Relu
             and Gemm + Tanh + Mul): each batch takes the branch its mean picks, and both branches' weights train;
  looprnn    a recurrent cell written as a Python loop over time steps and exported through torch.jit.script (an ONNX
             Loop whose body gathers the step's embeddings from the enclosing graph and holds Gemm, MatMul, Tanh):
             the weights read inside the body and the embeddings train through the backward Loop;
  qat        quantization-aware training: torch.fake_quantize_per_tensor_affine on the input, an activation and a
             Linear weight, fake_quantize_per_channel_affine on a Conv weight (QuantizeLinear -> DequantizeLinear
             pairs, per tensor and per axis, uint8 and int8): the float weights train through the straight-through
             estimator (the per-channel scale, a buffer in torch, is kept with --freeze);
  qat_lsq    the same network with the Conv weight's per-channel scale learned (LSQ): torch trains it as a Parameter
             through _fake_quantize_learnable_per_channel_affine (grad_factor 1), onnxamp as a float initializer
             through FakeQuantizeGrad's step-size gradient;
  gpt        a two-block GPT as nanoGPT writes it: the causal mask a registered buffer (torch.tril, an initializer in
             the file) that masked_fill compares with 0 (Equal, Where), the LM head tied to the token embedding (a
             Transpose node reading it), five LayerNorms; per-token logits (--class-axis -1). No --freeze: no gradient
             reaches the mask, so onnxamp leaves it untrained, as torch leaves the buffer;
  gptfixed   the same GPT exported without dynamic axes at batch 2 (every view's shape a Concat of Unsqueezed
             Constants holding 2): onnxamp makes the batch symbolic and trains at batch 8;
  bert       a BERT-style classifier with three inputs (input_ids, attention_mask, token_type_ids): the mask an
             additive finfo.min term (Cast, Sub, Mul), word/position/type embeddings (the position ids an int64
             buffer), post-norm LayerNorms, a tanh pooler;
  convnext   ConvNeXt in small: 7x7 depthwise Convs, channels-last LayerNorms between permutes, Linear MLPs with a
             learned layer scale, a strided-Conv downsampling, torch.roll (Slice + Concat) between the stages;
  mixed      two inputs: nn.EmbeddingBag (mean; a Loop over the bags), einsum, Conv + pixel_shuffle (DepthToSpace),
             cumsum, where;
  params     parameters of one element (nn.PReLU()'s slope, a ReZero gate, a CLIP-style log temperature on the
             logits) and a buffer added into the computation (a fixed table added to the input): trained with
             --trainable @FILE, the names torch's named_parameters() gives, so that onnxamp trains what torch trains
             (by default it would train the buffer and leave the one-element gate and temperature constant).

mobilenet, fire and gpt also run with --val-data (the training data): onnxamp's last validation loss must be torch's
loss of the trained module after module.eval() on all the samples, within 1e-4 relative (the training-mode export's
BatchNormalization and Dropout nodes run in inference mode in the eval graph); and `onnxamp export --inference-mode`
of the trained model must pass onnx's full check.

For each: onnxamp `train MODEL --data D.npz --labels labels --loss ce --optimizer sgd --lr LR --steps 30
--batch-size 8 --no-shuffle --threads 1 --log-every 1 --log-format jsonl -o OUT.onnx` against torch's SGD on the
module, batch i = rows [8i, 8i + 8) in file order, CrossEntropyLoss (mean), float32, one thread. Checks (one `FAIL`
line each, exit 1 on any):

  fp32  every step's loss within 1e-4 relative of torch's (both compute in float32 with different summation orders:
        the bundled models' parity, tests/peer/train_parity.py, measures ~3e-7 per step and up to 1e-4 where
        training amplifies it); the exported model reloads in onnx's checker;
  amp   --amp fp16 and --amp bf16 train the same model: the mean loss of the last 10 steps within 1e-3 relative of the
        FP32 run's (measured: 1.5e-6 to 1.2e-4; the loss averages many tokens or images; warp 3e-3, AMP_RTOL_MODEL),
        and no step skipped after the first 5 (the GradScaler's start).

NAME@11 (mobilenet, encoder, lstm, gru): the same module exported at opset 11, as older exporters wrote models (Dropout
without training_mode, Unsqueeze's axes an attribute, LayerNorm and GELU spelled out, Concats of LSTM and GRU weights
whose gradient needs a Slice per input there); the same checks (measured: 7.7e-8 to 1.8e-7 relative to torch in FP32).
bf16 raises them to opset 13 through ONNX's version converter (and the converter's own rewrite of Softmax's axis).
fire@9 and fire@7: opsets whose Concat (and at 7 GlobalAveragePool) has no gradient: onnxamp trains them raised to
opset 13 and writes them back at their own opset (measured: 1.05e-7 relative to torch in FP32, as fire at 17).

Usage: /usr/bin/python3 tests/peer/train_exported.py [--onnxamp BIN] [--models mobilenet,rope,encoder,lstm,gru,scatter,
                                                     warp,gated,looprnn,qat,qat_lsq,gpt,gptfixed,bert,convnext,
                                                     mixed,params,mobilenet@11,encoder@11,
                                                     lstm@11,gru@11,fire,fire@9,fire@7]
                                                     [--keep DIR]
Exit status: 0 every check passed (or skipped: torch/onnx/numpy are not importable), 1 a failure, 2 usage error.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from typing import List

try:
    import numpy as np
    import onnx
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # Debian's python3-torch, python3-onnx, python3-numpy (optional, as for train_parity.py)
    print(f"skipped: exported-model parity needs torch, onnx and numpy in {sys.executable} ({e}); "
          "apt-get install python3-torch python3-onnx python3-numpy")
    sys.exit(0)

warnings.filterwarnings("ignore")  # the exporter's notes on training-mode export

NUM_SAMPLES = 240
BATCH = 8
STEPS = 30
LOSS_RTOL = 1e-4
AMP_RTOL = {"fp16": 1e-3, "bf16": 1e-3}
# warp samples at coordinates an FP16 Conv computes (its flow): they carry fp16's rounding (about 3e-4 of a pixel
# here), which moves every sample; measured 9.9e-4, so its limit is 3e-3.
AMP_RTOL_MODEL = {"warp": 3e-3}
MODELS = ("mobilenet", "fire", "rope", "encoder", "lstm", "gru", "scatter", "warp", "gated", "looprnn", "listrnn",
          "qat", "qat_lsq", "gpt", "gptfixed", "bert", "convnext", "mixed", "params", "mobilenet@11", "encoder@11", "lstm@11", "gru@11", "fire@9", "fire@7")
# Models whose FP32 run also evaluates on the training data, against torch's loss after module.eval().
EVAL_MODELS = ("mobilenet", "fire", "gpt")
# qat_lsq's scale learns at this fraction of the learning rate on both sides (LSQ's gradient factor, 1/sqrt(N Qp) in
# the paper: N = 27 values per channel, Qp = 127). At the full rate the scales move by more than their size (one went
# negative after 6 steps) and the level flips between x / scale (ONNX's QuantizeLinear) and x * (1 / scale) (torch's
# kernels) are amplified until the runs part (2e-2 by step 24, measured).
LSQ_SCALE_LR = 0.02
# onnxamp arguments of one model: the QAT model's scales are torch buffers (fixed), onnxamp would train the per-axis one.
# The encoder's and bert's nn.Embedding have padding_idx 0, which torch.onnx.export does not record (the lookup is a
# Gather): row 0 gets no gradient in PyTorch, and in onnxamp with --padding-idx (without it the encoder's losses part
# by step 15; bert's padding positions are masked out of the attention, so no gradient reaches its row 0 anyway).
EXTRA_ARGS = {"qat": ["--freeze", "_scale$"], "qat_lsq": ["--lr-scale", f"_scale$={LSQ_SCALE_LR}"],
              "encoder": ["--padding-idx", "emb.weight=0"], "bert": ["--padding-idx", "words.weight=0"]}
# Arguments of one model's FP16 run. convnext's head.weight gradient reaches 1.09 at step 19 (torch, FP32): scaled by
# the GradScaler's first 65536 it passes float16's 65504, so step 19 is skipped, as PyTorch's GradScaler would skip
# it, and the check's "no skip after step 5" fails for a reason that is not onnxamp's. It starts at 16384.
FP16_ARGS = {"convnext": ["--init-scale", "16384"]}


class MobileNetish(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, groups=16, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
        self.se_reduce = nn.Conv2d(16, 4, 1)
        self.se_expand = nn.Conv2d(4, 16, 1)
        self.project = nn.Sequential(nn.Conv2d(16, 24, 1, bias=False), nn.BatchNorm2d(24))
        self.act = nn.PReLU(24, init=0.2)
        self.head = nn.Linear(24, 10)

    def forward(self, x):
        h = self.dw(self.stem(x))
        s = F.adaptive_avg_pool2d(h, 1)
        s = F.hardsigmoid(self.se_expand(F.relu(self.se_reduce(s))))
        h = self.act(self.project(h * s))
        return self.head(F.mish(F.adaptive_avg_pool2d(h, 1).flatten(1)))


class FireNet(nn.Module):
    """SqueezeNet 1.1 in small: a strided Conv, MaxPool with ceil_mode, two Fire modules (a 1x1 squeeze, then 1x1 and
    3x3 expands concatenated), Dropout (p 0, as the other models: the masks cannot match), a 1x1 Conv classifier
    (without SqueezeNet's ReLU, which left these random labels' logits at 0) and a global average pool."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2)
        self.fires = nn.ModuleList()
        for cin, squeeze, expand in ((16, 4, 8), (16, 4, 12)):
            self.fires.append(nn.ModuleList([nn.Conv2d(cin, squeeze, 1), nn.Conv2d(squeeze, expand, 1),
                                             nn.Conv2d(squeeze, expand, 3, padding=1)]))
        self.drop = nn.Dropout(0.0)
        self.classifier = nn.Conv2d(24, 10, 1)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.stem(x)), 3, 2, ceil_mode=True)
        for squeeze, e1, e3 in self.fires:
            s = F.relu(squeeze(h))
            h = torch.cat([F.relu(e1(s)), F.relu(e3(s))], 1)
        return F.adaptive_avg_pool2d(self.classifier(self.drop(h)), 1).flatten(1)


class RopeLM(nn.Module):
    VOCAB, SEQ, DIM = 50, 12, 32

    def __init__(self):
        super().__init__()
        d = self.DIM
        self.emb = nn.Embedding(self.VOCAB, d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, self.VOCAB)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)), persistent=False)

    def rotate(self, x, cos, sin):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)

    def forward(self, ids):
        t = ids.shape[1]
        pos = torch.cumsum(torch.ones_like(ids, dtype=torch.float32), dim=1) - 1  # [N, T]
        angles = pos.unsqueeze(-1) * self.inv_freq  # [N, T, D/2]
        cos, sin = torch.cos(angles), torch.sin(angles)
        h = self.emb(ids)
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        q, k = self.rotate(q, cos, sin), self.rotate(k, cos, sin)
        mask = torch.triu(torch.full((t, t), -1e4), diagonal=1)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.DIM) + mask, dim=-1)
        h = h + self.proj(att @ v)
        h = h + self.mlp(self.norm(h))
        return self.head(h)


class Gpt(nn.Module):
    VOCAB, SEQ, DIM, HEADS = 40, 12, 32, 4

    class Block(nn.Module):
        def __init__(self, d, heads, seq):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.drop = nn.Dropout(0.0)
            self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
            att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
            y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, d)
            x = x + self.drop(self.proj(y))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(self.VOCAB, self.DIM)
        self.wpe = nn.Embedding(self.SEQ, self.DIM)
        self.blocks = nn.ModuleList([self.Block(self.DIM, self.HEADS, self.SEQ) for _ in range(2)])
        self.ln = nn.LayerNorm(self.DIM)
        self.head = nn.Linear(self.DIM, self.VOCAB, bias=False)
        self.head.weight = self.wte.weight  # tied

    def forward(self, ids):
        pos = torch.arange(0, ids.shape[1], dtype=torch.long).unsqueeze(0)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class Bert(nn.Module):
    """A BERT-style classifier as Hugging Face writes one: word, position (a registered int64 buffer) and token-type
    embeddings, the attention mask an input turned into an additive mask of finfo.min, one post-norm layer, a tanh
    pooler over the first token."""
    VOCAB, SEQ, DIM, HEADS = 40, 10, 32, 4

    def __init__(self):
        super().__init__()
        d = self.DIM
        self.words = nn.Embedding(self.VOCAB, d, padding_idx=0)
        self.positions = nn.Embedding(self.SEQ, d)
        self.types = nn.Embedding(2, d)
        self.register_buffer("position_ids", torch.arange(self.SEQ).expand((1, -1)))
        self.ln0, self.ln1, self.ln2 = (nn.LayerNorm(d, eps=1e-12) for _ in range(3))
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.fc, self.out = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.pool, self.cls = nn.Linear(d, d), nn.Linear(d, 3)

    def forward(self, input_ids, attention_mask, token_type_ids):
        b, t = input_ids.shape
        h = self.words(input_ids) + self.positions(self.position_ids[:, :t]) + self.types(token_type_ids)
        h = self.ln0(h)
        ext = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
        heads = self.HEADS

        def split(z):
            return z.view(b, t, heads, self.DIM // heads).permute(0, 2, 1, 3)

        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        att = F.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.DIM // heads) + ext, dim=-1)
        c = (att @ v).permute(0, 2, 1, 3).contiguous().view(b, t, self.DIM)
        h = self.ln1(self.o(c) + h)
        h = self.ln2(self.out(F.gelu(self.fc(h))) + h)
        return self.cls(torch.tanh(self.pool(h[:, 0])))


class ConvNext(nn.Module):
    """ConvNeXt in small: a patchify stem, blocks of a 7x7 depthwise Conv, a channels-last LayerNorm (permutes around
    it), an inverted MLP of Linears and a learned per-channel layer scale, a LayerNorm + strided Conv downsampling, a
    torch.roll between the stages (Slice + Concat), a mean-pooled head."""

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.dw = nn.Conv2d(d, d, 7, padding=3, groups=d)
            self.norm = nn.LayerNorm(d, eps=1e-6)
            self.pw1, self.pw2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.gamma = nn.Parameter(0.1 * torch.ones(d))

        def forward(self, x):
            y = self.dw(x).permute(0, 2, 3, 1)
            y = self.pw2(F.gelu(self.pw1(self.norm(y)))) * self.gamma
            return x + y.permute(0, 3, 1, 2)

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 4, stride=4)
        self.stem_norm, self.down_norm = nn.LayerNorm(16, eps=1e-6), nn.LayerNorm(16, eps=1e-6)
        self.b1, self.down, self.b2 = self.Block(16), nn.Conv2d(16, 32, 2, stride=2), self.Block(32)
        self.head_norm, self.head = nn.LayerNorm(32), nn.Linear(32, 10)

    @staticmethod
    def channels_last_norm(norm, x):
        return norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    def forward(self, x):
        x = self.b1(self.channels_last_norm(self.stem_norm, self.stem(x)))
        x = torch.roll(x, shifts=(1, -1), dims=(2, 3))
        x = self.b2(self.down(self.channels_last_norm(self.down_norm, x)))
        return self.head(self.head_norm(x.mean([-2, -1])))


class Mixed(nn.Module):
    """Two inputs and ops of their own: nn.EmbeddingBag (mean; exported as a Loop over the bags), torch.einsum, a Conv
    followed by pixel_shuffle (DepthToSpace), torch.cumsum, torch.where with a comparison."""
    VOCAB = 30

    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(self.VOCAB, 16, mode="mean")
        self.w = nn.Parameter(torch.randn(16, 16) * 0.2)
        self.conv = nn.Conv2d(4, 16, 3, padding=1)
        self.head = nn.Linear(32, 5)

    def forward(self, ids, img):
        e = torch.einsum("nd,de->ne", self.bag(ids), self.w)
        p = F.pixel_shuffle(self.conv(img), 2)
        c = torch.cumsum(p.mean(1).flatten(1), 1)[:, -16:] / 64
        return self.head(torch.cat([e, torch.where(c > 0, c, 0.1 * c)], 1))


class Encoder(nn.Module):
    VOCAB, SEQ = 60, 16

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(self.VOCAB, 32, padding_idx=0)  # the export drops it: --padding-idx (EXTRA_ARGS)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(32, 5)

    def forward(self, ids):
        return self.head(self.enc(self.emb(ids)).mean(1))


class LstmTagger(nn.Module):
    VOCAB, SEQ = 40, 10

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(self.VOCAB, 16)
        self.lstm = nn.LSTM(16, 12, num_layers=2, batch_first=True, bidirectional=True)
        self.tag = nn.Linear(24, 6)
        self.ctx = nn.Linear(24, 6)

    def forward(self, ids):
        out, (h, _) = self.lstm(self.emb(ids))  # out [N, T, 24], h [4, N, 12]
        last = torch.cat((h[-2], h[-1]), dim=1)  # the top layer's final states, both directions
        return self.tag(out) + self.ctx(last).unsqueeze(1)


class GruTagger(nn.Module):
    VOCAB, SEQ = 40, 10

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(self.VOCAB, 16)
        self.gru = nn.GRU(16, 20, batch_first=True)
        self.h0 = nn.Parameter(torch.randn(1, 1, 20) * 0.1)  # a learned initial state
        self.tag = nn.Linear(20, 6)

    def forward(self, ids):
        out, _ = self.gru(self.emb(ids), self.h0.expand(1, ids.shape[0], 20).contiguous())
        return self.tag(torch.tanh(out))


class ScatterNet(nn.Module):
    VOCAB, SEQ = 30, 8

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(self.VOCAB, 16)
        self.cls = nn.Parameter(torch.randn(16) * 0.1)
        self.lin = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, ids):
        h = self.emb(ids).clone()
        h[:, 0] = self.cls  # index_put: ScatterND
        h = torch.tanh(self.lin(h))
        slots = (ids % 5).unsqueeze(-1).expand(-1, -1, 16)  # each token's slot
        pooled = torch.zeros_like(h).scatter_add(1, slots, h)  # ScatterElements, reduction add
        picked = pooled.gather(1, slots)  # GatherElements
        return self.head((picked * h).mean(1))


class Warp(nn.Module):
    """Warps its input by a learned flow (a Conv2d) with grid_sample: optical-flow and spatial-transformer models."""

    def __init__(self):
        super().__init__()
        self.flow = nn.Conv2d(3, 2, 3, padding=1)
        self.head = nn.Linear(3 * 8 * 8, 10)
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, 8), torch.linspace(-1, 1, 8), indexing="ij")
        self.register_buffer("base", torch.stack((xs, ys), -1).unsqueeze(0), persistent=False)

    def forward(self, x):
        flow = torch.tanh(self.flow(x)).permute(0, 2, 3, 1) * 0.3
        warped = F.grid_sample(x, self.base + flow, mode="bilinear", padding_mode="border", align_corners=False)
        return self.head(warped.flatten(1))


class Gated(nn.Module):
    """A data-dependent branch: batches whose mean is positive take one layer, the others another (exported through
    torch.jit.script, the `if` becomes an ONNX If)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(16, 32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        if bool(x.mean() > 0):
            h = torch.relu(self.a(x))
        else:
            h = torch.tanh(self.b(x)) * 2.0
        return self.head(h)


class LoopRnn(nn.Module):
    VOCAB = 20
    SEQ = 8

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(self.VOCAB, 16)
        self.cell_x = nn.Linear(16, 24)
        self.cell_h = nn.Linear(24, 24, bias=False)
        self.head = nn.Linear(24, 6)

    def forward(self, ids):
        e = self.emb(ids)
        h = torch.zeros(e.shape[0], 24)
        for t in range(e.shape[1]):
            h = torch.tanh(self.cell_x(e[:, t]) + self.cell_h(h))
        return self.head(h)


class ListRnn(LoopRnn):
    """LoopRnn's cell over a list: the steps from unbind, each state appended, the heads on the stacked list."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(48, 6)
        self.flat_head = nn.Linear(24 * self.SEQ, 6)

    def forward(self, ids):
        e = self.emb(ids)
        h = torch.zeros(e.shape[0], 24)
        outs: List[torch.Tensor] = []
        for x in e.unbind(1):
            h = torch.tanh(self.cell_x(x) + self.cell_h(h))
            outs.append(h)
        seq = torch.stack(outs, 1)
        pooled = seq.sum(1) / len(outs)
        first = torch.split(seq, 4, 1)[0].mean(1)
        return self.head(torch.cat([pooled + outs[-1], first], 1)) + self.flat_head(torch.cat(outs, 1))


class ParamsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("pos", torch.randn(16) * 0.5)  # a fixed table added to the input: not trained
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.PReLU()  # one slope
        self.gate = nn.Parameter(torch.zeros(1))  # ReZero: h + gate * f(h)
        self.fc2 = nn.Linear(32, 32)
        self.head = nn.Linear(32, 10)
        self.log_temperature = nn.Parameter(torch.tensor(0.3))  # logits * exp(t), as CLIP's logit scale

    def forward(self, x):
        h = self.act(self.fc1(x + self.pos))
        h = h + self.gate * torch.tanh(self.fc2(h))
        return self.head(h) * self.log_temperature.exp()


class Qat(nn.Module):
    def __init__(self, learned_scale=False):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 10)
        self.learned_scale = learned_scale
        if learned_scale:  # exported as an initializer all the same
            self.conv_w_scale = nn.Parameter(torch.linspace(0.01, 0.03, 8))
        else:
            self.register_buffer("conv_w_scale", torch.linspace(0.01, 0.03, 8))
        self.register_buffer("conv_w_zp", torch.zeros(8, dtype=torch.int32))

    def forward(self, x):
        x = torch.fake_quantize_per_tensor_affine(x, 0.05, 128, 0, 255)
        if self.learned_scale and not torch.onnx.is_in_onnx_export():
            w = torch._fake_quantize_learnable_per_channel_affine(self.conv.weight, self.conv_w_scale,
                                                                  self.conv_w_zp.float(), 0, -128, 127, 1.0)
        else:
            w = torch.fake_quantize_per_channel_affine(self.conv.weight, self.conv_w_scale.detach(), self.conv_w_zp,
                                                       0, -128, 127)
        h = F.relu(F.conv2d(x, w, self.conv.bias, padding=1))
        h = torch.fake_quantize_per_tensor_affine(h, 0.04, 0, 0, 255)
        h = F.max_pool2d(h, 2).flatten(1)
        fw = torch.fake_quantize_per_tensor_affine(self.fc.weight, 0.01, 0, -128, 127)
        return F.linear(h, fw, self.fc.bias)


def make(name, rng):
    """The module, its input array, labels and SGD learning rate."""
    if name == "mobilenet":
        return MobileNetish(), rng.standard_normal((NUM_SAMPLES, 3, 16, 16)).astype(np.float32), \
            rng.integers(0, 10, NUM_SAMPLES), 0.05
    if name == "fire":
        return FireNet(), rng.standard_normal((NUM_SAMPLES, 3, 16, 16)).astype(np.float32), \
            rng.integers(0, 10, NUM_SAMPLES), 0.1
    if name == "convnext":
        return ConvNext(), rng.standard_normal((NUM_SAMPLES, 3, 32, 32)).astype(np.float32), \
            rng.integers(0, 10, NUM_SAMPLES), 0.05
    if name == "params":
        x = rng.standard_normal((NUM_SAMPLES, 16)).astype(np.float32)
        return ParamsNet(), x, np.argmax(x[:, :10] + x[:, 6:], axis=1), 0.05
    if name == "mixed":
        ids = rng.integers(0, Mixed.VOCAB, (NUM_SAMPLES, 6)).astype(np.int64)
        img = rng.standard_normal((NUM_SAMPLES, 4, 8, 8)).astype(np.float32)
        return Mixed(), {"ids": ids, "img": img}, (ids[:, 0] % 5), 0.05
    if name == "bert":
        ids = rng.integers(1, Bert.VOCAB, (NUM_SAMPLES, Bert.SEQ))
        lengths = rng.integers(3, Bert.SEQ + 1, NUM_SAMPLES)
        mask = (np.arange(Bert.SEQ)[None, :] < lengths[:, None]).astype(np.int64)
        types = (np.arange(Bert.SEQ)[None, :] >= lengths[:, None] // 2).astype(np.int64) * mask
        labels = (ids[:, 1] + ids[:, 2]) % 3  # read through the attention from the first token
        return Bert(), {"input_ids": ids * mask, "attention_mask": mask, "token_type_ids": types}, labels, 0.1
    if name in ("gpt", "gptfixed"):
        ids = rng.integers(0, Gpt.VOCAB, (NUM_SAMPLES, Gpt.SEQ))
        return Gpt(), ids.astype(np.int64), np.roll(ids, 1, axis=1), 0.1
    if name == "rope":
        ids = rng.integers(0, RopeLM.VOCAB, (NUM_SAMPLES, RopeLM.SEQ))
        labels = np.roll(ids, 1, axis=1)  # the previous token: learnable
        return RopeLM(), ids.astype(np.int64), labels, 0.3
    if name in ("qat", "qat_lsq"):
        return Qat(name == "qat_lsq"), rng.standard_normal((NUM_SAMPLES, 3, 8, 8)).astype(np.float32), \
            rng.integers(0, 10, NUM_SAMPLES), 0.05
    if name == "looprnn":
        ids = rng.integers(0, LoopRnn.VOCAB, (NUM_SAMPLES, LoopRnn.SEQ))
        return LoopRnn(), ids.astype(np.int64), (ids % 6).max(axis=1), 0.5
    if name == "listrnn":
        ids = rng.integers(0, ListRnn.VOCAB, (NUM_SAMPLES, ListRnn.SEQ))
        return ListRnn(), ids.astype(np.int64), (ids % 6).max(axis=1), 0.1
    if name == "gated":
        return Gated(), rng.standard_normal((NUM_SAMPLES, 16)).astype(np.float32), rng.integers(0, 10, NUM_SAMPLES), 0.1
    if name == "warp":
        return Warp(), rng.standard_normal((NUM_SAMPLES, 3, 8, 8)).astype(np.float32), \
            rng.integers(0, 10, NUM_SAMPLES), 0.05
    if name == "scatter":
        ids = rng.integers(0, ScatterNet.VOCAB, (NUM_SAMPLES, ScatterNet.SEQ))
        return ScatterNet(), ids.astype(np.int64), ids[:, 1] % 4, 0.2
    if name in ("lstm", "gru"):
        module = LstmTagger() if name == "lstm" else GruTagger()
        ids = rng.integers(0, module.VOCAB, (NUM_SAMPLES, module.SEQ))
        labels = np.maximum.accumulate(ids % 6, axis=1)  # the running maximum: needs the state
        return module, ids.astype(np.int64), labels, 0.5
    ids = rng.integers(0, Encoder.VOCAB, (NUM_SAMPLES, Encoder.SEQ))
    return Encoder(), ids.astype(np.int64), ids[:, 0] % 5, 0.05


def inputs(x, rows):
    """The module's inputs for `rows`: x is one array, or a dict of arrays in the module's argument order."""
    arrays = list(x.values()) if isinstance(x, dict) else [x]
    return tuple(torch.from_numpy(a[rows]) for a in arrays)


def torch_losses(module, x, labels, lr, per_token):
    scales = [p for n, p in module.named_parameters() if n.endswith("_scale")]
    others = [p for n, p in module.named_parameters() if not n.endswith("_scale")]
    opt = torch.optim.SGD([{"params": others}, {"params": scales, "lr": lr * LSQ_SCALE_LR}], lr=lr)
    module.train()
    losses = []
    n = len(labels)
    for step in range(STEPS):
        start = (step * BATCH) % n
        yb = torch.from_numpy(labels[start:start + BATCH].astype(np.int64))
        out = module(*inputs(x, slice(start, start + BATCH)))
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]) if per_token else out, yb.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def torch_eval_loss(module, x, labels, per_token):
    """The trained module's mean loss over every sample after module.eval() (running statistics, no dropout)."""
    module.eval()
    with torch.no_grad():
        out = module(*inputs(x, slice(None)))
        y = torch.from_numpy(labels.astype(np.int64))
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]) if per_token else out, y.reshape(-1))
    module.train()
    return loss.item()


def onnxamp_run(onnxamp, model_path, data_path, out_path, lr, per_token, amp, extra, val=False):
    """Per-step losses, skipped flags, the last validation loss (with val: the training data) and stderr."""
    cmd = [onnxamp, "train", model_path, "--data", data_path, "--labels", "labels", "--loss", "ce",
           "--optimizer", "sgd", "--lr", str(lr), "--steps", str(STEPS), "--batch-size", str(BATCH),
           "--no-shuffle", "--threads", "1", "--log-every", "1", "--log-format", "jsonl", "--amp", amp,
           "-o", out_path]
    if per_token:
        cmd += ["--class-axis", "-1"]
    if val:
        cmd += ["--val-data", data_path]
    cmd += extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-500:]}")
    records = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    steps = [s for s in records if s.get("type") == "step"]
    evals = [e for e in records if e.get("type") == "eval"]
    val_loss = evals[-1]["val_loss"] if evals else None
    return [s["loss"] for s in steps], [s["skipped"] for s in steps], val_loss, r.stderr


def check(model, onnxamp, work):
    # NAME@OPSET: the same module exported at an older opset (default 17), as older exporters wrote models (Dropout
    # without a training_mode input, Unsqueeze's axes an attribute, LayerNorm and GELU spelled out; bf16 AMP first
    # raises the model to opset 13).
    name, _, opset_text = model.partition("@")
    opset = int(opset_text) if opset_text else 17
    failures = []
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    module, x, labels, lr = make(name, rng)
    per_token = name in ("rope", "lstm", "gru", "gpt", "gptfixed")
    model_path = os.path.join(work, f"{name}_{opset}.onnx")
    input_name = "x" if name in ("mobilenet", "fire", "warp", "gated", "qat", "qat_lsq", "convnext", "params") else "ids"
    arrays = x if isinstance(x, dict) else {input_name: x}  # the model's inputs by name
    module.train()
    fixed = name == "gptfixed"  # no dynamic axes: the batch of the example (2) is in the file
    axes = {k: {0: "batch"} for k in list(arrays) + ["logits"]}
    torch.onnx.export(torch.jit.script(module) if name in ("gated", "looprnn", "listrnn") else module,
                      inputs(x, slice(0, 2 if fixed else BATCH)), model_path, opset_version=opset,
                      input_names=list(arrays), output_names=["logits"], dynamic_axes=None if fixed else axes,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    ops = sorted({n.op_type for n in onnx.load(model_path).graph.node})
    listed = []  # --trainable @FILE: torch's parameter names
    if name == "params":
        names_path = os.path.join(work, f"{name}_parameters.txt")
        with open(names_path, "w") as f:
            f.write("".join(n + "\n" for n, _ in module.named_parameters()))
        listed = ["--trainable", "@" + names_path]
    data_path = os.path.join(work, f"{name}.npz")
    np.savez(data_path, **arrays, labels=labels.astype(np.int64))
    want = torch_losses(module, x, labels, lr, per_token)  # trains the module: after the export
    evaluate = model in EVAL_MODELS
    want_eval = torch_eval_loss(module, x, labels, per_token) if evaluate else None
    runs = {}
    for amp in ("off", "fp16", "bf16"):
        out_path = os.path.join(work, f"{name}_{opset}_{amp}.onnx")
        try:
            extra = EXTRA_ARGS.get(name, []) + listed + (FP16_ARGS.get(name, []) if amp == "fp16" else [])
            runs[amp] = onnxamp_run(onnxamp, model_path, data_path, out_path, lr, per_token, amp, extra,
                                    val=evaluate and amp == "off")
        except RuntimeError as e:
            failures.append(f"FAIL {model} {amp}: {e}")
            continue
        if amp == "off":
            onnx.checker.check_model(onnx.load(out_path))
    if "off" in runs and name in ("gpt", "gptfixed"):
        stderr = runs["off"][3]
        for block in range(2):
            if f"'blocks.{block}.mask' is not trained" not in stderr:
                failures.append(f"FAIL {model} fp32: no line says blocks.{block}.mask is not trained")
    if "off" in runs and name == "params" and "leaves 1 initializer the loss reads constant" not in runs["off"][3]:
        failures.append(f"FAIL {model} fp32: no line says --trainable leaves the buffer 'pos' constant")
    if "off" in runs and evaluate:
        got_eval = runs["off"][2]
        rel = abs(got_eval - want_eval) / abs(want_eval) if got_eval is not None else math.inf
        print(f"{model} eval: validation loss {got_eval}, torch after module.eval() {want_eval:.6f} ({rel:.2e} "
              f"relative)")
        if rel > LOSS_RTOL:
            failures.append(f"FAIL {model} eval: validation loss {got_eval}, torch's {want_eval!r} ({rel:.2e} "
                            f"relative > {LOSS_RTOL})")
        # The trained model for deployment: its training-mode nodes in inference mode, a model ONNX's full check
        # (shape inference included) accepts.
        deploy = os.path.join(work, f"{name}_{opset}_deploy.onnx")
        r = subprocess.run([onnxamp, "export", os.path.join(work, f"{name}_{opset}_off.onnx"), "--inference-mode",
                            "-o", deploy], capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"FAIL {model} export --inference-mode: {r.stderr.strip()[-300:]}")
        else:
            try:
                onnx.checker.check_model(onnx.load(deploy), full_check=True)
            except Exception as e:  # the checker's own exception types differ across onnx versions
                failures.append(f"FAIL {model} export --inference-mode: onnx's checker: {str(e)[:300]}")
    if "off" in runs:
        got = runs["off"][0]
        if len(got) != STEPS:
            failures.append(f"FAIL {model} fp32: {len(got)} steps logged, expected {STEPS}")
        worst = max((abs(g - w) / abs(w), i + 1) for i, (g, w) in enumerate(zip(got, want)))
        print(f"{model}: ops {','.join(ops)}")
        print(f"{model} fp32: loss {want[0]:.5f} -> {want[-1]:.5f}; max relative loss difference to torch "
              f"{worst[0]:.2e} (step {worst[1]})")
        if worst[0] > LOSS_RTOL:
            failures.append(f"FAIL {model} fp32: step {worst[1]}'s loss is {got[worst[1] - 1]!r}, torch's "
                            f"{want[worst[1] - 1]!r} ({worst[0]:.2e} relative > {LOSS_RTOL})")
        ref = np.mean(got[-10:])
        for amp in ("fp16", "bf16"):
            if amp not in runs:
                continue
            losses, skipped = runs[amp][:2]
            rel = abs(np.mean(losses[-10:]) - ref) / abs(ref)
            late_skips = sum(skipped[5:])
            print(f"{model} {amp}: mean loss of the last 10 steps {np.mean(losses[-10:]):.5f} (FP32 {ref:.5f}, "
                  f"{rel:.2e} relative), {sum(skipped)} skipped")
            limit = max(AMP_RTOL[amp], AMP_RTOL_MODEL.get(name, 0))
            if rel > limit or late_skips:
                failures.append(f"FAIL {model} {amp}: last-10 mean loss {rel:.2e} relative from FP32's "
                                f"(> {limit}) or {late_skips} steps skipped after step 5")
    return failures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--onnxamp", default="build/tools/onnxamp")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--keep", help="write the models, data and outputs here (kept)")
    args = p.parse_args()
    models = args.models.split(",")
    if any(m not in MODELS for m in models):
        p.error(f"unknown model in --models {args.models}")
    torch.set_num_threads(1)
    work = args.keep or tempfile.mkdtemp(prefix="onnxamp_exported_")
    os.makedirs(work, exist_ok=True)
    failures = []
    try:
        for name in models:
            failures += check(name, os.path.abspath(args.onnxamp), work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print(f)
    print("exported-model parity: " + ("FAILED" if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
