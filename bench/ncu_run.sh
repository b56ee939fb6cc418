#!/usr/bin/env bash
# Nsight Compute on a few representative shapes (clocks left alone): memory
# throughput, occupancy and the warp stall breakdown, one kernel launch each.
set -u
B=${B:-.build-slim}
OUT=${OUT:-/tmp/duet-out}
export LD_LIBRARY_PATH="$PWD/$B:$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
for spec in "f32 128" "bf16 128" "f32 4096" "f32 12288" "f32 65536" "f32 1048576"; do
  set -- $spec
  echo "=== $1 N=$2"
  timeout 90 ncu --clock-control none --launch-skip 3 --launch-count 1 -k regex:'group_rows|block_row|split_row_partial' \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
    "$B/tools/duet-bench" --dtype "$1" --cols "$2" --repeats 1 --batch 1 --warmup 3 --no-check > "$OUT/ncu_$1_$2.txt" 2>&1
  grep -E "DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Duration|Stall|Warp Cycles Per Issued|Block Limit" "$OUT/ncu_$1_$2.txt" | head -24
done
