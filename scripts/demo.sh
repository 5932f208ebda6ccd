#!/usr/bin/env bash
# Builds onnxamp and demonstrates the import/export round trip on the reference models: inspect, repack,
# inspect again, check that nothing changed, then move mlp4096's weights into an external data file and back.
#
# Usage: bash scripts/demo.sh
# Environment: ONNXAMP_BUILD_DIR (build), ONNXAMP_JOBS (2), ONNXAMP_CUDA (ON when nvcc exists).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ONNXAMP_ROOT"

build_dir="$(abs_dir "$ONNXAMP_BUILD_DIR")"
models_dir="$build_dir/models"
demo_dir="$build_dir/demo"

step "setup: Debian packages"
bash scripts/setup.sh

step "build: Release, CUDA $(cuda_setting), in $ONNXAMP_BUILD_DIR"
bash scripts/build.sh

onnxamp="$(find_exe "$build_dir/tools" onnxamp)"
gen_models="$(find_exe "$build_dir/tools" onnxamp_gen_models)"

# A file's size for people: "192MiB", "83KiB".
human_size() {
  numfmt --to=iec-i --suffix=B "$(stat -c %s "$1")"
}

# Prints a command, then runs it.
show() {
  echo "\$ ${*/#$ONNXAMP_ROOT\//}"
  "$@"
}

step "onnxamp version"
show "$onnxamp" version

step "generate the reference models into ${models_dir#"$ONNXAMP_ROOT"/}"
rm -rf "$models_dir" "$demo_dir"
mkdir -p "$models_dir" "$demo_dir"
show "$gen_models" "$models_dir" --all
ls -l "$models_dir"

mapfile -t models < <(find "$models_dir" -maxdepth 1 -name '*.onnx' | sort)
if [[ ${#models[@]} -eq 0 ]]; then
  echo "error: demo: no model was generated in $models_dir" >&2
  exit 1
fi

summary=()
for model in "${models[@]}"; do
  name="$(basename "$model" .onnx)"
  out="$demo_dir/$name.onnx"
  step "$name: inspect, repack, inspect the export, compare"
  show "$onnxamp" inspect "$model"
  show "$onnxamp" repack "$model" -o "$out"
  show "$onnxamp" inspect "$out"

  # The reports of the original and of the export must be the same, key for key (but the file name).
  "$onnxamp" inspect --json "$model" | grep -v '^  "file": ' >"$demo_dir/$name.inspect.json"
  "$onnxamp" inspect --json "$out" | grep -v '^  "file": ' >"$demo_dir/$name.repacked.inspect.json"
  if ! diff -u "$demo_dir/$name.inspect.json" "$demo_dir/$name.repacked.inspect.json"; then
    echo "error: demo: inspect --json differs between $model and $out" >&2
    exit 1
  fi
  # Exporting the export again must give the same bytes (the round trip is a fixed point).
  "$onnxamp" repack "$out" -o "$demo_dir/$name.again.onnx" 2>/dev/null
  if ! cmp "$out" "$demo_dir/$name.again.onnx"; then
    echo "error: demo: repacking $out again changed its bytes" >&2
    exit 1
  fi
  if cmp -s "$model" "$out"; then
    verdict="exact: same bytes as the original"
  else
    verdict="exact: same inspect report, and a second repack gives the same bytes"
  fi
  echo "round trip $verdict"
  summary+=("$(printf '%-16s %9s  %s' "$name" "$(human_size "$model")" "$verdict")")
done

step "mlp4096: weights into an external data file and back"
mlp="$models_dir/mlp4096.onnx"
if [[ ! -f "$mlp" ]]; then
  echo "error: demo: $mlp was not generated" >&2
  exit 1
fi
ext_dir="$demo_dir/external"
mkdir -p "$ext_dir"
show "$onnxamp" repack "$mlp" -o "$ext_dir/mlp4096.onnx" --external-data always
ls -l "$ext_dir"
show "$onnxamp" inspect "$ext_dir/mlp4096.onnx"
# Back inline: the bytes must equal the original's.
show "$onnxamp" repack "$ext_dir/mlp4096.onnx" -o "$demo_dir/mlp4096.inline.onnx" --external-data never
if ! cmp "$mlp" "$demo_dir/mlp4096.inline.onnx"; then
  echo "error: demo: mlp4096 inline -> external -> inline changed its bytes" >&2
  exit 1
fi
echo "mlp4096 inline -> external -> inline: same bytes as the original"

step "summary"
echo "models in ${models_dir#"$ONNXAMP_ROOT"/}, exports in ${demo_dir#"$ONNXAMP_ROOT"/}:"
printf '  %-16s %9s  %s\n' "model" "size" "round trip"
printf '  %s\n' "${summary[@]}"
echo "  mlp4096 repacked with --external-data always: $(human_size "$ext_dir/mlp4096.onnx") mlp4096.onnx +" \
  "$(human_size "$ext_dir/mlp4096.onnx.data") mlp4096.onnx.data; back inline: same bytes as the original"
print_step_times
echo "demo: ${#models[@]} models, every round trip exact"
