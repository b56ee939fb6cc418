#!/usr/bin/env bash
# The Python package on a GPU machine with a recent torch (custom_op,
# torch.compile, torch.export) and a CUDA build of libduet at $B:
#   1. the pytest suite on CUDA tensors (compile fullgraph, export, opcheck,
#      CUDA graph capture of every strategy including wide rows, gradcheck),
#      DUET_REQUIRE_GPU=1 so that no GPU is a failure;
#   2. bench/train_check.py: a small transformer block trained 50 steps under
#      torch.compile(fullgraph=True) with duet and with torch, losses to 1e-3;
#   3. bench/device_time_check.py: device time inside torch.compile and a CUDA
#      graph against eager;
#   4. bench/host_time.py: host time a call against torch.softmax;
#   5. the C++ GPU case of split_stream with a caller's workspace ($B's duet_gpu_tests).
# Each part's log and JSON land in $OUT (default ./python-gpu-check) and are
# kept whatever a later part does; the exit status is 1 if any part failed.
#
#   B=build-cuda OUT=/tmp/out bash bench/python_gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
B=${B:?set B to a CUDA build folder holding libduet.so}
OUT=${OUT:-$PWD/python-gpu-check}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
library=$(realpath "$B/libduet.so")
export DUET_LIBRARY=$library PYTHONPATH=$PWD/python DUET_REQUIRE_GPU=1
failed=()

part() {
  local name=$1
  shift
  echo "== $name: $*"
  local rc=0
  "$@" >"$OUT/$name.log" 2>&1 || rc=$?
  tail -n 15 "$OUT/$name.log"
  if ((rc)); then
    echo "== $name: FAILED (exit $rc)"
    failed+=("$name")
  else
    echo "== $name: ok"
  fi
}

"$PY" -c "import torch, duet; print('torch', torch.__version__, torch.cuda.get_device_name(), \
'| duet', duet.__version__, duet.library_path(), duet.devices())" || failed+=(environment)
part pytest "$PY" -m pytest -q -rs -p no:cacheprovider python/tests
part train_check "$PY" bench/train_check.py --steps 50 --json "$OUT/train_check.json"
part device_time "$PY" bench/device_time_check.py --json "$OUT/device_time.json"
part host_time "$PY" bench/host_time.py --device cuda --json "$OUT/host_time.json"
part gpu_workspace_test "$B/tests/duet_gpu_tests" "--test-case=split_stream with the caller*"

if ((${#failed[@]})); then
  echo "python_gpu_check: FAILED: ${failed[*]} (logs in $OUT)"
  exit 1
fi
echo "python_gpu_check: PASSED (logs in $OUT)"
