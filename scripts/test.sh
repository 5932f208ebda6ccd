#!/usr/bin/env bash
# Builds onnxamp, checks that scripts/setup.sh installs every Debian package the build found, and runs every test:
# unit, corpus and gpu tests, the peer tests of converted models against ONNX Runtime and of training against
# PyTorch, the digits demo's accuracy (FP16 AMP training, the FP16 export in ONNX Runtime), the clang-format check,
# the ASan+UBSan unit tests, and a bounded libFuzzer run of the importer.
# Stops at the first failure with a non-zero exit.
#
# Usage: bash scripts/test.sh
# Environment: ONNXAMP_BUILD_DIR (build), ONNXAMP_ASAN_DIR (build-asan), ONNXAMP_FUZZ_DIR (build-fuzz),
# ONNXAMP_JOBS (2), ONNXAMP_FUZZ_SECONDS (60), ONNXAMP_ASAN_BUILD_TYPE (Debug), ONNXAMP_CUDA (ON when nvcc exists),
# ONNXAMP_PEER_TESTS (1; 0 skips the Python peer environment and the peer tests, which need PyPI the first time; the
# training parity test uses Debian's python3-torch/python3-onnx in /usr/bin/python3 and skips where they are missing),
# ONNXAMP_VENV (.venv: the peers' virtual environment, made by scripts/setup_python.sh).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ONNXAMP_ROOT"

build_dir="$(abs_dir "$ONNXAMP_BUILD_DIR")"
asan_dir="$(abs_dir "$ONNXAMP_ASAN_DIR")"
fuzz_dir="$(abs_dir "$ONNXAMP_FUZZ_DIR")"
fuzz_seconds="${ONNXAMP_FUZZ_SECONDS:-60}"
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

total_passed=0
total_skipped=0

