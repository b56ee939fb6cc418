#!/usr/bin/env bash
# Installs duet's build dependencies from Debian's packages (Debian 12):
# spdlog/fmt, doctest, CLI11, nlohmann-json, and the HIP compiler and
# runtime (hipcc, libamdhip64-dev) so the HIP backend is built for AMD targets,
# and clang with its libFuzzer/sanitizer runtimes for the fuzz targets.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
need=(cmake ninja-build g++ libspdlog-dev doctest-dev libcli11-dev nlohmann-json3-dev hipcc libamdhip64-dev
      clang libclang-rt-14-dev)
missing=()
for p in "${need[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "dependencies present: ${need[*]}"
