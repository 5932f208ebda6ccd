#!/usr/bin/env python3
"""Peer tests of the mixed-precision converter: every converted model must pass the current ONNX checker, load in
ONNX Runtime and match the FP32 model's outputs within a tolerance.

Models: every models/*.onnx (seeded random inputs) and every ONNX backend test case under
/usr/share/libonnx-testdata/data/{node,pytorch-converted,pytorch-operator,simple} (its test_data_set_0 inputs)
that has a float32 graph input, initializer or Constant and that ONNX Runtime runs in FP32. Each is converted
three ways (the variants): `fp16`, `fp16-io` (fp16 with --keep-io-types) and `bf16-io` (bf16 with
--keep-io-types; ONNX Runtime's Python API cannot feed bfloat16 arrays). For each variant:

  (a) onnx.checker.check_model(full_check=True) on the converted model (a plain check where the original model
      already fails the full check under the current onnx);
  (b) ONNX Runtime (CPU) loads it;
  (c) it runs on the same inputs (cast to the converted model's input types) and its outputs are compared with
      the FP32 model's ONNX Runtime outputs on the same values (float16-rounded inputs widened back to float32):
      |got - fp32| <= atol + rtol * |fp32| (MODELS_TOL, SUITE_TOL, TOLERANCES below); NaN/inf where FP32 is
      finite always fails; integer and bool outputs must be equal, numeric strings agree as numbers.

A refusal of the converter that is a documented limit (UNSUPPORTED below) counts as a skip, by reason.

A bf16 variant that ONNX Runtime cannot load because its CPU provider has no bfloat16 kernel for an op is
skipped (ONNX Runtime inserts float32 Casts around float16 nodes that lack a CPU kernel, but not around
bfloat16 ones), after the checker has passed.

expected_failures.txt (next to this file) lists the variants expected to fail, one `<suite>/<test> <variant>
<reason>` per line; the run fails when a variant not listed fails or a listed one passes (--update-expected
rewrites the list, keeping known reasons).

Usage: peer_test.py [--onnxamp BIN | --converter onnxconverter-common] [--filter REGEX] [--variants fp16,...]
                    [--jobs N] [--brief] [--log FILE] [--expected FILE] [--update-expected] [--keep DIR]
Exit status: 0 all as expected, 1 a failure (or a listed failure that now passes), 2 usage error; 77 when the
Python peers (numpy, onnx, onnxruntime) are not importable.
"""
import argparse
import concurrent.futures
import glob
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
except ImportError as e:  # the peers are optional installs: scripts/setup_python.sh
    print(f"peer tests skipped: numpy/onnx not importable ({e}); run scripts/setup_python.sh")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUITE_ROOT = "/usr/share/libonnx-testdata/data"
SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]
VARIANTS = {  # name -> (target, keep_io_types)
    "fp16": ("fp16", False),
    "fp16-io": ("fp16", True),
    "bf16-io": ("bf16", True),
}
BATCH = 2  # symbolic dimensions of models/ inputs
INT_HIGH = 16  # integer inputs of models/ (token ids) are drawn from [0, INT_HIGH), below every vocabulary size

# Tolerances for fp16: (rtol, atol). models/ (classification-style outputs of a few layers) get the strict pair.
MODELS_TOL = (1e-2, 1e-3)
# Backend-suite cases: inputs of one op, mostly standard-normal data. The reference is the FP32 model on the
# float16-rounded inputs (see run_case), so the rounding of the test data does not count; what is left is the
# rounding of initializers, intermediate values and outputs, which the models/ pair covers. TOLERANCES can loosen
# single ops where rounding is inherently amplified (op type -> ((rtol, atol), why)); no op needs it today.
SUITE_TOL = (1e-2, 1e-3)
TOLERANCES = {}
# bfloat16 keeps 8 significant bits against float16's 11: its rounding error is 8 times larger.
BF16_SCALE = 8.0
# Converter refusals that are documented limits, not failures: a one-line error (exit 1) matching one of these
# makes the variant "unsupported" (counted with the skips, by reason).
UNSUPPORTED = [
    (re.compile(r"model opset (\d+) is below (\d+)"), "the converter refuses default-domain opsets below 7"),
    (re.compile(r"bfloat16 needs opset 13 and the model has opset \d+; "),
     "the converter refuses bf16 where an op changed before opset 13 and ONNX's version converter cannot rewrite it"),
]
# ONNX Runtime load errors of a bf16 model that passed the checker: its CPU provider has no bfloat16 kernel
# (for some ops it expands the ONNX function body instead, whose ops then refuse bfloat16).
ORT_NO_BF16 = [
    re.compile(r"Could not find an implementation for (\w+)\(\d+\)"),
    re.compile(r"Type 'tensor\(bfloat16\)' of input parameter \(\S+\) of operator \((\w+)\)"),
]
# Ops whose outputs are random or whose test data draw a random mask: two runs cannot be compared.
RANDOM_OPS = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli"}


