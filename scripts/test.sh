#!/usr/bin/env bash
# Builds everything (all backends the machine has compilers for) and runs the
# test suite. GPU cases skip without a GPU (DUET_REQUIRE_GPU=1 makes that a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
ctest --preset default
