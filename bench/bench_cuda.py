#!/usr/bin/env python3
"""GPU inference benchmark: the onnxamp CUDA backend against PyTorch on the same GPU, same ONNX graph, same inputs.

For each model (mlp4096 at batch 512, cnn, transformer), dtype (fp32; fp16 = every weight, value and I/O in
float16, written by make_fp16.py, or with --fp16-from convert the output of `onnxamp convert`, which keeps
Softmax/LayerNorm/... in FP32 behind Casts) and batch, in one invocation:

  onnxamp   bench/onnxamp_bench --device cuda, after warm-up runs, in two phases. Resident: the inputs are uploaded
            once and Session::Run leaves the outputs on the device (RunOptions::outputs_on_device), so `onnxamp ms` is
            the session's own CUDA-event time of one run (RunStats::device_seconds) with no copy in it, and `onnxamp
            wall ms` the host time of that Run (launches and the final synchronisation included). End to end: `onnxamp
            e2e ms` = host time of Session::Run from numpy-loaded host inputs to host outputs (uploads staged through
            page-locked memory, outputs downloaded into cached page-locked buffers). `onnxamp peak` is the device
            memory the session held at most during a run.
  torch     the same ONNX graph run by onnx_torch.py (a node-by-node ONNX-to-torch interpreter, weights from the
            initializers) in a worker process: eager, then torch.compile of it (a failure is reported, not fatal).
            `torch ms` / `compile ms` = CUDA-event time of one forward pass on device-resident inputs (no copies);
            `torch e2e ms` = host wall time from numpy inputs to numpy outputs (`torch.from_numpy(a).to("cuda")`
            copies from pageable memory through the driver's staging; `.cpu()` downloads into fresh pageable memory);
            `torch copy ms` = CUDA-event time of those copies alone, for reference; `torch peak` =
            torch.cuda.max_memory_allocated() during the runs, weights and inputs included.

Ratios (below 1: onnxamp faster), each between the same work on both sides: `ratio` = onnxamp ms / torch ms (device
time of the forward pass on resident inputs), `ratio compile` the same against the compiled forward pass, `ratio
e2e` = onnxamp e2e ms / torch e2e ms. Both runtimes get the same .npy inputs; `max abs diff` compares onnxamp's
outputs with torch eager's. For mlp4096 fp16 the script also times torch.matmul at the layers' shape (512x4096 @
4096x4096, fp16, cuBLAS) and prints the fraction of that GEMM rate each side reaches over the whole model (its GEMM
FLOPs / device ms); a rate above the measured cuBLAS rate is flagged as a measuring error. --profile passes
--profile to onnxamp_bench and prints the time of onnxamp's nodes by op type under the table. TF32 is off on both
sides unless --tf32 (which sets ONNXAMP_CUDA_TF32=1 for onnxamp and allow_tf32 for PyTorch); cudnn.benchmark is on.

Usage: bench_cuda.py [--build-dir DIR | --bin-dir DIR] [--models mlp4096,cnn,transformer] [--dtypes fp32,fp16]
                     [--fp16-from make_fp16|convert] [--batches mlp4096=512 --batches cnn=1,64 ...] [--iters N]
                     [--warmup N] [--max-seconds S] [--no-compile] [--compile-mode MODE] [--compile-timeout S]
                     [--tf32] [--profile] [--work-dir DIR] [--markdown] [--json FILE]
Run with a Python that has numpy, onnx and a CUDA build of PyTorch (the GPU machine's python3).
Exit status: 0 done, 77 skipped (no torch or onnx, or torch sees no CUDA device), 1 an error.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from bench_inference import make_inputs, max_diff, run_json
from bench_util import ROOT, print_rows, size

DEFAULT_BATCHES = {"mlp4096": [512], "cnn": [64], "transformer": [16]}
GEMM_SHAPE = (512, 4096, 4096)  # M, K, N of mlp4096's layers at batch 512


# ---------------------------------------------------------------- torch worker (a separate process)


def _emit(obj):
    print(json.dumps(obj), flush=True)


def _time_forward(torch, fn, inputs, warmup, iters, max_seconds):
    """CUDA-event times (ms) of single forward passes on device-resident inputs, after `warmup` untimed ones."""
    out = None
    start = time.perf_counter()
    for _ in range(warmup):
        out = fn(*inputs)
        if time.perf_counter() - start > max_seconds / 2:
            break
    torch.cuda.synchronize()
    times = []
    start = time.perf_counter()
    for _ in range(iters):
        b = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        b.record()
        out = fn(*inputs)
        e.record()
        e.synchronize()
        times.append(b.elapsed_time(e))
        if time.perf_counter() - start > max_seconds:
            break
    return times, out


def _time_end_to_end(torch, fn, host_inputs, device, iters, max_seconds):
    """Host wall times (ms) from numpy inputs to numpy outputs, as onnxamp's Session::Run does."""
    times = []
    start = time.perf_counter()
    for _ in range(max(3, iters // 2)):
        t = time.perf_counter()
        xs = [torch.from_numpy(a).to(device) for a in host_inputs]
        outs = [o.cpu().numpy() for o in fn(*xs)]
        times.append((time.perf_counter() - t) * 1000)
        if time.perf_counter() - start > max_seconds / 2:
            break
    del outs
    return times


def _stats(times):
    return {"iters": len(times), "median_ms": float(np.median(times)), "min_ms": float(min(times))}


def torch_worker(args):
    import torch

    import onnx_torch

    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cudnn.benchmark = True
    host_inputs = []
    for spec in args.input:
        _, path = spec.split("=", 1)
        host_inputs.append(np.load(path))
    t0 = time.perf_counter()
    module = onnx_torch.load(args.model, device="cuda").eval()
    load_s = time.perf_counter() - t0
    inputs = [torch.from_numpy(a).to(device) for a in host_inputs]
    torch.cuda.synchronize()
    common = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(device), "load_s": load_s}

    def measure(kind, fn):
        torch.cuda.synchronize()
        baseline = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        t = time.perf_counter()
        with torch.inference_mode():
            first = fn(*inputs)
            torch.cuda.synchronize()
            first_s = time.perf_counter() - t
            times, outs = _time_forward(torch, fn, inputs, args.warmup, args.iters, args.max_seconds)
            e2e = _time_end_to_end(torch, fn, host_inputs, device, args.iters, args.max_seconds)
        del first
        row = {"kind": kind, **common, **_stats(times), "first_s": first_s,
               "e2e_median_ms": float(np.median(e2e)), "peak_bytes": torch.cuda.max_memory_allocated(),
               "run_peak_bytes": torch.cuda.max_memory_allocated() - baseline}
        return row, outs

    row, outs = measure("eager", module)
    # The copies onnxamp's device time includes: inputs up from (pageable) numpy arrays, outputs back down.
    copy_times = []
    for _ in range(10):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        xs = [torch.from_numpy(a).to(device) for a in host_inputs]
        back = [o.cpu() for o in outs]
        e.record()
        e.synchronize()
        copy_times.append(s.elapsed_time(e))
    del xs, back
    row["copy_ms"] = float(np.median(copy_times))
    if args.output_dir:
        for i, o in enumerate(outs):
            o = o.detach()
            np.save(os.path.join(args.output_dir, f"output_{i}.npy"),
                    (o.float() if o.dtype == torch.bfloat16 else o).cpu().numpy())
    _emit(row)

    if args.gemm:
        m, k, n = (int(v) for v in args.gemm.split(","))
        dt = torch.float16
        a = torch.randn(m, k, device=device, dtype=dt)  # random data: zeros run faster than real data
        b = torch.randn(k, n, device=device, dtype=dt)
        for _ in range(10):
            torch.matmul(a, b)
        reps = 50
        times = []
        for _ in range(5):
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(reps):
                torch.matmul(a, b)
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / reps)
        ms = float(np.median(times))
        _emit({"kind": "gemm", "shape": [m, k, n], "dtype": "fp16", "ms": ms, "tflops": 2.0 * m * k * n / ms / 1e9})

    if args.compile:
        try:
            compiled = torch.compile(module, mode=None if args.compile_mode == "default" else args.compile_mode)
            row, _ = measure("compile", compiled)
            row["compile_s"] = row.pop("first_s")
            _emit(row)
        except Exception as e:  # noqa: BLE001 - any failure of torch.compile is a result to report
            msg = str(e).strip().splitlines()
            _emit({"kind": "compile", "error": f"{type(e).__name__}: {msg[0] if msg else ''}"[:300]})
    return 0