# ---------------------------------------------------------------- model discovery (parent process)


def list_cases(args):
    """[(case id, model path, test data folder or None)] for models/ and the backend suites, filtered."""
    cases = []
    for path in sorted(glob.glob(os.path.join(args.models_dir, "*.onnx"))):
        cases.append(("models/" + os.path.splitext(os.path.basename(path))[0], path, None))
    for suite in SUITES:
        suite_dir = os.path.join(args.suite_root, suite)
        if not os.path.isdir(suite_dir):
            continue
        for name in sorted(os.listdir(suite_dir)):
            model = os.path.join(suite_dir, name, "model.onnx")
            if os.path.isfile(model):
                cases.append((f"{suite}/{name}", model, os.path.join(suite_dir, name, "test_data_set_0")))
    if args.filter:
        pattern = re.compile(args.filter)
        cases = [c for c in cases if pattern.search(c[0])]
    return cases


# ---------------------------------------------------------------- per-case work (worker processes)


def walk_graphs(graph):
    """The graph and every subgraph (If/Loop/Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from walk_graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from walk_graphs(g)


def has_float32(model):
    """True when the model has a float32 graph input, initializer or Constant value (subgraphs included)."""
    f32 = onnx.TensorProto.FLOAT
    if any(i.type.HasField("tensor_type") and i.type.tensor_type.elem_type == f32 for i in model.graph.input):
        return True
    for graph in walk_graphs(model.graph):
        if any(t.data_type == f32 for t in graph.initializer):
            return True
        for node in graph.node:
            if node.op_type == "Constant":
                for attr in node.attribute:
                    if attr.name == "value" and attr.t.data_type == f32 or attr.name in ("value_float", "value_floats"):
                        return True
    return False


def op_types(model):
    return sorted({n.op_type for g in walk_graphs(model.graph) for n in g.node})


def tolerance(case_id, ops, target):
    """(rtol, atol) for a case and target: the models/ pair, or the loosest TOLERANCES entry among its ops."""
    if case_id.startswith("models/"):
        rtol, atol = MODELS_TOL
    else:
        rtol, atol = SUITE_TOL
        for op in ops:
            if op in TOLERANCES:
                r, a = TOLERANCES[op][0]
                rtol, atol = max(rtol, r), max(atol, a)
    if target == "bf16":
        rtol, atol = rtol * BF16_SCALE, atol * BF16_SCALE
    return rtol, atol


def read_value(path, type_proto):
    """A test-data file as ONNX Runtime's Python API takes it: array, list of arrays (sequence) or None."""
    with open(path, "rb") as f:
        data = f.read()
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        t = onnx.TensorProto()
        t.ParseFromString(data)
        return numpy_helper.to_array(t)
    if which == "sequence_type":
        s = onnx.SequenceProto()
        s.ParseFromString(data)
        return numpy_helper.to_list(s)
    if which == "optional_type":
        o = onnx.OptionalProto()
        o.ParseFromString(data)
        return numpy_helper.to_optional(o)
    raise ValueError(f"{path}: input of type {which} is not supported by this harness")


def graph_inputs(model):
    """The graph inputs that are fed (those without an initializer), in order."""
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def load_case_inputs(model, data_dir):
    """{name: value} from data_dir/input_<i>.pb, matched to the fed graph inputs in order."""
    fed = graph_inputs(model)
    files = glob.glob(os.path.join(data_dir, "input_*.pb"))
    files.sort(key=lambda p: int(re.search(r"input_(\d+)\.pb$", p).group(1)))
    if len(files) > len(fed):
        raise ValueError(f"{data_dir}: {len(files)} input files for {len(fed)} graph inputs")
    return {fed[i].name: read_value(p, fed[i].type) for i, p in enumerate(files)}


