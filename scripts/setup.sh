#!/usr/bin/env bash
# Installs the Debian 12 packages onnxamp needs to build and test; does nothing when all are present.
#
# Usage: bash scripts/setup.sh [--print-packages]
# --print-packages: print the list, one package a line, and install nothing (scripts/check_packages.sh reads it).
set -euo pipefail

# See DESIGN.md (Dependencies). The CUDA toolkit is optional and not a Debian package here: the build
# uses /usr/local/cuda when it exists.
PACKAGES=(
  build-essential cmake ccache pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libzip-dev zlib1g-dev
  libonnx-testdata
  clang libclang-rt-14-dev clang-format llvm llvm-14 libomp-14-dev
  libdnnl-dev ocl-icd-opencl-dev
  # The training parity test's PyTorch and onnx (tests/peer/train_parity.py runs them with /usr/bin/python3).
  python3-torch python3-onnx
)
if [[ "${1:-}" == --print-packages ]]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=()
if [[ "$(id -u)" -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "error: setup: not root and sudo is not available; install as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
echo "setup: done"
