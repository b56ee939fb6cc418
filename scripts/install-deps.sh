#!/usr/bin/env bash
# Installs duet's build dependencies from Debian's packages (Debian 12).
#
#   install-deps.sh            everything: what scripts/test.sh and CI build
#                              (the base set, the test framework, the HIP
#                              compiler and runtime for the AMD targets, and
#                              clang with its libFuzzer/sanitizer runtimes)
#   install-deps.sh base       libduet and its tools only: the compiler, CMake,
#                              Ninja, spdlog/fmt, nlohmann-json, CLI11, Highway
#   install-deps.sh base hip   the base set and the HIP compiler and runtime
#
# Runs apt-get (as root, or through sudo) only when a package is missing.
set -euo pipefail
base=(cmake ninja-build g++ libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev libhwy-dev)
tests=(doctest-dev pkgconf)  # pkgconf: install_test.sh checks duet.pc
hip=(hipcc libamdhip64-dev)
fuzz=(clang libclang-rt-14-dev)

need=()
if [[ $# -eq 0 ]]; then
  need=("${base[@]}" "${tests[@]}" "${hip[@]}" "${fuzz[@]}")
else
  for set_name in "$@"; do
    case "$set_name" in
      base) need+=("${base[@]}") ;;
      tests) need+=("${tests[@]}") ;;
      hip) need+=("${hip[@]}") ;;
      fuzz) need+=("${fuzz[@]}") ;;
      *) echo "install-deps.sh: unknown set '$set_name' (base, tests, hip, fuzz; none: all)" >&2; exit 2 ;;
    esac
  done
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
# A package counts as present when dpkg has it or, for the build tools, when
# the tool is on PATH (a CMake or Ninja from elsewhere works as well).
present() {
  dpkg -s "$1" >/dev/null 2>&1 && return 0
  case "$1" in
    cmake) command -v cmake >/dev/null ;;
    ninja-build) command -v ninja >/dev/null ;;
    g++) command -v g++ >/dev/null ;;
    *) return 1 ;;
  esac
}
missing=()
for p in "${need[@]}"; do present "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "dependencies present: ${need[*]}"