def random_inputs(session, seed):
    """Seeded inputs for a models/ file: standard normal floats, integers in [0, INT_HIGH)."""
    rng = np.random.default_rng(seed)
    types = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64,
             "tensor(int32)": np.int32, "tensor(bool)": np.bool_}
    feeds = {}
    for arg in session.get_inputs():
        shape = [d if isinstance(d, int) else BATCH for d in arg.shape]
        dtype = types[arg.type]
        if dtype == np.bool_:
            feeds[arg.name] = rng.integers(0, 2, size=shape).astype(dtype)
        elif np.issubdtype(dtype, np.integer):
            feeds[arg.name] = rng.integers(0, INT_HIGH, size=shape).astype(dtype)
        else:
            feeds[arg.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def cast_value(value, type_proto):
    """Casts float32 arrays of `value` to the element type `type_proto` declares (float16 only: what a converted
    model without --keep-io-types takes)."""
    which = type_proto.WhichOneof("value") if type_proto is not None else None
    if value is None or which is None:
        return value
    if which == "tensor_type":
        if isinstance(value, np.ndarray) and value.dtype == np.float32:
            elem = type_proto.tensor_type.elem_type
            if elem == onnx.TensorProto.FLOAT16:
                return value.astype(np.float16)
            if elem == onnx.TensorProto.BFLOAT16:
                raise ValueError("ONNX Runtime's Python API cannot feed a bfloat16 input")
        return value
    if which == "sequence_type":
        return [cast_value(v, type_proto.sequence_type.elem_type) for v in value]
    if which == "optional_type":
        return cast_value(value, type_proto.optional_type.elem_type)
    return value


def widen(value, original):
    """`value` (a cast input) back in the dtypes of `original`: float16 arrays become float32 again."""
    if isinstance(value, list):
        return [widen(v, o) for v, o in zip(value, original)]
    if isinstance(value, np.ndarray) and isinstance(original, np.ndarray) and value.dtype != original.dtype:
        return value.astype(original.dtype)
    return value


def describe_dtypes(value):
    """A hashable description of the dtypes of an input value (array, list of arrays, None)."""
    if isinstance(value, list):
        return tuple(describe_dtypes(v) for v in value)
    return str(value.dtype) if isinstance(value, np.ndarray) else repr(type(value))


def first_line(text, limit=240):
    text = str(text).strip()
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[:limit] + "..."


def make_session(path_or_bytes):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 4  # load failures arrive as exceptions, reported per model
    return ort.InferenceSession(path_or_bytes, so, providers=["CPUExecutionProvider"])


def flatten_outputs(value):
    """An output (array, list of arrays, None) as a list of arrays (None stays None)."""
    if isinstance(value, list):
        out = []
        for v in value:
            out.extend(flatten_outputs(v))
        return out
    return [value]


def compare(ref_outputs, got_outputs, names, rtol, atol):
    """(ok, max_abs, max_rel, problem): the converted outputs against the FP32 ones. max_rel is taken where
    |fp32| > atol (below that the absolute bound governs)."""
    max_abs = 0.0
    max_rel = 0.0
    for name, ref_v, got_v in zip(names, ref_outputs, got_outputs):
        refs, gots = flatten_outputs(ref_v), flatten_outputs(got_v)
        if len(refs) != len(gots):
            return False, max_abs, max_rel, f"output '{name}': {len(gots)} tensors, FP32 has {len(refs)}"
        for ref, got in zip(refs, gots):
            if ref is None or got is None:
                if (ref is None) != (got is None):
                    return False, max_abs, max_rel, f"output '{name}': optional presence differs from FP32"
                continue
            ref, got = np.asarray(ref), np.asarray(got)
            if ref.shape != got.shape:
                return False, max_abs, max_rel, f"output '{name}': shape {list(got.shape)}, FP32 {list(ref.shape)}"
            if ref.dtype.kind in "OUS":  # strings: numbers (Cast to STRING) compare as numbers, others exactly
                try:
                    ref, got = ref.astype(np.float64), got.astype(np.float64)
                except (TypeError, ValueError):
                    pass
            if ref.dtype.kind != "f":
                if not np.array_equal(ref, got):
                    n = int(np.sum(ref != got))
                    return False, max_abs, max_rel, f"output '{name}' ({ref.dtype}): {n} of {ref.size} values differ"
                continue
            r = ref.astype(np.float64)
            g = got.astype(np.float64)
            r_fin, g_fin = np.isfinite(r), np.isfinite(g)
            bad = r_fin & ~g_fin
            if bad.any():
                i = int(np.flatnonzero(bad.ravel())[0])
                return (False, max_abs, max_rel, f"output '{name}': {int(bad.sum())} NaN/inf where FP32 is finite "
                        f"(first at flat index {i}: got {g.ravel()[i]}, FP32 {r.ravel()[i]})")
            nonfin = ~r_fin
            if nonfin.any():
                same = (np.isnan(r) & np.isnan(g)) | (r == g)
                if not same[nonfin].all():
                    return False, max_abs, max_rel, f"output '{name}': a NaN/inf of FP32 differs in the converted model"
            both = r_fin & g_fin
            if not both.any():
                continue
            diff = np.abs(g[both] - r[both])
            mag = np.abs(r[both])
            max_abs = max(max_abs, float(diff.max()))
            big = mag > atol
            if big.any():
                max_rel = max(max_rel, float((diff[big] / mag[big]).max()))
            over = diff > atol + rtol * mag
            if over.any():
                j = int(np.argmax(diff - (atol + rtol * mag)))
                return (False, max_abs, max_rel, f"output '{name}': {int(over.sum())} of {diff.size} values out of "
                        f"tolerance (worst: got {g[both][j]:.6g}, FP32 {r[both][j]:.6g})")
    return True, max_abs, max_rel, ""


def convert(opts, src, dst, target, keep_io):
    """Runs the converter under test; returns an error line or ''."""
    if opts["converter"] == "onnxconverter-common":
        if target != "fp16":
            return "skip:onnxconverter-common has no bfloat16 conversion"
        from onnxconverter_common import float16

        try:
            model = float16.convert_float_to_float16(onnx.load(src), keep_io_types=keep_io)
            onnx.save(model, dst)
        except Exception as e:  # noqa: BLE001 - any converter error is a test failure, reported in one line
            return "convert: " + first_line(f"{type(e).__name__}: {e}")
        return ""
    cmd = [opts["onnxamp"], "convert", src, "-o", dst, "--target", target]
    if keep_io:
        cmd.append("--keep-io-types")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=opts["timeout"])
    except subprocess.TimeoutExpired:
        return f"convert: timed out after {opts['timeout']} s"
    if p.returncode != 0:
        return f"convert: exit {p.returncode}: " + first_line(p.stderr or p.stdout, 400)
    if not os.path.isfile(dst):
        return "convert: exit 0 but no output file"
    return ""


