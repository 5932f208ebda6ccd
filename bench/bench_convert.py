#!/usr/bin/env python3
"""Conversion benchmark: `onnxamp convert` against onnxconverter-common's float16 converter, same models.

For each model (models/*.onnx, plus the large resnet50 and mlp100m when present in <build>/bench_models/, or
written there with --gen-large) it converts with:

  occ          onnxconverter-common convert_float_to_float16(model)
  occ-io       the same with keep_io_types=True
  occ-auto     onnxconverter-common auto_convert_mixed_precision(model, feeds, rtol, atol, keep_io_types=True)
               (only on --auto-models, default cnn and transformer; stopped after --auto-timeout seconds)
  onnxamp      onnxamp convert MODEL -o OUT
  onnxamp-io   onnxamp convert MODEL -o OUT --keep-io-types
  onnxamp-auto onnxamp convert MODEL -o OUT --keep-io-types --auto --data INPUTS.npz --rtol R --atol A

Every conversion runs in its own process under /usr/bin/time (GNU time), file to file: `time` is the wall time
from starting the process to the converted file written (onnxconverter-common: load + convert + save inside a
Python worker, without the interpreter start and imports; onnxamp: the whole process), `peak RSS` the process's
maximum resident set (GNU time's %M; the onnxconverter-common worker's includes Python, numpy and onnx, about
45 MiB), `RSS / size` that divided by the model file's size (shown for models of 10 MiB and more). Each small
conversion is repeated --repeat times and the fastest is shown (the machine may be busy).
Then the converted model is loaded in ONNX Runtime (CPU) and run on seeded inputs (cast to float16 where its
inputs are float16), and its outputs are compared with the FP32 model's outputs on the same values: `max abs
err` and `rel err` = max abs err / max |FP32 output|.

Usage: bench_convert.py [--build-dir DIR] [--models mlp,cnn,...] [--methods occ,onnxamp,...] [--gen-large]
                        [--repeat N] [--auto-timeout S] [--rtol R] [--atol A] [--markdown] [--json FILE]
Run with a Python that has numpy, onnx, onnxruntime and onnxconverter-common (scripts/setup_python.sh).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
from bench_util import ROOT, cpu_name, find_build_dir, print_rows, size

LARGE = ["resnet50", "mlp100m"]
METHODS = ["occ", "occ-io", "occ-auto", "onnxamp", "onnxamp-io", "onnxamp-auto"]
BATCH = {"resnet50": 1}  # symbolic batch dimension per model; 2 otherwise
INT_HIGH = 16  # token ids (transformer) drawn from [0, INT_HIGH)
TIME_BIN = "/usr/bin/time"


# ---------------------------------------------------------------- onnxconverter-common worker (own process)


def occ_worker(args):
    import onnx
    from onnxconverter_common import float16
    from onnxconverter_common.auto_mixed_precision import auto_convert_mixed_precision

    t0 = time.perf_counter()
    model = onnx.load(args.src)
    if args.worker == "occ-auto":
        data = np.load(args.data)
        feeds = {k: data[k] for k in data.files}
        # It prints every attempt; keep stdout for the JSON line.
        with open(os.devnull, "w") as devnull:
            saved = sys.stdout
            sys.stdout = devnull
            try:
                model = auto_convert_mixed_precision(model, feeds, rtol=args.rtol, atol=args.atol,
                                                     keep_io_types=True)
            finally:
                sys.stdout = saved
    else:
        model = float16.convert_float_to_float16(model, keep_io_types=args.keep_io)
    big = model.ByteSize() > 2**31 - 1 - 2**20
    onnx.save(model, args.dst, save_as_external_data=big)
    print(json.dumps({"seconds": time.perf_counter() - t0}))
    return 0


# ---------------------------------------------------------------- driver


def model_files(args, build_dir):
    """[(name, path)] of the models to convert, in order."""
    large_dir = os.path.join(build_dir, "bench_models")
    if args.gen_large:
        os.makedirs(large_dir, exist_ok=True)
        gen = os.path.join(build_dir, "tools", "onnxamp_gen_models")
        for name in LARGE:
            if not os.path.exists(os.path.join(large_dir, name + ".onnx")):
                p = subprocess.run([gen, large_dir, "--only", name], capture_output=True, text=True)
                if p.returncode != 0:
                    print(f"warning: onnxamp_gen_models --only {name}: {p.stderr.strip()}", file=sys.stderr)
    found = [(os.path.splitext(os.path.basename(p))[0], os.path.join(ROOT, "models", p))
             for p in sorted(os.listdir(os.path.join(ROOT, "models"))) if p.endswith(".onnx")]
    found += [(n, os.path.join(large_dir, n + ".onnx")) for n in LARGE
              if os.path.exists(os.path.join(large_dir, n + ".onnx"))]
    if args.models:
        wanted = args.models.split(",")
        found = [m for m in found if m[0] in wanted]
    return found


def make_feeds(model_path, name):
    import onnx

    m = onnx.load(model_path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    rng = np.random.default_rng(1234)
    feeds = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else BATCH.get(name, 2) for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(dtype, np.integer):
            feeds[vi.name] = rng.integers(0, INT_HIGH, size=shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def timed(cmd, timeout):
    """Runs cmd under GNU time: (returncode, wall seconds, peak RSS bytes or None, stdout, stderr)."""
    with tempfile.NamedTemporaryFile(prefix="onnxamp_time_", suffix=".txt") as tf:
        full = [TIME_BIN, "-f", "%M", "-o", tf.name, *cmd] if os.access(TIME_BIN, os.X_OK) else cmd
        t0 = time.perf_counter()
        try:
            p = subprocess.run(full, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, time.perf_counter() - t0, None, "", f"stopped after {timeout:.0f} s"
        wall = time.perf_counter() - t0
        rss = None
        try:
            lines = open(tf.name).read().split()
            rss = int(lines[-1]) * 1024 if lines else None
        except (OSError, ValueError):
            pass
    return p.returncode, wall, rss, p.stdout, p.stderr


def last_line(text):
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return lines[-1][:200] if lines else ""


def convert(method, args, onnxamp, src, dst, npz):
    """One conversion: {"seconds", "rss", "error"}."""
    if method.startswith("occ"):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "occ-auto" if method == "occ-auto" else "occ",
               "--src", src, "--dst", dst, "--data", npz, "--rtol", str(args.rtol), "--atol", str(args.atol)]
        if method == "occ-io":
            cmd.append("--keep-io")
    else:
        cmd = [onnxamp, "convert", src, "-o", dst]
        if method != "onnxamp":
            cmd.append("--keep-io-types")
        if method == "onnxamp-auto":
            cmd += ["--auto", "--data", npz, "--rtol", str(args.rtol), "--atol", str(args.atol)]
    timeout = args.auto_timeout if method.endswith("auto") else args.timeout
    rc, wall, rss, out, err = timed(cmd, timeout)
    if rc is None:
        return {"seconds": wall, "rss": None, "error": err}
    if rc != 0:
        return {"seconds": wall, "rss": rss, "error": f"exit {rc}: {last_line(err) or last_line(out)}"}
    seconds = wall
    if method.startswith("occ"):
        try:
            seconds = json.loads(out.strip().splitlines()[-1])["seconds"]
        except (ValueError, KeyError, IndexError):
            pass
    return {"seconds": seconds, "rss": rss, "error": None}


def count_casts(path):
    import onnx

    m = onnx.load(path, load_external_data=False)

    def walk(g):
        n = 0
        for node in g.node:
            n += node.op_type == "Cast"
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    n += walk(a.g)
                for sub in a.graphs:
                    n += walk(sub)
        return n

    return walk(m.graph)


def session(path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def evaluate(path, feeds, ref_sess, ref_cache):
    """(ORT loads: bool, note, max abs err, rel err) of a converted model against the FP32 model."""
    try:
        sess = session(path)
    except Exception as e:  # noqa: BLE001 - reported in the table
        return False, last_line(str(e)), None, None
    conv = {}
    for arg in sess.get_inputs():
        v = feeds[arg.name]
        conv[arg.name] = v.astype(np.float16) if arg.type == "tensor(float16)" and v.dtype == np.float32 else v
    try:
        got = sess.run(None, conv)
    except Exception as e:  # noqa: BLE001
        return True, "run: " + last_line(str(e)), None, None
    key = tuple(sorted((k, str(v.dtype)) for k, v in conv.items()))
    if key not in ref_cache:
        ref_cache[key] = ref_sess.run(None, {k: v.astype(feeds[k].dtype) for k, v in conv.items()})
    worst, scale = 0.0, 0.0
    for r, g in zip(ref_cache[key], got):
        r, g = np.asarray(r, np.float64), np.asarray(g, np.float64)
        if not np.array_equal(np.isfinite(r), np.isfinite(g)):
            return True, "NaN/inf where FP32 is finite", float("inf"), float("inf")
        fin = np.isfinite(r)
        if fin.any():
            worst = max(worst, float(np.max(np.abs(r[fin] - g[fin]))))
            scale = max(scale, float(np.max(np.abs(r[fin]))))
    return True, "", worst, worst / scale if scale > 0 else 0.0


def model_bytes(path):
    """The model's size on disk, external data files included."""
    total = os.path.getsize(path)
    base = os.path.splitext(path)[0]
    folder = os.path.dirname(path)
    for f in os.listdir(folder):
        full = os.path.join(folder, f)
        if f.startswith(os.path.basename(base)) and f != os.path.basename(path) and not f.endswith(".onnx"):
            if re.search(r"\.(data|bin|weights)$", f):
                total += os.path.getsize(full)
    return total


