#!/usr/bin/env bash
# Creates or updates .venv-ort-training, the ONNX Runtime Training peer of the training benchmark
# (bench/bench_training.py): onnxruntime-training, onnx and numpy at pinned versions; does nothing when every pin is
# already satisfied. Its own venv because onnxruntime-training installs the same `onnxruntime` module as the inference
# package in .venv. The venv sees the system site-packages: onnxruntime.training imports torch, which Debian's
# python3-torch provides.
#
# Usage: bash scripts/setup_ort_training.sh
# Environment: ONNXAMP_ORT_TRAINING_VENV (.venv-ort-training, relative to the repository root unless absolute),
# ONNXAMP_ORT_TRAINING_PYTHON (the interpreter that creates the venv; default /usr/bin/python3, whose torch the
# training package imports; onnxruntime-training 1.19.2 has wheels for CPython 3.8-3.12).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ONNXAMP_ROOT"

# onnxruntime-training 1.19.2 is the last CPU release on PyPI; it is built against numpy 1.x and its artifact
# generator works with onnx 1.16 (later onnx versions change the opset it expects).
PINS=(
  numpy==1.26.4
  onnx==1.16.2
  onnxruntime-training==1.19.2
)

venv="$(abs_dir "${ONNXAMP_ORT_TRAINING_VENV:-.venv-ort-training}")"
base_python="${ONNXAMP_ORT_TRAINING_PYTHON:-/usr/bin/python3}"
python="$venv/bin/python"

# Only what the venv itself installs counts: Debian's numpy and onnx are shadowed by the pinned ones.
make_venv setup_ort_training "$venv" "$base_python" ONNXAMP_ORT_TRAINING_PYTHON --system-site-packages

mapfile -t missing < <(unsatisfied_pins "$python" --in "$venv" "${PINS[@]}")
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup_ort_training: $venv has ${PINS[*]}"
  exit 0
fi

echo "setup_ort_training: installing ${missing[*]} into $venv"
if ! pip_install_pins setup_ort_training "$python" --ignore-installed -- "${PINS[@]}"; then
  echo "error: setup_ort_training: onnxruntime-training 1.19.2 has CPython 3.8-3.12 wheels for x86_64 and aarch64" \
    "Linux only" >&2
  exit 1
fi

mapfile -t still < <(unsatisfied_pins "$python" --in "$venv" "${PINS[@]}")
if [[ ${#still[@]} -ne 0 ]]; then
  echo "error: setup_ort_training: after pip install, $venv still lacks ${still[*]}" >&2
  exit 1
fi
if ! "$python" -c "import onnxruntime.training.artifacts, onnxruntime.training.api" >/dev/null 2>&1; then
  echo "error: setup_ort_training: $venv has ${PINS[*]} but 'import onnxruntime.training.artifacts' fails (it" \
    "needs torch: on Debian apt-get install python3-torch)" >&2
  exit 1
fi
echo "setup_ort_training: done (${PINS[*]})"
