#!/usr/bin/env python3
"""Inference benchmark: the onnxamp CPU runtime against ONNX Runtime (CPU), same model, inputs and threads.

For each model (mlp4096, cnn, transformer), dtype (fp32; fp16 = weights and I/O in float16, written by
make_fp16.py) and batch size, both runtimes run in their own process on the same seeded inputs: onnxamp
through build/bench/onnxamp_bench (Session::Run timed after warm-up), ONNX Runtime through this script in
worker mode (InferenceSession.run timed after warm-up; intra_op_num_threads = --threads, one inter-op thread,
sequential execution, default graph optimizations). It prints a table with the median times, their ratio
(onnxamp ms / ORT ms: below 1 means onnxamp is faster), peak memory, and the largest difference between the
two runtimes' outputs. With --rounds R each row runs both sides R times in turn (onnxamp, ORT, onnxamp, ...),
so that both see the same drift of a shared or virtual machine; the table then shows each side's median over
the rounds and the median and range of the per-round ratios.

Usage: bench_inference.py [--build-dir DIR] [--threads N] [--models mlp4096,cnn,transformer] [--dtypes fp32,fp16]
                          [--batches mlp4096=1,64 --batches cnn=1,32 ...] [--iters N] [--warmup N]
                          [--max-seconds S] [--stat median|min] [--rounds R] [--markdown] [--json FILE]
Run with a Python that has numpy, onnx and onnxruntime (the repository's .venv).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from bench_util import ROOT, cpu_name, find_build_dir, print_rows, size, status_bytes

DEFAULT_BATCHES = {"mlp4096": [1, 64], "cnn": [1, 32], "transformer": [1, 16]}
# Token ids of the transformer are below its vocabulary size.
INT_HIGH = {"transformer": 128}


# ---------------------------------------------------------------- ONNX Runtime worker (a separate process)


def ort_worker(args):
    import onnxruntime as ort

    baseline = status_bytes("VmRSS")
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    create_ms = (time.perf_counter() - t0) * 1000
    feeds = {}
    for spec in args.input:
        name, path = spec.split("=", 1)
        feeds[name] = np.load(path)
    warm = []
    t_start = time.perf_counter()
    for _ in range(args.warmup):
        t = time.perf_counter()
        outs = sess.run(None, feeds)
        warm.append((time.perf_counter() - t) * 1000)
        if time.perf_counter() - t_start > args.max_seconds / 2:
            break
    times = []
    t_start = time.perf_counter()
    for _ in range(args.iters):
        t = time.perf_counter()
        outs = sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1000)
        if time.perf_counter() - t_start > args.max_seconds:
            break
    if args.output_dir:
        for i, o in enumerate(outs):
            np.save(os.path.join(args.output_dir, f"output_{i}.npy"), o)
    print(json.dumps({
        "version": ort.__version__,
        "session_create_ms": create_ms,
        "first_ms": (warm or times)[0],
        "iters": len(times),
        "median_ms": float(np.median(times)),
        "min_ms": min(times),
        "peak_rss_bytes": status_bytes("VmHWM"),
        "baseline_rss_bytes": baseline,
    }))
    return 0


# ---------------------------------------------------------------- driver


def model_path(build_dir, name, dtype):
    models_dir = os.path.join(build_dir, "bench_models")
    os.makedirs(models_dir, exist_ok=True)
    if name == "mlp4096":
        fp32 = os.path.join(models_dir, "mlp4096.onnx")
        if not os.path.exists(fp32):
            gen = os.path.join(build_dir, "tools", "onnxamp_gen_models")
            subprocess.run([gen, models_dir, "--only", "mlp4096"], check=True, stdout=subprocess.DEVNULL)
    else:
        fp32 = os.path.join(ROOT, "models", name + ".onnx")
    if dtype == "fp32":
        return fp32
    fp16 = os.path.join(models_dir, name + ".fp16.onnx")
    if not os.path.exists(fp16) or os.path.getmtime(fp16) < os.path.getmtime(fp32):
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_fp16.py"), fp32, fp16], check=True)
    return fp16


def make_inputs(model_file, name, batch, folder):
    import onnx

    m = onnx.load(model_file, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    rng = np.random.default_rng(1234)
    specs = []
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else batch for d in tt.shape.dim]
        if hasattr(onnx.helper, "tensor_dtype_to_np_dtype"):
            dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        else:  # onnx before 1.13 (a GPU machine's Python may have an older one)
            dtype = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[tt.elem_type]
        if np.issubdtype(dtype, np.integer):
            arr = rng.integers(0, INT_HIGH.get(name, 100), size=shape).astype(dtype)
        else:
            arr = rng.uniform(-1, 1, size=shape).astype(dtype)
        path = os.path.join(folder, f"{vi.name}.npy")
        np.save(path, arr)
        specs.append(f"{vi.name}={path}")
    return specs


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        lines = (p.stderr or p.stdout).strip().splitlines()
        return None, (lines[-1] if lines else f"exit {p.returncode}")
    return json.loads(p.stdout.strip().splitlines()[-1]), None


def max_diff(dir_a, dir_b):
    worst = 0.0
    i = 0
    while os.path.exists(os.path.join(dir_a, f"output_{i}.npy")):
        a = np.load(os.path.join(dir_a, f"output_{i}.npy")).astype(np.float64)
        b = np.load(os.path.join(dir_b, f"output_{i}.npy")).astype(np.float64)
        if a.shape != b.shape:
            return float("nan")
        finite = np.isfinite(a) & np.isfinite(b)
        if not np.array_equal(np.isfinite(a), np.isfinite(b)):
            return float("inf")
        if finite.any():
            worst = max(worst, float(np.max(np.abs(a[finite] - b[finite]))))
        i += 1
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", help="build folder with bench/onnxamp_bench (default: $ONNXAMP_BUILD_DIR or build)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for both runtimes")
    ap.add_argument("--models", default="mlp4096,cnn,transformer")
    ap.add_argument("--dtypes", default="fp32,fp16")
    ap.add_argument("--batches", action="append", default=[], help="MODEL=B1,B2 (repeatable)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--max-seconds", type=float, default=10.0, help="time budget per measurement")
    ap.add_argument("--stat", choices=["median", "min"], default="median",
                    help="which time the table shows (min is steadier on a busy machine)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run both sides this many times in turn and report medians and the ratios' range")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--json", help="also write the results to this file")
    # Worker mode (internal): run ONNX Runtime on one model and print JSON.
    ap.add_argument("--ort-worker", dest="model", help=argparse.SUPPRESS)
    ap.add_argument("--input", action="append", default=[], help=argparse.SUPPRESS)
    ap.add_argument("--output-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.model:
        return ort_worker(args)

    build_dir = find_build_dir(args.build_dir, "bench/onnxamp_bench", "onnxamp_bench")
    bench_exe = os.path.join(build_dir, "bench", "onnxamp_bench")
    batches = dict(DEFAULT_BATCHES)
    for spec in args.batches:
        name, _, values = spec.partition("=")
        batches[name] = [int(v) for v in values.split(",") if v]
    common = ["--threads", str(args.threads), "--warmup", str(args.warmup), "--iters", str(args.iters),
              "--max-seconds", str(args.max_seconds)]

    rows = []
    for name in [m for m in args.models.split(",") if m]:
        for dtype in [d for d in args.dtypes.split(",") if d]:
            try:
                path = model_path(build_dir, name, dtype)
                if not os.path.exists(path):
                    raise FileNotFoundError(f"{path} does not exist")
            except (subprocess.CalledProcessError, OSError) as e:
                rows.append({"model": name, "dtype": dtype, "batch": "-", "error": f"model: {e}"})
                continue
            for batch in batches.get(name, [1]):
                with tempfile.TemporaryDirectory(prefix="onnxamp_bench_") as tmp:
                    out_a = os.path.join(tmp, "onnxamp")
                    out_o = os.path.join(tmp, "ort")
                    os.makedirs(out_a)
                    os.makedirs(out_o)
                    specs = make_inputs(path, name, batch, tmp)
                    inputs = [x for s in specs for x in ("--input", s)]
                    rounds = []
                    our_err = ort_err = None
                    for _ in range(max(1, args.rounds)):
                        ours, our_err = run_json([bench_exe, path, *inputs, *common, "--output-dir", out_a])
                        ort, ort_err = run_json([sys.executable, os.path.abspath(__file__), "--ort-worker", path,
                                                 *inputs, *common, "--output-dir", out_o])
                        if not (ours and ort):
                            break
                        rounds.append((ours, ort))
                    diff = max_diff(out_a, out_o) if rounds else None
                row = {"model": name, "dtype": dtype, "batch": batch,
                       "onnxamp": rounds[0][0] if rounds else None, "ort": rounds[0][1] if rounds else None,
                       "rounds": rounds, "onnxamp_error": our_err, "ort_error": ort_err, "max_abs_diff": diff}
                rows.append(row)
                print_row_progress(row)
    print_table(rows, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "cpu": cpu_name(), "load_average": os.getloadavg(), "rows": rows}, f,
                  indent=1)
    return 0


def print_row_progress(row):
    ours, ort = row["onnxamp"], row["ort"]
    a = f"{ours['median_ms']:.3f} ms" if ours else "n/a"
    b = f"{ort['median_ms']:.3f} ms" if ort else "n/a"
    print(f"  {row['model']} {row['dtype']} batch {row['batch']}: onnxamp {a}, ORT {b}", file=sys.stderr)


def print_table(rows, args):
    header = ["model", "dtype", "batch", "onnxamp ms", "ORT ms", "ratio", "onnxamp peak", "onnxamp RSS", "ORT RSS",
              "max abs diff"]
    table = []
    notes = []
    for r in rows:
        ours, ort = r.get("onnxamp"), r.get("ort")
        key = f"{args.stat}_ms"
        rounds = r.get("rounds") or []
        ratio, our_ms, ort_ms = "-", None, None
        if rounds:
            ratios = sorted(a[key] / b[key] for a, b in rounds)
            our_ms = float(np.median([a[key] for a, _ in rounds]))
            ort_ms = float(np.median([b[key] for _, b in rounds]))
            ratio = f"{float(np.median(ratios)):.2f}"
            if len(rounds) > 1:
                ratio += f" ({ratios[0]:.2f}-{ratios[-1]:.2f})"
        diff = r.get("max_abs_diff")
        table.append([
            r["model"], r["dtype"], str(r["batch"]),
            f"{our_ms:.3f}" if our_ms is not None else "n/a",
            f"{ort_ms:.3f}" if ort_ms is not None else "n/a",
            ratio,
            size(ours["peak_bytes"]) if ours else "-",
            size(ours["peak_rss_bytes"]) if ours else "-",
            size(ort["peak_rss_bytes"]) if ort else "-",
            f"{diff:.2e}" if diff is not None else "-",
        ])
        for who in ("onnxamp", "ort"):
            if r.get(f"{who}_error"):
                notes.append(f"{r['model']} {r['dtype']} batch {r['batch']}: {who}: {r[f'{who}_error']}")
        if r.get("error"):
            notes.append(f"{r['model']} {r['dtype']}: {r['error']}")
    rounds = f", {args.rounds} rounds in turn (median over rounds; ratio: median and range)" if args.rounds > 1 else ""
    print(f"CPU: {cpu_name()}, {args.threads} threads, {args.stat} of up to {args.iters} runs after {args.warmup} "
          f"warm-up runs{rounds}; ratio = onnxamp ms / ORT ms (below 1: onnxamp faster)")
    print_rows(header, table, args.markdown, notes, note_label="n/a")


if __name__ == "__main__":
    sys.exit(main())
