#!/usr/bin/env bash
# Builds onnxamp with the CUDA backend (sm_90) and packs what a GPU machine needs into .gpu/, then prints the command
# to run there. The GPU machine has CUDA's libraries, python3 with PyTorch, numpy and onnx, but none of our Debian
# packages (see ../shared/gpu/README.md): the binaries travel with the libraries they need (bundle.sh), plus
# models/, bench/, the conformance lists and, when present here, the ONNX backend test data (24.6 MB).
#
# Usage: bash scripts/gpu_run.sh
# Environment: ONNXAMP_GPU_BUILD_DIR (default build-gpu), ONNXAMP_JOBS (2), ONNXAMP_BUNDLE_SH (default
# ../shared/gpu/bundle.sh beside the repository), ONNXAMP_TESTDATA_DIR (default /usr/share/libonnx-testdata/data).
#
# .gpu/ holds two files: gpu_remote.sh (the script to run there) and payload.tar.xz (bin/, lib/, env.sh from
# bundle.sh; models/, bench/, conformance/, data/, tests/peer/ with the GPU training parity script,
# train_data/digits.csv.gz). The executables each carry the runtime and the CUDA kernels; xz with its 64 MiB window
# stores those shared bytes once (214 MB staged packs to about 24 MB; gzip packed the executables and libraries alone
# to 49 MB), which keeps what travels well under 64 MiB.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ONNXAMP_ROOT"

build_dir="$(abs_dir "${ONNXAMP_GPU_BUILD_DIR:-build-gpu}")"
bundle_sh="${ONNXAMP_BUNDLE_SH:-$ONNXAMP_ROOT/../shared/gpu/bundle.sh}"
testdata="${ONNXAMP_TESTDATA_DIR:-/usr/share/libonnx-testdata/data}"
# What travels to the device machine is the working tree (its tracked files) plus .gpu/, 64 MiB in all.
tree_bytes=$(git ls-files -z | du --files0-from=- -cb 2>/dev/null | tail -n 1 | cut -f1)
max_bytes=$((63 * 1024 * 1024 - ${tree_bytes:-0}))

if [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "error: /usr/local/cuda/bin/nvcc not found: the CUDA build needs it" >&2
  exit 1
fi
[[ -f "$bundle_sh" ]] || { echo "error: $bundle_sh not found (set ONNXAMP_BUNDLE_SH)" >&2; exit 1; }

step "Build with CUDA (sm_90) in $build_dir"
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DONNXAMP_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  "${launcher[@]}" >/dev/null
targets=(onnxamp onnxamp_bench onnxamp_gen_models onnxamp_cuda_test onnxamp_cuda_trainer_test onnxamp_conformance)
cmake --build "$build_dir" -j "$ONNXAMP_JOBS" --target "${targets[@]}"

step "Bundle the binaries and the libraries they need"
stage="$build_dir/gpu-stage"
rm -rf "$stage"  # before looking for the executables: an earlier stage holds copies of them
exes=()
for t in "${targets[@]}"; do exes+=("$(find_exe "$build_dir" "$t")"); done
bash "$bundle_sh" "$stage" "${exes[@]}"
# Symbols only serve debuggers; stripping halves the executables.
strip --strip-unneeded "$stage"/bin/* 2>/dev/null || true
cp -r models bench "$stage/"
rm -rf "$stage/bench/__pycache__"
# The GPU training parity check (gpu_remote.sh's parity step) and, for its digits check, the UCI digits.
mkdir -p "$stage/tests/peer"
cp tests/peer/train_parity_cuda.py tests/peer/train_data.py tests/peer/train_digits.py tests/peer/lion_torch.py tests/peer/nadam_torch.py "$stage/tests/peer/"
if digits="$(bash scripts/get_digits.sh)"; then  # the demo's copy in build/data when it has run
  mkdir -p "$stage/train_data"
  cp "$digits" "$stage/train_data/"
else
  echo "digits data: not available here; the GPU run's parity step will skip its digits check"
fi
mkdir -p "$stage/conformance"
cp tests/conformance/expected_failures.txt tests/conformance/expected_failures_cuda.txt "$stage/conformance/"
if [[ -d "$testdata" ]]; then
  mkdir -p "$stage/data"
  for s in node pytorch-converted pytorch-operator simple; do
    if [[ -d "$testdata/$s" ]]; then cp -r "$testdata/$s" "$stage/data/"; fi
  done
  echo "conformance data: $(du -sh "$stage/data" | cut -f1) from $testdata"
else
  echo "conformance data: $testdata not found; the GPU run will skip conformance"
fi

step "Pack .gpu/"
rm -rf .gpu
mkdir -p .gpu
tar -C "$stage" -cf - . | xz -9 -T1 >.gpu/payload.tar.xz
cp scripts/gpu_remote.sh .gpu/gpu_remote.sh
bytes=$(du -cb .gpu | tail -n 1 | cut -f1)
echo ".gpu/: $(du -sh .gpu | cut -f1) (payload unpacks to $(du -sh "$stage" | cut -f1))"
if ((bytes > max_bytes)); then
  echo "error: .gpu/ is over $((max_bytes >> 20)) MiB (64 MiB less the tracked files); it would not travel" >&2
  exit 1
fi
if ! grep -qx '/.gpu/' .git/info/exclude 2>/dev/null && ! grep -qx '/.gpu/' .gitignore 2>/dev/null; then
  echo "note: add /.gpu/ to .git/info/exclude so that the bundle is never committed"
fi

print_step_times
cat <<'EOF'

On the GPU machine, from the repository root (with .gpu/ carried along), run:

  bash .gpu/gpu_remote.sh

It runs nvidia-smi -L, the gpu-labelled tests, conformance --device cuda and bench/bench_cuda.py, and leaves its logs
in $OUT (or ./gpu-logs). Where one command may take at most 10 minutes, run the steps in two calls:
  bash .gpu/gpu_remote.sh tests conformance
  bash .gpu/gpu_remote.sh bench
Training on the GPU (trainer tests, PyTorch-AMP parity, training benchmark; add --quick through
ONNXAMP_PARITY_ARGS and ONNXAMP_TRAIN_BENCH_ARGS where time is short). The steps stop by ONNXAMP_DEADLINE (570 s) in
all; a step that would not fit is reported as not run:
  bash .gpu/gpu_remote.sh train_tests parity
  ONNXAMP_TRAIN_BENCH_ARGS=--quick bash .gpu/gpu_remote.sh train_bench
EOF
