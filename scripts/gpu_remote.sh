#!/usr/bin/env bash
# Runs on the GPU machine, from .gpu/ as scripts/gpu_run.sh packs it: unpacks the payload, then in order lists the
# GPUs (nvidia-smi -L), runs the gpu-labelled tests (onnxamp_cuda_test), the ONNX backend test suite on the CUDA
# backend (onnxamp_conformance --device cuda) and the GPU benchmark against PyTorch (bench/bench_cuda.py); and for
# training the trainer's GPU tests (onnxamp_cuda_trainer_test), the PyTorch-AMP parity checks
# (tests/peer/train_parity_cuda.py) and the training benchmark against PyTorch AMP (bench/bench_cuda_training.py).
#
# Usage: bash .gpu/gpu_remote.sh [tests] [conformance] [bench] [train_tests] [parity] [train_bench]
#        (no step named: tests conformance bench; `train` names the three training steps)
# Logs go to $OUT (or ./gpu-logs), at most 8 files whatever the steps: summary.txt (nvidia-smi's GPU list and one
# line per step), steps.log (every step's whole output, in order), cuda_test.xml, expected_failures_cuda.txt (the
# list rewritten from this run), bench_cuda.json, cuda_trainer_test.xml, train_bench.json. Each step is limited by
# ONNXAMP_STEP_TIMEOUT seconds (default 540), and all of them by ONNXAMP_DEADLINE seconds from the start (default 570:
# the device tool stops a command at 600 s, and a step it kills leaves no exit line): a step gets what is left of it,
# and one that would get under 30 s is not started. Each step's output goes into steps.log while it runs, so a step
# killed from outside still brings back what it printed. ONNXAMP_BENCH_ARGS adds options to bench_cuda.py (e.g.
# "--dtypes fp16" or "--no-compile" to fit a time limit), ONNXAMP_PARITY_ARGS to train_parity_cuda.py and
# ONNXAMP_TRAIN_BENCH_ARGS to bench_cuda_training.py ("--quick" in both: fewer steps; with --quick they took about 2
# minutes each on an H100; the full training benchmark, fp32/fp16/bf16 with torch.compile and CUDA Graphs, takes
# longer: run it as a call of its own).
# Exit status: 0 when every step that ran passed (or skipped, exit 77), else 1.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${OUT:-$PWD/gpu-logs}"
work="${ONNXAMP_GPU_WORK:-/tmp/onnxamp-gpu}"
step_timeout="${ONNXAMP_STEP_TIMEOUT:-540}"
deadline=$((SECONDS + ${ONNXAMP_DEADLINE:-570}))
mkdir -p "$out"
steps=()
for s in "$@"; do
  if [[ "$s" == train ]]; then steps+=(train_tests parity train_bench); else steps+=("$s"); fi
