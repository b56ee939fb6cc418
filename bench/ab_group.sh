#!/usr/bin/env bash
# A/B of the vectors a thread has in flight in group_rows and block_row
# (bench/NOTES.md v22): the planner's shapes against the ones it picked
# before (DUET_GROUP=GxVxR, DUET_BLOCK_VPT=n), alternating so drift shows;
# then compare.py against torch.softmax. Expects bench/gpu_run.sh's setup.
set -u
B=${B:-.build-gpu}
OUT=${OUT:-/tmp/duet-out}
ROUNDS=${ROUNDS:-2}
export LD_LIBRARY_PATH="$PWD/$B:$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
export DUET_LIBRARY="$PWD/$B/libduet.so" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
bench() {  # env op dtype cols...
  local env=$1 op=$2 dt=$3; shift 3
  local c=""; for n in "$@"; do c="$c --cols $n"; done
  echo "-- $env $op $dt"
  env $env timeout 60 "$B/tools/duet-bench" --op "$op" --dtype "$dt" $c --no-check --repeats 30 2>&1 | grep -E "^(softmax|log)|rror"
}
for r in $(seq "$ROUNDS"); do
  echo "== round $r"
  bench DUET_GROUP= softmax f32 32 64 128 256 512 1024
  bench DUET_GROUP=8x1x4 softmax f32 32
  bench DUET_GROUP=8x2x2 softmax f32 64
  bench DUET_GROUP=8x4x1 softmax f32 128
  bench DUET_GROUP=16x4x1 softmax f32 256
  bench DUET_GROUP= softmax bf16 32 64 128 256 512 1024
  bench DUET_GROUP=4x1x4 softmax bf16 32
  bench DUET_GROUP=8x1x4 softmax bf16 64
  bench DUET_GROUP=8x2x2 softmax bf16 128
  bench DUET_GROUP=8x4x1 softmax bf16 256
  bench DUET_GROUP=16x4x1 softmax bf16 512
  bench DUET_BLOCK_VPT= softmax f32 2048 4096 8192 16384
  bench DUET_BLOCK_VPT=2 softmax f32 2048 4096 8192
  bench DUET_BLOCK_VPT= softmax bf16 4096 8192 16384 32768
  bench DUET_BLOCK_VPT=2 softmax bf16 4096 8192 16384
  bench DUET_GROUP= softmax_backward f32 64 128 256
  bench DUET_GROUP=8x2x1 softmax_backward f32 64
  bench DUET_GROUP=16x2x1 softmax_backward f32 128
  bench DUET_GROUP=32x2x1 softmax_backward f32 256
done
timeout 200 python3 bench/compare.py --dtypes float32,bfloat16 --cols 32,64,128,256,512,1024,2048,4096,8192 \
  --out "$OUT/ab_compare" 2>&1 | grep -E "M=|MISMATCH|rror"
