"""Helpers the benchmark scripts share: finding the build folder, printing sizes, naming the CPU."""
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
