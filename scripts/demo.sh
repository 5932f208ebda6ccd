#!/usr/bin/env bash
# Builds onnxamp and runs the main job on the reference models: the import/export round trip (inspect, repack,
# inspect again, check that nothing changed; mlp4096's weights into an external data file and back), then the
# mixed-precision conversion: each model converted to FP16 (validated against FP32 on sample inputs with --auto)
# and to BF16, converted again to show that nothing changes, and run on the CPU runtime in FP32 and FP16.
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
show "$gen_models" "$models_dir" --all --samples 4
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

convert_summary=()
for name in mlp digits_mlp cnn transformer resnet50; do
  model="$models_dir/$name.onnx"
  sample="$models_dir/$name.sample.npz"
  out="$demo_dir/convert/$name"
  mkdir -p "$out/fp32" "$out/fp16"
  step "$name: convert to FP16 (--auto: validated on sample inputs) and BF16, run FP32 and FP16"
  show "$onnxamp" convert "$model" -o "$out/$name.fp16.onnx" --keep-io-types --auto --data "$sample" \
    --rtol 1e-2 --atol 1e-3 --report "$out/$name.fp16.report.json"
  # Converting the converted model again must change nothing.
  "$onnxamp" convert "$out/$name.fp16.onnx" -o "$out/$name.fp16.again.onnx" --keep-io-types 2>/dev/null
  if ! cmp "$out/$name.fp16.onnx" "$out/$name.fp16.again.onnx"; then
    echo "error: demo: converting $out/$name.fp16.onnx again changed it" >&2
    exit 1
  fi
  echo "converted again: same bytes (the conversion is idempotent)"
  show "$onnxamp" convert "$model" -o "$out/$name.bf16.onnx" --target bf16 --keep-io-types
  show "$onnxamp" run "$model" --input "$sample" --output-dir "$out/fp32"
  show "$onnxamp" run "$out/$name.fp16.onnx" --input "$sample" --output-dir "$out/fp16"
  convert_summary+=("$(printf '%-16s %9s -> %9s (fp16), %9s (bf16)' "$name" "$(human_size "$model")" \
    "$(human_size "$out/$name.fp16.onnx")" "$(human_size "$out/$name.bf16.onnx")")")
done

step "summary"
echo "models in ${models_dir#"$ONNXAMP_ROOT"/}, exports in ${demo_dir#"$ONNXAMP_ROOT"/}:"
printf '  %-16s %9s  %s\n' "model" "size" "round trip"
printf '  %s\n' "${summary[@]}"
echo "  mlp4096 repacked with --external-data always: $(human_size "$ext_dir/mlp4096.onnx") mlp4096.onnx +" \
  "$(human_size "$ext_dir/mlp4096.onnx.data") mlp4096.onnx.data; back inline: same bytes as the original"
echo "mixed-precision conversions (FP16 within rtol 1e-2 / atol 1e-3 of FP32 on the samples; reports in" \
  "${demo_dir#"$ONNXAMP_ROOT"/}/convert):"
printf '  %s\n' "${convert_summary[@]}"
print_step_times
echo "demo: ${#models[@]} models, every round trip exact; ${#convert_summary[@]} models converted and validated"
