#!/usr/bin/env bash
# Checks that every Debian package a configured build found under /usr is installed by scripts/setup.sh: listed
# in its PACKAGES or a hard dependency (Depends, Pre-Depends) of one. A package that is only here by chance (a
# Recommends, which setup.sh's --no-install-recommends skips, or earlier work) fails the check, naming the path.
#
# Usage: bash scripts/check_packages.sh [BUILD_DIR]
# BUILD_DIR: a configured CMake build folder (default: $ONNXAMP_BUILD_DIR, i.e. build).
#
# The paths come from two places:
# - CMakeCache.txt: every cache value (of any type) that is an absolute path under /usr, or a ;-list of them: what
#   find_library/find_path/find_program/find_package found (libraries, include folders, <Pkg>_DIR config folders,
#   tools such as protoc), and the tools CMake runs (compilers, cmake itself). The binutils that CMake looks up
#   for every toolchain but that the build rules do not run (CMAKE_LINKER, CMAKE_NM, CMAKE_OBJDUMP...: with clang
#   they are llvm's and lld's) are left out; a rule that runs one names it in the build files below;
# - the generated build files (Makefiles: every target's flags.make, link.txt and build.make; Ninja: build.ninja;
#   and compile_commands.json): the include folders, libraries and tools that each target uses, with the imported
#   targets' INTERFACE_* and IMPORTED_LOCATION* properties and generator expressions already evaluated by CMake,
#   which is more robust than parsing the packages' CMake config files; -lNAME is looked up as the linker would,
#   in the -L folders and the compiler's implicit link folders.
# Paths under /usr/local (the CUDA toolkit is not a Debian package here), inside the build or source tree, or that
# do not exist are ignored. Each path is mapped to its package(s) with one dpkg-query -S call (the path as given,
# its realpath, and their /bin, /lib... aliases, under which merged-/usr Debian lists some files). A folder counts
# only when a single package owns it: /usr/include, /usr/lib/<arch> and the like are shared by many and say
# nothing. A path that no package owns fails the check too, unless it is generated (a cache, Python bytecode...).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ONNXAMP_ROOT"

build_dir="$(abs_dir "${1:-$ONNXAMP_BUILD_DIR}")"
cache="$build_dir/CMakeCache.txt"
if [[ ! -f "$cache" ]]; then
  echo "error: check_packages: $cache not found (configure first: bash scripts/build.sh)" >&2
  exit 1
fi
build_dir="$(cd "$build_dir" && pwd -P)"
source_dir="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$cache")"
source_dir="${source_dir:-$ONNXAMP_ROOT}"

tmp="$(mktemp -d)"
trap 'rc=$?; rm -rf "$tmp"; set +e; (exit $rc); _onnxamp_on_exit' EXIT

