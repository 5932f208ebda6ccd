#!/usr/bin/env bash
# Builds the benchmark binaries and runs the inference benchmark (onnxamp CPU runtime vs ONNX Runtime), or with
# `convert` first, the conversion benchmark (onnxamp convert vs onnxconverter-common).
#
# Usage: bash scripts/bench.sh [bench_inference.py options...]   e.g. --threads 2 --markdown
#        bash scripts/bench.sh convert [bench_convert.py options...]   e.g. --gen-large --markdown
# Environment: ONNXAMP_BUILD_DIR (build), ONNXAMP_JOBS (2), ONNXAMP_PYTHON (default: .venv/bin/python when
# it exists, else python3; it needs numpy, onnx and onnxruntime, and for `convert` onnxconverter-common:
# scripts/setup_python.sh installs them).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ONNXAMP_ROOT"

build_dir="$(abs_dir "$ONNXAMP_BUILD_DIR")"
python="${ONNXAMP_PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x "$ONNXAMP_ROOT/.venv/bin/python" ]]; then python="$ONNXAMP_ROOT/.venv/bin/python"; else python=python3; fi
fi

if [[ "${1:-}" == convert ]]; then
  shift
  step "Build onnxamp and onnxamp_gen_models in $build_dir (Release)"
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    cmake -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DONNXAMP_CUDA="$(cuda_setting)"
  fi
  cmake --build "$build_dir" --target onnxamp onnxamp_gen_models -j "$ONNXAMP_JOBS"

  step "Check the Python peers ($python)"
  "$python" -c 'import numpy, onnx, onnxruntime as ort, onnxconverter_common as occ
print("onnxruntime", ort.__version__, "onnx", onnx.__version__, "onnxconverter-common", occ.__version__)'

  step "Conversion benchmark"
  "$python" bench/bench_convert.py --build-dir "$build_dir" "$@"
  print_step_times
  exit 0
fi

step "Build onnxamp_bench and onnxamp_gen_models in $build_dir (Release)"
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DONNXAMP_CUDA="$(cuda_setting)"
fi
cmake --build "$build_dir" --target onnxamp_bench onnxamp_gen_models -j "$ONNXAMP_JOBS"

step "Check the Python peer ($python)"
"$python" -c 'import numpy, onnx, onnxruntime; print("onnxruntime", onnxruntime.__version__, "onnx", onnx.__version__)'

step "Inference benchmark"
"$python" bench/bench_inference.py --build-dir "$build_dir" "$@"
print_step_times
