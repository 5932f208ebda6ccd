#!/usr/bin/env bash
# Gets the UCI handwritten digits (1797 8x8 images: 64 features valued 0..16, then the label 0..9, one row each) as
# DIR/digits.csv.gz and prints that path. The file is the copy Debian's python3-sklearn package ships
# (sklearn/datasets/data/digits.csv.gz): taken from the installed package when there is one, else from the package
# file, which `apt-get download python3-sklearn` fetches into DIR/deb (no root needed, nothing is installed; a
# python3-sklearn_*.deb already there is used as is). Does nothing when DIR/digits.csv.gz is already there.
#
# Usage: bash scripts/get_digits.sh [DIR]   (default: build/data, relative to the repository root)
# Exit status: 0 with the path on stdout; 1 with one line on stderr saying why the data could not be obtained.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

dir="$(abs_dir "${1:-build/data}")"
out="$dir/digits.csv.gz"
member="usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"

fail() {
  echo "error: get_digits: $*" >&2
  exit 1
}

# A complete copy: a valid gzip stream of 1797 rows.
complete() {
  [[ -s "$1" ]] && gzip -t "$1" 2>/dev/null && [[ "$(gzip -dc "$1" | wc -l)" -eq 1797 ]]
}

if complete "$out"; then
  echo "$out"
  exit 0
fi
mkdir -p "$dir" || fail "cannot create $dir"
tmp="$(mktemp -d "$dir/.get_digits.XXXXXX")"
# Removes the scratch folder, then reports as common.sh's EXIT trap does.
cleanup() {
  local rc=$?
  rm -rf "$tmp"
  set +e
  (exit "$rc")
  _onnxamp_on_exit
}
trap cleanup EXIT

if complete "/$member"; then
  cp "/$member" "$tmp/digits.csv.gz"
else
  deb_dir="$dir/deb"
  mkdir -p "$deb_dir"
  deb="$(find "$deb_dir" -maxdepth 1 -name 'python3-sklearn_*.deb' | sort | tail -n 1)"
  if [[ -z "$deb" ]]; then
    command -v apt-get >/dev/null 2>&1 || fail "apt-get is not available, so python3-sklearn cannot be downloaded" \
      "(put a python3-sklearn_*.deb into $deb_dir, or $out itself)"
    echo "get_digits: apt-get download python3-sklearn (into ${deb_dir#"$ONNXAMP_ROOT"/})" >&2
    if ! log="$(cd "$deb_dir" && apt-get download python3-sklearn 2>&1)"; then
      why="$(printf '%s\n' "$log" | grep -E '^(E|W):' | head -n 1)"
      fail "apt-get download python3-sklearn failed (${why:-$(printf '%s\n' "$log" | tail -n 1)}); without" \
        "network access or package lists (apt-get update), put a python3-sklearn_*.deb into $deb_dir or $out itself"
    fi
    deb="$(find "$deb_dir" -maxdepth 1 -name 'python3-sklearn_*.deb' | sort | tail -n 1)"
    [[ -n "$deb" ]] || fail "apt-get download python3-sklearn left no python3-sklearn_*.deb in $deb_dir"
  fi
  command -v dpkg-deb >/dev/null 2>&1 || fail "dpkg-deb is not available to unpack $deb"
  if ! dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" "./$member" 2>"$tmp/tar.err"; then
    fail "$deb holds no ./$member ($(head -n 1 "$tmp/tar.err"))"
  fi
  mv "$tmp/$member" "$tmp/digits.csv.gz"
fi
complete "$tmp/digits.csv.gz" || fail "the digits file taken from python3-sklearn is not 1797 rows of gzip data"
mv -f "$tmp/digits.csv.gz" "$out"
echo "get_digits: $(gzip -dc "$out" | wc -l) rows in ${out#"$ONNXAMP_ROOT"/}" >&2
echo "$out"
