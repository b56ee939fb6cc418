#!/usr/bin/env bash
# Builds everything (all backends the machine has compilers for) and runs the
# test suite: every doctest case is a CTest test labelled cpu or gpu
# (`ctest --test-dir build -L cpu`, `-R <name>`). GPU cases are skipped
# without a GPU (DUET_REQUIRE_GPU=1 makes that a failure); the reason is
# printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
rc=0
ctest --preset default -j "$(nproc)" || rc=$?

# Why tests were skipped (CTest lists them, not their reasons).
log=build/Testing/Temporary/LastTest.log
if [[ -f $log ]]; then
  reasons=$(grep -hE 'skipping' "$log" | sort | uniq -c || true)
  if [[ -n $reasons ]]; then
    echo "Skipped, and why (count, reason):"
    printf '%s\n' "$reasons"
  fi
fi
exit "$rc"
