#!/usr/bin/env bash
# One device session: correctness suite, occupancy table, benchmarks and the
# torch comparison, results under $OUT. Expects a CUDA build in $B (default
# .build-gpu) and, where the device lacks them, spdlog/fmt shared libraries
# in .deps/lib.
set -u
B=${B:-.build-gpu}
OUT=${OUT:-/tmp/duet-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/$B:$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
export DUET_LIBRARY="$PWD/$B/libduet.so" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  "$B/tools/deviceinfo"
  "$B/tools/deviceinfo" --plan 4096x8192:f32 --plan 16384x65536:f32 --plan 64x1048576:f32 --plan 65536x1024:bf16
} > "$OUT/deviceinfo.txt" 2>&1
echo "== gpu tests"
DUET_REQUIRE_GPU=1 DUET_OCCUPANCY_TABLE="$OUT/occupancy.csv" timeout 240 "$B/tests/duet_gpu_tests" > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc $?"; tail -4 "$OUT/gpu_tests.log"; grep -E "threw|ERROR:" "$OUT/gpu_tests.log" | head
echo "== python tests (torch, autograd, through the C ABI)"
DUET_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -p no:cacheprovider python/tests > "$OUT/pytest.log" 2>&1
echo "pytest rc $?"; grep -E "^(FAILED|ERROR)|Error|assert" "$OUT/pytest.log" | head -20; tail -2 "$OUT/pytest.log"
echo "== bench cold"
timeout 150 "$B/tools/duet-bench" --sweep cold --dtype f32 --dtype bf16 --commit "$COMMIT" --json "$OUT/bench_cold.json" 2>&1 | tail -45
echo "== bench tutorial"
timeout 60 "$B/tools/duet-bench" --sweep tutorial --hot --dtype f32 --commit "$COMMIT" --json "$OUT/bench_tutorial.json" > "$OUT/bench_tutorial.txt" 2>&1; tail -3 "$OUT/bench_tutorial.txt"
echo "== torch comparison"
timeout 200 python3 bench/compare.py --out "$OUT/compare" --dtypes float32,bfloat16 --commit "$COMMIT" ${COMPARE_FLAGS:-} 2>&1 | tail -40