def run_case(job):
    """Runs every variant of one case. Returns {"id", "skip": reason or None, "variants": {v: result}} where a
    result is {"status": pass|fail|skip, "stage": convert|checker|load|run|compare, "why", "max_abs", ...}."""
    case_id, model_path, data_dir, variants, opts = job
    out = {"id": case_id, "skip": None, "variants": {}, "ops": []}
    try:
        model = onnx.load(model_path)
    except Exception as e:  # noqa: BLE001
        out["skip"] = "onnx cannot load the model: " + first_line(e)
        return out
    out["ops"] = op_types(model)
    if not has_float32(model):
        out["skip"] = "no float32 input, initializer or Constant"
        return out
    if RANDOM_OPS.intersection(out["ops"]):
        out["skip"] = "random op: outputs cannot be compared"
        return out
    if any(n.op_type == "Dropout" and len(n.input) > 2 and n.input[2] for g in walk_graphs(model.graph)
           for n in g.node):
        out["skip"] = "Dropout with a training_mode input (random mask): outputs cannot be compared"
        return out
    try:
        ref_sess = make_session(model_path)
    except Exception as e:  # noqa: BLE001
        out["skip"] = "ONNX Runtime cannot load the FP32 model"
        return out
    try:
        if data_dir is None:
            feeds = random_inputs(ref_sess, seed=sum(case_id.encode()))
        else:
            feeds = load_case_inputs(model, data_dir)
        names = [o.name for o in ref_sess.get_outputs()]
        ref_cache = {tuple(sorted((k, describe_dtypes(v)) for k, v in feeds.items())): ref_sess.run(None, feeds)}
    except Exception as e:  # noqa: BLE001
        out["skip"] = "ONNX Runtime cannot run the FP32 model"
        return out
    try:
        onnx.checker.check_model(model, full_check=True)
        strict = True
    except Exception:  # noqa: BLE001 - old test models the current checker refuses: check converted ones plainly
        strict = False

    for variant in variants:
        target, keep_io = VARIANTS[variant]
        rtol, atol = tolerance(case_id, out["ops"], target)
        res = {"status": "fail", "stage": "convert", "why": "", "max_abs": None, "max_rel": None,
               "rtol": rtol, "atol": atol, "strict": strict}
        out["variants"][variant] = res
        dst = os.path.join(opts["work_dir"], case_id.replace("/", "__") + f".{variant}.onnx")
        err = convert(opts, model_path, dst, target, keep_io)
        if err.startswith("skip:"):
            res.update(status="skip", why=err[5:])
            continue
        if err:
            reason = next((why for pattern, why in UNSUPPORTED if err.startswith("convert: exit 1:") and
                           pattern.search(err)), None)
            if reason:
                res.update(status="skip", why=reason)
            else:
                res["why"] = err
            continue
        res["stage"] = "checker"
        try:
            converted = onnx.load(dst)
            onnx.checker.check_model(converted, full_check=strict)
        except Exception as e:  # noqa: BLE001
            res["why"] = "onnx checker: " + first_line(e)
            continue
        res["stage"] = "load"
        try:
            sess = make_session(dst)
        except Exception as e:  # noqa: BLE001
            msg = first_line(e, 400)
            m = next((m for m in (p.search(msg) for p in ORT_NO_BF16) if m), None)
            if target == "bf16" and m:
                res.update(status="skip", why=f"ONNX Runtime CPU has no bfloat16 kernel for {m.group(1)}")
            else:
                res["why"] = "ORT load: " + msg
            continue
        res["stage"] = "run"
        try:
            types = {i.name: i.type for i in converted.graph.input}
            conv_feeds = {k: cast_value(v, types.get(k)) for k, v in feeds.items()}
            got = sess.run(names, conv_feeds)
        except Exception as e:  # noqa: BLE001
            res["why"] = "ORT run: " + first_line(e)
            continue
        # The reference: the FP32 model on the values the converted model received (fp16 inputs widened back to
        # float32), so that the measured error is the converter's, not the rounding of the test data to fp16.
        rounded = {k: widen(v, feeds[k]) for k, v in conv_feeds.items()}
        key = tuple(sorted((k, describe_dtypes(v)) for k, v in conv_feeds.items()))
        if key not in ref_cache:
            try:
                ref_cache[key] = ref_sess.run(None, rounded)
            except Exception as e:  # noqa: BLE001
                res["why"] = "ORT run of the FP32 model on fp16-rounded inputs: " + first_line(e)
                continue
        res["stage"] = "compare"
        ok, max_abs, max_rel, why = compare(ref_cache[key], got, names, rtol, atol)
        res.update(max_abs=max_abs, max_rel=max_rel, why=why, status="pass" if ok else "fail")
        if not opts["keep"]:
            os.remove(dst)
    return out


