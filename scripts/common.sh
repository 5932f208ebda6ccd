# Shared helpers for the scripts in this folder (sourced, not run): repo root, step headers, build folders.
# shellcheck shell=bash

# The repository root, whatever folder the script was started from.
ONNXAMP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ONNXAMP_ROOT

# Build folders (relative to the repository root unless absolute); override with these variables.
ONNXAMP_BUILD_DIR="${ONNXAMP_BUILD_DIR:-build}"
ONNXAMP_ASAN_DIR="${ONNXAMP_ASAN_DIR:-build-asan}"
ONNXAMP_FUZZ_DIR="${ONNXAMP_FUZZ_DIR:-build-fuzz}"
# Parallel jobs for builds and ctest.
ONNXAMP_JOBS="${ONNXAMP_JOBS:-2}"

# ccache: paths below the repository root are hashed relative to it, so that a fresh clone in another folder
# still hits the cache of an earlier one.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ONNXAMP_ROOT}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

_onnxamp_step_no=0
_onnxamp_step_name=""
_onnxamp_step_start=0
_onnxamp_script_start=$SECONDS
ONNXAMP_STEP_TIMES=()

# Prints a header for the next step and remembers its name (for the failure message and the timings).
step() {
  _onnxamp_step_end
  _onnxamp_step_no=$((_onnxamp_step_no + 1))
  _onnxamp_step_name="$*"
  _onnxamp_step_start=$SECONDS
  printf '\n==== [%d] %s ====\n' "$_onnxamp_step_no" "$*"
}

# Records the running step's duration.
_onnxamp_step_end() {
  if [[ -n "$_onnxamp_step_name" ]]; then
    ONNXAMP_STEP_TIMES+=("$(printf '%5ds  %s' $((SECONDS - _onnxamp_step_start)) "$_onnxamp_step_name")")
    _onnxamp_step_name=""
  fi
}

# Prints the time each step took and the total.
print_step_times() {
  _onnxamp_step_end
  local line
  for line in "${ONNXAMP_STEP_TIMES[@]}"; do
    echo "  $line"
  done
  printf '  %5ds  total\n' $((SECONDS - _onnxamp_script_start))
}

# EXIT trap: names the step that failed.
_onnxamp_on_exit() {
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    echo >&2
    if [[ ${#ONNXAMP_STEP_TIMES[@]} -gt 0 ]]; then
      echo "steps completed:" >&2
      printf '  %s\n' "${ONNXAMP_STEP_TIMES[@]}" >&2
    fi
    if [[ -n "$_onnxamp_step_name" ]]; then
      echo "==== FAILED (exit $rc) in step [$_onnxamp_step_no] $_onnxamp_step_name ====" >&2
    else
      echo "==== FAILED (exit $rc): $(basename "$0") ====" >&2
    fi
  fi
  exit $rc
}
trap _onnxamp_on_exit EXIT

# Absolute path of a build folder given relative to the repository root.
abs_dir() {
  case "$1" in
    /*) echo "$1" ;;
    *) echo "$ONNXAMP_ROOT/$1" ;;
  esac
}

# Path of the executable target `name` inside build folder `dir`; fails if it was not built.
find_exe() {
  local dir="$1" name="$2" found
  # gpu-stage/ holds the stripped copies scripts/gpu_run.sh bundles for a GPU machine: never the build's own.
  found="$(find "$dir" -type f -name "$name" -perm -u+x -not -path '*/CMakeFiles/*' -not -path '*/gpu-stage/*' \
    2>/dev/null | head -n 1)"
  if [[ -z "$found" ]]; then
    echo "error: $name not found under $dir (was it built?)" >&2
    return 1
  fi
  echo "$found"
}

# The CUDA setting for a build: ON when /usr/local/cuda/bin/nvcc exists, unless ONNXAMP_CUDA says otherwise.
cuda_setting() {
  if [[ -n "${ONNXAMP_CUDA:-}" ]]; then
    echo "$ONNXAMP_CUDA"
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
    echo ON
  else
    echo OFF
  fi
}

# pip_install_pins WHO PYTHON [PIP_OPTION...] -- PIN...: `PYTHON -m pip install` of the pins, retried once after 5 s.
# On a second failure prints one error line prefixed with WHO (PyPI unreachable, no matching distribution for this
# Python, or pip's last lines) and returns 1.
pip_install_pins() {
  local who="$1" python="$2"
  shift 2
  local options=()
  while [[ $# -gt 0 && "$1" != -- ]]; do
    options+=("$1")
    shift
  done
  shift  # the --
  local pins=("$@") log attempt
  log="$(mktemp)"
  for attempt in 1 2; do
    if "$python" -m pip install --disable-pip-version-check --quiet --retries 2 --timeout 30 "${options[@]}" \
      "${pins[@]}" >"$log" 2>&1; then
      rm -f "$log"
      return 0
    fi
    if [[ $attempt -eq 1 ]]; then
      echo "$who: pip failed, retrying once in 5 s"
      sleep 5
    fi
  done
  if grep -qiE 'connection|network|resolve|timed out|temporary failure|unreachable' "$log"; then
    echo "error: $who: cannot reach PyPI (pip install ${pins[*]} failed twice; check the network or a proxy via" \
      "PIP_INDEX_URL)" >&2
  elif grep -qiE 'no matching distribution|could not find a version' "$log"; then
    echo "error: $who: PyPI has no ${pins[*]} for $("$python" -V 2>&1) on this platform" >&2
  else
    tail -n 20 "$log" >&2
    echo "error: $who: pip install ${pins[*]} failed twice (pip's output above)" >&2
  fi
  rm -f "$log"
  return 1
}

# make_venv WHO VENV BASE_PYTHON SETTING [VENV_OPTION...]: creates the virtual environment VENV with BASE_PYTHON
# unless VENV/bin/python exists. SETTING names the environment variable that chooses BASE_PYTHON (for the error
# line when it is missing). Returns 1 after one error line prefixed with WHO.
make_venv() {
  local who="$1" venv="$2" base_python="$3" setting="$4"
  shift 4
  [[ -x "$venv/bin/python" ]] && return 0
  if ! command -v "$base_python" >/dev/null 2>&1; then
    echo "error: $who: $base_python not found; install Python 3 (with venv) or set $setting" >&2
    return 1
  fi
  echo "$who: creating $venv"
  if ! "$base_python" -m venv "$@" "$venv"; then
    echo "error: $who: '$base_python -m venv $* $venv' failed (on Debian: apt-get install python3-venv)" >&2
    return 1
  fi
}

# unsatisfied_pins PYTHON [--in DIR] PIN...: prints the NAME==VERSION pins that PYTHON's environment does not
# satisfy: the installed version must match exactly (a local tag such as torch's +cu130 aside); with --in DIR, only
# a distribution installed under DIR counts (a venv that also sees the system's site-packages).
unsatisfied_pins() {
  local python="$1" within=""
  shift
  if [[ "${1:-}" == --in ]]; then
    within="$2"
    shift 2
  fi
  "$python" - "$within" "$@" <<'PY'
import os
import sys
from importlib import metadata

within = os.path.realpath(sys.argv[1]) + os.sep if sys.argv[1] else ""
for pin in sys.argv[2:]:
    name, version = pin.split("==")
    try:
        dist = metadata.distribution(name)
        where = os.path.realpath(str(dist.locate_file("")))
        if dist.version.split("+")[0] == version and where.startswith(within):
            continue
    except metadata.PackageNotFoundError:
        pass
    print(pin)
PY
}
