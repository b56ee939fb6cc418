#!/usr/bin/env bash
# The main job: build, list every device and the plan duet picks, then run
# the benchmark on the first device (a GPU if there is one, else the host).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
./build/tools/deviceinfo --plan 4096x8192:f32
if ./build/tools/deviceinfo --require-gpu >/dev/null 2>&1; then
  ./build/tools/duet-bench --sweep cold --dtype f32 --dtype bf16 --json build/bench.json --csv build/bench.csv
else
  echo "no GPU: timing the host backend on a small sweep"
  ./build/tools/duet-bench --mbytes 32 --cols 256 --cols 4096 --cols 65536 --repeats 5 --json build/bench.json
fi
