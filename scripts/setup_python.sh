#!/usr/bin/env bash
# Creates or updates the Python peer environment .venv (numpy, onnx, onnxruntime, onnxconverter-common, safetensors,
# tensorboard at pinned versions) used by the peer tests and the benchmarks; does nothing when every pin is already
# satisfied.
#
# Usage: bash scripts/setup_python.sh
# Environment: ONNXAMP_VENV (.venv, relative to the repository root unless absolute), ONNXAMP_PYTHON_BASE (the
# interpreter that creates the venv; default python3).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ONNXAMP_ROOT"

# The peers (DESIGN.md, Dependencies). onnx 1.23 is the current checker (opsets up to 23); onnxconverter-common
# 1.16.0 is the newest release and works with these onnx/numpy versions.
PINS=(
  numpy==2.4.6
  onnx==1.23.2
  onnxruntime==1.31.1
  onnxconverter-common==1.16.0
  safetensors==0.8.0
  tensorboard==2.21.0
)

venv="$(abs_dir "${ONNXAMP_VENV:-.venv}")"
base_python="${ONNXAMP_PYTHON_BASE:-python3}"
python="$venv/bin/python"

make_venv setup_python "$venv" "$base_python" ONNXAMP_PYTHON_BASE

mapfile -t missing < <(unsatisfied_pins "$python" "${PINS[@]}")
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup_python: $venv has ${PINS[*]}"
  exit 0
fi

echo "setup_python: installing ${missing[*]} into $venv"
pip_install_pins setup_python "$python" -- "${PINS[@]}" || exit 1

mapfile -t still < <(unsatisfied_pins "$python" "${PINS[@]}")
if [[ ${#still[@]} -ne 0 ]]; then
  echo "error: setup_python: after pip install, $venv still lacks ${still[*]}" >&2
  exit 1
fi
echo "setup_python: done (${PINS[*]})"