# run_ctest BUILD_DIR LABEL NO_TESTS(error|ignore) [SELECTION...]: runs the tests carrying LABEL (or those
# SELECTION picks, e.g. -LE REGEX), adds to the totals. The console shows failures, skips and the summary; the
# full ctest output goes to BUILD_DIR/ctest-LABEL.log.
run_ctest() {
  local dir="$1" label="$2" no_tests="$3"
  shift 3
  local selection=("$@")
  if [[ ${#selection[@]} -eq 0 ]]; then
    selection=(-L "^${label}\$")
  fi
  local log="$dir/ctest-$label.log"
  local rc=0
  ctest --test-dir "$dir" "${selection[@]}" --output-on-failure -j "$ONNXAMP_JOBS" --no-tests="$no_tests" 2>&1 |
    tee "$log" | grep -vE '^ +Start +[0-9]+: |Test +#[0-9]+: .* Passed +[0-9.]+ sec$' || rc=$?
  echo "(full ctest output: $log)"
  if [[ $rc -ne 0 ]]; then
    return "$rc"
  fi
  local summary total skipped
  summary="$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1 || true)"
  if [[ -z "$summary" ]]; then
    echo "ctest: no such tests in $dir"
    return 0
  fi
  total="${summary##* out of }"
  skipped="$(grep -c '(Skipped)$' "$log" || true)"
  total_passed=$((total_passed + total - skipped))
  total_skipped=$((total_skipped + skipped))
}

step "setup: Debian packages"
bash scripts/setup.sh

step "build: Release, CUDA $(cuda_setting), in $ONNXAMP_BUILD_DIR"
bash scripts/build.sh

step "check: every package the build found is installed by setup.sh"
bash scripts/check_packages.sh "$build_dir"

step "unit tests (ctest -L unit)"
run_ctest "$build_dir" unit error

step "corpus tests (ctest -L corpus)"
run_ctest "$build_dir" corpus error

step "gpu tests (ctest -L gpu; they skip without a CUDA device)"
run_ctest "$build_dir" gpu ignore

step "other tests (every label but unit, corpus and gpu)"
run_ctest "$build_dir" other ignore -LE '^(unit|corpus|gpu)$'

if [[ "${ONNXAMP_PEER_TESTS:-1}" != 0 ]]; then
  step "python peers: .venv (scripts/setup_python.sh)"
  bash scripts/setup_python.sh

  step "peer tests: converted models in the ONNX checker and ONNX Runtime (tests/peer)"
  peer_log="$build_dir/peer-test.log"
  peer_python="$(abs_dir "${ONNXAMP_VENV:-.venv}")/bin/python"
  "$peer_python" tests/peer/peer_test_selftest.py
  "$peer_python" tests/peer/peer_test.py --onnxamp "$(find_exe "$build_dir" onnxamp)" --jobs "$ONNXAMP_JOBS" \
    --brief --log "$peer_log"
  echo "(every model's line: $peer_log)"

  step "peer tests: RNN, GRU and LSTM against ONNX Runtime (tests/peer/rnn_ort.py)"
  "$peer_python" tests/peer/rnn_ort.py --onnxamp "$(find_exe "$build_dir" onnxamp)" --brief

  step "peer tests: If, Loop and Scan against ONNX Runtime (tests/peer/control_flow_ort.py)"
  "$peer_python" tests/peer/control_flow_ort.py --onnxamp "$(find_exe "$build_dir" onnxamp)" --brief

  step "peer tests: quantization, detection, normalization and other ops against ONNX Runtime (tests/peer/more_ops_ort.py)"
  "$peer_python" tests/peer/more_ops_ort.py --onnxamp "$(find_exe "$build_dir" onnxamp)" --brief

  step "peer tests: onnxamp train vs PyTorch (tests/peer/train_parity.py; Debian's /usr/bin/python3, skips without torch)"
  if [[ -x /usr/bin/python3 ]]; then
    /usr/bin/python3 tests/peer/train_parity.py --onnxamp "$(find_exe "$build_dir" onnxamp)" --jobs "$ONNXAMP_JOBS"
  else
    echo "skipped: no /usr/bin/python3"
  fi

  step "peer tests: models written by torch.onnx.export, trained by onnxamp and by PyTorch (tests/peer/train_exported.py)"
  if [[ -x /usr/bin/python3 ]]; then
    /usr/bin/python3 tests/peer/train_exported.py --onnxamp "$(find_exe "$build_dir" onnxamp)"
  else
    echo "skipped: no /usr/bin/python3"
  fi

  step "peer tests: a gradient penalty through ONNX's Gradient operator vs PyTorch's double backward (tests/peer/gradient_penalty_torch.py)"
  if [[ -x /usr/bin/python3 ]]; then
    /usr/bin/python3 tests/peer/gradient_penalty_torch.py --onnxamp "$(find_exe "$build_dir" onnxamp)"
  else
    echo "skipped: no /usr/bin/python3"
  fi

  step "peer tests: digits_mlp fine-tuned with FP16 AMP, its FP16 export in ONNX Runtime (tests/peer/train_digits.py)"
  "$peer_python" tests/peer/train_digits.py --onnxamp "$(find_exe "$build_dir" onnxamp)" --build-dir "$build_dir"

  step "peer tests: every export of onnxamp train (fp32/fp16/bf16) in ONNX Runtime (tests/peer/train_export_peer.py)"
  "$peer_python" tests/peer/train_export_peer.py --onnxamp "$(find_exe "$build_dir" onnxamp)"

  step "peer tests: onnxamp train --log-dir read back by TensorBoard (tests/peer/train_logs.py)"
  "$peer_python" tests/peer/train_logs.py --onnxamp "$(find_exe "$build_dir" onnxamp)"

  step "peer tests: a training checkpoint's state.safetensors in PyPI safetensors (tests/peer/checkpoint_safetensors.py)"
  "$peer_python" tests/peer/checkpoint_safetensors.py --onnxamp "$(find_exe "$build_dir" onnxamp)"
fi

step "clang-format check"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t candidates < <(git ls-files --cached --others --exclude-standard -- \
    '*.cc' '*.h' '*.cu' '*.cuh' '*.cpp' '*.hpp' | sort -u)
else
  mapfile -t candidates < <(find . \( -path './build*' -o -path './.git' -o -path './.venv' -o -path './.gpu' \) \
    -prune -o -type f \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \
    -o -name '*.hpp' \) -print | sed 's|^\./||' | sort)
fi
unformatted=()
checked=0
for f in "${candidates[@]}"; do
  [[ -f "$f" ]] || continue
  checked=$((checked + 1))
  if ! clang-format --style=file "$f" | cmp -s - "$f"; then
    unformatted+=("$f")
  fi
done
if [[ ${#unformatted[@]} -gt 0 ]]; then
  echo "clang-format: ${#unformatted[@]} of $checked files are not formatted (fix: clang-format -i FILE):" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  exit 1
fi
echo "clang-format: $checked files formatted"

step "sanitizer build: ASan+UBSan, ${ONNXAMP_ASAN_BUILD_TYPE:-Debug}, in $ONNXAMP_ASAN_DIR"
cmake -S . -B "$asan_dir" -DCMAKE_BUILD_TYPE="${ONNXAMP_ASAN_BUILD_TYPE:-Debug}" -DONNXAMP_SANITIZE=ON \
  -DONNXAMP_CUDA=OFF "${launcher[@]}"
bash scripts/check_packages.sh "$asan_dir"
cmake --build "$asan_dir" -j "$ONNXAMP_JOBS"

step "unit tests under ASan+UBSan (ctest -L unit)"
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:check_initialization_order=1}" \
  UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
  run_ctest "$asan_dir" unit error

step "fuzz build: clang + libFuzzer, in $ONNXAMP_FUZZ_DIR"
# The compiler is fixed when a build folder is first configured: start afresh if it is not clang.
if [[ -f "$fuzz_dir/CMakeCache.txt" ]] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang++' "$fuzz_dir/CMakeCache.txt"; then
  rm -rf "$fuzz_dir"
fi
CC=clang CXX=clang++ cmake -S . -B "$fuzz_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DONNXAMP_FUZZ=ON \
  -DONNXAMP_CUDA=OFF "${launcher[@]}"
bash scripts/check_packages.sh "$fuzz_dir"
cmake --build "$fuzz_dir" -j "$ONNXAMP_JOBS" --target onnxamp_fuzz_importer

step "fuzz run: onnxamp_fuzz_importer for ${fuzz_seconds}s on a copy of tests/fuzz/corpus"
fuzzer="$(find_exe "$fuzz_dir" onnxamp_fuzz_importer)"
run_dir="$fuzz_dir/fuzz-run"
rm -rf "$run_dir"
mkdir -p "$run_dir/corpus" "$run_dir/artifacts"
cp -R tests/fuzz/corpus/. "$run_dir/corpus/"
seeds="$(find "$run_dir/corpus" -type f | wc -l)"
fuzz_rc=0
"$fuzzer" -max_total_time="$fuzz_seconds" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$run_dir/artifacts/" "$run_dir/corpus" >"$run_dir/fuzz.log" 2>&1 || fuzz_rc=$?
if [[ $fuzz_rc -ne 0 ]]; then
  tail -n 120 "$run_dir/fuzz.log" >&2
  echo "fuzz: onnxamp_fuzz_importer failed (exit $fuzz_rc); log $run_dir/fuzz.log, inputs in $run_dir/artifacts/:" >&2
  ls -l "$run_dir/artifacts" >&2
  exit 1
fi
grep -E '^(Done|stat::)' "$run_dir/fuzz.log" || tail -n 5 "$run_dir/fuzz.log"
echo "fuzz: no crash; corpus $seeds seeds -> $(find "$run_dir/corpus" -type f | wc -l) inputs (log $run_dir/fuzz.log)"

step "summary"
print_step_times
echo "Tests: $total_passed passed, 0 failed, $total_skipped skipped"
