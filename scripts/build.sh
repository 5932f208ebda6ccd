#!/usr/bin/env bash
# Configures and builds onnxamp (Release, ccache) into build/; CUDA (sm_90) when /usr/local/cuda/bin/nvcc exists.
#
# Usage: bash scripts/build.sh [extra cmake -D options...]
# Environment: ONNXAMP_BUILD_DIR (default build), ONNXAMP_JOBS (default 2), ONNXAMP_CUDA=ON|OFF (default:
# ON when nvcc exists), ONNXAMP_BUILD_TYPE (default Release).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ONNXAMP_ROOT"

build_dir="$(abs_dir "$ONNXAMP_BUILD_DIR")"
cuda="$(cuda_setting)"
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

echo "build: $build_dir (${ONNXAMP_BUILD_TYPE:-Release}, CUDA $cuda, $ONNXAMP_JOBS jobs)"
cmake -S . -B "$build_dir" \
  -DCMAKE_BUILD_TYPE="${ONNXAMP_BUILD_TYPE:-Release}" \
  -DONNXAMP_CUDA="$cuda" \
  -DCMAKE_CUDA_ARCHITECTURES=90 \
  "${launcher[@]}" \
  "$@"
cmake --build "$build_dir" -j "$ONNXAMP_JOBS"
