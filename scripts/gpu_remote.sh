#!/usr/bin/env bash
# Runs on the GPU machine, from .gpu/ as scripts/gpu_run.sh packs it: unpacks the payload, then in order lists the
# GPUs (nvidia-smi -L), runs the gpu-labelled tests (onnxamp_cuda_test), the ONNX backend test suite on the CUDA
# backend (onnxamp_conformance --device cuda) and the GPU benchmark against PyTorch (bench/bench_cuda.py).
#
# Usage: bash .gpu/gpu_remote.sh [tests] [conformance] [bench]      (no step named: all three)
# Logs go to $OUT (or ./gpu-logs), at most 8 files: nvidia-smi.txt, cuda_test.log, cuda_test.xml,
# conformance_cuda.log, expected_failures_cuda.txt (the list rewritten from this run), bench_cuda.log,
# bench_cuda.json, summary.txt. Each step is limited by ONNXAMP_STEP_TIMEOUT seconds (default 540);
# ONNXAMP_BENCH_ARGS adds options to bench_cuda.py (e.g. "--dtypes fp16" or "--no-compile" to fit a time limit).
# Exit status: 0 when every step that ran passed, else 1.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${OUT:-$PWD/gpu-logs}"
work="${ONNXAMP_GPU_WORK:-/tmp/onnxamp-gpu}"
step_timeout="${ONNXAMP_STEP_TIMEOUT:-540}"
mkdir -p "$out"
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(tests conformance bench)
summary="$out/summary.txt"
: >"$summary"
failed=0

note() { echo "$*" | tee -a "$summary"; }

# Unpack once per machine (a later call on a warm machine reuses it unless the payload changed). Python's tarfile
# reads xz where the xz tool is missing.
payload="$here/payload.tar.xz"
stamp="$(cksum <"$payload" | cut -d' ' -f1)"
if [[ "$(cat "$work/.stamp" 2>/dev/null)" != "$stamp" ]]; then
  rm -rf "$work"
  mkdir -p "$work"
  if command -v xz >/dev/null 2>&1; then
    tar -C "$work" -xJf "$payload"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$payload" "$work"
  fi || { note "error: cannot unpack $payload"; exit 1; }
  echo "$stamp" >"$work/.stamp"
fi
# shellcheck source=/dev/null
source "$work/env.sh"
export ONNXAMP_CLI="$work/bin/onnxamp" ONNXAMP_MODELS_DIR="$work/models" PYTHONUNBUFFERED=1

{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv; } \
  2>&1 | tee "$out/nvidia-smi.txt"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 |
  tee -a "$out/nvidia-smi.txt"

# run_step NAME LOG COMMAND...: runs COMMAND under the step timeout, its output into LOG and on the console.
run_step() {
  local name="$1" log="$2"
  shift 2
  local start=$SECONDS rc
  echo "==== $name ===="
  timeout --kill-after=10 "$step_timeout" "$@" >"$log" 2>&1
  rc=$?
  tail -n 40 "$log"
  if [[ $rc -eq 0 ]]; then
    note "$name: passed ($((SECONDS - start)) s)"
  elif [[ $rc -eq 77 ]]; then
    note "$name: skipped ($(tail -n 1 "$log"))"
  elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
    note "$name: timed out after ${step_timeout} s (log: $log)"
    failed=1
  else
    note "$name: FAILED, exit $rc ($((SECONDS - start)) s; log: $log)"
    failed=1
  fi
}

for s in "${steps[@]}"; do
  case "$s" in
    tests)
      run_step "gpu tests (onnxamp_cuda_test)" "$out/cuda_test.log" \
        "$work/bin/onnxamp_cuda_test" --gtest_output="xml:$out/cuda_test.xml"
      # The counts, and each failed test (named twice by GoogleTest: when it fails and in the final list).
      grep -E '^\[  (PASSED|SKIPPED) +\] [0-9]+ tests?|^\[  FAILED  \] ' "$out/cuda_test.log" | tee -a "$summary"
      ;;
    conformance)
      if [[ ! -d "$work/data" ]]; then
        note "conformance: skipped (no ONNX backend test data in the payload)"
        continue
      fi
      # --update-expected rewrites a copy of the list from this run: that copy, fetched back, is the new list.
      cp "$work/conformance/expected_failures_cuda.txt" "$out/expected_failures_cuda.txt"
      run_step "conformance --device cuda" "$out/conformance_cuda.log" \
        "$work/bin/onnxamp_conformance" --data-dir "$work/data" --device cuda --isolate --list-failures \
        --expected "$out/expected_failures_cuda.txt" --update-expected
      grep -E '^[0-9]+ passed, |^placement: |^wrote ' "$out/conformance_cuda.log" | tee -a "$summary"
      if ! diff -q "$work/conformance/expected_failures_cuda.txt" "$out/expected_failures_cuda.txt" >/dev/null; then
        note "conformance: the expected failures changed (see expected_failures_cuda.txt and the diff below)"
        diff "$work/conformance/expected_failures_cuda.txt" "$out/expected_failures_cuda.txt" | head -n 40
      fi
      ;;
    bench)
      read -r -a bench_args <<<"${ONNXAMP_BENCH_ARGS:-}"
      run_step "bench_cuda.py" "$out/bench_cuda.log" \
        python3 "$work/bench/bench_cuda.py" --bin-dir "$work/bin" --work-dir "$work/bench_models" --markdown --profile \
        --json "$out/bench_cuda.json" "${bench_args[@]}"
      ;;
    *)
      note "unknown step '$s' (steps: tests conformance bench)"
      failed=1
      ;;
  esac
done

echo "==== summary ===="
cat "$summary"
exit "$failed"
