#!/usr/bin/env bash
# One device session: correctness suites, occupancy table, benchmarks and the
# torch comparison, results under $OUT. Expects a CUDA build in $B (default
# .build-gpu; relative to the checkout or absolute) and, where the device
# lacks them, spdlog/fmt shared libraries in .deps/lib. STEPS picks a subset
# (a device call is limited to 10 min):
#   info tests tests_split pytest cold ab split stream tutorial compare odd
#   (default: all but odd, in that order)
set -u
B=${B:-.build-gpu}
OUT=${OUT:-/tmp/duet-out}
STEPS=${STEPS:-info tests tests_split pytest cold ab split stream tutorial compare}
mkdir -p "$OUT"
# The build directory as an absolute path (B may be either).
case "$B" in /*) BUILD="$B" ;; *) BUILD="$PWD/$B" ;; esac
export LD_LIBRARY_PATH="$BUILD:$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
export DUET_LIBRARY="$BUILD/libduet.so" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
# split_row is built only with -DDUET_EXPERIMENTS=ON; its runs below are
# skipped otherwise.
EXPERIMENTS=0
grep -q "DUET_HAVE_EXPERIMENTS 1" "$B/include/duet/config.hpp" 2>/dev/null && EXPERIMENTS=1
SPLIT_ROW=""
[ "$EXPERIMENTS" = 1 ] && SPLIT_ROW="DUET_STRATEGY=split_row"
T0=$(date +%s)
for step in $STEPS; do
  echo "== $step ($(( $(date +%s) - T0 )) s)"
  case $step in
    info)
      {
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
        "$B/tools/deviceinfo"
        "$B/tools/deviceinfo" --plan 4096x8192:f32 --plan 2048x32768:f32 --plan 1024x65536:f32 --plan 512x131072:f32 \
          --plan 64x1048576:f32 --plan 65536x1024:bf16 --plan 2048x65536:bf16 --plan 512x262144:bf16
      } > "$OUT/deviceinfo.txt" 2>&1
      grep -E "variant|cluster:" "$OUT/deviceinfo.txt" ;;
    tests)
      # The whole suite; then the kernels clusters replace (ctest runs the
      # one-wave persistent grid too: gpu_persistent_grid).
      DUET_REQUIRE_GPU=1 DUET_OCCUPANCY_TABLE="$OUT/occupancy.csv" timeout 280 "$B/tests/duet_gpu_tests" > "$OUT/gpu_tests.log" 2>&1
      echo "gpu tests rc $?"; grep -E "differential|holding|ERROR|threw|test cases|assertions" "$OUT/gpu_tests.log" | head -20
      DUET_REQUIRE_GPU=1 DUET_CLUSTER=0 timeout 150 "$B/tests/duet_gpu_tests" "--test-case=every strategy boundary*,inf*" > "$OUT/gpu_tests_no_clusters.log" 2>&1
      echo "without clusters rc $?"; grep -E "ERROR|test cases" "$OUT/gpu_tests_no_clusters.log" | head ;;
    tests_split)
      # The wide-row kernels forced wherever group_rows does not fit: split_row
      # (two kernels), and split_stream with the least slack (second passes
      # keep waiting on first passes still running).
      CASES="--test-case=every strategy boundary*,many more rows*,inf*"
      if [ "$EXPERIMENTS" = 1 ]; then
        DUET_REQUIRE_GPU=1 DUET_STRATEGY=split_row timeout 150 "$B/tests/duet_gpu_tests" "$CASES" > "$OUT/gpu_tests_split_row.log" 2>&1
        echo "split_row rc $?"; grep -E "ERROR|test cases" "$OUT/gpu_tests_split_row.log" | head
      fi
      DUET_REQUIRE_GPU=1 DUET_STRATEGY=split_stream DUET_STREAM_SLACK=1 timeout 150 "$B/tests/duet_gpu_tests" "$CASES" \
        > "$OUT/gpu_tests_split_stream_tight.log" 2>&1
      echo "split_stream tight rc $?"; grep -E "ERROR|test cases" "$OUT/gpu_tests_split_stream_tight.log" | head ;;
    pytest)
      DUET_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -p no:cacheprovider python/tests > "$OUT/pytest.log" 2>&1
      echo "pytest rc $?"; grep -E "^(FAILED|ERROR)|Error|assert" "$OUT/pytest.log" | head -20; tail -2 "$OUT/pytest.log" ;;
    cold)
      timeout 170 "$B/tools/duet-bench" --sweep cold --dtype f32 --dtype bf16 --commit "$COMMIT" --json "$OUT/bench_cold.json" 2>&1 | tail -45 ;;
    ab)
      # Rows past one block's registers: clusters (default), none, and
      # clusters also where one block_row fits once an SM.
      C="--cols 24576 --cols 32768 --cols 40000 --cols 65536 --cols 98304 --cols 131072 --cols 262144"
      for env in "DUET_CLUSTER=" "DUET_CLUSTER=0" "DUET_CLUSTER=prefer"; do
        echo "-- $env"; env $env timeout 60 "$B/tools/duet-bench" --dtype f32 --dtype bf16 $C --no-check 2>&1 | grep -E "^softmax|copy"
      done | tee "$OUT/bench_clusters_ab.txt" | cut -c1-110 ;;
    split)
      # split_row forced (DUET_STRATEGY=split_row) where other kernels run.
      [ "$EXPERIMENTS" = 1 ] || { echo "split_row not built (-DDUET_EXPERIMENTS=ON)"; continue; }
      C="--cols 32768 --cols 65536 --cols 131072 --cols 262144"
      DUET_STRATEGY=split_row timeout 60 "$B/tools/duet-bench" --dtype f32 --dtype bf16 $C --no-check 2>&1 |
        grep -E "^softmax|copy" | tee "$OUT/bench_split_forced.txt" | cut -c1-110 ;;
    stream)
      # Wide rows: the planner's choice, split_stream forced (also where
      # cluster_row runs), split_row forced; then split_stream's slack.
      C="--cols 32768 --cols 65536 --cols 131072 --cols 262144 --cols 524288 --cols 1048576"
      for env in "DUET_STRATEGY=" "DUET_STRATEGY=split_stream" $SPLIT_ROW; do
        echo "-- $env"; env $env timeout 90 "$B/tools/duet-bench" --dtype f32 --dtype bf16 $C --no-check 2>&1 | grep -E "^softmax|copy"
      done | tee "$OUT/bench_stream_ab.txt" | cut -c1-110
      for slack in ${SLACKS:-66 132 528}; do
        echo "-- DUET_STREAM_SLACK=$slack"; DUET_STREAM_SLACK=$slack timeout 60 "$B/tools/duet-bench" --dtype f32 --dtype bf16 --cols 262144 --cols 1048576 --no-check 2>&1 |
          grep -E "^softmax|copy"
      done | tee "$OUT/bench_stream_slack.txt" | cut -c1-110
      for env in "DUET_STRATEGY=" $SPLIT_ROW; do
        echo "-- backward $env"; env $env timeout 60 "$B/tools/duet-bench" --op softmax_backward --dtype f32 --dtype bf16 \
          --cols 65536 --cols 1048576 --no-check 2>&1 | grep -E "^softmax|copy"
      done | tee "$OUT/bench_stream_backward.txt" | cut -c1-110 ;;
    tutorial)
      timeout 60 "$B/tools/duet-bench" --sweep tutorial --hot --dtype f32 --commit "$COMMIT" --json "$OUT/bench_tutorial.json" > "$OUT/bench_tutorial.txt" 2>&1
      tail -3 "$OUT/bench_tutorial.txt" ;;
    compare)
      timeout 230 python3 bench/compare.py --out "$OUT/compare" --dtypes float32,bfloat16 --commit "$COMMIT" ${COMPARE_FLAGS:-} 2>&1 | tail -40 ;;
    odd)
      # Rows off the 16-byte pack grid (odd N) beside their aligned
      # neighbours, forward and backward; then against torch.softmax.
      C="--cols 32,33,255,256,1024,1025,4096,4097,12288,12289,32768,32769,65536,65537,131072,131073,262144,262145"
      timeout 200 "$B/tools/duet-bench" --dtype f32,bf16 --op softmax,softmax_backward $C --no-check \
        --commit "$COMMIT" --json "$OUT/bench_odd.json" 2>&1 | grep -E "^(softmax|copy)" | cut -c1-120
      timeout 200 python3 bench/compare.py --out "$OUT/compare_odd" --dtypes float32,bfloat16 --commit "$COMMIT" \
        --cols 1024,1025,4096,4097,12288,12289,32768,32769,65536,65537,262144,262145 2>&1 | tail -30 ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
echo "== done ($(( $(date +%s) - T0 )) s)"