# ---------------------------------------------------------------- expected failures, report


def read_expected(path):
    """{"suite/test variant": reason} from the expected-failures file."""
    expected = {}
    if not path or not os.path.isfile(path):
        return expected
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 2 or parts[1] not in VARIANTS:
                raise SystemExit(f"error: {path}: malformed line (want '<suite>/<test> <variant> <reason>'): {line}")
            expected[f"{parts[0]} {parts[1]}"] = parts[2] if len(parts) > 2 else ""
    return expected


def write_expected(path, failures, expected):
    header = [
        "# Expected failures of the converter's peer tests (tests/peer/peer_test.py): converted models that fail",
        "# the ONNX checker, do not load in ONNX Runtime, or leave the tolerance. One per line:",
        "# <suite>/<test> <variant> <reason>. The run fails when a variant not listed fails or a listed one passes.",
    ]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(header) + "\n")
        for key in sorted(failures):
            f.write(f"{key}  {expected.get(key) or failures[key]}\n")
    os.replace(tmp, path)


def fmt_err(x):
    return "-" if x is None else f"{x:.1e}"


def case_line(result, variants):
    """One line per case: each variant's status and max abs/rel error against FP32."""
    if result["skip"]:
        return f"skip  {result['id']}: {result['skip']}"
    parts = []
    worst = "ok"
    for v in variants:
        r = result["variants"].get(v)
        if r is None:
            continue
        if r["status"] == "pass":
            parts.append(f"{v} abs {fmt_err(r['max_abs'])} rel {fmt_err(r['max_rel'])}")
        elif r["status"] == "skip":
            parts.append(f"{v} skipped")
        else:
            worst = "FAIL"
            parts.append(f"{v} FAIL[{r['stage']}]")
    return f"{worst:<4}  {result['id']:<58} " + " | ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--onnxamp", help="the onnxamp binary (default: <build-dir>/tools/onnxamp)")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, os.environ.get("ONNXAMP_BUILD_DIR", "build")))
    ap.add_argument("--converter", choices=["onnxamp", "onnxconverter-common"], default="onnxamp",
                    help="the converter under test (onnxconverter-common: to check this harness against the peer)")
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    ap.add_argument("--suite-root", default=SUITE_ROOT)
    ap.add_argument("--filter", help="only cases whose id (suite/test) matches this regex")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset of " + ",".join(VARIANTS))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="cases at once (processes)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per conversion")
    ap.add_argument("--brief", action="store_true",
                    help="print only models/ cases, failures and the summary (the log gets every line)")
    ap.add_argument("--log", help="also write every line to this file")
    ap.add_argument("--expected", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "expected_failures.txt"))
    ap.add_argument("--update-expected", action="store_true", help="rewrite --expected from this run")
    ap.add_argument("--keep", metavar="DIR", help="keep the converted models in DIR")
    args = ap.parse_args()

    variants = [v for v in args.variants.split(",") if v]
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        ap.error(f"--variants: unknown {','.join(bad)} (known: {','.join(VARIANTS)})")
    try:
        import onnxruntime  # noqa: F401
    except ImportError as e:
        print(f"peer tests skipped: onnxruntime not importable ({e}); run scripts/setup_python.sh")
        return 77
    onnxamp = None
    if args.converter == "onnxamp":
        onnxamp = args.onnxamp or os.path.join(args.build_dir, "tools", "onnxamp")
        if not os.access(onnxamp, os.X_OK):
            print(f"error: {onnxamp}: not an executable (build the onnxamp target or pass --onnxamp)", file=sys.stderr)
            return 2
        probe = subprocess.run([onnxamp, "convert", "--help"], capture_output=True, text=True)
        if probe.returncode != 0:
            print(f"error: {onnxamp}: has no 'convert' subcommand: {first_line(probe.stderr)}", file=sys.stderr)
            return 2
    else:
        try:
            import onnxconverter_common  # noqa: F401
        except ImportError as e:
            print(f"error: onnxconverter-common not importable ({e}); run scripts/setup_python.sh", file=sys.stderr)
            return 2

    cases = list_cases(args)
    if not cases:
        print("error: no models found (models/ and the backend suites are empty or filtered out)", file=sys.stderr)
        return 2
    work_dir = args.keep or tempfile.mkdtemp(prefix="onnxamp-peer-")
    os.makedirs(work_dir, exist_ok=True)
    opts = {"converter": args.converter, "onnxamp": onnxamp, "work_dir": work_dir, "keep": bool(args.keep),
            "timeout": args.timeout}
    jobs = [(cid, path, data, variants, opts) for cid, path, data in cases]

    log = open(args.log, "w") if args.log else None

    def emit(line, show=True):
        if log:
            log.write(line + "\n")
        if show:
            print(line, flush=True)

    label = args.converter if args.converter != "onnxamp" else onnxamp
    emit(f"peer tests: {len(cases)} models, variants {','.join(variants)}, converter {label}, {args.jobs} jobs")
    emit("per model: variant max abs / max rel error against the FP32 outputs of ONNX Runtime")
    t0 = time.time()
    results = []
    ctx = multiprocessing.get_context("spawn")  # no fork after onnxruntime threads exist
    try:
        with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=ctx) as pool:
            for result in pool.map(run_case, jobs, chunksize=4):
                results.append(result)
                line = case_line(result, variants)
                show = (not args.brief or result["id"].startswith("models/") or line.startswith("FAIL"))
                emit(line, show)
    finally:
        if not args.keep:
            shutil.rmtree(work_dir, ignore_errors=True)

    # Counts per variant run (a case x a variant).
    converted = loaded = within = 0
    skips = {}
    failures = {}
    for res in results:
        if res["skip"]:
            skips[res["skip"]] = skips.get(res["skip"], 0) + 1
            continue
        for v, r in res["variants"].items():
            if r["status"] == "skip":
                why = re.sub(r" for \w+$", "", r["why"]) + f" ({v})"
                skips[why] = skips.get(why, 0) + 1
                continue
            stage = r["stage"]
            converted += stage != "convert"
            loaded += stage in ("run", "compare")
            within += r["status"] == "pass"
            if r["status"] == "fail":
                failures[f"{res['id']} {v}"] = f"{stage}: {r['why']}"
    expected = read_expected(args.expected)
    attempted = sum(len(r["variants"]) - sum(x["status"] == "skip" for x in r["variants"].values())
                    for r in results if not r["skip"])
    unexpected = sorted(k for k in failures if k not in expected)
    passed = {f"{r['id']} {v}" for r in results for v, x in r["variants"].items() if x["status"] == "pass"}
    now_pass = sorted(k for k in expected if k in passed)
    skipped_keys = {f"{r['id']} {v}" for r in results for v, x in r["variants"].items() if x["status"] == "skip"}
    skipped_keys |= {f"{r['id']} {v}" for r in results if r["skip"] for v in variants}
    stale = sorted(k for k in expected if k in skipped_keys)

    emit("")
    if failures:
        emit(f"failures ({len(failures)}):")
        for key in sorted(failures):
            tag = "expected" if key in expected else "UNEXPECTED"
            emit(f"  {tag:<10} {key}: {failures[key]}")
    if now_pass:
        emit(f"listed in {os.path.relpath(args.expected, ROOT)} but now passing ({len(now_pass)}): remove them")
        for key in now_pass:
            emit(f"  {key}")
    if stale:
        emit(f"note: listed in {os.path.relpath(args.expected, ROOT)} but skipped now ({len(stale)}; not a failure, "
             "the entry may go): " + ", ".join(stale))
    skipped = sum(skips.values())
    emit(f"skipped {skipped}:")
    for why, n in sorted(skips.items(), key=lambda kv: -kv[1]):
        emit(f"  {n:5d}  {why}")
    plain = sum(1 for r in results if not r["skip"] and any(not x["strict"] for x in r["variants"].values()))
    if plain:
        emit(f"checker: full_check on every converted model but those of {plain} models whose original already "
             "fails it under this onnx (plain check_model there)")
    emit(f"summary ({args.converter}, {time.time() - t0:.0f} s): {attempted} conversions of "
         f"{sum(1 for r in results if not r['skip'])} models: converted {converted}, ORT-loaded {loaded}, "
         f"within tolerance {within}, failed {len(failures)} ({len(failures) - len(unexpected)} expected), "
         f"skipped {skipped} (reasons above)")
    rc = 0
    if args.update_expected:
        write_expected(args.expected, failures, expected)
        emit(f"wrote {args.expected} ({len(failures)} entries)")
    elif unexpected or now_pass:
        emit(f"peer tests FAILED: {len(unexpected)} unexpected failures, {len(now_pass)} listed failures now pass")
        rc = 1
    else:
        emit("peer tests passed")
    if log:
        log.close()
    return rc


if __name__ == "__main__":
    sys.exit(main())
