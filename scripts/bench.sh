#!/usr/bin/env bash
# Builds the benchmark binaries and runs the inference benchmark (onnxamp CPU runtime vs ONNX Runtime).
#
# Usage: bash scripts/bench.sh [bench_inference.py options...]   e.g. --threads 2 --markdown
# Environment: ONNXAMP_BUILD_DIR (build), ONNXAMP_JOBS (2), ONNXAMP_PYTHON (default: .venv/bin/python when
# it exists, else python3; it needs numpy, onnx and onnxruntime).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ONNXAMP_ROOT"

build_dir="$(abs_dir "$ONNXAMP_BUILD_DIR")"
python="${ONNXAMP_PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x "$ONNXAMP_ROOT/.venv/bin/python" ]]; then python="$ONNXAMP_ROOT/.venv/bin/python"; else python=python3; fi
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
