#!/usr/bin/env bash
# Builds bench/experiments/synccheck_cluster_repro.cu and runs it natively and under
# compute-sanitizer's synccheck (and memcheck) for both exchanges, clusters
# of 8 and 16, blocks of 128..512 threads (bench/NOTES.md, v23).
set -u
BIN=${BIN:-/tmp/duet_synccheck_repro}
nvcc -O2 -arch=sm_90 -Ibackends/vendor -o "$BIN" bench/experiments/synccheck_cluster_repro.cu || exit 2
for mode in ${MODES:-0 1 2}; do
  for cluster in 8 16; do
    for threads in ${THREADS:-128 256 512}; do
      native=$(timeout 60 "$BIN" $mode $cluster $threads 2>&1 | tail -1)
      sync=$(timeout 120 compute-sanitizer --tool synccheck --error-exitcode 9 "$BIN" $mode $cluster $threads 2>&1 |
        grep -E "ERROR SUMMARY|rows wrong|failed|no such" | tr '\n' ' ')
      mem=$(timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN" $mode $cluster $threads 2>&1 |
        grep -E "ERROR SUMMARY" | tr '\n' ' ')
      echo "mode $mode cluster $cluster threads $threads | native: $native | synccheck: $sync | memcheck: $mem"
    done
  done
done
