#!/usr/bin/env bash
# Builds onnxamp and runs the main job on the reference models: the import/export round trip (inspect, repack,
# inspect again, check that nothing changed; mlp4096's weights into an external data file and back), then the
# mixed-precision conversion: each model converted to FP16 (validated against FP32 on sample inputs with --auto)
# and to BF16, converted again to show that nothing changes, and run on the CPU runtime in FP32 and FP16; then
# training: models/digits_mlp.onnx fine-tuned with FP16 AMP on the UCI handwritten digits (scripts/get_digits.sh),
# exported as FP16 ONNX, and the export scored on the held-out 20% by `onnxamp run` and, when .venv exists
# (scripts/setup_python.sh), by ONNX Runtime.
#
# Usage: bash scripts/demo.sh
# Environment: ONNXAMP_BUILD_DIR (build), ONNXAMP_JOBS (2), ONNXAMP_CUDA (ON when nvcc exists), ONNXAMP_VENV (.venv).
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

step "check: every package the build found is installed by setup.sh"
bash scripts/check_packages.sh "$build_dir"

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

step "digits_mlp: fine-tune with FP16 AMP on the UCI digits, export FP16, score the export (onnxamp run, ONNX Runtime)"
# At least 95% on the held-out 20% after training, and the exported FP16 model within 0.5 points of that in onnxamp's
# runtime and in ONNX Runtime (the same check as tests/peer/train_digits.py, with the same training flags).
# Percentages: "ok" when a >= b - tolerance and a <= b + tolerance.
within() {
  awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { exit !(a != "" && b != "" && a >= b - t && a <= b + t) }'
}
train_dir="$demo_dir/train"
trained="$demo_dir/digits_mlp.fp16.trained.onnx"
digits_summary=()
if digits="$(bash scripts/get_digits.sh "$build_dir/data")"; then
  mkdir -p "$train_dir/run"
  # AdamW copes with the raw 0..16 features: no normalisation.
  show "$onnxamp" train "$ONNXAMP_ROOT/models/digits_mlp.onnx" --data "$digits" --labels label \
    --input-map input=features --loss ce --amp fp16 --optimizer adamw --lr 1e-3 --epochs 20 --batch-size 64 \
    --val-split 0.2 --seed 0 --export-precision fp16 --log-every 100 --save-split "$train_dir/split" \
    -o "$trained" 2>&1 | tee "$train_dir/train.log"
  train_acc="$(sed -n 's/^done: .*, accuracy \([0-9.]*\)%.*/\1/p' "$train_dir/train.log")"
  val="${train_dir#"$ONNXAMP_ROOT"/}/split/val.npz"
  show "$onnxamp" run "$trained" --input "input=$val" --labels "label=$val" --output-dir "$train_dir/run" 2>&1 |
    tee "$train_dir/run.log"
  run_acc="$(sed -n 's/^  accuracy \([0-9.]*\)%.*/\1/p' "$train_dir/run.log")"
  venv_python="$(abs_dir "${ONNXAMP_VENV:-.venv}")/bin/python"
  ort_acc=""
  ort_note="ONNX Runtime not run: no ${venv_python#"$ONNXAMP_ROOT"/} (bash scripts/setup_python.sh makes it)"
  if [[ -x "$venv_python" ]]; then
    echo "\$ ${venv_python#"$ONNXAMP_ROOT"/} tests/peer/train_digits.py --ort-accuracy ${trained#"$ONNXAMP_ROOT"/}" \
      "${val#"$ONNXAMP_ROOT"/}"
    ort_out="$("$venv_python" tests/peer/train_digits.py --ort-accuracy "$trained" "$val")"
    echo "$ort_out"
    if [[ "$ort_out" =~ ^[0-9.]+$ ]]; then
      ort_acc="$ort_out"
    else
      ort_note="ONNX Runtime not run: $ort_out"
    fi
  fi
  if [[ -n "$ort_acc" ]]; then
    line="digits: validation accuracy ${train_acc}% (onnxamp, FP16 AMP training), ${ort_acc}% (ONNX Runtime on the exported FP16 model)"
  else
    line="digits: validation accuracy ${train_acc}% (onnxamp, FP16 AMP training); $ort_note"
  fi
  digits_summary=("$line" "digits: the exported FP16 model in onnxamp's runtime (onnxamp run): ${run_acc}%")
  printf '%s\n' "${digits_summary[@]}"
  if ! awk -v a="$train_acc" 'BEGIN { exit !(a != "" && a >= 95) }'; then
    echo "error: demo: digits_mlp reached ${train_acc:-no}% validation accuracy, below 95%" >&2
    exit 1
  fi
  if ! within "$run_acc" "$train_acc" 0.5; then
    echo "error: demo: onnxamp run gives ${run_acc:-no}% on the export, not within 0.5 of ${train_acc}%" >&2
    exit 1
  fi
  if [[ -n "$ort_acc" ]] && ! within "$ort_acc" "$train_acc" 0.5; then
    echo "error: demo: ONNX Runtime gives ${ort_acc}% on the export, not within 0.5 of ${train_acc}%" >&2
    exit 1
  fi
else
  digits_summary=("digits: training skipped: the UCI digits could not be obtained (scripts/get_digits.sh, above)")
  echo "${digits_summary[0]}"
fi

step "summary"
echo "models in ${models_dir#"$ONNXAMP_ROOT"/}, exports in ${demo_dir#"$ONNXAMP_ROOT"/}:"
printf '  %-16s %9s  %s\n' "model" "size" "round trip"
printf '  %s\n' "${summary[@]}"
echo "  mlp4096 repacked with --external-data always: $(human_size "$ext_dir/mlp4096.onnx") mlp4096.onnx +" \
  "$(human_size "$ext_dir/mlp4096.onnx.data") mlp4096.onnx.data; back inline: same bytes as the original"
echo "mixed-precision conversions (FP16 within rtol 1e-2 / atol 1e-3 of FP32 on the samples; reports in" \
  "${demo_dir#"$ONNXAMP_ROOT"/}/convert):"
printf '  %s\n' "${convert_summary[@]}"
echo "training (exports and logs in ${demo_dir#"$ONNXAMP_ROOT"/}, ${train_dir#"$ONNXAMP_ROOT"/}):"
printf '  %s\n' "${digits_summary[@]}"
print_step_times
echo "demo: ${#models[@]} models, every round trip exact; ${#convert_summary[@]} models converted and validated"
