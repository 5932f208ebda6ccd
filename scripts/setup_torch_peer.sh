#!/usr/bin/env bash
# Creates or updates .venv-torch, the PyPI PyTorch peer of the CPU training benchmarks (bench/bench_training.py
# sides torch-pypi, torch-pypi-bf16, torch-pypi-compile): torch, numpy and onnx at pinned versions; does nothing
# when every pin is already satisfied. Debian's python3-torch (1.13, the `torch` sides) multiplies FP32 matrices
# with a reference BLAS; PyPI's build links MKL and oneDNN, which is what PyTorch users run. The pin is the version
# the GPU runs measure (docs/benchmarks.md). About 4.7 GiB installed: the Linux wheel requires the CUDA runtime
# wheels even where no GPU is present.
#
# Usage: bash scripts/setup_torch_peer.sh
# Environment: ONNXAMP_TORCH_VENV (.venv-torch, relative to the repository root unless absolute),
# ONNXAMP_TORCH_PYTHON (the interpreter that creates the venv; default /usr/bin/python3).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ONNXAMP_ROOT"

PINS=(
  torch==2.11.0
  numpy==2.4.6
  onnx==1.23.2
)

venv="$(abs_dir "${ONNXAMP_TORCH_VENV:-.venv-torch}")"
base_python="${ONNXAMP_TORCH_PYTHON:-/usr/bin/python3}"
python="$venv/bin/python"

make_venv setup_torch_peer "$venv" "$base_python" ONNXAMP_TORCH_PYTHON

mapfile -t missing < <(unsatisfied_pins "$python" "${PINS[@]}")
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup_torch_peer: $venv has ${PINS[*]}"
  exit 0
fi

echo "setup_torch_peer: installing ${missing[*]} into $venv (torch with its CUDA wheels: about 4.7 GiB)"
pip_install_pins setup_torch_peer "$python" -- "${PINS[@]}"

mapfile -t still < <(unsatisfied_pins "$python" "${PINS[@]}")
if [[ ${#still[@]} -ne 0 ]]; then
  echo "error: setup_torch_peer: after pip install, $venv still lacks ${still[*]}" >&2
  exit 1
fi
if ! "$python" -c "import torch, onnx, numpy" >/dev/null 2>&1; then
  echo "error: setup_torch_peer: $venv has ${PINS[*]} but 'import torch, onnx, numpy' fails:" >&2
  "$python" -c "import torch, onnx, numpy" 2>&1 | tail -n 3 >&2
  exit 1
fi
echo "setup_torch_peer: done (${PINS[*]}; $("$python" -c 'import torch; print(torch.__config__.show())' |
  grep -oE 'BLAS_INFO=[a-z]+' | head -n 1))"
