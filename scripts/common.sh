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
  found="$(find "$dir" -type f -name "$name" -perm -u+x -not -path '*/CMakeFiles/*' 2>/dev/null | head -n 1)"
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