done
[[ ${#steps[@]} -gt 0 ]] || steps=(tests conformance bench)
summary="$out/summary.txt"
: >"$summary"
: >"$out/steps.log"
failed=0

note() { echo "$*" | tee -a "$summary"; }

# Unpack once per machine (a later call on a warm machine reuses it unless the payload changed). Python's tarfile
# reads xz where the xz tool is missing.
payload="$here/payload.tar.xz"
[[ -f "$payload" ]] || { note "error: $payload is missing (name .gpu in the device tool's carry)"; exit 1; }
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
# Each step's log is written here, then appended to $OUT/steps.log (the device tool brings back at most 8 files).
logs="$work/logs"
mkdir -p "$logs"

{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv; } \
  2>&1 | tee -a "$summary"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tee -a "$summary"

# run_step NAME LOG COMMAND...: runs COMMAND under the step timeout (or what is left before the deadline), its output
# into LOG and into steps.log as it comes, the last lines on the console.
run_step() {
  local name="$1" log="$2"
  shift 2
  local start=$SECONDS rc left=$((deadline - SECONDS - 15)) limit=$step_timeout
  : >"$log"
  if ((left < 30)); then
    note "$name: not run (${left} s left before the ${ONNXAMP_DEADLINE:-570} s deadline; run it in a call of its own)"
    failed=1
    return
  fi
  ((limit > left)) && limit=$left
  echo "==== $name ===="
  echo "==== $name (started, limit $limit s) ====" >>"$out/steps.log"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$log" >>"$out/steps.log"
  rc=${PIPESTATUS[0]}
  echo "==== $name (exit $rc, $((SECONDS - start)) s) ====" >>"$out/steps.log"
  tail -n 40 "$log"
  if [[ $rc -eq 0 ]]; then
    note "$name: passed ($((SECONDS - start)) s)"
  elif [[ $rc -eq 77 ]]; then
    note "$name: skipped ($(tail -n 1 "$log"))"
  elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
    note "$name: timed out after ${limit} s (log: $log)"
    failed=1
  else
    note "$name: FAILED, exit $rc ($((SECONDS - start)) s; log: $log)"
    failed=1
  fi
}

for s in "${steps[@]}"; do
  case "$s" in
    tests)
      run_step "gpu tests (onnxamp_cuda_test)" "$logs/cuda_test.log" \
        "$work/bin/onnxamp_cuda_test" --gtest_output="xml:$out/cuda_test.xml"
      # The counts, and each failed test (named twice by GoogleTest: when it fails and in the final list).
      grep -E '^\[  (PASSED|SKIPPED) +\] [0-9]+ tests?|^\[  FAILED  \] ' "$logs/cuda_test.log" | tee -a "$summary"
      ;;
    conformance)
      if [[ ! -d "$work/data" ]]; then
        note "conformance: skipped (no ONNX backend test data in the payload)"
        continue
      fi
      # --update-expected rewrites a copy of the list from this run: that copy, fetched back, is the new list.
      cp "$work/conformance/expected_failures_cuda.txt" "$out/expected_failures_cuda.txt"
      run_step "conformance --device cuda" "$logs/conformance_cuda.log" \
        "$work/bin/onnxamp_conformance" --data-dir "$work/data" --device cuda --isolate --list-failures \
        --expected "$out/expected_failures_cuda.txt" --update-expected
      grep -E '^[0-9]+ passed, |^placement: |^wrote ' "$logs/conformance_cuda.log" | tee -a "$summary"
      if ! diff -q "$work/conformance/expected_failures_cuda.txt" "$out/expected_failures_cuda.txt" >/dev/null; then
        note "conformance: the expected failures changed (see expected_failures_cuda.txt and the diff below)"
        diff "$work/conformance/expected_failures_cuda.txt" "$out/expected_failures_cuda.txt" | head -n 40
      fi
      ;;
    bench)
      read -r -a bench_args <<<"${ONNXAMP_BENCH_ARGS:-}"
      run_step "bench_cuda.py" "$logs/bench_cuda.log" \
        python3 "$work/bench/bench_cuda.py" --bin-dir "$work/bin" --work-dir "$work/bench_models" --markdown --profile \
        --json "$out/bench_cuda.json" "${bench_args[@]}"
      ;;
    train_tests)
      run_step "trainer gpu tests (onnxamp_cuda_trainer_test)" "$logs/cuda_trainer_test.log" \
        "$work/bin/onnxamp_cuda_trainer_test" --gtest_output="xml:$out/cuda_trainer_test.xml"
      grep -E '^\[  (PASSED|SKIPPED) +\] [0-9]+ tests?|^\[  FAILED  \] ' "$logs/cuda_trainer_test.log" |
        tee -a "$summary"
      ;;
    parity)
      read -r -a parity_args <<<"${ONNXAMP_PARITY_ARGS:-}"
      run_step "train_parity_cuda.py" "$logs/train_parity_cuda.log" \
        python3 "$work/tests/peer/train_parity_cuda.py" --onnxamp "$work/bin/onnxamp" --models-dir "$work/models" \
        --digits "$work/train_data/digits.csv.gz" "${parity_args[@]}"
      grep -E '^(FAIL |train parity)' "$logs/train_parity_cuda.log" | tee -a "$summary"
      ;;
    train_bench)
      read -r -a train_bench_args <<<"${ONNXAMP_TRAIN_BENCH_ARGS:-}"
      run_step "bench_cuda_training.py" "$logs/bench_cuda_training.log" \
        python3 "$work/bench/bench_cuda_training.py" --bin-dir "$work/bin" --models-dir "$work/models" \
        --work-dir "$work/train_bench" --markdown --json "$out/train_bench.json" "${train_bench_args[@]}"
      ;;
    *)
      note "unknown step '$s' (steps: tests conformance bench train_tests parity train_bench, or train)"
      failed=1
      ;;
  esac
done

echo "==== summary ===="
cat "$summary"
exit "$failed"
