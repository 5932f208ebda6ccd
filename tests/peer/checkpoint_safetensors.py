#!/usr/bin/env python3
"""A training checkpoint read by the PyTorch ecosystem's own reader: `onnxamp train models/cnn.onnx` (FP16 AMP,
AdamW, BatchNormalization) writes a checkpoint; PyPI's `safetensors.numpy.load_file` opens its state.safetensors,
and every parameter and BatchNormalization buffer must equal, bit for bit, the initializer of the same name in
`onnxamp export CHECKPOINT_DIR` (FP32). The optimizer state (`optim.exp_avg.<name>`, `optim.exp_avg_sq.<name>`) must
be there for every parameter, float32, of the parameter's shape; trainer.json's grad_scaler must hold
torch.amp.GradScaler.state_dict()'s five keys.

Usage: .venv/bin/python tests/peer/checkpoint_safetensors.py [--onnxamp BIN] [--keep DIR]
Exit status: 0 passed or skipped (without numpy, onnx or safetensors; the output says so), 1 a check failed.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--onnxamp", default=os.path.join(ROOT, "build", "tools", "onnxamp"))
    parser.add_argument("--keep", help="write the data, checkpoint and export here and keep them")
    args = parser.parse_args()
    try:
        import numpy as np
        import onnx
        from onnx import numpy_helper
        from safetensors import safe_open
        from safetensors.numpy import load_file
    except ImportError as e:
        print(f"skipped: {e}")
        return 0

    work = args.keep or tempfile.mkdtemp(prefix="onnxamp_ckpt_peer_")
    os.makedirs(work, exist_ok=True)
    try:
        rng = np.random.default_rng(0)
        data = os.path.join(work, "data.npz")
        np.savez(data, input=rng.standard_normal((12, 3, 32, 32)).astype(np.float32),
                 labels=rng.integers(0, 10, 12).astype(np.int64))
        ckpt = os.path.join(work, "ckpt")
        subprocess.run([args.onnxamp, "train", os.path.join(ROOT, "models", "cnn.onnx"), "--data", data, "--labels",
                        "labels", "--amp", "fp16", "--optimizer", "adamw", "--lr", "1e-3", "--steps", "3",
                        "--batch-size", "4", "--threads", "1", "--checkpoint-dir", ckpt, "-o",
                        os.path.join(work, "trained.onnx")], check=True, capture_output=True)
        exported = os.path.join(work, "exported.onnx")
        subprocess.run([args.onnxamp, "export", ckpt, "-o", exported], check=True, capture_output=True)

        with open(os.path.join(ckpt, "latest")) as f:
            step_dir = os.path.join(ckpt, f.read().strip())
        with open(os.path.join(step_dir, "trainer.json")) as f:
            meta = json.load(f)
        state_path = os.path.join(step_dir, "state.safetensors")
        tensors = load_file(state_path)
        with safe_open(state_path, framework="numpy") as f:
            file_meta = f.metadata()
        inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(exported).graph.initializer}

        failures = []
        if file_meta.get("format") != "onnxamp.checkpoint" or file_meta.get("step") != str(meta["step"]):
            failures.append(f"__metadata__ {file_meta}")
        names = meta["parameters"] + meta["buffers"]
        for name in names:
            t = tensors.get(name)
            if t is None:
                failures.append(f"{name}: not in state.safetensors")
            elif t.dtype != np.float32 or name not in inits or not np.array_equal(t, inits[name]):
                failures.append(f"{name}: differs from the exported initializer")
        for state in ("exp_avg", "exp_avg_sq"):
            for name in meta["parameters"]:
                t = tensors.get(f"optim.{state}.{name}")
                if t is None or t.dtype != np.float32 or t.shape != tensors[name].shape:
                    failures.append(f"optim.{state}.{name}: missing or not float32 of the parameter's shape")
        if any((tensors[f"optim.exp_avg_sq.{n}"] < 0).any() for n in meta["parameters"]):
            failures.append("optim.exp_avg_sq holds negative values")
        expected_keys = {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}
        if set(meta["grad_scaler"] or {}) != expected_keys:
            failures.append(f"grad_scaler keys {sorted(meta['grad_scaler'] or {})}")
        extra = set(tensors) - set(names) - {k for k in tensors if k.startswith("optim.")}
        if extra:
            failures.append(f"unlisted tensors {sorted(extra)}")
        for f in failures:
            print(f"FAIL {f}")
        print(f"checkpoint: {len(tensors)} tensors in {os.path.relpath(state_path, work)} read by safetensors "
              f"(numpy); {len(meta['parameters'])} parameters and {len(meta['buffers'])} buffers "
              f"{'differ' if failures else 'equal the exported initializers'}; grad_scaler "
              f"{meta['grad_scaler']}")
        return 1 if failures else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
