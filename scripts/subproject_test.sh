#!/usr/bin/env bash
# duet as a subproject (examples/subproject: add_subdirectory from a parent
# project): configuring checks that duet's tests, tools and install rules are
# off (PROJECT_IS_TOP_LEVEL) and that the parent's BUILD_SHARED_LIBS is left
# alone. DUET_SUBPROJECT_BUILD=1 also builds and runs the parent's app.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/duet-subproject.XXXXXX")
trap 'rm -rf "$work"' EXIT
cmake -S examples/subproject -B "$work" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DDUET_ENABLE_CUDA=OFF -DDUET_ENABLE_HIP=OFF -DDUET_SOURCE_DIR="$PWD" | grep -E 'duet as a subproject|Error' || true
[[ -f $work/build.ninja ]] || { echo "subproject_test: configuring examples/subproject failed" >&2; exit 1; }
if grep -q 'duet' "$work/duet/cmake_install.cmake" 2>/dev/null && grep -q 'libduet' "$work/duet/cmake_install.cmake"; then
  echo "subproject_test: duet as a subproject installs libduet" >&2
  exit 1
fi
if [[ "${DUET_SUBPROJECT_BUILD:-0}" == 1 ]]; then
  cmake --build "$work"
  "$work/app"
fi
echo "subproject_test: PASSED (duet as a subproject: no tests, tools or install rules)"