# ---------------------------------------------------------------- driver


def model_path(bin_dir, work_dir, name, dtype, fp16_from):
    """The model file for `name` in `dtype`: models/NAME.onnx, mlp4096 written by onnxamp_gen_models, FP16 variants
    written next to them in `work_dir` (make_fp16.py, or `onnxamp convert`)."""
    os.makedirs(work_dir, exist_ok=True)
    if name == "mlp4096":
        fp32 = os.path.join(work_dir, "mlp4096.onnx")
        if not os.path.exists(fp32):
            subprocess.run([bin_dir["gen"], work_dir, "--only", "mlp4096"], check=True, stdout=subprocess.DEVNULL)
    else:
        fp32 = os.path.join(ROOT, "models", name + ".onnx")
    if dtype == "fp32":
        return fp32
    out = os.path.join(work_dir, f"{name}.{fp16_from}.fp16.onnx")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(fp32):
        if fp16_from == "convert":
            subprocess.run([bin_dir["onnxamp"], "convert", fp32, "-o", out], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        else:
            subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_fp16.py"), fp32, out], check=True)
    return out


def gemm_flops(path, batch):
    """FLOPs of the model's Gemm/MatMul nodes whose second operand is a 2-D initializer and whose first operand has
    `batch` rows (2 * M * K * N each); other nodes are not counted."""
    import onnx

    m = onnx.load(path, load_external_data=False)
    shapes = {t.name: list(t.dims) for t in m.graph.initializer}
    flops = 0
    for node in m.graph.node:
        if node.op_type not in ("Gemm", "MatMul") or len(node.input) < 2 or node.input[1] not in shapes:
            continue
        w = shapes[node.input[1]]
        if len(w) != 2:
            continue
        trans_b = any(a.name == "transB" and a.i for a in node.attribute)
        k, n = (w[1], w[0]) if trans_b else (w[0], w[1])
        flops += 2 * batch * k * n
    return flops


def run_torch(args, path, inputs, out_dir, gemm):
    """Runs the torch worker; returns {kind: row} and an error line. A worker that runs past --compile-timeout
    keeps what it printed before (eager first)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", path, *inputs, "--output-dir", out_dir,
           "--iters", str(args.iters), "--warmup", str(args.warmup), "--max-seconds", str(args.max_seconds),
           "--compile-mode", args.compile_mode]
    if not args.no_compile:
        cmd.append("--compile")
    if args.tf32:
        cmd.append("--tf32")
    if gemm:
        cmd += ["--gemm", ",".join(str(v) for v in GEMM_SHAPE)]
    err = None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.compile_timeout)
        out, rc, stderr = p.stdout, p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc, stderr = None, ""
        err = f"worker stopped after {args.compile_timeout:.0f} s"
    rows = {}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                row = json.loads(line)
                rows[row["kind"]] = row
            except (json.JSONDecodeError, KeyError):
                pass
    if rc not in (0, None) and err is None:
        lines = stderr.strip().splitlines()
        err = lines[-1] if lines else f"exit {rc}"
    if err and "compile" not in rows and not args.no_compile:
        rows["compile"] = {"kind": "compile", "error": err}
    return rows, (err if "eager" not in rows else None)


def find_binaries(args):
    """onnxamp_bench, onnxamp_gen_models and onnxamp: from --bin-dir (a bundle's bin/), else the build folder."""
    if args.bin_dir:
        d = os.path.abspath(args.bin_dir)
        found = {"bench": os.path.join(d, "onnxamp_bench"), "gen": os.path.join(d, "onnxamp_gen_models"),
                 "onnxamp": os.path.join(d, "onnxamp")}
    else:
        from bench_util import find_build_dir

        d = find_build_dir(args.build_dir, "bench/onnxamp_bench", "onnxamp_bench")
        found = {"bench": os.path.join(d, "bench", "onnxamp_bench"),
                 "gen": os.path.join(d, "tools", "onnxamp_gen_models"), "onnxamp": os.path.join(d, "tools", "onnxamp")}
    if not os.path.exists(found["bench"]):
        sys.exit(f"error: {found['bench']} not found")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", help="build folder with bench/onnxamp_bench (default: $ONNXAMP_BUILD_DIR or build)")
    ap.add_argument("--bin-dir", help="folder holding onnxamp_bench, onnxamp_gen_models and onnxamp (a bundle's bin/)")
    ap.add_argument("--models", default="mlp4096,cnn,transformer")
    ap.add_argument("--dtypes", default="fp32,fp16")
    ap.add_argument("--fp16-from", choices=["make_fp16", "convert"], default="make_fp16",
                    help="how the FP16 models are made: make_fp16.py (all float16) or `onnxamp convert`")
    ap.add_argument("--batches", action="append", default=[], help="MODEL=B1,B2 (repeatable)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=10.0, help="time budget per measurement")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--compile-mode", default="default", help="torch.compile mode (default, reduce-overhead, ...)")
    ap.add_argument("--compile-timeout", type=float, default=150.0, help="seconds for one torch worker")
    ap.add_argument("--tf32", action="store_true", help="let PyTorch use TF32 for FP32 matmul and convolution")
    ap.add_argument("--profile", action="store_true", help="time onnxamp's nodes too (onnxamp_bench --profile)")
    ap.add_argument("--work-dir", help="folder for generated models (default: <build>/bench_models or a temp folder)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--json", help="also write the results to this file")
    # Worker mode (internal): run the graph in PyTorch and print JSON lines.
    ap.add_argument("--torch-worker", dest="model", help=argparse.SUPPRESS)
    ap.add_argument("--input", action="append", default=[], help=argparse.SUPPRESS)
    ap.add_argument("--output-dir", help=argparse.SUPPRESS)
    ap.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--gemm", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.model:
        return torch_worker(args)

    try:
        import onnx  # noqa: F401
        import torch
    except ImportError as e:
        print(f"skipped: the GPU benchmark needs numpy, onnx and torch in {sys.executable} ({e})")
        return 77
    if not torch.cuda.is_available():
        print(f"skipped: torch {torch.__version__} sees no CUDA device")
        return 77
    if args.tf32:
        os.environ["ONNXAMP_CUDA_TF32"] = "1"  # read by onnxamp's GEMM and convolution kernels
    bins = find_binaries(args)
    work_dir = args.work_dir or (os.path.join(os.path.dirname(os.path.dirname(bins["bench"])), "bench_models")
                                 if not args.bin_dir else tempfile.mkdtemp(prefix="onnxamp_bench_cuda_"))
    batches = dict(DEFAULT_BATCHES)
    for spec in args.batches:
        name, _, values = spec.partition("=")
        batches[name] = [int(v) for v in values.split(",") if v]
    common = ["--device", "cuda", "--warmup", str(args.warmup), "--iters", str(args.iters), "--max-seconds",
              str(args.max_seconds)] + (["--profile"] if args.profile else [])

    rows = []

    def write_json(complete):
        # After every row too: a run stopped from outside (a step's time limit) keeps the rows it measured.
        if args.json:
            tmp = args.json + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"rows": rows, "tf32": args.tf32, "fp16_from": args.fp16_from, "complete": complete}, f,
                          indent=1)
            os.replace(tmp, args.json)

    for name in [m for m in args.models.split(",") if m]:
        for dtype in [d for d in args.dtypes.split(",") if d]:
            try:
                path = model_path(bins, work_dir, name, dtype, args.fp16_from)
            except (subprocess.CalledProcessError, OSError) as e:
                rows.append({"model": name, "dtype": dtype, "batch": "-", "error": f"model: {e}"})
                write_json(False)
                continue
            for batch in batches.get(name, [1]):
                with tempfile.TemporaryDirectory(prefix="onnxamp_bench_cuda_") as tmp:
                    out_a = os.path.join(tmp, "onnxamp")
                    out_t = os.path.join(tmp, "torch")
                    os.makedirs(out_a)
                    os.makedirs(out_t)
                    specs = make_inputs(path, name, batch, tmp)
                    inputs = [x for s in specs for x in ("--input", s)]
                    ours, our_err = run_json([bins["bench"], path, *inputs, *common, "--output-dir", out_a])
                    gemm = name == "mlp4096" and dtype == "fp16" and batch == GEMM_SHAPE[0]
                    torch_rows, torch_err = run_torch(args, path, inputs, out_t, gemm)
                    diff = max_diff(out_a, out_t) if ours and "eager" in torch_rows else None
                row = {"model": name, "dtype": dtype, "batch": batch, "onnxamp": ours, "onnxamp_error": our_err,
                       "torch": torch_rows.get("eager"), "compile": torch_rows.get("compile"),
                       "gemm": torch_rows.get("gemm"), "torch_error": torch_err, "max_abs_diff": diff,
                       "gemm_flops": gemm_flops(path, batch) if name == "mlp4096" else None}
                rows.append(row)
                print_row_progress(row)
                write_json(False)
    print_table(rows, args)
    write_json(True)
    return 0


