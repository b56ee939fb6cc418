#!/usr/bin/env bash
# compute-sanitizer's four tools over the GPU cases that reach every kernel
# family, and the persistent-grid comparison (DUET_PERSISTENT=1).
set -u
B=${B:-.build-slim}
OUT=${OUT:-/tmp/duet-out}
export LD_LIBRARY_PATH="$PWD/$B:$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
cols="--cols 64 --cols 128 --cols 1024 --cols 4096 --cols 16384 --cols 65536"
echo "== default grid (up to 64 waves)"; "$B/tools/duet-bench" --dtype f32 $cols --no-check 2>&1 | tail -6
echo "== persistent grid (one wave)"; DUET_PERSISTENT=1 "$B/tools/duet-bench" --dtype f32 $cols --no-check 2>&1 | tail -6
for tool in memcheck racecheck initcheck synccheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 "$B/tests/duet_gpu_tests" -tc="strided*,inf*,large*" > "$OUT/sanitizer_$tool.log" 2>&1
  echo "$tool rc $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tail -1) $(grep -E 'test cases' "$OUT/sanitizer_$tool.log")"
done