# --- 1. The paths, each with where CMake has it: "PATH<TAB>cache<TAB>NAME" or "PATH<TAB>file<TAB>RELATIVE_FILE".
awk -F= '
  /^(#|\/\/)/ || !/^[A-Za-z0-9_.+-]+:[A-Z]+=/ { next }
  {
    name = $1; sub(/:.*/, "", name)
    if (name ~ /^CMAKE_(ADDR2LINE|DLLTOOL|LINKER|MT|NM|OBJCOPY|OBJDUMP|READELF|STRIP|TAPI)$/) next
    value = substr($0, index($0, "=") + 1)
    n = split(value, items, ";")
    for (i = 1; i <= n; i++) if (items[i] ~ /^\/usr\//) print items[i] "\tcache\t" name
  }' "$cache" >"$tmp/found"

mapfile -t build_files < <(
  find "$build_dir" \( -path '*/CMakeFiles/CMakeScratch' -o -path '*/CMakeFiles/CMakeTmp' \) -prune -o \
    -type f \( -path '*/CMakeFiles/*.dir/flags.make' -o -path '*/CMakeFiles/*.dir/link.txt' \
    -o -path '*/CMakeFiles/*.dir/build.make' -o -name build.ninja -o -name compile_commands.json \) -print |
    awk '{ print (/\/link\.txt$/ ? 1 : /\/flags\.make$/ ? 2 : 3) "\t" $0 }' | sort | cut -f2-)
if [[ ${#build_files[@]} -gt 0 ]]; then
  # Absolute paths in flags and commands: -I/usr/..., -isystem /usr/..., /usr/lib/.../libx.so, -Wl,-rpath,/usr/...
  grep -oHE '/usr/[^][:space:]"'\''\\;:,=()]+' "${build_files[@]}" | awk -v dir="$build_dir/" '{
      i = index($0, ":"); file = substr($0, 1, i - 1); path = substr($0, i + 1)
      if (index(file, dir) == 1) file = substr(file, length(dir) + 1)
      print path "\tfile\t" file
    }' >>"$tmp/found" || true
  # -lNAME: the library the linker would take, from the -L folders and the compiler's implicit link folders.
  mapfile -t link_dirs < <(
    {
      grep -ohE '(^|[[:space:]])-L[[:space:]]*/[^[:space:]"]+' "${build_files[@]}" |
        sed -E 's/^[[:space:]]*-L[[:space:]]*//' || true
      sed -n 's/^set(CMAKE_[A-Z]*_IMPLICIT_LINK_DIRECTORIES "\(.*\)")$/\1/p' \
        "$build_dir"/CMakeFiles/*/CMake*Compiler.cmake 2>/dev/null | tr ';' '\n'
    } | awk 'NF && !seen[$0]++' | tr '\n' '\0' | xargs -0 -r realpath -m -- | awk '!seen[$0]++')
  grep -oHE '(^|[[:space:]])-l[A-Za-z0-9_+.-]+' "${build_files[@]}" | sed -E 's/:[[:space:]]*-l/:/' |
    awk '!seen[$0]++' >"$tmp/lnames" || true
  while IFS= read -r line; do
    file="${line%%:*}"
    name="${line#*:}"
    for d in "${link_dirs[@]}"; do
      for f in "$d/lib$name.so" "$d/lib$name.a"; do
        if [[ -e "$f" ]]; then
          printf '%s\tfile\t%s\n' "$f" "${file#"$build_dir"/}" >>"$tmp/found"
          continue 3
        fi
      done
    done
  done <"$tmp/lnames"
fi

# Keep the existing paths outside /usr/local and the trees; normalise them (no trailing or doubled slashes).
awk -F'\t' -v build="$build_dir" -v src="$source_dir" '
  function under(p, dir) { return p == dir || index(p, dir "/") == 1 }
  {
    gsub(/\/+/, "/", $1); if ($1 != "/") sub(/\/$/, "", $1)
    if (index($1, "/usr/") != 1 || under($1, "/usr/local") || under($1, build) || under($1, src)) next
    print $1 "\t" $2 "\t" $3
  }' "$tmp/found" >"$tmp/candidates"
paths=()
while IFS= read -r path; do
  if [[ -e "$path" ]]; then
    paths+=("$path")
  fi
done < <(cut -f1 "$tmp/candidates" | awk '!seen[$0]++')
if [[ ${#paths[@]} -eq 0 ]]; then
  echo "check_packages: no path under /usr in $build_dir, nothing to check"
  exit 0
fi
printf '%s\n' "${paths[@]}" >"$tmp/paths"
awk -F'\t' 'FILENAME == ARGV[1] { keep[$1] = 1; next } $1 in keep' "$tmp/paths" "$tmp/candidates" >"$tmp/kept"

# Where each path was found, in words: "OpenCL_LIBRARY in CMakeCache.txt, and in runtime/.../link.txt (and 9
# more build files)".
awk -F'\t' '
  $2 == "cache" && !((($1) SUBSEP $3) in c) {
    c[$1, $3] = 1; names[$1] = names[$1] (names[$1] == "" ? "" : ", ") $3
  }
  $2 == "file" && !((($1) SUBSEP $3) in f) { f[$1, $3] = 1; if (!($1 in first)) first[$1] = $3; nfiles[$1]++ }
  { if (!($1 in order)) { order[$1] = ++n; list[n] = $1 } }
  END {
    for (i = 1; i <= n; i++) {
      p = list[i]; w = ""
      if (p in names) w = names[p] " in CMakeCache.txt"
      if (p in first) {
        w = w (w == "" ? "a path in " : ", and in ") first[p]
        if (nfiles[p] > 1) w = w " (and " (nfiles[p] - 1) " more build files)"
      }
      print p "\t" w
    }
  }' "$tmp/kept" >"$tmp/where"

# --- 2. The owners. Every path is asked as given, as its realpath, and as their /bin, /lib... aliases.
declare -A merged=()
for d in bin sbin lib lib32 lib64 libx32; do
  if [[ -L "/$d" && "$(readlink -f "/$d")" == "/usr/$d" ]]; then
    merged[$d]=1
  fi
done
alias_of() {
  local rest="${1#/usr/}" top
  top="${rest%%/*}"
  if [[ "$1" == /usr/?* && -n "$top" && -n "${merged[$top]:-}" ]]; then
    echo "/$rest"
  fi
}
mapfile -t reals < <(realpath -m -- "${paths[@]}")
: >"$tmp/queries"
for i in "${!paths[@]}"; do
  p="${paths[$i]}"
  r="${reals[$i]}"
  kind="file"
  if [[ -d "$p" ]]; then
    kind="dir"
  fi
  for q in "$p" "$(alias_of "$p")" "$r" "$(alias_of "$r")"; do
    if [[ -n "$q" ]]; then
      printf '%s\t%s\t%s\n' "$p" "$q" "$kind" >>"$tmp/queries"
    fi
  done
done
cut -f2 "$tmp/queries" | sort -u >"$tmp/query_paths"
mapfile -t query_paths <"$tmp/query_paths"
# "pkg1, pkg2:amd64: /path" (diversion lines are left out; unowned paths only print to stderr).
dpkg-query -S -- "${query_paths[@]}" 2>/dev/null | grep -v '^\(local \)\?diversion ' >"$tmp/owners" || true

# PATH<TAB>PACKAGE (one line a package; a path no package owns gets the package "-"); shared folders left out.
awk -F'\t' '
  FILENAME == ARGV[1] {
    i = index($0, ": /"); if (i == 0) next
    q = substr($0, i + 2); n = split(substr($0, 1, i - 1), pkgs, /, */)
    for (j = 1; j <= n; j++) { sub(/:.*/, "", pkgs[j]); own[q] = own[q] " " pkgs[j] }
    next
  }
  {
    p = $1; kind[p] = $3; if (!(p in order)) { order[p] = ++np; list[np] = p }
    n = split(own[$2], pkgs, " ")
    for (j = 1; j <= n; j++) if (!((p, pkgs[j]) in has)) { has[p, pkgs[j]] = 1; cnt[p]++; of[p] = of[p] " " pkgs[j] }
  }
  END {
    for (i = 1; i <= np; i++) {
      p = list[i]
      if (cnt[p] == 0) { print p "\t-"; continue }
      if (kind[p] == "dir" && cnt[p] > 1) { print p "\t="; continue }   # a shared folder
      n = split(of[p], pkgs, " "); for (j = 1; j <= n; j++) print p "\t" pkgs[j]
    }
  }' "$tmp/owners" "$tmp/queries" >"$tmp/path_pkgs"

# --- 3. The allowed packages: setup.sh's PACKAGES and build-essential, the Essential and required packages that
# every Debian system has, and all their hard dependencies (Depends, Pre-Depends), recursively, among the
# installed packages. A dependency "a (>= 1) | b:any" allows every installed alternative; a virtual package,
# every installed package that provides it.
mapfile -t listed < <(bash scripts/setup.sh --print-packages)
printf '%s\n' "${listed[@]}" build-essential >"$tmp/roots"
dpkg-query -W \
  -f='${binary:Package}\t${db:Status-Abbrev}\t${Essential}\t${Priority}\t${Provides}\t${Pre-Depends}, ${Depends}\n' \
  >"$tmp/installed"
awk -F'\t' '
  FILENAME == ARGV[1] { root[$1] = 1; next }
  {
    if ($2 !~ /^.i/) next                                   # installed (or half-configured) packages only
    name = $1; sub(/:.*/, "", name)
    inst[name] = 1
    deps[name] = deps[name] ", " $6
    if ($3 == "yes" || $4 == "required") root[name] = 1
    n = split($5, prov, /, */)
    for (i = 1; i <= n; i++) {
      v = prov[i]; sub(/[ (].*/, "", v); sub(/:.*/, "", v)
      if (v != "") provs[v] = provs[v] " " name
    }
  }
  END {
    nq = 0
    for (r in root) {
      if (r in inst) { ok[r] = 1; q[++nq] = r }
      else print "check_packages: warning: " r " (in PACKAGES) is not installed here: run scripts/setup.sh" \
        > "/dev/stderr"
    }
    for (k = 1; k <= nq; k++) {
      ng = split(deps[q[k]], groups, /, */)
      for (g = 1; g <= ng; g++) {
        na = split(groups[g], alts, /[ ]*\|[ ]*/)
        for (a = 1; a <= na; a++) {
          d = alts[a]; gsub(/^ +| +$/, "", d); sub(/ *\(.*/, "", d); sub(/:.*/, "", d)
          if (d == "") continue
          cand = ((d in inst) ? d : "") " " provs[d]
          nc = split(cand, cs, " ")
          for (c = 1; c <= nc; c++) if (!(cs[c] in ok)) { ok[cs[c]] = 1; q[++nq] = cs[c] }
        }
      }
    }
    for (p in ok) print p
  }' "$tmp/roots" "$tmp/installed" >"$tmp/allowed"

# --- 4. The verdict. Files that no package owns because a maintainer script or a trigger generated them (Python
# bytecode, caches, the info directory, the locale archive, the MIME database) are no finding.
generated='/__pycache__(/|$)|[.]pyc$|[.]cache$|^/usr/share/info/dir$|^/usr/lib/locale/locale-archive$|^/usr/share/mime/'
awk -F'\t' -v generated="$generated" '
  FILENAME == ARGV[1] { ok[$1] = 1; next }
  FILENAME == ARGV[2] { where[$1] = $2; next }
  $2 == "=" { next }
  $2 == "-" && $1 ~ generated { next }
  $2 == "-" {
    printf "error: check_packages: %s (found by CMake as %s) belongs to no Debian package: install it from one " \
      "that scripts/setup.sh installs\n", $1, where[$1] > "/dev/stderr"
    bad++; next
  }
  {
    npaths += !($1 in counted); counted[$1] = 1
    if (!($2 in pkgs)) { pkgs[$2] = 1; npkgs++ }
    if (!($2 in ok) && !($2 in reported)) {
      reported[$2] = 1; bad++
      printf "error: check_packages: %s (provides %s, found by CMake as %s) is not installed by " \
        "scripts/setup.sh: add it to PACKAGES\n", $2, $1, where[$1] > "/dev/stderr"
    }
  }
  END {
    if (bad) exit 1
    printf "check_packages: %d paths from %d packages, all installed by scripts/setup.sh\n", npaths, npkgs
  }' "$tmp/allowed" "$tmp/where" "$tmp/path_pkgs"
