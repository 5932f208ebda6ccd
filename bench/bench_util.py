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
    """The CPU's model name from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


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

