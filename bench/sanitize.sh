#!/usr/bin/env bash
# compute-sanitizer's four tools over GPU cases that reach every kernel
# family (cluster_row included: "inf*" and "many more rows*" have rows of
# 40000..300000), plus random differential cases. Logs under $OUT.
set -u
B=${B:-.build-gpu}
OUT=${OUT:-/tmp/duet-out}
CASES=${CASES:-60}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/$B:$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
for tool in memcheck racecheck initcheck synccheck; do
  DUET_REQUIRE_GPU=1 DUET_DIFFERENTIAL_CASES=$CASES timeout ${TOOL_TIMEOUT:-90} compute-sanitizer --tool $tool --error-exitcode 9 \
    "$B/tests/duet_gpu_tests" "--test-case=inf*,many more rows*,strided*,randomized*" > "$OUT/sanitizer_$tool.log" 2>&1
  echo "$tool rc $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tail -1) $(grep -E 'test cases' "$OUT/sanitizer_$tool.log")"
done