def print_table(rows, args):
    header = ["model", "size", "method", "time s", "peak RSS", "RSS / size", "Casts", "ORT loads", "max abs err",
              "rel err"]
    table, notes = [], []
    for r in rows:
        if r.get("error"):
            table.append([r["model"], size(r["bytes"]), r["method"], f"{r['seconds']:.2f}" if r["seconds"] else "-",
                          size(r["rss"]), "-", "-", "-", "-", "-"])
            notes.append(f"{r['model']} {r['method']}: {r['error']}")
            continue
        table.append([
            r["model"], size(r["bytes"]), r["method"], f"{r['seconds']:.3f}", size(r["rss"]),
            f"{r['rss'] / r['bytes']:.2f}" if r["rss"] and r["bytes"] >= 10 * 2**20 else "-",
            str(r["casts"]), "yes" if r["ort_loads"] else "no",
            f"{r['max_abs']:.1e}" if r["max_abs"] is not None else "-",
            f"{r['rel']:.1e}" if r["rel"] is not None else "-",
        ])
        if r.get("note"):
            notes.append(f"{r['model']} {r['method']}: {r['note']}")
    print(f"CPU: {cpu_name()}, {os.cpu_count()} hardware threads, load average {os.getloadavg()[0]:.1f} at the end; "
          f"time = fastest of {args.repeat} file-to-file conversions (large models: 1)")
    print_rows(header, table, args.markdown, notes, right_from=3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", help="build folder with tools/onnxamp (default: $ONNXAMP_BUILD_DIR or build)")
    ap.add_argument("--models", help="comma-separated names (default: every model found)")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    ap.add_argument("--auto-models", default="cnn,transformer", help="models occ-auto runs on")
    ap.add_argument("--gen-large", action="store_true", help="write resnet50 and mlp100m into <build>/bench_models")
    ap.add_argument("--repeat", type=int, default=3, help="conversions per small model (the fastest is shown)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per conversion")
    ap.add_argument("--auto-timeout", type=float, default=300, help="seconds per auto conversion")
    ap.add_argument("--rtol", type=float, default=1e-2, help="auto modes: relative tolerance")
    ap.add_argument("--atol", type=float, default=1e-3, help="auto modes: absolute tolerance")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--json", help="also write the results to this file")
    # Worker mode (internal): one onnxconverter-common conversion, prints JSON.
    ap.add_argument("--worker", choices=["occ", "occ-auto"], help=argparse.SUPPRESS)
    ap.add_argument("--src", help=argparse.SUPPRESS)
    ap.add_argument("--dst", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--keep-io", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return occ_worker(args)

    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        ap.error(f"--methods: unknown {','.join(unknown)} (known: {','.join(METHODS)})")
    if any(m.startswith("onnxamp") for m in methods):
        build_dir = find_build_dir(args.build_dir, "tools/onnxamp", "onnxamp")
    else:  # the peer alone: the build folder only holds the large models
        build_dir = os.path.join(ROOT, args.build_dir or os.environ.get("ONNXAMP_BUILD_DIR", "build"))
    onnxamp = os.path.join(build_dir, "tools", "onnxamp")
    auto_models = set(args.auto_models.split(","))
    rows = []
    for name, path in model_files(args, build_dir):
        nbytes = model_bytes(path)
        large = nbytes > 50 * 2**20
        feeds = make_feeds(path, name)
        ref_sess = session(path)
        ref_cache = {tuple(sorted((k, str(v.dtype)) for k, v in feeds.items())): ref_sess.run(None, feeds)}
        with tempfile.TemporaryDirectory(prefix="onnxamp_bench_convert_") as tmp:
            npz = os.path.join(tmp, "inputs.npz")
            np.savez(npz, **feeds)
            for method in methods:
                if method == "occ-auto" and name not in auto_models:
                    continue
                dst = os.path.join(tmp, f"{name}.{method}.onnx")
                best = None
                for _ in range(1 if large or method.endswith("auto") else max(1, args.repeat)):
                    res = convert(method, args, onnxamp, path, dst, npz)
                    if res["error"]:
                        best = res
                        break
                    if best is None or res["seconds"] < best["seconds"]:
                        best = res
                row = {"model": name, "bytes": nbytes, "method": method, **best}
                if not best["error"]:
                    row["casts"] = count_casts(dst)
                    row["ort_loads"], row["note"], row["max_abs"], row["rel"] = evaluate(dst, feeds, ref_sess,
                                                                                         ref_cache)
                rows.append(row)
                err = row.get("error") or row.get("note") or ""
                print(f"  {name} {method}: {row['seconds']:.3f} s, RSS {size(row['rss'])} {err}", file=sys.stderr)
                for f in os.listdir(tmp):
                    if f.startswith(f"{name}.{method}."):
                        os.remove(os.path.join(tmp, f))
        del ref_sess, ref_cache
    print_table(rows, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu_name(), "load_average": os.getloadavg(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
