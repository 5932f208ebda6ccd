"""Helpers the benchmark scripts share: finding the build folder, printing sizes and tables, naming the CPU."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_build_dir(given, exe, target):
    """The build folder holding `exe` (relative to it): --build-dir, else $ONNXAMP_BUILD_DIR, else build/."""
    candidates = [given] if given else [os.environ.get("ONNXAMP_BUILD_DIR", ""), "build"]
    for c in candidates:
        if not c:
            continue
        d = c if os.path.isabs(c) else os.path.join(ROOT, c)
        if os.path.exists(os.path.join(d, exe)):
            return d
    sys.exit(f"error: {exe} not found in {candidates}; build the {target} target (or pass --build-dir)")


def size(n):
    """Bytes for people: '1.5 MiB'; '-' for None."""
    if n is None:
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def cpu_name():
    """The CPU's model name from /proc/cpuinfo, with its family and model numbers (a virtual machine may show only
    'AMD EPYC'), and AVX-512 or AVX2 by what its flags say."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's fields
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        return "unknown"
    flags = fields.get("flags", "").split()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    if "avx512_bf16" in flags:
        isa += " with bf16"
    return (f"{fields.get('model name', 'unknown')} (family {fields.get('cpu family', '?')} model "
            f"{fields.get('model', '?')}, {isa})")


def print_rows(header, table, markdown, notes=(), note_label="note", right_from=None):
    """Prints rows of strings under `header`, then one `  <note_label>: <note>` line per note. Markdown: a pipe
    table whose columns from index `right_from` on are right-aligned (None: no alignment marks); else plain text,
    every column right-justified to its widest cell, two spaces apart."""
    if markdown:
        print("| " + " | ".join(header) + " |")
        marks = ("---" if right_from is None or i < right_from else "---:" for i in range(len(header)))
        print("|" + "|".join(marks) + "|")
        for row in table:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h) for i, h in enumerate(header)]
        print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
        for row in table:
            print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    for n in notes:
        print(f"  {note_label}: {n}")


def status_bytes(key):
    """A "kB" line of /proc/self/status (VmRSS: now, VmHWM: peak), in bytes; 0 when absent. Not ru_maxrss: Linux
    carries that across execve, so a child started by a Python parent reports at least the parent's peak."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def child_peak_rss(stdout, ru_maxrss_bytes):
    """A child's own peak resident set: the `peak_rss_bytes` of its last JSON line (onnxamp train's done record,
    or a worker's result), else its ru_maxrss (an onnxamp built before train reported it: at least the Python
    parent's peak)."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and r.get("peak_rss_bytes"):
            return r["peak_rss_bytes"]
        break
    return ru_maxrss_bytes


def onnxamp_steps(stdout):
    """(losses, step times in seconds) from `onnxamp train --log-every 1 --log-format jsonl`'s stdout: its JSON step
    records, the step time being Trainer::Step's wall time (samples / samples_per_second)."""
    losses, times = [], []
    for line in stdout.splitlines():
        r = json.loads(line)
        if r.get("type") == "step":
            losses.append(r["loss"])
            times.append(r["samples"] / r["samples_per_second"] if r["samples_per_second"] else 0.0)
    return losses, times

