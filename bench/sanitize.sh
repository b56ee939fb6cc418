#!/usr/bin/env bash
# compute-sanitizer's four tools over GPU cases that reach every kernel
# family (cluster_row included: "inf*" and "many more rows*" have rows of
# 40000..300000), plus random differential cases. Logs under $OUT.
# PARALLEL=1 runs the four tools at once, each over the randomized
# differential test alone (CASES of them; 2000 by default then).
# synccheck runs with DUET_CLUSTER=portable (clusters of at most 8 blocks):
# it ends every launch of a cluster of 16 with an illegal address, also
# bench/experiments/synccheck_cluster_repro.cu's (bench/NOTES.md, v23).
set -u
B=${B:-.build-gpu}
OUT=${OUT:-/tmp/duet-out}
PARALLEL=${PARALLEL:-0}
CASES=${CASES:-$([ "$PARALLEL" = 1 ] && echo 2000 || echo 60)}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/$B:$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
run_tool() {
  local tool=$1 cases=$2 log=$3
  local clusters=""
  [ "$tool" = synccheck ] && clusters=portable
  DUET_CLUSTER=$clusters DUET_REQUIRE_GPU=1 DUET_DIFFERENTIAL_CASES=$cases timeout ${TOOL_TIMEOUT:-90} compute-sanitizer --tool $tool --error-exitcode 9 \
    "$B/tests/duet_gpu_tests" "$4" > "$log" 2>&1
  echo "$tool rc $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1) $(grep -E 'differential:|test cases' "$log" | tr '\n' ' ')"
}
if [ "$PARALLEL" = 1 ]; then
  for tool in memcheck racecheck initcheck synccheck; do
    run_tool $tool "$CASES" "$OUT/sanitizer_${tool}_differential.log" "--test-case=randomized*" &
  done
  wait
else
  for tool in memcheck racecheck initcheck synccheck; do
    run_tool $tool "$CASES" "$OUT/sanitizer_$tool.log" "--test-case=inf*,many more rows*,strided*,randomized*"
  done
fi