def _ms(row, key="median_ms"):
    return f"{row[key]:.3f}" if row and key in row else "n/a"


def print_row_progress(row):
    ours, t = row.get("onnxamp"), row.get("torch")
    print(f"  {row['model']} {row['dtype']} batch {row['batch']}: onnxamp {_ms(ours, 'resident_device_median_ms')} ms, "
          f"torch {_ms(t)} ms", file=sys.stderr)


def profile_notes(where, ours, top=8):
    """onnxamp's node times (--profile) summed by op type: the most expensive ops of one run."""
    by_op = {}
    for n in (ours or {}).get("profile", []):
        if n.get("within"):
            continue  # a subgraph's node: its time is inside its enclosing node's
        total = by_op.setdefault(n["op"], [0, 0.0])
        total[0] += 1
        total[1] += n["ms"]
    if not by_op:
        return []
    whole = sum(v[1] for v in by_op.values())
    parts = [f"{op} x{c} {ms:.3f} ms ({ms / whole:.0%})"
             for op, (c, ms) in sorted(by_op.items(), key=lambda kv: -kv[1][1])[:top]]
    return [f"{where}: onnxamp profile, {whole:.3f} ms in nodes: " + ", ".join(parts)]


def _ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"


def print_table(rows, args):
    header = ["model", "dtype", "batch", "onnxamp ms", "torch ms", "compile ms", "ratio", "ratio compile",
              "onnxamp wall ms", "onnxamp e2e ms", "torch e2e ms", "ratio e2e", "torch copy ms", "onnxamp peak",
              "torch peak", "CPU nodes", "max abs diff"]
    table, notes = [], []
    gpu = None
    for r in rows:
        ours, t, c = r.get("onnxamp"), r.get("torch"), r.get("compile")
        c = c if c and "median_ms" in c else None
        gpu = gpu or (t or {}).get("gpu")
        compute = ours.get("resident_device_median_ms") if ours else None
        diff = r.get("max_abs_diff")
        table.append([
            r["model"], r["dtype"], str(r["batch"]), _ms(ours, "resident_device_median_ms"), _ms(t),
            _ms(c) if c else ("failed" if r.get("compile") else "-"),
            _ratio(compute, t["median_ms"] if t else None), _ratio(compute, c["median_ms"] if c else None),
            _ms(ours, "resident_median_ms"), _ms(ours), _ms(t, "e2e_median_ms"),
            _ratio(ours["median_ms"] if ours else None, t["e2e_median_ms"] if t else None), _ms(t, "copy_ms"),
            size(ours.get("device_peak_bytes")) if ours else "-", size(t["peak_bytes"]) if t else "-",
            str(ours.get("cpu_nodes", "-")) if ours else "-", f"{diff:.2e}" if diff is not None else "-",
        ])
        where = f"{r['model']} {r['dtype']} batch {r['batch']}"
        if r.get("onnxamp_error"):
            notes.append(f"{where}: onnxamp: {r['onnxamp_error']}")
        if r.get("torch_error"):
            notes.append(f"{where}: torch: {r['torch_error']}")
        if r.get("compile") and r["compile"].get("error"):
            notes.append(f"{where}: torch.compile: {r['compile']['error']}")
        if r.get("error"):
            notes.append(f"{r['model']} {r['dtype']}: {r['error']}")
        if ours and ours.get("cpu_nodes"):
            notes.append(f"{where}: onnxamp placement: {ours.get('placement')}")
        g = r.get("gemm")
        if g and compute and compute > 0 and r.get("gemm_flops"):
            ours_rate = r["gemm_flops"] / compute / 1e9
            torch_rate = r["gemm_flops"] / t["median_ms"] / 1e9
            notes.append(
                f"{where}: cuBLAS FP16 GEMM {g['shape'][0]}x{g['shape'][1]} @ {g['shape'][1]}x{g['shape'][2]} "
                f"(torch.matmul): {g['ms']:.4f} ms = {g['tflops']:.0f} TFLOP/s; the model's "
                f"{r['gemm_flops'] / 1e9:.1f} GFLOP of GEMMs run at {ours_rate:.0f} TFLOP/s in onnxamp "
                f"= {ours_rate / g['tflops']:.0%} of that rate; torch eager {torch_rate:.0f} TFLOP/s = "
                f"{torch_rate / g['tflops']:.0%}")
            for who, rate in (("onnxamp", ours_rate), ("torch", torch_rate)):
                if rate > 1.05 * g["tflops"]:
                    notes.append(f"{where}: {who}'s rate exceeds the measured cuBLAS GEMM rate: a measuring error")
        notes.extend(profile_notes(where, ours))
    print(f"GPU: {gpu or 'unknown'}; median of up to {args.iters} runs after {args.warmup} warm-up runs; "
          f"FP16 models from {args.fp16_from}; TF32 {'on' if args.tf32 else 'off'}; ratios below 1: onnxamp faster")
    print_rows(header, table, args.markdown, notes)


if __name__ == "__main__":
    sys.exit(main())
